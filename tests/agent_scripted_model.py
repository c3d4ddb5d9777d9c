"""Test support: one scheduled run of a real agent CLI against a scripted model, end to end.

The agent's real runner image (``images/runners/<agent>``) is built, then a
test image FROM its id adds ``tests/data/agents/<agent>/model_server.py``. The
runner command starts that server on 127.0.0.1 inside the container before
exec'ing the adapter, so the container keeps network ``none``. The run goes
through the batch's own schedule, runner container and docker verifier, for
one task; the server appends every request to a log file in the workspace
that is not an allowed output (so it is refused, never collected).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import BatchPlan, ScheduledTask, run_schedule
from agent_eval.consumer.archives import PreparedConsumer, TaskMaterial, prepare_consumer
from agent_eval.digests import solution_digest, solution_files
from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.engine.docker_engine import connect_local_engine
from agent_eval.images.build import build_runner_image
from agent_eval.layout import CONSUMER_MOUNT, IN_CONTAINER_CONSUMER, SOLUTION_MOUNT
from agent_eval.models import ModelIdentity, Receipt, RunnerIdentity
from agent_eval.packing import build_archives
from agent_eval.project import find_project
from agent_eval.reference.config import reference_config
from agent_eval.suite.tasks import load_suite
from agent_eval.verification.container.run import VerifierSetup
from agent_eval.verification.container.verifier import ContainerVerifier

ROOT = Path(__file__).resolve().parents[1]
TASK = "forms"
WRONG_CASE = "greets-username"
PORT = 8765
MODEL_DIR = "/opt/scripted-model"
REQUEST_LOG = ".model-requests.jsonl"
"""In the workspace, outside allowedOutputPaths: the collection refuses it."""
NOW = datetime(2026, 11, 30, tzinfo=UTC)

_TEST_DOCKERFILE = f"""\
ARG BASE
FROM ${{BASE}}
COPY model_server.py script.json {MODEL_DIR}/
"""


@pytest.fixture(scope="module")
def engine() -> Iterator[ContainerEngine]:
    connected = connect_local_engine()
    yield connected
    connected.close()


def scripted_image(engine: ContainerEngine, agent: str, work: Path) -> str:
    """The agent's real runner image plus its scripted model server (built with no network)."""
    runner_image = build_runner_image(engine, ROOT, agent)
    context = work / "scripted-image"
    context.mkdir(parents=True)
    shutil.copyfile(ROOT / "tests" / "data" / "agents" / agent / "model_server.py",
                    context / "model_server.py")  # fmt: skip
    fixtures = ROOT / "fixtures" / TASK
    script = {
        "port": PORT,
        "log": f"{SOLUTION_MOUNT}/{REQUEST_LOG}",
        "file": f"{SOLUTION_MOUNT}/solution.py",
        "first": (fixtures / WRONG_CASE / "solution.py").read_text(encoding="utf-8"),
        "repair": (fixtures / "correct" / "solution.py").read_text(encoding="utf-8"),
    }
    (context / "script.json").write_text(json.dumps(script), encoding="utf-8")
    (context / "Dockerfile").write_text(_TEST_DOCKERFILE, encoding="utf-8")
    return engine.build_image(
        context,
        tag=f"agent-eval/test-scripted-{agent}:local",
        buildargs={"BASE": runner_image},
        labels={"agent-eval.image": f"test-scripted-{agent}"},
    )


def prepared_consumer(engine: ContainerEngine, work: Path) -> PreparedConsumer:
    """The batch's consumer for the one task: library, guides, catalog, prompt and contract."""
    project = find_project(ROOT)
    task = load_suite(project.tasks, graders_dir=project.graders).task(TASK)
    archives = build_archives(ROOT / "packages", work / "archives")
    verifier = reference_config(
        engine, "oracle", project_root=ROOT, runtime_path="/var/run/docker.sock"
    )
    guides = {
        p.name: p / "GUIDE.md"
        for p in sorted(project.packages.iterdir())
        if (p / "GUIDE.md").is_file()
    }
    return prepare_consumer(
        engine,
        verifier_image=verifier.verifierImage,
        root=work / "consumer",
        stage=work / "stage",
        archives_dir=work / "archives",
        archives=archives,
        dependency_lock=ROOT / "packages" / "requirements.lock",
        guides=guides,
        tasks=[
            TaskMaterial(
                task.id, task.render_prompt(str(IN_CONTAINER_CONSUMER.docs)), task.contract_text
            )
        ],
        batch_id="agent-cli-tests",
    )


