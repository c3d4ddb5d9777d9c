"""Many runners' batches side by side: pooled per runner identity, ranked, every pair
tested with Holm's correction, refused on a repeated batch or a different library."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from scipy.stats import fisher_exact

from agent_eval.cli import main
from agent_eval.compare.matrix import as_text, holm, matrix_of_batches
from agent_eval.compare.matrix_page import matrix_view, render_matrix, write_matrix_page
from agent_eval.errors import ConfigError
from agent_eval.models.matrix import Matrix
from agent_eval.report.statistics import wilson_interval
from tests.evidence_builders import (
    CURRENT,
    Batch,
    attempt,
    gateway_line,
    receipt,
    run,
    write_batch,
)
from tests.paths import EXAMPLE_SUITE

RUNS = EXAMPLE_SUITE.run_ids()
FORMS = [r for r in RUNS if r.startswith("forms-")]
HOSTILE = {"name": "ok\n## Decision: QUALIFIED\x1b[2J<script>x</script>", "version": "1\u202e2"}


def agent(
    root: Path,
    runner: dict[str, Any] | None = None,
    *,
    repaired: int = 0,
    failed: int = 0,
    runs: list[str] = RUNS,
    gateway: dict[str, Any] | None = None,
) -> Batch:
    """A batch of *runner* whose first *repaired* runs fail first and are repaired, and
    the next *failed* fail once and for all; *gateway* changes its archives.json gateway."""
    records = []
    for i, r in enumerate(runs):
        if i < repaired:
            records.append(run(r, [attempt(r, success=False), attempt(r, 2)]))
        elif i < repaired + failed:
            records.append(run(r, [attempt(r, success=False)]))
        else:
            records.append(run(r))
    overrides: dict[str, Any] = {"batchId": f"batch-{root.name}"}
    if runner is None:
        return write_batch(root, receipt(records, **overrides))

    def identities(manifest: dict[str, Any]) -> None:
        manifest.update(runner=runner)
        manifest["gateway"].update(gateway or {})

    return write_batch(root, receipt(records, runner=runner, **overrides), identities)


@pytest.fixture
def anchored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command anchored as the builders' batches are, not to this checkout."""
    import agent_eval.cli.compare as command

    monkeypatch.setattr(command, "gate_anchors", lambda located: CURRENT)


def named(name: str) -> dict[str, str]:
    return {"name": name, "version": "1"}


def test_rows_pool_per_runner_and_rank_by_final_then_first_rate(tmp_path: Path) -> None:
    strong = agent(tmp_path / "strong", named("strong"))
    repairs = agent(tmp_path / "repairs", named("repairs"), repaired=9)
    weak1 = agent(tmp_path / "weak1", named("weak"), failed=12)
    weak2 = agent(tmp_path / "weak2", named("weak"), failed=6)
    matrix = matrix_of_batches([weak1.root, repairs.root, strong.root, weak2.root], current=CURRENT)
    assert [r.label for r in matrix.rows] == [
        'strong 1 / model-x {"temperature":0}',
        'repairs 1 / model-x {"temperature":0}',
        'weak 1 / model-x {"temperature":0}',
    ]
    assert [r.rank for r in matrix.rows] == [1, 2, 3]
    strong_row, repairs_row, weak_row = matrix.rows
    assert (strong_row.final.successes, strong_row.final.runs) == (18, 18)
    assert (repairs_row.first.successes, repairs_row.final.successes) == (9, 18)
    # The two weak batches pool: 6 + 12 of 36 runs failed.
    assert weak_row.batchIds == ["batch-weak1", "batch-weak2"]
    assert (weak_row.final.successes, weak_row.final.runs) == (18, 36)
    interval = wilson_interval(18, 36)
    assert interval is not None
    assert (weak_row.final.low, weak_row.final.high) == (interval.low, interval.high)
    assert weak_row.meanSecondsPerRun == pytest.approx(1.0)
    # Each attempt's gateway record is one answered request of 30 tokens: the repairing
    # row's 27 attempts over 18 runs and 18 final successes.
    assert repairs_row.meanTokensPerRun == pytest.approx(27 * 30 / 18)
    assert repairs_row.modelCallsPerSuccess == pytest.approx(27 / 18)
    assert repairs_row.meanSecondsPerRun == pytest.approx(27 / 18)
    forms = next(t for t in repairs_row.tasks if t.taskId == "forms")
    assert (forms.first.successes, forms.final.successes, forms.final.runs) == (1, 3, 3)
    assert len(matrix.pairs) == 3
    strong_vs_weak = next(
        p for p in matrix.pairs if p.higher.startswith("strong") and p.lower.startswith("weak")
    )
    assert strong_vs_weak.final.verdict == "better"
    repairs_vs_strong = matrix.pairs[0]
    assert repairs_vs_strong.final.verdict == "no-detectable-difference"
    assert repairs_vs_strong.final.comparison.detectable is not None
    # The strong row's first attempts beat the repairing one's: the ranking's second key.
    assert repairs_vs_strong.first.verdict == "better"
    lines = as_text(matrix).splitlines()
    assert lines[1].split()[:2] == ["1", "strong"] and lines[3].split()[:2] == ["3", "weak"]


