"""How long ``check-agent-eval`` takes on a saved batch, against the goal of 0.3 s warm.

    .venv/bin/python benchmarks/check.py [--run-dir DIR] [--repeats 5] [--cold 1] [--record]

Measures, on a saved batch (``scripts/batch`` leaves one; default: the newest
completed batch under the project's evidence directory):

* **warm**: the whole ``check-agent-eval`` process, as a release gate runs it
  after a batch of the same commit, the wheels' rebuild taken from the wheel
  cache; median wall and CPU time (the process's and its children's: git and
  the builds);
* **cold**: the same with an empty wheel cache (the build lock's wheelhouse
  and build environments kept): the rebuild really builds;
* **floor**: the interpreter alone (``python -c pass``);
* **phases**: where one warm check's time goes, in a fresh interpreter: the
  imports, finding the project, the anchors, reading the receipt and
  archives.json, the rebuild from the recorded commit, the registry and
  history read from git, every other rule; wall and CPU time each.

Prints a table and one JSON line with the medians and their ratios to the goal
(with ``--record``, also appended to the performance record). On a loaded
machine compare the CPU column, or ratios to the same run's floor. Needs no
engine; the batch must be of the checkout's commit for the rebuild to be the
warm one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from machine_cpu import process_cpu_seconds  # noqa: E402
from record import add_record_option, emit  # noqa: E402

GOAL_SECONDS = 0.3
"""The warm check's goal (it was 1 s until the batch, checker and CLI met theirs)."""
T = TypeVar("T")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_process(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of *command* as a whole process (its children included)."""
    before, started = children_cpu(), time.monotonic()
    subprocess.run(command, env=env, capture_output=True, check=False, timeout=600)
    return time.monotonic() - started, children_cpu() - before


def newest_batch(evidence: Path) -> Path | None:
    """The newest run directory under *evidence* holding a completed batch."""
    for receipt in sorted(evidence.glob("*/receipt.json"), reverse=True):
        try:
            status = json.loads(receipt.read_text(encoding="utf-8")).get("status")
        except (OSError, ValueError):
            continue
        if status == "completed" and (receipt.parent / "archives.json").is_file():
            return receipt.parent
    return None


@contextmanager
def cold_wheel_cache() -> Iterator[dict[str, str]]:
    """An environment whose packing cache has the user's wheelhouse and build environments
    but no built wheels."""
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    with tempfile.TemporaryDirectory(prefix="agent-eval-bench-check-") as tmp:
        packing = Path(tmp) / "agent-eval" / "packing"
        packing.mkdir(parents=True)
        for name in ("wheels", "envs"):
            (user / "agent-eval" / "packing" / name).mkdir(parents=True, exist_ok=True)
            (packing / name).symlink_to(user / "agent-eval" / "packing" / name)
        yield {**os.environ, "XDG_CACHE_HOME": tmp}


class Phases:
    """Wall and CPU seconds per named phase."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        wall, cpu = time.monotonic(), process_cpu_seconds()
        try:
            yield
        finally:
            spent = self.seconds.setdefault(name, [0.0, 0.0])
            spent[0] += time.monotonic() - wall
            spent[1] += process_cpu_seconds() - cpu

    def wrap(self, name: str, call: Callable[..., T] | None) -> Callable[..., T] | None:
        if call is None:
            return None
        inner = call

        def timed(*args: Any) -> T:
            with self.phase(name):
                return inner(*args)

        return timed


def profile_phases(run_dir: Path) -> dict[str, list[float]]:
    """One check in this interpreter, phase by phase (run in a fresh one by :func:`main`)."""
    phases = Phases()
    with phases.phase("imports"):
        import dataclasses

        import agent_eval.cli  # noqa: F401  (what check-agent-eval imports first)
        from agent_eval.cli.common import located_project
        from agent_eval.evidence_io import read_model
        from agent_eval.models import ArchivesManifest, Receipt
        from agent_eval.verdict.qualification import current_anchors, qualify
    with phases.phase("project"):
        project = located_project(REPO)
    with phases.phase("anchors"):
        anchors = current_anchors(project)
    anchors = dataclasses.replace(
        anchors,
        rebuild=phases.wrap("rebuild (from the recorded commit)", anchors.rebuild),
        registry_at=phases.wrap("registry and history (git)", anchors.registry_at),
        committed_at=phases.wrap("registry and history (git)", anchors.committed_at),
        registry_changed=phases.wrap("registry and history (git)", anchors.registry_changed),
    )
    with phases.phase("read receipt and archives.json"):
        receipt = read_model(run_dir / "receipt.json", Receipt, what="receipt")
        archives = read_model(run_dir / "archives.json", ArchivesManifest, what="archives")
    with phases.phase("rules"):
        qualify(receipt, run_dir, archives, run_dir / "archives.json", anchors)
    wall, cpu = phases.seconds["rules"]
    for name, (inner_wall, inner_cpu) in phases.seconds.items():
        if name.startswith(("rebuild", "registry")):
            wall, cpu = wall - inner_wall, cpu - inner_cpu
    phases.seconds["rules"] = [wall, cpu]
    phases.seconds["other rules"] = phases.seconds.pop("rules")
    return phases.seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, help="a saved batch (default: the newest)")
    parser.add_argument("--repeats", type=int, default=5, help="warm checks (default 5)")
    parser.add_argument("--cold", type=int, default=1, help="cold checks (default 1)")
    parser.add_argument("--phases-of", type=Path, help=argparse.SUPPRESS)
    add_record_option(parser)
    args = parser.parse_args()
    if args.phases_of is not None:
        print(json.dumps(profile_phases(args.phases_of)))
        return 0

    sys.path.insert(0, str(REPO))
    from agent_eval.project import find_project

    run_dir = args.run_dir or newest_batch(find_project(REPO).evidence)
    if run_dir is None:
        print("no completed batch under the evidence directory: run scripts/batch first")
        return 2
    checker = str(Path(sys.executable).parent / "check-agent-eval")
    command = [
        checker, "--receipt", str(run_dir / "receipt.json"),
        "--archives", str(run_dir / "archives.json"), "--project", str(REPO),
    ]  # fmt: skip
    floor = [timed_process([sys.executable, "-c", "pass"]) for _ in range(args.repeats)]
    timed_process(command)  # fills the wheel cache if this commit was never checked
    warm = [timed_process(command) for _ in range(args.repeats)]
    cold = []
    for _ in range(args.cold):
        with cold_wheel_cache() as env:
            cold.append(timed_process(command, env))
    profiled = subprocess.run(
        [sys.executable, __file__, "--phases-of", str(run_dir)],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    phases: dict[str, list[float]] = json.loads(profiled.stdout)

    def median(samples: list[tuple[float, float]], index: int) -> float:
        return round(statistics.median(s[index] for s in samples), 3) if samples else 0.0

    rows = [("floor: python -c pass", floor), ("check, warm wheel cache", warm)]
    rows += [("check, cold wheel cache", cold)] if cold else []
    print(f"{'':<38}{'wall s':>9}{'cpu s':>9}")
    for name, samples in rows:
        print(f"{name:<38}{median(samples, 0):>9.3f}{median(samples, 1):>9.3f}")
    print("phases of one warm check (fresh interpreter):")
    for name, (wall, cpu) in phases.items():
        print(f"  {name:<36}{wall:>9.3f}{cpu:>9.3f}")
    figures = {
        "runDir": run_dir.name,
        "repeats": args.repeats,
        "floorWallS": median(floor, 0),
        "floorCpuS": median(floor, 1),
        "warmWallS": median(warm, 0),
        "warmCpuS": median(warm, 1),
        "coldWallS": median(cold, 0),
        "coldCpuS": median(cold, 1),
        "goalSeconds": GOAL_SECONDS,
        "warmWallToGoal": round(median(warm, 0) / GOAL_SECONDS, 2),
        "warmCpuToGoal": round(median(warm, 1) / GOAL_SECONDS, 2),
        "warmCpuOverFloor": round(median(warm, 1) / max(median(floor, 1), 0.001), 1),
        "phaseWallS": {name: round(wall, 3) for name, (wall, _) in phases.items()},
        "phaseCpuS": {name: round(cpu, 3) for name, (_, cpu) in phases.items()},
    }
    print(f"warm check / goal of {GOAL_SECONDS} s: wall {figures['warmWallToGoal']}, "
          f"cpu {figures['warmCpuToGoal']}")  # fmt: skip
    emit("check", figures, record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
