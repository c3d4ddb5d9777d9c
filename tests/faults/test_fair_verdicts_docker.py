"""The same submission gets the same verdict on a crowded machine as on a quiet one.

The load rig puts busy loops in the engine's parent cpu cgroup, so every
runner and verifier container shares the CPU with all of them (with 40 loops
and four containers at work, each gets about a twentieth of the machine) while
the harness on the host stays responsive. Under it, every fixture case of
``tasks verify --verifier docker`` still matches, the oracle batch completes
18/18 first and final with no infrastructure failure, and the mutant batch
gives, run by run, the verdict it gives on a quiet machine.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval.engine import ContainerEngine
from agent_eval.models import Receipt
from tests.batches import BIN, eval_agent, project_copy, receipt_of, write_config
from tests.conftest import engine_unavailable
from tests.loadrig import LoadRig, rig_available
from tests.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.serial]

LOOPS = 40
"""Busy loops in the containers' cgroup: the crowded machine the fairness rule is held to."""
AT_ONCE = 4
"""Runs of a batch at once under load: each container still gets about a twentieth of
the machine. Eight at a time took longer here (301 s against 205 s for the mutant batch):
a batch's runs each start a runner and a verifier, and under the loops more of them at
once cost more than the larger share they win."""
VERIFICATIONS_AT_ONCE = 8
"""tasks verify's verifications at once under load (151 s at eight against 171 s at six)."""


@pytest.fixture
def crowded(engine: ContainerEngine) -> Iterator[LoadRig]:
    if (reason := rig_available()) is not None:
        engine_unavailable(f"the load rig cannot run: {reason}")
    with LoadRig(LOOPS, bound_s=2400) as rig:
        yield rig


def signature(receipt: Receipt) -> list[tuple[object, ...]]:
    """Each run's verdict, attempt by attempt: what must not depend on the machine."""
    return [
        (
            run.runId,
            run.firstSuccess,
            run.finalSuccess,
            tuple((a.failureCategory, a.unsafe, a.safetyPassed) for a in run.attempts),
        )
        for run in receipt.runs
    ]


def test_every_fixture_case_matches_on_a_crowded_machine(crowded: LoadRig) -> None:
    done = subprocess.run(
        [
            BIN / "agent-eval",
            "tasks",
            "verify",
            "--verifier",
            "docker",
            "--concurrency",
            str(AT_ONCE),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=2400,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "all match" in done.stdout


def test_an_oracle_batch_completes_on_a_crowded_machine(
    engine: ContainerEngine, tmp_path: Path, crowded: LoadRig
) -> None:
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "r.json", "oracle", concurrency=AT_ONCE)
    code, line = eval_agent(project, config)
    receipt = Receipt.model_validate_json(receipt_of(project, line).read_bytes())
    problems = [
        f"{run.runId}: {d.message}"
        for run in receipt.runs
        for a in run.attempts
        for d in a.diagnostics
        if not a.success
    ]
    assert (code, line["status"]) == (0, "completed"), (line, receipt.reasons, problems)
    assert (line["firstSuccesses"], line["finalSuccesses"]) == (18, 18), problems
    assert all(a.infrastructureStatus == "ok" for run in receipt.runs for a in run.attempts)


def test_the_mutant_batch_gets_its_quiet_verdict_on_a_crowded_machine(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    verdicts = []
    for loops in (0, LOOPS):
        if loops and (reason := rig_available()) is not None:
            engine_unavailable(f"the load rig cannot run: {reason}")
        (here := tmp_path / f"loops-{loops}").mkdir()
        project = project_copy(here)
        config = write_config(engine, tmp_path / f"r-{loops}.json", "mutant", concurrency=AT_ONCE)
        with LoadRig(loops, bound_s=2400):
            code, line = eval_agent(project, config)
        assert (code, line["status"]) == (0, "completed"), line
        verdicts.append(
            signature(Receipt.model_validate_json(receipt_of(project, line).read_bytes()))
        )
    quiet, crowded = verdicts
    assert crowded == quiet
    # The planned unsafe first attempts are observed as unsafe under load too.
    assert any(unsafe for run in quiet for _, unsafe, _ in run[3])
