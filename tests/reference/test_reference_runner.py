"""The reference runners speak the runner protocol exactly like a real one: oracle writes
the correct fixture, mutant a failing one first, null nothing; every misbehaviour the
harness must survive is available on purpose."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_eval.batch.response import judge_response
from agent_eval.models import ModelIdentity, RunnerIdentity, RunnerRequest
from agent_eval.reference.runner import MODEL, identity
from tests.paths import REPO

SCRIPT = REPO / "agent_eval" / "reference" / "runner.py"


def request(tmp_path: Path, attempt: int = 1) -> RunnerRequest:
    out = tmp_path / f"out{attempt}"
    out.mkdir()
    feedback = None
    if attempt == 2:
        feedback = {"schemaVersion": 1, "failedAssertionIds": ["x"], "diagnostics": []}
    return RunnerRequest.model_validate(
        {
            "schemaVersion": 1, "runId": "forms-1", "taskId": "forms", "taskText": "t",
            "consumerDir": str(tmp_path / "consumer"), "outputDir": str(out),
            "allowedOutputPaths": ["solution.py"], "attempt": attempt, "timeBudgetMs": 1000,
            "repairFeedback": feedback,
        }
    )  # fmt: skip


def run(mode: str, req: RunnerRequest) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), mode, "--fixtures", str(REPO / "fixtures")],
        input=req.model_dump_json().encode(),
        capture_output=True,
        timeout=30,
        check=False,
    )


def verdict(mode: str, done: subprocess.CompletedProcess[bytes], req: RunnerRequest):  # type: ignore[no-untyped-def]
    return judge_response(
        done.stdout,
        truncated=False,
        request=req,
        runner=RunnerIdentity.model_validate(identity(mode)),
        model=ModelIdentity.model_validate(MODEL),
    )


def test_the_oracle_writes_the_correct_fixture_and_answers_validly(tmp_path: Path) -> None:
    req = request(tmp_path)
    done = run("oracle", req)
    assert verdict("oracle", done, req).problem is None
    written = (Path(req.outputDir) / "solution.py").read_bytes()
    assert written == (REPO / "fixtures" / "forms" / "correct" / "solution.py").read_bytes()


def test_the_mutant_submits_a_negative_first_and_the_correct_solution_on_repair(
    tmp_path: Path,
) -> None:
    first, second = request(tmp_path, 1), request(tmp_path, 2)
    run("mutant", first)
    run("mutant", second)
    correct = (REPO / "fixtures" / "forms" / "correct" / "solution.py").read_bytes()
    assert (Path(first.outputDir) / "solution.py").read_bytes() != correct
    assert (Path(second.outputDir) / "solution.py").read_bytes() == correct


def test_the_null_runner_completes_without_writing(tmp_path: Path) -> None:
    req = request(tmp_path)
    assert verdict("null", run("null", req), req).problem is None
    assert list(Path(req.outputDir).iterdir()) == []


@pytest.mark.parametrize(
    ("how", "problem"),
    [
        ("silent", "invalid-response"),
        ("two-objects", "invalid-response"),
        ("trailing-text", "invalid-response"),
        ("wrong-ids", "invalid-response"),
        ("oversized", "invalid-response"),
        ("early-exit", "invalid-response"),
        ("score", "invalid-response"),
        ("wrong-runner", "identity-mismatch"),
        ("wrong-model", "identity-mismatch"),
    ],
)
def test_each_protocol_misbehaviour_is_refused(tmp_path: Path, how: str, problem: str) -> None:
    req = request(tmp_path)
    mode = "misbehave:" + how
    assert verdict(mode, run(mode, req), req).problem == problem


@pytest.mark.parametrize("mode", ["misbehave:foo", "misbehave", "oracle:x", "nobody"])
def test_an_unknown_reference_runner_mode_is_refused_naming_the_known_ones(mode: str) -> None:
    from agent_eval.engine.fake import FakeEngine
    from agent_eval.errors import ConfigError
    from agent_eval.reference.config import reference_config
    from tests.paths import REPO

    with pytest.raises(ConfigError, match=r"unknown (reference runner|misbehaviour)"):
        reference_config(FakeEngine(), mode, project_root=REPO, runtime_path="/nowhere.sock")
