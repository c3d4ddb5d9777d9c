"""The aider and mini-swe-agent runners, end to end, in their real images with their real CLIs.

Each test image is the agent's runner image plus a scripted model that a
wrapper starts on 127.0.0.1 inside the container, so the runner keeps
network none. One scheduled run of the forms task goes through the real
schedule, runner container, collection and docker verifier. Invariants:

* a model that writes the reference solution passes on the first attempt;
* a wrong first solution is repaired from feedback that names the failed
  assertions and carries none of the grader's values;
* a model that never finishes times out, is not repaired, and leaves no
  container behind;
* the credential reaches the model endpoint (its hash is in the server's
  log) and its value appears nowhere in the run directory;
* the request shape is the one each CLI is documented to use, and
  mini-swe-agent's shell imports the library under evaluation, not the
  agent's own packages.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import pytest

from agent_eval.batch.ports import RunnerOutcome
from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import BatchPlan, ScheduledTask, run_schedule
from agent_eval.consumer.archives import PreparedConsumer, TaskMaterial, prepare_consumer
from agent_eval.digests import solution_digest, solution_files
from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.engine.docker_engine import connect_local_engine
from agent_eval.images.build import build_runner_image, image_for_checkout
from agent_eval.layout import CONSUMER_MOUNT, IN_CONTAINER_CONSUMER, SOLUTION_MOUNT
from agent_eval.models import Receipt, RunnerConfig, RunnerRequest
from agent_eval.models.install_recipe import InstallRecipe
from agent_eval.packing import build_archives
from agent_eval.project import find_project
from agent_eval.suite.tasks import Suite, load_suite
from agent_eval.verification.container.run import VerifierSetup
from agent_eval.verification.container.verifier import ContainerVerifier
from tests.paths import DATA, REPO

pytestmark = pytest.mark.docker

DATA = DATA / "agents"
NOW = datetime(2026, 11, 30, tzinfo=UTC)
TASK = "forms"
NEGATIVE = "errors-not-rendered"
CANARY = "canary-" + hashlib.sha256(b"agent-eval aider mini").hexdigest()[:24]
MODEL = "openai/scripted-model"
# The grader's inputs and expected values for the forms task: never in feedback.
GRADER_VALUES = ("ann@example.org", "not-an-email", "twelve", "gold", "onerror", "pwned")


@dataclass(frozen=True)
class Agent:
    name: str
    module: str
    package: str
    settings: dict[str, Any] = field(default_factory=dict)


AGENTS = {
    "aider": Agent("aider", "aider", "aider-chat"),
    "mini-swe-agent": Agent(
        "mini-swe-agent", "mini_swe_agent", "mini-swe-agent", {"step_limit": 10}
    ),
}


@pytest.fixture(scope="module")
def engine(docker_client: docker.DockerClient) -> Iterator[ContainerEngine]:
    connected = connect_local_engine()
    yield connected
    connected.close()


@pytest.fixture(scope="module")
def suite() -> Suite:
    project = find_project(REPO)
    return load_suite(project.tasks, graders_dir=project.graders)


@pytest.fixture(scope="module")
def consumer(
    engine: ContainerEngine, suite: Suite, tmp_path_factory: pytest.TempPathFactory
) -> PreparedConsumer:
    work = tmp_path_factory.mktemp("consumer")
    archives = build_archives(REPO / "packages", work / "archives")
    verifier = image_for_checkout(engine, REPO, "verifier")
    task = suite.task(TASK)
    return prepare_consumer(
        engine,
        verifier_image=verifier,
        root=work / "consumer",
        stage=work / "stage",
        archives_dir=work / "archives",
        archives=archives,
        dependency_lock=REPO / "packages" / "requirements.lock",
        guides={
            p.name: p / "GUIDE.md"
            for p in sorted((REPO / "packages").iterdir())
            if (p / "GUIDE.md").is_file()
        },
        tasks=[
            TaskMaterial(
                TASK, task.render_prompt(str(IN_CONTAINER_CONSUMER.docs)), task.contract_text
            )
        ],
        batch_id="agent-cli-tests",
    )


class ScriptedImages:
    """Each agent's test image, built once per module."""

    def __init__(self, engine: ContainerEngine, work: Path) -> None:
        self.engine = engine
        self.work = work
        self.built: dict[str, str] = {}

    def get(self, agent: Agent) -> str:
        if agent.name not in self.built:
            self.built[agent.name] = scripted_image(self.engine, agent, self.work / agent.name)
        return self.built[agent.name]


