"""``agent-eval init --ci``: a CI job a maintainer copies, whose steps are exactly what
the tests run: a batch, its check with JUnit XML, the report and summary kept as
artifacts whatever happened, the job failing when the batch does not qualify."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import xmlschema
import yaml

from agent_eval.adoption.ci import (
    CHECK,
    INSTALL,
    JUNIT,
    REPORT,
    REPORTS,
    STEPS,
    SUMMARY,
    ci_files,
    write_ci,
)
from agent_eval.errors import ConfigError
from tests.batches import BIN, git, project_copy
from tests.paths import REPO

SCHEMA = REPO / "tests" / "data" / "junit" / "junit.xsd"


def github() -> dict[str, Any]:
    (text,) = ci_files("github").values()
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def test_the_github_job_pins_its_actions_and_keeps_its_evidence_whatever_happened() -> None:
    job = github()["jobs"]["agent-eval"]
    uses = [step["uses"] for step in job["steps"] if "uses" in step]
    assert uses and all(re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", u) for u in uses)
    runs = [(s["name"], s["run"].rstrip("\n")) for s in job["steps"] if "run" in s]
    assert runs[: len(STEPS)] == list(STEPS)
    report, upload = job["steps"][-2:]
    assert report["if"] == upload["if"] == "always()"
    assert report["run"].rstrip("\n") == REPORTS
    assert upload["with"]["path"].split() == [JUNIT, REPORT, SUMMARY]
    assert github()["permissions"] == {"contents": "read"}


def test_the_gitlab_job_runs_the_same_steps_and_reports_junit() -> None:
    (text,) = ci_files("gitlab").values()
    job = yaml.safe_load(text)["agent-eval"]
    assert [s.rstrip("\n") for s in job["script"]] == [script for _, script in STEPS]
    assert job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"] == JUNIT


def test_init_ci_never_overwrites_and_says_when_nothing_changed(tmp_path: Path) -> None:
    first = write_ci(tmp_path, "github")
    assert [p.relative_to(tmp_path).as_posix() for p in first.written] == [
        ".github/workflows/agent-eval.yml"
    ]
    again = write_ci(tmp_path, "github")
    assert (again.written, len(again.unchanged)) == ((), 1)
    (tmp_path / ".gitlab").mkdir()
    (tmp_path / ".gitlab" / "agent-eval.yml").write_text("mine\n")
    with pytest.raises(ConfigError, match=r"\.gitlab/agent-eval\.yml"):
        write_ci(tmp_path, "gitlab")
    assert (tmp_path / ".gitlab" / "agent-eval.yml").read_text() == "mine\n"
    (tmp_path / ".gitlab" / "agent-eval.yml").unlink()
    (tmp_path / ".gitlab" / "agent-eval.yml").mkdir()
    with pytest.raises(ConfigError, match="not a regular file"):
        write_ci(tmp_path, "gitlab")


@pytest.mark.docker
@pytest.mark.slow
def test_the_github_jobs_steps_run_as_written_and_fail_the_job_on_rejection(
    tmp_path: Path, base_image: str
) -> None:
    """Every step but the install (it would reach the package index; this test runs the
    installed agent-eval instead) runs as the workflow spells it, in a repository of
    its own: the oracle's batch completes, its check fails the job as the expected
    self-test rejection, and the report step leaves the three artifacts."""
    project = project_copy(tmp_path, {"core-validation": "core-validation"}, repetitions=2)
    # As init leaves an adopter's repository: the default evidence directory ignored.
    with (project / ".gitignore").open("a") as ignore:
        ignore.write(".verification/\n")
    git(project, "commit", "-q", "-am", "ignore the evidence")
    job = github()["jobs"]["agent-eval"]
    env = {**os.environ, **job["env"], "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    results = {}
    for step in job["steps"]:
        if "run" not in step:
            continue
        if step["run"].rstrip("\n") == INSTALL:
            continue
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", step["run"]],
            cwd=project, env=env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        results[step["name"]] = done
        if done.returncode != 0 and step.get("if") != "always()" and step["run"].rstrip() != CHECK:
            pytest.fail(f"step {step['name']!r} failed: {done.stdout}\n{done.stderr}")
    checked = results["Check the batch"]
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.startswith("REJECTED (expected"), checked.stdout
    assert results["Report"].returncode == 0, results["Report"].stderr
    xmlschema.XMLSchema(SCHEMA).validate(str(project / JUNIT))
    assert (project / REPORT).read_bytes().startswith(b"<!DOCTYPE html>")
    assert "core-validation" in (project / SUMMARY).read_text()