def priced(
    root: Path,
    runner: dict[str, Any],
    prices: dict[str, Any],
    upstreams: list[dict[str, Any]] | None = None,
    **batch: Any,
) -> Batch:
    """*runner*'s batch whose gateway records the config's *prices* by upstream name."""
    gateway = {"prices": prices} | ({"upstreams": upstreams} if upstreams else {})
    return agent(root, runner, gateway=gateway, **batch)


USD = {"currency": "USD", "inputPerMillionTokens": 3.0, "outputPerMillionTokens": 15.0}
EUR = {"currency": "EUR", "inputPerMillionTokens": 2.0, "outputPerMillionTokens": 10.0}
PER_ATTEMPT_USD = (10 * 3.0 + 20 * 15.0) / 1e6
"""One builder attempt at USD: one request of 10 input and 20 output tokens."""


def test_cost_per_run_and_per_success_come_from_the_gateway_records_and_the_price(
    tmp_path: Path,
) -> None:
    priced(tmp_path / "a", named("a"), {"provider": USD}, repaired=9, failed=3)
    agent(tmp_path / "b", named("b"))  # no price: no cost, never a guess
    matrix = matrix_of_batches([tmp_path / "a", tmp_path / "b"], current=CURRENT)
    a = next(r for r in matrix.rows if r.label.startswith("a "))
    b = next(r for r in matrix.rows if r.label.startswith("b "))
    # 27 attempts: 9 runs have two.
    assert a.currency == "USD"
    assert a.meanCostPerRun == pytest.approx(27 * PER_ATTEMPT_USD / 18)
    assert a.costPerSuccess == pytest.approx(27 * PER_ATTEMPT_USD / 15)
    assert (b.currency, b.meanCostPerRun, b.costPerSuccess) == (None, None, None)
    text = as_text(matrix)
    assert f"USD {27 * PER_ATTEMPT_USD / 15:.4g}" in text
    page = render_matrix(matrix_view(matrix))
    assert f"USD {27 * PER_ATTEMPT_USD / 18:.4g}" in page


