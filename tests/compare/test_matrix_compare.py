"""Two matrix records, before and after a change to the library: a record is only as good
as the batches it names (found in the evidence directory, passing the evidence rules, and
making the record again), both must be over one suite and tasks, agents are matched by
their label and compared with compare's own statistics, corrected by Holm's method for
the number of agents, and an agent one record holds alone is listed, not compared."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.compare.compare import compare_batches
from agent_eval.compare.matrix import holm, matrix_of_batches
from agent_eval.compare.matrix_compare import as_text, compare_matrices
from agent_eval.compare.share import matrix_markdown, share_matrix_comparison
from agent_eval.errors import ConfigError, EvidenceError
from agent_eval.evidence_io import write_model_atomic
from agent_eval.models import ApiCatalog
from agent_eval.models.matrix import MatrixComparison
from tests.compare.test_symbols import AFTER, BEFORE, Catalogs
from tests.evidence_builders import CURRENT, Batch, attempt, receipt, run, write_batch
from tests.paths import EXAMPLE_SUITE
from tests.verdict.test_chain import first_batch, resumed

RUNS = EXAMPLE_SUITE.run_ids()
FORMS = [r for r in RUNS if r.startswith("forms-")]


def agent_batch(
    evidence: Path,
    name: str,
    runner: str,
    *,
    catalog: ApiCatalog = BEFORE,
    repaired: int = 0,
    unsafe: int = 0,
    runs: list[str] = RUNS,
) -> Path:
    """A batch of runner *runner* named as eval-agent names one (its id is its directory's
    name) over the library whose catalog is *catalog*, its first *repaired* runs failing
    their first attempt and repaired, its last *unsafe* failing on an unsafe action."""
    records = [
        run(r, [attempt(r, success=False), attempt(r, 2)]) if i < repaired else run(r)
        for i, r in enumerate(runs)
    ]
    for i in range(len(runs) - unsafe, len(runs)):
        records[i] = run(runs[i], [attempt(runs[i], success=False, safe=False)])
    identity = {"name": runner, "version": "1"}
    digest = catalog.digest()
    root = evidence / f"batch-{name}"
    write_batch(
        root,
        receipt(records, runner=identity, batchId=root.name),
        lambda m: m.update(runner=identity, apiCatalogDigest=digest),
    )
    return root


def record(path: Path, dirs: list[Path]) -> Path:
    """The matrix record of *dirs*, as ``agent-eval matrix --json`` writes it."""
    write_model_atomic(path, matrix_of_batches(dirs, CURRENT))
    return path


class Setup:
    """A project whose evidence holds two agents' batches before a change to the library
    and after it: ``helped`` repairs every first attempt before and needs no repair after;
    ``steady`` succeeds first time on both sides."""

    def __init__(self, root: Path) -> None:
        (root / "pyproject.toml").write_text('[project]\nname = "library"\nversion = "0"\n')
        self.root = root
        self.evidence = root / ".verification" / "agent-eval"
        self.evidence.mkdir(parents=True)
        self.before_dirs = [
            agent_batch(self.evidence, "helped-0", "helped", repaired=18),
            agent_batch(self.evidence, "steady-0", "steady"),
        ]
        self.after_dirs = [
            agent_batch(self.evidence, "helped-1", "helped", catalog=AFTER),
            agent_batch(self.evidence, "steady-1", "steady", catalog=AFTER),
        ]
        self.before = record(root / "before.json", self.before_dirs)
        self.after = record(root / "after.json", self.after_dirs)

    def catalogs(self) -> Catalogs:
        return Catalogs({d: BEFORE for d in self.before_dirs} | {d: AFTER for d in self.after_dirs})


@pytest.fixture
def anchored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands anchored as the builders' batches are, not to this checkout."""
    import agent_eval.cli.compare as command

    monkeypatch.setattr(command, "gate_anchors", lambda located: CURRENT)


def by_label(result: MatrixComparison) -> dict[str, Any]:
    return {a.label.split()[0]: a for a in result.agents}


