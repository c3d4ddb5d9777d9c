from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

@dataclass(frozen=True)
class Window:
    """A payment window: from the due date, for a duration."""

    start: date
    length: timedelta

def grace_period(due: date, balance: Decimal) -> timedelta:
    """14 days, plus one day per full 100.00 of balance, at most 30 days."""

def pay_by(due: date, grace: timedelta) -> date:
    """The last day to pay: due plus grace."""

def window(due: date, balance: Decimal) -> Window:
    """The payment window of a balance due on *due*."""

def remind(due: date, send: Callable[[date], Decimal]) -> Decimal:
    """Send a reminder dated the day before *due*; return the fee *send* answers."""
