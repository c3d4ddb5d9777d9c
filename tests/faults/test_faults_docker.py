"""Whole batches under real faults: every one ends in a receipt that tells what happened.

The engine drops connections, refuses them, is killed and comes back, stays
away, cannot remove a container; the evidence disk fills; the operator
signals the batch, twice, or kills it outright. Each time the receipt's final
status says which, the runs finished before the fault keep digests that
check-agent-eval verifies (it rejects the batch only for what the fault
made incomplete), the run in flight is an infrastructure failure and never
the agent's, no traceback is printed, and no container is left once the
batch, or the cleanup after it, is done.

The faults are made on a private dockerd, a proxy in front of the default
engine's socket, a tmpfs of the test's own, and processes the test started.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.engine.docker_engine import ANSWER_TIMEOUT_S, connect_local_engine
from agent_eval.engine.policy import LABEL_BATCH, LABEL_ROLE
from agent_eval.images.build import image_for_checkout
from agent_eval.models import Receipt
from tests.batches import BIN, check, project_copy, write_config
from tests.faults.engines import (
    EngineProxy,
    PrivateEngine,
    chaos,
    containers_of,
    remove_containers,
)
from tests.paths import REPO

pytestmark = pytest.mark.docker

# The rules a batch cut short fails; anything else (a digest, an archive, an
# identity) would mean the fault corrupted what was already recorded.
OUTCOME_RULES = {
    "batch-completed",
    "schedule",
    "infrastructure",
    "first-successes",
    "final-successes",
    "not-self-test",
}


def slow_oracle(seconds: float) -> list[str]:
    """Runner args: the oracle reference runner, after a pause that keeps its container alive."""
    return [
        "-B",
        "-c",
        f"import runpy, sys, time; time.sleep({seconds}); "
        "sys.argv = ['reference_runner.py', *sys.argv[1:]]; "
        "runpy.run_path('/opt/agent-eval/reference_runner.py', run_name='__main__')",
        "oracle",
    ]


@pytest.fixture(scope="module")
def private_engine(engine: ContainerEngine) -> Iterator[PrivateEngine]:
    private = PrivateEngine()
    try:
        private.start()
        # Saved by id and loaded with the same id: the configs pin exactly these.
        private.load_images(
            [image_for_checkout(engine, REPO, name) for name in ("reference-runner", "verifier")]
        )
        yield private
    finally:
        private.close()


@pytest.fixture
def running_engine(private_engine: PrivateEngine) -> Iterator[PrivateEngine]:
    """The private engine, started again after a test that stopped it."""
    if not private_engine.answers():
        private_engine.start()
    yield private_engine
    if not private_engine.answers():
        private_engine.start()


_LAUNCHED: list[Batch] = []


@pytest.fixture(autouse=True)
def no_batch_outlives_its_test() -> Iterator[None]:
    yield
    while _LAUNCHED:
        batch = _LAUNCHED.pop()
        process = batch.process
        if process.poll() is None:
            process.terminate()  # it closes its receipt and removes its containers
            try:
                process.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate(timeout=60)
        else:
            process.communicate(timeout=60)
        # A test that failed before its batch's containers were reaped leaves them to no
        # one: on a shared engine a later test would find them.
        for run_dir in batch._run_dirs():
            remove_containers(batch.socket, f"{LABEL_BATCH}={run_dir.name}")


class Batch:
    """One eval-agent process over a fresh checkout, watched from outside."""

    def __init__(
        self, tmp_path: Path, engine: ContainerEngine, project: Path | None = None, **config: Any
    ) -> None:
        self.project = project or project_copy(tmp_path)
        self.config = write_config(engine, tmp_path / "runner.json", "oracle", **config)
        self.socket = str(config.get("runtimePath", "/var/run/docker.sock"))
        self.process = subprocess.Popen(
            [
                str(BIN / "eval-agent"),
                "--runner-config",
                str(self.config),
                "--project",
                str(self.project),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _LAUNCHED.append(self)
        self.stderr = ""

    @property
    def run_dir(self) -> Path:
        found = self._run_dirs()
        assert len(found) == 1, found
        return found[0]

    def _run_dirs(self) -> list[Path]:
        return [p for p in (self.project / "evidence").glob("*") if not p.name.startswith(".")]

    def receipt(self) -> Receipt:
        return Receipt.model_validate_json((self.run_dir / "receipt.json").read_bytes())

    def runs_recorded(self) -> int:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            return len(json.loads((self.run_dir / "receipt.json").read_text())["runs"])
        return 0

    def runner_running(self) -> bool:
        if not self._run_dirs():
            return False
        return any(
            c["State"] == "running"
            for c in containers_of(self.socket, f"{LABEL_ROLE}=runner")
            if c["Labels"].get(LABEL_BATCH) == self.run_dir.name
        )

    def unrecorded_files(self) -> list[Path]:
        """Files below ``runs/`` of runs the receipt has no attempt of yet (runs in flight)."""
        with contextlib.suppress(OSError, ValueError, AssertionError):
            runs = json.loads((self.run_dir / "receipt.json").read_text())["runs"]
            recorded = {r["runId"] for r in runs if r["attempts"]}
            return [
                path
                for path in (self.run_dir / "runs").rglob("*")
                if path.is_file()
                and path.relative_to(self.run_dir / "runs").parts[0] not in recorded
            ]
        return []

    def when(self, condition: Callable[[], bool], timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"eval-agent ended early: {self.process.communicate()}")
            if condition():
                return
            time.sleep(0.1)
        raise AssertionError("the batch never got there")

    def kill_when(self, condition: Callable[[], bool], timeout_s: float = 300) -> None:
        """SIGKILL the batch in a state where *condition* holds.

        The batch is stopped before *condition* is read again, so what it saw is what the
        kill leaves: a batch still at work could record a run between the look and the kill."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.when(condition, timeout_s=max(deadline - time.monotonic(), 0.1))
            self.process.send_signal(signal.SIGSTOP)
            threads_stopped(self.process.pid)
            if condition():
                self.process.kill()
                self.process.communicate(timeout=60)
                return
            self.process.send_signal(signal.SIGCONT)

    def mid_run(self, finished: int = 1) -> None:
        """Wait until *finished* runs are recorded and a runner container is running."""
        self.when(lambda: self.runs_recorded() >= finished and self.runner_running())

    def finish(self, timeout_s: float = 600) -> tuple[int, dict[str, Any]]:
        out, self.stderr = self.process.communicate(timeout=timeout_s)
        assert "Traceback" not in self.stderr, self.stderr
        assert out.count("\n") == 1, (out, self.stderr)
        return self.process.returncode, json.loads(out)

    def cleanup(self, socket: str | None = None) -> tuple[int, list[dict[str, Any]], str]:
        done = subprocess.run(
            [
                str(BIN / "agent-eval"),
                "cleanup",
                "--project",
                str(self.project),
                "--runtime-path",
                socket or self.socket,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr

    def left(self) -> list[dict[str, object]]:
        return containers_of(self.socket, f"{LABEL_BATCH}={self.run_dir.name}")


def assert_finished_runs_intact(batch: Batch, *, in_flight_infrastructure: bool | None) -> Receipt:
    """The finished runs verify, the runs in flight blame the infrastructure, none a timeout.

    *in_flight_infrastructure* None: whether a run was in flight when the batch stopped is
    the moment's (an attempt tried again may have finished first)."""
    receipt = batch.receipt()
    assert receipt.runs, "no run was recorded"
    in_flight = [r for r in receipt.runs if r.attempts[-1].infrastructureStatus == "failed"]
    if in_flight_infrastructure is not None:
        assert bool(in_flight) == in_flight_infrastructure, receipt.runs
    for run in receipt.runs:
        if run not in in_flight:
            assert run.finalSuccess, run.runId
        # The oracle never fails: anything but success is the fault's, and says so.
        for attempt in run.attempts:
            assert attempt.failureCategory in {None, "infrastructure"}, (run.runId, attempt)
    code, decision = check(batch.run_dir / "receipt.json")
    rules = {reason.split(":")[0] for reason in decision["reasons"]}
    unexpected = [r for r in decision["reasons"] if r.split(":")[0] not in OUTCOME_RULES]
    assert code == 1 and rules <= OUTCOME_RULES, unexpected
    return receipt


# --- The engine's connection ------------------------------------------------------------


def test_waits_that_drop_and_an_engine_that_refuses_for_a_moment_blame_no_one(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    with EngineProxy("/var/run/docker.sock", tmp_path / "engine.sock") as proxy:
        batch = Batch(tmp_path, engine, runtimePath=str(proxy.path), args=slow_oracle(1.5))
        batch.mid_run(finished=0)
        with chaos(proxy, drop_every_s=0.7, refuse_every_s=4):
            code, line = batch.finish()
    assert proxy.dropped > 18 and proxy.refused_for_s > 0, (proxy.dropped, proxy.refused_for_s)
    assert (code, line["status"], line["finalSuccesses"]) == (0, "completed", 18), batch.stderr
    code, decision = check(batch.run_dir / "receipt.json")
    assert [r.split(":")[0] for r in decision["reasons"]] == ["not-self-test"]
    assert list_leftovers(engine, batch.run_dir.name) == []


@pytest.mark.parametrize("away_s", [1, 8], ids=["back-before-the-runner-ends", "runner-ends-away"])
def test_an_engine_killed_mid_run_and_back_costs_no_run_the_attempt_is_tried_again(
    engine: ContainerEngine, running_engine: PrivateEngine, tmp_path: Path, away_s: float
) -> None:
    """Away for 8 s, the runner (3 s of sleep, then the oracle) ends while the engine is
    gone: what it printed then may never reach the engine, and is never the agent's. The
    attempts the engine failed are run again in fresh containers once it is back, and each
    earlier try is kept with the engine named as its cause."""
    batch = Batch(tmp_path, engine, runtimePath=str(running_engine.socket), args=slow_oracle(3))
    batch.mid_run(finished=1)
    running_engine.kill(signal.SIGKILL)
    time.sleep(away_s)
    running_engine.start()
    code, line = batch.finish()
    assert (code, line["status"], line["finalSuccesses"]) == (0, "completed", 18), batch.stderr
    receipt = batch.receipt()
    tries = [t for run in receipt.runs for a in run.attempts for t in a.infrastructureTries]
    assert tries and all(t.kind == "engine" for t in tries), tries
    assert "trying again in fresh containers" in batch.stderr
    code, decision = check(batch.run_dir / "receipt.json")
    assert [r.split(":")[0] for r in decision["reasons"]] == ["not-self-test"], decision
    assert batch.left() == []
    assert not (batch.run_dir / "lease.json").exists()


def test_an_engine_frozen_for_a_while_mid_run_delays_the_batch_and_blames_no_one(
    engine: ContainerEngine, running_engine: PrivateEngine, tmp_path: Path
) -> None:
    batch = Batch(tmp_path, engine, runtimePath=str(running_engine.socket), args=slow_oracle(1))
    batch.mid_run(finished=1)
    running_engine.kill(signal.SIGSTOP, wait=False)
    time.sleep(8)
    running_engine.kill(signal.SIGCONT, wait=False)
    code, line = batch.finish()
    assert (code, line["status"], line["finalSuccesses"]) == (0, "completed", 18), batch.stderr
    code, decision = check(batch.run_dir / "receipt.json")
    assert [r.split(":")[0] for r in decision["reasons"]] == ["not-self-test"]
    assert batch.left() == []


def test_an_engine_away_past_the_batch_leaves_a_lease_that_cleanup_reaps_once_it_is_back(
    engine: ContainerEngine, running_engine: PrivateEngine, tmp_path: Path
) -> None:
    batch = Batch(tmp_path, engine, runtimePath=str(running_engine.socket), args=slow_oracle(3))
    batch.mid_run(finished=1)
    running_engine.kill(signal.SIGKILL)
    code, line = batch.finish()
    assert (code, line["status"]) == (1, "infrastructure-failure"), batch.stderr
    receipt = assert_finished_runs_intact(batch, in_flight_infrastructure=True)
    assert any(r.startswith("cleanup:") for r in receipt.reasons), receipt.reasons
    # Gone for good: the batch says so, rather than spend its whole budget of tries.
    [gone] = [r for r in receipt.reasons if r.startswith("the engine is gone: ")]
    assert str(running_engine.socket) in gone, gone
    assert sum(a.tries for run in receipt.runs for a in run.attempts) < 10, receipt.runs
    assert (batch.run_dir / "lease.json").is_file()
    # While the engine is away, cleanup says so and keeps the lease.
    code, reaped, said = batch.cleanup()
    assert (code, reaped) == (1, []) and str(running_engine.socket) in said, said
    assert (batch.run_dir / "lease.json").is_file()
    running_engine.start()
    code, reaped, _ = batch.cleanup()
    assert code == 0, reaped
    assert [(r["batch"], r["problems"]) for r in reaped] == [(receipt.batchId, [])]
    assert batch.left() == []
    assert not (batch.run_dir / "lease.json").exists()
    assert batch.receipt().status == "infrastructure-failure"


def test_a_container_the_engine_cannot_remove_stops_the_batch_until_cleanup_can(
    engine: ContainerEngine, running_engine: PrivateEngine, tmp_path: Path
) -> None:
    batch = Batch(tmp_path, engine, runtimePath=str(running_engine.socket), args=slow_oracle(3))
    batch.mid_run(finished=1)
    container = next(
        c
        for c in containers_of(batch.socket, f"{LABEL_ROLE}=runner")
        if c["State"] == "running" and c["Labels"].get(LABEL_BATCH) == batch.run_dir.name
    )
    pin = running_engine.data_root / "containers" / str(container["Id"]) / "pinned"
    pin.write_text("the engine cannot delete an immutable file\n")
    subprocess.run(["chattr", "+i", str(pin)], check=True)
    try:
        code, line = batch.finish()
        assert (code, line["status"]) == (1, "infrastructure-failure"), batch.stderr
        # The run whose container stayed is tried again in fresh ones; the stop is cleanup's.
        receipt = assert_finished_runs_intact(batch, in_flight_infrastructure=None)
        assert any(
            r.startswith("cleanup:") and str(container["Id"])[:12] in r for r in receipt.reasons
        ), receipt.reasons
        assert (batch.run_dir / "lease.json").is_file()
    finally:
        subprocess.run(["chattr", "-i", str(pin)], check=True)
    code, reaped, _ = batch.cleanup()
    assert code == 0 and reaped[0]["containersRemoved"], reaped
    assert batch.left() == []
    assert not (batch.run_dir / "lease.json").exists()


def test_an_engine_socket_that_never_answers_is_not_run_naming_it(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    silent = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(silent))
    listener.listen(16)  # connections are accepted by the kernel and never answered
    try:
        project = project_copy(tmp_path)
        config = write_config(engine, tmp_path / "runner.json", "oracle", runtimePath=str(silent))
        done = subprocess.run(
            [str(BIN / "eval-agent"), "--runner-config", str(config), "--project", str(project)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        listener.close()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    line = json.loads(done.stdout)
    receipt = Receipt.model_validate_json(Path(line["receipt"]).read_bytes())
    assert receipt.status == "not-run"
    assert any(str(silent) in r and "does not answer within 8 s" in r for r in receipt.reasons), (
        receipt.reasons
    )


# --- The evidence disk --------------------------------------------------------------------


def fill(directory: Path) -> Path:
    """Write zeros into *directory* until its disk is full."""
    filler = directory / ".filler"
    with contextlib.suppress(OSError), filler.open("wb") as handle:
        while True:
            handle.write(bytes(1024 * 1024))
            handle.flush()
    with contextlib.suppress(OSError), filler.open("ab") as handle:
        while True:
            handle.write(bytes(4096))
            handle.flush()
    return filler


@contextlib.contextmanager
def evidence_on_tmpfs(tmp_path: Path, size: str) -> Iterator[tuple[Path, Path]]:
    """A clean checkout whose evidence directory is a tmpfs of *size* (the test's own)."""
    project = project_copy(tmp_path)
    evidence = project / "evidence"
    evidence.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(evidence)]
    subprocess.run(mount, check=True)
    try:
        yield project, evidence
    finally:
        subprocess.run(["umount", "-l", str(evidence)], check=False)


def test_an_evidence_disk_that_fills_mid_batch_ends_it_with_a_receipt_naming_the_disk(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    # Room for the free-space floor and the consumer, not for a filler.
    with evidence_on_tmpfs(tmp_path, "320m") as (project, evidence):
        batch = Batch(tmp_path, engine, project=project, args=slow_oracle(2))
        batch.mid_run(finished=1)
        filler = fill(evidence)
        code, line = batch.finish()
        assert (code, line["status"]) == (1, "infrastructure-failure"), batch.stderr
        receipt = batch.receipt()
        assert any("full" in r for r in receipt.reasons), receipt.reasons
        filler.unlink()
        assert_finished_runs_intact(batch, in_flight_infrastructure=True)
        assert batch.left() == []
        assert not (evidence / ".work" / receipt.batchId).exists()


def test_an_evidence_disk_made_read_only_mid_batch_ends_with_exit_3_and_its_line(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    """Not even the final receipt can be written: exit 3, the one line, no traceback; once
    the disk is writable again, cleanup closes the receipt as abandoned."""
    with evidence_on_tmpfs(tmp_path, "512m") as (project, evidence):
        batch = Batch(tmp_path, engine, project=project, args=slow_oracle(2))
        batch.mid_run(finished=1)
        subprocess.run(["mount", "-o", "remount,ro", str(evidence)], check=True)
        code, line = batch.finish()
        assert (code, line["status"]) == (3, "running"), (line, batch.stderr)
        assert "read-only" in batch.stderr, batch.stderr
        assert batch.left() == []
        subprocess.run(["mount", "-o", "remount,rw", str(evidence)], check=True)
        code, reaped, _ = batch.cleanup()
        assert code == 0 and reaped, reaped
        assert batch.receipt().status == "abandoned"
        assert not (batch.run_dir / "lease.json").exists()


def test_an_evidence_disk_below_the_floor_is_not_run_saying_how_much_is_free(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    with evidence_on_tmpfs(tmp_path, "64m") as (project, _):
        batch = Batch(tmp_path, engine, project=project)
        code, line = batch.finish()
        assert (code, line["status"]) == (2, "not-run"), batch.stderr
        (reason,) = batch.receipt().reasons
        assert re.match(r"disk: only 6\d MiB free where the evidence is written \(", reason)
        assert reason.endswith("a batch needs at least 256 MiB"), reason
        assert batch.left() == []


# --- Signals to eval-agent --------------------------------------------------------------


@pytest.mark.parametrize(
    ("signals", "status", "reason"),
    [
        ([signal.SIGINT], "interrupted", "interrupted by the operator (Ctrl-C)"),
        ([signal.SIGINT, signal.SIGINT], "interrupted", "interrupted by the operator (Ctrl-C)"),
        ([signal.SIGTERM], "interrupted", "stopped by SIGTERM"),
        ([signal.SIGTERM, signal.SIGINT], "interrupted", "stopped by SIGTERM"),
    ],
    ids=["SIGINT", "SIGINT-twice", "SIGTERM", "SIGTERM-then-SIGINT"],
)
def test_a_signalled_batch_closes_its_receipt_and_leaves_nothing(
    engine: ContainerEngine, tmp_path: Path, signals: list[int], status: str, reason: str
) -> None:
    batch = Batch(tmp_path, engine, args=slow_oracle(2))
    batch.mid_run(finished=1)
    for signum in signals:
        batch.process.send_signal(signum)
        time.sleep(0.3)
    code, line = batch.finish()
    assert (code, line["status"]) == (1, status), batch.stderr
    receipt = assert_finished_runs_intact(batch, in_flight_infrastructure=True)
    assert any(reason in r for r in receipt.reasons), receipt.reasons
    assert batch.left() == []
    # Kept only when the cleanup could not be confirmed: the reasons and stderr say why.
    assert not (batch.run_dir / "lease.json").exists(), (receipt.reasons, batch.stderr)


@pytest.mark.parametrize("signals", [[signal.SIGINT], [signal.SIGINT, signal.SIGINT]])
def test_a_batch_signalled_while_it_prepares_closes_a_receipt_with_no_runs(
    engine: ContainerEngine, tmp_path: Path, signals: list[int]
) -> None:
    batch = Batch(tmp_path, engine, args=slow_oracle(2))
    work = batch.project / "evidence" / ".work"
    # The work directory appears when the consumer is being prepared.
    batch.when(lambda: work.is_dir() and any(work.iterdir()), timeout_s=120)
    for signum in signals:
        batch.process.send_signal(signum)
        time.sleep(0.05)
    code, line = batch.finish()
    assert (code, line["status"]) == (1, "interrupted"), batch.stderr
    receipt = batch.receipt()
    assert receipt.runs == [] and any("before the first run" in r for r in receipt.reasons)
    assert batch.left() == []
    assert not (work / receipt.batchId).exists()
    assert not (batch.run_dir / "lease.json").exists()


def test_a_killed_batch_is_closed_as_abandoned_by_the_next_one(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    batch = Batch(tmp_path, engine, args=slow_oracle(2))
    # Killed once a run in flight has written files its receipt does not hold yet (they
    # are the killed batch's state, never read as files added to it) while a container of
    # it is there to reap: between its runner's end and its verifier's start there is none.
    batch.kill_when(
        lambda: batch.runs_recorded() >= 1 and bool(batch.unrecorded_files()) and bool(batch.left())
    )
    killed = batch.run_dir
    assert batch.receipt().status == "running" and batch.unrecorded_files()
    assert batch.left(), "SIGKILL left no container to reap"
    # The next batch in the same project reaps it before its own first run.
    after = subprocess.run(
        [
            str(BIN / "eval-agent"),
            "--runner-config",
            str(write_config(engine, tmp_path / "oracle.json", "oracle")),
            "--project",
            str(batch.project),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert after.returncode == 0 and "Traceback" not in after.stderr, after.stderr
    assert f"reaped batch {killed.name}: marked its receipt abandoned" in after.stderr
    receipt = Receipt.model_validate_json((killed / "receipt.json").read_bytes())
    assert receipt.status == "abandoned" and "is gone" in receipt.reasons[-1]
    assert containers_of(batch.socket, f"{LABEL_BATCH}={killed.name}") == []
    assert not (killed / "lease.json").exists()
    assert not (batch.project / "evidence" / ".work" / killed.name).exists()
    code, decision = check(killed / "receipt.json")
    rules = {r.split(":")[0] for r in decision["reasons"]}
    assert code == 1 and "batch-completed" in rules and rules <= OUTCOME_RULES, decision
    assert any(note.startswith("in-flight: ") for note in decision["notes"]), decision


def stopped(engine: PrivateEngine, within_s: float = 10.0) -> None:
    assert engine.process is not None
    threads_stopped(engine.process.pid, within_s)


def threads_stopped(pid: int, within_s: float = 10.0) -> None:
    """Wait until every thread of *pid* is stopped: SIGSTOP reaches each thread in its
    turn, and one already at work may answer first."""
    tasks = Path(f"/proc/{pid}/task")
    deadline = time.monotonic() + within_s
    while True:
        states = set()
        for task in tasks.iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                states.add((task / "stat").read_text().rpartition(")")[2].split()[0])
        if states <= {"T", "t"}:
            return
        assert time.monotonic() < deadline, f"the threads of {pid} are {states}"
        time.sleep(0.05)


def test_the_engine_says_it_is_unreachable_only_when_it_does_not_answer(
    running_engine: PrivateEngine,
) -> None:
    """What a batch asks before it takes an engine for gone: a ping, bounded in time."""
    engine = connect_local_engine(str(running_engine.socket))
    try:
        assert engine.unreachable() is None
        running_engine.kill(signal.SIGSTOP, wait=False)
        try:
            stopped(running_engine)
            began = time.monotonic()
            frozen = engine.unreachable()
            assert frozen is not None and "does not answer within" in frozen, frozen
            assert time.monotonic() - began < ANSWER_TIMEOUT_S + 5
        finally:
            running_engine.kill(signal.SIGCONT, wait=False)
        assert engine.unreachable() is None
        running_engine.kill(signal.SIGKILL)
        gone = engine.unreachable()
        assert gone is not None and str(running_engine.socket) in gone, gone
    finally:
        engine.close()