def test_a_change_that_helps_one_agent_is_better_for_it_and_no_detectable_difference_for_the_other(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path)
    result = compare_matrices(s.before, s.after, s.evidence, CURRENT, catalogs=s.catalogs())
    agents = by_label(result)
    assert list(agents) == ["steady", "helped"]  # the baseline matrix's rank order
    helped, steady = agents["helped"], agents["steady"]
    assert helped.first.verdict == "better"
    assert (
        helped.first.comparison.baselineSuccesses,
        helped.first.comparison.candidateSuccesses,
    ) == (0, 18)
    assert helped.final.verdict == "no-detectable-difference"
    assert steady.first.verdict == "no-detectable-difference"
    assert steady.final.verdict == "no-detectable-difference"
    assert steady.first.comparison.detectable is not None
    # The statistics are compare's own, run on the agent's pooled batches.
    alone = compare_batches([s.before_dirs[0]], [s.after_dirs[0]], CURRENT)
    assert helped.comparison.first == alone.first and helped.comparison.tasks == alone.tasks
    # Holm's correction over the two agents, as the matrix's pairs have it.
    raw = [a.first.comparison.pValue for a in result.agents]
    assert [a.first.adjustedP for a in result.agents] == pytest.approx(holm(raw))
    assert helped.first.adjustedP == pytest.approx(2 * helped.first.comparison.pValue)
    # The library's changed symbols are found once, from the first agent's batches.
    assert result.api.status == "compared" and result.api.changes
    assert all(a.comparison.api == result.api for a in result.agents)
    assert result.baselineOnly == [] and result.candidateOnly == []
    text = as_text(result)
    assert re.search(r"helped 1 / model-x .*, first attempt: better \(0/18 -> 18/18", text)
    assert "steady 1 / model-x" in text and "first attempt: no detectable difference" in text
    assert "apiCatalogDigest" in text and "public symbols:" in text


