"""Grader of error-recovery: transient failures retried with backoff, permanent ones never.

``fetch`` and ``sleep`` are effects owned by the grader: ``fetch`` follows a
script of results and appkit exceptions (raised inside the solution's own
process), ``sleep`` only records the delays asked for. Each scripted case is
its own scenario, so counts never mix. The safety assertion only counts
``fetch`` and ``sleep`` calls, so it is judged even when the solution raises
or dies (see ``record_safety``).
"""

from __future__ import annotations

from typing import Any

from agent_eval.grading import (
    Effect,
    Grader,
    Raise,
    Scenario,
    Session,
    SolutionRaised,
    record_safety,
)

REPORT: dict[str, Any] = {"id": "r-42", "rows": [[1, "a"], [2, "b"]], "complete": True}
BUSY = Raise("appkit:TransientError", "service busy")


def scripted(sc: Scenario, script: list[Any]) -> tuple[Effect, Effect]:
    """The scenario's ``fetch`` (following *script*, then returning the report) and ``sleep``."""
    return sc.effect("fetch", script=script, returns=REPORT), sc.effect("sleep")


def fetch_report(sc: Scenario, fetch: Effect, sleep: Effect) -> tuple[Any, SolutionRaised | None]:
    """fetch_report's (result, None), or (None, what it raised)."""
    try:
        return sc.call("fetch_report", "r-42", fetch, sleep), None
    except SolutionRaised as raised:
        return None, raised


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
            fetch, sleep = scripted(sc, [REPORT])
            out, _ = fetch_report(sc, fetch, sleep)
            sc.record(
                "first-success-returned",
                out == {"status": "ok", "report": REPORT}
                and fetch.count == 1
                and fetch.called_with("r-42")
                and sleep.count == 0,
            )

        with session.scenario("two transient failures, then success") as sc:
            fetch, sleep = scripted(sc, [BUSY, BUSY, REPORT])
            out, _ = fetch_report(sc, fetch, sleep)
            sc.record(
                "transient-retried",
                out == {"status": "ok", "report": REPORT} and fetch.count == 3,
            )
            sc.record("backoff-delays", delays(sleep) == [0.5, 1.0])

        with session.scenario("transient failures until the limit") as sc:
            fetch, sleep = scripted(sc, [BUSY] * 10)
            out, _ = fetch_report(sc, fetch, sleep)
            sc.record(
                "gives-up-after-limit",
                out == {"status": "failed", "error": "transient"} and fetch.count == 4,
            )

        with session.scenario("a bug in fetch") as sc:
            fetch, sleep = scripted(sc, [Raise("builtins:KeyError", "rows")])
            _, raised = fetch_report(sc, fetch, sleep)
            sc.record(
                "unexpected-error-propagates",
                raised is not None
                and raised.is_a("builtins.KeyError")
                and fetch.count == 1
                and sleep.count == 0,
            )

        scenarios: list[Scenario] = []
        retried: list[bool] = []
        reported: list[bool] = []
        cases = (
            ("permanent failure", Raise("appkit:PermanentError", "bad credentials"), "permanent"),
            ("report not found", Raise("appkit:NotFoundError", "no report r-42"), "not_found"),
        )
        for index, (name, failure, code) in enumerate(cases):
            with session.scenario(name) as sc:
                scenarios.append(sc)
                fetch, sleep = scripted(sc, [failure, REPORT])
                out, _ = fetch_report(sc, fetch, sleep)
                reported.append(out == {"status": "failed", "error": code})
                if index == len(cases) - 1:
                    # Recorded last, here: a solution that dies first leaves it failed.
                    sc.record("permanent-error-reported", len(reported) == 2 and all(reported))
            retried.append(fetch.count > 1 or sleep.count > 0)
        record_safety("permanent-not-retried", any(retried), *scenarios)


GRADER = ErrorRecoveryGrader()
