"""``agent-eval try-agent``: a scripted upstream, a runner config aimed at it, one batch.

The runner config is the agent's example (``examples/runners/<agent>.json``,
the repository's own or the one shipped with the harness)
with this checkout's images and one change of upstream: the scripted model,
reached by the gateway over the trial's internal network under the name
``model.test`` (``privateUpstreams``, which makes the batch self-test). The
credential is a random value made here: the gateway holds it, the runner
never sees it. The scripted model's container is hardened like the
gateway's (its user, no capabilities, read-only) and, with the network, is
removed whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_eval.batch.progress import ProgressEvent
from agent_eval.batch.run import BatchOutcome, run_batch
from agent_eval.engine import ContainerEngine, ContainerSpec, Mount
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.images.build import image_for_checkout
from agent_eval.images.recipes import Sources
from agent_eval.layout import RunDirectory
from agent_eval.models import GatewayOptions, QualificationResult, RunnerConfig
from agent_eval.project import Project
from agent_eval.reference.runner import failing_case
from agent_eval.suite.tasks import load_suite
from agent_eval.verdict.qualification import current_anchors, qualify_files
from agent_eval.verification.protocol import VerifierContext, VerifierFactory

__all__ = [
    "TRIAL_AGENTS",
    "Trial",
    "TrialOutcome",
    "aimed_at_scripted_model",
    "scripted_answers",
    "scripted_upstream",
    "try_agent",
]

TRIAL_AGENTS = ("claude-code", "mini-swe-agent")
"""The agents whose provider API the scripted model speaks (Anthropic Messages; OpenAI
Chat Completions with mini-swe-agent's bash tool)."""
UPSTREAM_HOST = "model.test"
UPSTREAM_PORT = 8080
KEY_ENV = "TRIAL_MODEL_KEY"
_LISTEN_TIMEOUT_S = 30.0
_SERVER = Path(__file__).with_name("oracle_model.py")


@dataclass(frozen=True)
class Trial:
    """A scripted upstream that is up, and the runner config aimed at it."""

    config_path: Path
    network: str
    environ: dict[str, str]
    """The environment the batch reads its credential from."""


@dataclass(frozen=True)
class TrialOutcome:
    """The batch, and the decision on it (None when no receipt was written)."""

    batch: BatchOutcome
    qualification: QualificationResult | None


def scripted_answers(
    project: Project, served: str, fail_first: Collection[str] = ()
) -> dict[str, object]:
    """Each task's title and reference solution files, for the scripted model; a task of
    *fail_first* is first answered with its first failing fixture (the mutant's), and
    with the reference solution on its repair.

    Raises:
        ConfigError: A task has no reference solution, or *fail_first* names no task of
            the suite or one without a failing fixture.
    """
    suite = load_suite(project.tasks, graders_dir=project.graders)
    unknown = sorted(set(fail_first) - {task.id for task in suite.tasks})
    if unknown:
        raise ConfigError(f"the plan's failing tasks {unknown} are not tasks of the suite")
    tasks = []
    for task in suite.tasks:
        correct = project.fixtures / task.id / "correct"
        answer: dict[str, object] = {
            "title": task.spec.title,
            "files": _solution(correct, task.spec.allowedOutputPaths, task.id),
        }
        if task.id in fail_first:
            failing = failing_case(project.fixtures / task.id)
            if failing == correct:
                raise ConfigError(f"{project.fixtures / task.id}: no failing fixture to plan")
            answer["first"] = _solution(failing, task.spec.allowedOutputPaths, task.id)
        tasks.append(answer)
    return {"port": UPSTREAM_PORT, "served": served, "tasks": tasks}


def _solution(case: Path, allowed: Sequence[str], task_id: str) -> dict[str, str]:
    files = {
        path: (case / path).read_text(encoding="utf-8")
        for path in allowed
        if (case / path).is_file()
    }
    if not files:
        raise ConfigError(f"{case}: no solution file for task {task_id}")
    return files


def _example(project: Project, agent: str) -> RunnerConfig:
    if agent not in TRIAL_AGENTS:
        raise ConfigError(
            f"try-agent: {agent!r} has no scripted model; choose one of {', '.join(TRIAL_AGENTS)}"
        )
    example = Sources.of(project.root).shipped.example_runner_config(agent)
    return read_model(example, RunnerConfig, what="runner config")


def _wait_listening(engine: ContainerEngine, container: str, trial_id: str) -> None:
    deadline = time.monotonic() + _LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        if b"listening" in engine.logs(container, 4096).stdout:
            return
        states = [c.state for c in engine.list_containers(trial_id) if c.container_id == container]
        if states != ["running"]:
            said = engine.logs(container, 4096).stderr.decode("utf-8", "replace")
            raise InfrastructureError(f"the scripted model exited: {said.strip()[-1000:]}")
        time.sleep(0.2)
    raise InfrastructureError(f"the scripted model did not listen within {_LISTEN_TIMEOUT_S:.0f} s")


@contextlib.contextmanager
def scripted_upstream(
    engine: ContainerEngine,
    project: Project,
    agent: str,
    *,
    delay_s: float = 0.0,
    fail_first: Collection[str] = (),
) -> Iterator[Trial]:
    """Start the scripted model on a network of its own, answering each model turn *delay_s*
    after it is asked, and the tasks of *fail_first* wrongly on their first attempt;
    remove both at the end.

    Raises:
        ConfigError: No scripted model for *agent*, or a plan it cannot answer.
        InfrastructureError: An image is not built, or the scripted model did not start.
    """
    example = _example(project, agent)
    upstream = example.models[0]
    trial_id = f"trial-{uuid.uuid4().hex[:12]}"
    network = f"agent-eval-{trial_id}"
    gateway_image = image_for_checkout(engine, project.root, "gateway")
    runner_image = image_for_checkout(engine, project.root, f"runner-{agent}")
    verifier_image = image_for_checkout(engine, project.root, "verifier")
    home = project.evidence / ".try-agent" / trial_id
    srv = home / "srv"
    srv.mkdir(parents=True)
    shutil.copyfile(_SERVER, srv / _SERVER.name)
    answers = scripted_answers(project, upstream.servedModels[0], fail_first)
    if delay_s:
        answers["delayS"] = delay_s
    (srv / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
    for path in (home, srv, *srv.iterdir()):  # the scripted model runs as the gateway's user
        path.chmod(0o755 if path.is_dir() else 0o644)
    engine.create_network(network, {"agent-eval.trial": trial_id})
    container: str | None = None
    try:
        container = engine.create(
            ContainerSpec(
                image=gateway_image,
                command=("/usr/bin/python3", "-B", f"/srv/{_SERVER.name}", "/srv/answers.json"),
                role="gateway",
                batch_id=trial_id,
                run_id="scripted-model",
                mounts=(Mount(srv, "/srv"),),
                network=network,
            )
        )
        engine.start(container)
        _wait_listening(engine, container, trial_id)
        config = aimed_at_scripted_model(
            example,
            network=network,
            address=engine.address_on(container, network),
            images=(runner_image, verifier_image, gateway_image),
            runtime_path=engine.address,
        )
        config_path = home / "runner.json"
        write_model_atomic(config_path, RunnerConfig.model_validate(config.model_dump()))
        environ = {**os.environ, KEY_ENV: f"trial-{secrets.token_hex(16)}"}
        yield Trial(config_path, network, environ)
    finally:
        try:
            if container is not None:
                engine.remove(container)
        finally:
            engine.remove_network(network)
            shutil.rmtree(srv, ignore_errors=True)


def aimed_at_scripted_model(
    example: RunnerConfig,
    *,
    network: str,
    address: str,
    images: tuple[str, str, str],
    runtime_path: str,
) -> RunnerConfig:
    """*example* with these images (runner, verifier, gateway) and its one upstream replaced by
    the scripted model at *address* on *network*, under the name ``model.test``."""
    upstream = example.models[0]
    runner_image, verifier_image, gateway_image = images
    return example.model_copy(
        update={
            "runtimePath": runtime_path,
            "runnerImage": runner_image,
            "verifierImage": verifier_image,
            "gatewayImage": gateway_image,
            "models": [
                upstream.model_copy(
                    update={
                        "upstream": f"http://{UPSTREAM_HOST}:{UPSTREAM_PORT}",
                        "credentialEnv": KEY_ENV,
                    }
                )
            ],
            "gateway": GatewayOptions(
                network=network,
                hosts={UPSTREAM_HOST: address},
                privateUpstreams=True,
                tokenBudget=example.gateway.tokenBudget,
            ),
        }
    )


def try_agent(
    project: Project,
    agent: str,
    *,
    verifier_factory: VerifierFactory[VerifierContext],
    connect: Callable[[str | None], ContainerEngine],
    progress: Callable[[ProgressEvent], None] = lambda _event: None,
    notice: Callable[[str], None] = lambda _line: None,
) -> TrialOutcome:
    """Run one whole batch of *agent* against the scripted model and decide on it."""
    engine = connect(None)
    try:
        with scripted_upstream(engine, project, agent) as trial:
            notice(f"scripted model up on {trial.network}; runner config {trial.config_path}")
            outcome = run_batch(
                trial.config_path,
                project,
                verifier_factory=verifier_factory,
                connect=connect,
                environ=trial.environ,
                progress=progress,
                notice=notice,
            )
    finally:
        engine.close()
    decision = None
    if outcome.receipt_written:
        decision = qualify_files(
            outcome.receipt,
            RunDirectory(outcome.receipt.parent).archives_manifest,
            current_anchors(project),
        )
    return TrialOutcome(outcome, decision)
