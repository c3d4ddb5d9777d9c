"""The same submission gets the same verdict on a crowded machine as on a quiet one.

The load rig puts busy loops in the engine's parent cpu cgroup, so every
runner and verifier container shares the CPU with all of them while the
harness on the host stays responsive. Under it, every fixture case of
``tasks verify --verifier docker`` still matches, the oracle batch completes
18/18 first and final with no infrastructure failure, and the mutant batch
gives, run by run, the verdict it gives on a quiet machine.

The mutant's quiet verdicts are tests/data/batches/mutant-verdicts.json, which the
matrix test of the parallel phase (test_several_runners_docker) holds a real quiet
batch to.

The three crowded workloads run at once under one rig, as a shared runner's
neighbours would: each container's share is then smaller than with any one of
them alone (16 containers at most against 20 loops, about an eighteenth of a
core each), and the three finish in about the time of the slowest, not of the
sum (the loops, not the work, set how long the machine is crowded).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_eval.consumer.cache import CACHE_ENV
from agent_eval.engine import ContainerEngine
from agent_eval.models import Receipt
from tests.batches import (
    BIN,
    mutant_verdicts,
    project_copy,
    receipt_of,
    signature,
    write_config,
)
from tests.conftest import engine_unavailable
from tests.loadrig import LoadRig, rig_available
from tests.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.serial]

LOOPS = 20
"""Busy loops in the containers' cgroup: the crowded machine the fairness rule is held to
here. Ten per core keep the CPU saturated (pressure 0.99) and each container to about a
fifteenth of a core; the benchmarks (fairness.py, in_flight.py) hold the same verdicts at
40 and 100 loops, which take this test two to five times as long."""
AT_ONCE = 4
"""Runs of each batch at once under load. A batch verifies at most one submission per
core whatever its slots, so more runs at once only wait: eight took 428 s here against
420 s at four (at 40 loops)."""
VERIFICATIONS_AT_ONCE = 8
"""tasks verify's verifications at once under load (151 s at eight against 171 s at six)."""
BOUND_S = 2400
"""No crowded workload may take longer (each process is killed past it)."""


@dataclass(frozen=True)
class Finished:
    """One crowded workload's process, finished."""

    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Crowded:
    """What the three workloads gave under one rig."""

    fixtures: Finished
    oracle: tuple[Path, Finished]
    mutant: tuple[Path, Finished]


def _eval_agent_command(project: Path, config: Path) -> list[str]:
    return [str(BIN / "eval-agent"), "--runner-config", str(config), "--project", str(project)]


def _line(done: Finished) -> dict[str, object]:
    assert done.stdout.count("\n") == 1, (done.stdout[-4000:], done.stderr[-2000:])
    line = json.loads(done.stdout)
    assert isinstance(line, dict)
    return line


@pytest.fixture(scope="module")
def crowded(engine: ContainerEngine, tmp_path_factory: pytest.TempPathFactory) -> Crowded:
    tmp = tmp_path_factory.mktemp("crowded")
    if (reason := rig_available()) is not None:
        engine_unavailable(f"the load rig cannot run: {reason}")
    # eval-agent runs where the test runs (its line names the receipt from there).
    commands: dict[str, tuple[list[str], Path | None]] = {
        "fixtures": (
            [
                str(BIN / "agent-eval"),
                "tasks",
                "verify",
                "--verifier",
                "docker",
                "--concurrency",
                str(VERIFICATIONS_AT_ONCE),
            ],
            REPO,
        )
    }
    projects: dict[str, Path] = {}
    for mode in ("oracle", "mutant"):
        (here := tmp / mode).mkdir()
        project = project_copy(here)
        config = write_config(engine, tmp / f"{mode}.json", mode, concurrency=AT_ONCE)
        commands[mode] = (_eval_agent_command(project, config), None)
        projects[mode] = project
    finished: dict[str, Finished] = {}
    with LoadRig(LOOPS, bound_s=BOUND_S):
        began = time.monotonic()
        processes = {
            name: subprocess.Popen(
                ["timeout", "-s", "KILL", str(BOUND_S), *command],
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO), CACHE_ENV: str(tmp / f"cache-{name}")},
            )
            for name, (command, cwd) in commands.items()
        }
        for name, process in processes.items():
            stdout, stderr = process.communicate()
            finished[name] = Finished(process.returncode, stdout, stderr)
            print(f"{name}: exit {process.returncode} after {time.monotonic() - began:.0f} s")
    return Crowded(
        fixtures=finished["fixtures"],
        oracle=(projects["oracle"], finished["oracle"]),
        mutant=(projects["mutant"], finished["mutant"]),
    )


def test_every_fixture_case_matches_on_a_crowded_machine(crowded: Crowded) -> None:
    done = crowded.fixtures
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "all match" in done.stdout


def test_an_oracle_batch_completes_on_a_crowded_machine(crowded: Crowded) -> None:
    project, done = crowded.oracle
    line = _line(done)
    receipt = Receipt.model_validate_json(receipt_of(project, line).read_bytes())
    problems = [
        f"{run.runId}: {d.message}"
        for run in receipt.runs
        for a in run.attempts
        for d in a.diagnostics
        if not a.success
    ]
    assert (done.returncode, line["status"]) == (0, "completed"), (line, receipt.reasons, problems)
    assert (line["firstSuccesses"], line["finalSuccesses"]) == (18, 18), problems
    assert all(a.infrastructureStatus == "ok" for run in receipt.runs for a in run.attempts)


def test_the_mutant_batch_gets_its_quiet_verdict_on_a_crowded_machine(crowded: Crowded) -> None:
    project, done = crowded.mutant
    line = _line(done)
    assert (done.returncode, line["status"]) == (0, "completed"), line
    crowded_verdicts = signature(
        Receipt.model_validate_json(receipt_of(project, line).read_bytes())
    )
    quiet = mutant_verdicts()
    assert crowded_verdicts == quiet
    # The planned unsafe first attempts are observed as unsafe under load too.
    assert any(unsafe for run in quiet for _, unsafe, _ in run[3])