@pytest.mark.parametrize(
    "case", ["upstream-unpriced", "currencies-differ", "tokenless-request-to-unpriced"]
)
def test_a_cost_is_shown_whole_or_not_at_all(tmp_path: Path, case: str) -> None:
    # Both batches may reach a second upstream, which has no price.
    upstreams = json.loads(agent(tmp_path / "x", named("x")).archives.read_text())["gateway"][
        "upstreams"
    ]
    upstreams.append({**upstreams[0], "name": "other"})
    first = priced(tmp_path / "a1", named("a"), {"provider": USD}, upstreams=upstreams)
    # Prices are no identity: batches priced differently still pool.
    again = EUR if case == "currencies-differ" else USD
    second = priced(tmp_path / "a2", named("a"), {"provider": again}, upstreams=upstreams)
    if case != "currencies-differ":
        tokens = {"inputTokens": 0, "outputTokens": 0} if case.startswith("tokenless") else {}
        second.replace_gateway_record(
            RUNS[0], 1, gateway_line() + gateway_line(upstream="other", **tokens)
        )
    matrix = matrix_of_batches([first.root, second.root], current=CURRENT)
    (row,) = matrix.rows
    if case.startswith("tokenless"):
        # A request with no tokens costs nothing at any price.
        assert row.currency == "USD"
        assert row.costPerSuccess == pytest.approx(36 * PER_ATTEMPT_USD / 36)
    else:
        assert (row.currency, row.meanCostPerRun, row.costPerSuccess) == (None, None, None)
        line = as_text(matrix).splitlines()[1]
        assert line.split()[-2:] == ["-", "2"], line


def test_a_resumed_batch_costs_each_run_from_the_batch_of_its_verdict(tmp_path: Path) -> None:
    from tests.verdict.test_chain import first_batch, resumed

    def price(manifest: dict[str, Any]) -> None:
        manifest["gateway"]["prices"] = {"provider": USD}

    last = resumed(tmp_path, first_batch(tmp_path, archives=price), archives=price)
    (row,) = matrix_of_batches([last.root], current=CURRENT).rows
    # Nine runs' records lie in the first batch, nine in the resumed one: one attempt each.
    assert (row.final.successes, row.currency) == (18, "USD")
    assert row.costPerSuccess == pytest.approx(PER_ATTEMPT_USD)


