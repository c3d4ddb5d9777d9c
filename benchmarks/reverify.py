"""Benchmark `check-agent-eval --reverify`'s re-verification, one at a time and in parallel.

    .venv/bin/python benchmarks/reverify.py [--run-dir DIR] [--rounds 2]

Re-verifies every attempt of a saved batch (DIR, or a whole 18-run oracle
batch run first into a temporary directory) with the recorded verifier
image, alternately one verification at a time and one per core (what the
checker does), round by round so that both see the same load. Prints, for
each, the median wall time and the reasons (which must be the same, and
none about a verdict), the ratio parallel / one at a time, and the parallel
time's ratio to the goal of 6 s for an 18-run batch. Needs the
engine and the images (scripts/setup). On a loaded machine compare the
ratio, never wall times across runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import add_record_option, emit  # noqa: E402

from agent_eval.batch.run import run_batch  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.evidence_io import write_model_atomic  # noqa: E402
from agent_eval.project import Project, find_project  # noqa: E402
from agent_eval.reference.config import reference_config  # noqa: E402
from agent_eval.verdict.reverify import reverify_files, reverify_workers  # noqa: E402
from agent_eval.verification.container.verifier import (  # noqa: E402
    batch_verifier_factory,
    evidence_verifiers,
)

GOAL_SECONDS = 6.0
"""--reverify of an 18-run batch, one verification per core."""


def oracle_batch(project: Project, evidence: Path) -> Path:
    engine = connect_local_engine()
    config = reference_config(
        engine, "oracle", project_root=ROOT, runtime_path="/var/run/docker.sock"
    )
    config_path = evidence / "runner.json"
    write_model_atomic(config_path, config)
    # The same project (its registry and guides too), its evidence elsewhere.
    here = dataclasses.replace(project, evidence=evidence)
    outcome = run_batch(
        config_path,
        here,
        verifier_factory=batch_verifier_factory(project),
        connect=connect_local_engine,
    )
    if outcome.status != "completed":
        raise SystemExit(f"the oracle batch did not complete: {outcome.status}")
    return outcome.receipt.parent


def timed(project: Project, run_dir: Path, workers: int) -> tuple[float, list[str]]:
    engine = connect_local_engine()
    started = time.monotonic()
    reasons = reverify_files(
        run_dir / "receipt.json",
        run_dir / "archives.json",
        project,
        lambda manifest, where: evidence_verifiers(engine, project, manifest, where, slots=workers),
        workers=workers,
    )
    return time.monotonic() - started, reasons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", type=Path, help="a saved batch (default: run one)")
    parser.add_argument("--rounds", type=int, default=2)
    add_record_option(parser)
    args = parser.parse_args()
    project = find_project(ROOT)
    workers = reverify_workers()
    seconds: dict[int, list[float]] = {1: [], workers: []}
    reasons: dict[int, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="agent-eval-bench-") as tmp:
        run_dir = args.run_dir or oracle_batch(project, Path(tmp))
        attempts = sum(
            1
            for run in json.loads((run_dir / "receipt.json").read_text())["runs"]
            for attempt in run["attempts"]
            if attempt.get("analysisDigest")
        )
        for _ in range(max(1, args.rounds)):
            for count in (1, workers):
                took, found = timed(project, run_dir, count)
                seconds[count].append(took)
                reasons.setdefault(count, found)
                if found != reasons[1]:
                    print(f"reasons differ with {count} workers: {found}", file=sys.stderr)
                    return 1
    report: dict[str, Any] = {
        "attempts": attempts,
        "workers": workers,
        "oneAtATimeSeconds": round(statistics.median(seconds[1]), 2),
        "parallelSeconds": round(statistics.median(seconds[workers]), 2),
        "parallelOverOneAtATime": round(
            statistics.median(seconds[workers]) / statistics.median(seconds[1]), 3
        ),
        "goalSeconds": GOAL_SECONDS,
        "parallelToGoal": round(statistics.median(seconds[workers]) / GOAL_SECONDS, 2),
        "reasons": reasons[1],
        "verdictReasons": sum(1 for r in reasons[1] if r.startswith("reverify")),
    }
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    emit("reverify", report, record=args.record)
    return 0 if report["verdictReasons"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
