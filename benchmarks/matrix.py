"""Benchmark several runners in one command against the same batches one after another.

    .venv/bin/python benchmarks/matrix.py [--runners oracle,mutant,null] [--repeat N]
        [--concurrency N] [--record]

After one untimed batch (so the user's wheel cache holds the library's wheels for
both arms alike), each arm starts on a clean checkout with a consumer cache of its own:
*sequential* runs ``eval-agent`` once per reference runner, one after another (the
second and later batches find the consumer the first prepared, as a user's would);
*matrix* runs one ``eval-agent`` with every ``--runner-config``, which packs the library
once, prepares one consumer and hands one set of slots to every runner's runs in turn.
Both arms use the same slots (``--concurrency``). The arms alternate, *repeat* times;
printed are each arm's wall times, their medians and the ratio matrix / sequential, and
whether both arms gave every runner the same first and final successes. One JSON line
follows; with ``--record`` it is also appended to the performance record. Needs the
engine and the images (scripts/setup).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import add_record_option, emit  # noqa: E402

from agent_eval.consumer.cache import CACHE_ENV  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from tests.batches import BIN, project_copy, write_config  # noqa: E402


def _eval_agent(project: Path, configs: list[Path], cache: Path) -> tuple[float, list[str]]:
    """One eval-agent command: its wall time, and each batch's first/final successes."""
    began = time.monotonic()
    done = subprocess.run(
        [str(BIN / "eval-agent"), *(a for c in configs for a in ("--runner-config", str(c))),
         "--project", str(project)],
        capture_output=True, text=True, timeout=3600, check=False,
        env={**os.environ, CACHE_ENV: str(cache)},
    )  # fmt: skip
    seconds = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"eval-agent failed ({done.returncode}): {done.stderr[-2000:]}")
    line = json.loads(done.stdout)
    batches = line.get("batches", [line])
    return seconds, [f"{b['firstSuccesses']}/{b['finalSuccesses']}" for b in batches]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runners", default="oracle,mutant,null", help="reference runners")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of both arms")
    parser.add_argument("--concurrency", type=int, default=2, help="slots, in both arms")
    add_record_option(parser)
    args = parser.parse_args()
    modes = [m for m in args.runners.split(",") if m]

    engine = connect_local_engine()
    times: dict[str, list[float]] = {"sequential": [], "matrix": []}
    outcomes: dict[str, list[str]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="agent-eval-bench-matrix-") as tmp:
            root = Path(tmp)
            configs = [
                write_config(engine, root / f"{m}.json", m, concurrency=args.concurrency)
                for m in modes
            ]
            # Untimed: the user's wheel cache then holds this tree's wheels for both arms.
            (warm := root / "warm-up").mkdir()
            _eval_agent(project_copy(warm), configs[:1], warm / "cache")
            for n in range(args.repeat):
                for arm in ("sequential", "matrix"):
                    (here := root / f"{arm}-{n}").mkdir()
                    project = project_copy(here)
                    cache = here / "cache"
                    if arm == "matrix":
                        seconds, found = _eval_agent(project, configs, cache)
                    else:
                        seconds, found = 0.0, []
                        for config in configs:
                            took, one = _eval_agent(project, [config], cache)
                            seconds += took
                            found += one
                    times[arm].append(round(seconds, 2))
                    outcomes.setdefault(arm, found)
                    print(f"{arm} {n + 1}: {seconds:.1f} s  {' '.join(found)}", file=sys.stderr)
    finally:
        engine.close()
    medians = {arm: statistics.median(t) for arm, t in times.items()}
    ratio = round(medians["matrix"] / medians["sequential"], 3)
    same = outcomes["matrix"] == outcomes["sequential"]
    print(f"runners {', '.join(modes)}; {args.concurrency} slots; {args.repeat} round(s)")
    for arm, values in times.items():
        print(f"  {arm:<10} median {medians[arm]:7.1f} s   runs {values}")
    print(f"  matrix / sequential: {ratio}   same successes per runner: {same}")
    figures: dict[str, Any] = {
        "runners": modes,
        "concurrency": args.concurrency,
        "sequentialSeconds": times["sequential"],
        "matrixSeconds": times["matrix"],
        "sequentialMedianS": round(medians["sequential"], 2),
        "matrixMedianS": round(medians["matrix"], 2),
        "matrixOverSequential": ratio,
        "successes": outcomes["matrix"],
        "sameSuccesses": same,
    }
    emit("matrix", figures, record=args.record)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
