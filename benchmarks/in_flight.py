"""Benchmark many runs in flight: real agents waiting on a slow model, 8 to 64 at once.

    .venv/bin/python benchmarks/in_flight.py [--levels 8,16,32,64] [--runs 64] [--delay 5]

The real Claude Code CLI, in its runner image with no network, does the six
tasks repeated to ``--runs`` runs (the same run ids at every level), through
the batch's real gateway, answered by the scripted model of ``agent-eval
try-agent`` holding every model turn ``--delay`` seconds (a real model's
latency: about three turns per attempt). Each level runs that batch with that
many runs in flight, the batch's own schedule, runner container and docker
verifier, verifications at once bounded by cores as a batch bounds them
(``batch.admission``). Per level it prints the wall time; the harness's CPU
(this process and its children) in seconds and in cores (over the wall time);
the containers' CPU per attempt (the engine's cgroup: runners, verifiers and
the gateway) and the runners' own (their recorded ``cpuSeconds``, median);
the most runner containers seen at once (whether the level was reached); the
runners' largest recorded peak memory, the least ``MemAvailable`` sampled
while it ran and what admission would allow on this machine now;
infrastructure failures, out-of-memory kills and the first distinct reasons;
each run's verdict (first and final success) and whether they are identical
to those of the level with the fewest runs in flight (the levels run in the
order given, and each level's JSON goes to stderr as it ends).
Goal: 64 in flight, verdicts identical, the harness below one core. Prints a
table and one JSON line (``--record`` appends it to the performance record).

With ``--loops 0,40,100`` every level runs again at each load factor (busy loops
in the engine's cpu cgroup, ``tests/loadrig.py``), and ``--neighbours N`` adds
the rig that crowds the engine itself (N neighbours creating, filling and
removing containers beside the batch); each row then also gives the load, the
host's CPU pressure, the attempts starved and tried again, and whether its
verdicts equal those of the fewest runs in flight at the first load factor
(the quiet run, when it is 0): a real agent's batch on a crowded machine.
Needs the engine and the images (``scripts/setup``, ``agent-eval images build
--runner claude-code``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gateway import consumer, measurement_plan  # noqa: E402
from machine_cpu import CpuSnapshot, cpu_split  # noqa: E402
from record import add_record_option, emit  # noqa: E402

from agent_eval.batch.admission import admitted_runs, read_machine, verification_slots  # noqa: E402
from agent_eval.batch.attempt import on_this_engine  # noqa: E402
from agent_eval.batch.ports import RunnerOutcome  # noqa: E402
from agent_eval.batch.runner_container import ContainerRunner  # noqa: E402
from agent_eval.batch.schedule import run_schedule  # noqa: E402
from agent_eval.engine import ContainerEngine  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.engine.pressure import PressureWindow  # noqa: E402
from agent_eval.gateway.host import BatchGateway  # noqa: E402
from agent_eval.models import RunnerConfig, RunnerRequest  # noqa: E402
from agent_eval.project import Project, find_project  # noqa: E402
from agent_eval.suite.tasks import Suite, load_suite  # noqa: E402
from agent_eval.trial.run import KEY_ENV, scripted_upstream  # noqa: E402
from tests.loadrig import EngineCrowd, LoadRig  # noqa: E402

AGENT = "claude-code"
MIB = 1 << 20


@dataclass
class CountingRunner:
    """The batch's runner container, counting the runner containers in flight at once."""

    inner: ContainerRunner
    lock: threading.Lock = field(default_factory=threading.Lock)
    now: int = 0
    most: int = 0

    def run_attempt(
        self,
        request: RunnerRequest,
        workspace: Path,
        environment: Mapping[str, str] | None = None,
    ) -> RunnerOutcome:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return self.inner.run_attempt(request, workspace, environment)
        finally:
            with self.lock:
                self.now -= 1

    def cancel_all(self) -> None:
        self.inner.cancel_all()


