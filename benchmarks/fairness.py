"""Verdict flips on a crowded machine: the reference solutions verified under the load rig.

    .venv/bin/python benchmarks/fairness.py [--loops 0,10,40,100] [--verifications 100] [--batch]
                                            [--mutant] [--neighbours N [--neighbour-mib 256]]

For each load factor (busy loops placed in the engine's parent cpu cgroup,
see ``tests/loadrig.py``; needs root), verifies the six tasks' reference
solutions round-robin, two at a time as a batch does, through the container
verifier (retries included), and counts:

* **flips**: verifications whose verdict was not "pass" (the solution is
  byte-identical every time, so every one is the machine's doing);
* **retried**: verifications that were repeated because the machine starved
  them (the harness's cost, not the agent's);
* the wall time of all of them, and the host's CPU pressure (PSI ``some``)
  over them;
* with ``--batch``: the wall time of a whole oracle batch (``eval-agent`` on a
  clean checkout) at the same load, and whether it completed 18/18;
* with ``--mutant``: a whole mutant batch at the same load (its planned
  failures, repairs and unsafe first attempts), and whether its verdicts, run by
  run and attempt by attempt, equal those of the first load factor's (the quiet
  run, when it is 0).

With ``--neighbours N`` a second rig crowds the engine itself at every level
(``tests/loadrig.py``'s ``EngineCrowd``): N neighbours each create, start,
stop and remove one container after another beside the verifications and
the batch, each container taking ``--neighbour-mib`` MiB for a second; the
figures add how many neighbour containers ran and how many the engine failed.

Prints a table and one JSON line. Every container is labelled with this run's
batch id and removed (confirmed); every loop is ended by its pid.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))  # the sibling benchmark's helpers

from verification import reference_solution  # noqa: E402

from agent_eval.consumer.source import prepare_source_consumer  # noqa: E402
from agent_eval.engine import remove_leftovers  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.engine.pressure import PressureWindow  # noqa: E402
from agent_eval.errors import InfrastructureError  # noqa: E402
from agent_eval.images.build import build_images  # noqa: E402
from agent_eval.project import find_project  # noqa: E402
from agent_eval.suite.tasks import Task, load_suite  # noqa: E402
from agent_eval.verification.container.cache import warm_analysis_cache  # noqa: E402
from agent_eval.verification.container.limits import VerificationLimits  # noqa: E402
from agent_eval.verification.container.run import VerifierSetup  # noqa: E402
from agent_eval.verification.container.verifier import ContainerVerifier  # noqa: E402
from tests.batches import eval_agent, project_copy, signature, write_config  # noqa: E402
from tests.loadrig import EngineCrowd, LoadRig  # noqa: E402


def _reference_batch(engine: Any, root: Path, mode: str, loops: int) -> tuple[float, str, Any]:
    """A whole batch of the reference runner *mode* on a clean checkout: its wall time, its
    status and first/final successes as one text, and its receipt."""
    from agent_eval.models import Receipt

    (here := root / f"{mode}-{loops}").mkdir()
    checkout = project_copy(here)
    config = write_config(engine, root / f"{mode}-{loops}.json", mode)
    began = time.monotonic()
    _, line = eval_agent(checkout, config)
    seconds = round(time.monotonic() - began, 1)
    receipt_path = Path(line["receipt"])
    if not receipt_path.is_absolute():
        receipt_path = Path.cwd() / receipt_path  # as eval-agent printed it, from here
    outcome = f"{line['status']} {line['firstSuccesses']}/{line['finalSuccesses']}"
    return seconds, outcome, Receipt.model_validate_json(receipt_path.read_bytes())


def _retries(receipt: Any) -> int:
    """The batch's infrastructure tries run again."""
    return sum(len(a.infrastructureTries) for run in receipt.runs for a in run.attempts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", default="0,10,40,100", help="load factors, comma-separated")
    parser.add_argument("--verifications", type=int, default=100, help="per load factor")
    parser.add_argument("--batch", action="store_true", help="also time an oracle batch")
    parser.add_argument("--mutant", action="store_true", help="and a mutant batch's verdicts")
    parser.add_argument("--neighbours", type=int, default=0, help="containers beside, at once")
    parser.add_argument("--neighbour-mib", type=int, default=256, help="each one's memory")
    args = parser.parse_args()
    factors = [int(n) for n in args.loops.split(",")]

    project = find_project(REPO)
    suite = load_suite(project.tasks, graders_dir=project.graders)
    batch = f"bench-fairness-{uuid.uuid4().hex[:12]}"
    engine = connect_local_engine()
    results: list[dict[str, Any]] = []
    mutants: dict[int, Any] = {}
    try:
        image = build_images(engine, project.root).verifier
        with tempfile.TemporaryDirectory(prefix="agent-eval-bench-") as tmp:
            root = Path(tmp)
            consumer = prepare_source_consumer(project.packages, root / "consumer")
            cache = warm_analysis_cache(engine, image, consumer, root / "cache", batch_id=batch)
            solutions = {t.id: reference_solution(t, project.fixtures, root) for t in suite.tasks}
            verifier = ContainerVerifier(
                VerifierSetup(
                    engine=engine,
                    image=image,
                    consumer_dir=consumer,
                    graders_dir=project.graders,
                    batch_id=batch,
                    limits=VerificationLimits(),
                    staging_root=root,
                    analysis_cache=cache,
                ),
                tasks_dir=project.tasks,
                slots=2,
            )
            tasks = list(suite.tasks)
            schedule = [tasks[n % len(tasks)] for n in range(args.verifications)]

            def verify(item: tuple[int, Task]) -> tuple[str, int]:
                n, task = item
                try:
                    done = verifier.verify(task.spec, solutions[task.id], f"{task.id}-{n}")
                except InfrastructureError:
                    return "infrastructure", 3
                verdict = "pass" if done.analysis.passed and done.behaviour.passed else "fail"
                return verdict, len(done.retried)

            for loops in factors:
                crowd = EngineCrowd(
                    engine, image, neighbours=args.neighbours, mib=args.neighbour_mib
                )
                with LoadRig(loops, bound_s=7200), crowd:
                    pressure = PressureWindow.open()
                    began = time.monotonic()
                    with ThreadPoolExecutor(max_workers=2) as pool:
                        outcomes = list(pool.map(verify, enumerate(schedule)))
                    seconds = time.monotonic() - began
                    figure: dict[str, Any] = {
                        "loops": loops,
                        "verifications": len(outcomes),
                        "flips": sum(v != "pass" for v, _ in outcomes),
                        "infrastructure": sum(v == "infrastructure" for v, _ in outcomes),
                        "retried": sum(r > 0 for _, r in outcomes),
                        "wallS": round(seconds, 1),
                        "cpuPressure": pressure.share(seconds),
                    }
                    if args.batch:
                        seconds, outcome, receipt = _reference_batch(engine, root, "oracle", loops)
                        figure["batchS"], figure["batch"] = seconds, outcome
                        figure["batchRetries"] = _retries(receipt)
                        # Each run not passed is a flip: the reference passes on a quiet machine.
                        figure["batchFlips"] = sum(not run.finalSuccess for run in receipt.runs)
                    if args.mutant:
                        seconds, outcome, receipt = _reference_batch(engine, root, "mutant", loops)
                        figure["mutantS"], figure["mutant"] = seconds, outcome
                        figure["mutantRetries"] = _retries(receipt)
                        mutants[loops] = signature(receipt)
                        figure["mutantSameAsFirst"] = mutants[loops] == mutants[factors[0]]
                figure["neighbours"] = {"containers": crowd.started, "failed": len(crowd.failures)}
                results.append(figure)
                print(json.dumps(figure, sort_keys=True), file=sys.stderr, flush=True)
    finally:
        try:
            remove_leftovers(engine, batch)
        finally:
            engine.close()

    print(f"neighbours beside: {args.neighbours} at once, {args.neighbour_mib} MiB each")
    print("loops  flips/verifications  infrastructure  retried  wall     pressure  batch")
    for f in results:
        batch_text = (
            f"{f['batch']} in {f['batchS']} s, {f['batchRetries']} retried, {f['batchFlips']} flips"
            if "batchS" in f
            else "-"
        )
        if "mutantS" in f:
            batch_text += (
                f"; mutant {f['mutant']} in {f['mutantS']} s, {f['mutantRetries']} retried, "
                f"verdicts as at {factors[0]} loops: {f['mutantSameAsFirst']}"
            )
        print(
            f"{f['loops']:>5}  {f['flips']:>5}/{f['verifications']:<13} {f['infrastructure']:>14}"
            f"  {f['retried']:>7}  {f['wallS']:>6} s  {f['cpuPressure']!s:>8}  {batch_text}"
            f"  (neighbour containers: {f['neighbours']['containers']} run,"
            f" {f['neighbours']['failed']} failed)"
        )
    print(json.dumps({"fairness": results}, sort_keys=True))
    return 0 if all(f.get("mutantSameAsFirst", True) for f in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
