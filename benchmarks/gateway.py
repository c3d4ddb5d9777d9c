"""Benchmark what the model gateway costs per attempt: the same runs with it and without it.

    .venv/bin/python benchmarks/gateway.py [--rounds N]

The real Claude Code CLI, in its runner image with no network, does each of
the six tasks once per round, answered by the scripted model of
``agent-eval try-agent`` (one Read and one Write per task, then a text turn:
about three requests per attempt). Two ways to that model, alternated round
by round so that drift hits both:

* ``gateway``: the batch's real gateway (mitmproxy and the addon: a
  per-attempt token, the credential swap, the upstream vetting, the records)
  on the trial's internal network, the scripted model behind it as the
  upstream;
* ``direct``: the same scripted model, in the same image and hardening,
  serving the Unix socket the runner's relay connects to, in the gateway's
  place (no proxy, no records).

Everything else is the batch's own: the schedule, the runner container, the
docker verifier, concurrency 1. The figure is the runner phase of each
attempt (container create to removal, what the gateway can slow down);
verification is reported apart. Prints a table (medians, the median overhead
per attempt and per request, the ratio) and one JSON line. Needs the engine
and the images (``scripts/setup``, ``agent-eval images build --runner
claude-code``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_eval.batch.attempt import on_this_engine  # noqa: E402
from agent_eval.batch.ports import RunnerOutcome  # noqa: E402
from agent_eval.batch.runner_container import ContainerRunner  # noqa: E402
from agent_eval.batch.schedule import BatchPlan, ScheduledTask, run_schedule  # noqa: E402
from agent_eval.consumer.archives import prepare_consumer  # noqa: E402
from agent_eval.digests import solution_digest, solution_files  # noqa: E402
from agent_eval.engine import ContainerEngine, ContainerSpec, Mount  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.gateway.host import (  # noqa: E402
    GATEWAY_DIR_IN_RUNNER,
    MODELS_ENV,
    TOKEN_ENV,
    BatchGateway,
)
from agent_eval.images.build import image_for_checkout  # noqa: E402
from agent_eval.layout import CONSUMER_MOUNT, IN_CONTAINER_CONSUMER, SOLUTION_MOUNT  # noqa: E402
from agent_eval.models import Receipt, RunnerConfig, RunnerRequest  # noqa: E402
from agent_eval.packing import build_archives  # noqa: E402
from agent_eval.project import Project, find_project  # noqa: E402
from agent_eval.suite.tasks import Suite, load_suite  # noqa: E402
from agent_eval.trial.run import KEY_ENV, scripted_answers, scripted_upstream  # noqa: E402
from agent_eval.verification.container.run import VerifierSetup  # noqa: E402
from agent_eval.verification.container.verifier import ContainerVerifier  # noqa: E402

AGENT = "claude-code"
MODES = ("gateway", "direct")


@dataclass
class TimedRunner:
    """The batch's runner container, timing each attempt's runner phase."""

    inner: ContainerRunner
    seconds: list[float] = field(default_factory=list)

    def run_attempt(
        self,
        request: RunnerRequest,
        workspace: Path,
        environment: Mapping[str, str] | None = None,
    ) -> RunnerOutcome:
        started = time.monotonic()
        outcome = self.inner.run_attempt(request, workspace, environment)
        self.seconds.append(time.monotonic() - started)
        return outcome

    def cancel_all(self) -> None:
        self.inner.cancel_all()


@dataclass(frozen=True)
class DirectRoute:
    token: str

    @property
    def environment(self) -> dict[str, str]:
        return {TOKEN_ENV: self.token}


class Direct:
    """The gateway port with no gateway: tokens that nobody checks, no records."""

    def __init__(self, served: list[str], upstream: str) -> None:
        self.accepted = {upstream: frozenset(served)}

    def open_route(self, run_id: str, attempt: int) -> DirectRoute:
        return DirectRoute(uuid.uuid4().hex)

    def close_route(self, route: DirectRoute) -> bytes:
        return b""

    def problem(self, *, probe: bool = False) -> str | None:
        return None

    def accepted_models(self) -> dict[str, frozenset[str]]:
        return self.accepted


def consumer(engine: ContainerEngine, project: Project, suite: Suite, work: Path) -> Path:
    archives = build_archives(project.packages, work / "archives")
    prepared = prepare_consumer(
        engine,
        verifier_image=image_for_checkout(engine, project.root, "verifier"),
        root=work / "consumer",
        stage=work / "stage",
        archives_dir=work / "archives",
        archives=archives,
        dependency_lock=project.packages / "requirements.lock",
        guides=project.guides(),
        batch_id="bench-gateway",
    )
    return prepared.root


def direct_model(
    engine: ContainerEngine, project: Project, config: RunnerConfig, work: Path
) -> tuple[str, Path]:
    """The scripted model on a Unix socket in a directory the runner mounts; (container, dir)."""
    srv, sockets = work / "direct-srv", work / "direct-sockets"
    srv.mkdir()
    sockets.mkdir()
    upstream = config.models[0]
    answers = scripted_answers(project, upstream.servedModels[0])
    answers["unix"] = f"/sockets/{upstream.name}.sock"
    (srv / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
    server = ROOT / "agent_eval" / "trial" / "oracle_model.py"
    shutil.copyfile(server, srv / server.name)
    for path in (srv, *srv.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    sockets.chmod(0o777)  # the server runs as the gateway's user
    container = engine.create(
        ContainerSpec(
            image=str(config.gatewayImage),
            command=("/usr/bin/python3", "-B", f"/srv/{server.name}", "/srv/answers.json"),
            role="gateway",
            batch_id="bench-gateway",
            run_id="direct-model",
            mounts=(Mount(srv, "/srv"), Mount(sockets, "/sockets", read_only=False)),
        )
    )
    engine.start(container)
    deadline = time.monotonic() + 30
    while not (sockets / f"{upstream.name}.sock").exists():
        if time.monotonic() > deadline:
            raise SystemExit("the direct model never listened")
        time.sleep(0.1)
    return container, sockets


def measurement_plan(
    engine: ContainerEngine,
    project: Project,
    suite: Suite,
    config: RunnerConfig,
    consumer_dir: Path,
    work: Path,
    batch_id: str,
    *,
    run_ids: list[str],
    slots: int,
    verifier_slots: int,
    gateway: Any,
    submission_timeout_ms: int,
    batch_timeout_ms: int,
) -> tuple[BatchPlan, ContainerVerifier]:
    """The plan of a measurement batch of *run_ids* in *work*, and its docker verifier:
    the schedule a batch runs, without the batch's preparation around it."""
    staging = work / f"{batch_id}-verifier"
    staging.mkdir()
    verifier = ContainerVerifier(
        VerifierSetup(
            engine=engine,
            image=config.verifierImage,
            consumer_dir=consumer_dir,
            graders_dir=project.graders,
            batch_id=batch_id,
            staging_root=staging,
        ),
        tasks_dir=project.tasks,
        slots=verifier_slots,
    )
    batch_dir = work / batch_id
    batch_dir.mkdir()
    receipt = Receipt.opened(
        batch_id=batch_id,
        created_at=datetime.now(UTC),
        runner=config.expectedRunner,
        model=config.expectedModel,
        scheduled_runs=len(run_ids),
    )
    plan = BatchPlan(
        batch_dir=batch_dir,
        work_dir=work / f"{batch_id}-work",
        run_ids=run_ids,
        tasks={
            t.id: ScheduledTask(
                t.spec, t.render_prompt(str(IN_CONTAINER_CONSUMER.docs)), t.starter_dir
            )
            for t in suite.tasks
        },
        runner=config.expectedRunner,
        model=config.expectedModel,
        submission_timeout_ms=submission_timeout_ms,
        batch_timeout_ms=batch_timeout_ms,
        slots=slots,
        consumer_dir_in_runner=CONSUMER_MOUNT,
        output_dir_in_runner=SOLUTION_MOUNT,
        protected_digest=lambda: solution_digest(solution_files(consumer_dir)),
        receipt=receipt,
        gateway=gateway,
    )
    return plan, verifier


