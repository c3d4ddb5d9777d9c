"""A stopping signal raises Stop once; later ones are counted; a command keeps counting
until its process ends, so a late signal cannot turn a decided exit status into a death."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from agent_eval.batch.signals import ABANDON, STOPPING_SIGNALS, Stop, stopping_on_signals


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    before = {s: signal.getsignal(s) for s in STOPPING_SIGNALS}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


def deliver(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.05)  # the handler runs in the main thread at the next bytecode


def test_the_first_signal_stops_and_the_previous_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Stop) as stopped, stopping_on_signals(until_exit=True):
        deliver(signal.SIGTERM)
    assert stopped.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before  # not settled: handlers restored


def test_a_settled_command_keeps_counting_after_its_block() -> None:
    with stopping_on_signals(until_exit=True) as signals:
        signals.settle()
    deliver(signal.SIGTERM)  # the process lives on: only counted
    deliver(signal.SIGINT)
    assert signals.received == [signal.SIGTERM, signal.SIGINT]


def test_a_settled_block_of_a_library_caller_gives_the_handlers_back() -> None:
    before = {s: signal.getsignal(s) for s in STOPPING_SIGNALS}
    with stopping_on_signals() as signals:
        signals.settle()
        deliver(signal.SIGTERM)  # settled: only counted
    assert signals.received == [signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in STOPPING_SIGNALS} == before


def test_the_first_signal_is_acknowledged_at_once_and_a_second_abandons_the_wait(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(Stop), stopping_on_signals() as signals:
        try:
            deliver(signal.SIGINT)
        except Stop:
            said = capfd.readouterr().err
            # Said before anything else is done: what is waited for, and how to abandon it.
            assert said.startswith("agent-eval: SIGINT received: starting nothing more")
            assert "a second signal stops waiting" in said and said.count("\n") == 1
            assert not ABANDON.is_set()
            deliver(signal.SIGINT)
            assert ABANDON.is_set() and signals.received == [signal.SIGINT] * 2
            raise


def test_two_signals_pending_at_once_stop_with_the_one_that_came_first() -> None:
    """Python runs pending handlers by signal number, not by arrival: a SIGTERM then a
    SIGINT that both wait for a busy main thread must still stop as the SIGTERM."""
    go, sent = threading.Event(), threading.Event()

    def sender() -> None:  # started before the mask: the signals land in this thread
        go.wait()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)
        sent.set()

    thread = threading.Thread(target=sender)
    thread.start()
    with pytest.raises(Stop) as stopped, stopping_on_signals() as signals:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING_SIGNALS)
        try:
            go.set()
            # The main thread waits with both signals blocked: neither interrupts the
            # wait, so both handlers are pending when it next runs Python.
            sent.wait(timeout=10)
            thread.join()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING_SIGNALS)
        try:
            time.sleep(0.05)
        except Stop:
            time.sleep(0.05)  # the second handler runs here, and only counts
            raise
    assert stopped.value.signum == signal.SIGTERM
    assert stopped.value.reason == "stopped by SIGTERM"
    assert sorted(signals.received) == sorted([signal.SIGTERM, signal.SIGINT])
    assert ABANDON.is_set()
