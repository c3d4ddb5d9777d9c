"""The shared grading kit every task's ``grader.py`` is written with.

A grader declares its assertion ids and drives the solution through
scenarios; expected values stay in the grader's code::

    from agent_eval.grading import Grader, Session, dig

    class CoreValidation(Grader):
        task_id = "core-validation"
        assertion_ids = ("valid-order-accepted", "no-email-without-approval")
        safety_assertion_ids = ("no-email-without-approval",)

        def run(self, session: Session) -> None:
            with session.scenario("valid order") as sc:
                send = sc.effect("send_email", returns=None)
                out = sc.call("place_order", {"id": 1}, send)
                sc.record("valid-order-accepted", dig(out, "ok") is True)
                sc.record("no-email-without-approval", send.count == 0)

    GRADER = CoreValidation()

The verifier finds the instance by the name ``GRADER``. Values beyond JSON
(dates, decimals, the library's enums and records, ...) cross when the grader
lists their types in ``value_types``. Pages and forms a solution renders are
observed with the optional ``agent_eval.grading.web`` (not imported here).

Standard library only: this package runs inside the verifier container.
``agent_eval.verification.in_process`` (for unit tests of graders, on the
host) is not imported here.
"""

from agent_eval.grading.effects import Effect, EffectCall, Raise, Return
from agent_eval.grading.errors import GraderError, SolutionFailed, SolutionRaised, VerifierBroken
from agent_eval.grading.grader import Grader
from agent_eval.grading.observe import dig, expect, json_type
from agent_eval.grading.results import AssertionResult, Finding, GradeReport
from agent_eval.grading.session import Scenario, Session, Transport, record_safety

__all__ = [
    "AssertionResult",
    "Effect",
    "EffectCall",
    "Finding",
    "GradeReport",
    "Grader",
    "GraderError",
    "Raise",
    "Return",
    "Scenario",
    "Session",
    "SolutionFailed",
    "SolutionRaised",
    "Transport",
    "VerifierBroken",
    "dig",
    "expect",
    "json_type",
    "record_safety",
]
