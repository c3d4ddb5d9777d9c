"""Running a host tool with a time limit that ends everything it started.

``subprocess.run(..., timeout=...)`` kills only the process it started. pip
with ``--python`` re-executes itself in the target interpreter, a build
backend runs a compiler, npm runs node: those grandchildren outlive the kill
and keep a core busy (or a pipe open) for as long as they like. Here the
command is started in a session and process group of its own, and the whole
group is ended with SIGKILL on every way out: the time limit, a signal or an
exception in the caller (Ctrl-C), and a normal exit that left members behind.

A member that starts a session of its own (``setsid``) leaves the group and
is out of reach: nothing the harness runs on the host does that.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, overload

__all__ = ["run_group"]

_DRAIN_S = 5.0
"""After the group is killed, how long its pipes may take to close (a member that
left the group may hold them open: then they are closed without reading further)."""


@overload
def run_group(
    command: Sequence[str],
    *,
    timeout: float,
    text: Literal[True],
    env: Mapping[str, str] | None = ...,
    cwd: Path | str | None = ...,
) -> subprocess.CompletedProcess[str]: ...


@overload
def run_group(
    command: Sequence[str],
    *,
    timeout: float,
    text: Literal[False] = ...,
    env: Mapping[str, str] | None = ...,
    cwd: Path | str | None = ...,
) -> subprocess.CompletedProcess[bytes]: ...


def run_group(
    command: Sequence[str],
    *,
    timeout: float,
    text: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """Run *command* to its end or *timeout* seconds, its output captured, stdin empty.

    Args:
        command: The program and its arguments.
        timeout: Seconds of wall-clock time before the whole group is killed.
        text: Decode the output as text (the locale's encoding, as ``subprocess.run``).
        env: The environment (None: this process's).
        cwd: The working directory (None: this process's).

    Returns:
        The finished process with its exit status, stdout and stderr.

    Raises:
        subprocess.TimeoutExpired: It ran over *timeout*; every process of its group
            has been killed.
        OSError: It could not be started.
    """
    with subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=None if env is None else dict(env),
        cwd=cwd,
        text=text,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(proc.pid)
            # Popen's exit closes the pipes and reaps the (killed) leader.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=_DRAIN_S)
            raise subprocess.TimeoutExpired(list(command), timeout) from None
        except BaseException:
            _end_group(proc.pid)
            proc.wait()  # killed, so at once (Popen's exit would not wait after a Ctrl-C)
            raise
        _end_group(proc.pid)  # members the leader left running when it exited
    return subprocess.CompletedProcess(list(command), proc.returncode, stdout, stderr)


def _end_group(pgid: int) -> None:
    # The group keeps its id while any member lives, so the id names no one else.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
