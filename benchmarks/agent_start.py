"""What a real agent's attempt costs beyond the CLI's own start, for each agent image.

    .venv/bin/python benchmarks/agent_start.py [--agents aider,claude-code,codex,mini-swe-agent]
                                               [--attempts 3] [--starts 5] [--record]

For each agent, in its runner image (built first when missing), hardened as a
runner, with no network:

* **bare**: the container doing nothing (``/bin/true``): create, start, wait,
  remove, the engine's floor for any container of that image;
* **cli**: the same container running the CLI's own ``--version`` (``--help``
  for mini-swe-agent, which has no version switch): the floor plus the CLI's
  start (its interpreter or binary, its imports);
* **model layer** (aider, mini-swe-agent): the same container importing the
  model client (litellm) the CLI loads only once it talks to a model, less
  the bare container: part of the CLI's own cost in every attempt that its
  ``--version`` does not show;
* **attempt**: one scheduled run of the forms task through the real schedule,
  runner container, batch gateway and docker verifier, against a scripted model
  on a network of the benchmark's own that answers each turn at once with the
  reference solution (the same set-up as the agent CLI tests): the attempt's
  recorded wall time (runner and verification), its runner container's wall
  and CPU time.

The attempt's runner wall less the cli median is what the attempt spends
beyond starting the CLI: the adapter, the CLI's own turns against a model that
answers at once, writing and collecting the solution, the container's floor;
its share of the runner wall is reported as ``beyondStartShare``. Every
attempt must pass (a failed one makes the figures meaningless and the
benchmark exits 1). Prints a table and one JSON line (``--record`` appends it
to the performance record). Needs the engine and the images (``scripts/setup``;
the runner images are built here when missing, from the package caches).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import docker  # noqa: E402
from record import add_record_option, emit  # noqa: E402

from agent_eval.adapters.common import agent_python  # noqa: E402
from agent_eval.engine import ContainerEngine  # noqa: E402
from agent_eval.engine.api import ContainerSpec, run_container  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from tests.adapters.test_agent_aider_mini_swe_agent_docker import AGENTS, Scripted  # noqa: E402
from tests.adapters.test_agent_claude_code_codex_docker import CASES, scripted_agent  # noqa: E402
from tests.agent_scripted_model import (  # noqa: E402
    ScriptedAgent,
    own_network,
    prepared_consumer,
    run_one,
)

SITE = "/opt/agent/site"
PYTHON = "/usr/bin/python3"


def _python_cli(module: str, switch: str) -> tuple[str, ...]:
    # The adapter's own launch line, with the image's interpreter in place of this one.
    return (PYTHON, *agent_python(SITE, module)[1:], switch)


START: dict[str, tuple[str, ...]] = {
    "aider": _python_cli("aider", "--version"),
    "claude-code": ("/opt/claude-code/bin/claude", "--version"),
    "codex": ("/opt/codex/bin/codex", "--version"),
    "mini-swe-agent": _python_cli("minisweagent.run.mini", "--help"),
}
"""Each CLI's own start: the command its image runs with nothing to do."""

MODEL_LAYER = {"aider": "litellm", "mini-swe-agent": "litellm"}
"""The model client a Python CLI imports only once it talks to a model (its ``--version``
never does): its import is the CLI's own cost of every attempt, measured on its own."""


QUIET = {
    "HOME": "/tmp",
    "MSWEA_SILENT_STARTUP": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
}
"""As the adapters start the CLIs: nothing fetched, nothing announced."""


def _imports(module: str) -> tuple[str, ...]:
    return (PYTHON, "-B", "-c", f"import sys; sys.path[:0] = [{SITE!r}]; import {module}")


def scripted(engine: ContainerEngine, name: str) -> ScriptedAgent:
    """*name*'s scripted set-up as its CLI test has it (its runner image built if missing)."""
    cases = {case.name: case for case in CASES}
    if name in cases:
        return scripted_agent(engine, cases[name])
    return Scripted(engine).get(AGENTS[name])


