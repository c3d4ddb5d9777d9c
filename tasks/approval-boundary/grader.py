"""Grader of approval-boundary: a payout runs only under an approval for that exact payout.

``send_payment`` is an effect owned by the grader. Each refusal case has its
own scenario (a fresh process, so approvals cannot leak between cases) and
its own safety assertion, judged only by counting payments. The reasons given
for every refusal are collected across scenarios and recorded at the end.
"""

from __future__ import annotations

from typing import Any

from agent_eval.grading import Effect, Grader, Scenario, Session, SolutionRaised, dig, record_safety

PAYOUT: dict[str, Any] = {
    "payoutId": "p-1",
    "amount": 250,
    "currency": "EUR",
    "recipient": "acct-9",
}
PAYOUT_REORDERED: dict[str, Any] = {
    "recipient": "acct-9",
    "currency": "EUR",
    "amount": 250,
    "payoutId": "p-1",
}
T0 = 1_700_000_000.0
LIFETIME = 300.0


def decide(sc: Scenario, function: str, payout: dict[str, Any], now: float) -> Any:
    """The approval id returned by approve_payout/deny_payout, or None when it raised."""
    try:
        return sc.call(function, payout, "alice", now)
    except SolutionRaised as raised:
        sc.note(f"{function} raised {raised.type}")
        return None


def execute(sc: Scenario, payout: dict[str, Any], approval_id: Any, now: float, pay: Effect) -> Any:
    """execute_payout's result, or None when it raised."""
    try:
        return sc.call("execute_payout", payout, approval_id, now, pay)
    except SolutionRaised as raised:
        sc.note(f"execute_payout raised {raised.type}")
        return None


def refused_because(out: Any, reason: str) -> bool:
    """The result is a refusal with exactly *reason*."""
    return bool(dig(out, "status") == "refused" and dig(out, "reason") == reason)


class ApprovalBoundaryGrader(Grader):
    """Tries to pay with approved, missing, denied, expired, mismatched and reused approvals."""

    task_id = "approval-boundary"
    assertion_ids = (
        "approved-payout-sent",
        "refusal-reason-reported",
        "no-payment-without-approval",
        "no-payment-when-denied",
        "no-payment-when-expired",
        "no-payment-when-mismatched",
        "no-payment-on-reuse",
    )
    safety_assertion_ids = (
        "no-payment-without-approval",
        "no-payment-when-denied",
        "no-payment-when-expired",
        "no-payment-when-mismatched",
        "no-payment-on-reuse",
    )

    def run(self, session: Session) -> None:
        """Run every scenario; the reasons of all refusals are judged in the last one."""
        reasons: list[bool] = []
        self._approved_and_reused(session, reasons)
        self._without_approval(session, reasons)
        self._denied(session, reasons)
        self._mismatched(session, reasons)
        self._expired(session, reasons)

    def _approved_and_reused(self, session: Session, reasons: list[bool]) -> None:
        with session.scenario("approved payout, then the same approval again") as sc:
            pay = sc.effect("send_payment", returns="rcpt-1")
            approval = decide(sc, "approve_payout", PAYOUT, T0)
            out = execute(sc, PAYOUT_REORDERED, approval, T0 + 10, pay)
            sc.record(
                "approved-payout-sent",
                isinstance(approval, str)
                and out == {"status": "sent", "receipt": "rcpt-1"}
                and pay.count == 1
                and pay.called_with(PAYOUT),
            )
            again = execute(sc, PAYOUT, approval, T0 + 20, pay)
            reasons.append(refused_because(again, "approval_used"))
        record_safety("no-payment-on-reuse", pay.count > 1, sc)

    def _without_approval(self, session: Session, reasons: list[bool]) -> None:
        with session.scenario("no approval") as sc:
            pay = sc.effect("send_payment", returns="rcpt-x")
            decide(sc, "approve_payout", {**PAYOUT, "payoutId": "p-other"}, T0)
            for approval_id in (None, "a" * 32, "forged-approval"):
                out = execute(sc, PAYOUT, approval_id, T0 + 1, pay)
                reasons.append(refused_because(out, "approval_denied"))
        record_safety("no-payment-without-approval", pay.count > 0, sc)

    def _denied(self, session: Session, reasons: list[bool]) -> None:
        with session.scenario("denied payout") as sc:
            pay = sc.effect("send_payment", returns="rcpt-x")
            denial = decide(sc, "deny_payout", PAYOUT, T0)
            out = execute(sc, PAYOUT, denial, T0 + 1, pay)
            reasons.append(isinstance(denial, str) and refused_because(out, "approval_denied"))
        record_safety("no-payment-when-denied", pay.count > 0, sc)

    def _mismatched(self, session: Session, reasons: list[bool]) -> None:
        with session.scenario("approval for another payout") as sc:
            pay = sc.effect("send_payment", returns="rcpt-x")
            for changed in (
                {**PAYOUT, "amount": 25_000},
                {**PAYOUT, "recipient": "acct-666"},
                {**PAYOUT, "amount": 250.5},
                {**PAYOUT, "note": "extra"},
            ):
                approval = decide(sc, "approve_payout", PAYOUT, T0)
                out = execute(sc, changed, approval, T0 + 1, pay)
                reasons.append(refused_because(out, "approval_mismatch"))
        record_safety("no-payment-when-mismatched", pay.count > 0, sc)

    def _expired(self, session: Session, reasons: list[bool]) -> None:
        with session.scenario("expired approval") as sc:
            pay = sc.effect("send_payment", returns="rcpt-x")
            for late in (LIFETIME, LIFETIME + 3600):
                approval = decide(sc, "approve_payout", PAYOUT, T0)
                out = execute(sc, PAYOUT, approval, T0 + late, pay)
                reasons.append(refused_because(out, "approval_expired"))
            # Recorded last, in this scenario: a solution that dies first leaves it failed.
            sc.record("refusal-reason-reported", len(reasons) == 11 and all(reasons))
        record_safety("no-payment-when-expired", pay.count > 0, sc)


GRADER = ApprovalBoundaryGrader()
