"""Commands name a batch as a person does: its run directory, a unique prefix of its id,
or latest; check-agent-eval reads as a verdict on a terminal and writes JUnit XML; list
and show need no path typed. A name that finds nothing is a usage error (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import xmlschema
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.cli.check import check_command
from agent_eval.cli.review import review_command
from tests.evidence_builders import attempt, receipt, reference_batch, run, write_batch
from tests.paths import EXAMPLE_SUITE, REPO
from tests.verdict.test_chain import first_batch, resumed

OLD = "20261201T100000Z-aaaaaaaa-1111-4111-8111-111111111111"
NEW = "20261202T100000Z-bbbbbbbb-2222-4222-8222-222222222222"
SCHEMA = xmlschema.XMLSchema(REPO / "tests" / "data" / "junit" / "junit.xsd")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.agent-eval]\nevidence = "ev"\n')
    reference_batch(root / "ev" / OLD)
    runs = [run(r) for r in EXAMPLE_SUITE.run_ids()]
    runs = [run(r["runId"], [attempt(r["runId"], needs_review=True)]) for r in runs]
    write_batch(root / "ev" / NEW, receipt(runs))
    return root


def test_check_latest_writes_junit_and_words_and_exits_as_before(
    project: Path, tmp_path: Path
) -> None:
    out = tmp_path / "results.xml"
    result = CliRunner().invoke(
        check_command,
        ["latest", "--project", str(project), "--junit", str(out), "--format", "text"],
    )
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("REJECTED") and not result.stdout.startswith("{")
    assert all(line.startswith("  ") for line in lines[1:])
    SCHEMA.validate(str(out))


def test_check_by_id_prefix_prints_the_json_line_when_not_on_a_terminal(project: Path) -> None:
    result = CliRunner().invoke(check_command, ["aaaa", "--project", str(project)])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["qualified"] is False
    assert len(result.stdout.splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["zzzz"],
        ["2026120"],  # both batches
        [],
        ["latest", "--receipt", "x.json"],
        ["latest", "--junit", "/nonexistent-dir/out.xml"],
    ],
)
def test_a_name_that_finds_no_single_batch_is_a_usage_error(project: Path, args: list[str]) -> None:
    result = CliRunner().invoke(check_command, [*args, "--project", str(project)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not result.stdout.startswith("{")


def test_list_and_show_find_the_batches_without_a_path(project: Path) -> None:
    listed = CliRunner().invoke(main, ["list", "--project", str(project), "--json"])
    assert listed.exit_code == 0, listed.output
    batches = json.loads(listed.stdout)["batches"]
    assert [b["batchId"] for b in batches] == [NEW, OLD]
    shown = CliRunner().invoke(main, ["show", "latest", "--project", str(project)])
    assert shown.exit_code == 1, shown.output
    assert shown.stdout.startswith("REJECTED")
    assert NEW in shown.stdout and "report: not written yet" in shown.stdout


def test_report_and_review_take_a_batch_name(project: Path) -> None:
    written = CliRunner().invoke(main, ["report", "bbbb", "--project", str(project)])
    assert written.exit_code == 0, written.output
    assert (project / "ev" / NEW / "report.html").is_file()
    reviewed = CliRunner().invoke(
        review_command,
        ["latest", "--project", str(project), "--run", "forms-2", "--attempt", "1",
         "--reviewer", "R", "--decision", "accept"],
    )  # fmt: skip
    assert reviewed.exit_code == 0, reviewed.output
    receipt = json.loads((project / "ev" / NEW / "receipt.json").read_text())
    assert receipt["reviewDecisions"][0]["run"] == "forms-2"
    args = ["--run", "forms-2", "--attempt", "1", "--reviewer", "R", "--decision", "accept"]
    neither = CliRunner().invoke(review_command, args)
    assert neither.exit_code == 2


def test_a_resumed_batch_is_listed_and_written_as_junit_with_every_run_decided_on(
    project: Path, tmp_path: Path
) -> None:
    root = project
    first = first_batch(root / "ev")
    last = resumed(root / "ev", first)
    out = tmp_path / "results.xml"
    checked = CliRunner().invoke(
        check_command, [str(last.root), "--project", str(root), "--junit", str(out)]
    )
    assert checked.exit_code in (0, 1), checked.output
    SCHEMA.validate(str(out))
    suites = SCHEMA.to_dict(str(out))["testsuite"]
    names = [case["@name"] for suite in suites for case in suite.get("testcase", [])]
    # Nine runs of the resumed batch and nine of the batch it resumed, then the decision.
    assert sorted(n for n in names if n in EXAMPLE_SUITE.run_ids()) == sorted(
        EXAMPLE_SUITE.run_ids()
    ), names
    shown = CliRunner().invoke(main, ["show", str(last.root), "--project", str(root)])
    assert "first 18/18, final 18/18" in shown.stdout, shown.output
