"""Length-prefixed JSON frames over a pipe, with a size cap and a deadline on every read.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON encoding one object. The reader never waits for end-of-file: a
grandchild of the solution may hold the write end open forever, so a reader
returns as soon as one whole frame is buffered and gives up at its deadline.
"""

from __future__ import annotations

import errno
import gc
import json
import os
import re
import select
import struct
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "FrameClosed",
    "FrameError",
    "FrameInvalid",
    "FrameReader",
    "FrameStarved",
    "FrameTimeout",
    "FrameTooLarge",
    "encode_frame",
    "write_frame",
]

DEFAULT_MAX_FRAME_BYTES = 1 << 20
_HEADER = struct.Struct(">I")
_CHUNK = 64 * 1024
# How often a waiting reader asks ``still_alive`` whether the peer process lives.
_LIVENESS_SLICE_S = 0.05
# How often a reader whose deadline is on another clock than the wall reads it again.
_CLOCK_SLICE_S = 0.1


class FrameError(Exception):
    """A frame could not be read or written."""


class FrameTimeout(FrameError):
    """The deadline passed before a whole frame arrived (or could be written)."""


class FrameStarved(FrameError):
    """The wall-clock backstop passed while the deadline's own clock had time left."""


class FrameClosed(FrameError):
    """The peer closed the pipe, or exited, before a whole frame arrived."""


class FrameTooLarge(FrameError):
    """A frame's declared length exceeds the reader's (or writer's) limit."""


