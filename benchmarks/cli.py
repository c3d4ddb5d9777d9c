"""How much the commands cost before they do anything: ``--help`` and ``--version``.

    .venv/bin/python benchmarks/cli.py [--repeats 9] [--record]

Runs every entry point's ``--help`` and ``--version`` (and ``agent-eval
check --help``, a subcommand's page) as whole processes from the project's
virtualenv, ``--repeats`` times each, and measures each process's CPU time
(user + system, from the kernel's accounting of the waited-for child) and its
wall time. CPU time is the figure that holds on a busy machine: the wall time
grows with the load, the work does not. Prints a table of medians with each
one's ratio to the goal (0.15 s of CPU) and one JSON line. Needs no engine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import add_record_option, emit  # noqa: E402

GOAL_CPU_SECONDS = 0.15
BIN = ROOT / ".venv" / "bin"
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("agent-eval", "--help"),
    ("agent-eval", "--version"),
    ("agent-eval", "check", "--help"),
    ("eval-agent", "--help"),
    ("eval-agent", "--version"),
    ("check-agent-eval", "--help"),
    ("check-agent-eval", "--version"),
    ("review-agent-eval", "--help"),
    ("review-agent-eval", "--version"),
)


def measure(argv: tuple[str, ...]) -> tuple[float, float]:
    """One whole process: (CPU seconds of the child, wall seconds)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [str(BIN / argv[0]), *argv[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {process.returncode}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=9, help="runs of each command (default 9)")
    add_record_option(parser)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    rows: dict[str, dict[str, float]] = {}
    for argv in COMMANDS:
        measure(argv)  # a first run warms the page cache and the bytecode
        samples = [measure(argv) for _ in range(args.repeats)]
        cpu = statistics.median(s[0] for s in samples)
        wall = statistics.median(s[1] for s in samples)
        rows[" ".join(argv)] = {
            "cpuSeconds": round(cpu, 3),
            "wallSeconds": round(wall, 3),
            "cpuOverGoal": round(cpu / GOAL_CPU_SECONDS, 2),
        }
    width = max(len(name) for name in rows)
    print(f"{'command':<{width}}  cpu s   wall s  cpu/goal ({GOAL_CPU_SECONDS} s)")
    for name, row in rows.items():
        print(
            f"{name:<{width}}  {row['cpuSeconds']:<6}  {row['wallSeconds']:<6}  "
            f"{row['cpuOverGoal']}"
        )
    worst = max(row["cpuSeconds"] for row in rows.values())
    figures = {
        "repeats": args.repeats,
        "goalCpuSeconds": GOAL_CPU_SECONDS,
        "worstCpuSeconds": worst,
        "worstCpuOverGoal": round(worst / GOAL_CPU_SECONDS, 2),
        "commands": rows,
    }
    emit("cli", figures, record=args.record)
    return 0 if worst <= GOAL_CPU_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
