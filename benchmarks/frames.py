"""What one forged frame from the solution costs the trusted parent, in CPU time.

    .venv/bin/python benchmarks/frames.py [--repeats 3]

The parent runs in this process (``verification.runtime.parent.run_job``, as
in the verifier container, without the privilege drop); the solution runs in
its real child process and, instead of answering, writes its own frame to the
child's pipe. Each shape is measured as the parent's own CPU time (user +
system of this process, its children excluded) over one whole grading, less
the same grading with a tiny forged frame: what the frame itself costs the
parent. Shapes, each one frame of about 1 MiB:

* ``long-key``: ``{"k" * 500000: [0] * 240000}`` (a location string per
  element made decoding quadratic);
* ``flat``: ``[0] * 500000``;
* ``deep-wide``: 1,800 objects of 20 keys each, three levels deep;
* ``effect``: the same long-key value as the arguments of an effect the
  solution was never given (then a forged return ends the call).

Prints a table and one JSON line (with ``--record``, also appended to the
performance record). Needs no engine.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from record import add_record_option, emit  # noqa: E402

from agent_eval.verification.runtime.job import parse_job  # noqa: E402
from agent_eval.verification.runtime.parent import run_job  # noqa: E402

GRADER = """
from agent_eval.grading import Grader, Session


class Frames(Grader):
    task_id = "frames"
    assertion_ids = ("answered",)
    safety_assertion_ids = ()

    def run(self, session: Session) -> None:
        with session.scenario("forged frame") as sc:
            sc.call("probe", sc.effect("send"))
            sc.record("answered", True)


GRADER = Frames()
"""

SOLUTION = """
import json, os, struct, sys, time

SHAPE = {shape!r}


def value():
    if SHAPE == "tiny":
        return 0
    if SHAPE == "flat":
        return [0] * 500000
    if SHAPE == "deep-wide":
        return [{{f"f{{i}}": {{"a": [1, 2.5, "x"]}} for i in range(20)}} for _ in range(1800)]
    return {{"k" * 500000: [0] * 240000}}


def probe(send):
    fd = int(sys.argv[-1])
    if SHAPE == "effect":
        message = {{"op": "effect", "call": 1, "effect": "unknown", "args": [value()],
                    "kwargs": {{}}}}
    else:
        message = {{"op": "return", "id": 1, "value": value()}}
    frames = [message, {{"op": "return", "id": 1, "value": None}}]
    for frame in frames[: 2 if SHAPE == "effect" else 1]:
        body = json.dumps(frame, separators=(",", ":")).encode()
        os.write(fd, struct.pack(">I", len(body)) + body)
    time.sleep(60)
"""

SHAPES = ("long-key", "flat", "deep-wide", "effect")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _grade(root: Path, shape: str) -> tuple[float, dict[str, Any]]:
    """The parent's CPU seconds for one grading whose solution forges *shape*."""
    work = Path(tempfile.mkdtemp(dir=root))
    task = work / "task"
    task.mkdir()
    (task / "grader.py").write_text(GRADER, encoding="utf-8")
    spec = {"id": "frames", "allowedOutputPaths": ["solution.py"], "assertionIds": ["answered"]}
    (task / "task.json").write_text(json.dumps({**spec, "safetyAssertionIds": []}))
    solution = work / "solution"
    solution.mkdir()
    (solution / "solution.py").write_text(
        textwrap.dedent(SOLUTION.format(shape=shape)), encoding="utf-8"
    )
    (work / "scratch").mkdir()
    job = parse_job(
        {
            "schemaVersion": 1,
            "taskId": "frames",
            "graderPath": str(task / "grader.py"),
            "taskPath": str(task / "task.json"),
            "solutionDir": str(solution),
            "scratchDir": str(work / "scratch"),
            "resultPath": str(work / "result.json"),
            "limits": {"callTimeoutMs": 120_000, "scenarioTimeoutMs": 120_000},
        }
    )
    before = _cpu_s()
    report = run_job(job)
    return _cpu_s() - before, report.to_json()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    add_record_option(parser)
    args = parser.parse_args()
    figures: dict[str, float] = {}
    outcomes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="agent-eval-frames-") as tmp:
        root = Path(tmp)
        floor = statistics.median(_grade(root, "tiny")[0] for _ in range(args.repeats))
        print(f"{'shape':<12} {'parent CPU s':>13}  outcome")
        print(f"{'tiny':<12} {floor:>13.3f}  (the floor, subtracted below)")
        for shape in SHAPES:
            runs = [_grade(root, shape) for _ in range(args.repeats)]
            cost = max(0.0, statistics.median(cpu for cpu, _ in runs) - floor)
            error = runs[-1][1]["error"]
            outcome = "answered" if error is None else f"{error['category']}: {error['message']}"
            figures[shape] = round(cost, 4)
            outcomes[shape] = outcome[:120]
            print(f"{shape:<12} {cost:>13.3f}  {outcome[:100]}")
    emit(
        "frames",
        {
            "parentCpuSecondsPerFrame": figures,
            "floorCpuSeconds": round(floor, 4),
            "outcomes": outcomes,
            "repeats": args.repeats,
        },
        record=args.record,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
