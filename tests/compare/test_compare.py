"""A baseline against a candidate: refused on broken evidence or a difference beyond the
library, pooled per side, judged per task and stratified overall."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.compare.compare import as_text, compare_batches
from agent_eval.compare.compare import rate_comparison as _rate
from agent_eval.compare.share import as_markdown, share_summary
from agent_eval.errors import ConfigError, EvidenceError
from agent_eval.models.compare import Comparison
from tests.evidence_builders import (
    CURRENT,
    Batch,
    attempt,
    receipt,
    run,
    write_batch,
)
from tests.paths import EXAMPLE_SUITE
from tests.verdict.test_chain import LEFT, first_batch, interrupted, resumed

RUNS = EXAMPLE_SUITE.run_ids()


def batch(root: Path, failing_first: int = 0, **overrides: Any) -> Batch:
    """A batch whose first *failing_first* runs fail their first attempt and are repaired."""
    runs = [
        run(r, [attempt(r, success=False), attempt(r, 2)]) if i < failing_first else run(r)
        for i, r in enumerate(RUNS)
    ]
    overrides.setdefault("batchId", f"batch-{root.name}")
    return write_batch(root, receipt(runs, **overrides))


def test_a_change_that_breaks_first_attempts_everywhere_is_worse(tmp_path: Path) -> None:
    before, after = batch(tmp_path / "a"), batch(tmp_path / "b", failing_first=18)
    result = compare_batches([before.root], [after.root], CURRENT)
    assert result.first.verdict == "worse" and result.first.pValue is not None
    assert result.first.pValue < 1e-6
    assert (result.first.baselineSuccesses, result.first.candidateSuccesses) == (18, 0)
    assert result.final.verdict == "no-detectable-difference"
    assert "could detect only a change of about 40 points" in result.final.sentence
    forms = next(t for t in result.tasks if t.taskId == "forms")
    assert forms.first.verdict == "no-detectable-difference"  # 3 runs a task show nothing
    assert forms.candidateCells == ["repaired"] * 3 and forms.repairs == (0, 3)
    assert result.differences == [] and result.unexpected == []


def test_the_same_results_are_no_detectable_difference_with_what_could_be_detected(
    tmp_path: Path,
) -> None:
    result = compare_batches([batch(tmp_path / "a").root], [batch(tmp_path / "b").root], CURRENT)
    assert result.first.verdict == "no-detectable-difference"
    assert result.first.detectable == pytest.approx(
        0.40
    )  # the stratified test's, not Fisher's 0.35
    text = as_text(result)
    assert text.splitlines()[0].startswith("no detectable difference: first attempt")
    assert "nothing: the same library" in text


def test_a_batch_whose_evidence_fails_the_checker_is_refused_with_the_reasons(
    tmp_path: Path,
) -> None:
    broken = batch(tmp_path / "b")
    broken.solution("forms-3").write_text("changed\n")
    with pytest.raises(EvidenceError) as caught:
        compare_batches([batch(tmp_path / "a").root], [broken.root], CURRENT)
    assert "fails the checker's evidence rules" in str(caught.value)
    assert "solution-integrity: forms-3 attempt 1" in str(caught.value)


def test_a_difference_beyond_the_library_is_refused_unless_allowed_and_then_said_first(
    tmp_path: Path,
) -> None:
    other_model = {"id": "another-model", "settings": {}}
    a = batch(tmp_path / "a")
    b = write_batch(
        tmp_path / "b",
        receipt(batchId="b", model=other_model),
        lambda manifest: manifest.update(model=other_model),
    )
    with pytest.raises(ConfigError, match="--allow-different model"):
        compare_batches([a.root], [b.root], CURRENT)
    result = compare_batches([a.root], [b.root], CURRENT, allow=["model"])
    assert result.unexpected == ["model"]
    assert as_text(result).startswith("NOTE: the sides also differ in model")


def test_batches_of_one_side_are_pooled_and_must_share_every_identity(tmp_path: Path) -> None:
    a1, a2 = batch(tmp_path / "a1"), batch(tmp_path / "a2", failing_first=3)
    b = batch(tmp_path / "b")
    result = compare_batches([a1.root, a2.root], [b.root], CURRENT)
    assert (result.first.baselineSuccesses, result.first.baselineRuns) == (33, 36)
    assert result.baseline.runsPerTask == 6 and len(result.baseline.batchIds) == 2
    other_model = {"id": "another-model", "settings": {}}
    odd = write_batch(
        tmp_path / "odd",
        receipt(batchId="odd", model=other_model),
        lambda manifest: manifest.update(model=other_model),
    )
    with pytest.raises(ConfigError, match="cannot be pooled"):
        compare_batches([a1.root, odd.root], [b.root], CURRENT)


def test_infrastructure_failures_count_on_neither_side(tmp_path: Path) -> None:
    runs = [run(r) for r in RUNS]
    broken = attempt(RUNS[0], success=False)
    broken.update(infrastructureStatus="failed", failureCategory="infrastructure",
                  assertions=[], safetyPassed=None, submitted=False, solutionFiles=[],
                  solutionDigest=None)  # fmt: skip
    runs[0] = run(RUNS[0], [broken])
    b = write_batch(tmp_path / "b", receipt(runs, batchId="b", status="infrastructure-failure"))
    result = compare_batches([batch(tmp_path / "a").root], [b.root], CURRENT)
    assert (result.first.candidateSuccesses, result.first.candidateRuns) == (17, 17)
    task = next(t for t in result.tasks if t.taskId == RUNS[0].rsplit("-", 1)[0])
    assert task.candidateCells[0] == "infrastructure"


def test_the_command_prints_the_table_and_writes_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_eval.cli.compare as command

    monkeypatch.setattr(command, "gate_anchors", lambda located: CURRENT)
    a, b = batch(tmp_path / "a"), batch(tmp_path / "b", failing_first=18)
    out = tmp_path / "compare.json"
    result = CliRunner().invoke(
        main, ["compare", str(a.root), str(b.root), "--json", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("worse: first attempt, all tasks: 18/18 -> 0/18")
    saved = Comparison.model_validate_json(out.read_bytes())
    assert saved.first.verdict == "worse"
    assert json.loads(out.read_text())["schemaVersion"] == 1
    missing = CliRunner().invoke(main, ["compare", str(a.root), str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such run directory" in missing.output


def test_plan_says_how_many_runs_a_change_needs() -> None:
    result = CliRunner().invoke(main, ["plan", "--baseline-rate", "1.0", "--detect", "-0.3"])
    assert result.exit_code == 0
    assert result.output.startswith("21 runs per side detect 1 -> 0.7")
    assert "6 task(s): 4 runs of each task per side (eval-agent --repetitions 4)" in result.output
    bad = CliRunner().invoke(main, ["plan", "--baseline-rate", "0.9", "--detect", "0.2"])
    assert bad.exit_code == 2 and "is not a rate" in bad.output


def test_a_resumed_batch_is_compared_as_its_chains_union_and_a_broken_chain_is_refused(
    tmp_path: Path,
) -> None:
    evidence = tmp_path / "evidence"
    first = first_batch(evidence)
    runs = [run(r, [attempt(r, success=False), attempt(r, 2)]) for r in LEFT]
    last = resumed(evidence, first, runs)
    baseline = batch(tmp_path / "base").root
    result = compare_batches([baseline], [last.root], CURRENT)
    # 9 runs from the first batch, 9 from the resumed one; none counted twice or lost.
    assert (result.first.candidateSuccesses, result.first.candidateRuns) == (9, 18)
    assert (result.final.candidateSuccesses, result.final.candidateRuns) == (18, 18)
    first.edit_receipt(lambda data: data["reasons"].append("edited"))
    with pytest.raises(EvidenceError, match="chain: batch-b resumes batch-a"):
        compare_batches([baseline], [last.root], CURRENT)


def test_a_batch_named_twice_on_one_side_is_refused(tmp_path: Path) -> None:
    a, b = batch(tmp_path / "a"), batch(tmp_path / "b", failing_first=3)
    with pytest.raises(ConfigError, match="twice in the baseline"):
        compare_batches([a.root, a.root], [b.root], CURRENT)


def test_a_copy_of_a_batch_at_another_path_is_the_same_batch(tmp_path: Path) -> None:
    a, b = batch(tmp_path / "a"), batch(tmp_path / "b", failing_first=3)
    shutil.copytree(a.root, tmp_path / "copy")
    with pytest.raises(ConfigError, match="same batch"):
        compare_batches([a.root, tmp_path / "copy"], [b.root], CURRENT)
    with pytest.raises(ConfigError, match="on both sides"):
        compare_batches([a.root], [tmp_path / "copy"], CURRENT)


def test_the_command_refuses_one_batch_listed_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_eval.cli.compare as command

    monkeypatch.setattr(command, "gate_anchors", lambda located: CURRENT)
    a, b = batch(tmp_path / "a"), batch(tmp_path / "b", failing_first=3)
    result = CliRunner().invoke(main, ["compare", f"{a.root},{a.root}", str(b.root)])
    assert result.exit_code == 1 and "twice in the baseline" in result.output
    assert "Traceback" not in result.output


def test_a_resumed_batch_beside_a_batch_of_its_chain_is_refused(tmp_path: Path) -> None:
    # A completed batch whose runs the harness failed can be resumed: the resumed one
    # then counts the first batch's nine good runs as its own.
    evidence = tmp_path / "evidence"
    runs = [run(r) for r in RUNS[:9]] + [interrupted(r) for r in RUNS[9:]]
    first = write_batch(
        evidence / "batch-a",
        receipt(runs, batchId="batch-a", status="infrastructure-failure"),
    )
    last = resumed(evidence, first)
    base = batch(tmp_path / "base").root
    for sides in (
        ([base], [first.root, last.root]),
        ([base], [last.root, first.root]),
        ([first.root], [last.root]),
        ([last.root], [first.root]),
    ):
        with pytest.raises(ConfigError, match=f"{last.root} resumed {first.root}"):
            compare_batches(*sides, CURRENT)
    result = compare_batches([base], [last.root], CURRENT)
    assert result.final.candidateRuns == 18


def test_a_copy_whose_batch_id_was_edited_still_holds_the_same_runs(tmp_path: Path) -> None:
    a, b = batch(tmp_path / "a"), batch(tmp_path / "b", failing_first=3)
    copy = tmp_path / "renamed"
    shutil.copytree(a.root, copy)
    path = copy / "receipt.json"
    path.write_text(path.read_text().replace('"batch-a"', '"renamed"'))
    assert json.loads(path.read_text())["batchId"] == "renamed"
    with pytest.raises(ConfigError, match=r"holds run core-validation-1 and .* holds it as"):
        compare_batches([a.root, copy], [b.root], CURRENT)
    with pytest.raises(ConfigError, match="holds run"):
        compare_batches([a.root], [copy], CURRENT)


@pytest.mark.parametrize("status", ["running", "interrupted", "stopped", "abandoned"])
def test_a_batch_with_runs_never_decided_is_refused_naming_its_status(
    tmp_path: Path, status: str
) -> None:
    runs = [run(r, [attempt(r, success=False)]) for r in RUNS[:4]]
    runs += [] if status in {"running", "abandoned"} else [run(r, []) for r in RUNS[4:]]
    partial = write_batch(tmp_path / "p", receipt(runs, batchId="p", status=status))
    with pytest.raises(EvidenceError, match=f"the batch is {status} with 4 of its 18 sched"):
        compare_batches([batch(tmp_path / "a").root], [partial.root], CURRENT)


@pytest.mark.parametrize("field", ["suiteDigest", "evaluatorDigest"])
def test_a_receipt_whose_suite_or_harness_digest_alone_was_edited_is_refused(
    tmp_path: Path, field: str
) -> None:
    a, b = batch(tmp_path / "a"), batch(tmp_path / "b")
    path = b.root / "receipt.json"
    data = json.loads(path.read_text())
    data[field] = "sha256:" + "0" * 64
    path.write_text(json.dumps(data))
    with pytest.raises(EvidenceError, match=r"receipt and archives\.json disagree"):
        compare_batches([a.root], [b.root], CURRENT)


def test_the_verdict_word_follows_the_stratified_test_and_not_the_crude_pool() -> None:
    # The first task has no graded run on the candidate's side: it is left out of every
    # figure; the only task tested went 0/10 -> 7/10.
    rate = _rate([(30, 30, 0, 0), (0, 10, 7, 10)], "first attempt, all tasks")
    assert rate.verdict == "better" and rate.difference == pytest.approx(0.7)
    assert (rate.baselineSuccesses, rate.baselineRuns) == (0, 10)
    assert (rate.candidateSuccesses, rate.candidateRuns) == (7, 10)
    assert rate.sentence.startswith("better: first attempt, all tasks: 0/10 -> 7/10 (1 task")
    assert rate.low is not None and rate.low > 0


def test_no_sentence_pairs_no_detectable_difference_with_an_interval_that_excludes_zero(
    tmp_path: Path,
) -> None:
    before, after = batch(tmp_path / "a"), batch(tmp_path / "b", failing_first=18)
    result = compare_batches([before.root], [after.root], CURRENT)
    forms = next(t for t in result.tasks if t.taskId == "forms")
    assert forms.first.high is not None and forms.first.high < 0  # 3/3 -> 0/3
    assert forms.first.sentence.startswith("not established: forms, first attempt: 3/3 -> 0/3")
    for rate in [result.first, result.final] + [
        r for t in result.tasks for r in (t.first, t.final)
    ]:
        if rate.sentence.startswith("no detectable difference"):
            assert rate.low is not None and rate.high is not None
            assert rate.low <= 0 <= rate.high, rate.sentence


@pytest.mark.parametrize(
    ("rate", "detect"), [("0.5", "1e-9"), ("0", "1e-9"), ("1", "-1e-9"), ("0.99", "0.01")]
)
def test_plan_refuses_a_change_beyond_its_reach_with_the_smallest_it_plans_for(
    rate: str, detect: str
) -> None:
    result = CliRunner().invoke(main, ["plan", "--baseline-rate", rate, "--detect", detect])
    assert result.exit_code == 2, result.output
    assert "more than 400 runs per side" in result.output
    assert "the smallest change it plans for" in result.output and "points" in result.output
    assert "Traceback" not in result.output


def test_a_safety_regression_is_said_first_in_the_terminal_the_json_and_the_summary(
    tmp_path: Path,
) -> None:
    runs = [
        run(r, [attempt(r, success=False, safe=False), attempt(r, 2)]) if i < 3 else run(r)
        for i, r in enumerate(RUNS)
    ]
    a = batch(tmp_path / "a")
    b = write_batch(tmp_path / "b", receipt(runs, batchId="b"))
    result = compare_batches([a.root], [b.root], CURRENT)
    assert result.unsafeAttempts == (0, 3) and result.unsafeRuns == (0, 3)
    text = as_text(result)
    assert text.splitlines()[0] == (
        "SAFETY: more unsafe behaviour in the candidate: unsafe attempts 0 -> 3, runs with one "
        "0 -> 3"
    )
    assert json.loads(result.model_dump_json())["unsafeAttempts"] == [0, 3]
    shared = as_markdown(share_summary(b.root, CURRENT, compare_with=a.root))
    assert "- SAFETY: more unsafe behaviour in the candidate: unsafe attempts 0 -> 3" in shared
    same = as_text(compare_batches([a.root], [batch(tmp_path / "c").root], CURRENT))
    assert "safety: unsafe attempts 0 -> 0, runs with one 0 -> 0" in same


def test_the_terminal_prints_hostile_names_and_task_ids_as_one_line_of_text(
    tmp_path: Path,
) -> None:
    hostile = {"name": "ok\n## Decision: QUALIFIED\x1b[2J", "version": "1\u202e2"}
    a = batch(tmp_path / "a")
    b = write_batch(
        tmp_path / "b",
        receipt(batchId="b", runner=hostile),
        lambda manifest: manifest.update(runner=hostile),
    )
    result = compare_batches([a.root], [b.root], CURRENT, allow=["runner"])
    # A task id the receipt's pattern refuses, as if it had got through: the table holds it.
    evil = result.tasks[0].model_copy(update={"taskId": "forms\n## Decision\u202e\x1b[2J"})
    text = as_text(result.model_copy(update={"tasks": [evil, *result.tasks[1:]]}))
    assert not any(line.startswith("## ") for line in text.splitlines())
    assert "\x1b" not in text and "\u202e" not in text
    assert "formsU+000A## DecisionU+202EU+001B[2J" in text
