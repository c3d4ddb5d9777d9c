"""Tests for appkit.retry."""

from __future__ import annotations

import pytest
from appkit import (
    IntegrityError,
    PermanentError,
    RetryPolicy,
    TransientError,
    ValidationError,
)


class Flaky:
    def __init__(self, failures: list[Exception], result: str = "ok") -> None:
        self.failures = list(failures)
        self.result = result
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.result


def test_success_first_time_does_not_sleep() -> None:
    sleeps: list[float] = []
    fn = Flaky([])
    assert RetryPolicy(sleep=sleeps.append).run(fn) == "ok"
    assert fn.calls == 1
    assert sleeps == []


def test_transient_errors_are_retried_with_backoff() -> None:
    sleeps: list[float] = []
    fn = Flaky([TransientError("busy"), TransientError("busy")])
    policy = RetryPolicy(max_attempts=3, initial_delay=0.5, backoff=2, sleep=sleeps.append)
    assert policy.run(fn) == "ok"
    assert fn.calls == 3
    assert sleeps == [0.5, 1.0]


def test_exhausted_attempts_reraise_last_transient_error() -> None:
    sleeps: list[float] = []
    last = TransientError("third")
    fn = Flaky([TransientError("first"), TransientError("second"), last])
    with pytest.raises(TransientError) as caught:
        RetryPolicy(max_attempts=3, sleep=sleeps.append).run(fn)
    assert caught.value is last
    assert fn.calls == 3
    assert len(sleeps) == 2
    assert any("3 attempt" in note for note in caught.value.__notes__)


@pytest.mark.parametrize(
    "error",
    [
        PermanentError("no"),
        ValidationError([]),
        IntegrityError("bad bytes"),
        ValueError("plain"),
        KeyError("plain"),
    ],
)
def test_non_transient_errors_are_never_retried(error: Exception) -> None:
    sleeps: list[float] = []
    fn = Flaky([error])
    with pytest.raises(type(error)):
        RetryPolicy(max_attempts=5, sleep=sleeps.append).run(fn)
    assert fn.calls == 1
    assert sleeps == []


def test_permanent_error_after_transient_stops_retrying() -> None:
    sleeps: list[float] = []
    fn = Flaky([TransientError("busy"), PermanentError("gone"), TransientError("busy")])
    with pytest.raises(PermanentError):
        RetryPolicy(max_attempts=5, sleep=sleeps.append).run(fn)
    assert fn.calls == 2
    assert len(sleeps) == 1


def test_delay_is_capped() -> None:
    policy = RetryPolicy(initial_delay=1, backoff=10, max_delay=30)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [1, 10, 30, 30]
    with pytest.raises(ValueError):
        policy.delay(0)


def test_single_attempt_policy() -> None:
    fn = Flaky([TransientError("busy")])
    with pytest.raises(TransientError):
        RetryPolicy(max_attempts=1, sleep=lambda s: None).run(fn)
    assert fn.calls == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": True},
        {"initial_delay": -1},
        {"max_delay": float("inf")},
        {"backoff": 0.5},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