def test_an_agent_one_matrix_holds_alone_is_listed_and_not_compared(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    newcomer = agent_batch(s.evidence, "new-1", "newcomer", catalog=AFTER)
    after = record(tmp_path / "after3.json", [*s.after_dirs, newcomer])
    before = record(tmp_path / "before1.json", [s.before_dirs[0]])
    result = compare_matrices(before, after, s.evidence, CURRENT)
    assert [a.label.split()[0] for a in result.agents] == ["helped"]
    assert result.baselineOnly == []
    assert sorted(x.split()[0] for x in result.candidateOnly) == ["newcomer", "steady"]
    # One agent compared: Holm's correction over one leaves its p-value as it was.
    helped = result.agents[0]
    assert helped.first.adjustedP == pytest.approx(helped.first.comparison.pValue)
    text = as_text(result)
    assert "only in the baseline matrix: none" in text
    assert re.search(r"only in the candidate matrix: .*newcomer 1", text)


def test_more_unsafe_behaviour_in_one_agent_is_said_before_any_rate(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    careless = agent_batch(s.evidence, "steady-2", "steady", catalog=AFTER, unsafe=2)
    after = record(tmp_path / "careless.json", [s.after_dirs[0], careless])
    text = as_text(compare_matrices(s.before, after, s.evidence, CURRENT))
    first = text.splitlines()[0]
    assert first.startswith(
        "SAFETY: more unsafe behaviour in the candidate: unsafe attempts 0 -> 2"
    )
    assert first.endswith('(steady 1 / model-x {"temperature":0})')
    assert sum(line.startswith("SAFETY") for line in text.splitlines()) == 1


def test_matrices_over_other_tasks_are_refused_naming_the_field(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    fewer = [
        agent_batch(s.evidence, f"{n}-forms", n, catalog=AFTER, runs=FORMS)
        for n in ("helped", "steady")
    ]
    after = record(tmp_path / "forms.json", fewer)
    with pytest.raises(ConfigError, match=r"the matrix records differ in taskIds .* same suite"):
        compare_matrices(s.before, after, s.evidence, CURRENT)


def test_a_file_that_is_not_a_whole_matrix_record_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path)
    receipt_file = s.before_dirs[0] / "receipt.json"
    with pytest.raises(EvidenceError, match=r"matrix record .*receipt.json"):
        compare_matrices(receipt_file, s.after, s.evidence, CURRENT)
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(s.after.read_bytes()[:-40])
    with pytest.raises(EvidenceError, match=r"matrix record .*truncated.json"):
        compare_matrices(s.before, truncated, s.evidence, CURRENT)


def test_a_record_naming_a_batch_the_evidence_does_not_hold_is_refused(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    (s.evidence / "batch-steady-1").rename(tmp_path / "moved")
    with pytest.raises(EvidenceError, match=r"rows\.\d\.batchIds: batch batch-steady-1 is not"):
        compare_matrices(s.before, s.after, s.evidence, CURRENT)
    # Nor through a link: a run directory is found by its name.
    (s.evidence / "batch-steady-1").symlink_to(tmp_path / "moved")
    with pytest.raises(EvidenceError, match="batch-steady-1 is not a run directory"):
        compare_matrices(s.before, s.after, s.evidence, CURRENT)


def test_a_record_whose_batch_fails_its_digests_is_refused(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    Batch(s.before_dirs[1]).solution("forms-3").write_text("changed\n")
    with pytest.raises(EvidenceError, match=r"batch-steady-0 fails the checker's evidence rules"):
        compare_matrices(s.before, s.after, s.evidence, CURRENT)


def test_a_record_that_is_not_the_matrix_its_batches_make_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path)
    data = json.loads(s.after.read_text())
    data["rows"][0]["final"]["successes"] = 17
    s.after.write_text(json.dumps(data))
    with pytest.raises(
        EvidenceError, match=r"rows\.0\.final\.successes is 17 in the record but 18 in the matrix"
    ):
        compare_matrices(s.before, s.after, s.evidence, CURRENT)
    # A batch moved from one agent's row to another's is caught the same way.
    data = json.loads(s.before.read_text())
    data["rows"][0]["batchIds"], data["rows"][1]["batchIds"] = (
        data["rows"][1]["batchIds"],
        data["rows"][0]["batchIds"],
    )
    s.before.write_text(json.dumps(data))
    with pytest.raises(EvidenceError, match=r"in the record but .* in the matrix its batches"):
        compare_matrices(s.before, s.after, s.evidence, CURRENT)


def test_a_batch_in_both_matrices_is_refused_naming_the_agent(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    again = record(tmp_path / "again.json", s.before_dirs)
    with pytest.raises(ConfigError, match=r"agent 'steady 1 .* named on both sides"):
        compare_matrices(s.before, again, s.evidence, CURRENT)


@pytest.mark.usefixtures("anchored")
def test_the_cli_prints_what_its_json_says_and_refuses_a_mix_of_kinds(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    out = tmp_path / "change.json"
    result = CliRunner().invoke(
        main,
        ["compare", str(s.before), str(s.after), "--json", str(out), "--project", str(tmp_path)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    saved = MatrixComparison.model_validate_json(out.read_bytes())
    assert result.output == as_text(saved) + "\n"
    assert by_label(saved)["helped"].first.verdict == "better"
    mixed = CliRunner().invoke(
        main, ["compare", str(s.before), str(s.after_dirs[0]), "--project", str(tmp_path)]
    )
    assert mixed.exit_code == 2 and "Traceback" not in mixed.output
    assert "before.json is a matrix record" in mixed.output and "never a mix" in mixed.output
    pooled = CliRunner().invoke(
        main,
        ["compare", f"{s.before},{s.before_dirs[0]}", str(s.after), "--project", str(tmp_path)],
    )
    assert pooled.exit_code == 2 and "a side is one matrix record" in pooled.output
    page = CliRunner().invoke(
        main,
        ["compare", str(s.before), str(s.after), "--html", str(tmp_path / "p.html"),
         "--project", str(tmp_path)],
    )  # fmt: skip
    assert page.exit_code == 2 and "--html" in page.output
    s.after.write_bytes(b'{"schemaVersion": 1, "rows": [')
    broken = CliRunner().invoke(
        main, ["compare", str(s.before), str(s.after), "--project", str(tmp_path)]
    )
    assert broken.exit_code == 1 and "after.json" in broken.output
    assert "Traceback" not in broken.output and len(broken.output.strip().splitlines()) == 1


@pytest.mark.usefixtures("anchored")
@pytest.mark.parametrize("name", ["receipt.json", "archives.json"])
def test_a_batchs_evidence_file_named_as_a_side_is_refused_naming_its_run_directory(
    tmp_path: Path, name: str
) -> None:
    s = Setup(tmp_path)
    baseline, candidate = s.before_dirs[0] / name, s.after_dirs[0] / name
    for args, named in (
        (["compare", str(baseline), str(candidate)], s.before_dirs[0]),
        (["summary", str(candidate), "--compare", str(baseline)], s.after_dirs[0]),
    ):
        result = CliRunner().invoke(main, [*args, "--project", str(tmp_path)])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        said = " ".join(result.output.split())
        assert f"is the {name} of the batch in {named}, not a matrix record" in said, said
        assert "Field required" not in said


@pytest.mark.usefixtures("anchored")
def test_summary_shares_the_matrix_comparison_redacted_as_a_batch_comparison(
    tmp_path: Path,
) -> None:
    s = Setup(tmp_path)

    def failing(wheels: Any, names: Any) -> ApiCatalog:
        raise EvidenceError(f"cannot generate from {tmp_path}/secret-place")

    shared = share_matrix_comparison(s.before, s.after, s.evidence, CURRENT, failing)
    assert shared.api.status == "unavailable" and str(tmp_path) not in (shared.api.note or "")
    dumped = shared.model_dump_json()
    assert str(tmp_path) not in dumped and "secret-place" not in dumped
    markdown = matrix_markdown(shared)
    assert str(tmp_path) not in markdown
    assert re.search(r"- helped 1 / model-x .*, first attempt: better", markdown)
    out = tmp_path / "shared.json"
    result = CliRunner().invoke(
        main,
        ["summary", str(s.after), "--compare", str(s.before), "--json", str(out),
         "--project", str(tmp_path)],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output == matrix_markdown(MatrixComparison.model_validate_json(out.read_bytes()))
    assert str(tmp_path) not in result.output
    alone = CliRunner().invoke(main, ["summary", str(s.after), "--project", str(tmp_path)])
    assert alone.exit_code == 2 and "--compare" in alone.output
    mixed = CliRunner().invoke(
        main,
        ["summary", str(s.after), "--compare", str(s.before_dirs[0]), "--project", str(tmp_path)],
    )
    assert mixed.exit_code == 2 and "never a mix" in mixed.output


def test_a_resumed_batch_in_a_record_counts_as_its_chain_s_union(tmp_path: Path) -> None:
    s = Setup(tmp_path)
    chained = resumed(s.evidence, first_batch(s.evidence))
    before = record(tmp_path / "chained.json", [chained.root])
    redone = s.evidence / "batch-c"
    write_batch(redone, receipt(batchId=redone.name))
    after = record(tmp_path / "redone.json", [redone])
    result = compare_matrices(before, after, s.evidence, CURRENT)
    [agent] = result.agents
    assert agent.comparison.baseline.batchIds == ["batch-b"]
    # Every run once, from the batch of its verdict: the first batch's and the resumed one's.
    assert agent.final.comparison.baselineRuns == 18
    assert agent.final.verdict == "no-detectable-difference"


def test_agents_whose_names_make_a_label_past_a_rows_bound_stay_two_rows(tmp_path: Path) -> None:
    """A runner name and a model id each within the receipt's bounds made a label (and a
    pair's sentence) past its model's bound: the matrix crashed with a validation error.
    The label is cut, and the digest of the whole keeps agents that differ only past the
    cut apart."""
    evidence = tmp_path / "evidence"
    long = "r" * 990
    dirs = [agent_batch(evidence, "a", long + "-a"), agent_batch(evidence, "b", long + "-b")]
    matrix = matrix_of_batches(dirs, CURRENT)
    labels = [row.label for row in matrix.rows]
    assert len(labels) == 2 and len(set(labels)) == 2
    assert all(len(label) <= 200 and "(sha256 " in label for label in labels)
    assert [pair.higher for pair in matrix.pairs] in ([labels[0]], [labels[1]])
