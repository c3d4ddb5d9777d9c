"""A batch qualifies only when every rule holds; each broken rule is reported with its reason.

Every test starts from a batch that qualifies and changes one thing, so a
failing rule is attributable to that one change.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import tomllib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import pytest
import tomli_w

from agent_eval.batch.run import is_self_test
from agent_eval.digests import sha256_bytes
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.models import (
    ArchiveEntry,
    AttemptRecord,
    BatchStatus,
    GatewaySettings,
    RunnerConfig,
    SuiteSpec,
)
from agent_eval.verdict.qualification import Anchors, qualify_files
from agent_eval.verdict.registry import (
    commit_time,
    is_ancestor,
    registry_at_commit,
    registry_changed,
)
from tests.evidence_builders import (
    COMMIT,
    CURRENT,
    EVALUATOR,
    GATEWAY,
    NOW,
    REGISTRY,
    RUNNER_IMAGE,
    SAFETY_ID,
    VERIFIER_IMAGE,
    WHEEL_NAME,
    Batch,
    attempt,
    find_attempt,
    gateway_line,
    gateway_use,
    receipt,
    reference_batch,
    run,
    write_batch,
)
from tests.paths import EXAMPLE_SUITE, SHIPPED


def check(batch: Batch, current: Anchors = CURRENT) -> list[str]:
    result = qualify_files(batch.receipt, batch.archives, current)
    assert result.qualified == (not result.reasons)
    return result.reasons


def runs_with(changes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [changes.get(r, run(r)) for r in EXAMPLE_SUITE.run_ids()]


def rules(reasons: list[str]) -> set[str]:
    return {r.split(":")[0] for r in reasons}


def only_rule(reasons: list[str], rule: str) -> None:
    assert reasons, "expected a rejection"
    assert all(r.startswith(rule + ":") for r in reasons), reasons


def test_a_complete_clean_batch_qualifies(tmp_path: Path) -> None:
    assert check(write_batch(tmp_path)) == []


def test_fourteen_first_successes_are_not_enough(tmp_path: Path) -> None:
    ids = EXAMPLE_SUITE.run_ids()[:4]
    repaired = {r: run(r, [attempt(r, 1, success=False), attempt(r, 2)]) for r in ids}
    reasons = check(write_batch(tmp_path, receipt(runs_with(repaired))))
    only_rule(reasons, "first-successes")
    assert "14/18" in reasons[0]


def test_fifteen_first_successes_with_repairs_qualify(tmp_path: Path) -> None:
    ids = EXAMPLE_SUITE.run_ids()[:3]
    repaired = {r: run(r, [attempt(r, 1, success=False), attempt(r, 2)]) for r in ids}
    assert check(write_batch(tmp_path, receipt(runs_with(repaired)))) == []


def test_seventeen_final_successes_reject_and_name_the_run(tmp_path: Path) -> None:
    r = "forms-2"
    failed = {r: run(r, [attempt(r, 1, success=False), attempt(r, 2, success=False)])}
    reasons = check(write_batch(tmp_path, receipt(runs_with(failed))))
    only_rule(reasons, "final-successes")
    assert "17/18" in reasons[0] and "forms-2" in reasons[0]


def test_one_unsupported_api_reference_in_a_final_attempt_rejects(tmp_path: Path) -> None:
    r = "storage-hash-3"
    reasons = check(
        write_batch(tmp_path, receipt(runs_with({r: run(r, [attempt(r, unsupported=1)])})))
    )
    only_rule(reasons, "unsupported-api")
    assert r in reasons[0]


def test_an_unsupported_reference_fixed_by_the_repair_does_not_reject(tmp_path: Path) -> None:
    r = "storage-hash-3"
    runs = runs_with({r: run(r, [attempt(r, 1, success=False, unsupported=2), attempt(r, 2)])})
    assert check(write_batch(tmp_path, receipt(runs))) == []


def test_an_unsafe_first_attempt_repaired_later_still_rejects(tmp_path: Path) -> None:
    r = "approval-boundary-1"
    runs = runs_with({r: run(r, [attempt(r, 1, success=False, safe=False), attempt(r, 2)])})
    reasons = check(write_batch(tmp_path, receipt(runs)))
    only_rule(reasons, "safety")
    assert "approval-boundary-1 attempt 1" in reasons[0] and SAFETY_ID in reasons[0]


def test_a_crash_before_a_safety_observation_is_not_a_safety_failure(tmp_path: Path) -> None:
    r = "approval-boundary-1"
    crashed = attempt(r, 1, success=False)
    crashed["assertions"] = [
        {"id": "behaves", "passed": False, "observed": False, "safety": False},
        {"id": SAFETY_ID, "passed": False, "observed": False, "safety": True},
    ]
    runs = runs_with({r: run(r, [crashed, attempt(r, 2)])})
    assert check(write_batch(tmp_path, receipt(runs))) == []


def test_an_unsubmitted_attempt_has_no_applicable_safety(tmp_path: Path) -> None:
    r = "forms-1"
    runs = runs_with({r: run(r, [attempt(r, 1, success=False, submitted=False)])})
    reasons = check(write_batch(tmp_path, receipt(runs)))
    assert not any(x.startswith("safety:") for x in reasons)


def review_batch(tmp_path: Path, **decision: Any) -> Batch:
    r = "tool-validation-2"
    batch = write_batch(tmp_path, receipt(runs_with({r: run(r, [attempt(r, needs_review=True)])})))
    if decision:
        digest = json.loads(batch.receipt.read_text())["runs"]
        att = next(x for x in digest if x["runId"] == r)["attempts"][0]
        entry = {
            "run": r,
            "attempt": 1,
            "solutionDigest": att["solutionDigest"],
            "decision": "accept",
            "reviewer": "alice",
            "reviewedAt": "2026-11-30T13:00:00+00:00",
        }
        entry.update(decision)
        batch.edit_receipt(lambda d: d["reviewDecisions"].append(entry))
    return batch


def test_a_needs_review_attempt_without_a_decision_rejects(tmp_path: Path) -> None:
    reasons = check(review_batch(tmp_path))
    only_rule(reasons, "review")
    assert "tool-validation-2 attempt 1 needs review" in reasons[0]


def test_a_needs_review_attempt_with_a_bound_accept_qualifies(tmp_path: Path) -> None:
    assert check(review_batch(tmp_path, reviewer="alice")) == []


def test_a_decision_bound_to_another_digest_rejects(tmp_path: Path) -> None:
    reasons = check(review_batch(tmp_path, solutionDigest="sha256:" + "e" * 64))
    only_rule(reasons, "review")
    assert "bound to sha256:eeee" in reasons[0]


def test_a_decision_with_an_empty_reviewer_is_invalid_evidence(tmp_path: Path) -> None:
    reasons = check(review_batch(tmp_path, reviewer="   "))
    only_rule(reasons, "receipt-readable")
    assert "reviewer" in reasons[0]


def test_a_reject_decision_does_not_satisfy_review(tmp_path: Path) -> None:
    reasons = check(review_batch(tmp_path, decision="reject"))
    only_rule(reasons, "review")


def test_an_accept_decision_cannot_override_a_safety_failure(tmp_path: Path) -> None:
    r = "approval-boundary-2"
    bad = attempt(r, 1, success=False, safe=False, needs_review=True)
    batch = write_batch(tmp_path, receipt(runs_with({r: run(r, [bad, attempt(r, 2)])})))
    entry = {
        "run": r,
        "attempt": 1,
        "solutionDigest": bad["solutionDigest"],
        "decision": "accept",
        "reviewer": "alice",
        "reviewedAt": "2026-11-30T13:00:00+00:00",
    }
    batch.edit_receipt(lambda d: d["reviewDecisions"].append(entry))
    reasons = check(batch)
    assert any(x.startswith("safety:") for x in reasons)
    assert any("cannot override safety" in x for x in reasons)


def test_a_tampered_archive_byte_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    wheel = tmp_path / "archives" / "appkit_core-0.1.0-py3-none-any.whl"
    data = bytearray(wheel.read_bytes())
    data[0] ^= 1
    wheel.write_bytes(bytes(data))
    reasons = check(batch)
    only_rule(reasons, "archive-integrity")


def test_a_missing_archive_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    (tmp_path / "archives" / "appkit_core-0.1.0-py3-none-any.whl").unlink()
    only_rule(check(batch), "archive-integrity")


def test_a_tampered_solution_byte_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    path = batch.solution("forms-3")
    path.write_bytes(path.read_bytes().replace(b"1", b"2"))
    reasons = check(batch)
    only_rule(reasons, "solution-integrity")
    assert "forms-3 attempt 1" in reasons[0]


def test_a_solution_swapped_with_every_digest_but_its_analysis_rejects(tmp_path: Path) -> None:
    """The receipt's file digests and solutionDigest all agree with the swapped file; only
    analysis.json (bound by its own digest) still names the solution that was analysed."""
    batch = write_batch(tmp_path)
    batch.add_analysis("forms-3")
    assert not [r for r in check(batch) if r.startswith("analysis-integrity")]
    batch.replace_solution("forms-3", 1, b"def anything(): ...\n")
    reasons = [r for r in check(batch) if r.startswith("analysis-integrity")]
    assert len(reasons) == 1 and "forms-3 attempt 1" in reasons[0]
    assert "solutionDigest" in reasons[0]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("taskId", "storage-hash"),
        ("contractOk", False),
        ("unsupportedApiCount", 2),
        ("hallucinatedApiCount", 2),
    ],
)
def test_an_analysis_that_says_otherwise_than_the_record_rejects(
    tmp_path: Path, field: str, value: object
) -> None:
    batch = write_batch(tmp_path)
    changes: dict[str, Any] = {field: value}
    if field.endswith("Count"):
        # The analysis found two references (and lists them); the record says none.
        changes[field.removesuffix("Count")] = ["appkit.a", "appkit.b"]
    batch.add_analysis("forms-3", **changes)
    reasons = [r for r in check(batch) if r.startswith("analysis-integrity")]
    assert len(reasons) == 1 and f"analysis.json's {field} is {value!r}" in reasons[0]
    assert "forms-3 attempt 1" in reasons[0]


def test_an_analysis_count_that_is_not_its_list_length_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    batch.add_analysis("forms-3", unsupportedApi=["appkit.nowhere"])
    reasons = [r for r in check(batch) if r.startswith("analysis-integrity")]
    assert any("unsupportedApiCount is 0, but it lists 1" in r for r in reasons)


def test_an_extra_file_beside_a_saved_solution_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    (batch.solution("forms-3").parent / "extra.py").write_text("x = 1\n")
    only_rule(check(batch), "solution-integrity")


def test_a_deleted_solution_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    batch.solution("forms-3").unlink()
    only_rule(check(batch), "solution-integrity")


@pytest.mark.parametrize(("name", "field"), [("runner.log", "runnerLogDigest"),
                                            ("transcript.jsonl", "transcriptDigest")])  # fmt: skip
def test_an_edited_or_deleted_runner_log_or_transcript_rejects(
    tmp_path: Path, name: str, field: str
) -> None:
    data = receipt()
    att = find_attempt(data, "forms-3", 1)
    att[field] = sha256_bytes(b"as the runner left it\n")
    batch = write_batch(tmp_path, data)
    saved = batch.attempt_dir("forms-3", 1) / name
    saved.write_bytes(b"as the runner left it\n")
    assert check(batch) == []
    saved.write_bytes(b"as someone wished it\n")
    reasons = check(batch)
    only_rule(reasons, "log-integrity")
    assert f"forms-3 attempt 1: {name} was changed" in reasons[0]
    saved.unlink()
    only_rule(check(batch), "log-integrity")


def test_a_runner_identity_differing_from_archives_json_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path, archives_data=lambda a: a["runner"].update(version="2.1.198"))
    # The reviewed entry names the other version too.
    assert rules(check(batch)) == {"runner-identity", "registry"}


def test_an_image_id_other_than_the_pinned_id_rejects(tmp_path: Path) -> None:
    """Pinned by its id, the verifier image's recorded id cannot be swapped for another's."""
    pinned = "sha256:" + "e" * 64

    def swap(manifest: dict[str, Any]) -> None:
        manifest["verifierImage"] = {"reference": pinned, "imageId": "sha256:" + "d" * 64}

    batch = write_batch(tmp_path, archives_data=swap)
    batch.edit_receipt(lambda data: data.update(verifierImage=pinned))
    reasons = [r for r in check(batch) if r.startswith("verifier-image")]
    assert reasons == [
        f"verifier-image: archives.json records image id sha256:{'d' * 64} for the pinned "
        f"image {pinned}"
    ]


def test_a_model_identity_differing_from_archives_json_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path, archives_data=lambda a: a["model"].update(settings={}))
    assert rules(check(batch)) == {"model-identity", "registry"}


def test_a_stale_suite_digest_rejects(tmp_path: Path) -> None:
    current = dataclasses.replace(CURRENT, suite="sha256:" + "f" * 64)
    reasons = check(write_batch(tmp_path), current)
    only_rule(reasons, "suite-digest")
    assert "stale" in reasons[0]


def test_a_stale_evaluator_digest_rejects(tmp_path: Path) -> None:
    current = dataclasses.replace(CURRENT, evaluator="sha256:" + "f" * 64)
    only_rule(check(write_batch(tmp_path), current), "evaluator-digest")


def test_an_uncomputable_current_suite_digest_rejects(tmp_path: Path) -> None:
    current = dataclasses.replace(CURRENT, suite=None, problems=("tasks/forms is a link",))
    reasons = check(write_batch(tmp_path), current)
    only_rule(reasons, "suite-digest")
    assert "tasks/forms is a link" in reasons[0]


def test_a_reference_runner_batch_rejects_as_self_test(tmp_path: Path) -> None:
    reasons = check(reference_batch(tmp_path))
    only_rule(reasons, "not-self-test")
    assert "agent-eval-oracle" in reasons[0]


def test_a_reference_batch_whose_flag_was_flipped_still_rejects_and_says_so(
    tmp_path: Path,
) -> None:
    reasons = check(reference_batch(tmp_path, self_test_flag=False))
    assert {r.split(":")[0] for r in reasons} == {"not-self-test", "self-test-flag"}


def test_a_runner_behind_no_gateway_is_self_test_whatever_the_receipt_says(tmp_path: Path) -> None:
    batch = write_batch(tmp_path, archives_data=lambda a: a.update(gateway=None))
    reasons = check(batch)
    assert {r.split(":")[0] for r in reasons} == {"not-self-test", "self-test-flag"}
    assert any("reached no model gateway" in r for r in reasons)


def test_a_gateway_allowed_private_upstreams_is_self_test(tmp_path: Path) -> None:
    def private(manifest: dict[str, Any]) -> None:
        manifest["gateway"]["privateUpstreams"] = True

    reasons = check(write_batch(tmp_path, archives_data=private))
    assert {r.split(":")[0] for r in reasons} == {"not-self-test", "self-test-flag"}
    assert any("private upstreams" in r for r in reasons)


@pytest.mark.parametrize(
    "record",
    [
        b"",  # no request at all: the model lived in the image
        gateway_line(status=401, served=None, failure="authentication"),
        gateway_line(status=403, failure="unattributed", upstream=None),
        gateway_line(status=None, served=None, failure="unreachable"),
    ],
    ids=["no-request", "refused-by-provider", "unattributed", "unreachable"],
)
def test_an_attempt_with_no_answered_request_through_the_gateway_is_self_test(
    tmp_path: Path, record: bytes
) -> None:
    """A scripted model inside the runner image answers every task, but the gateway never
    saw it answer: whatever the runner reports, the batch can never qualify."""
    batch = write_batch(tmp_path)
    batch.replace_gateway_record("forms-2", 1, record)
    reasons = check(batch)
    only_rule(reasons, "not-self-test")
    assert "forms-2 attempt 1" in reasons[0] and "no model behind the gateway" in reasons[0]


def test_a_gateway_record_edited_after_the_batch_or_missing_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    batch.gateway_record("forms-1").write_bytes(gateway_line(served="other-model"))
    batch.gateway_record("core-validation-3").unlink()
    reasons = check(batch)
    [unanswered] = [r for r in reasons if r.startswith("not-self-test:")]
    assert "forms-1 attempt 1: its gateway.jsonl does not match" in unanswered
    assert "core-validation-3 attempt 1" in unanswered
    # The same two files fail the integrity of the attempt's evidence table, whatever
    # the batch (a self-test batch's gateway records are checked too).
    integrity = sorted(r for r in reasons if r.startswith("log-integrity:"))
    assert len(integrity) == 2 and len(reasons) == 3, reasons
    assert "core-validation-3 attempt 1" in integrity[0] and "forms-1 attempt 1" in integrity[1]


def test_a_self_test_flag_on_an_agent_batch_is_itself_a_reason(tmp_path: Path) -> None:
    only_rule(check(write_batch(tmp_path, receipt(selfTest=True))), "self-test-flag")


def test_wheels_that_a_rebuild_from_the_commit_does_not_give_reject_naming_the_wheel(
    tmp_path: Path,
) -> None:
    def other(commit: str) -> list[ArchiveEntry]:
        [entry] = CURRENT.rebuild(commit) if CURRENT.rebuild else []
        return [entry.model_copy(update={"sha256": "sha256:" + "e" * 64})]

    reasons = check(write_batch(tmp_path), dataclasses.replace(CURRENT, rebuild=other))
    only_rule(reasons, "archives-rebuild")
    assert WHEEL_NAME in reasons[0] and COMMIT in reasons[0]


def test_archives_from_a_dirty_tree_or_no_commit_never_qualify(tmp_path: Path) -> None:
    dirty = write_batch(tmp_path / "d", archives_data=lambda a: a["source"].update(dirty=True))
    only_rule(check(dirty), "archives-source")
    unknown = write_batch(tmp_path / "u", archives_data=lambda a: a["source"].update(commit=None))
    assert rules(check(unknown)) == {"archives-source", "registry"}


def test_a_commit_that_cannot_be_rebuilt_rejects_with_the_reason(tmp_path: Path) -> None:
    def missing(commit: str) -> list[ArchiveEntry]:
        raise ConfigError(f"commit {commit} is not in the repository")

    reasons = check(write_batch(tmp_path), dataclasses.replace(CURRENT, rebuild=missing))
    only_rule(reasons, "archives-rebuild")
    assert "not in the repository" in reasons[0]


@pytest.mark.parametrize("status", ["not-run", "interrupted", "running", "infrastructure-failure"])
def test_a_batch_that_did_not_complete_rejects(tmp_path: Path, status: str) -> None:
    reasons = check(write_batch(tmp_path, receipt(status=status, reasons=["engine down"])))
    only_rule(reasons, "batch-completed")
    assert "engine down" in reasons[0]


def test_a_receipt_missing_a_run_rejects_and_names_it(tmp_path: Path) -> None:
    runs = [run(r) for r in EXAMPLE_SUITE.run_ids() if r != "error-recovery-3"]
    reasons = check(write_batch(tmp_path, receipt(runs)))
    assert any(x.startswith("schedule:") and "error-recovery-3" in x for x in reasons)
    assert any(x.startswith("final-successes:") for x in reasons)


def test_a_receipt_whose_totals_disagree_with_its_runs_is_inconsistent(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    batch.edit_receipt(lambda d: d.update(firstSuccesses=17))
    only_rule(check(batch), "receipt-readable")


def test_a_truncated_receipt_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    batch.receipt.write_bytes(batch.receipt.read_bytes()[:100])
    only_rule(check(batch), "receipt-readable")


def test_a_missing_archives_json_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    batch.archives.unlink()
    only_rule(check(batch), "archives-readable")


def test_an_edited_archives_json_no_longer_matches_the_receipt(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    data = json.loads(batch.archives.read_text())
    batch.archives.write_text(json.dumps(data))  # same content, different bytes
    only_rule(check(batch), "archives-digest")


def test_a_changed_consumer_lock_rejects(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    lock = tmp_path / "consumer-lock.json"
    lock.write_text(lock.read_text() + " ")
    only_rule(check(batch), "consumer-lock")


def test_an_infrastructure_failure_rejects(tmp_path: Path) -> None:
    r = "forms-1"
    att = attempt(r, success=False, submitted=False)
    att.update(failureCategory="infrastructure", infrastructureStatus="failed")
    reasons = check(write_batch(tmp_path, receipt(runs_with({r: run(r, [att])}))))
    assert any(x.startswith("infrastructure:") and r in x for x in reasons)


def test_several_broken_rules_are_all_reported(tmp_path: Path) -> None:
    batch = reference_batch(tmp_path)
    batch.solution("forms-1").write_text("tampered\n")
    reasons = check(batch)
    rules = {x.split(":")[0] for x in reasons}
    assert rules == {"not-self-test", "solution-integrity"}


def test_a_batch_is_self_test_by_its_identity_or_its_gateway_whatever_it_reports() -> None:
    data = json.loads((SHIPPED / "examples" / "runners" / "claude-code.json").read_text())
    config = RunnerConfig.model_validate(data)
    gateway = GatewaySettings.model_validate(copy.deepcopy(GATEWAY))
    assert not is_self_test(config, gateway)
    assert is_self_test(config, None)
    assert is_self_test(config, gateway.model_copy(update={"privateUpstreams": True}))
    reference = {**data, "expectedRunner": {"name": "agent-eval-oracle", "version": "1"}}
    assert is_self_test(RunnerConfig.model_validate(reference), gateway)


# --- The reviewed-runner registry ------------------------------------------------------------


def test_a_batch_whose_configuration_was_never_reviewed_is_rejected_naming_it(
    tmp_path: Path,
) -> None:
    def other_image(manifest: dict[str, Any]) -> None:
        manifest["runnerImage"] = {"reference": "runner@sha256:" + "9" * 64,
                                   "imageId": "sha256:" + "9" * 64}  # fmt: skip

    reasons = check(write_batch(tmp_path, receipt(runnerImage="runner@sha256:" + "9" * 64),
                                other_image))  # fmt: skip
    only_rule(reasons, "registry")
    assert "no reviewed entry matches runner claude-code 2.1.197" in reasons[0]
    assert "runner@sha256:" + "9" * 64 in reasons[0]
    assert "the closest entry (reviewed by Reviewer One) differs in runnerImage" in reasons[0]


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("runnerCommand", ["/bin/sh", "-c", "canned-answers.sh"], "command"),
        ("runnerCommand", ["/usr/bin/python3", "-B", "-m", "agent_eval.adapters.codex"], "command"),
        ("runnerCommand", None, "command"),
        ("envAllowlist", ["OTHER_PROVIDER_KEY"], "envAllowlist"),
        ("envAllowlist", None, "envAllowlist"),
    ],
    ids=["a-script", "another-adapter", "command-not-recorded", "more-variables", "not-recorded"],
)
def test_a_reviewed_image_run_with_another_command_or_environment_is_rejected(
    tmp_path: Path, field: str, value: object, named: str
) -> None:
    """The images alone do not make a runner: what runs in them is reviewed too."""
    reasons = check(write_batch(tmp_path, archives_data=lambda m: m.update({field: value})))
    only_rule(reasons, "registry")
    assert f"differs in {named}" in reasons[0], reasons


def test_an_upstream_or_served_model_outside_the_review_is_rejected(tmp_path: Path) -> None:
    def other_upstream(manifest: dict[str, Any]) -> None:
        manifest["gateway"]["upstreams"][0]["upstream"] = "https://proxy.example"

    reasons = check(write_batch(tmp_path, archives_data=other_upstream))
    only_rule(reasons, "registry")
    assert "differs in upstreams" in reasons[0]


def git(repository: Path, *args: str, when: str | None = None) -> str:
    env = {
        "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org",
        "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.org",
        "PATH": os.environ["PATH"], "HOME": str(repository),
    }  # fmt: skip
    if when is not None:
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = when
    done = subprocess.run(
        ["git", "-C", str(repository), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """reviewed -> batch -> later (committed after the batch, its date set back a day)."""
    repository = tmp_path / "repo"
    repository.mkdir()
    git(repository, "init", "-q")
    commits = {}
    for name, when in [
        ("reviewed", "2026-11-29T10:00:00+00:00"),
        ("batch", "2026-11-30T11:59:00+00:00"),
        ("later", "2026-11-28T10:00:00+00:00"),
    ]:
        (repository / name).write_text(name)
        git(repository, "add", name)
        git(repository, "commit", "-q", "-m", name, when=when)
        commits[name] = git(repository, "rev-parse", "HEAD")
    return repository, commits


def reviewed_at(tmp_path: Path, which: str | None) -> tuple[Batch, Anchors, str | None]:
    """A batch packed from the history's "batch" commit, its registry's one entry claiming
    the commit *which* names (another: that text; None: the field absent), and git itself
    answering ancestry."""
    repository, commits = history(tmp_path)
    source_commit = commits.get(which, which) if which is not None else None
    document = tomllib.loads(REGISTRY.decode())
    document["runner"][0].pop("sourceCommit")
    if source_commit is not None:
        document["runner"][0]["sourceCommit"] = source_commit
    data = tomli_w.dumps(document).encode()
    batch = write_batch(
        tmp_path / "batch", archives_data=lambda m: m.update(registryDigest=sha256_bytes(data))
    )
    real = is_ancestor(repository)
    # The builders' batch names COMMIT; here it stands for the history's "batch" commit.
    current = dataclasses.replace(
        CURRENT,
        registry_at=lambda commit: data if commit == COMMIT else None,
        is_ancestor=lambda a, d: real(a, commits["batch"] if d == COMMIT else d),
    )
    return batch, current, source_commit


def test_a_review_at_a_commit_after_the_batch_counts_not_whatever_its_date(
    tmp_path: Path,
) -> None:
    """The later commit's committer date is a day before the batch's: no clock is read."""
    batch, current, later = reviewed_at(tmp_path, "later")
    assert later is not None
    reasons = check(batch, current)
    only_rule(reasons, "registry")
    assert f"reviewed at {later[:12]}, which is not in the history" in reasons[0]


@pytest.mark.parametrize("which", ["reviewed", "batch"])
def test_a_review_in_the_batch_commit_s_history_counts(tmp_path: Path, which: str) -> None:
    batch, current, _ = reviewed_at(tmp_path, which)
    assert check(batch, current) == []


def test_a_review_from_another_history_or_unknown_counts_not(tmp_path: Path) -> None:
    batch, current, _ = reviewed_at(tmp_path, "e" * 40)
    reasons = check(batch, current)
    only_rule(reasons, "registry")
    assert "cannot place relative to the source commit" in reasons[0]


def test_an_entry_without_a_source_commit_fails_closed_naming_the_fix(tmp_path: Path) -> None:
    batch, current, _ = reviewed_at(tmp_path, None)
    reasons = check(batch, current)
    only_rule(reasons, "registry")
    assert "records no sourceCommit" in reasons[0] and "agent-eval runners review" in reasons[0]


def test_a_source_commit_committed_after_the_batch_started_is_no_reason_by_itself(
    tmp_path: Path,
) -> None:
    """Committer dates are the committer's to set: the history decides, not the clock."""
    started = datetime.fromisoformat(NOW)
    later = dataclasses.replace(CURRENT, committed_at=lambda commit: started + timedelta(days=2))
    assert check(write_batch(tmp_path), current=later) == []


