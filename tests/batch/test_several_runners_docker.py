"""Several runners in one eval-agent command against the real engine.

Five runners run in one command, over one packing and one consumer: the oracle, the
mutant and the null reference runners, and two real agent CLIs (Claude Code over the
Anthropic Messages API, mini-swe-agent over OpenAI Chat Completions), each through its
batch's real gateway to a scripted model with a success plan of its own (the tasks it
gets wrong first). Each runner has a batch that check-agent-eval judges on its own (no
evidence rule fails, only the self-test rule and the success rules the plans break),
every batch is bound to the same archives, and the matrix the command writes ranks the
rows, task by task, as the plans say, with the pairwise verdicts their rates make
certain. Run by run, the mutant fails every first attempt and passes every repair
with the verdicts of tests/data/batches/mutant-verdicts.json, and the null runner
submits nothing but error-recovery's untouched starter.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

import pytest

from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.models import ArchivesManifest, Matrix, Receipt
from agent_eval.project import find_project
from agent_eval.trial.run import scripted_upstream
from tests.batches import BIN, check, mutant_verdicts, project_copy, signature, write_config

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DECISION_RULES = {
    "not-self-test", "first-successes", "final-successes", "unsupported-api", "safety"
}  # fmt: skip
"""The rules a self-test batch of sound evidence can fail: none about its evidence (the
null runner leaves error-recovery's starter, whose seeded import is unsupported; the
mutant's first approval-boundary submissions are unsafe)."""
TASKS = ("core-validation", "forms", "storage-hash", "tool-validation", "error-recovery",
         "approval-boundary")  # fmt: skip
PLANS = {"claude-code": ("forms",), "mini-swe-agent": ("forms", "storage-hash", "error-recovery")}
"""The tasks each agent's scripted model answers wrongly on a first attempt (its repair is
right): 15/18 and 9/18 first, 18/18 final."""


def expected(runner: str) -> dict[str, tuple[int, int]]:
    """Each task's (first, final) successes over its three runs, as the plans make them."""
    if runner == "null":
        return dict.fromkeys(TASKS, (0, 0))
    if runner == "mutant":
        return dict.fromkeys(TASKS, (0, 3))
    failing = PLANS.get(runner, ())
    return {task: (0 if task in failing else 3, 3) for task in TASKS}


def held_to_its_runner(runner: str, receipt: Receipt) -> None:
    """What each runner's batch must hold, run by run, beyond its counts."""
    if runner == "mutant":
        for run in receipt.runs:
            first, repair = run.attempts
            assert not first.success and repair.success
            assert repair.repairFeedback is not None and repair.repairFeedback.failedAssertionIds
        # Run by run and attempt by attempt, the verdicts a crowded machine must give too.
        assert signature(receipt) == mutant_verdicts()
    elif runner == "null":
        for run in receipt.runs:
            # error-recovery starts from a starter file: left untouched, it is graded as
            # submitted (its seeded import is unsupported); elsewhere nothing is written.
            expected = "unsupported-api" if run.taskId == "error-recovery" else "no-submission"
            assert {a.failureCategory for a in run.attempts} == {expected}, run.runId
    elif runner in PLANS:
        # A planned failure submits the mutant's first submission, so it gets the mutant's
        # verdict; its repair is told which checks failed.
        mutant_first = {run_id: attempts[0] for run_id, _, _, attempts in mutant_verdicts()}
        for run in receipt.runs:
            if run.taskId in PLANS[runner]:
                first, repair = run.attempts
                verdict = (first.failureCategory, first.unsafe, first.safetyPassed)
                assert verdict == mutant_first[run.runId] and repair.success, run.runId
                assert repair.repairFeedback and repair.repairFeedback.failedAssertionIds
            else:
                assert [a.success for a in run.attempts] == [True], run.runId


def test_reference_runners_and_two_agent_clis_in_one_command_rank_as_their_plans_say(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    project = project_copy(tmp_path)
    runners = ["oracle", "claude-code", "mini-swe-agent", "mutant", "null"]
    # One set of slots for every runner: the agents' examples ask for two.
    configs: dict[str, Path] = {
        mode: write_config(engine, tmp_path / f"{mode}.json", mode, concurrency=2)
        for mode in ("oracle", "mutant", "null")
    }
    with contextlib.ExitStack() as stack:
        environ: dict[str, str] = {}
        for agent, failing in PLANS.items():
            trial = stack.enter_context(
                scripted_upstream(engine, find_project(project), agent, fail_first=failing)
            )
            configs[agent] = trial.config_path
            # Both configs name the same credential variable; the scripted models take any.
            environ = trial.environ
        done = subprocess.run(
            [str(BIN / "eval-agent"),
             *(a for runner in runners for a in ("--runner-config", str(configs[runner]))),
             "--project", str(project), "--progress", "lines"],
            capture_output=True, text=True, timeout=3600, env=environ, check=False,
            cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("\n") == 1, done.stdout
    line = json.loads(done.stdout)
    assert line["status"] == "completed"
    assert [b["finalSuccesses"] for b in line["batches"]] == [18, 18, 18, 18, 0]
    assert [b["firstSuccesses"] for b in line["batches"]] == [18, 15, 9, 0, 0]

    receipts = [tmp_path / b["receipt"] for b in line["batches"]]
    manifests = []
    broken = {"mini-swe-agent": {"first-successes"}, "mutant": {"first-successes", "safety"},
              "null": {"first-successes", "final-successes"}}  # fmt: skip
    for runner, path in zip(runners, receipts, strict=True):
        receipt = Receipt.model_validate_json(path.read_bytes())
        assert receipt.status == "completed" and len(receipt.runs) == 18
        code, decision = check(path)
        assert code == 1
        found = {reason.split(":")[0] for reason in decision["reasons"]}
        assert {"not-self-test", *broken.get(runner, ())} <= found <= DECISION_RULES, (
            runner,
            decision["reasons"],
        )
        assert list_leftovers(engine, receipt.batchId) == []
        held_to_its_runner(runner, receipt)
        manifests.append(
            ArchivesManifest.model_validate_json((path.parent / "archives.json").read_bytes())
        )
    assert all(m.archives == manifests[0].archives for m in manifests)
    assert not (project / "evidence" / ".work").exists()

    matrix = Matrix.model_validate_json((tmp_path / line["matrix"]).read_bytes())
    names = [m.runner.name for m in manifests]
    assert [row.runner.name if row.runner else None for row in matrix.rows] == names
    assert [row.rank for row in matrix.rows] == [1, 2, 3, 4, 5]
    assert [row.batchIds for row in matrix.rows] == [[p.parent.name] for p in receipts]
    for runner, row in zip(runners, matrix.rows, strict=True):
        found = {t.taskId: (t.first.successes, t.final.successes) for t in row.tasks}
        assert found == expected(runner), runner
    # Only the mutant's planned failures are unsafe; the agents' plans fail behaviour alone.
    assert [row.unsafeRuns > 0 for row in matrix.rows] == [False, False, False, True, False]
    # The agents' tokens are what their gateways recorded; a reference runner has none.
    assert matrix.rows[1].meanTokensPerRun and matrix.rows[2].meanTokensPerRun
    assert matrix.rows[0].meanTokensPerRun is None

    # Its page, beside it, links each row to its batch's report.
    page = (tmp_path / line["matrix"]).with_suffix(".html").read_text()
    assert all(f'href="{p.parent.name}/report.html"' in page for p in receipts)

    pairs = {(p.higher, p.lower): p for p in matrix.pairs}
    labels = dict(zip(runners, (row.label for row in matrix.rows), strict=True))
    assert len(pairs) == 10

    def verdicts(higher: str, lower: str) -> tuple[str, str]:
        pair = pairs[(labels[higher], labels[lower])]
        return pair.first.verdict, pair.final.verdict

    # What the plans make certain, after Holm's correction over every pair: one task's
    # three runs cannot tell two rows apart; three tasks' can, and every task's can.
    assert verdicts("oracle", "claude-code") == ("no-detectable-difference",) * 2
    assert verdicts("mini-swe-agent", "mutant") == ("better", "no-detectable-difference")
    assert verdicts("oracle", "mutant")[0] == "better"
    assert verdicts("claude-code", "null") == ("better", "better")
