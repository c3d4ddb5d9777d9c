"""Whole batches against the real engine, through the eval-agent entry point.

oracle completes 18/18 with every digest verifying and is rejected only as
self-test (the mutant and the null runner's batches are in the matrix test of
test_several_runners_docker); a batch with a configuration,
image or isolation problem is not-run with a minimal receipt; an interrupted
batch leaves a truthful partial receipt that check-agent-eval rejects.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from agent_eval.engine import LABEL_BATCH, ContainerEngine, list_leftovers
from agent_eval.grading.web import parse_html
from agent_eval.models import Comparison, Receipt
from tests.batches import (
    BIN,
    check,
    eval_agent,
    project_copy,
    receipt_of,
    write_config,
)

pytestmark = pytest.mark.docker


@pytest.fixture
def evidence(tmp_path: Path) -> Path:
    return tmp_path / "evidence"


def test_an_oracle_batch_completes_and_is_rejected_only_as_self_test(
    engine: ContainerEngine, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    project = project_copy(tmp_path)
    code, line = eval_agent(project, write_config(engine, tmp_path / "r.json", "oracle"))
    assert code == 0
    assert (line["status"], line["firstSuccesses"], line["finalSuccesses"]) == ("completed", 18, 18)
    receipt_path = receipt_of(project, line)
    assert receipt_path.parent.parent == project / "evidence"
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    assert receipt.selfTest and len(receipt.runs) == 18
    assert all(r.attempts[0].analysisDigest for r in receipt.runs)
    code, decision = check(receipt_path)
    assert code == 1
    assert [reason.split(":")[0] for reason in decision["reasons"]] == ["not-self-test"]
    assert list_leftovers(engine, receipt.batchId) == []
    assert not (project / "evidence" / ".work").exists()
    # The reviewer's view is written beside the receipt, whatever the decision.
    assert "Rejected" in (receipt_path.parent / "report.html").read_text()

    # Verified again by the recorded image, every run gets its recorded verdict...
    code, decision = check(receipt_path, "--reverify")
    assert [reason.split(":")[0] for reason in decision["reasons"]] == ["not-self-test"]
    # ... and a verdict edited in the receipt is caught, naming the attempt and field.
    data = json.loads(receipt_path.read_text())
    assertion = data["runs"][2]["attempts"][0]["assertions"][0]
    assertion["passed"] = False
    receipt_path.write_text(json.dumps(data))
    code, decision = check(receipt_path, "--reverify")
    run_id = data["runs"][2]["runId"]
    assert any(
        r.startswith(f"reverify: {run_id} attempt 1: assertion {assertion['id']} was failed")
        for r in decision["reasons"]
    ), decision

    # A CI runner's SIGTERM mid-way: no verdict, and no verifier container outlives it.
    # Its work directory is in a temporary directory of this test's, so its containers
    # (each mounts from there) are told from other tests' re-verifications.
    (scratch := tmp_path / "reverify-tmp").mkdir()
    stopped = subprocess.Popen(
        [str(BIN / "check-agent-eval"), "--receipt", str(receipt_path),
         "--archives", str(receipt_path.parent / "archives.json"),
         "--project", str(project), "--reverify"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not reverify_containers(docker_client, scratch) and stopped.poll() is None:
            assert time.monotonic() < deadline, "no reverify container appeared"
            time.sleep(0.05)
        stopped.send_signal(signal.SIGTERM)
        out, err = stopped.communicate(timeout=240)
    finally:
        if stopped.poll() is None:
            stopped.kill()
            stopped.communicate()
    assert stopped.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "stopped by SIGTERM while verifying again; no verdict" in err
    assert out == ""
    assert reverify_containers(docker_client, scratch) == []


def reverify_containers(client: docker.DockerClient, scratch: Path) -> list[str]:
    """Containers of a re-verification (batch label reverify-…) that mount from *scratch*."""
    found = client.api.containers(all=True, filters={"label": [LABEL_BATCH]})
    return [
        str(c["Id"])
        for c in found
        if c["Labels"][LABEL_BATCH].startswith("reverify-")
        and any(Path(m.get("Source", "")).is_relative_to(scratch) for m in c.get("Mounts", []))
    ]


def test_a_repository_with_a_suite_of_its_own_runs_and_is_judged_by_it(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    """Its own task ids and count (two tasks, two runs each, 3/4 to qualify): its images
    built from its own recipes, the batch, the checker and the report all go by them."""
    project = project_copy(tmp_path, {"forms": "sign-up", "storage-hash": "content-address"})
    built = subprocess.run(
        [str(BIN / "agent-eval"), "images", "build", "--project", str(project)],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    config = write_config(engine, tmp_path / "r.json", "oracle", project=project)
    code, line = eval_agent(project, config)
    assert code == 0, line
    assert (line["status"], line["firstSuccesses"], line["finalSuccesses"]) == ("completed", 4, 4)
    receipt_path = receipt_of(project, line)
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    assert [r.runId for r in receipt.runs] == [
        "sign-up-1", "content-address-1", "sign-up-2", "content-address-2",
    ]  # fmt: skip
    assert receipt.suite is not None and receipt.suite.minFirstSuccesses == 3
    code, decision = check(receipt_path)
    assert code == 1
    assert [reason.split(":")[0] for reason in decision["reasons"]] == ["not-self-test"]
    page = (receipt_path.parent / "report.html").read_text()
    assert "4 / 4" in page and "sign-up-2" in page and "core-validation" not in page
    assert list_leftovers(engine, receipt.batchId) == []


@pytest.mark.parametrize(
    ("change", "env", "reason"),
    [
        ({"runnerImage": "sha256:" + "1" * 64}, {}, "runnerImage:"),
        ({"verifierImage": "agent-eval/verifier@sha256:" + "2" * 64}, {}, "verifierImage:"),
        ({}, {"DOCKER_HOST": "tcp://127.0.0.1:2375"}, "engine:"),
        ({"envAllowlist": ["GITHUB_TOKEN"]}, {}, "config:"),
        ({"envAllowlist": ["AGENT_EVAL_UNSET_SETTING"]}, {}, "unset variables"),
    ],
)
def test_a_batch_that_cannot_run_safely_is_not_run_with_its_reason(
    engine: ContainerEngine,
    tmp_path: Path,
    change: dict[str, Any],
    env: dict[str, str],
    reason: str,
) -> None:
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "r.json", "oracle")
    if change:
        data = json.loads(config.read_text())
        data.update(change)
        config.write_text(json.dumps(data))
    code, line = eval_agent(project, config, env)
    assert (code, line["status"]) == (2, "not-run")
    receipt = Receipt.model_validate_json(receipt_of(project, line).read_bytes())
    assert receipt.status == "not-run" and receipt.runs == []
    assert any(reason in r for r in receipt.reasons), receipt.reasons
    assert not (receipt_of(project, line).parent / "archives").exists()
    # No archives.json was written: checking it is a usage error naming the file (exit 2),
    # never a decision.
    run_dir = receipt_of(project, line).parent
    done = subprocess.run(
        [str(BIN / "check-agent-eval"), "--receipt", str(run_dir / "receipt.json"),
         "--archives", str(run_dir / "archives.json"), "--project", str(project)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "archives.json" in done.stderr and done.stdout == ""


def test_an_interrupted_batch_leaves_a_partial_receipt_that_is_rejected(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "r.json", "oracle")
    process = subprocess.Popen(
        [str(BIN / "eval-agent"), "--runner-config", str(config), "--project", str(project)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600
    receipt_path = None
    while time.monotonic() < deadline:
        found = list((project / "evidence").glob("*/receipt.json"))
        if found and json.loads(found[0].read_text())["runs"]:
            receipt_path = found[0]
            break
        time.sleep(0.5)
    assert receipt_path is not None, "no run finished in time"
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=300)
    assert process.returncode != 0
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    assert receipt.status == "interrupted" and 0 < len(receipt.runs) < 18
    assert list_leftovers(engine, receipt.batchId) == []
    code, decision = check(receipt_path)
    assert code == 1
    rules = {reason.split(":")[0] for reason in decision["reasons"]}
    assert {"batch-completed", "schedule"} <= rules


def compare(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "agent-eval"), "compare", *args, "--project", str(project)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


ADDED_FUNCTION = '''

def describe(value: object) -> str:
    """A one-line description of *value*."""
    return repr(value)
'''


def change_the_library(project: Path) -> None:
    """Add one public function to the library's top-level package, and commit it."""
    init = project / "packages" / "appkit-core" / "src" / "appkit" / "__init__.py"
    text = init.read_text().replace("__all__ = [\n", '__all__ = [\n    "describe",\n', 1)
    init.write_text(text + ADDED_FUNCTION)
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    identity |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    subprocess.run(
        ["git", "-C", str(project), "commit", "-q", "-a", "-m", "describe"],
        check=True, capture_output=True, timeout=60, env={**os.environ, **identity},
    )  # fmt: skip


