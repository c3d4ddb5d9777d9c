"""The performance record: benchmarks' JSON lines kept in the repository on demand.

Every benchmark prints one JSON line; with ``--record`` it also appends that
line to ``benchmarks/record.jsonl``, stamped with the benchmark's name, the
time, the commit of the checkout (and whether its tree had changes), the
machine's core count and its load at the start, so the next change is compared
with the last one measured on the same kind of machine, not with a memory.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "record.jsonl"

__all__ = ["RECORD", "add_record_option", "emit"]


def add_record_option(parser: argparse.ArgumentParser) -> None:
    """The ``--record`` flag every benchmark takes."""
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"also append the JSON line to {RECORD.relative_to(ROOT)}",
    )


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else ""


def emit(name: str, figures: dict[str, Any], *, record: bool) -> None:
    """Print the benchmark's JSON line; with ``record``, append it stamped to the record."""
    print(json.dumps(figures, sort_keys=True))
    if not record:
        return
    entry = {
        "benchmark": name,
        "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "cores": os.cpu_count(),
        "load1": round(os.getloadavg()[0], 2),
        "figures": figures,
    }
    # One write of one line in append mode: concurrent benchmarks never interleave.
    with RECORD.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")
