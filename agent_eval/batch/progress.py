"""What a batch tells its watcher as it goes: one event per step, with the state of a run.

The batch only emits :class:`ProgressEvent`; how they are shown (a display
updated in place on a terminal, one line per event in a log, nothing) is
the caller's choice. Events come from the schedule's worker threads too, so
a display must take them from any thread. Before its first run a batch goes
through its preparing phases (:data:`Phase`), each told when it starts and
when it ends with how long it took (:class:`PhaseSteps`); each run's end says
how long the run took and how it ended, in words (:func:`run_outcome`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the CLI imports this module for --help: the models' import waits
    from agent_eval.models import FailureCategory, RunRecord

__all__ = [
    "FAILURE_WORDS",
    "Phase",
    "PhaseSteps",
    "ProgressEvent",
    "RunState",
    "Tally",
    "duration",
    "run_outcome",
]

RunState = Literal[
    "running", "verifying", "repairing", "passed", "failed", "unsafe", "infrastructure"
]
"""Where one run is: its first attempt's runner or verification, its repair (runner or
verification), or the run's end (unsafe: a submission was seen to break a safety
assertion; infrastructure: the harness's side failed, not the agent)."""

Phase = Literal["preflight", "cluster", "packing", "consumer", "verifier", "gateway", "nodes"]
"""What a batch does before its first run: check the config, the engine, the images and
the suite; join a cluster; pack the library; prepare the consumer, the verifier, the model
gateway, the cluster's nodes."""


@dataclass(frozen=True)
class Tally:
    """The batch so far."""

    done: int
    total: int
    first: int
    """Runs whose first attempt succeeded."""
    final: int
    """Runs whose last attempt succeeded."""


@dataclass(frozen=True)
class ProgressEvent:
    """One step: its plain line, and what it changed."""

    message: str
    """The step as one line (what a log shows)."""
    run_id: str | None = None
    """The run it is about, if any."""
    state: RunState | None = None
    """The run's state after it."""
    tally: Tally | None = None
    """The counts after a run finished."""
    scheduled: tuple[str, ...] = ()
    """Every run of the schedule, in order (on the event that starts it)."""
    phase: Phase | None = None
    """The preparing phase it starts or ends, if any."""
    seconds: float | None = None
    """With a phase: how long it took (on its end; None on its start)."""


def duration(seconds: float) -> str:
    """A duration as a person reads it: ``42s``, ``1m05s``, ``2h03m`` (whole seconds)."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


FAILURE_WORDS: dict[FailureCategory, str] = {
    "timeout": "timeout",
    "budget-exhausted": "timeout (the batch's time budget was spent)",
    "behaviour": "assertion failed",
    "safety": "unsafe",
    "no-submission": "no submission",
    "collection": "no submission (its files were refused)",
    "syntax": "analysis findings (syntax)",
    "type-check": "analysis findings (type check)",
    "contract-mismatch": "analysis findings (contract mismatch)",
    "missing-dependency": "analysis findings (missing dependency)",
    "unsupported-api": "analysis findings (unsupported API)",
    "integration": "analysis findings (integration)",
    "infrastructure": "infrastructure",
    "refused": "the runner refused",
    "invalid-response": "invalid response",
    "identity-mismatch": "identity mismatch",
    "runner-error": "runner error",
    "tampering": "tampering",
}
"""Why a run failed, in the words its end is logged with (one for every category)."""


def run_outcome(record: RunRecord) -> tuple[RunState, str]:
    """How a finished run ended: its final state and the words for it.

    Infrastructure comes first (nothing then is the agent's), then an observed safety
    violation on any submitted attempt (it can never be repaired into a pass), then the
    last attempt's verdict.
    """
    if any(a.infrastructureStatus == "failed" for a in record.attempts):
        return "infrastructure", "failed: infrastructure"
    unsafe = [a.attempt for a in record.attempts if a.unsafe]
    if record.finalSuccess:
        words = "passed on first attempt"
        if not record.firstSuccess:
            first = record.attempts[0].failureCategory
            words = "passed on repair" + (
                f" (attempt 1: {FAILURE_WORDS[first]})" if first is not None else ""
            )
        if unsafe:
            return "unsafe", f"{words}, but attempt {unsafe[0]} was unsafe"
        return "passed", words
    last = record.attempts[-1].failureCategory if record.attempts else None
    reason = FAILURE_WORDS[last] if last is not None else "not started"
    if unsafe:
        return "unsafe", "failed: unsafe" if last == "safety" else f"failed: unsafe, {reason}"
    return "failed", f"failed: {reason}"


class PhaseSteps:
    """Tells *progress* when each preparing phase starts and ends, with its duration.

    Starting a phase ends the one before; leaving the ``with`` block ends the last one
    (as stopped, when an exception leaves it).
    """

    def __init__(
        self,
        progress: Callable[[ProgressEvent], None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._progress, self._monotonic = progress, monotonic
        self._open: tuple[Phase, str, float] | None = None

    def start(self, phase: Phase, message: str) -> None:
        """*phase* begins (and the one open before it is done)."""
        self.end()
        self._open = (phase, message, self._monotonic())
        self._progress(ProgressEvent(message, phase=phase))

    def end(self, *, stopped: bool = False) -> None:
        """The open phase, if any, is over: done, or *stopped* by a failure."""
        if self._open is None:
            return
        phase, message, started = self._open
        self._open = None
        seconds = self._monotonic() - started
        how = "stopped after" if stopped else "done in"
        self._progress(
            ProgressEvent(f"{message}: {how} {duration(seconds)}", phase=phase, seconds=seconds)
        )

    def __enter__(self) -> PhaseSteps:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.end(stopped=kind is not None)