@pytest.fixture(scope="module")
def images(engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory) -> ScriptedImages:
    return ScriptedImages(engine, tmp_path_factory.mktemp("images"))


def scripted_image(engine: ContainerEngine, agent: Agent, tmp_path: Path) -> str:
    """The agent's runner image (built, cached by the builder) plus the scripted model."""
    runner = build_runner_image(engine, REPO, agent.name)
    context = tmp_path / "context"
    shutil.copytree(DATA / agent.name, context, ignore=shutil.ignore_patterns("__pycache__"))
    (context / "solutions").mkdir()
    fixtures = REPO / "fixtures" / TASK
    shutil.copyfile(fixtures / "correct" / "solution.py", context / "solutions" / "correct.py")
    shutil.copyfile(fixtures / NEGATIVE / "solution.py", context / "solutions" / "wrong.py")
    return engine.build_image(
        context,
        tag=f"agent-eval-test/{agent.name}-scripted:local",
        buildargs={"BASE": runner},
        labels={"agent-eval.image": "test"},
    )


def installed_version(agent: Agent) -> str:
    recipe_path = REPO / "images" / "runners" / agent.name / "install.json"
    recipe = InstallRecipe.model_validate_json(recipe_path.read_bytes())
    (pin,) = (p for p in recipe.packages if p.startswith(f"{agent.package}=="))
    return pin.partition("==")[2]


class LoggingRunner:
    """The real container runner; keeps the scripted model's log the wrapper left behind."""

    def __init__(self, inner: ContainerRunner) -> None:
        self.inner = inner
        self.logs: dict[int, list[dict[str, Any]]] = {}

    def run_attempt(
        self, request: RunnerRequest, workspace: Path, timeout_s: float
    ) -> RunnerOutcome:
        outcome = self.inner.run_attempt(request, workspace, timeout_s)
        log = workspace / f".scripted-model-attempt-{request.attempt}.jsonl"
        if log.is_file():
            lines = log.read_text(encoding="utf-8").splitlines()
            self.logs[request.attempt] = [json.loads(line) for line in lines]
        return outcome

    def cancel_all(self) -> None:
        self.inner.cancel_all()


@dataclass
class Outcome:
    receipt: Receipt
    logs: dict[int, list[dict[str, Any]]]
    batch_dir: Path


