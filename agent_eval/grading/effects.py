"""Effect adapters: the side effects a solution may call, owned and counted by the grader.

An effect is passed to the solution as an argument. Each call is recorded
with its (JSON) arguments and answered by the grader: a scripted return value,
a scripted exception, or a handler's decision. When its scenario closes (or
the grader calls :meth:`Effect.revoke`), the effect is revoked: later calls
are refused inside the solution and reported as a safety finding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_eval.grading.errors import GraderError

__all__ = ["Effect", "EffectCall", "Outcome", "Raise", "Refused", "Return"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_TYPE_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def _check_json(value: Any, what: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise GraderError(f"{what} must be JSON-compatible: {exc}") from None


def _as_sent(value: Any) -> Any:
    """*value* as it arrives across the boundary: plain tuples become lists."""
    if isinstance(value, list) or type(value) is tuple:
        return [_as_sent(item) for item in value]
    if type(value) is dict:
        return {key: _as_sent(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class Return:
    """An effect call answered with *value* (JSON, or a value of a declared type)."""

    value: Any = None


class Raise:
    """An effect call answered by raising ``type_ref`` inside the solution.

    ``type_ref`` is ``module:QualName`` of an exception class importable in the
    solution's process, for example ``Raise("appkit:TransientError", "try again")``
    or ``Raise("builtins:TimeoutError", "slow")``; *args* (JSON) go to its
    constructor.
    """

    def __init__(self, type_ref: str, *args: Any) -> None:
        if not _TYPE_REF.match(type_ref):
            raise GraderError(f"Raise type {type_ref!r} must look like 'module:ClassName'")
        _check_json(list(args), f"Raise({type_ref!r}) arguments")
        self.type_ref = type_ref
        self.args: tuple[Any, ...] = args

    @property
    def message(self) -> str:
        """The text a stand-in exception carries if the type cannot be built."""
        return str(self.args[0]) if self.args else self.type_ref

    def __repr__(self) -> str:
        return f"Raise({self.type_ref!r}, *{self.args!r})"


@dataclass(frozen=True)
class Refused:
    """An effect call the grader refused (revoked or never given); raised in the solution."""

    message: str


Outcome = Return | Raise | Refused


@dataclass(frozen=True)
class EffectCall:
    """The arguments of one call as the solution passed them (JSON, or of declared types)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[EffectCall], Any]


class Effect:
    """A counted, scripted stand-in for a side effect; create it with ``Scenario.effect``.

    Answers, in order of precedence: *handler* (called with the EffectCall; it
    returns a Return, a Raise, or a plain value), then the next item of
    *script* (Return/Raise items, or plain values), then ``Return(returns)``.
    A plain value is JSON or of a type in the grader's ``value_types``.
    """

    def __init__(
        self,
        name: str,
        *,
        returns: Any = None,
        script: Iterable[Any] = (),
        handler: Handler | None = None,
    ) -> None:
        if not _NAME.match(name):
            raise GraderError(f"effect name {name!r} must be a Python identifier")
        self.name = name
        self._returns = returns
        self._script = [self._as_outcome(item) for item in script]
        self._handler = handler
        self.calls: list[EffectCall] = []
        """Calls that were answered, in order."""
        self.refused: list[EffectCall] = []
        """Calls refused because the effect was revoked."""
        self.given = False
        """Whether the effect was passed to the solution at least once."""
        self._revoked = False

    def _as_outcome(self, item: Any) -> Return | Raise:
        # A value answered is checked when it is sent, against the grader's value_types.
        if isinstance(item, Return | Raise):
            return item
        return Return(item)

    @property
    def count(self) -> int:
        """How many calls were answered."""
        return len(self.calls)

    @property
    def revoked(self) -> bool:
        """Whether calls are refused from now on."""
        return self._revoked

    def revoke(self) -> None:
        """Refuse every later call (the scenario does this when it closes)."""
        self._revoked = True

    def called_with(self, *args: Any, **kwargs: Any) -> bool:
        """Whether some answered call had exactly these arguments (tuples equal to lists)."""
        wanted = EffectCall(tuple(_as_sent(list(args))), _as_sent(kwargs))
        return any(call == wanted for call in self.calls)

    def invoke(self, call: EffectCall) -> Outcome:
        """Answer one call from the solution (used by sessions, not by graders)."""
        if self._revoked:
            self.refused.append(call)
            return Refused(f"effect {self.name!r} was revoked")
        self.calls.append(call)
        if self._handler is not None:
            answer = self._handler(call)
            return answer if isinstance(answer, Return | Raise) else Return(answer)
        if self._script:
            return self._script.pop(0)
        return Return(self._returns)

    def __repr__(self) -> str:
        state = "revoked" if self._revoked else "live"
        return f"<Effect {self.name} {state} calls={self.count}>"
