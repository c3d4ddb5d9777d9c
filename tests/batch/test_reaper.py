"""The reaper acts on a dead batch's own directory only, and leaves nothing of it.

A lease is the reaper's instruction to remove containers by label and a work
directory, so its batch id is an identifier, never a path: a crafted id (a path
out of the project, an absolute path) is refused when the lease is read, and a
well-formed id that is not the name of the directory holding the lease (another
batch's) is acted on not at all. A work directory that is a link is removed as the
link. A batch killed before its first receipt is closed with one saying so, and its
reserved space goes with its lease.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_eval.batch.lease import this_process
from agent_eval.batch.reaper import reap
from agent_eval.engine import ContainerSpec
from agent_eval.engine.fake import FakeRuntime
from agent_eval.errors import EngineUnavailableError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.models import Lease, NodeIdentity, Receipt

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def dead_lease(batch_id: str) -> Lease:
    finished = subprocess.Popen(["true"])
    finished.wait()  # its pid names no live process now
    return this_process("placeholder", NOW).model_copy(
        update={"pid": finished.pid, "batchId": batch_id}
    )


def leave_container(engine: FakeRuntime, batch_id: str) -> None:
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
