"""Signals that stop a batch: SIGINT, SIGTERM and SIGHUP, each turned into one ``Stop``.

The first signal raises :class:`Stop` in the main thread, where the batch
closes its receipt and cleans up; every later one is only counted, so a
second Ctrl-C (or a SIGTERM from a CI runner right after a Ctrl-C) cannot
interrupt the closing itself and leave the receipt ``running``. Once the
receipt is final (:meth:`Signals.settle`), every signal is only counted:
what is left (the report, the one line on stdout) is short, and a signal
there must not swallow the line that says how the batch ended.

Which signal came first is read from the order the signals arrived in, not
from the order their handlers run: Python runs the handlers of signals that
are pending together by signal number, so a SIGTERM then a SIGINT that both
wait for a busy main thread would otherwise stop the batch as a Ctrl-C. The
arrival order is the one the interpreter's own low-level handler writes to
the wakeup descriptor, one byte per signal, as each comes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["ABANDON", "STOPPING_SIGNALS", "Signals", "Stop", "stopping_on_signals"]

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

ABANDON = threading.Event()
"""Set by a second stopping signal before the receipt is final: the batch stops waiting
for the runs in flight to come back and records them as cut short at once."""

ACKNOWLEDGEMENT = (
    "agent-eval: {name} received: starting nothing more; stopping the runs in flight and "
    "recording them (at most {grace} s); a second signal stops waiting for them\n"
)
"""Written at once on the first signal, to stderr, before anything else is done."""

GRACE_S = 60
"""What the acknowledgement promises at most: the schedule's grace for runs in flight."""


class Stop(BaseException):
    """A signal asked the batch to stop (a BaseException, like KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def reason(self) -> str:
        """How the receipt says it."""
        if self.signum == signal.SIGINT:
            return "interrupted by the operator (Ctrl-C)"
        return f"stopped by {signal.Signals(self.signum).name}"


class Signals:
    """The stopping signals received, and whether the next one may still raise."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.settled = False
        self.arrivals: int | None = None
        """The read end of the wakeup pipe: the signals' numbers in the order they came."""

    def first_arrived(self, handled: int) -> int:
        """The stopping signal that came first; *handled* (the one whose handler runs)
        when the pipe says nothing (another wakeup descriptor took its place)."""
        if self.arrivals is not None:
            with contextlib.suppress(BlockingIOError, InterruptedError):
                for number in os.read(self.arrivals, 4096):
                    if number in STOPPING_SIGNALS:
                        return number
        return handled

    def settle(self) -> None:
        """From now on every signal is only counted: the receipt is final."""
        self.settled = True


@contextlib.contextmanager
def stopping_on_signals(*, until_exit: bool = False) -> Iterator[Signals]:
    """Turn the first stopping signal into :class:`Stop`; count the later ones.

    With *until_exit* (a command, whose process ends right after the block),
    a settled block leaves its handler in place: a signal arriving while the
    process exits is still only counted, instead of turning an exit status
    already decided into a death by that signal. Otherwise the previous
    handlers come back. Outside the main thread (where no handler can be
    installed) this does nothing.
    """
    signals = Signals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        signals.received.append(signum)
        if signals.settled:
            return
        if len(signals.received) == 1:
            first = signals.first_arrived(signum)
            _acknowledge(first)
            raise Stop(first)
        ABANDON.set()

    ABANDON.clear()
    reader, writer = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signals.arrivals = reader
    previous_wakeup = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    previous = {s: signal.signal(s, handler) for s in STOPPING_SIGNALS}
    try:
        yield signals
    finally:
        if not (until_exit and signals.settled):
            for signum, old in previous.items():
                signal.signal(signum, old)
        # The order matters only until the first signal has stopped the block; the pipe
        # goes with it (a kept handler falls back to the signal it runs for).
        signal.set_wakeup_fd(previous_wakeup)
        signals.arrivals = None
        os.close(reader)
        os.close(writer)


def _acknowledge(signum: int) -> None:
    """Say at once what the stop waits for; a closed or broken stderr never stops the stop."""
    line = ACKNOWLEDGEMENT.format(name=signal.Signals(signum).name, grace=GRACE_S)
    with contextlib.suppress(OSError):
        os.write(2, line.encode("utf-8"))
