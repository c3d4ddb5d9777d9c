"""Each scenario's child is forked by the verification's fork server, as the parent's own.

The server never imports the solution (only a forked child does); a server a
solution process killed, stopped or re-limited (it runs as the same UID) is
woken or replaced, so the next scenario still starts; and the server is never
counted as the solution's on its clock. Run on this machine, without the
privilege drop and without kill(-1) (the verifier container's tests cover
those).
"""

from __future__ import annotations

import os
import resource
import signal
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval.grading.effects import EffectCall, Refused
from agent_eval.verification.runtime import parent
from agent_eval.verification.runtime.child import fork_supported
from agent_eval.verification.runtime.job import Isolation, Job
from agent_eval.verification.runtime.parent import ChildOpener, ChildProcess

pytestmark = pytest.mark.skipif(not fork_supported(), reason="the fork server needs Linux")

SOLUTION = """
import os

with open(os.environ["IMPORTS_LOG"], "a") as log:
    log.write(f"{os.getpid()}\\n")


def ids():
    return [os.getpid(), os.getppid(), os.getsid(0)]
"""


def _refuse(name: str, call: EffectCall) -> Refused:
    return Refused("no effects")


def _job(tmp_path: Path, isolation: Isolation | None = None) -> Job:
    solution = tmp_path / "solution"
    solution.mkdir(parents=True)
    (solution / "solution.py").write_text(textwrap.dedent(SOLUTION), encoding="utf-8")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return Job(
        task_id="t",
        grader_path=tmp_path / "grader.py",
        task_path=tmp_path / "task.json",
        solution_dir=solution,
        scratch_dir=scratch,
        result_path=tmp_path / "result.json",
        isolation=isolation or Isolation(),
    )


@pytest.fixture
def imports_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The server's environment is the parent's pins only; the log's path reaches the
    # solution through the directory it is imported from instead.
    log = tmp_path / "imports.log"
    monkeypatch.setattr(parent, "DETERMINISM", {**parent.DETERMINISM, "IMPORTS_LOG": str(log)})
    return log


@pytest.fixture
def opener(tmp_path: Path, imports_log: Path) -> Iterator[ChildOpener]:
    made = ChildOpener(_job(tmp_path), "solution")
    yield made
    made.close()


def _scenario(opener: ChildOpener) -> list[int]:
    process: ChildProcess = opener("scenario", None)
    try:
        ids = process.call("ids", [], {}, _refuse, None)
    finally:
        process.close(_refuse)
    assert isinstance(ids, list)
    return [int(i) for i in ids]


def test_each_child_is_forked_by_one_server_as_the_parents_own_and_alone_imports_the_solution(
    opener: ChildOpener, imports_log: Path
) -> None:
    first = _scenario(opener)
    assert opener.server is not None
    server = opener.server.pid
    second = _scenario(opener)
    assert opener.server.pid == server and opener.server.forked == 2
    for pid, ppid, sid in (first, second):
        # The parent's own child (it reaps it and reads its exit status), in its own session.
        assert (ppid, sid) == (os.getpid(), pid)
        assert pid != server
    assert first[0] != second[0]
    # Only the children imported the solution, once each; never the server.
    assert imports_log.read_text().split() == [str(first[0]), str(second[0])]


def test_a_killed_server_is_replaced_and_the_next_scenario_starts(opener: ChildOpener) -> None:
    _scenario(opener)
    assert opener.server is not None and opener.server.pid is not None
    killed = opener.server.pid
    os.kill(killed, signal.SIGKILL)
    _scenario(opener)
    assert opener.server.pid not in (None, killed)


def test_a_stopped_server_is_woken(opener: ChildOpener) -> None:
    _scenario(opener)
    assert opener.server is not None and opener.server.pid is not None
    stopped = opener.server.pid
    os.kill(stopped, signal.SIGSTOP)
    started = time.monotonic()
    _scenario(opener)
    assert opener.server.pid == stopped and time.monotonic() - started < 30


def test_a_server_whose_limits_were_lowered_is_replaced_before_a_child_inherits_them(
    opener: ChildOpener,
) -> None:
    _scenario(opener)
    assert opener.server is not None and opener.server.pid is not None
    tampered = opener.server.pid
    soft, hard = resource.prlimit(tampered, resource.RLIMIT_STACK)
    lowered = 1 << 20 if soft == resource.RLIM_INFINITY else soft // 2
    resource.prlimit(tampered, resource.RLIMIT_STACK, (lowered, hard))
    _scenario(opener)
    assert opener.server.pid not in (None, tampered)


def test_a_servers_failure_before_any_child_is_the_verifiers(
    tmp_path: Path, imports_log: Path
) -> None:
    # A drop to root is refused: the server cannot isolate itself.
    opener = ChildOpener(_job(tmp_path, Isolation(drop_privileges=True, child_uid=0)), "solution")
    try:
        with pytest.raises(parent.VerifierBroken, match="fork server did not start"):
            opener("scenario", None)
    finally:
        opener.close()


def test_without_a_fork_server_each_child_is_a_fresh_interpreter(
    tmp_path: Path, imports_log: Path
) -> None:
    opener = ChildOpener(_job(tmp_path), "solution", fork=False)
    try:
        pid, ppid, sid = _scenario(opener)
    finally:
        opener.close()
    assert opener.server is None and (ppid, sid) == (os.getpid(), pid)
    assert imports_log.read_text().split() == [str(pid)]


def test_the_server_is_never_on_the_solutions_clock(
    tmp_path: Path, imports_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As PID-namespace root every process but the parent and init is counted,
    # but for the server (its CPU time, and its children's, is the verifier's).
    opener = ChildOpener(_job(tmp_path), "solution")
    try:
        pid, _, _ = _scenario(opener)
        assert opener.server is not None and opener.server.pid is not None
        server = opener.server.pid
        namespace = [server, pid, 4242]
        monkeypatch.setattr(parent, "namespace_pids", lambda: list(namespace))
        counted = ChildOpener(_job(tmp_path / "x", Isolation(kill_all_on_cleanup=True)), "m")
        counted.server = opener.server
        assert counted.solution_pids() == [pid, 4242]
        counted.server = None
    finally:
        opener.close()