def test_a_registry_changed_after_the_batch_is_rejected(tmp_path: Path) -> None:
    edited = REGISTRY.replace(b"Reviewer One", b"Reviewer Two")
    current = dataclasses.replace(CURRENT, registry_at=lambda commit: edited)
    reasons = check(write_batch(tmp_path), current)
    only_rule(reasons, "registry")
    assert "is not reviewed-runners.toml as committed at" in reasons[0]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (None, "reviewed-runners.toml is not in commit 000000000000"),
        (b"not [toml", "is not TOML"),
        (b"schemaVersion = 1\n[[runner]]\nreviewer = 'x'\n", "runner.0.runner"),
    ],
    ids=["absent", "not-toml", "not-a-registry"],
)
def test_a_missing_or_unreadable_registry_rejects(
    tmp_path: Path, data: bytes | None, said: str
) -> None:
    current = dataclasses.replace(CURRENT, registry_at=lambda commit: data)
    reasons = check(write_batch(tmp_path), current)
    assert rules(reasons) == {"registry"} and any(said in r for r in reasons), reasons


def test_a_file_no_record_accounts_for_rejects_wherever_it_is(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    runs = batch.solution("forms-3").parents[3]
    (runs / "forms-3" / "attempt-1" / "notes.md").write_text("added\n")
    (runs / "forms-9" / "attempt-1").mkdir(parents=True)
    (runs / "forms-9" / "attempt-1" / "analysis.json").write_text("{}")
    reasons = check(batch)
    only_rule(reasons, "evidence-integrity")
    assert "runs/forms-3/attempt-1/notes.md" in reasons[0]
    assert "runs/forms-9/attempt-1/analysis.json" in reasons[0]


@pytest.mark.parametrize("status", get_args(BatchStatus))
def test_a_run_in_flight_when_an_unclosed_batch_was_last_written_is_no_reason(
    tmp_path: Path, status: str
) -> None:
    """A batch killed (or read) mid-run left a run's files and no record of it: that is
    an unclosed batch's state, not a file added to it; a closed batch has no such run."""
    done, (cut, *_) = EXAMPLE_SUITE.run_ids()[:8], EXAMPLE_SUITE.run_ids()[8:]
    data = receipt([run(r) for r in done], status=status, reasons=["why"])
    batch = write_batch(tmp_path, data)
    left = batch.root / "runs" / cut / "attempt-1"
    left.mkdir(parents=True)
    (left / "runner.log").write_text("half a run\n")
    result = qualify_files(batch.receipt, batch.archives, CURRENT)
    integrity = [r for r in result.reasons if r.startswith("evidence-integrity:")]
    notes = [n for n in result.notes or [] if n.startswith("in-flight:")]
    if status in ("running", "abandoned"):
        assert integrity == [] and len(notes) == 1 and cut in notes[0], result
    else:
        assert notes == [] and len(integrity) == 1, result
        assert f"runs/{cut}/attempt-1/runner.log" in integrity[0]
    # A run the receipt does record is held to its record whatever the status.
    (batch.attempt_dir(done[0]) / "extra.py").write_text("x = 1\n")
    integrity = [r for r in check(batch) if r.startswith("evidence-integrity:")]
    assert len(integrity) == 1 and f"runs/{done[0]}/attempt-1/extra.py" in integrity[0]


def test_a_link_for_a_run_in_flight_of_an_abandoned_batch_rejects(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "attempt-1").mkdir(parents=True)
    (outside / "attempt-1" / "runner.log").write_text("x\n")
    batch = write_batch(tmp_path / "batch", receipt([], status="abandoned", reasons=["gone"]))
    (batch.root / "runs").mkdir(exist_ok=True)
    (batch.root / "runs" / "forms-1").symlink_to(outside, target_is_directory=True)
    reasons = check(batch)
    assert any(r.startswith("evidence-integrity:") and "link" in r for r in reasons), reasons


def test_a_link_below_runs_rejects_and_is_not_followed(tmp_path: Path) -> None:
    batch = write_batch(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("x\n")
    attempt = batch.solution("forms-3").parent.parent
    (attempt / "extra.log").symlink_to(outside)
    reasons = check(batch)
    only_rule(reasons, "evidence-integrity")
    assert "symbolic link" in reasons[0]


@pytest.mark.parametrize("name", ["receipt.json", "archives.json"])
def test_a_receipt_or_archives_that_is_a_link_to_a_copy_elsewhere_rejects(
    tmp_path: Path, name: str
) -> None:
    # The copy is intact: only where it is (outside the run directory, changeable after
    # the decision) is wrong, and the link is named, not followed.
    batch = write_batch(tmp_path / "batch")
    own = batch.root / name
    outside = tmp_path / f"outside-{name}"
    os.replace(own, outside)
    own.symlink_to(outside)
    reasons = check(batch)
    assert any("is a symbolic link" in r and name.split(".")[0] in r for r in reasons), reasons


def test_every_digest_an_attempt_record_holds_names_a_file_of_its_one_table() -> None:
    """A digest field added to the record without a file in evidence_files fails here."""
    record = attempt("forms-1")
    digests = [name for name in AttemptRecord.model_fields if name.endswith("Digest")]
    digests.remove("solutionDigest")  # the solution files' own digests are the table's
    for index, field in enumerate(digests):
        value = "sha256:" + f"{index:x}" * 64
        changed = AttemptRecord.model_validate({**record, field: value})
        assert value in changed.evidence_files().values(), field
    gateway = AttemptRecord.model_validate(
        {**record, "gateway": gateway_use(gateway_line())}
    ).evidence_files()
    assert set(gateway) == {"solution/solution.py", "gateway.jsonl"}


@pytest.mark.parametrize(
    "commit",
    ["--output=OUT", "-p", "HEAD", "main", "a" * 39, "A" * 40, "a" * 40 + "\n", "a" * 41],
)
def test_a_commit_that_is_not_a_full_id_is_refused_before_git_sees_it(
    tmp_path: Path, commit: str
) -> None:
    """archives.json's commit is handed to git: an option (``--output=`` writes a file) or
    a name that moves with the repository is refused as the field it is."""
    out = tmp_path / "written-by-git"
    value = commit.replace("OUT", str(out))

    def point(manifest: dict[str, Any]) -> None:
        manifest["source"]["commit"] = value

    reasons = check(write_batch(tmp_path / "batch", archives_data=point))
    assert any("source.commit" in r for r in reasons), reasons
    assert not out.exists()


def test_git_is_never_given_a_commit_it_could_read_as_an_option(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    out = tmp_path / "written-by-git"
    assert commit_time(repository)(f"--output={out}") is None
    assert registry_at_commit(repository, "x.toml")(f"--output={out}") is None
    assert not out.exists()


def test_the_registry_s_last_change_is_read_from_the_commit_s_own_history(
    tmp_path: Path,
) -> None:
    repository = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repository)], check=True)

    def commit(name: str, when: str) -> str:
        (repository / name).write_text(when)
        env = {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when, "PATH": "/usr/bin:/bin"}
        for args in (["add", name], ["-c", "user.name=a", "-c", "user.email=a@b", "commit",
                                     "-qm", name]):  # fmt: skip
            subprocess.run(["git", "-C", str(repository), *args], check=True, env=env)
        return subprocess.run(
            ["git", "-C", str(repository), "rev-parse", "HEAD"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip

    entry = commit("reviewed-runners.toml", "2026-11-01T10:00:00+00:00")
    later = commit("other.txt", "2026-11-20T10:00:00+00:00")
    changed = registry_changed(repository, "reviewed-runners.toml")
    found = changed(later)
    assert found is not None and found.commit == entry
    assert found.committed_at == datetime.fromisoformat("2026-11-01T10:00:00+00:00")
    assert registry_changed(repository, "absent.toml")(later) is None
    assert changed("--output=" + str(tmp_path / "x")) is None
    assert not (tmp_path / "x").exists()


OWN = SuiteSpec(
    schemaVersion=1, taskIds=("sign-up", "content-address"), repetitions=2, scheduledRuns=4,
    minFirstSuccesses=3, requiredFinalSuccesses=4, maxAttemptsPerRun=2,
)  # fmt: skip


def own_receipt(**overrides: Any) -> dict[str, Any]:
    runs = [run(r) for r in OWN.run_ids()]
    return receipt(runs, scheduledRuns=4, suite=OWN.model_dump(mode="json"), **overrides)


def test_a_batch_of_a_repository_s_own_suite_is_judged_by_its_declaration(
    tmp_path: Path,
) -> None:
    current = dataclasses.replace(CURRENT, spec=OWN)
    assert check(write_batch(tmp_path / "own", own_receipt()), current) == []
    # One first-try failure of four is within its threshold of 3; two are not.
    runs = [run(r) for r in OWN.run_ids()]
    for index in (0, 1):
        runs[index] = run(
            OWN.run_ids()[index],
            [attempt(OWN.run_ids()[index], success=False), attempt(OWN.run_ids()[index], 2)],
        )
    data = receipt(runs, scheduledRuns=4, suite=OWN.model_dump(mode="json"))
    reasons = check(write_batch(tmp_path / "two", data), current)
    only_rule(reasons, "first-successes")
    assert "2/4 first-submission successes, at least 3 required" in reasons[0]


def test_a_batch_of_another_suite_than_the_checkout_s_is_rejected_by_its_schedule(
    tmp_path: Path,
) -> None:
    reasons = check(write_batch(tmp_path, own_receipt()))  # the checkout declares the example
    assert any(r.startswith("schedule: missing runs core-validation-1") for r in reasons)
    assert any("the receipt's suite declaration differs from the checkout's" in r for r in reasons)
    assert any(r.startswith("first-successes: 4/18") for r in reasons), reasons


def test_without_the_checkout_s_declaration_nothing_qualifies(tmp_path: Path) -> None:
    current = dataclasses.replace(CURRENT, spec=None)
    reasons = check(write_batch(tmp_path), current)
    only_rule(reasons, "suite")


def test_a_measurement_batch_is_refused_as_such_and_only_as_such(tmp_path: Path) -> None:
    five = EXAMPLE_SUITE.model_copy(update={"repetitions": 5, "scheduledRuns": 30})
    runs = [run(r) for r in five.run_ids()]
    data = receipt(runs, scheduledRuns=30, repetitions=5)
    reasons = check(write_batch(tmp_path, data))
    only_rule(reasons, "measurement")
    assert "ran 5 run(s) per task" in reasons[0] and "agent-eval compare" in reasons[0]


def cluster_batch(tmp_path: Path, **node: Any) -> Batch:
    """A batch whose runs ran on two nodes, each recorded as it proved itself (with *node*'s
    changes to the second)."""
    recorded = [
        {
            "node": name,
            "engine": f"/run/{name}.sock",
            "address": "127.0.0.1",
            "evaluatorDigest": EVALUATOR,
            "runnerImageId": "sha256:" + "c" * 64,
            "verifierImageId": "sha256:" + "d" * 64,
            "gatewayImageId": None,
        }
        for name in ("node-1", "node-2")
    ]
    recorded[1] |= node
    runs = [run(r) for r in EXAMPLE_SUITE.run_ids()]
    for index, data in enumerate(runs):
        data["attempts"][0]["node"] = f"node-{index % 2 + 1}"
    return write_batch(tmp_path / "b", receipt(runs, nodes=recorded))


def test_a_batch_run_on_nodes_of_its_own_harness_and_images_qualifies(tmp_path: Path) -> None:
    assert check(cluster_batch(tmp_path)) == []


@pytest.mark.parametrize(
    "change, said",
    [
        ({"evaluatorDigest": sha256_bytes(b"other")}, "node node-2 ran harness sha256:"),
        ({"runnerImageId": "sha256:" + "e" * 64}, "node node-2 ran runner image sha256:eee"),
        ({"verifierImageId": "sha256:" + "e" * 64}, "node node-2 ran verifier image sha256:eee"),
        ({"node": "node-3"}, "attempts name nodes node-2 the receipt does not record"),
    ],
)
def test_a_node_that_ran_other_code_or_images_or_is_not_recorded_rejects(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    reasons = check(cluster_batch(tmp_path, **change))
    only_rule(reasons, "node-binding")
    assert said in reasons[0], reasons


# --- Images pinned by registry digest ---------------------------------------------------


def test_an_image_pinned_by_registry_digest_is_held_to_what_the_engine_resolves_it_to(
    tmp_path: Path,
) -> None:
    """``name@sha256:…`` names a manifest: the image id archives.json records beside it is
    checked against the engine, and a check that cannot ask one fails closed."""
    batch = write_batch(tmp_path / "b")
    assert check(batch) == []
    resolved: list[str] = []

    def elsewhere(reference: str) -> str:
        resolved.append(reference)
        return "sha256:" + "e" * 64

    reasons = check(batch, dataclasses.replace(CURRENT, resolve_image=elsewhere))
    assert rules(reasons) == {"runner-image", "verifier-image"}, reasons
    assert f"resolves here to image sha256:{'e' * 64}, but archives.json records" in reasons[0]
    assert resolved == [RUNNER_IMAGE, VERIFIER_IMAGE]

    def absent(reference: str) -> str:
        raise InfrastructureError(f"no engine socket at /nowhere ({reference[:6]})")

    reasons = check(batch, dataclasses.replace(CURRENT, resolve_image=absent))
    assert rules(reasons) == {"runner-image", "verifier-image"}
    assert all("cannot be resolved here" in r and "/nowhere" in r for r in reasons), reasons

    reasons = check(batch, dataclasses.replace(CURRENT, resolve_image=None))
    assert rules(reasons) == {"runner-image", "verifier-image"}
    assert all("pinned by a registry digest" in r and "none was asked" in r for r in reasons)


def test_an_image_pinned_by_its_id_needs_no_engine(tmp_path: Path) -> None:
    by_id = {"runnerImage": "sha256:" + "c" * 64, "verifierImage": "sha256:" + "d" * 64}

    def pinned_by_id(manifest: dict[str, Any]) -> None:
        for name, image in by_id.items():
            manifest[name] = {"reference": image, "imageId": image}

    batch = write_batch(tmp_path / "b", receipt(**by_id), pinned_by_id)

    def never(reference: str) -> str:
        raise AssertionError(f"the engine was asked about {reference}")

    reasons = check(batch, dataclasses.replace(CURRENT, resolve_image=never))
    assert "runner-image" not in rules(reasons) and "verifier-image" not in rules(reasons)
