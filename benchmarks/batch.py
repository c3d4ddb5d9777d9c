"""Benchmark one whole 18-run batch with the oracle reference runner.

    .venv/bin/python benchmarks/batch.py [--batches N]

Measures, in one run: the batch's wall time and the time of each phase
(preflight, pack, consumer, schedule), the pack phase's CPU time (the
harness's and its build processes'), the time per attempt split into
runner and verification, and the harness overhead per scheduled run against
the floor of two bare hardened containers (a runner and a verifier running
`python3 -c pass`). Prints a table and one JSON line. Needs the engine and the
images (scripts/setup). Evidence goes to a temporary directory.

With ``--batches N`` the batch is run N times in a row in the same evidence
directory, so the first prepares the consumer and the next ones find it in
the consumer cache (which starts empty with the directory): each batch's
phases are printed, the figures above are the first batch's.

Each batch's CPU time per run is split (see ``machine_cpu``) into the
containers' own processes, the engine's daemons, the harness and the rest
(runtime shims, ``runc``, the kernel's container set-up and teardown): on a
machine with few cores that, not waiting, is what bounds the schedule (the
top-level split is the last batch's: a warm one with ``--batches 2``), and
the same split of the floor's pair of bare containers, with the ratio of
their busy times (``cpuOverFloor``; on a machine running other work too,
busy and rest include that work). With
``--record`` the JSON line is also appended to the performance record.

The goal is the whole batch (the last one: warm, with ``--batches 2``) within 1.5x
its floor, 18 x the floor per run / the slots: what 18 bare pairs of containers
would take on the batch's slots.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from machine_cpu import CpuSnapshot, cpu_split, process_cpu_seconds  # noqa: E402
from record import add_record_option, emit  # noqa: E402

import agent_eval.batch.preflight as batch_preflight  # noqa: E402
from agent_eval.batch.run import run_batch  # noqa: E402
from agent_eval.engine import ContainerEngine, ContainerSpec, run_container  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.evidence_io import write_model_atomic  # noqa: E402
from agent_eval.models import Receipt, TaskSpec  # noqa: E402
from agent_eval.packing import build_archives  # noqa: E402
from agent_eval.project import find_project  # noqa: E402
from agent_eval.reference.config import reference_config  # noqa: E402
from agent_eval.verification.container.verifier import batch_verifier_factory  # noqa: E402
from agent_eval.verification.protocol import (  # noqa: E402
    Verification,
    Verifier,
    VerifierContext,
)

FLOOR_SAMPLES = 7


class TimedPacking:
    """The batch's packing call with its CPU time recorded: on a loaded machine the pack
    phase's wall time says more about the neighbours than about packing."""

    def __init__(self) -> None:
        self.inner = build_archives
        self.cpu = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = process_cpu_seconds()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.cpu += process_cpu_seconds() - started


class TimedVerifier:
    """Wraps a verifier port and records how long each verification took."""

    def __init__(self, inner: Verifier) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds: list[float] = []
        self.lock = threading.Lock()

    def api_catalog(self) -> Mapping[str, Any]:
        return self.inner.api_catalog()

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        started = time.monotonic()
        try:
            return self.inner.verify(task, solution_dir, run_id)
        finally:
            with self.lock:
                self.seconds.append(time.monotonic() - started)

    def cancel_all(self) -> None:
        self.inner.cancel_all()


GOAL_OVER_FLOOR = 1.5
"""The whole batch's wall time over 18 x the floor per run / the slots."""