def container_seconds(
    engine: ContainerEngine, image: str, command: tuple[str, ...], runs: int, name: str
) -> tuple[list[float], str]:
    """Wall times of *runs* hardened runner containers of *image* running *command*; the
    last one's output (to show the CLI answered)."""
    seconds, said = [], ""
    for index in range(runs):
        spec = ContainerSpec(
            image=image,
            command=command,
            role="runner",
            batch_id="benchmark-agent-start",
            run_id=f"{name}-{index}",
            environment=QUIET,
        )
        run = run_container(engine, spec, timeout_s=120, log_limit_bytes=64 * 1024)
        if run.wait.exit_code != 0 or run.wait.timed_out:
            raise SystemExit(
                f"agent_start: {name}: {' '.join(command)} exited {run.wait.exit_code}: "
                f"{run.output.stderr[-500:].decode(errors='replace')!r}"
            )
        seconds.append(run.seconds)
        text = (run.output.stdout or run.output.stderr).decode(errors="replace").strip()
        said = text.splitlines()[0][:80] if text else ""
    return seconds, said


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def measure(
    engine: ContainerEngine,
    name: str,
    args: argparse.Namespace,
    attempt: Callable[[ScriptedAgent, Path], Any],
    work: Path,
) -> dict[str, Any]:
    built = time.monotonic()
    agent = scripted(engine, name)
    build_s = time.monotonic() - built
    bare, _ = container_seconds(engine, agent.image, ("/bin/true",), args.starts, f"{name}-bare")
    cli, said = container_seconds(engine, agent.image, START[name], args.starts, f"{name}-cli")
    layer: list[float] = []
    if name in MODEL_LAYER:
        command = _imports(MODEL_LAYER[name])
        layer, _ = container_seconds(engine, agent.image, command, args.starts, f"{name}-layer")
    attempts, runners, cpus = [], [], []
    for index in range(args.attempts):
        result = attempt(agent, work / f"{name}-{index}")
        (run,) = result.receipt.runs
        (record,) = run.attempts
        if not record.success:
            raise SystemExit(f"agent_start: {name}: the attempt failed: {record.diagnostics}")
        resources = record.resources
        if resources is None or resources.wallSeconds is None:
            raise SystemExit(f"agent_start: {name}: the attempt recorded no runner resources")
        attempts.append(record.durationMs / 1000)
        runners.append(resources.wallSeconds)
        if resources.cpuSeconds is not None:
            cpus.append(resources.cpuSeconds)
    runner_s, cli_s = statistics.median(runners), statistics.median(cli)
    return {
        "agent": name,
        "cliSaid": said,
        "imageReadySeconds": round(build_s, 2),
        "bareMedianS": median(bare),
        "cliMedianS": median(cli),
        "cliStartS": round(cli_s - statistics.median(bare), 3),
        "attemptMedianS": median(attempts),
        "runnerMedianS": median(runners),
        "runnerCpuMedianS": median(cpus) if cpus else None,
        "modelLayer": MODEL_LAYER.get(name),
        "modelLayerImportS": (
            round(statistics.median(layer) - statistics.median(bare), 3) if layer else None
        ),
        "beyondStartS": round(runner_s - cli_s, 3),
        "beyondStartShare": round((runner_s - cli_s) / runner_s, 2),
        "runnerOverCli": round(runner_s / cli_s, 2),
        "samples": {"starts": len(cli), "attempts": len(attempts)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", default=",".join(sorted(START)), help="comma-separated")
    parser.add_argument("--attempts", type=int, default=3, help="attempts per agent")
    parser.add_argument("--starts", type=int, default=5, help="bare and --version runs each")
    add_record_option(parser)
    args = parser.parse_args()
    names = [n for n in args.agents.split(",") if n]
    unknown = sorted(set(names) - set(START))
    if unknown:
        parser.error(f"--agents: unknown {unknown}; known: {sorted(START)}")
    engine = connect_local_engine()
    client = docker.from_env()
    rows = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="agent-start-") as tmp,
            own_network(client, "agent-eval-bench") as net,
        ):
            work = Path(tmp)
            consumer = prepared_consumer(engine, work / "consumer")

            def attempt(agent: ScriptedAgent, where: Path) -> Any:
                where.mkdir(parents=True)
                return run_one(engine, client, net, consumer, agent, "correct", where)

            for name in names:
                rows.append(measure(engine, name, args, attempt, work))
                print(f"agent_start: {name} done", file=sys.stderr, flush=True)
    finally:
        client.close()
        engine.close()
    header = ("agent", "bare", "--version", "CLI start", "model layer", "attempt", "runner",
              "runner CPU", "beyond start", "share")  # fmt: skip
    print("  ".join(h.ljust(14) for h in header))
    for row in rows:
        cpu = row["runnerCpuMedianS"]
        cells = (
            row["agent"], f"{row['bareMedianS']:.2f} s", f"{row['cliMedianS']:.2f} s",
            f"{row['cliStartS']:.2f} s",
            "-" if row["modelLayerImportS"] is None else f"{row['modelLayerImportS']:.2f} s",
            f"{row['attemptMedianS']:.2f} s",
            f"{row['runnerMedianS']:.2f} s", "-" if cpu is None else f"{cpu:.2f} s",
            f"{row['beyondStartS']:.2f} s", f"{row['beyondStartShare']:.0%}",
        )  # fmt: skip
        print("  ".join(c.ljust(14) for c in cells))
    emit("agent_start", {"agents": rows}, record=args.record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
