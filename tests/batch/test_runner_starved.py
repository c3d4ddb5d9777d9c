"""A runner that runs out of time on a crowded machine is charged its timeout unless the
machine kept it waiting for a CPU.

Through the container runner on the fake engine: the engine reports the runner's
threads' run-queue wait, the host's CPU pressure is fixed, and the attempt is judged
as a batch judges it. A runner asleep (hung on a model that never answers) at high
pressure is the agent's timeout; one whose threads waited for a CPU is starved, the
machine's, and tried again; on a quiet machine a timeout is a timeout; where the
engine could not measure the threads, the pressure alone decides and the record says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.batch import runner_container
from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import run_schedule
from agent_eval.engine.fake import FakeEngine, Outcome
from agent_eval.engine.run_queue import RunQueue
from agent_eval.models import AttemptRecord, RunnerConfig
from tests.batch.test_schedule import FakeVerifier, plan

PIN = "sha256:" + "a" * 64


class FixedPressure:
    """The host's CPU pressure over any interval: *share*."""

    def __init__(self, share: float | None) -> None:
        self._share = share

    def open(self) -> FixedPressure:
        return self

    def share(self, seconds: float) -> float | None:
        return self._share


def queue(waiting_s: float, on_cpu_s: float) -> RunQueue:
    return RunQueue(
        seconds=60.0,
        on_cpu_s=on_cpu_s,
        waiting_s=waiting_s,
        last_part_s=60.0,
        last_part_on_cpu_s=on_cpu_s,
        last_part_waiting_s=waiting_s,
    )


HUNG = queue(waiting_s=0.01, on_cpu_s=0.04)
KEPT_WAITING = queue(waiting_s=41.0, on_cpu_s=19.0)


def first_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pressure: float, measured: RunQueue | None
) -> AttemptRecord:
    monkeypatch.setattr(runner_container, "PressureWindow", FixedPressure(pressure))
    engine = FakeEngine(default_outcome=Outcome(timeout=True, exit_code=137, run_queue=measured))
    image = engine.add_image(tags=("runner:test",))
    config = RunnerConfig.model_validate(
        {
            "schemaVersion": 1,
            "executable": "/opt/runner/bin/run",
            "args": [],
            "envAllowlist": [],
            "expectedRunner": {"name": "fake", "version": "1"},
            "expectedModel": {"id": "none", "settings": {}},
            "submissionTimeoutMs": 60_000,
            "batchTimeoutMs": 3_600_000,
            "runtimePath": "/var/run/docker.sock",
            "runnerImage": "agent-eval/runner@" + PIN,
            "verifierImage": PIN,
        }
    )
    (tmp_path / "consumer").mkdir()
    runner = ContainerRunner(
        engine,
        config=config,
        image_id=image,
        consumer_dir=tmp_path / "consumer",
        batch_id="b",
        environment={},
    )
    batch = plan(tmp_path, slots=1, retry_budget=0, run_ids=[plan(tmp_path).run_ids[0]])
    receipt = run_schedule(batch, on_this_engine(runner, FakeVerifier()))
    return receipt.runs[0].attempts[0]


def test_a_hung_runner_on_a_crowded_machine_is_charged_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = first_attempt(tmp_path, monkeypatch, 0.97, HUNG)
    assert first.failureCategory == "timeout" and first.infrastructureKind is None
    used = first.resources
    assert used is not None and not used.starved and used.starvedBasis == "run-queue"
    assert (used.hostCpuPressure, used.lastPartRunQueueWaitSeconds) == (0.97, 0.01)
    said = " ".join(d.message for d in first.diagnostics)
    assert "97 %" in said and "did not keep it waiting" in said, said


def test_a_runner_kept_waiting_for_a_cpu_on_a_crowded_machine_is_starved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = first_attempt(tmp_path, monkeypatch, 0.97, KEPT_WAITING)
    assert (first.failureCategory, first.infrastructureKind) == ("infrastructure", "starved")
    used = first.resources
    assert used is not None and used.starved and used.starvedBasis == "run-queue"
    assert (used.runQueueWaitSeconds, used.lastPartSeconds, used.lastPartCpuSeconds) == (
        41.0,
        60.0,
        19.0,
    )
    said = " ".join(d.message for d in first.diagnostics)
    assert "starved the runner" in said and "waited 41.0 s for a CPU" in said, said


def test_a_runner_kept_waiting_on_a_quiet_machine_is_only_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = first_attempt(tmp_path, monkeypatch, 0.1, KEPT_WAITING)
    assert first.failureCategory == "timeout"
    assert first.resources is not None and not first.resources.starved
    assert not any("starved" in d.message for d in first.diagnostics)


def test_an_unmeasured_runner_on_a_crowded_machine_fails_closed_as_the_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = first_attempt(tmp_path, monkeypatch, 0.97, None)
    assert (first.failureCategory, first.infrastructureKind) == ("infrastructure", "starved")
    used = first.resources
    assert used is not None and used.starvedBasis == "host-pressure"
    assert used.runQueueWaitSeconds is None and used.lastPartSeconds is None
    said = " ".join(d.message for d in first.diagnostics)
    assert "not measured: the pressure alone decided" in said, said
