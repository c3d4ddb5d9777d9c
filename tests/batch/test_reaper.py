"""The reaper acts on a dead batch's own directory only, and leaves nothing of it.

A lease is the reaper's instruction to remove containers by label and a work
directory, so its batch id is an identifier, never a path: a crafted id (a path
out of the project, an absolute path) is refused when the lease is read, and a
well-formed id that is not the name of the directory holding the lease (another
batch's) is acted on not at all. Only containers carrying both the batch label and
the lease's token are removed, and a lease without a token removes none. A work
directory that is a link is removed as the link, and a work root that is a link is
refused, nothing behind it touched, as is a run directory swapped for a link
mid-sweep. A batch killed before its first receipt is closed with one saying
so, and its reserved space goes with its lease. A ``tasks verify`` run holds a
lease too: its containers carry its token, its own dead lease removes them (and
writes no receipt), and a dead lease planted under its name removes none.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_eval.batch.lease import held, this_process, verification_lease
from agent_eval.batch.reaper import reap
from agent_eval.engine import ContainerSpec, ContainerSummary
from agent_eval.engine.fake import FakeRuntime
from agent_eval.errors import EngineUnavailableError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.models import Lease, NodeIdentity, Receipt

NOW = datetime(2026, 12, 1, tzinfo=UTC)
TOKEN = "5e" * 16
"""The token of every dead lease here, and the lease label of the containers its batch left."""


def dead_lease(batch_id: str, token: str | None = TOKEN) -> Lease:
    finished = subprocess.Popen(["true"])
    finished.wait()  # its pid names no live process now
    return this_process("placeholder", NOW).model_copy(
        update={"pid": finished.pid, "batchId": batch_id, "token": token}
    )


def leave_container(engine: FakeRuntime, batch_id: str, token: str | None = TOKEN) -> None:
    """A container of *batch_id* created on a connection bound to a lease with *token*."""
    engine.lease_token = token
    engine.leave_container(
        ContainerSpec(
            image=engine.store.add_image(tags=("runner:test",)),
            command=("sleep", "1000"),
            role="runner",
            batch_id=batch_id,
            run_id="forms-1",
        )
    )


def dead_run_dir(tmp_path: Path, lease_names: str = "old-batch") -> tuple[Path, Path]:
    """An evidence directory holding run directory old-batch, with a dead owner's lease."""
    evidence = tmp_path / "evidence"
    run_dir = evidence / "old-batch"
    run_dir.mkdir(parents=True)
    write_model_atomic(run_dir / "lease.json", dead_lease(lease_names))
    return evidence, run_dir


@pytest.mark.parametrize("crafted", ["../../victim", "/tmp/victim", "..", "a/b", ".hidden", ""])
def test_a_batch_id_that_is_not_an_identifier_is_refused(crafted: str) -> None:
    with pytest.raises(ValidationError):
        this_process(crafted, NOW)


def test_a_crafted_lease_touches_nothing_outside_its_directory(tmp_path: Path) -> None:
    evidence = tmp_path / "project" / "evidence"
    victim = tmp_path / "victim"
    (victim / "keep").mkdir(parents=True)
    run_dir = evidence / "old-batch"
    run_dir.mkdir(parents=True)
    lease = dead_lease("old-batch").model_dump(mode="json")
    lease["batchId"] = "../../../victim"
    (run_dir / "lease.json").write_text(json.dumps(lease))
    engine = FakeRuntime()
    (reaped,) = reap(evidence, engine, clock=lambda: NOW)
    assert reaped.problems and "lease" in reaped.problems[0], reaped
    assert (victim / "keep").is_dir()
    assert (run_dir / "lease.json").exists()


