"""How long one attempt's verification takes in the verifier container, against its floor.

    .venv/bin/python benchmarks/verification.py [--repeats 3] [--floor-runs 12]

Measures, in one run, on the local engine with the project's images:

* **floor**: a bare hardened container (the verifier's hardening, image and
  limits) running ``python3 -c pass``, create to confirmed removal;
* **attempt**: one verification (static analysis + behavioural scenarios) of
  each task's reference solution, one at a time, with the batch's warm
  analysis cache; and a cold sample (no cache) of one per task;
* **concurrent**: 6 tasks x 3 = 18 verifications at concurrency 2 (wall time);
* **profile**: where one warm verification's time goes, from the engine's side:
  the median time per verification in each engine call (create, start, wait —
  the container's own work: analysis, type check and scenarios —, logs,
  removal), and the rest on the host (staging the attempt, reading the result,
  reading and validating the result);
* **in-container profile**: the same verifications from the inside, from the
  timing record their parent writes when asked (``verification.runtime.timing``):
  the median seconds per verification of each span (the interpreters' starts,
  the cache seed, the analysis and mypy, each scenario's child start, calls and
  clean-up, the result files; a span repeated per scenario is summed), wall
  and CPU time (the CPU time of a loaded machine's run still compares with a
  quiet one's), and the engine's share around it (from ``start`` returning to
  the parent's process, and from its last span to ``wait`` returning).

Prints a table and one JSON line with the medians and their ratios (with
``--record``, also appended to the performance record). Every container is
labelled with this run's batch id and removed (confirmed).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from record import add_record_option, emit  # noqa: E402

from agent_eval.consumer.source import prepare_source_consumer  # noqa: E402
from agent_eval.engine import ContainerSpec, remove_leftovers, run_container  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.images.build import build_images  # noqa: E402
from agent_eval.project import find_project  # noqa: E402
from agent_eval.suite.tasks import Task, load_suite  # noqa: E402
from agent_eval.verification.container.cache import warm_analysis_cache  # noqa: E402
from agent_eval.verification.container.limits import VerificationLimits  # noqa: E402
from agent_eval.verification.container.run import VerifierSetup, verify_in_container  # noqa: E402
from agent_eval.verification.container.verifier import ContainerVerifier  # noqa: E402


def reference_solution(task: Task, fixtures: Path, root: Path) -> Path:
    """A copy of the task's reference solution, without its expect.json."""
    target = root / "solutions" / task.id
    source = fixtures / task.id / "correct"
    for path in sorted(source.rglob("*")):
        if path.is_file() and path.name != "expect.json":
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / path.relative_to(source))
    return target


class TimedEngine:
    """The engine with the time of every call added up per method, while ``timing`` is on."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.timing = False
        self.seconds: dict[str, float] = defaultdict(float)
        self.returned: dict[str, float] = {}
        """When each call last returned, on the clock the container's timing record uses."""

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._engine, name)
        if not callable(found):
            return found

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.monotonic()
            try:
                return found(*args, **kwargs)
            finally:
                if self.timing:
                    self.seconds[name] += time.monotonic() - began
                    self.returned[name] = time.clock_gettime(time.CLOCK_BOOTTIME)

        return timed


