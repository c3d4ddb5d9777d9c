"""Installing the build environment never leaves pip running after it gave up on it.

pip with ``--python`` runs a second pip (its runner) in the environment's
interpreter. The rule: when the install runs over its time limit, the error is
raised and no process of that install is left alive, the runner included.
Here the lock is a FIFO the test holds open without writing, so the runner
blocks reading it for as long as it is let live.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from agent_eval.errors import InfrastructureError
from agent_eval.packing import environment
from agent_eval.packing.lock import BuildLock


def _live_processes_naming(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if text in command and state not in ("Z", "X"):
            found.append(f"{entry.name}: {command[:200]}")
    return found


def test_an_install_over_its_time_limit_leaves_no_pip_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "build-requirements.lock"
    os.mkfifo(fifo)
    opened = threading.Event()
    release = threading.Event()

    def hold_open() -> None:
        with fifo.open("w"):  # returns once pip's runner opens the lock to read it
            opened.set()
            release.wait(120)

    holder = threading.Thread(target=hold_open, daemon=True)
    holder.start()
    monkeypatch.setattr(environment, "_INSTALL_TIMEOUT_S", 15)
    lock = BuildLock(path=fifo, sha256="0" * 64, pins={})
    try:
        with pytest.raises(InfrastructureError, match="took over 15s"):
            environment._install(lock, [], tmp_path / "env")
        assert opened.is_set(), "pip's runner never reached the lock within the time limit"
        deadline = time.monotonic() + 5
        while _live_processes_naming(str(fifo)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _live_processes_naming(str(fifo)) == []
    finally:
        release.set()
        for line in _live_processes_naming(str(fifo)):  # on a failure: end what this test made
            os.kill(int(line.partition(":")[0]), 9)
        holder.join(10)
