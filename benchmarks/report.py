"""How big the report of a 36-attempt batch is, and how long Chromium takes to load it.

    .venv/bin/python benchmarks/report.py [--run-dir DIR] [--repeats 7]

Without ``--run-dir`` it synthesises a 36-attempt batch (every run fails its
first attempt and passes its repair, with the fixtures' real solutions, an
analysis finding each, a runner log, a transcript and a gateway record);
with it, it reports on that batch (``scripts/batch mutant`` makes one).
Measures, in one run:

* **size** of the written report.html (goal: under 2 MB);
* **write**: ``write_report`` (reading the evidence, deciding, rendering,
  writing), median of the repeats and its ratio to the goal of 1 s, and the
  first write apart (it also compiles the template, once per process);
* **load**: one headless Chromium kept open over its DevTools pipe, navigate
  to the report until its load event, median of the repeats (goal: under 1 s);
* **cold**: a whole headless Chromium process with ``--dump-dom`` on the
  report, and on an empty page as the floor, medians of the repeats.

Chromium runs as the browser tests run it: from ``file://``, in a network
namespace with only loopback, its own traffic off; the net log of every run
must show no request. Prints a table and one JSON line. Needs Debian's
chromium (scripts/setup); no container engine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_eval.project import find_project  # noqa: E402
from agent_eval.report.render import write_report  # noqa: E402
from agent_eval.verdict.qualification import current_anchors  # noqa: E402
from tests.browser import attempted_requests, devtools, find_chromium, run_chromium  # noqa: E402
from tests.evidence_builders import attempt, receipt, run, write_batch  # noqa: E402
from tests.paths import EXAMPLE_SUITE  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from record import add_record_option, emit  # noqa: E402

GOAL_BYTES = 2_000_000
GOAL_LOAD_SECONDS = 1.0
GOAL_WRITE_SECONDS = 1.0


def synthesise(root: Path) -> Path:
    """A 36-attempt batch: each run fails first and passes its repair, with real solutions."""
    runs = [run(r, [attempt(r, success=False), attempt(r, 2)]) for r in EXAMPLE_SUITE.run_ids()]
    batch = write_batch(root, receipt(runs))
    for run_id in EXAMPLE_SUITE.run_ids():
        task = run_id.rpartition("-")[0]
        fixtures = ROOT / "fixtures" / task
        negative = sorted(p for p in fixtures.iterdir() if p.name != "correct" and p.is_dir())[0]
        for number, source in ((1, negative), (2, fixtures / "correct")):
            batch.replace_solution(run_id, number, (source / "solution.py").read_bytes())
            folder = batch.attempt_dir(run_id, number)
            (folder / "runner.log").write_text(
                "".join(f"{i:05d} runner: step {i} of the agent's work\n" for i in range(400))
            )
            (folder / "transcript.jsonl").write_text(
                "".join(
                    json.dumps({"role": "assistant", "content": f"thinking about step {i} <ok>"})
                    + "\n"
                    for i in range(60)
                )
            )
            (folder / "gateway.jsonl").write_text(
                "".join(
                    json.dumps(
                        {
                            "path": "/v1/messages",
                            "status": 200,
                            "servedModel": "model-x-2026",
                            "usage": {"inputTokens": 1200 + i, "outputTokens": 300},
                        }
                    )
                    + "\n"
                    for i in range(8)
                )
            )
        finding = {
            "category": "type-error",
            "message": "a finding",
            "path": "solution.py",
            "line": 3,
        }
        batch.add_analysis(run_id, 1, typeCheckOk=False, diagnostics=[finding])
    return batch.root


def load_times(
    chromium: Path, page: Path, work: Path, repeats: int
) -> tuple[list[float], list[str]]:
    """Seconds from navigate to the load event, *repeats* times in one browser."""
    with devtools(chromium, work) as browser:
        session = browser.open_page("about:blank")
        times = []
        for _ in range(repeats):
            browser.send("Page.navigate", {"url": "about:blank"}, session)
            browser.wait_for("Page.loadEventFired", session)
            started = time.perf_counter()
            browser.send("Page.navigate", {"url": page.as_uri()}, session)
            browser.wait_for("Page.loadEventFired", session)
            times.append(time.perf_counter() - started)
    return times, attempted_requests(browser.net_log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, default=None, help="a saved batch to report on")
    parser.add_argument("--repeats", type=int, default=7, help="samples per measurement")
    add_record_option(parser)
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        print("benchmark: no chromium; run scripts/setup as root", file=sys.stderr)
        return 2
    current = current_anchors(find_project(ROOT))
    with tempfile.TemporaryDirectory(prefix="agent-eval-bench-report-") as tmp:
        work = Path(tmp)
        run_dir = args.run_dir or synthesise(work / "batch")
        output = work / "report.html"
        writes = []
        for _ in range(max(3, args.repeats // 2)):
            started = time.perf_counter()
            write_report(run_dir, output, current=current)
            writes.append(time.perf_counter() - started)
        size = output.stat().st_size
        loads, load_requests = load_times(chromium, output, work / "devtools", args.repeats)
        empty = work / "empty.html"
        empty.write_text("<!DOCTYPE html><title>empty</title>")
        cold: dict[str, list[float]] = {"report": [], "empty": []}
        requests = list(load_requests)
        for i in range(args.repeats):
            for name, page in (("report", output), ("empty", empty)):
                done = run_chromium(
                    chromium, page.as_uri(), work / f"cold-{name}-{i}", ["--dump-dom"]
                )
                if done.returncode != 0:
                    print(done.stderr[-2000:], file=sys.stderr)
                    return 1
                cold[name].append(done.seconds)
                requests += attempted_requests(done.net_log)
        attempts = sum(1 for _ in run_dir.glob("runs/*/attempt-*"))
    load = statistics.median(loads)
    write = statistics.median(writes)
    report: dict[str, Any] = {
        "runDir": "synthesised" if args.run_dir is None else str(args.run_dir),
        "attempts": attempts,
        "reportBytes": size,
        "writeFirstSeconds": round(writes[0], 3),
        "writeMedianSeconds": round(write, 3),
        "writeToGoal": round(write / GOAL_WRITE_SECONDS, 2),
        "loadMedianSeconds": round(load, 3),
        "loadMaxSeconds": round(max(loads), 3),
        "coldReportMedianSeconds": round(statistics.median(cold["report"]), 3),
        "coldEmptyMedianSeconds": round(statistics.median(cold["empty"]), 3),
        "networkRequests": len(requests),
        "underTwoMegabytes": size < GOAL_BYTES,
        "loadUnderOneSecond": load < GOAL_LOAD_SECONDS,
        "writeUnderOneSecond": write < GOAL_WRITE_SECONDS,
        "repeats": args.repeats,
    }
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    emit("report", report, record=args.record)
    ok = (
        report["underTwoMegabytes"]
        and report["loadUnderOneSecond"]
        and report["writeUnderOneSecond"]
        and not requests
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
