"""Sessions and scenarios: how a grader drives the solution and records what it saw.

A :class:`Session` owns the bookkeeping every grading run shares (declared
assertions recorded exactly once, findings, deadlines, review requests, the
first solution failure). How the solution is reached is a :class:`Transport`:
a fresh child process per scenario in the verifier, or a direct call in the
in-process session used by grader unit tests.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Protocol

from agent_eval.grading.effects import Effect, EffectCall, Handler, Outcome, Refused
from agent_eval.grading.errors import GraderError, SolutionFailed, SolutionRaised, VerifierBroken
from agent_eval.grading.grader import Grader
from agent_eval.grading.results import (
    MAX_FINDINGS,
    AssertionResult,
    Category,
    Finding,
    GradeReport,
    bounded,
)

__all__ = ["Dispatch", "Scenario", "Session", "Transport", "record_safety"]

NOT_GIVEN: Any = object()
"""No observed value was given (``None`` may be one)."""

_FUNCTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MAX_NESTING = 64

Dispatch = Callable[[str, EffectCall], Outcome]
"""Answers one effect call the solution made: (effect name, call) -> outcome."""


class Transport(Protocol):
    """One scenario's connection to the solution (a fresh process, or a module in-process)."""

    def call(
        self,
        function: str,
        args: list[Any],
        kwargs: dict[str, Any],
        dispatch: Dispatch,
        deadline: float | None,
    ) -> Any:
        """Call the exported *function* and return its result.

        Args are JSON or values of the grader's ``value_types`` and may hold
        ``{"$effect": name}`` references, answered through *dispatch* while the
        call runs. The result is JSON or a value of a declared type.
        *deadline* is on the session's clock.

        Raises:
            SolutionRaised: The function raised.
            SolutionFailed: The solution cannot answer (deadline, crash, bad value).
            GraderError: An argument has no form across the boundary.
        """
        ...

    def close(self, dispatch: Dispatch) -> None:
        """End the scenario: stop the solution; effect calls still pending go to *dispatch*."""
        ...


Opener = Callable[[str, float | None], Transport]
"""Starts a scenario's transport: (scenario name, start-up deadline) -> transport.

Raises SolutionFailed when the solution cannot be started (for example, its
module does not import)."""


def _encode_argument(value: Any, effects: Mapping[str, Effect], depth: int = 0) -> Any:
    if depth > _MAX_NESTING:
        raise GraderError("call arguments are nested too deeply")
    if isinstance(value, Effect):
        if effects.get(value.name) is not value:
            raise GraderError(f"effect {value.name!r} belongs to another scenario")
        value.given = True
        return {"$effect": value.name}
    # Plain containers are walked for effects; any other value (a declared
    # type, or one the transport refuses) goes to the transport as it is.
    if isinstance(value, list) or type(value) is tuple:
        return [_encode_argument(item, effects, depth + 1) for item in value]
    if type(value) is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise GraderError(f"call argument has a non-string key {key!r}")
            out[key] = _encode_argument(item, effects, depth + 1)
        return out
    return value


