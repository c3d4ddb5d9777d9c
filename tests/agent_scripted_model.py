"""Test support: one scheduled run of a real agent CLI against a scripted model, via the gateway.

The agent's real runner image (``images/runners/<agent>``) runs with no network, as every
runner does. Its scripted model (``tests/data/agents/<agent>/``) runs as a fake provider
in a container of its own, on a network the test creates, under the name ``model.test``;
the batch's real gateway joins that network, holds the credential (a canary) and records
every request. Nothing else is on the network but a second service, ``other.test``, which
stands for everything a runner must not reach. The run goes through the batch's own
schedule, runner container and docker verifier, for one task.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import pytest

from agent_eval.batch.attempt import on_this_engine
from agent_eval.batch.runner_container import ContainerRunner
from agent_eval.batch.schedule import BatchPlan, ScheduledTask, run_schedule
from agent_eval.consumer.archives import PreparedConsumer, prepare_consumer
from agent_eval.digests import sha256_bytes, solution_digest, solution_files
from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.engine.docker_engine import connect_local_engine
from agent_eval.export.atif import export_atif
from agent_eval.gateway.host import BatchGateway, Route, parse_records
from agent_eval.images.build import image_for_checkout
from agent_eval.layout import CONSUMER_MOUNT, IN_CONTAINER_CONSUMER, SOLUTION_MOUNT
from agent_eval.models import (
    GatewayOptions,
    GatewayRecord,
    ModelIdentity,
    ModelUpstream,
    Receipt,
    RunnerConfig,
    RunnerIdentity,
)
from agent_eval.models.atif import Trajectory
from agent_eval.packing import build_archives
from agent_eval.project import find_project
from agent_eval.reference.config import reference_config
from agent_eval.suite.tasks import load_suite
from agent_eval.verification.container.run import VerifierSetup
from agent_eval.verification.container.verifier import ContainerVerifier
from tests.paths import DATA, REPO

ROOT = REPO
TASK = "forms"
PORT = 8765
NOW = datetime(2026, 11, 30, tzinfo=UTC)
TEST_LABEL = "agent-eval.test"


@pytest.fixture(scope="module")
def engine() -> Iterator[ContainerEngine]:
    connected = connect_local_engine()
    yield connected
    connected.close()


@contextlib.contextmanager
def own_network(client: docker.DockerClient, prefix: str = "agent-eval-test") -> Iterator[str]:
    """An internal network of the caller's own: only the providers and the gateways join
    it; whatever is still on it, and the network, are removed when the block ends."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    created = client.networks.create(
        name, driver="bridge", internal=True, labels={TEST_LABEL: "network"}
    )
    try:
        yield name
    finally:
        for container in client.containers.list(
            all=True, filters={"label": TEST_LABEL, "network": name}
        ):
            container.remove(force=True)
        created.remove()


@pytest.fixture(scope="module")
def network(docker_client: docker.DockerClient) -> Iterator[str]:
    """A network of the test's own: only the providers and the gateway join it."""
    with own_network(docker_client) as name:
        yield name


@dataclass
class Provider:
    """A scripted model serving on the test network; its log is readable by the test."""

    container: Any
    address: str
    log: Path
    marker: Path

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.is_file():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def stop(self) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self.container.remove(force=True)


