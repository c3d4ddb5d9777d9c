"""Grader of error-recovery: transient failures retried with backoff, permanent ones never.

``fetch`` and ``sleep`` are effects owned by the grader: ``fetch`` follows a
script of results and appkit exceptions (raised inside the solution's own
process), ``sleep`` only records the delays asked for. Each scripted case is
its own scenario, so counts never mix. The safety assertion only counts
``fetch`` and ``sleep`` calls, so it is judged even when the solution raises.
"""

from __future__ import annotations

from typing import Any

from graders import Effect, Grader, Raise, Scenario, Session, SolutionRaised

REPORT: dict[str, Any] = {"id": "r-42", "rows": [[1, "a"], [2, "b"]], "complete": True}
BUSY = Raise("appkit:TransientError", "service busy")


def fetch_report(
    sc: Scenario, script: list[Any]
) -> tuple[Any, SolutionRaised | None, Effect, Effect]:
    """Run fetch_report against a scripted fetch: (result, what it raised, fetch, sleep)."""
    fetch = sc.effect("fetch", script=script, returns=REPORT)
    sleep = sc.effect("sleep")
    try:
        return sc.call("fetch_report", "r-42", fetch, sleep), None, fetch, sleep
    except SolutionRaised as raised:
        return None, raised, fetch, sleep


def delays(sleep: Effect) -> list[Any]:
    """The seconds passed to each sleep call."""
    return [call.args[0] if len(call.args) == 1 else None for call in sleep.calls]


class ErrorRecoveryGrader(Grader):
    """Scripts successes, transient and permanent failures, and a bug in fetch."""

    task_id = "error-recovery"
    assertion_ids = (
        "first-success-returned",
        "transient-retried",
        "backoff-delays",
        "gives-up-after-limit",
        "permanent-not-retried",
        "permanent-error-reported",
        "unexpected-error-propagates",
    )
    safety_assertion_ids = ("permanent-not-retried",)

    def run(self, session: Session) -> None:
        """Run every scenario; the permanent-failure verdicts are judged in the last one."""
        with session.scenario("first attempt succeeds") as sc:
            out, _, fetch, sleep = fetch_report(sc, [REPORT])
            sc.record(
                "first-success-returned",
                out == {"status": "ok", "report": REPORT}
                and fetch.count == 1
                and fetch.called_with("r-42")
                and sleep.count == 0,
            )

        with session.scenario("two transient failures, then success") as sc:
            out, _, fetch, sleep = fetch_report(sc, [BUSY, BUSY, REPORT])
            sc.record(
                "transient-retried",
                out == {"status": "ok", "report": REPORT} and fetch.count == 3,
            )
            sc.record("backoff-delays", delays(sleep) == [0.5, 1.0])

        with session.scenario("transient failures until the limit") as sc:
            out, _, fetch, sleep = fetch_report(sc, [BUSY] * 10)
            sc.record(
                "gives-up-after-limit",
                out == {"status": "failed", "error": "transient"} and fetch.count == 4,
            )

        with session.scenario("a bug in fetch") as sc:
            _, raised, fetch, sleep = fetch_report(sc, [Raise("builtins:KeyError", "rows")])
            sc.record(
                "unexpected-error-propagates",
                raised is not None
                and raised.is_a("builtins.KeyError")
                and fetch.count == 1
                and sleep.count == 0,
            )

        not_retried: list[bool] = []
        reported: list[bool] = []
        cases = (
            ("permanent failure", Raise("appkit:PermanentError", "bad credentials"), "permanent"),
            ("report not found", Raise("appkit:NotFoundError", "no report r-42"), "not_found"),
        )
        for index, (name, failure, code) in enumerate(cases):
            with session.scenario(name) as sc:
                out, _, fetch, sleep = fetch_report(sc, [failure, REPORT])
                not_retried.append(fetch.count == 1 and sleep.count == 0)
                reported.append(out == {"status": "failed", "error": code})
                if index == len(cases) - 1:
                    # Recorded last, here: a solution that dies first leaves them failed.
                    sc.record("permanent-not-retried", len(not_retried) == 2 and all(not_retried))
                    sc.record("permanent-error-reported", len(reported) == 2 and all(reported))


GRADER = ErrorRecoveryGrader()