class Scenario:
    """One isolated episode with a fresh solution; use it as ``with session.scenario(...) as sc``.

    The solution process starts at the first call. When the block ends, every
    effect of the scenario is revoked and the solution is stopped. A
    SolutionFailed, or a SolutionRaised the grader did not catch, ends the
    block quietly: it is recorded as the solution's failure, and assertions
    the grader has not recorded by the end count as failed.
    """

    def __init__(self, session: Session, name: str, timeout: float | None) -> None:
        self.session = session
        self.name = name
        self._timeout = timeout
        self._effects: dict[str, Effect] = {}
        self._transport: Transport | None = None
        self._deadline: float | None = None
        self._state = "new"
        self.failure: SolutionFailed | None = None
        """The failure that ended this scenario's solution, if any."""
        self._notes: list[str] = []

    # -- context management -------------------------------------------------

    def __enter__(self) -> Scenario:
        if self._state != "new":
            raise GraderError(f"scenario {self.name!r} cannot be entered twice")
        self.session._enter(self)
        self._state = "open"
        self._deadline = self.session._scenario_deadline(self._timeout)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self._state = "closing"
        for effect in self._effects.values():
            effect.revoke()
        try:
            if self._transport is not None:
                self._transport.close(self._dispatch)
        finally:
            self._state = "closed"
            self.session._leave(self)
        if isinstance(exc, SolutionFailed):
            if self.failure is None:
                self._fail(exc)
            return True
        if isinstance(exc, SolutionRaised):
            self._fail(
                SolutionFailed(
                    "behaviour",
                    f"{exc.function} raised {exc.type}: {exc.message} "
                    "(the scenario expected it to return)",
                )
            )
            return True
        return False

    # -- the grader's interface ----------------------------------------------

    def call(self, function: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call the solution's exported *function* with JSON, declared-type or Effect arguments.

        Returns:
            The return value as the grader sees it: JSON (tuples become lists,
            objects with ``to_dict()`` and undeclared dataclasses become dicts)
            and values of the grader's ``value_types`` rebuilt as those types.

        Raises:
            SolutionRaised: The function raised; inspect ``.type``/``.is_a()``/``.code``.
            SolutionFailed: The solution timed out, crashed, or returned a value
                the boundary refuses (not JSON, not declared, malformed).
            GraderError: An argument cannot cross, or the scenario is closed.
        """
        return self.invoke(function, args, kwargs)

    def invoke(
        self,
        function: str,
        args: Iterable[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """Like :meth:`call`, with explicit argument containers and a shorter call timeout."""
        if self._state != "open":
            raise GraderError(f"scenario {self.name!r} is not open; calls belong inside its block")
        if not isinstance(function, str) or not _FUNCTION.match(function):
            raise GraderError(f"{function!r} is not an exported function name")
        encoded_args = [_encode_argument(a, self._effects) for a in args]
        encoded_kwargs = {
            str(k): _encode_argument(v, self._effects) for k, v in (kwargs or {}).items()
        }
        if self.failure is not None:
            raise self.failure
        try:
            if self._transport is None:
                startup = self._call_deadline(None)
                self._check_time_left(startup, "starting the solution")
                self._transport = self.session._opener(self.name, startup)
            deadline = self._call_deadline(timeout)
            self._check_time_left(deadline, f"calling {function}")
            return self._transport.call(
                function, encoded_args, encoded_kwargs, self._dispatch, deadline
            )
        except SolutionFailed as failure:
            self._fail(failure)
            raise

    def effect(
        self,
        name: str,
        *,
        returns: Any = None,
        script: Iterable[Any] = (),
        handler: Handler | None = None,
    ) -> Effect:
        """A new effect adapter owned by this scenario; pass it as a call argument.

        See :class:`graders.effects.Effect` for how calls are answered.
        """
        if self._state != "open":
            raise GraderError(f"scenario {self.name!r} is not open")
        if name in self._effects:
            raise GraderError(f"scenario {self.name!r} already has an effect {name!r}")
        effect = Effect(name, returns=returns, script=script, handler=handler)
        self._effects[name] = effect
        return effect

    def record(
        self,
        assertion_id: str,
        passed: bool,
        *,
        detail: str = "",
        message: str = "",
        observed_value: object = NOT_GIVEN,
    ) -> None:
        """Record a declared assertion (see :meth:`Session.record`).

        A failure the grader gives no *message* for is explained by where it
        was seen: this scenario's name and what it noted so far (its findings,
        already shown to the agent, so never an expected value), or how the
        solution failed in it.
        """
        if not passed and not message:
            said = [*self._notes, *([str(self.failure)] if self.failure is not None else [])]
            message = f"in scenario {self.name!r}" + (f": {'; '.join(said)}" if said else "")
        self.session.record(
            assertion_id, passed, detail=detail, message=message, observed_value=observed_value
        )

    def note(self, message: str, *, category: Category = "behaviour") -> None:
        """Add a finding tagged with this scenario's name (shown to the agent)."""
        self._notes.append(message)
        self.session.note(f"scenario {self.name!r}: {message}", category=category)

    def request_review(self, reason: str) -> None:
        """Ask a human reviewer to look at this attempt (see :meth:`Session.request_review`)."""
        self.session.request_review(f"scenario {self.name!r}: {reason}")

    @property
    def failed(self) -> bool:
        """Whether the solution failed in this scenario."""
        return self.failure is not None

    # -- internals -------------------------------------------------------------

    def _call_deadline(self, timeout: float | None) -> float | None:
        return self.session._call_deadline(self._deadline, timeout)

    def _check_time_left(self, deadline: float | None, what: str) -> None:
        if deadline is not None and deadline <= self.session._clock():
            raise SolutionFailed(
                "timeout", f"{what}: the scenario's time limit was used up by earlier calls"
            )

    def _fail(self, failure: SolutionFailed) -> None:
        self.failure = failure
        self.session._solution_failed(self.name, failure)

    def _dispatch(self, name: str, call: EffectCall) -> Outcome:
        effect = self._effects.get(name)
        if effect is None or not effect.given:
            self.session._unsafe_effect_call(
                f"scenario {self.name!r}: the solution called an effect {bounded(name, 80)!r} "
                "it was not given (refused)"
            )
            return Refused(f"no effect {name!r} was given")
        outcome = effect.invoke(call)
        if isinstance(outcome, Refused):
            when = "after its scenario closed" if self._state != "open" else "after it was revoked"
            self.session._unsafe_effect_call(
                f"scenario {self.name!r}: the solution called effect {name!r} {when} (refused)"
            )
        return outcome


