"""Verification is re-runnable, so a harness-side failure is retried before anything is recorded.

A saved solution can be verified again in a fresh verifier container: the
runner cannot be re-run, but the verifier can. A verification that ended on
the harness's side (the machine starved it, the container outlived its
deadline, the parent wrote no trusted result, the grading broke) is repeated,
with a back-off that lets a crowded machine breathe, up to :data:`TRIES`
times. Only then is it an infrastructure failure; the reasons of the repeated
tries travel with the result into the attempt's record.

What the submission did is never retried: a verdict about the code (a failed
assertion, a finding, a timeout on the solution's own clock) is returned as
the first try gave it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from agent_eval.errors import CleanupError, InfrastructureError
from agent_eval.verification.protocol import Verification

__all__ = ["verify_with_retries"]

TRIES = 3
"""Verifications of one attempt at most (the first and two repeats)."""
BACKOFF_S = (2.0, 8.0)
"""Pause before the second and the third try."""
MAX_REASON_CHARS = 500


def _reason(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def verify_with_retries(
    verify_once: Callable[[], Verification],
    *,
    tries: int = TRIES,
    backoff_s: tuple[float, ...] = BACKOFF_S,
    sleep: Callable[[float], None] = time.sleep,
    stopped: Callable[[], bool] = lambda: False,
) -> Verification:
    """The first verification that is not the harness's failure, with the reasons of those before.

    Raises:
        InfrastructureError: Every try failed on the harness's side (the message
            says how many and why).
        CleanupError: A container's removal was not confirmed (never retried here:
            the batch runs the whole attempt again in fresh containers).
    """
    reasons: list[str] = []
    last: Verification | None = None
    for number in range(1, tries + 1):
        if number > 1:
            sleep(backoff_s[min(number - 2, len(backoff_s) - 1)])
        if stopped():
            # A stopped batch starts nothing more: a try its stop killed is not repeated.
            raise InfrastructureError(
                "the batch stopped: the verification was not run"
                + (" again after: " + " | ".join(reasons) if reasons else "")
            )
        try:
            result = verify_once()
        except CleanupError:
            raise
        except InfrastructureError as exc:
            reasons.append(_reason(str(exc)))
            continue
        if not result.behaviour.infrastructure_failed:
            return replace(result, retried=tuple(reasons))
        error = result.behaviour.error
        reasons.append(_reason(error.message if error is not None else "grading broke"))
        last = result
    if last is not None:
        # The grading itself broke every time: its own result says so, and how often.
        return replace(last, retried=tuple(reasons[:-1]))
    raise InfrastructureError(
        f"the verification failed on the harness's side {tries} times: " + " | ".join(reasons)
    )