class LeastAvailable:
    """The least MemAvailable sampled every second while a level runs."""

    def __init__(self) -> None:
        self.least: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            available = read_machine().available_bytes
            if available is not None and (self.least is None or available < self.least):
                self.least = available

    def __enter__(self) -> LeastAvailable:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def run_ids(suite: Suite, runs: int) -> list[str]:
    """The six tasks repeated, repetition by repetition, cut to *runs* run ids."""
    ids = [
        f"{task.id}-{repetition}"
        for repetition in range(1, runs // len(suite.tasks) + 2)
        for task in suite.tasks
    ]
    return ids[:runs]


def one_level(
    level: int,
    engine: ContainerEngine,
    project: Project,
    suite: Suite,
    config: RunnerConfig,
    consumer_dir: Path,
    gateway: BatchGateway,
    ids: list[str],
    work: Path,
) -> dict[str, Any]:
    """One batch of *ids* with *level* runs in flight: its figures and verdicts."""
    batch_id = f"bench-inflight-{level}-{uuid.uuid4().hex[:8]}"
    runner = CountingRunner(
        ContainerRunner(
            engine,
            config=config,
            image_id=config.runnerImage,
            consumer_dir=consumer_dir,
            batch_id=batch_id,
            environment=gateway.runner_environment(),
            gateway_mounts=gateway.runner_mounts(),
        )
    )
    machine = read_machine()
    plan, verifier = measurement_plan(
        engine, project, suite, config, consumer_dir, work, batch_id,
        run_ids=ids, slots=level, verifier_slots=verification_slots(level, machine.cores),
        gateway=gateway, submission_timeout_ms=600_000, batch_timeout_ms=3_600_000,
    )  # fmt: skip
    started, before = time.monotonic(), CpuSnapshot.take()
    pressure = PressureWindow.open()
    with LeastAvailable() as memory:
        final = run_schedule(plan, on_this_engine(runner, verifier))
    wall, after = time.monotonic() - started, CpuSnapshot.take()
    attempts = [a for run in final.runs for a in run.attempts]
    tries = [t for a in attempts for t in a.infrastructureTries]
    split = cpu_split(before, after, per=max(1, len(attempts)))
    harness = after.harness - before.harness
    resources = [a.resources for a in attempts if a.resources is not None]
    runner_cpu = [r.cpuSeconds for r in resources if r.cpuSeconds is not None]
    peaks = [r.peakMemoryBytes for r in resources if r.peakMemoryBytes is not None]
    failed = [a for a in attempts if a.infrastructureStatus == "failed"]
    reasons = sorted(
        {d.message[:160] for a in failed for d in a.diagnostics}
        | {t.reason[:160] for a in attempts for t in a.infrastructureTries}
    )
    return {
        "level": level,
        "status": final.status,
        "runs": len(final.runs),
        "finalSuccesses": final.finalSuccesses,
        "wallSeconds": round(wall, 1),
        "attempts": len(attempts),
        "harnessCpuSeconds": round(harness, 2),
        "harnessCores": round(harness / wall, 3),
        "containersCpuPerAttempt": split["containers"],
        "runnerCpuMedianPerAttempt": round(statistics.median(runner_cpu), 3)
        if runner_cpu
        else None,
        "mostRunnersAtOnce": runner.most,
        "verificationsAtOnce": verification_slots(level, machine.cores),
        "runnerPeakMiB": round(max(peaks) / MIB) if peaks else None,
        "leastAvailableMiB": None if memory.least is None else round(memory.least / MIB),
        "admittedHere": admitted_runs(machine, level),
        "infrastructureFailures": len(failed),
        "infrastructureTries": len(tries),
        "starvedTries": sum(t.kind == "starved" for t in tries),
        "cpuPressure": pressure.share(wall),
        "oomKilled": sum(1 for r in resources if r.oomKilled),
        "reasons": reasons[:3],
        "verdicts": {
            run.runId: f"{int(run.firstSuccess)}{int(run.finalSuccess)}" for run in final.runs
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="8,16,32,64", help="runs in flight, comma-separated")
    parser.add_argument("--runs", type=int, default=64, help="runs per level (default 64)")
    parser.add_argument("--delay", type=float, default=5.0, help="seconds per model turn")
    parser.add_argument("--loops", default="0", help="load factors, comma-separated")
    parser.add_argument("--neighbours", type=int, default=0, help="containers beside, at once")
    parser.add_argument("--neighbour-mib", type=int, default=256, help="each one's memory")
    add_record_option(parser)
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    factors = [int(loops) for loops in args.loops.split(",")]
    engine = connect_local_engine()
    project = find_project(ROOT)
    suite = load_suite(project.tasks, graders_dir=project.graders)
    ids = run_ids(suite, args.runs)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="agent-eval-bench-inflight-") as tmp:
        work = Path(tmp)
        consumer_dir = consumer(engine, project, suite, work)
        with scripted_upstream(engine, project, AGENT, delay_s=args.delay) as trial:
            config = RunnerConfig.model_validate_json(trial.config_path.read_bytes())
            gateway = BatchGateway(
                engine,
                config,
                engine.resolve_image(str(config.gatewayImage)),
                work_dir=work / "gateway",
                batch_id="bench-inflight",
                environ={KEY_ENV: trial.environ[KEY_ENV]},
            )
            try:
                gateway.start()
                if problems := gateway.preflight():
                    raise SystemExit("; ".join(problems))
                for loops in factors:
                    crowd = EngineCrowd(
                        engine,
                        str(config.gatewayImage),
                        neighbours=args.neighbours,
                        mib=args.neighbour_mib,
                    )
                    with LoadRig(loops, bound_s=7200), crowd:
                        for level in levels:
                            result = one_level(
                                level, engine, project, suite, config, consumer_dir, gateway,
                                ids, work,
                            )  # fmt: skip
                            result["loops"] = loops
                            result["neighbours"] = args.neighbours
                            results.append(result)
                            # Each level's figures as it ends: a run cut short keeps them.
                            print(json.dumps(result, sort_keys=True), file=sys.stderr, flush=True)
                    for result in results:
                        if result["loops"] == loops:
                            result["neighbourContainers"] = crowd.started
                            result["neighbourFailures"] = len(crowd.failures)
            finally:
                gateway.stop()
    # The baseline is the fewest runs in flight at the first load factor, whatever order
    # the levels ran in.
    first = [r for r in results if r["loops"] == factors[0]]
    baseline = min(first, key=lambda r: r["level"])["verdicts"] if first else {}
    for result in results:
        result["sameVerdictsAsFewest"] = result["verdicts"] == baseline
    columns = (
        ("loops", "loops"),
        ("level", "level"),
        ("status", "status"),
        ("finalSuccesses", "passed"),
        ("wallSeconds", "wall s"),
        ("harnessCores", "harness cores"),
        ("containersCpuPerAttempt", "containers cpu s/att"),
        ("runnerCpuMedianPerAttempt", "runner cpu s/att"),
        ("mostRunnersAtOnce", "most at once"),
        ("runnerPeakMiB", "runner peak MiB"),
        ("leastAvailableMiB", "least avail MiB"),
        ("admittedHere", "admitted"),
        ("infrastructureFailures", "infra fail"),
        ("infrastructureTries", "retried"),
        ("starvedTries", "starved"),
        ("cpuPressure", "pressure"),
        ("sameVerdictsAsFewest", "same verdicts"),
    )
    print("  ".join(f"{title:>{max(len(title), 6)}}" for _, title in columns))
    for result in results:
        print("  ".join(f"{result[key]!s:>{max(len(title), 6)}}" for key, title in columns))
    for result in results:
        if result["reasons"]:
            print(f"level {result['level']} reasons: {'; '.join(result['reasons'])}")
    figures = {
        "agent": AGENT,
        "delaySeconds": args.delay,
        "runsPerLevel": len(ids),
        "loops": factors,
        "neighbours": args.neighbours,
        "cores": os.cpu_count(),
        "levels": results,
    }
    emit("in_flight", figures, record=args.record)
    complete = all(r["status"] == "completed" for r in results)
    return 0 if complete and all(r["sameVerdictsAsFewest"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