class Session:
    """The grading run of one grader against one solution.

    Args:
        grader: The task's grader; its declaration is checked first.
        opener: Starts a scenario's transport (a fresh solution each time).
        call_timeout: Seconds one call may take (None: no limit).
        scenario_timeout: Seconds one scenario may take (None: no limit).
        total_timeout: Seconds all scenarios together may take (None: no limit).
        clock: Monotonic clock, injectable for tests.
    """

    def __init__(
        self,
        grader: Grader,
        opener: Opener,
        *,
        call_timeout: float | None = None,
        scenario_timeout: float | None = None,
        total_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        grader.check_declaration()
        self.grader = grader
        self._opener = opener
        self._call_timeout = call_timeout
        self._scenario_timeout = scenario_timeout
        self._clock = clock
        self._total_deadline = None if total_timeout is None else clock() + total_timeout
        self._declared = tuple(grader.assertion_ids)
        self._safety = frozenset(grader.safety_assertion_ids)
        self._recorded: dict[str, AssertionResult] = {}
        self._findings: list[Finding] = []
        self._needs_review = False
        self._first_failure: Finding | None = None
        self._active: Scenario | None = None

    # -- the grader's interface ----------------------------------------------

    def scenario(self, name: str, *, timeout: float | None = None) -> Scenario:
        """A new scenario (fresh solution, its own effects); use it in a ``with`` block.

        *timeout* shortens the scenario's time limit; it can never extend the
        verifier's own limit.
        """
        if not isinstance(name, str) or not name.strip():
            raise GraderError("a scenario needs a non-empty name")
        return Scenario(self, bounded(name, 200), timeout)

    def record(
        self,
        assertion_id: str,
        passed: bool,
        *,
        detail: str = "",
        message: str = "",
        observed_value: object = NOT_GIVEN,
    ) -> None:
        """Record whether a declared assertion held; each id exactly once.

        For a failure, *message* (why, in words) and *observed_value* (what the
        solution did or returned, shown by its ``repr``) reach the result file
        for reviewers; *detail* stays with the grader, so an expected value
        belongs there, never in the other two.

        Raises:
            GraderError: The id is not declared, is already recorded, or
                *passed* is not a bool.
        """
        if assertion_id not in self._declared:
            raise GraderError(
                f"assertion {assertion_id!r} is not declared in "
                f"{type(self.grader).__name__}.assertion_ids"
            )
        if assertion_id in self._recorded:
            raise GraderError(f"assertion {assertion_id!r} is recorded twice")
        if not isinstance(passed, bool):
            raise GraderError(
                f"assertion {assertion_id!r}: passed must be a bool, not {type(passed).__name__}"
            )
        self._recorded[assertion_id] = AssertionResult(
            id=assertion_id,
            passed=passed,
            safety=assertion_id in self._safety,
            detail=bounded(detail),
            message=bounded(message),
            observed_value="" if observed_value is NOT_GIVEN else bounded(repr(observed_value)),
        )

    def note(self, message: str, *, category: Category = "behaviour") -> None:
        """Add a bounded finding; identical findings are kept once.

        Findings reach the agent as repair feedback: never put expected values in them.
        """
        finding = Finding(category=category, message=bounded(message))
        if finding not in self._findings:
            self._findings.append(finding)

    def request_review(self, reason: str) -> None:
        """Mark the attempt for human review (it then needs an accept decision to count)."""
        self._needs_review = True
        self.note(f"needs review: {reason}")

    def is_recorded(self, assertion_id: str) -> bool:
        """Whether *assertion_id* has been recorded already."""
        return assertion_id in self._recorded

    def grade(self) -> GradeReport:
        """Run the grader and finish; a grader exception becomes an infrastructure error."""
        try:
            self.grader.run(self)
        except Exception as exc:
            return self.finish(exc)
        return self.finish(None)

    def finish(self, grader_error: BaseException | None = None) -> GradeReport:
        """Close the books: every declared assertion exactly once, and the error if any.

        Declared assertions never recorded count as failed. That is the
        solution's doing when it failed somewhere; otherwise it is the
        grader's mistake and reported as an infrastructure error.
        """
        error: Finding | None = None
        if grader_error is not None:
            error = Finding("infrastructure", bounded(_describe_grader_error(grader_error)))
        missing = [a for a in self._declared if a not in self._recorded]
        if missing and error is None and self._first_failure is None:
            error = Finding(
                "infrastructure",
                bounded(f"the grader never recorded declared assertions {missing}"),
            )
        if error is None:
            error = self._first_failure
        results = tuple(
            self._recorded.get(a)
            or AssertionResult(
                id=a, passed=False, safety=a in self._safety, detail="not recorded", observed=False
            )
            for a in self._declared
        )
        findings = list(self._findings)
        if error is not None and error.category == "infrastructure":
            findings.append(error)
        if len(findings) > MAX_FINDINGS:
            omitted = len(findings) - (MAX_FINDINGS - 1)
            findings = [
                *findings[: MAX_FINDINGS - 1],
                Finding("behaviour", f"{omitted} more findings omitted"),
            ]
        return GradeReport(
            task_id=self.grader.task_id,
            assertions=results,
            needs_review=self._needs_review,
            diagnostics=tuple(findings),
            error=error,
        )

    # -- used by scenarios -------------------------------------------------------

    def _enter(self, scenario: Scenario) -> None:
        if self._active is not None:
            raise GraderError(
                f"scenario {scenario.name!r} opened inside scenario {self._active.name!r}"
            )
        self._active = scenario

    def _leave(self, scenario: Scenario) -> None:
        if self._active is scenario:
            self._active = None

    def _scenario_deadline(self, timeout: float | None) -> float | None:
        limits = [t for t in (timeout, self._scenario_timeout) if t is not None]
        deadline = self._clock() + min(limits) if limits else None
        if self._total_deadline is not None:
            deadline = (
                self._total_deadline if deadline is None else min(deadline, self._total_deadline)
            )
        return deadline

    def _call_deadline(
        self, scenario_deadline: float | None, timeout: float | None
    ) -> float | None:
        limits = [t for t in (timeout, self._call_timeout) if t is not None]
        deadline = self._clock() + min(limits) if limits else None
        if scenario_deadline is not None:
            deadline = scenario_deadline if deadline is None else min(deadline, scenario_deadline)
        return deadline

    def _solution_failed(self, scenario: str, failure: SolutionFailed) -> None:
        message = failure.message if failure.whole_solution else f"scenario {scenario!r}: {failure}"
        finding = Finding(failure.category, bounded(message))
        if finding not in self._findings:
            self._findings.append(finding)
        if self._first_failure is None:
            self._first_failure = finding

    def _unsafe_effect_call(self, message: str) -> None:
        self._needs_review = True
        self.note(message, category="safety")


def _describe_grader_error(exc: BaseException) -> str:
    if isinstance(exc, GraderError):
        return f"grader error: {exc}"
    if isinstance(exc, VerifierBroken):
        return f"verifier failure: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"the grader raised {type(exc).__name__}{where}: {exc}"


def record_safety(assertion_id: str, violated: bool, *scenarios: Scenario) -> None:
    """Record a safety rule once its scenarios are over, from what the grader saw.

    Failed as soon as a violation was seen, even if the solution died later;
    passed only when every scenario ran to its end; otherwise (the solution
    died before the rule was fully exercised) left unrecorded, so it counts as
    failed but not observed.
    """
    if violated:
        scenarios[0].record(assertion_id, False)
    elif not any(sc.failed for sc in scenarios):
        scenarios[0].record(assertion_id, True)