def start_provider(
    client: docker.DockerClient,
    network: str,
    image: str,
    server: Path,
    args: list[str],
    work: Path,
    files: Mapping[str, bytes] = {},
    port: int = PORT,
) -> Provider:
    """Run *server* (with *files* beside it) in *image* on *network*, hardened, non-root."""
    srv = work / "srv"
    srv.mkdir(parents=True)
    shutil.copyfile(server, srv / server.name)
    for name, data in files.items():
        (srv / name).parent.mkdir(parents=True, exist_ok=True)
        (srv / name).write_bytes(data)
    for path in [srv, *srv.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    logs = work / "log"
    logs.mkdir()
    logs.chmod(0o777)
    marker = logs / "attempt"
    marker.write_text("0")
    marker.chmod(0o666)
    container = client.containers.run(
        image,
        ["/usr/bin/python3", "-B", f"/srv/{server.name}", *args],
        detach=True,
        network=network,
        user="10001:10001",
        read_only=True,
        tmpfs={"/tmp": "size=16m"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        volumes={
            str(srv): {"bind": "/srv", "mode": "ro"},
            str(logs): {"bind": "/log", "mode": "rw"},
        },
        labels={TEST_LABEL: "provider"},
    )
    container.reload()
    address = container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
    probe = [
        "/usr/bin/python3",
        "-c",
        f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)",
    ]
    deadline = time.monotonic() + 20
    while True:
        container.reload()
        if container.status != "running" or time.monotonic() > deadline:
            raise AssertionError(f"the provider never listened: {container.logs()[-2000:]!r}")
        if container.exec_run(probe).exit_code == 0:
            break
        time.sleep(0.1)
    return Provider(container, address, logs / "requests.jsonl", marker)


class MarkingGateway:
    """The batch's gateway, telling the provider which attempt the next requests belong to."""

    def __init__(self, gateway: BatchGateway, provider: Provider) -> None:
        self.gateway = gateway
        self.provider = provider
        self.records: dict[int, list[GatewayRecord]] = {}

    def open_route(self, run_id: str, attempt: int) -> Route:
        self.provider.marker.write_text(str(attempt))
        return self.gateway.open_route(run_id, attempt)

    def close_route(self, route: Route) -> bytes:
        data = self.gateway.close_route(route)
        attempt = int(route.record.name.rsplit("-", 1)[1].split(".")[0])
        self.records[attempt] = parse_records(data)
        return data

    def problem(self, *, probe: bool = False) -> str | None:
        return self.gateway.problem(probe=probe)

    def accepted_models(self) -> dict[str, frozenset[str]]:
        return self.gateway.accepted_models()


def prepared_consumer(engine: ContainerEngine, work: Path) -> PreparedConsumer:
    """The batch's consumer: the library, its guides and catalog (no task: prompts travel
    in each attempt's request)."""
    project = find_project(ROOT)
    archives = build_archives(ROOT / "packages", work / "archives")
    verifier = image_for_checkout(engine, ROOT, "verifier")
    return prepare_consumer(
        engine,
        verifier_image=verifier,
        root=work / "consumer",
        stage=work / "stage",
        archives_dir=work / "archives",
        archives=archives,
        dependency_lock=ROOT / "packages" / "requirements.lock",
        guides=project.guides(),
        batch_id="agent-cli-tests",
    )


@dataclass(frozen=True)
class ScriptedAgent:
    """How to start one agent's adapter, and how its provider speaks."""

    name: str
    image: str
    adapter: str
    model: ModelIdentity
    version: str
    server: Path
    """The scripted model's server file."""
    server_args: tuple[str, ...]
    """Its arguments before the mode ({port}, {log} and {marker} are filled in)."""
    credential_env: str
    credential_header: str
    served: str
    """The model name the scripted provider says it served."""
    files: Mapping[str, bytes] = field(default_factory=dict)
    adapter_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    receipt: Receipt
    batch_dir: Path
    requests: dict[int, list[dict[str, Any]]]
    """The scripted model's request log of each attempt."""
    records: dict[int, list[GatewayRecord]]
    """The gateway's records of each attempt."""
    canary: str


def run_one(
    engine: ContainerEngine,
    client: docker.DockerClient,
    network: str,
    consumer: PreparedConsumer,
    agent: ScriptedAgent,
    mode: str,
    tmp_path: Path,
    timeout_s: float = 90.0,
) -> RunResult:
    """One scheduled run of TASK (first attempt and, when the rules allow, a repair)."""
    project = find_project(ROOT)
    task = load_suite(project.tasks, graders_dir=project.graders).task(TASK)
    canary = f"sk-canary-{uuid.uuid4().hex}"
    gateway_image = image_for_checkout(engine, ROOT, "gateway")
    fill = {"port": str(PORT), "log": "/log/requests.jsonl", "marker": "/log/attempt"}
    args = [a.format(**fill) for a in agent.server_args]
    provider = start_provider(
        client, network, gateway_image, agent.server, [*args, mode], tmp_path / "provider",
        agent.files,
    )  # fmt: skip
    base = reference_config(
        engine, "oracle", project_root=ROOT, runtime_path="/var/run/docker.sock"
    )
    config = base.model_copy(
        update={
            "args": [
                "-B", "-m", agent.adapter, "--model", agent.model.id,
                *(f"--setting={k}={json.dumps(v)}" for k, v in agent.model.settings.items()),
                *agent.adapter_args,
            ],
            "runnerImage": agent.image,
            "expectedRunner": RunnerIdentity(name=agent.name, version=agent.version),
            "expectedModel": agent.model,
            "models": [
                ModelUpstream(
                    name="provider",
                    upstream=f"http://model.test:{PORT}",
                    credentialEnv=agent.credential_env,
                    credentialHeader=agent.credential_header,
                    servedModels=[agent.served],
                )
            ],
            "gateway": GatewayOptions(
                network=network, hosts={"model.test": provider.address}, privateUpstreams=True
            ),
            "gatewayImage": gateway_image,
        }
    )  # fmt: skip
    RunnerConfig.model_validate(config.model_dump())  # what a user could write
    batch_id = f"{agent.name}-{mode}-{uuid.uuid4().hex[:8]}"
    gateway = BatchGateway(
        engine,
        config,
        engine.resolve_image(gateway_image),
        work_dir=tmp_path / "gateway",
        batch_id=batch_id,
        environ={agent.credential_env: canary},
    )
    marking = MarkingGateway(gateway, provider)
    try:
        gateway.start()
        runner = ContainerRunner(
            engine,
            config=config,
            image_id=agent.image,
            consumer_dir=consumer.root,
            batch_id=batch_id,
            environment=gateway.runner_environment(),
            gateway_mounts=gateway.runner_mounts(),
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
        receipt = Receipt.opened(
            batch_id=batch_id,
            created_at=NOW,
            runner=config.expectedRunner,
            model=config.expectedModel,
            scheduled_runs=1,
        )
        plan = BatchPlan(
            batch_dir=batch_dir,
            work_dir=tmp_path / "work",
            run_ids=[f"{TASK}-1"],
            tasks={
                TASK: ScheduledTask(
                    task.spec,
                    task.render_prompt(str(IN_CONTAINER_CONSUMER.docs)),
                    task.starter_dir,
                )
            },
            runner=config.expectedRunner,
            model=config.expectedModel,
            submission_timeout_ms=round(timeout_s * 1000),
            batch_timeout_ms=600_000,
            slots=1,
            consumer_dir_in_runner=CONSUMER_MOUNT,
            output_dir_in_runner=SOLUTION_MOUNT,
            protected_digest=lambda: solution_digest(solution_files(consumer.root)),
            receipt=receipt,
            gateway=marking,
        )
        final = run_schedule(plan, on_this_engine(runner, verifier))
    finally:
        gateway.stop()
        provider.stop()
        shutil.rmtree(tmp_path / "work", ignore_errors=True)
    assert list_leftovers(engine, batch_id) == []
    by_attempt: dict[int, list[dict[str, Any]]] = {}
    for entry in provider.requests():
        by_attempt.setdefault(int(entry["attempt"]), []).append(entry)
    return RunResult(final, batch_dir, by_attempt, marking.records, canary)


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under *root* whose bytes contain *needle*."""
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def solutions() -> dict[str, str]:
    fixtures = ROOT / "fixtures" / TASK
    return {
        "correct": (fixtures / "correct" / "solution.py").read_text(encoding="utf-8"),
        "greets-username": (fixtures / "greets-username" / "solution.py").read_text(),
        "errors-not-rendered": (fixtures / "errors-not-rendered" / "solution.py").read_text(),
    }


AGENTS_DATA = DATA / "agents"


def exported_trajectory(result: RunResult, shape: str, attempt: int = 1) -> Trajectory:
    """``agent-eval export --format atif`` of the attempt: valid, read as *shape*'s events,
    holding an agent step, the gateway's totals, and neither the credential nor a token."""
    out = result.batch_dir.parent / f"atif-{result.batch_dir.name}"
    export_atif(result.batch_dir, out)
    path = out / f"{TASK}-1" / f"attempt-{attempt}" / "trajectory.json"
    data = path.read_bytes()
    assert result.canary.encode() not in data and b"ae-" not in data
    made = Trajectory.model_validate_json(data)
    assert made.notes is not None and f"({shape} shape)" in made.notes, made.notes
    assert any(step.source == "agent" for step in made.steps)
    use = result.receipt.runs[0].attempts[attempt - 1].gateway
    assert made.final_metrics is not None and use is not None
    assert made.final_metrics.total_prompt_tokens == use.inputTokens
    return made


def kept_transcript(result: RunResult, attempt: int = 1) -> list[dict[str, Any]]:
    """The attempt's transcript.jsonl, checked against its digest and for the canary."""
    record = result.receipt.runs[0].attempts[attempt - 1]
    path = result.batch_dir / "runs" / f"{TASK}-1" / f"attempt-{attempt}" / "transcript.jsonl"
    data = path.read_bytes()
    assert record.transcriptDigest == sha256_bytes(data)
    assert result.canary.encode() not in data
    assert b"=ae-" not in data, "the attempt's token reached the transcript"
    lines = [json.loads(line) for line in data.splitlines()]
    assert lines and all(isinstance(line, dict) for line in lines)
    return lines
