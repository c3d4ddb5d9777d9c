"""Against a real engine: a runner that breaks the protocol or the sandbox fails its own
attempt with the right category, is never repaired, never reaches the verifier, and
leaves no container behind. The consumer stays untouched (it is mounted read-only)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import BatchPlan, ScheduledTask, run_schedule
from agent_eval.batch.station import batch_consumer
from agent_eval.consumer.archives import PreparedConsumer, prepare_consumer
from agent_eval.digests import solution_digest, solution_files
from agent_eval.engine import ContainerEngine, ResourceLimits, list_leftovers
from agent_eval.layout import CONSUMER_MOUNT, IN_CONTAINER_CONSUMER, SOLUTION_MOUNT
from agent_eval.models import Receipt, TaskSpec
from agent_eval.packing import build_archives
from agent_eval.project import find_project
from agent_eval.reference.config import reference_config
from agent_eval.suite.tasks import load_suite
from agent_eval.verification.protocol import Verification
from tests.paths import REPO

pytestmark = pytest.mark.docker

NOW = datetime(2026, 11, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def consumer(engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory) -> PreparedConsumer:
    work = tmp_path_factory.mktemp("consumer")
    archives = build_archives(REPO / "packages", work / "archives")
    verifier = reference_config(
        engine, "oracle", project_root=REPO, runtime_path="/var/run/docker.sock"
    )
    return prepare_consumer(
        engine,
        verifier_image=verifier.verifierImage,
        root=work / "consumer",
        stage=work / "stage",
        archives_dir=work / "archives",
        archives=archives,
        dependency_lock=REPO / "packages" / "requirements.lock",
        guides={},
        batch_id="boundary-tests",
    )


class NoVerifier:
    name = "none"

    def api_catalog(self) -> Mapping[str, Any]:
        return {}

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        raise AssertionError(f"{run_id} must never reach the verifier")

    def cancel_all(self) -> None:
        pass


def run_once(
    engine: ContainerEngine,
    consumer: PreparedConsumer,
    tmp_path: Path,
    mode: str,
    timeout_s: float = 30.0,
    args: list[str] | None = None,
    limits: ResourceLimits | None = None,
) -> Receipt:
    project = find_project(REPO)
    task = load_suite(project.tasks, graders_dir=project.graders).task("forms")
    config = reference_config(engine, mode, project_root=REPO, runtime_path="/var/run/docker.sock")
    if args is not None:
        config = config.model_copy(update={"args": args})
    batch_id = f"boundary-{tmp_path.name[-20:]}".replace("_", "-")
    runner = ContainerRunner(
        engine,
        config=config,
        image_id=config.runnerImage,
        consumer_dir=consumer.root,
        batch_id=batch_id,
        environment={},
        limits=limits,
    )
    (tmp_path / "batch").mkdir()
    receipt = Receipt(
        schemaVersion=1, batchId=batch_id, status="running", reasons=[], selfTest=True,
        createdAt=NOW, updatedAt=NOW, suiteDigest=None, evaluatorDigest=None,
        archivesDigest=None, consumerLockDigest=None, runner=config.expectedRunner,
        model=config.expectedModel, runnerImage=None, verifierImage=None, scheduledRuns=1,
        firstSuccesses=0, finalSuccesses=0, runs=[], reviewDecisions=[],
    )  # fmt: skip
    plan = BatchPlan(
        batch_dir=tmp_path / "batch",
        work_dir=tmp_path / "work",
        run_ids=["forms-1"],
        tasks={"forms": ScheduledTask(task.spec, "Build the form.", None)},
        runner=config.expectedRunner,
        model=config.expectedModel,
        submission_timeout_ms=round(timeout_s * 1000),
        batch_timeout_ms=600_000,
        slots=1,
        consumer_dir_in_runner=CONSUMER_MOUNT,
        output_dir_in_runner=SOLUTION_MOUNT,
        protected_digest=lambda: solution_digest(solution_files(consumer.root)),
        receipt=receipt,
    )
    try:
        return run_schedule(plan, on_this_engine(runner, NoVerifier()))
    finally:
        assert list_leftovers(engine, batch_id) == []
        shutil.rmtree(tmp_path / "work", ignore_errors=True)


@pytest.mark.parametrize(
    ("how", "category", "message"),
    [
        ("silent", "invalid-response", "printed nothing"),
        ("two-objects", "invalid-response", "a second JSON value"),
        ("trailing-text", "invalid-response", "trailing text"),
        ("wrong-ids", "invalid-response", "not forms/forms-1"),
        ("oversized", "invalid-response", "larger than"),
        ("early-exit", "invalid-response", "exited with status 3"),
        ("score", "invalid-response", "score"),
        ("wrong-runner", "identity-mismatch", "runner reported"),
        ("wrong-model", "identity-mismatch", "model reported fallback-model"),
        ("symlink", "collection", "symbolic link"),
        ("hardlink", "collection", "hard link"),
        ("fifo", "collection", "special file"),
        ("traversal", "collection", "symbolic link"),
    ],
)
def test_a_misbehaving_runner_fails_its_attempt_without_a_repair(
    engine: ContainerEngine,
    consumer: PreparedConsumer,
    tmp_path: Path,
    how: str,
    category: str,
    message: str,
) -> None:
    receipt = run_once(engine, consumer, tmp_path, f"misbehave:{how}")
    (run,) = receipt.runs
    assert len(run.attempts) == 1 and not run.finalSuccess
    attempt = run.attempts[0]
    assert attempt.failureCategory == category
    assert any(message in d.message for d in attempt.diagnostics), attempt.diagnostics
    assert attempt.solutionFiles == [] and attempt.safetyPassed is None


def test_a_runner_past_its_time_limit_is_killed_from_outside(
    engine: ContainerEngine, consumer: PreparedConsumer, tmp_path: Path
) -> None:
    receipt = run_once(engine, consumer, tmp_path, "misbehave:sleep", timeout_s=2.0)
    attempt = receipt.runs[0].attempts[0]
    assert attempt.failureCategory == "timeout" and len(receipt.runs[0].attempts) == 1
    assert attempt.durationMs < 30_000


def test_a_runner_cannot_write_to_the_consumer(
    engine: ContainerEngine, consumer: PreparedConsumer, tmp_path: Path
) -> None:
    before = solution_digest(solution_files(consumer.root))
    receipt = run_once(engine, consumer, tmp_path, "misbehave:tamper")
    attempt = receipt.runs[0].attempts[0]
    assert attempt.protectedInputs is not None
    assert attempt.protectedInputs.before == attempt.protectedInputs.after == before
    assert not (consumer.root / "planted.txt").exists()
    assert attempt.failureCategory == "no-submission"


def test_the_null_runner_submits_nothing(
    engine: ContainerEngine, consumer: PreparedConsumer, tmp_path: Path
) -> None:
    receipt = run_once(engine, consumer, tmp_path, "null")
    assert receipt.runs[0].attempts[0].failureCategory == "no-submission"


def hog(mib: int) -> list[str]:
    """Runner args: touch *mib* MiB, hold them a second (the peak is sampled), print nothing."""
    return ["-B", "-c", f"import time; held = b'x' * ({mib} << 20); time.sleep(1.5)"]


def test_the_runners_limits_and_its_sampled_peak_memory_are_recorded(
    engine: ContainerEngine, consumer: PreparedConsumer, tmp_path: Path
) -> None:
    receipt = run_once(engine, consumer, tmp_path, "oracle", args=hog(150))
    resources = receipt.runs[0].attempts[0].resources
    assert resources is not None and not resources.oomKilled
    assert (resources.memoryLimitBytes, resources.cpus, resources.pidsLimit) == (
        2 << 30, 1.0, 512,
    )  # fmt: skip
    assert resources.peakMemoryBytes is not None and resources.peakMemoryBytes >= 150 << 20


def test_a_runner_killed_for_memory_says_so_and_names_its_limit(
    engine: ContainerEngine, consumer: PreparedConsumer, tmp_path: Path
) -> None:
    receipt = run_once(
        engine, consumer, tmp_path, "oracle", args=hog(256),
        limits=ResourceLimits(memory_bytes=64 << 20),
    )  # fmt: skip
    attempt = receipt.runs[0].attempts[0]
    assert attempt.resources is not None and attempt.resources.oomKilled
    assert attempt.failureCategory == "invalid-response" and len(receipt.runs[0].attempts) == 1
    assert any("killed the runner for memory (limit 64 MiB)" in d.message
               for d in attempt.diagnostics), attempt.diagnostics  # fmt: skip


def test_the_batch_s_consumer_has_its_library_compiled_by_the_image_s_interpreter(
    consumer: PreparedConsumer,
) -> None:
    """Each verification imports the library in several fresh processes: its bytecode is
    there, checked against the source's hash, and outside the RECORDs the lock binds."""
    major, minor = consumer.python.split(".")[:2]
    site = consumer.root / "site"
    modules = list(site.rglob("*.py"))
    assert modules
    for module in modules:
        pyc = module.parent / "__pycache__" / f"{module.stem}.cpython-{major}{minor}.pyc"
        assert pyc.read_bytes()[4:8] == (0b11).to_bytes(4, "little"), module
    assert not any("__pycache__" in p.read_text() for p in site.glob("*.dist-info/RECORD"))


def test_the_batch_s_consumer_holds_no_task_s_prompt(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    """Every runner reads the consumer: it must hold the library and its guides, never a
    task (an agent would read the other tasks' prompts and contracts)."""
    project = find_project(REPO)
    suite = load_suite(project.tasks, graders_dir=project.graders)
    archives = build_archives(REPO / "packages", tmp_path / "archives")
    verifier = reference_config(
        engine, "oracle", project_root=REPO, runtime_path="/var/run/docker.sock"
    )
    consumer = batch_consumer(
        engine, project, engine.resolve_image(verifier.verifierImage).image_id,
        tmp_path / "archives", archives, tmp_path / "work", "no-prompts",
    )  # fmt: skip
    files = [p for p in consumer.root.rglob("*") if p.is_file()]
    assert files and not (consumer.root / "tasks").exists()
    for task in suite.tasks:
        prompt = task.render_prompt(str(IN_CONTAINER_CONSUMER.docs))
        opening = prompt.strip().splitlines()[0]
        holding = [p for p in files if opening.encode() in p.read_bytes()]
        assert holding == [], (task.id, holding)
        assert not [p for p in files if task.contract_text.encode() in p.read_bytes()]