def test_a_lease_naming_another_batch_is_not_acted_on(tmp_path: Path) -> None:
    evidence, run_dir = dead_run_dir(tmp_path, lease_names="other-batch")
    engine = FakeRuntime()
    leave_container(engine, "other-batch")
    (evidence / ".work" / "other-batch").mkdir(parents=True)
    (reaped,) = reap(evidence, engine, clock=lambda: NOW)
    assert "names batch 'other-batch', not 'old-batch'" in reaped.problems[0]
    assert len(engine.list_containers("other-batch")) == 1
    assert (evidence / ".work" / "other-batch").is_dir()
    assert (run_dir / "lease.json").exists()


def test_a_work_directory_that_is_a_link_is_removed_as_the_link(tmp_path: Path) -> None:
    evidence, run_dir = dead_run_dir(tmp_path)
    write_model_atomic(
        run_dir / "receipt.json", Receipt.opened(batch_id="old-batch", created_at=NOW)
    )
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "keep").mkdir(parents=True)
    (evidence / ".work").mkdir()
    (evidence / ".work" / "old-batch").symlink_to(elsewhere)
    (reaped,) = reap(evidence, FakeRuntime(), clock=lambda: NOW)
    assert reaped.problems == [] and reaped.abandoned
    assert (elsewhere / "keep").is_dir()
    assert not (evidence / ".work" / "old-batch").is_symlink()


def test_a_work_root_that_is_a_link_is_refused_and_nothing_behind_it_is_removed(
    tmp_path: Path,
) -> None:
    evidence, run_dir = dead_run_dir(tmp_path)
    outside = tmp_path / "outside"
    (outside / "old-batch" / "keep").mkdir(parents=True)
    evidence.joinpath(".work").symlink_to(outside, target_is_directory=True)
    (reaped,) = reap(evidence, FakeRuntime(), clock=lambda: NOW)
    assert (outside / "old-batch" / "keep").is_dir()
    assert (evidence / ".work").is_symlink()
    assert any(f"{evidence / '.work'} is a symbolic link" in p for p in reaped.problems), reaped
    assert not reaped.work_dir_removed
    assert (run_dir / "lease.json").exists()  # kept: a later run tries again


def test_links_inside_a_work_directory_are_removed_as_links(tmp_path: Path) -> None:
    evidence, _run_dir = dead_run_dir(tmp_path)
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    work = evidence / ".work" / "old-batch" / "deep"
    work.mkdir(parents=True)
    (work / "into").symlink_to(outside, target_is_directory=True)
    (reaped,) = reap(evidence, FakeRuntime(), clock=lambda: NOW)
    assert reaped.problems == [] and reaped.work_dir_removed, reaped
    assert (outside / "keep").is_dir()
    assert not (evidence / ".work").exists()


def test_a_planted_directory_named_like_a_live_batch_removes_none_of_its_containers(
    tmp_path: Path,
) -> None:
    # tasks-verify batches have no run directory here: a dead lease planted under one's
    # name, with a token of its own making, must not reach that batch's containers.
    evidence = tmp_path / "evidence"
    planted = evidence / "tasks-verify-1"
    planted.mkdir(parents=True)
    write_model_atomic(planted / "lease.json", dead_lease("tasks-verify-1", token="0" * 32))
    engine = FakeRuntime()
    leave_container(engine, "tasks-verify-1", token="7a" * 16)
    leave_container(engine, "tasks-verify-1", token=None)
    (reaped,) = reap(evidence, engine, clock=lambda: NOW)
    assert reaped.containers == []
    assert len(engine.list_containers("tasks-verify-1")) == 2


def test_only_containers_with_the_batch_label_and_the_lease_token_are_removed(
    tmp_path: Path,
) -> None:
    evidence, _run_dir = dead_run_dir(tmp_path)
    engine = FakeRuntime()
    leave_container(engine, "old-batch")
    leave_container(engine, "old-batch", token="7a" * 16)
    leave_container(engine, "other-batch")
    (reaped,) = reap(evidence, engine, clock=lambda: NOW)
    assert len(reaped.containers) == 1 and reaped.problems == [], reaped
    assert [c.lease_token for c in engine.list_containers("old-batch")] == ["7a" * 16]
    assert len(engine.list_containers("other-batch")) == 1


