"""The zygote: its forks start as fresh children would, exits are told, its status is the parent's.

Run with real processes on this machine (no container): the zygote is not
PID 1 here, which changes only who reaps orphans. The container's case, where
it is PID 1 and the parent sweeps with kill(-1), is the adversarial suite's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agent_eval.verification.runtime.clock import process_state
from agent_eval.verification.runtime.zygote import (
    DETERMINISM,
    Zygote,
    _reap_orphans,
    zygote_command,
)
from tests.paths import REPO

PARENT = Path(__file__).with_name("zygote_parent.py")

PROBE = """
import json, locale, os, resource, signal, sys, threading, time
print(json.dumps({
    "fds": len(os.listdir("/proc/self/fd")),
    "own_session": os.getsid(0) == os.getpid() == os.getpgid(0),
    "cwd": os.getcwd().rsplit("/", 1)[-1],
    "environ": dict(os.environ),
    "argv": sys.argv[:3],
    "path": [p for p in sys.path if "solution" not in p],
    "flags": [sys.flags.no_user_site, sys.flags.safe_path, sys.flags.dont_write_bytecode,
              sys.flags.hash_randomization, sys.flags.isolated, sys.flags.ignore_environment],
    "hash": hash("agent-eval"),
    "tz": [time.tzname, time.timezone],
    "encoding": [locale.getpreferredencoding(False), sys.getfilesystemencoding()],
    "signals": {s.name: repr(signal.getsignal(s)) for s in (
        signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE,
        signal.SIGXFSZ)},
    "limits": [resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_CPU)],
    "umask": os.umask(0o022),
    "threads": threading.active_count(),
    "modules": sorted(m for m in sys.modules if m != "probe"),
    "recursion_left": sys.getrecursionlimit() - len(__import__("traceback").extract_stack()),
    "orig_argv": sys.orig_argv[1:5],
    # The solution's own socket.py, as in a fresh child that never imported the real one.
    "shadowed": getattr(__import__("socket"), "SHADOW", False),
}), flush=True)
"""


def run_parent(
    tmp_path: Path, mode: str, env: dict[str, str], ignored: tuple[int, ...] = ()
) -> dict[str, Any]:
    out = tmp_path / "out.json"
    command = zygote_command(
        sys.executable, str(REPO), (sys.executable, str(PARENT), mode, str(out))
    )

    def dispositions() -> None:
        for number in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_IGN if number in ignored else signal.SIG_DFL)

    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
        preexec_fn=dispositions,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    facts: dict[str, Any] = json.loads(out.read_text())
    return facts


def plain_environment() -> dict[str, str]:
    """This machine's environment without the verifier's pinned locale, zone and seed."""
    env = {k: v for k, v in os.environ.items() if k not in DETERMINISM}
    return {**env, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "random", "TZ": "Asia/Tokyo"}


@pytest.mark.parametrize(
    "ignored",
    [(), (signal.SIGHUP, signal.SIGINT)],
    ids=["default-signals", "started-under-nohup-in-the-background"],
)
def test_a_forked_child_starts_as_a_fresh_interpreter_would(
    tmp_path: Path, ignored: tuple[int, ...]
) -> None:
    (tmp_path / "solution").mkdir()
    (tmp_path / "solution" / "probe.py").write_text(textwrap.dedent(PROBE))
    (tmp_path / "solution" / "socket.py").write_text("SHADOW = True\n")
    (tmp_path / "scratch").mkdir()

    # Started in an environment with another seed and zone: the zygote starts
    # again in the fresh child's, or its forks would hash and tell time otherwise.
    facts = run_parent(tmp_path, "facts", plain_environment(), ignored)

    fresh, forked = facts["fresh"], facts["forked"]
    assert fresh["cwd"] == "fresh" and forked["cwd"] == "forked"
    assert forked["argv"][:2] == fresh["argv"][:2]
    assert forked["argv"][2] == "agent_eval.verification.runtime.child"
    for facts_of in (fresh, forked):
        del facts_of["cwd"], facts_of["argv"]
        facts_of["environ"].pop("HOME"), facts_of["environ"].pop("TMPDIR")
    assert forked == fresh
    assert fresh["own_session"] and fresh["threads"] == 1
    assert fresh["fds"] == 6  # 0, 1, 2, the two pipe ends, and the listing's own
    assert str(REPO) not in fresh["path"]
    assert fresh["environ"]["PYTHONHASHSEED"] == "0" and fresh["tz"][1] == 0
    assert ("SIG_IGN" in fresh["signals"]["SIGHUP"]) is bool(ignored)
    assert fresh["shadowed"] is True and "socket" not in fresh["modules"]


def test_an_exit_is_told_and_the_pid_stays_reserved_until_the_parent_releases_it(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    facts = run_parent(tmp_path, "exit", env)

    # The child kit's protocol exit (3): its parent closed the pipe before start.
    assert facts["status"] == [os.CLD_EXITED, 3]
    assert facts["held"] == "Z" and facts["after"] == "gone"
    assert facts["never"].startswith("TimeoutError")
    assert "is no exited child of the zygote" in facts["again"]


@pytest.mark.parametrize(
    ("parent", "status"),
    [
        ("import sys; sys.exit(3)", 3),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9),
        ("import sys; sys.exit(0)", 0),
    ],
)
def test_the_zygote_exits_with_its_parents_status(parent: str, status: int) -> None:
    command = zygote_command(sys.executable, str(REPO), (sys.executable, "-c", parent))
    done = subprocess.run(command, capture_output=True, timeout=60)
    assert done.returncode == status, done.stderr


def test_a_signal_to_the_zygote_reaches_the_parent(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    parent = (
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(5))\n"
        f"pathlib.Path({str(ready)!r}).write_text('')\n"
        "time.sleep(60)\n"
    )
    command = zygote_command(sys.executable, str(REPO), (sys.executable, "-c", parent))
    with subprocess.Popen(command) as zygote:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline and zygote.poll() is None
            time.sleep(0.02)
        zygote.send_signal(signal.SIGTERM)
        assert zygote.wait(timeout=30) == 5


def test_a_command_that_cannot_start_and_bad_arguments_are_refused() -> None:
    missing = zygote_command(sys.executable, str(REPO), ("/nonexistent/python",))
    done = subprocess.run(missing, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "cannot start /nonexistent/python" in done.stderr
    usage = zygote_command(sys.executable, str(REPO), ())
    done = subprocess.run(usage, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "usage: zygote -- COMMAND" in done.stderr


def test_a_zygote_fd_that_is_not_a_socket_is_the_verifiers_failure() -> None:
    assert Zygote.inherited(environ={}) is None
    with pytest.raises(Exception, match="is not the zygote's socket"):
        Zygote.inherited(environ={"AGENT_EVAL_ZYGOTE_FD": "not-a-number"})


def _state(pid: int) -> str:
    return process_state(pid) or "gone"


@pytest.mark.parametrize("spared_first", [True, False])
def test_orphans_are_reaped_and_a_spared_child_stays_a_zombie(spared_first: bool) -> None:
    def exited_child() -> int:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        while _state(pid) != "Z":
            time.sleep(0.005)
        return pid

    def check() -> dict[str, Any]:
        # Whether the spared child is first in line decides how the others are found.
        first = exited_child()
        others = [exited_child() for _ in range(3)]
        spared, orphans = (first, others) if spared_first else (others[-1], [first, *others[:-1]])
        _reap_orphans({spared})
        return {"orphans": [_state(pid) for pid in orphans], "spared": _state(spared)}

    # In a process of its own: the reaping takes every exited child but the spared.
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            os.write(write_end, json.dumps(check()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        facts = json.loads(handle.read())
    os.waitpid(pid, 0)
    assert facts == {"orphans": ["gone", "gone", "gone"], "spared": "Z"}