def profile(
    verify: Callable[[list[list[dict[str, Any]]]], float], engine: TimedEngine, rounds: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds per verification in each engine call and the host's rest; and inside."""
    samples: dict[str, list[float]] = defaultdict(list)
    inside: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        engine.seconds.clear()
        engine.returned.clear()
        records: list[list[dict[str, Any]]] = []
        engine.timing = True
        try:
            total = verify(records)
        finally:
            engine.timing = False
        for name, seconds in engine.seconds.items():
            samples[name].append(seconds)
        samples["host (staging, reading, validating)"].append(total - sum(engine.seconds.values()))
        samples["whole verification"].append(total)
        (spans,) = records
        for name, seconds in in_container(spans, engine.returned).items():
            inside[name].append(seconds)
    median = {name: round(statistics.median(values), 3) for name, values in samples.items()}
    return median, {name: round(statistics.median(values), 3) for name, values in inside.items()}


def in_container(spans: list[dict[str, Any]], returned: dict[str, float]) -> dict[str, float]:
    """One verification's spans summed by name (wall, and CPU as ``NAME [cpu]``), and the
    engine's time around the parent."""
    summed: dict[str, float] = defaultdict(float)
    for span in sorted(spans, key=lambda span: span["start"]):
        summed[span["name"]] += span["seconds"]
        if "cpu" in span:
            summed[f"{span['name']} [cpu]"] += span["cpu"]
    first = min(span["start"] for span in spans)
    last = max(span["start"] + span["seconds"] for span in spans)
    if "start" in returned:
        summed["engine: start() returned -> parent process started"] = first - returned["start"]
    if "wait" in returned:
        summed["engine: parent's last span -> wait() returned"] = returned["wait"] - last
    return dict(summed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="sequential runs per task")
    parser.add_argument("--floor-runs", type=int, default=12, help="bare container runs")
    parser.add_argument("--profile-runs", type=int, default=6, help="profiled verifications")
    add_record_option(parser)
    args = parser.parse_args()

    project = find_project(REPO)
    suite = load_suite(project.tasks, graders_dir=project.graders)
    limits = VerificationLimits()
    batch = f"bench-verification-{uuid.uuid4().hex[:12]}"
    engine = TimedEngine(connect_local_engine())
    try:
        image = build_images(engine, project.root).verifier
        with tempfile.TemporaryDirectory(prefix="agent-eval-bench-") as tmp:
            root = Path(tmp)
            consumer = prepare_source_consumer(project.packages, root / "consumer")
            started = time.monotonic()
            cache = warm_analysis_cache(engine, image, consumer, root / "cache", batch_id=batch)
            warm_s = time.monotonic() - started
            solutions = {t.id: reference_solution(t, project.fixtures, root) for t in suite.tasks}

            floor = []
            for n in range(args.floor_runs):
                spec = ContainerSpec(
                    image=image,
                    command=("/usr/bin/python3", "-c", "pass"),
                    role="verifier",
                    batch_id=batch,
                    run_id=f"floor-{n}",
                    limits=limits.container,
                )
                run = run_container(engine, spec, timeout_s=60, log_limit_bytes=1024)
                if run.wait.exit_code != 0:
                    raise SystemExit(f"the bare container failed: {run.output.stderr!r}")
                floor.append(run.seconds)

            def verify(
                task: Task,
                n: int,
                slot: int,
                seeded: bool,
                timings: list[list[dict[str, Any]]] | None = None,
            ) -> float:
                began = time.monotonic()
                result = verify_in_container(
                    VerifierSetup(
                        engine=engine,
                        image=image,
                        consumer_dir=consumer,
                        graders_dir=project.graders,
                        batch_id=batch,
                        limits=limits,
                        staging_root=root,
                        analysis_cache=cache if seeded else None,
                        timings=None if timings is None else timings.append,
                    ),
                    task.spec,
                    task.directory,
                    solutions[task.id],
                    run_id=f"{task.id}-{n}",
                    slot=slot,
                )
                if not (result.analysis.passed and result.behaviour.passed):
                    raise SystemExit(f"the reference solution of {task.id} did not pass")
                return time.monotonic() - began

            per_task: dict[str, list[float]] = {t.id: [] for t in suite.tasks}
            for n in range(args.repeats):
                for task in suite.tasks:
                    per_task[task.id].append(verify(task, n, 0, seeded=True))
            cold = [verify(task, 99, 0, seeded=False) for task in suite.tasks]
            first = suite.tasks[0]
            phases, inside = profile(
                lambda records: verify(first, 50, 0, seeded=True, timings=records),
                engine,
                args.profile_runs,
            )

            # As a batch does it: a verifier with two slots (two child UIDs).
            verifier = ContainerVerifier(
                VerifierSetup(
                    engine=engine,
                    image=image,
                    consumer_dir=consumer,
                    graders_dir=project.graders,
                    batch_id=batch,
                    limits=limits,
                    staging_root=root,
                    analysis_cache=cache,
                ),
                tasks_dir=project.tasks,
                slots=2,
            )
            schedule = [(t, n) for n in range(3) for t in suite.tasks]
            began = time.monotonic()
            with ThreadPoolExecutor(max_workers=2) as pool:
                done = list(
                    pool.map(
                        lambda item: verifier.verify(
                            item[0].spec, solutions[item[0].id], f"{item[0].id}-c{item[1]}"
                        ),
                        schedule,
                    )
                )
            if not all(v.analysis.passed and v.behaviour.passed for v in done):
                raise SystemExit("a reference solution did not pass at concurrency 2")
            concurrent_s = time.monotonic() - began
    finally:
        try:
            remove_leftovers(engine, batch)
        finally:
            engine.close()

    attempts = [s for runs in per_task.values() for s in runs]
    floor_median = statistics.median(floor)
    attempt_median = statistics.median(attempts)
    cold_median = statistics.median(cold)
    figures = {
        "floorMedianS": round(floor_median, 3),
        "attemptMedianS": round(attempt_median, 3),
        "attemptColdMedianS": round(cold_median, 3),
        "perTaskMedianS": {k: round(statistics.median(v), 3) for k, v in per_task.items()},
        "concurrent18WallS": round(concurrent_s, 2),
        "analysisCacheWarmS": round(warm_s, 2),
        "attemptOverFloor": round(attempt_median / floor_median, 2),
        "coldOverFloor": round(cold_median / floor_median, 2),
        "concurrentOverSequential": round(concurrent_s / (18 * attempt_median), 2),
        "samples": {"floor": len(floor), "attempt": len(attempts), "cold": len(cold)},
        "profileTask": first.id,
        "profileMedianS": phases,
        "inContainerMedianS": inside,
    }
    rows = [
        ("bare hardened container (python3 -c pass)", f"{floor_median:.2f} s", "1.00"),
        ("attempt, warm analysis cache", f"{attempt_median:.2f} s", figures["attemptOverFloor"]),
        ("attempt, cold analysis cache", f"{cold_median:.2f} s", figures["coldOverFloor"]),
        ("18 attempts at concurrency 2 (wall)", f"{concurrent_s:.1f} s", "-"),
        ("analysis cache warm-up (once per batch)", f"{warm_s:.2f} s", "-"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  median    x floor")
    for name, value, ratio in rows:
        print(f"{name.ljust(width)}  {value.ljust(8)}  {ratio}")
    for task_id, runs in per_task.items():
        print(f"  {task_id.ljust(width - 2)}  {statistics.median(runs):.2f} s")
    print(f"where one warm verification of {first.id} spends its time", end=" ")
    print(f"(median of {args.profile_runs}):")
    for name, seconds in sorted(phases.items(), key=lambda item: -item[1]):
        print(f"  {name.ljust(width - 2)}  {seconds:.3f} s")
    print("and inside its container, from the parent's timing record (same runs; cpu: of")
    print("the process and the children it reaped meanwhile):")
    print(f"  {'span'.ljust(60)}  wall      cpu")
    for name, seconds in inside.items():
        if not name.endswith(" [cpu]"):
            used = inside.get(f"{name} [cpu]")
            cpu = "" if used is None else f"{used:.3f} s"
            print(f"  {name[:60].ljust(60)}  {seconds:.3f} s   {cpu}")
    emit("verification", figures, record=args.record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
