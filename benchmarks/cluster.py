"""Benchmark the Ray executor: the oracle batch on a two-worker cluster against this machine.

    .venv/bin/python benchmarks/cluster.py [--rounds N]

Starts the cluster of the cluster tests (tests/cluster/ray_nodes.py: a head
and two workers, each worker with a dockerd of its own holding the reference
runner and verifier images, everything in a network namespace with only a
loopback interface, token authentication, telemetry off) and times its
start-up. Then, alternating round by round so that drift hits both, the
18-run oracle batch through ``eval-agent`` on a fresh checkout each time:

* ``local``: the default executor, two runs at a time on the default engine;
* ``cluster``: ``--executor ray``, one run at a time on each worker.

Both are whole ``eval-agent`` processes (preflight, packing, the driver's
consumer and verifier; on the cluster also each node's consumer and
verifier), and the span of the runs alone (the first attempt's start to the
receipt's last update). Every batch must complete 18/18. Prints a table
(medians, the ratio cluster/local) and one JSON line. Needs root (network
namespaces), the engine, the images and the ray extra (``scripts/setup``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.images.build import image_for_checkout  # noqa: E402
from agent_eval.models import Receipt  # noqa: E402
from tests.batches import BIN, project_copy, write_config  # noqa: E402
from tests.cluster.ray_nodes import RayCluster, ray_cluster  # noqa: E402


def _batch(command: list[str], env: dict[str, str] | None, project: Path) -> tuple[float, float]:
    """Run one batch; its whole wall time and the span of its runs."""
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.monotonic() - started
    line = json.loads(done.stdout)
    if (line["status"], line["finalSuccesses"]) != ("completed", 18):
        raise SystemExit(f"the batch did not complete 18/18: {line}\n{done.stderr[-3000:]}")
    (run_dir,) = [p for p in (project / "evidence").glob("*") if not p.name.startswith(".")]
    receipt = Receipt.model_validate_json((run_dir / "receipt.json").read_bytes())
    first = min(a.startedAt for r in receipt.runs for a in r.attempts)
    return wall, (receipt.updatedAt - first).total_seconds()


def _local(work: Path, config: Path) -> tuple[float, float]:
    project = project_copy(work)
    command = [str(BIN / "eval-agent"), "--runner-config", str(config), "--project", str(project)]
    return _batch([*command, "--progress", "none"], None, project)


def _cluster(cluster: RayCluster, work: Path, config: Path) -> tuple[float, float]:
    project = project_copy(work)
    command = cluster.in_netns(
        *(str(BIN / "eval-agent"), "--runner-config", str(config), "--project", str(project)),
        *("--executor", "ray", "--ray-address", cluster.address, "--ray-node-ip", "127.0.0.1"),
        *("--progress", "none"),
    )
    return _batch(command, cluster.env, project)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    engine = connect_local_engine()
    images = [image_for_checkout(engine, ROOT, n) for n in ("reference-runner", "verifier")]
    results: dict[str, list[tuple[float, float]]] = {"local": [], "cluster": []}
    with tempfile.TemporaryDirectory(prefix="ae-bench-cluster-") as scratch:
        work = Path(scratch)
        config = write_config(engine, work / "runner.json", "oracle")
        started = time.monotonic()
        with ray_cluster(images, workers=2, slots=1) as cluster:
            startup = time.monotonic() - started
            for index in range(rounds):
                for name in ("local", "cluster") if index % 2 == 0 else ("cluster", "local"):
                    where = work / f"{name}-{index}"
                    where.mkdir()
                    timed = (
                        _local(where, config)
                        if name == "local"
                        else _cluster(cluster, where, config)
                    )
                    results[name].append(timed)
                    print(f"round {index + 1} {name}: {timed[0]:.1f} s, runs {timed[1]:.1f} s")
    summary: dict[str, Any] = {"rounds": rounds, "clusterStartupS": round(startup, 1)}
    for name, timings in results.items():
        summary[f"{name}WallS"] = round(statistics.median(t[0] for t in timings), 2)
        summary[f"{name}RunsS"] = round(statistics.median(t[1] for t in timings), 2)
    summary["wallRatio"] = round(summary["clusterWallS"] / summary["localWallS"], 3)
    summary["runsRatio"] = round(summary["clusterRunsS"] / summary["localRunsS"], 3)
    print(f"cluster start-up (2 engines loaded, head, 2 workers): {startup:.1f} s")
    print("| executor | whole batch (median) | runs alone (median) |")
    print("| --- | --- | --- |")
    for name in results:
        print(f"| {name} | {summary[f'{name}WallS']} s | {summary[f'{name}RunsS']} s |")
    print(f"ratio cluster/local: whole {summary['wallRatio']}, runs {summary['runsRatio']}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
