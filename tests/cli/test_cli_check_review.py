"""The release-gate commands speak only through stdout JSON and exit codes:
check-agent-eval exits 0 qualified, 1 rejected, 2 on usage errors, and never writes;
review-agent-eval exits 1 with a one-line error (no traceback) when it refuses."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli.check import check_command
from agent_eval.cli.review import review_command
from tests.evidence_builders import attempt, receipt, reference_batch, run, write_batch
from tests.paths import EXAMPLE_SUITE


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_check_prints_the_decision_as_json_and_exits_one_when_rejected(tmp_path: Path) -> None:
    batch = reference_batch(tmp_path / "b")
    before = tree(tmp_path)
    result = CliRunner().invoke(
        check_command, ["--receipt", str(batch.receipt), "--archives", str(batch.archives)]
    )
    assert result.exit_code == 1
    decision = json.loads(result.stdout)
    assert decision["qualified"] is False
    assert any(r.startswith("not-self-test:") for r in decision["reasons"])
    assert tree(tmp_path) == before


def test_check_without_a_required_option_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("{}")
    result = CliRunner().invoke(check_command, ["--receipt", str(tmp_path / "r.json")])
    assert result.exit_code == 2
    assert "--archives" in result.output


def test_a_receipt_or_archives_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    """A release gate must tell a typo (2) from a rejection (1)."""
    (tmp_path / "a.json").write_text("{}")
    result = CliRunner().invoke(
        check_command,
        ["--receipt", str(tmp_path / "none.json"), "--archives", str(tmp_path / "a.json")],
    )
    assert (
        result.exit_code == 2 and "none.json" in result.output and not result.stdout.startswith("{")
    )


def test_a_check_outside_any_repository_is_a_usage_error_naming_project(tmp_path: Path) -> None:
    batch = reference_batch(tmp_path / "b")
    result = CliRunner().invoke(
        check_command,
        ["--receipt", str(batch.receipt), "--archives", str(batch.archives),
         "--project", str(tmp_path / "b")],
    )  # fmt: skip
    assert result.exit_code == 2 and "--project" in result.output, result.output


def test_an_unreadable_receipt_rejects_rather_than_crashing(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("not json")
    (tmp_path / "a.json").write_text("{}")
    result = CliRunner().invoke(
        check_command,
        ["--receipt", str(tmp_path / "r.json"), "--archives", str(tmp_path / "a.json")],
    )
    assert result.exit_code == 1
    reasons = json.loads(result.stdout)["reasons"]
    assert reasons[0].startswith("receipt-readable:")


def test_review_records_a_decision_and_prints_it(tmp_path: Path) -> None:
    runs = [run(r, [attempt(r, needs_review=True)]) for r in EXAMPLE_SUITE.run_ids()]
    batch = write_batch(tmp_path, receipt(runs))
    args = ["--receipt", str(batch.receipt), "--run", "forms-1", "--attempt", "1"]
    result = CliRunner().invoke(
        review_command, [*args, "--reviewer", "bob", "--decision", "accept"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["reviewer"] == "bob"
    saved = json.loads(batch.receipt.read_text())["reviewDecisions"]
    assert [(d["run"], d["decision"]) for d in saved] == [("forms-1", "accept")]


def test_review_refusal_is_one_line_on_stderr_with_exit_one(tmp_path: Path) -> None:
    runs = [run(r, [attempt(r, needs_review=True)]) for r in EXAMPLE_SUITE.run_ids()]
    batch = write_batch(tmp_path, receipt(runs))
    batch.solution("forms-1").write_text("changed\n")
    args = ["--receipt", str(batch.receipt), "--run", "forms-1", "--attempt", "1"]
    result = CliRunner().invoke(
        review_command, [*args, "--reviewer", "bob", "--decision", "accept"]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: forms-1 attempt 1: the saved solution is")
    assert "Traceback" not in result.output


def test_review_with_an_unknown_decision_is_a_usage_error(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    args = ["--receipt", str(batch.receipt), "--run", "forms-1", "--attempt", "1"]
    result = CliRunner().invoke(review_command, [*args, "--reviewer", "b", "--decision", "maybe"])
    assert result.exit_code == 2


def test_a_signal_during_reverification_ends_the_check_with_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM (a CI runner's stop) becomes no verdict and exit 128+15, after the
    verifications under way ended (re-verification's clean-up runs; the docker
    batch test shows no container outlives it), never a rejection or a traceback."""
    import agent_eval.verdict.reverify

    batch = reference_batch(tmp_path / "b")
    cleaned: list[str] = []

    def terminated(*args: object, **kwargs: object) -> list[str]:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises here, in the main thread
            return []
        finally:
            cleaned.append("verifications ended")

    monkeypatch.setattr(agent_eval.verdict.reverify, "reverify_files", terminated)
    result = CliRunner().invoke(
        check_command,
        ["--receipt", str(batch.receipt), "--archives", str(batch.archives), "--reverify"],
    )
    assert result.exit_code == 128 + signal.SIGTERM
    assert cleaned == ["verifications ended"]
    assert result.stdout == ""
    assert "stopped by SIGTERM while verifying again; no verdict" in result.stderr
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
