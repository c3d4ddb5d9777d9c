"""Grade a solution module in this process: for unit tests of graders, never evidence.

The same Session, Scenario and Effect bookkeeping as the verifier, with the
solution's functions called directly. Arguments and results cross the same
encoding as between the parent and the child process (the grader's declared
types found on the solution's side by name, as in the child), and exceptions
become the same SolutionRaised observations. Nothing is isolated and no deadline can stop a
hanging call, so this is only for trusted reference solutions and fixtures.

Host-only: it reuses the child's conversion rules from ``agent_eval``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from agent_eval.grading.effects import EffectCall, Raise, Refused, Return
from agent_eval.grading.errors import GraderError, SolutionFailed, SolutionRaised
from agent_eval.grading.grader import Grader
from agent_eval.grading.results import GradeReport
from agent_eval.grading.session import Dispatch, Session
from agent_eval.verification.runtime.codec import (
    EffectRevokedError,
    NonJsonValue,
    describe_exception,
    make_exception,
    replace_effect_refs,
)
from agent_eval.verification.runtime.parent import encode_given
from agent_eval.verification.runtime.values import (
    DeclarationError,
    ValueRefused,
    ValueTypes,
    decode,
    encode,
    resolver,
)

__all__ = ["grade_in_process", "load_module_from"]

SolutionSource = ModuleType | Callable[[], ModuleType]


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value, allow_nan=False))


class InProcessTransport:
    """Calls functions of a module object directly (see the module docstring)."""

    def __init__(self, module: ModuleType, types: ValueTypes) -> None:
        self.module = module
        self.types = types
        """The grader's declared types (the trusted side's table)."""
        self.solution_types = ValueTypes.from_wire(types.wire(), resolver(module))
        """The same declaration as the solution's process resolves it."""

    def call(
        self,
        function: str,
        args: list[Any],
        kwargs: dict[str, Any],
        dispatch: Dispatch,
        deadline: float | None,
    ) -> Any:
        """Call ``module.<function>``; deadlines cannot be enforced in-process."""
        target = getattr(self.module, function, None)
        if function.startswith("_") or not callable(target):
            raise SolutionFailed("behaviour", f"the solution has no exported function {function!r}")

        def make(name: str) -> Callable[..., Any]:
            def proxy(*a: Any, **kw: Any) -> Any:
                try:
                    wire = _copy(encode([list(a), kw], self.solution_types))
                except NonJsonValue as exc:
                    raise TypeError(f"effect {name!r} arguments must be JSON: {exc}") from None
                try:
                    call_args, call_kwargs = decode(wire, self.types)
                except ValueRefused as exc:
                    raise SolutionFailed("behaviour", f"effect {name!r}: {exc}") from None
                outcome = dispatch(name, EffectCall(tuple(call_args), call_kwargs))
                if isinstance(outcome, Return):
                    answer = _copy(self._encode(outcome.value, f"the answer of effect {name!r}"))
                    return decode(answer, self.solution_types)
                if isinstance(outcome, Raise):
                    raise make_exception(outcome.type_ref, list(outcome.args), outcome.message)
                assert isinstance(outcome, Refused)
                raise EffectRevokedError(outcome.message)

            proxy.__name__ = name
            return proxy

        what = f"calling {function}: an argument"
        wire = [_copy(self._encode(args, what)), _copy(self._encode(kwargs, what))]
        try:
            decoded_args, decoded_kwargs = decode(wire, self.solution_types)
        except ValueRefused as exc:
            raise SolutionFailed("behaviour", f"the arguments of {function}: {exc}") from None
        call_args = replace_effect_refs(decoded_args, make)
        call_kwargs = replace_effect_refs(decoded_kwargs, make)
        try:
            result = target(*call_args, **call_kwargs)
        except (Exception, SystemExit) as exc:
            raise SolutionRaised(function, **describe_exception(exc)) from None
        try:
            returned = _copy(encode(result, self.solution_types))
        except (NonJsonValue, RecursionError) as exc:
            raise SolutionFailed("behaviour", f"{function} returned {exc}") from None
        try:
            return decode(returned, self.types)
        except ValueRefused as exc:
            raise SolutionFailed(
                "behaviour",
                f"calling {function}: the solution returned a value that is refused: {exc}",
            ) from None

    def _encode(self, value: Any, what: str) -> Any:
        return encode_given(value, self.types, what)

    def close(self, dispatch: Dispatch) -> None:
        """Nothing to stop in-process."""


def load_module_from(path: Path, name: str = "solution") -> Callable[[], ModuleType]:
    """A factory that executes the module file *path* afresh on every call.

    Each scenario then sees fresh module state, as the verifier's fresh child
    process would. The module's directory is importable while it loads.
    """

    def load() -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(path.parent))
        return module

    return load


def grade_in_process(
    grader: Grader,
    solution: SolutionSource,
    *,
    reraise: bool = False,
) -> GradeReport:
    """Run *grader* against *solution* (a module, or a factory called once per scenario).

    With *reraise*, a grader exception propagates (handy while writing a
    grader); otherwise it becomes the report's infrastructure error, as in
    the verifier.
    """

    try:
        types = ValueTypes.declared(grader.value_types)
    except DeclarationError as exc:
        raise GraderError(str(exc)) from None

    def opener(scenario: str, deadline: float | None) -> InProcessTransport:
        if isinstance(solution, ModuleType):
            return InProcessTransport(solution, types)
        try:
            return InProcessTransport(solution(), types)
        except SyntaxError as exc:
            raise SolutionFailed(
                "syntax", f"the solution does not import: {exc}", whole_solution=True
            ) from None
        except ModuleNotFoundError as exc:
            raise SolutionFailed(
                "missing-dependency", f"the solution does not import: {exc}", whole_solution=True
            ) from None
        except Exception as exc:
            raise SolutionFailed(
                "behaviour",
                f"the solution does not import: {type(exc).__name__}: {exc}",
                whole_solution=True,
            ) from None

    session = Session(grader, opener)
    if reraise:
        grader.run(session)
        return session.finish(None)
    return session.grade()