def test_did_my_change_help_oracle_against_mutant_and_a_measurement_batch(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    """The comparison of real batches: a measurement batch (eval-agent --repetitions 5, 30
    runs, of a library with one public function more) is refused by the checker as such and
    compares like any other; oracle against oracle finds no difference, says what it could
    have found and names the added function, from catalogs generated again from the saved
    wheels; oracle against mutant is refused for the runner that differs, then, allowed,
    finds first attempts worse, task by task with intervals, on the page too; the summary
    of the measurement batch names the added function and holds none of its solutions, logs
    or paths."""
    project = project_copy(tmp_path)
    oracle = write_config(engine, tmp_path / "oracle.json", "oracle")
    code, line = eval_agent(project, oracle)
    assert code == 0
    baseline = receipt_of(project, line).parent
    change_the_library(project)
    code, line = eval_agent(project, oracle, None, "--repetitions", "5")
    assert code == 0 and line["firstSuccesses"] == 30, line
    measured = receipt_of(project, line)
    receipt = Receipt.model_validate_json(measured.read_bytes())
    assert receipt.repetitions == 5 and len(receipt.runs) == 30
    code, decision = check(measured)
    assert code == 1
    assert sorted(r.split(":")[0] for r in decision["reasons"]) == [
        "measurement", "not-self-test"
    ], decision  # fmt: skip

    same = compare(project, str(baseline), str(measured.parent), "--json", str(tmp_path / "s.json"))
    assert same.returncode == 0, same.stderr
    first = same.stdout.splitlines()[0]
    assert first.startswith("no detectable difference: first attempt, all tasks: 18/18 -> 30/30")
    assert "could detect only a change of about" in first
    assert "  public symbols: 1 added, 0 removed, 0 changed" in same.stdout
    assert "    + appkit.describe  function (value: object) -> str" in same.stdout
    saved = Comparison.model_validate_json((tmp_path / "s.json").read_bytes())
    assert saved.api.status == "compared"
    assert {d.field for d in saved.differences} == {"archives", "apiCatalogDigest", "sourceCommit"}

    code, line = eval_agent(project, write_config(engine, tmp_path / "mutant.json", "mutant"))
    mutant = receipt_of(project, line).parent
    refused = compare(project, str(baseline), str(mutant))
    assert refused.returncode == 1 and "--allow-different runner" in refused.stderr
    page, data = tmp_path / "compare.html", tmp_path / "compare.json"
    allowed = compare(
        project, str(baseline), str(mutant), "--allow-different", "runner",
        "--html", str(page), "--json", str(data),
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    lines = allowed.stdout.splitlines()
    assert lines[0].startswith("NOTE: the sides also differ in runner")
    # The mutant's unsafe attempts are said before any rate, as the safety rule comes first.
    assert lines[1].startswith("SAFETY: more unsafe behaviour in the candidate: unsafe attempts")
    assert lines[2].startswith("worse: first attempt, all tasks: 18/18 -> 0/18")
    assert any(line.startswith("  runner: {'name': 'agent-eval-oracle'") for line in lines)
    result = Comparison.model_validate_json(data.read_bytes())
    assert "runner" in result.unexpected and result.first.verdict == "worse"
    assert len(result.tasks) == 6
    for task in result.tasks:
        assert (task.first.baselineSuccesses, task.first.candidateSuccesses) == (3, 0)
        assert task.first.low is not None and task.first.high is not None
        assert task.first.low <= task.first.difference <= task.first.high
    doc = parse_html(page.read_text())
    assert doc.by_id("beyond-library") is not None
    shown = [row.attrs["data-task"] for row in doc.find_all("tr", class_="task")]
    assert shown == [t.taskId for t in result.tasks]
    assert all("95 % interval" in row.text for row in doc.find_all("tr", class_="task"))

    summary = subprocess.run(
        [str(BIN / "agent-eval"), "summary", str(measured.parent), "--compare", str(baseline),
         "--project", str(project)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert summary.returncode == 0, summary.stderr
    assert "- public symbols added, removed or changed: appkit.describe (added)" in summary.stdout
    assert str(tmp_path) not in summary.stdout and "/tmp/" not in summary.stdout
    runs = measured.parent / "runs"
    kept = [p for p in runs.rglob("*") if p.is_file() and p.suffix != ".json"]
    assert kept
    for path in kept:
        for text_line in path.read_text(errors="replace").splitlines():
            if len(text_line.strip()) >= 24:
                assert text_line.strip() not in summary.stdout, path