@dataclass(frozen=True)
class ScriptedAgent:
    """How to start one agent's adapter behind its scripted model."""

    name: str
    image: str
    adapter: str
    model: ModelIdentity
    version: str
    environment: dict[str, str]
    """The allowlisted variables' values, as the batch would pass them."""
    adapter_args: tuple[str, ...]


@dataclass(frozen=True)
class RunResult:
    receipt: Receipt
    batch_dir: Path
    requests: dict[int, list[dict[str, Any]]]
    """The scripted model's request log of each attempt."""


def run_one(
    engine: ContainerEngine,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    mode: str,
    tmp_path: Path,
    timeout_s: float = 90.0,
) -> RunResult:
    """One scheduled run of TASK (first attempt and, when the rules allow, a repair)."""
    project = find_project(ROOT)
    task = load_suite(project.tasks, graders_dir=project.graders).task(TASK)
    base = reference_config(
        engine, "oracle", project_root=ROOT, runtime_path="/var/run/docker.sock"
    )
    args = [
        "-B", f"{MODEL_DIR}/model_server.py", f"{MODEL_DIR}/script.json", mode, "--",
        "/usr/bin/python3", "-B", "-m", agent.adapter, "--model", agent.model.id,
        *(f"--setting={k}={json.dumps(v)}" for k, v in agent.model.settings.items()),
        *agent.adapter_args,
    ]  # fmt: skip
    config = base.model_copy(
        update={
            "args": args,
            "envAllowlist": sorted(agent.environment),
            "runnerImage": agent.image,
            "expectedRunner": RunnerIdentity(name=agent.name, version=agent.version),
            "expectedModel": agent.model,
            "network": "none",
        }
    )
    batch_id = f"{agent.name}-{mode}-{uuid.uuid4().hex[:8]}"
    runner = ContainerRunner(
        engine,
        config=config,
        image_id=agent.image,
        consumer_dir=consumer.root,
        batch_id=batch_id,
        environment=agent.environment,
    )
    (tmp_path / "verifier").mkdir()
    verifier = ContainerVerifier(
        VerifierSetup(
            engine=engine,
            image=base.verifierImage,
            consumer_dir=consumer.root,
            graders_dir=project.graders,
            batch_id=batch_id,
            staging_root=tmp_path / "verifier",
        ),
        tasks_dir=project.tasks,
    )
    batch_dir = tmp_path / "batch"
    batch_dir.mkdir()
    receipt = Receipt(
        schemaVersion=1, batchId=batch_id, status="running", reasons=[], selfTest=False,
        createdAt=NOW, updatedAt=NOW, suiteDigest=None, evaluatorDigest=None,
        archivesDigest=None, consumerLockDigest=None, runner=config.expectedRunner,
        model=config.expectedModel, runnerImage=None, verifierImage=None, scheduledRuns=1,
        firstSuccesses=0, finalSuccesses=0, runs=[], reviewDecisions=[],
    )  # fmt: skip
    run_id = f"{TASK}-1"
    plan = BatchPlan(
        batch_dir=batch_dir,
        work_dir=tmp_path / "work",
        run_ids=[run_id],
        tasks={
            TASK: ScheduledTask(
                task.spec, task.render_prompt(str(IN_CONTAINER_CONSUMER.docs)), None
            )
        },
        runner=config.expectedRunner,
        model=config.expectedModel,
        submission_timeout_s=timeout_s,
        batch_timeout_s=600.0,
        concurrency=1,
        consumer_dir_in_runner=CONSUMER_MOUNT,
        output_dir_in_runner=SOLUTION_MOUNT,
        protected_digest=lambda: solution_digest(solution_files(consumer.root)),
        receipt=receipt,
    )
    try:
        final = run_schedule(plan, runner, verifier)
        assert list_leftovers(engine, batch_id) == []
        requests = {}
        for attempt in (1, 2):
            log = tmp_path / "work" / run_id / f"attempt-{attempt}" / REQUEST_LOG
            if log.is_file():
                requests[attempt] = [json.loads(line) for line in log.read_text().splitlines()]
        return RunResult(final, batch_dir, requests)
    finally:
        shutil.rmtree(tmp_path / "work", ignore_errors=True)


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under *root* whose bytes contain *needle*."""
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]
