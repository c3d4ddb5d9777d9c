"""Retry transient failures with exponential backoff; never retry permanent ones.

:class:`RetryPolicy` calls a function, retries it after a
:class:`TransientError` with growing delays, and lets every other exception
(including :class:`PermanentError`) propagate at once. ``sleep`` is injectable
so tests need not wait.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from appkit.errors import PermanentError, TransientError

__all__ = [
    "PermanentError",
    "RetryPolicy",
    "TransientError",
]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry :class:`TransientError` failures.

    ``max_attempts`` counts the first call. Before attempt ``n + 1`` the policy
    sleeps ``min(max_delay, initial_delay * backoff ** (n - 1))`` seconds using
    ``sleep`` (``None`` means ``time.sleep``).
    """

    max_attempts: int = 3
    initial_delay: float = 0.1
    backoff: float = 2.0
    max_delay: float = 10.0
    sleep: Callable[[float], None] | None = None

    def __post_init__(self) -> None:
        """Reject settings that make no sense (raises ``ValueError``)."""
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ValueError("max_attempts must be an int")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        for name in ("initial_delay", "max_delay"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0")
        if not math.isfinite(self.backoff) or self.backoff < 1:
            raise ValueError("backoff must be a finite number >= 1")

    def delay(self, attempt: int) -> float:
        """Return the seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if attempt < 1:
            raise ValueError("attempt numbers start at 1")
        return min(self.max_delay, self.initial_delay * self.backoff ** (attempt - 1))

    def run(self, fn: Callable[[], T]) -> T:
        """Call ``fn`` until it returns, retrying only :class:`TransientError`.

        Any other exception propagates immediately, without sleeping. When the
        last allowed attempt fails transiently, that :class:`TransientError` is
        re-raised (with a note giving the attempt count).
        """
        attempt = 1
        while True:
            try:
                return fn()
            except TransientError as error:
                if attempt >= self.max_attempts:
                    error.add_note(f"gave up after {attempt} attempt(s)")
                    raise
                (self.sleep or time.sleep)(self.delay(attempt))
                attempt += 1
