"""Benchmark ``agent-eval plan``: the CPU time of its answer, for inputs across its range.

    .venv/bin/python benchmarks/plan.py

Each input is planned in a fresh process (nothing cached between them), as the command
runs; the CPU time of ``runs_needed`` is measured inside it. The inputs take in the
README's example, a change too small to plan for (refused with the smallest change it
plans for) and the rates at the edges. Prints a table and one JSON line.
"""

from __future__ import annotations

import json
import subprocess
import sys

INPUTS = [
    (0.8, 0.1), (0.5, 0.2), (1.0, -0.3), (0.5, 1e-9), (0.0, 1e-9), (1.0, -1e-9),
    (0.99, 0.01), (0.5, 0.14), (0.2, 0.15), (0.7, -0.12), (0.05, 0.1), (0.95, -0.05),
]  # fmt: skip

_ONE = """
import sys, time
from agent_eval.compare.statistics import BeyondPlanning, runs_needed
baseline, detect = float(sys.argv[1]), float(sys.argv[2])
start = time.process_time()
try:
    answer = str(runs_needed(baseline, detect))
except BeyondPlanning as beyond:
    answer = f"refused (smallest {beyond.smallest})"
print(f"{time.process_time() - start:.3f} {answer}")
"""


def main() -> None:
    rows: list[dict[str, float | str]] = []
    worst = 0.0
    for baseline, detect in INPUTS:
        out = subprocess.run(
            [sys.executable, "-c", _ONE, str(baseline), str(detect)],
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout.split(" ", 1)  # fmt: skip
        rows.append({"baseline": baseline, "detect": detect, "cpuSeconds": float(out[0]),
                     "answer": out[1].strip()})  # fmt: skip
        worst = max(worst, float(out[0]))
        print(f"{baseline:>5} {detect:>8g}  {float(out[0]):6.3f} s  {out[1].strip()}")
    print(json.dumps({"benchmark": "plan", "maxCpuSeconds": worst,
                      "cases": rows}))  # fmt: skip


if __name__ == "__main__":
    main()