def test_a_lease_without_a_token_removes_no_container_and_is_kept(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    run_dir = evidence / "old-batch"
    run_dir.mkdir(parents=True)
    write_model_atomic(run_dir / "lease.json", dead_lease("old-batch", token=None))
    (evidence / ".work" / "old-batch").mkdir(parents=True)
    engine = FakeRuntime()
    leave_container(engine, "old-batch", token=None)
    (reaped,) = reap(evidence, engine, clock=lambda: NOW)
    assert reaped.abandoned and reaped.work_dir_removed
    assert "has no token" in reaped.problems[0] and reaped.containers == []
    assert len(engine.list_containers("old-batch")) == 1
    assert (run_dir / "lease.json").exists()


def test_a_batch_killed_before_its_first_receipt_is_closed_and_nothing_stays(
    tmp_path: Path,
) -> None:
    evidence, run_dir = dead_run_dir(tmp_path)
    (run_dir / ".reserve").write_bytes(b"\0" * 4096)
    engine = FakeRuntime()
    leave_container(engine, "old-batch")
    (reaped,) = reap(evidence, engine, clock=lambda: NOW)
    assert reaped.problems == [] and reaped.abandoned, reaped
    receipt = read_model(run_dir / "receipt.json", Receipt, what="receipt")
    assert receipt.status == "abandoned" and receipt.runs == []
    assert "is gone" in receipt.reasons[-1]
    assert not (run_dir / "lease.json").exists() and not (run_dir / ".reserve").exists()
    assert engine.list_containers("old-batch") == []
    # Once closed, a later reaper has nothing to do.
    assert reap(evidence, engine, clock=lambda: NOW) == []


def test_a_dead_cluster_batch_is_swept_on_every_node_engine_reachable_and_the_others_listed(
    tmp_path: Path,
) -> None:
    evidence, run_dir = dead_run_dir(tmp_path)
    driver, node_engine = FakeRuntime(), FakeRuntime()
    node_engine.address = "unix:///node-1/docker.sock"
    leave_container(node_engine, "old-batch")
    digest = "sha256:" + "a" * 64
    nodes = [
        NodeIdentity(
            node=name,
            engine=address,
            evaluatorDigest=digest,
            runnerImageId=digest,
            verifierImageId=digest,
            gatewayImageId=None,
        )
        for name, address in (("node-1", node_engine.address), ("node-2", "unix:///n2.sock"))
    ]
    opened = Receipt.opened(batch_id="old-batch", created_at=NOW)
    write_model_atomic(run_dir / "receipt.json", opened.model_copy(update={"nodes": nodes}))
    reached: list[str] = []

    @contextlib.contextmanager
    def connect(address: str) -> Iterator[FakeRuntime]:
        reached.append(address)
        if address != node_engine.address:
            raise EngineUnavailableError(f"no engine answers at {address}")
        yield node_engine

    (reaped,) = reap(evidence, driver, clock=lambda: NOW, nodes=connect)
    assert reached == [node_engine.address, "unix:///n2.sock"]
    assert [c.removed for c in node_engine.containers.values()] == [True]
    assert len(reaped.containers) == 1 and reaped.problems == []
    (unreached,) = reaped.unreached
    assert unreached.startswith(
        "node node-2: its engine at unix:///n2.sock could not be reached from here (no engine "
        "answers at unix:///n2.sock)"
    ), unreached
    assert "node-2" in reaped.describe()
    # What could not be reached is listed, not retried forever: the node's own reaper
    # removes the batch's containers there when the node next prepares for a batch.
    assert not (run_dir / "lease.json").exists()


_KILLED_WRITER = """
import os, sys, time
from datetime import UTC, datetime
from pathlib import Path
from agent_eval.batch.lease import held, this_process, verification_lease
from agent_eval.evidence_io import write_model_atomic
from agent_eval.models import Receipt
run_dir = Path(sys.argv[1])
now = datetime(2026, 12, 1, tzinfo=UTC)
write_model_atomic(run_dir / "lease.json", this_process("old-batch", now))
os.fsync = lambda fd: time.sleep(600)  # held between the temp file and its rename
write_model_atomic(run_dir / "receipt.json", Receipt.opened(batch_id="old-batch", created_at=now))
"""


def test_a_batch_killed_during_its_first_receipt_write_leaves_no_temp_file(
    tmp_path: Path,
) -> None:
    evidence = tmp_path / "evidence"
    run_dir = evidence / "old-batch"
    run_dir.mkdir(parents=True)
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(run_dir)])
    deadline = time.monotonic() + 60
    while not list(run_dir.glob(".receipt.json.*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert list(run_dir.glob(".receipt.json.*.tmp")), "the writer never reached its rename"
    (reaped,) = reap(evidence, FakeRuntime(), clock=lambda: NOW)
    assert reaped.problems == [] and len(reaped.temp_files) == 1, reaped
    assert sorted(p.name for p in run_dir.iterdir()) == ["receipt.json"]
    assert read_model(run_dir / "receipt.json", Receipt, what="receipt").status == "abandoned"


def test_a_live_batchs_temp_files_are_left_alone(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    run_dir = evidence / "live-batch"
    (run_dir / "runs" / "t-1").mkdir(parents=True)
    write_model_atomic(run_dir / "lease.json", this_process("live-batch", NOW))
    writing = run_dir / "runs" / "t-1" / ".result.json.abcd1234.tmp"
    writing.write_text("{")
    assert reap(evidence, FakeRuntime(), clock=lambda: NOW) == []
    assert writing.exists()


_TEMP_NAME = st.builds(
    lambda target, random: f".{target}.{random}.tmp",
    st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True),
    st.from_regex(r"[a-z0-9_]{8}", fullmatch=True),
)
_OTHER_NAME = st.from_regex(r"[A-Za-z0-9_.-]{1,30}", fullmatch=True).filter(
    lambda n: not re.fullmatch(r"\..+\.[a-z0-9_]{8}\.tmp", n, re.DOTALL) and n not in (".", "..")
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    temps=st.lists(st.tuples(st.integers(0, 2), _TEMP_NAME), max_size=5),
    others=st.lists(st.tuples(st.integers(0, 2), _OTHER_NAME), max_size=5),
)
def test_a_dead_batchs_sweep_removes_its_temp_files_and_nothing_else(
    tmp_path_factory: pytest.TempPathFactory,
    temps: list[tuple[int, str]],
    others: list[tuple[int, str]],
) -> None:
    evidence, run_dir = dead_run_dir(tmp_path_factory.mktemp("sweep"))
    outside = run_dir.parent.parent / "outside"
    outside.mkdir()
    (outside / ".receipt.json.abcd1234.tmp").write_text("kept")
    (run_dir / "linked").symlink_to(outside, target_is_directory=True)
    folders = [run_dir, run_dir / "runs", run_dir / "runs" / "t-1"]
    kept = set()
    for depth, name in others:
        if name in ("lease.json", "linked", "runs", "t-1"):
            continue
        path = folders[depth] / name
        folders[depth].mkdir(parents=True, exist_ok=True)
        path.write_text("kept")
        kept.add(path)
    for depth, name in temps:
        folders[depth].mkdir(parents=True, exist_ok=True)
        (folders[depth] / name).write_text("half")
    (reaped,) = reap(evidence, FakeRuntime(), clock=lambda: NOW)
    assert reaped.problems == [], reaped
    left = {p for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()}
    assert not [p for p in left if re.fullmatch(r"\..+\.[a-z0-9_]{8}\.tmp", p.name, re.DOTALL)]
    assert kept <= left
    assert (outside / ".receipt.json.abcd1234.tmp").exists()


def test_a_batch_bound_to_an_engine_labels_its_containers_with_its_lease_token(
    tmp_path: Path,
) -> None:
    engine = FakeRuntime()
    with held(tmp_path, "new-batch", lambda: NOW) as lease:
        lease.bind_engine(engine)
        leave_container(engine, "new-batch", token=engine.lease_token)
        written = read_model(tmp_path / "lease.json", Lease, what="lease")
        assert written.token is not None and written.token == lease.token
        (container,) = engine.list_containers("new-batch")
        assert container.lease_token == written.token
        lease.release()


class Swapping(FakeRuntime):
    """While the reaper lists the batch's containers, its run directory is swapped for a
    link to a copy outside (whoever writes into the project could)."""

    def __init__(self, run_dir: Path, outside: Path) -> None:
        super().__init__()
        self.run_dir, self.outside = run_dir, outside

    def list_containers(self, batch_id: str | None = None) -> list[ContainerSummary]:
        if not self.run_dir.is_symlink():
            self.run_dir.rename(self.outside)
            self.run_dir.symlink_to(self.outside, target_is_directory=True)
        return super().list_containers(batch_id)


def test_a_run_directory_swapped_for_a_link_mid_sweep_loses_nothing_behind_it(
    tmp_path: Path,
) -> None:
    evidence, run_dir = dead_run_dir(tmp_path)
    (run_dir / ".reserve").write_bytes(b"\0" * 16)
    outside = tmp_path / "outside"
    (reaped,) = reap(evidence, Swapping(run_dir, outside), clock=lambda: NOW)
    assert any(f"{run_dir} is a symbolic link" in p for p in reaped.problems), reaped
    assert (outside / "lease.json").is_file() and (outside / ".reserve").is_file()


def test_a_dead_tasks_verify_lease_removes_its_own_containers_its_directory_and_no_more(
    tmp_path: Path,
) -> None:
    evidence = tmp_path / "evidence"
    run_dir = evidence / "tasks-verify-1"
    run_dir.mkdir(parents=True)
    lease = dead_lease("tasks-verify-1").model_copy(update={"kind": "tasks-verify"})
    write_model_atomic(run_dir / "lease.json", lease)
    engine = FakeRuntime()
    leave_container(engine, "tasks-verify-1")
    leave_container(engine, "tasks-verify-1", token="7a" * 16)
    leave_container(engine, "tasks-verify-1", token=None)
    (reaped,) = reap(evidence, engine, clock=lambda: NOW)
    assert reaped.problems == [] and len(reaped.containers) == 1, reaped
    assert not reaped.abandoned and not reaped.work_dir_removed
    assert sorted(c.lease_token for c in engine.list_containers("tasks-verify-1")) == [
        "",
        "7a" * 16,
    ]
    # No run directory: no receipt is written, and its directory goes with its lease.
    assert not run_dir.exists()


def test_a_tasks_verify_leases_directory_holding_more_is_left_once_its_lease_is_gone(
    tmp_path: Path,
) -> None:
    evidence = tmp_path / "evidence"
    run_dir = evidence / "tasks-verify-1"
    run_dir.mkdir(parents=True)
    lease = dead_lease("tasks-verify-1").model_copy(update={"kind": "tasks-verify"})
    write_model_atomic(run_dir / "lease.json", lease)
    (run_dir / "receipt.json").write_text("{}")
    (reaped,) = reap(evidence, FakeRuntime(), clock=lambda: NOW)
    assert reaped.problems == [], reaped
    assert sorted(p.name for p in run_dir.iterdir()) == ["receipt.json"]


@pytest.mark.parametrize("kind", ["tasks-verify", "reverify"])
def test_verification_containers_carry_their_leases_token_and_only_its_own_reaper_removes_them(
    tmp_path: Path, kind: Literal["tasks-verify", "reverify"]
) -> None:
    engine = FakeRuntime()
    planted = tmp_path / "planted"
    with verification_lease(tmp_path / "evidence", engine, lambda: NOW, kind=kind) as lease:
        assert lease.batch_id.startswith(f"{kind}-")
        leave_container(engine, lease.batch_id, token=engine.lease_token)
        (container,) = engine.list_containers(lease.batch_id)
        assert container.lease_token == lease.token
        written = read_model(
            tmp_path / "evidence" / lease.batch_id / "lease.json", Lease, what="lease"
        )
        assert (written.kind, written.token) == (kind, lease.token)
        # A dead lease planted under its name, in a project cleanup is pointed at, with a
        # token of its own: the live run's container stays.
        (planted / lease.batch_id).mkdir(parents=True)
        own = dead_lease(lease.batch_id, token="0" * 32).model_copy(update={"kind": kind})
        write_model_atomic(planted / lease.batch_id / "lease.json", own)
        (reaped,) = reap(planted, engine, clock=lambda: NOW)
        assert reaped.containers == [] and engine.list_containers(lease.batch_id) != []
        # Its own lease, its owner gone, is what removes it.
        dead = dead_lease(lease.batch_id, token=lease.token).model_copy(update={"kind": kind})
        write_model_atomic(planted / lease.batch_id / "lease.json", dead)
        (reaped,) = reap(planted, engine, clock=lambda: NOW)
        assert reaped.containers == [container.container_id], reaped
    # Nothing of it left: its lease and directory are given up.
    assert list((tmp_path / "evidence").iterdir()) == []


def test_a_tasks_verify_lease_stays_while_a_container_of_its_is_left(tmp_path: Path) -> None:
    engine = FakeRuntime()
    with verification_lease(tmp_path / "evidence", engine, lambda: NOW) as lease:
        leave_container(engine, lease.batch_id, token=engine.lease_token)
    assert (tmp_path / "evidence" / lease.batch_id / "lease.json").is_file()


def test_a_run_directory_swapped_for_a_link_before_its_receipt_is_closed_gets_none_behind_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evidence, run_dir = dead_run_dir(tmp_path)
    outside = tmp_path / "outside"

    def swap_then_sweep(directory: Path) -> list[Path]:
        run_dir.rename(outside)
        run_dir.symlink_to(outside, target_is_directory=True)
        return []

    monkeypatch.setattr("agent_eval.batch.reaper.remove_atomic_temp_files", swap_then_sweep)
    (reaped,) = reap(evidence, FakeRuntime(), clock=lambda: NOW)
    assert not reaped.abandoned
    assert any(f"{run_dir} is a symbolic link" in p for p in reaped.problems), reaped
    assert sorted(p.name for p in outside.iterdir()) == ["lease.json"]


def test_the_temp_files_sweep_goes_through_no_link_in_the_run_directory(tmp_path: Path) -> None:
    evidence, run_dir = dead_run_dir(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".receipt.json.abcd1234.tmp").write_text("theirs")
    (run_dir / "runs").symlink_to(outside, target_is_directory=True)
    (reaped,) = reap(evidence, FakeRuntime(), clock=lambda: NOW)
    assert reaped.problems == [] and reaped.temp_files == [], reaped
    assert (outside / ".receipt.json.abcd1234.tmp").read_text() == "theirs"


def test_a_lease_given_up_after_its_run_directory_became_a_link_leaves_the_one_behind_it(
    tmp_path: Path,
) -> None:
    run_dir, outside = tmp_path / "evidence" / "b-1", tmp_path / "outside"
    run_dir.mkdir(parents=True)
    with held(run_dir, "b-1", lambda: NOW) as lease:
        run_dir.rename(outside)
        run_dir.symlink_to(outside, target_is_directory=True)
        with pytest.raises(OSError, match=f"{run_dir} is a symbolic link"):
            lease.release()
    assert (outside / "lease.json").is_file()
