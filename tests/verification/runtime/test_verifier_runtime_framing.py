"""Frames are bounded and every read ends by its deadline.

A reader returns one whole frame as soon as it is buffered, refuses a frame
whose announced length exceeds its limit before reading the body, and gives
up at its deadline even while some other process holds the write end open
(it never waits for end-of-file). Writers give up at their deadline too.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
from collections.abc import Iterator

import pytest

from agent_eval.verification.runtime.framing import (
    FrameClosed,
    FrameInvalid,
    FrameReader,
    FrameTimeout,
    FrameTooLarge,
    encode_frame,
    write_frame,
)


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        with contextlib.suppress(OSError):
            os.close(fd)


def soon(seconds: float = 1.0) -> float:
    return time.monotonic() + seconds


def test_a_frame_round_trips_through_a_pipe(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    write_frame(write_fd, {"op": "call", "args": ["é", 1, None]}, deadline=soon())
    assert FrameReader(read_fd).read(soon()) == {"op": "call", "args": ["é", 1, None]}


def test_two_frames_written_at_once_are_read_one_at_a_time(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, encode_frame({"n": 1}) + encode_frame({"n": 2}))
    reader = FrameReader(read_fd)
    assert reader.read(soon()) == {"n": 1}
    assert reader.poll_frame() == {"n": 2}
    assert reader.poll_frame() is None


def test_a_frame_announced_larger_than_the_limit_is_refused_before_its_body(
    pipe: tuple[int, int],
) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, struct.pack(">I", 10_000) + b"{")
    with pytest.raises(FrameTooLarge, match="10000 bytes exceeds the 1024-byte limit"):
        FrameReader(read_fd, max_bytes=1024).read(soon())


def test_a_writer_refuses_to_encode_a_message_over_the_limit() -> None:
    with pytest.raises(FrameTooLarge):
        encode_frame({"blob": "x" * 2000}, max_bytes=1024)


def test_nan_is_not_json_and_is_never_sent() -> None:
    with pytest.raises(ValueError):
        encode_frame({"value": float("nan")})


def test_a_read_gives_up_at_its_deadline_while_the_write_end_stays_open(
    pipe: tuple[int, int],
) -> None:
    read_fd, _write_fd_kept_open = pipe
    started = time.monotonic()
    with pytest.raises(FrameTimeout):
        FrameReader(read_fd).read(started + 0.2)
    assert 0.15 <= time.monotonic() - started < 1.0


def test_a_half_written_frame_still_times_out(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, struct.pack(">I", 100) + b'{"partial": ')
    started = time.monotonic()
    with pytest.raises(FrameTimeout):
        FrameReader(read_fd).read(started + 0.2)
    assert time.monotonic() - started < 1.0


def test_end_of_file_in_the_middle_of_a_frame_is_reported_as_closed(
    pipe: tuple[int, int],
) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, struct.pack(">I", 100) + b"{")
    os.close(write_fd)
    with pytest.raises(FrameClosed):
        FrameReader(read_fd).read(soon())


@pytest.mark.parametrize(
    ("body", "reason"),
    [(b"\xff\xfe", "UTF-8"), (b"[1, 2]", "not an object"), (b"{nope", "UTF-8 JSON")],
)
def test_a_body_that_is_not_a_json_object_is_invalid(
    pipe: tuple[int, int], body: bytes, reason: str
) -> None:
    read_fd, write_fd = pipe
    os.write(write_fd, struct.pack(">I", len(body)) + body)
    with pytest.raises(FrameInvalid, match=reason):
        FrameReader(read_fd).read(soon())


def test_the_idle_hook_runs_while_waiting_and_may_end_the_wait(pipe: tuple[int, int]) -> None:
    read_fd, _write_fd = pipe
    calls: list[float] = []

    def on_idle() -> None:
        calls.append(time.monotonic())
        if len(calls) == 3:
            raise FrameClosed("the peer exited")

    with pytest.raises(FrameClosed, match="the peer exited"):
        FrameReader(read_fd, on_idle=on_idle).read(soon(5))
    assert len(calls) == 3


def test_a_write_to_a_pipe_nobody_reads_gives_up_at_its_deadline(pipe: tuple[int, int]) -> None:
    _read_fd, write_fd = pipe
    os.set_blocking(write_fd, False)
    started = time.monotonic()
    with pytest.raises(FrameTimeout):
        write_frame(write_fd, {"blob": "x" * 200_000}, deadline=started + 0.2)
    assert time.monotonic() - started < 1.0