def floor(engine: ContainerEngine, image: str, role: str) -> float:
    samples = []
    for index in range(FLOOR_SAMPLES):
        spec = ContainerSpec(
            image=image,
            command=("/usr/bin/python3", "-c", "pass"),
            role=role,  # type: ignore[arg-type]
            batch_id="benchmark-floor",
            run_id=f"floor-{index}",
        )
        samples.append(run_container(engine, spec, timeout_s=60, log_limit_bytes=1024).seconds)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=1, help="batches in a row (default 1)")
    add_record_option(parser)
    args = parser.parse_args()
    engine = connect_local_engine()
    config = reference_config(
        engine, "oracle", project_root=ROOT, runtime_path="/var/run/docker.sock"
    )
    before = CpuSnapshot.take()
    runner_floor = floor(engine, config.runnerImage, "runner")
    verifier_floor = floor(engine, config.verifierImage, "verifier")
    # The CPU one run cannot do without: a bare runner and a bare verifier container.
    floor_cpu = cpu_split(before, CpuSnapshot.take(), per=FLOOR_SAMPLES)
    project = find_project(ROOT)
    timed: list[TimedVerifier] = []

    make = batch_verifier_factory(project)
    packing = TimedPacking()
    # The preflight calls packing by the name it imported: time it there.
    setattr(batch_preflight, "build_archives", packing)  # noqa: B010

    def factory(context: VerifierContext) -> Verifier:
        verifier = TimedVerifier(make(context))
        timed.append(verifier)
        return verifier

    with tempfile.TemporaryDirectory(prefix="agent-eval-bench-") as tmp:
        evidence = Path(tmp)
        # The same project (its registry and guides too), its evidence elsewhere.
        bench_project = dataclasses.replace(project, evidence=evidence)
        config_path = evidence / "runner.json"
        write_model_atomic(config_path, config)
        outcomes = []
        walls = []
        splits = []
        for _ in range(max(1, args.batches)):
            started, before = time.monotonic(), CpuSnapshot.take()
            outcomes.append(
                run_batch(
                    config_path,
                    bench_project,
                    verifier_factory=factory,
                    connect=connect_local_engine,
                )
            )
            walls.append(time.monotonic() - started)
            splits.append(cpu_split(before, CpuSnapshot.take(), per=18))
        outcome, wall = outcomes[0], walls[0]
        receipt = Receipt.model_validate_json(outcome.receipt.read_bytes())
        locks = {o.receipt.parent.joinpath("consumer-lock.json").read_bytes() for o in outcomes}
    attempts = [a.durationMs / 1000 for r in receipt.runs for a in r.attempts]
    verify = timed[0].seconds if timed else []
    per_run = statistics.median(attempts)
    per_verify = statistics.median(verify) if verify else 0.0
    report: dict[str, Any] = {
        "status": outcome.status,
        "finalSuccesses": outcome.final_successes,
        "concurrency": config.concurrency or 2,
        "wallSeconds": round(wall, 2),
        "phaseSeconds": {k: round(v, 2) for k, v in outcome.phase_seconds.items()},
        "packCpuSeconds": round(packing.cpu, 3),
        "attemptMedianSeconds": round(per_run, 3),
        "verificationMedianSeconds": round(per_verify, 3),
        "runnerAndHarnessMedianSeconds": round(per_run - per_verify, 3),
        "floorRunnerSeconds": round(runner_floor, 3),
        "floorVerifierSeconds": round(verifier_floor, 3),
        "floorPerRunSeconds": round(runner_floor + verifier_floor, 3),
        "attemptOverFloor": round(per_run / (runner_floor + verifier_floor), 2),
        "scheduleSecondsPerRun": round(outcome.phase_seconds.get("schedule", 0.0) / 18, 3),
        "cpuSecondsPerRun": splits[-1],
        "floorCpuSecondsPerRun": floor_cpu,
        "cpuOverFloor": round(splits[-1]["busy"] / floor_cpu["busy"], 2)
        if splits[-1]["busy"] and floor_cpu["busy"]
        else None,
        "cores": os.cpu_count(),
    }
    batch_floor = 18 * (runner_floor + verifier_floor) / report["concurrency"]
    report["batchFloorSeconds"] = round(batch_floor, 2)
    report["batchOverFloor"] = round(walls[-1] / batch_floor, 2)
    report["batchOverFloorGoal"] = GOAL_OVER_FLOOR
    if len(outcomes) > 1:
        report["batches"] = [
            {
                "status": o.status,
                "wallSeconds": round(w, 2),
                "phaseSeconds": {k: round(v, 2) for k, v in o.phase_seconds.items()},
                "cpuSecondsPerRun": split,
            }
            for o, w, split in zip(outcomes, walls, splits, strict=True)
        ]
        consumer = [o.phase_seconds.get("consumer", 0.0) for o in outcomes]
        report["consumerSecondsByBatch"] = [round(c, 2) for c in consumer]
        report["consumerLaterOverFirst"] = round(statistics.median(consumer[1:]) / consumer[0], 3)
        report["sameConsumerLock"] = len(locks) == 1
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    emit("batch", report, record=args.record)
    return 0 if all(o.status == "completed" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
