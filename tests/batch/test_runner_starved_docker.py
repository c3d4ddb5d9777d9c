"""Against a real engine on a crowded machine: a runner that sleeps past its limit is
charged its timeout, and one that wants the CPU the whole time is starved.

The load rig's busy loops share the CPU with every container (with six loops on two
cores, a busy container gets about two sevenths of a CPU) and keep the host's CPU
pressure high. The sleeping runner's threads wait next to nothing for a CPU, so the
crowded host alone does not make its timeout the machine's; the busy one's threads
wait most of their time on a run queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import run_schedule
from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.engine.pressure import STARVED_PRESSURE, STARVED_WAIT_SHARE
from agent_eval.models import AttemptRecord, RunnerConfig, RunnerResources
from tests.batch.test_schedule import FakeVerifier, plan
from tests.conftest import BASE_IMAGE, engine_unavailable
from tests.loadrig import LoadRig, rig_available

pytestmark = [pytest.mark.docker, pytest.mark.serial]

LOOPS = 6
"""Busy loops in the containers' cgroup: a crowded two-core machine, not a frozen one."""
LIMIT_MS = 6000
PIN = "sha256:" + "a" * 64


@pytest.fixture
def crowded(engine: ContainerEngine, base_image: str) -> Iterator[LoadRig]:
    if (reason := rig_available()) is not None:
        engine_unavailable(f"the load rig cannot run: {reason}")
    with LoadRig(LOOPS, bound_s=600) as rig:
        yield rig


def attempt_of(engine: ContainerEngine, tmp_path: Path, command: list[str]) -> AttemptRecord:
    image = engine.image_id(BASE_IMAGE)
    assert image is not None
    config = RunnerConfig.model_validate(
        {
            "schemaVersion": 1,
            "executable": command[0],
            "args": command[1:],
            "envAllowlist": [],
            "expectedRunner": {"name": "probe", "version": "1"},
            "expectedModel": {"id": "none", "settings": {}},
            "submissionTimeoutMs": LIMIT_MS,
            "batchTimeoutMs": 600_000,
            "runtimePath": "/var/run/docker.sock",
            "runnerImage": "agent-eval/runner@" + PIN,
            "verifierImage": PIN,
        }
    )
    (tmp_path / "consumer").mkdir()
    batch_id = f"starved-{tmp_path.name[-20:]}".replace("_", "-")
    runner = ContainerRunner(
        engine,
        config=config,
        image_id=image,
        consumer_dir=tmp_path / "consumer",
        batch_id=batch_id,
        environment={},
    )
    batch = plan(
        tmp_path,
        slots=1,
        retry_budget=0,
        run_ids=[plan(tmp_path).run_ids[0]],
        submission_timeout_ms=LIMIT_MS,
    )
    try:
        receipt = run_schedule(batch, on_this_engine(runner, FakeVerifier()))
    finally:
        assert list_leftovers(engine, batch_id) == []
    return receipt.runs[0].attempts[0]


def measured(first: AttemptRecord) -> tuple[RunnerResources, float]:
    """The runner's resources and its threads' run-queue wait share of its last part."""
    used = first.resources
    assert used is not None and used.starvedBasis == "run-queue", used
    assert used.lastPartSeconds and used.lastPartRunQueueWaitSeconds is not None, used
    # The crowd is real: else a timeout is a timeout whatever the runner did.
    assert (used.hostCpuPressure or 0) >= STARVED_PRESSURE, used
    return used, used.lastPartRunQueueWaitSeconds / used.lastPartSeconds


def test_a_runner_asleep_past_its_limit_on_a_crowded_machine_is_charged_its_timeout(
    engine: ContainerEngine, tmp_path: Path, crowded: LoadRig
) -> None:
    first = attempt_of(engine, tmp_path, ["/usr/bin/sleep", "600"])
    used, share = measured(first)
    assert first.failureCategory == "timeout" and not used.starved, first.diagnostics
    assert share < 0.05, used  # its last half: asleep, its start (waiting too) left out
    assert any("did not keep it waiting" in d.message for d in first.diagnostics)


def test_a_runner_that_wants_the_cpu_on_a_crowded_machine_is_starved(
    engine: ContainerEngine, tmp_path: Path, crowded: LoadRig
) -> None:
    first = attempt_of(engine, tmp_path, ["/bin/sh", "-c", "while :; do :; done"])
    used, share = measured(first)
    assert share >= STARVED_WAIT_SHARE, used
    assert (first.failureCategory, first.infrastructureKind) == ("infrastructure", "starved")
    assert used.starved and used.lastPartCpuSeconds is not None