def run_once(
    engine: ContainerEngine,
    images: ScriptedImages,
    consumer: PreparedConsumer,
    suite: Suite,
    tmp_path: Path,
    agent: Agent,
    script: str,
    timeout_s: float = 90.0,
) -> Outcome:
    image = images.get(agent)
    adapter = ["/usr/bin/python3", "-B", "-m", f"agent_eval.adapters.{agent.module}"]
    adapter += ["--model", MODEL, "--endpoint-env", "OPENAI_API_BASE"]
    for key, value in agent.settings.items():
        adapter += ["--setting", f"{key}={json.dumps(value)}"]
    config = RunnerConfig.model_validate(
        {
            "schemaVersion": 1,
            "executable": "/usr/bin/python3",
            "args": ["-B", "/opt/scripted/scripted_model.py", script, "--", *adapter],
            "envAllowlist": ["OPENAI_API_KEY"],
            "expectedRunner": {"name": agent.name, "version": installed_version(agent)},
            "expectedModel": {"id": MODEL, "settings": agent.settings},
            "submissionTimeoutMs": int(timeout_s * 1000),
            "batchTimeoutMs": 600_000,
            "runtimePath": "/var/run/docker.sock",
            "runnerImage": image,
            "verifierImage": image_for_checkout(engine, REPO, "verifier"),
            "network": "none",
        }
    )
    batch_id = f"agents-{tmp_path.name[-20:]}".replace("_", "-")
    runner = LoggingRunner(
        ContainerRunner(
            engine,
            config=config,
            image_id=image,
            consumer_dir=consumer.root,
            batch_id=batch_id,
            environment={"OPENAI_API_KEY": CANARY},
        )
    )
    project = find_project(REPO)
    (tmp_path / "verifier").mkdir()
    verifier = ContainerVerifier(
        VerifierSetup(
            engine=engine,
            image=config.verifierImage,
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
        schemaVersion=1, batchId=batch_id, status="running", reasons=[], selfTest=True,
        createdAt=NOW, updatedAt=NOW, suiteDigest=None, evaluatorDigest=None,
        archivesDigest=None, consumerLockDigest=None, runner=config.expectedRunner,
        model=config.expectedModel, runnerImage=None, verifierImage=None, scheduledRuns=1,
        firstSuccesses=0, finalSuccesses=0, runs=[], reviewDecisions=[],
    )  # fmt: skip
    task = suite.task(TASK)
    plan = BatchPlan(
        batch_dir=batch_dir,
        work_dir=tmp_path / "work",
        run_ids=[f"{TASK}-1"],
        tasks={
            TASK: ScheduledTask(
                task.spec, task.render_prompt(str(IN_CONTAINER_CONSUMER.docs)), task.starter_dir
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
    finally:
        assert list_leftovers(engine, batch_id) == []
        shutil.rmtree(tmp_path / "work", ignore_errors=True)
    return Outcome(final, runner.logs, batch_dir)


def assert_no_canary(batch_dir: Path) -> None:
    for path in batch_dir.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def assert_request_shape(agent: Agent, requests: list[dict[str, Any]]) -> None:
    assert requests, "the CLI never reached the scripted model"
    expected_auth = hashlib.sha256(f"Bearer {CANARY}".encode()).hexdigest()
    for request in requests:
        assert (request["method"], request["path"]) == ("POST", "/v1/chat/completions")
        assert request["authSha256"] == expected_auth
        assert request["body"]["model"] == MODEL.partition("/")[2]
    first = requests[0]["body"]
    if agent.name == "aider":
        assert first["stream"] is True and "tools" not in first
    else:
        assert not first.get("stream")
        assert [t["function"]["name"] for t in first["tools"]] == ["bash"]


def prompt_of(agent: Agent, requests: list[dict[str, Any]]) -> str:
    """What the model was told, as one text: every message of the first request."""
    return json.dumps(requests[0]["body"]["messages"])


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_model_writing_the_reference_solution_passes_on_the_first_attempt(
    engine: ContainerEngine,
    images: ScriptedImages,
    consumer: PreparedConsumer,
    suite: Suite,
    tmp_path: Path,
    name: str,
) -> None:
    agent = AGENTS[name]
    outcome = run_once(engine, images, consumer, suite, tmp_path, agent, "correct")
    (run,) = outcome.receipt.runs
    assert run.firstSuccess and len(run.attempts) == 1, run.attempts[0].diagnostics
    assert [f.path for f in run.attempts[0].solutionFiles] == ["solution.py"]
    requests = outcome.logs[1]
    assert_request_shape(agent, requests)
    assert "Write only these files in /solution: solution.py" in prompt_of(agent, requests)
    if name == "mini-swe-agent":
        probe = json.dumps(requests[-1]["body"]["messages"][-1])
        assert "/consumer/site/appkit/__init__.py" in probe and "litellm None" in probe
    assert_no_canary(outcome.batch_dir)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_wrong_first_solution_is_repaired_from_feedback_without_expected_values(
    engine: ContainerEngine,
    images: ScriptedImages,
    consumer: PreparedConsumer,
    suite: Suite,
    tmp_path: Path,
    name: str,
) -> None:
    agent = AGENTS[name]
    outcome = run_once(engine, images, consumer, suite, tmp_path, agent, "repair")
    (run,) = outcome.receipt.runs
    first, repair = run.attempts
    assert not first.success and repair.success and run.finalSuccess
    failed = [a.id for a in first.assertions if not a.passed]
    assert "field-errors-shown" in failed
    told = prompt_of(agent, outcome.logs[2])
    feedback = told[told.index("failed verification") :]
    assert all(assertion in feedback for assertion in failed)
    assert not [value for value in GRADER_VALUES if value in feedback]
    assert_request_shape(agent, outcome.logs[2])
    assert_no_canary(outcome.batch_dir)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_model_that_never_finishes_times_out_without_a_repair(
    engine: ContainerEngine,
    images: ScriptedImages,
    consumer: PreparedConsumer,
    suite: Suite,
    tmp_path: Path,
    name: str,
) -> None:
    outcome = run_once(
        engine, images, consumer, suite, tmp_path, AGENTS[name], "never", timeout_s=15.0
    )
    (run,) = outcome.receipt.runs
    (attempt,) = run.attempts
    assert attempt.failureCategory == "timeout" and not run.finalSuccess
    assert attempt.durationMs < 60_000
    assert_no_canary(outcome.batch_dir)
