from collections.abc import Callable
from typing import Any

def approve_payout(payout: dict[str, Any], approver: str, now: float) -> str:
    """Grant an approval for exactly this payout, issued at time now; return its approval id."""

def deny_payout(payout: dict[str, Any], approver: str, now: float) -> str:
    """Record a denial of this payout, issued at time now; return its approval id."""

def execute_payout(
    payout: dict[str, Any],
    approval_id: str | None,
    now: float,
    send_payment: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """Send the payout at time now, only under a valid approval for exactly this payout.

    Sent: {"status": "sent", "receipt": <send_payment's result>}.
    Refused: {"status": "refused", "reason": <the library's error code>}.
    """