def one_round(
    mode: str,
    engine: ContainerEngine,
    project: Project,
    suite: Suite,
    config: RunnerConfig,
    consumer_dir: Path,
    ports: dict[str, Any],
    work: Path,
) -> tuple[list[float], list[float], Receipt]:
    """Six runs, one per task: (runner seconds, verification seconds, receipt)."""
    batch_id = f"bench-gateway-{mode}-{uuid.uuid4().hex[:8]}"
    environment, mounts = ports[mode]
    runner = TimedRunner(
        ContainerRunner(
            engine,
            config=config,
            image_id=config.runnerImage,
            consumer_dir=consumer_dir,
            batch_id=batch_id,
            environment=environment,
            gateway_mounts=mounts,
        )
    )
    plan, verifier = measurement_plan(
        engine, project, suite, config, consumer_dir, work, batch_id,
        run_ids=[f"{t.id}-1" for t in suite.tasks], slots=1, verifier_slots=1,
        gateway=ports[f"{mode}-port"], submission_timeout_ms=180_000,
        batch_timeout_ms=1_800_000,
    )  # fmt: skip
    final = run_schedule(plan, on_this_engine(runner, verifier))
    verification = [
        max(0.0, a.durationMs / 1000 - r)
        for a, r in zip(
            [a for run in final.runs for a in run.attempts], runner.seconds, strict=False
        )
    ]
    return runner.seconds, verification, final


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of six runs per mode")
    rounds = parser.parse_args().rounds
    engine = connect_local_engine()
    project = find_project(ROOT)
    suite = load_suite(project.tasks, graders_dir=project.graders)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    checks: dict[str, list[float]] = {m: [] for m in MODES}
    requests: list[int] = []
    successes: dict[str, int] = {m: 0 for m in MODES}
    with tempfile.TemporaryDirectory(prefix="agent-eval-bench-gateway-") as tmp:
        work = Path(tmp)
        consumer_dir = consumer(engine, project, suite, work)
        with scripted_upstream(engine, project, AGENT) as trial:
            config = RunnerConfig.model_validate_json(trial.config_path.read_bytes())
            gateway = BatchGateway(
                engine,
                config,
                engine.resolve_image(str(config.gatewayImage)),
                work_dir=work / "gateway",
                batch_id="bench-gateway",
                environ={KEY_ENV: trial.environ[KEY_ENV]},
            )
            direct_container, sockets = direct_model(engine, project, config, work)
            upstream = config.models[0].name
            ports: dict[str, Any] = {
                "gateway": (gateway.runner_environment(), gateway.runner_mounts()),
                "direct": (
                    {MODELS_ENV: upstream},
                    (Mount(sockets, GATEWAY_DIR_IN_RUNNER),),
                ),
                "gateway-port": gateway,
                "direct-port": Direct(config.models[0].servedModels, upstream),
            }
            try:
                gateway.start()
                problems = gateway.preflight()
                if problems:
                    raise SystemExit("; ".join(problems))
                for number in range(rounds):
                    for mode in MODES if number % 2 == 0 else tuple(reversed(MODES)):
                        ran, checked, final = one_round(
                            mode, engine, project, suite, config, consumer_dir, ports, work
                        )
                        times[mode] += ran
                        checks[mode] += checked
                        successes[mode] += final.finalSuccesses
                        if mode == "gateway":
                            requests += [
                                a.gateway.requests
                                for run in final.runs
                                for a in run.attempts
                                if a.gateway is not None
                            ]
                        print(
                            f"round {number + 1} {mode}: {final.finalSuccesses}/6, runner "
                            f"median {statistics.median(ran):.2f} s",
                            file=sys.stderr,
                        )
            finally:
                gateway.stop()
                engine.remove(direct_container)
    median = {m: statistics.median(times[m]) for m in MODES}
    overhead = median["gateway"] - median["direct"]
    per_request = overhead / statistics.median(requests) if requests else None
    result = {
        "attempts": {m: len(times[m]) for m in MODES},
        "finalSuccesses": successes,
        "runnerMedianS": {m: round(median[m], 3) for m in MODES},
        "verificationMedianS": {m: round(statistics.median(checks[m]), 3) for m in MODES},
        "overheadPerAttemptS": round(overhead, 3),
        "requestsPerAttemptMedian": statistics.median(requests) if requests else None,
        "overheadPerRequestS": None if per_request is None else round(per_request, 3),
        "ratio": round(median["gateway"] / median["direct"], 3),
    }
    print(f"{'mode':<10}{'attempts':>10}{'runner median s':>18}{'verification median s':>24}")
    for mode in MODES:
        print(
            f"{mode:<10}{len(times[mode]):>10}{median[mode]:>18.2f}"
            f"{statistics.median(checks[mode]):>24.2f}"
        )
    print(
        f"gateway overhead per attempt: {overhead:+.3f} s (ratio {result['ratio']}); "
        f"per request: {result['overheadPerRequestS']} s"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
