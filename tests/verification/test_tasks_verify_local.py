"""With the local verifier, every fixture of the repository gets exactly the verdict its
expect.json declares, and a fixture whose declaration is wrong makes the command fail.

These run the real static analysis (mypy) and the real verifier subprocess on
every fixture, so they take about a minute.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from tests.paths import REPO

pytestmark = pytest.mark.slow


def test_every_fixture_of_the_repository_matches_its_declaration() -> None:
    result = CliRunner().invoke(
        main, ["tasks", "verify", "--verifier", "local", "--project", str(REPO)]
    )
    assert result.exit_code == 0, result.output
    assert "MISMATCH" not in result.output
    assert "fixture cases with the local verifier" in result.output
    assert result.output.rstrip().endswith("all match")


def test_a_fixture_that_fails_for_another_reason_than_declared_fails_the_command(
    tmp_path: Path,
) -> None:
    for name in ("tasks", "graders", "packages"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    # Only the reference solutions, and one negative that declares the wrong assertion.
    for case in sorted((REPO / "fixtures").glob("*/*")):
        keep = case.name == "correct" or case.as_posix().endswith("forms/greets-username")
        if keep:
            shutil.copytree(case, tmp_path / "fixtures" / case.parent.name / case.name)
    expect = tmp_path / "fixtures" / "forms" / "greets-username" / "expect.json"
    data = json.loads(expect.read_text(encoding="utf-8"))
    data["failedAssertions"] = ["typed-values-parsed"]
    expect.write_text(json.dumps(data), encoding="utf-8")

    result = CliRunner().invoke(
        main, ["tasks", "verify", "--verifier", "local", "--project", str(tmp_path)]
    )
    assert result.exit_code == 1, result.output
    rows = {tuple(line.split()[:2]): line for line in result.output.splitlines() if line}
    assert rows[("forms", "greets-username")].endswith("MISMATCH")
    assert rows[("forms", "correct")].endswith("OK")
    assert rows[("forms", "(coverage)")].endswith("MISMATCH")  # the other negatives are gone
    assert (
        "forms/greets-username: assertions: not failed ['typed-values-parsed'], "
        "failed unexpectedly ['valid-submission-accepted']" in result.output
    )
