"""On the real engine, a dead lease planted under a live run's name removes none of its containers.

A ``tasks verify`` run has no run directory a planted one would collide with: a
directory named like it, in a project ``agent-eval cleanup`` is pointed at,
with a dead lease of its own making (another token, or none), must leave the
live run's container on the engine; the run's own lease, once its owner is
gone, is what removes it.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import pytest

from agent_eval.batch.lease import verification_lease
from agent_eval.batch.reaper import reap
from agent_eval.engine import ContainerSpec, ResourceLimits, remove_leftovers
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.models import Lease
from tests.batch.test_reaper import NOW

pytestmark = pytest.mark.docker


def _dead(lease: Lease, **changes: object) -> Lease:
    """*lease* as its owner would leave it had it been killed (its pid names no process)."""
    finished = subprocess.Popen(["true"])
    finished.wait()
    return lease.model_copy(update={"pid": finished.pid, **changes})


def test_a_planted_dead_lease_named_like_a_live_tasks_verify_run_leaves_its_container(
    engine: DockerEngine, base_image: str, tmp_path: Path
) -> None:
    planted = tmp_path / "planted"
    image = engine.image_id(base_image)
    assert image is not None
    with verification_lease(tmp_path / "project", engine, lambda: NOW) as live:
        try:
            created = engine.create(
                ContainerSpec(
                    image=image,
                    command=("sleep", "60"),
                    role="verifier",
                    batch_id=live.batch_id,
                    run_id="probe-1",
                    limits=ResourceLimits(pids=16, memory_bytes=64 << 20, nano_cpus=10**8),
                )
            )
            (found,) = engine.list_containers(live.batch_id)
            assert (found.container_id, found.lease_token) == (created, live.token)
            written = read_model(
                tmp_path / "project" / live.batch_id / "lease.json", Lease, what="lease"
            )
            for token in (secrets.token_hex(16), None):
                write_model_atomic(
                    planted / live.batch_id / "lease.json", _dead(written, token=token)
                )
                (reaped,) = reap(planted, engine, clock=lambda: NOW)
                assert reaped.containers == [], reaped
                assert [c.container_id for c in engine.list_containers(live.batch_id)] == [created]
            # The run's own lease, dead, is the one that removes it.
            write_model_atomic(planted / live.batch_id / "lease.json", _dead(written))
            (reaped,) = reap(planted, engine, clock=lambda: NOW)
            assert (reaped.containers, reaped.problems) == ([created], []), reaped
            assert engine.list_containers(live.batch_id) == []
        finally:
            remove_leftovers(engine, live.batch_id)
    assert engine.lease_token is None
    assert list((tmp_path / "project").iterdir()) == []