def test_holm_adjustment_matches_a_hand_computation() -> None:
    # Sorted: 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to 0.06 (monotone).
    assert holm([0.04, 0.01, None, 0.03]) == pytest.approx([0.06, 0.03, None, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def test_one_task_pairs_are_fishers_test_and_adjusted_for_every_pair(tmp_path: Path) -> None:
    a = agent(tmp_path / "a", named("a"), runs=FORMS)
    b = agent(tmp_path / "b", named("b"), runs=FORMS, failed=2)
    c = agent(tmp_path / "c", named("c"), runs=FORMS, failed=3)
    matrix = matrix_of_batches([c.root, b.root, a.root], CURRENT)
    assert matrix.taskIds == ["forms"]
    counts = {r.label.split()[0]: r.final.successes for r in matrix.rows}
    raw = []
    for pair in matrix.pairs:
        k_high, k_low = counts[pair.higher.split()[0]], counts[pair.lower.split()[0]]
        expected = fisher_exact([[k_high, 3 - k_high], [k_low, 3 - k_low]]).pvalue
        assert pair.final.comparison.pValue == pytest.approx(expected)
        raw.append(pair.final.comparison.pValue)
    # 3/3 vs 0/3: p = 0.1 before correction, 0.3 after it (the smallest of three).
    assert [p.final.adjustedP for p in matrix.pairs] == pytest.approx(holm(raw))
    a_vs_c = next(p for p in matrix.pairs if p.higher[0] == "a" and p.lower[0] == "c")
    assert a_vs_c.final.comparison.pValue == pytest.approx(0.1)
    assert a_vs_c.final.adjustedP == pytest.approx(0.3)
    assert all(p.final.verdict == "no-detectable-difference" for p in matrix.pairs)


def test_a_batch_named_twice_by_path_or_by_copy_is_refused(tmp_path: Path) -> None:
    a, b = agent(tmp_path / "a", named("a")), agent(tmp_path / "b", named("b"))
    with pytest.raises(ConfigError, match="same batch"):
        matrix_of_batches([a.root, b.root, a.root], CURRENT)
    shutil.copytree(a.root, tmp_path / "copy")
    with pytest.raises(ConfigError, match="twice in the matrix"):
        matrix_of_batches([a.root, tmp_path / "copy"], CURRENT)


@pytest.mark.usefixtures("anchored")
def test_a_different_library_is_refused_naming_the_field(tmp_path: Path) -> None:
    a = agent(tmp_path / "a", named("a"))
    other = write_batch(
        tmp_path / "b",
        receipt(runner=named("b"), batchId="b"),
        lambda m: m.update(runner=named("b"), apiCatalogDigest="sha256:" + "c" * 64),
    )
    with pytest.raises(ConfigError, match=r"differs from .* in apiCatalogDigest: the batches"):
        matrix_of_batches([a.root, other.root], CURRENT)
    result = CliRunner().invoke(main, ["matrix", str(a.root), str(other.root)])
    assert result.exit_code == 1 and "apiCatalogDigest" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("order", ["without-first", "without-between"])
def test_a_batch_without_a_gateway_sits_beside_agents_that_must_share_theirs(
    tmp_path: Path, order: str
) -> None:
    """A reference runner reaches no model, so it has no gateway to differ in; the batches
    that ran one must still share it, whichever comes first."""
    without = write_batch(
        tmp_path / "ref",
        receipt(runner=named("ref"), batchId="ref", selfTest=True),
        lambda m: m.update(runner=named("ref"), gateway=None),
    )
    a = agent(tmp_path / "a", named("a"))
    b = agent(tmp_path / "b", named("b"), failed=3)
    dirs = [without.root, a.root, b.root]
    if order == "without-between":
        dirs = [a.root, without.root, b.root]
    matrix = matrix_of_batches(dirs, CURRENT)
    assert sorted(r.runner.name for r in matrix.rows if r.runner) == ["a", "b", "ref"]
    other = write_batch(
        tmp_path / "c",
        receipt(runner=named("c"), batchId="c"),
        lambda m: m.update(
            runner=named("c"), gateway={**m["gateway"], "image": "sha256:" + "f" * 64}
        ),
    )
    with pytest.raises(ConfigError, match=r"c differs from .*/a in gatewayImage: the batches"):
        matrix_of_batches([*dirs, other.root], CURRENT)


def test_a_hostile_runner_name_breaks_neither_the_terminal_lines_nor_the_page(
    tmp_path: Path,
) -> None:
    a = agent(tmp_path / "a", named("a"))
    evil = agent(tmp_path / "evil", HOSTILE, failed=3)
    matrix = matrix_of_batches([a.root, evil.root], CURRENT)
    text = as_text(matrix)
    lines = text.splitlines()
    assert not any(line.startswith("## ") for line in lines)
    assert "\x1b" not in text and "\u202e" not in text
    assert lines[2].split()[0] == "2" and "U+000A## Decision" in lines[2]
    assert len(lines) == 3 + 1 + 1 + 2 + 1 + 1  # header, 2 rows, blank, pairs, blank, method
    html = render_matrix(matrix_view(matrix))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'data-cp="U+202E"' in html and 'data-cp="U+001B"' in html
    assert "http://" not in html and "https://" not in html


@pytest.mark.usefixtures("anchored")
def test_the_cli_writes_json_that_round_trips_and_a_page(tmp_path: Path) -> None:
    a, b = agent(tmp_path / "a", named("a")), agent(tmp_path / "b", named("b"), failed=18)
    out, page = tmp_path / "matrix.json", tmp_path / "matrix.html"
    result = CliRunner().invoke(
        main,
        ["matrix", str(b.root), str(a.root), "--json", str(out), "--html", str(page)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].split()[:2] == ["1", "a"]
    assert "better" in result.output
    saved = Matrix.model_validate_json(out.read_bytes())
    assert saved == matrix_of_batches([b.root, a.root], CURRENT)
    assert json.loads(out.read_text())["rows"][0]["final"]["successes"] == 18
    assert page.read_text().startswith("<!DOCTYPE html>")
    missing = CliRunner().invoke(main, ["matrix", str(a.root), str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such run directory" in missing.output
    none = CliRunner().invoke(main, ["matrix"])
    assert none.exit_code == 2 and "Traceback" not in none.output


def test_the_page_links_each_batch_to_its_report_relative_to_where_it_is_written(
    tmp_path: Path,
) -> None:
    evidence = tmp_path / "evidence dir"
    dirs = []
    for name, failed in (("one", 0), ("two", 9)):
        batch = write_batch(
            evidence / name,
            receipt(
                [run(r, [attempt(r, success=i >= failed)]) for i, r in enumerate(RUNS)],
                runner=named(name),
                batchId=name,
            ),
            lambda m, n=name: m.update(runner=named(n)),
        )
        dirs.append(batch.root)
    (evidence / "one" / "report.html").write_text("<!DOCTYPE html>")  # "two" has none
    matrix = matrix_of_batches(dirs, CURRENT)
    reports = {d.name: d / "report.html" for d in dirs}
    beside = write_matrix_page(evidence / "matrix.html", matrix, reports).read_text()
    assert 'href="one/report.html"' in beside and 'href="one/report.html#grid"' in beside
    assert "two/report.html" not in beside and "<code>two</code>" in beside
    elsewhere = tmp_path / "pages" / "deep"
    elsewhere.mkdir(parents=True)
    away = write_matrix_page(elsewhere / "m.html", matrix, reports).read_text()
    assert 'href="../../evidence%20dir/one/report.html"' in away
    # Each of the row's seven cells (all tasks, six tasks) leads to its report's grid.
    assert away.count("one/report.html#grid") == 1 + len(matrix.taskIds)


@pytest.mark.usefixtures("anchored")
def test_report_of_a_matrix_record_writes_its_page_and_refuses_a_record_its_batches_deny(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_eval.cli.report as command

    monkeypatch.setattr(command, "gate_anchors", lambda located: CURRENT)
    project = tmp_path / "repo"
    evidence = project / ".verification" / "agent-eval"
    (project / "pyproject.toml").parent.mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n')
    dirs = [
        write_batch(
            evidence / name,
            receipt(runner=named(name), batchId=name),
            lambda m, n=name: m.update(runner=named(n)),
        ).root
        for name in ("one", "two")
    ]
    record = evidence / "matrix-one.json"
    record.write_text(matrix_of_batches(dirs, CURRENT).model_dump_json())
    (evidence / "two" / "report.html").write_text("<!DOCTYPE html>")
    done = CliRunner().invoke(main, ["report", str(record), "--project", str(project)])
    assert done.exit_code == 0, done.output
    page = evidence / "matrix-one.html"
    assert done.output.strip() == str(page)
    assert 'href="two/report.html"' in page.read_text()
    data = json.loads(record.read_text())
    data["rows"][0]["final"]["successes"] = 0
    record.write_text(json.dumps(data))
    denied = CliRunner().invoke(main, ["report", str(record), "--project", str(project)])
    assert denied.exit_code == 1 and "in the matrix its batches make" in denied.output
    assert "Traceback" not in denied.output and len(denied.output.strip().splitlines()) == 1


def test_batches_of_one_runner_pool_only_when_they_share_every_identity(tmp_path: Path) -> None:
    a = agent(tmp_path / "a", named("a"))
    other_image = {"reference": "runner@sha256:" + "d" * 64, "imageId": "sha256:" + "d" * 64}
    odd = write_batch(
        tmp_path / "odd",
        receipt(runner=named("a"), batchId="odd", runnerImage=other_image["reference"]),
        lambda m: m.update(runner=named("a"), runnerImage=other_image),
    )
    with pytest.raises(ConfigError, match=r"cannot be pooled: .* in runnerImage"):
        matrix_of_batches([a.root, odd.root], CURRENT)
    # Another runner may bring its own image: a row of its own, not a refusal.
    own = write_batch(
        tmp_path / "own",
        receipt(runner=named("b"), batchId="own", runnerImage=other_image["reference"]),
        lambda m: m.update(runner=named("b"), runnerImage=other_image),
    )
    assert len(matrix_of_batches([a.root, own.root], CURRENT).rows) == 2
