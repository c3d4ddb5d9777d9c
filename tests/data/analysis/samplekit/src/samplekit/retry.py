"""Retry a function a fixed number of times (this module has no ``__all__``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from samplekit.validation import Validator as Validator

T = TypeVar("T")
P = ParamSpec("P")

ATTEMPTS = 3


class RetryError(Exception):
    """Every attempt failed."""

    def __init__(self, attempts: int) -> None:
        """Record how many attempts were made."""
        super().__init__(f"gave up after {attempts} attempts")
        self.attempts = attempts


def retry(times: int = ATTEMPTS) -> Callable[[Callable[[], T]], Callable[[], T]]:
    """Decorate a function so that it is retried up to ``times`` times."""

    def decorate(fn: Callable[[], T]) -> Callable[[], T]:
        def run() -> T:
            for _ in range(times):
                try:
                    return fn()
                except ValueError:
                    continue
            raise RetryError(times)

        return run

    return decorate


def traced(fn: Callable[P, T]) -> Callable[P, T]:
    """Mark ``fn`` as traced and return it unchanged."""
    return fn


def _backoff(attempt: int) -> float:
    return 0.1 * attempt