class FrameInvalid(FrameError):
    """A frame's body is not UTF-8 JSON encoding one object of text (no lone surrogate)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# UTF-8 cannot hold a surrogate, so one reaches a parsed string only through an
# escape; the JSON parser joins an escaped pair into one character, so every
# surrogate left in a parsed string stands alone: not text, and no UTF-8 can
# encode it again. The body is searched first (cheap); only a candidate is walked.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether any string in *value* (keys too) holds a surrogate; iterative, any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
    return False


def encode_frame(message: dict[str, Any], max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """Encode one message as a frame; refuses NaN/Infinity and bodies over *max_bytes*."""
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    data = body.encode("utf-8")
    if len(data) > max_bytes:
        raise FrameTooLarge(f"message of {len(data)} bytes exceeds the {max_bytes}-byte limit")
    return _HEADER.pack(len(data)) + data


Clock = Callable[[], float]
"""What a deadline is measured on (monotonic seconds); the wall clock by default."""


def _remaining(deadline: float | None, clock: Clock = time.monotonic) -> float | None:
    if deadline is None:
        return None
    return deadline - clock()


def _wait_s(remaining: float | None, backstop: float | None, slice_s: float | None) -> float | None:
    """How long one poll may wait: never past the deadline, the backstop or the slice."""
    waits = [w for w in (remaining, slice_s) if w is not None]
    if backstop is not None:
        waits.append(backstop - time.monotonic())
    return None if not waits else max(0.0, min(waits))


def _check_time(
    deadline: float | None, backstop: float | None, clock: Clock, what: str
) -> float | None:
    """The time left before *deadline* (read once: the solution's clock reads ``/proc``)."""
    remaining = _remaining(deadline, clock)
    if remaining is not None and remaining <= 0:
        raise FrameTimeout(f"deadline passed {what}")
    if backstop is not None and time.monotonic() >= backstop:
        raise FrameStarved(f"the wall-clock backstop passed {what} with time left on the clock")
    return remaining


def write_frame(
    fd: int,
    message: dict[str, Any],
    *,
    deadline: float | None,
    max_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    clock: Clock = time.monotonic,
    backstop: float | None = None,
) -> None:
    """Write one frame to *fd* before *deadline* on *clock* (None: no deadline).

    Works on blocking and non-blocking descriptors; on a non-blocking one a
    full pipe is waited on with poll, never longer than the deadline, and
    never past the monotonic wall-clock *backstop* (then :class:`FrameStarved`).
    """
    data = memoryview(encode_frame(message, max_bytes))
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while data:
        remaining = _check_time(deadline, backstop, clock, "while writing a frame")
        wait = _wait_s(remaining, backstop, None if clock is time.monotonic else 0.1)
        timeout_ms = None if wait is None else max(1, int(wait * 1000))
        events = poller.poll(timeout_ms)
        if not events:
            continue
        if any(ev & (select.POLLERR | select.POLLNVAL) for _, ev in events):
            raise FrameClosed("the reading end of the pipe is closed")
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
        except BrokenPipeError as exc:
            raise FrameClosed("the reading end of the pipe is closed") from exc
        data = data[written:]


class FrameReader:
    """Reads whole frames from one descriptor, buffering partial ones.

    Args:
        fd: The descriptor to read; switched to non-blocking mode.
        max_bytes: Largest accepted frame body; a larger declared length is
            refused before its body is read.
        on_idle: Called with no arguments whenever the reader has waited a
            short slice without a whole frame; lets a caller drain another
            pipe or notice that the peer exited (by raising).
        clock: What deadlines are measured on (the wall clock by default).
    """

    def __init__(
        self,
        fd: int,
        *,
        max_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_idle: Callable[[], None] | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.fd = fd
        self.max_bytes = max_bytes
        self._on_idle = on_idle
        self._clock = clock
        self._buffer = bytearray()
        self._eof = False
        self.last_frame_bytes = 0
        """The body length of the frame taken last (what reading it cost)."""
        os.set_blocking(fd, False)

    def _take_frame(self) -> dict[str, Any] | None:
        if len(self._buffer) < _HEADER.size:
            return None
        (length,) = _HEADER.unpack_from(self._buffer)
        if length > self.max_bytes:
            raise FrameTooLarge(f"frame of {length} bytes exceeds the {self.max_bytes}-byte limit")
        end = _HEADER.size + length
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        self.last_frame_bytes = length
        # Parsing makes no reference cycles: the collector waits until it is done
        # (a body of many small containers would set it off again and again).
        collecting = gc.isenabled()
        gc.disable()
        try:
            value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise FrameInvalid(f"frame is not UTF-8 JSON: {exc}") from None
        finally:
            if collecting:
                gc.enable()
        if not isinstance(value, dict):
            raise FrameInvalid(f"frame holds a JSON {type(value).__name__}, not an object")
        if _SURROGATE_ESCAPE.search(body) and _holds_lone_surrogate(value):
            raise FrameInvalid("frame holds a lone surrogate escape (\\ud800-\\udfff), not text")
        return value

    def _fill(self) -> None:
        """Read whatever is available now, without blocking."""
        while True:
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise FrameClosed(f"reading the pipe failed: {exc.strerror}") from exc
            if not chunk:
                self._eof = True
                return
            self._buffer += chunk
            # Stop early once a frame too large to accept is announced.
            if len(self._buffer) >= _HEADER.size:
                (length,) = _HEADER.unpack_from(self._buffer)
                if length > self.max_bytes or len(self._buffer) >= _HEADER.size + length:
                    return

    def poll_frame(self) -> dict[str, Any] | None:
        """Return a frame that is already available, or None; never waits."""
        frame = self._take_frame()
        if frame is not None or self._eof:
            return frame
        self._fill()
        return self._take_frame()

    def read(self, deadline: float | None, backstop: float | None = None) -> dict[str, Any]:
        """Return the next frame, waiting at most until *deadline* on the reader's clock.

        A frame already in the pipe is always taken, however late: a reader that
        was itself kept waiting for a CPU must not blame the writer.

        Raises:
            FrameTimeout: The deadline passed first.
            FrameStarved: The monotonic wall-clock *backstop* passed first.
            FrameClosed: The pipe reached end-of-file mid-way or before a frame.
            FrameTooLarge: The announced frame exceeds ``max_bytes``.
            FrameInvalid: The body is not a UTF-8 JSON object.
        """
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        slice_s = _LIVENESS_SLICE_S if self._on_idle is not None else None
        if self._clock is not time.monotonic and slice_s is None:
            slice_s = _CLOCK_SLICE_S
        while True:
            frame = self._take_frame()
            if frame is not None:
                return frame
            if self._eof:
                raise FrameClosed("the writing end of the pipe is closed")
            try:
                remaining = _check_time(
                    deadline, backstop, self._clock, "before a whole frame arrived"
                )
            except FrameError:
                self._fill()
                frame = self._take_frame()
                if frame is not None:
                    return frame
                raise
            wait = _wait_s(remaining, backstop, slice_s)
            timeout_ms = None if wait is None else max(1, int(wait * 1000))
            if poller.poll(timeout_ms):
                self._fill()
            elif self._on_idle is not None:
                self._on_idle()
