"""Fixture verification matches a case only when what was observed is exactly what the case
declares: a correct case passes everything, a negative fails exactly its assertions and
triggers exactly its static findings, and an infrastructure failure never matches.

The verifier is a fake that answers from prepared verifications, so these tests
are pure; the run over the real fixtures is in ``test_tasks_verify_local.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.errors import InfrastructureError
from agent_eval.models.analysis import Analysis, Diagnostic
from agent_eval.models.behaviour import BehaviourError, BehaviourResult
from agent_eval.models.fixture import CorrectCase, FixtureReport
from agent_eval.models.receipt import AssertionOutcome
from agent_eval.models.task import TaskSpec
from agent_eval.project import find_project
from agent_eval.suite.fixture_cases import FixtureCase, load_fixture_cases
from agent_eval.suite.tasks import Suite, load_suite
from agent_eval.verification.fixture_check import (
    CaseResult,
    Observation,
    VerifyReport,
    check_catalog_references,
    compare,
    format_report,
    observe,
    run_cases,
    verify_tasks,
)
from agent_eval.verification.local import LocalVerifier
from agent_eval.verification.protocol import Verification
from tests.paths import REPO


@pytest.fixture(scope="module")
def suite() -> Suite:
    return load_suite(REPO / "tasks", graders_dir=REPO / "graders")


@pytest.fixture(scope="module")
def cases(suite: Suite) -> dict[str, FixtureCase]:
    return {case.label: case for case in load_fixture_cases(REPO / "fixtures", suite)}


def observation(
    failed: frozenset[str] | set[str] = frozenset(),
    findings: frozenset[str] | set[str] = frozenset(),
    *,
    error: str | None = None,
    review: bool = False,
    infrastructure: str | None = None,
) -> Observation:
    return Observation(frozenset(failed), frozenset(findings), error, review, infrastructure)


def verification(
    spec: TaskSpec,
    failed: set[str],
    findings: set[str],
    *,
    crashed: bool = False,
    infrastructure: bool = False,
) -> Verification:
    diagnostics = [
        Diagnostic(category=f, message="found")  # type: ignore[arg-type]
        for f in sorted(findings - {"hallucinated-api"})
    ]
    hallucinated = ["appkit.nope"] if "hallucinated-api" in findings else []
    analysis = Analysis(
        schemaVersion=1,
        taskId=spec.id,
        solutionDigest="sha256:" + "0" * 64,
        syntaxOk=True,
        typeCheckOk=not findings,
        contractOk=True,
        integrationOk="integration" not in findings,
        unsupportedApi=hallucinated,
        unsupportedApiCount=len(hallucinated),
        hallucinatedApi=hallucinated,
        hallucinatedApiCount=len(hallucinated),
        missingDependencies=[],
        integration=[],
        diagnostics=diagnostics,
        mypyVersion="0",
    )
    error = None
    if infrastructure:
        error = BehaviourError(category="infrastructure", message="grader broke")
    elif crashed:
        error = BehaviourError(category="behaviour", message="does not import")
    behaviour = BehaviourResult(
        schemaVersion=1,
        taskId=spec.id,
        assertions=[
            AssertionOutcome(
                id=a,
                passed=a not in failed,
                observed=not crashed,
                safety=a in spec.safetyAssertionIds,
            )
            for a in spec.assertionIds
        ],
        needsReview=False,
        diagnostics=[],
        error=error,
    )
    return Verification(analysis=analysis, analysis_json=b"{}", behaviour=behaviour)


EMPTY_CATALOG: Mapping[str, Any] = {"schemaVersion": 1, "distributions": [], "symbols": []}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Mapping[str, Any]:
    """The API catalog of the library in packages/, generated from its sources."""
    project = find_project(REPO)
    return LocalVerifier.prepare(
        packages_dir=project.packages,
        tasks_dir=project.tasks,
        graders_dir=project.graders,
        work_dir=tmp_path_factory.mktemp("catalog"),
    ).api_catalog()


class FakeVerifier:
    """Answers each task's verification with what *answer* says for that solution."""

    name = "fake"

    def __init__(
        self,
        answer: Callable[[TaskSpec, Path], Verification],
        catalog: Mapping[str, Any] = EMPTY_CATALOG,
    ) -> None:
        self.answer = answer
        self.catalog = catalog
        self.seen: list[tuple[str, list[str]]] = []

    def api_catalog(self) -> Mapping[str, Any]:
        return self.catalog

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        self.seen.append((run_id, sorted(p.name for p in solution_dir.iterdir())))
        return self.answer(task, solution_dir)

    def cancel_all(self) -> None:
        pass


def as_declared(cases: dict[str, FixtureCase]) -> Callable[[TaskSpec, Path], Verification]:
    """A verifier answer that observes exactly what each case declares."""

    def answer(spec: TaskSpec, solution_dir: Path) -> Verification:
        case = cases[f"{spec.id}/{solution_dir.name}"]
        expectation = case.expectation
        if isinstance(expectation, CorrectCase):
            return verification(spec, set(), set())
        return verification(
            spec,
            set(expectation.expected_failures(spec.assertionIds)),
            set(expectation.findings),
            crashed=expectation.failedAssertions == "all",
        )

    return answer


def test_a_correct_case_matches_only_when_everything_passes(
    cases: dict[str, FixtureCase],
) -> None:
    case = cases["forms/correct"]
    assert compare(case, observation()).ok
    assert not compare(case, observation({"typed-values-parsed"})).ok
    assert not compare(case, observation(findings={"integration"})).ok
    assert not compare(case, observation(error="timeout: slow")).ok
    assert not compare(case, observation(review=True)).ok
    unclean = Observation(frozenset(), frozenset(), None, False, analysis_passed=False)
    assert compare(case, unclean).detail == "static analysis did not pass"


def test_a_negative_matches_its_exact_failures_and_findings(
    cases: dict[str, FixtureCase],
) -> None:
    case = cases["forms/hallucinated-render"]
    declared = {"field-errors-shown", "submitted-values-redisplayed"}
    findings = {"unsupported-api", "hallucinated-api"}
    assert compare(case, observation(declared, findings)).ok
    extra = compare(case, observation(declared | {"user-values-escaped"}, findings))
    assert not extra.ok and "failed unexpectedly ['user-values-escaped']" in extra.detail
    missing = compare(case, observation({"field-errors-shown"}, findings))
    assert not missing.ok and "not failed ['submitted-values-redisplayed']" in missing.detail
    unflagged = compare(case, observation(declared, {"unsupported-api"}))
    assert not unflagged.ok and "findings: missing ['hallucinated-api']" in unflagged.detail


def test_a_negative_that_passes_is_a_mismatch(cases: dict[str, FixtureCase]) -> None:
    result = compare(cases["tool-validation/handler-before-validation"], observation())
    assert not result.ok
    assert result.expected == "fail: handler-never-runs-on-invalid"
    assert result.observed == "pass"


def test_failing_all_matches_a_solution_that_fails_every_assertion(
    cases: dict[str, FixtureCase], suite: Suite
) -> None:
    case = cases["error-recovery/unchanged-seed"]
    every = set(suite.task("error-recovery").spec.assertionIds)
    result = compare(case, observation(every, {"unsupported-api"}, error="behaviour: import"))
    assert result.ok
    assert result.expected == result.observed == "fail: all; finding: unsupported-api"
    assert not compare(case, observation(every - {"backoff-delays"}, {"unsupported-api"})).ok


def test_an_infrastructure_failure_never_matches(cases: dict[str, FixtureCase]) -> None:
    for label in ("forms/correct", "forms/unescaped-confirmation"):
        result = compare(cases[label], observation(infrastructure="grader broke"))
        assert not result.ok and result.observed == "infrastructure failure"


def test_observing_a_verification_keeps_categories_and_flags_hallucinations(
    suite: Suite,
) -> None:
    spec = suite.task("tool-validation").spec
    seen = observe(verification(spec, {"calls-routed-by-name"}, {"hallucinated-api", "syntax"}))
    assert seen.failed_assertions == {"calls-routed-by-name"}
    assert seen.findings == {"hallucinated-api", "syntax"}
    assert seen.infrastructure_error is None
    broken = observe(verification(spec, set(), set(), infrastructure=True))
    assert broken.infrastructure_error == "grader broke"


def test_cases_reach_the_verifier_without_their_expect_file(cases: dict[str, FixtureCase]) -> None:
    verifier = FakeVerifier(as_declared(cases))
    chosen = [cases["error-recovery/correct"], cases["error-recovery/unchanged-seed"]]
    results = run_cases(chosen, verifier, concurrency=2)
    assert [r.ok for r in results] == [True, True]
    assert sorted(verifier.seen) == [
        ("fixture-error-recovery/correct", ["solution.py"]),
        ("fixture-error-recovery/unchanged-seed", ["solution.py"]),
    ]


def test_a_verifier_infrastructure_error_is_reported_as_a_mismatch(
    cases: dict[str, FixtureCase],
) -> None:
    def broken(spec: TaskSpec, solution_dir: Path) -> Verification:
        raise InfrastructureError("mypy could not run")

    [result] = run_cases([cases["forms/correct"]], FakeVerifier(broken))
    assert not result.ok and result.detail == "mypy could not run"


def test_the_whole_suite_matches_with_a_verifier_that_observes_the_declarations(
    cases: dict[str, FixtureCase], catalog: Mapping[str, Any]
) -> None:
    verifier = FakeVerifier(as_declared(cases), catalog)
    report = verify_tasks(find_project(REPO), lambda work: verifier, concurrency=4)
    assert report.ok, format_report(report)
    labels = {f"{r.task_id}/{r.case}" for r in report.rows}
    assert set(cases) <= labels
    assert {"forms/(coverage)", "error-recovery/(references)"} <= labels


def test_the_real_catalog_has_every_required_symbol_and_agrees_on_the_seeds(
    suite: Suite, catalog: Mapping[str, Any]
) -> None:
    assert all(row.ok for row in check_catalog_references(suite.tasks, catalog))


def test_a_required_symbol_missing_from_the_catalog_is_a_mismatch(suite: Suite) -> None:
    rows = check_catalog_references(suite.tasks, EMPTY_CATALOG)
    assert all(not row.ok for row in rows)
    assert "requiredIntegration ['appkit.create_validator', 'appkit.Validator']" in rows[0].detail


def test_seed_references_spelled_unlike_the_starter_are_a_mismatch(
    suite: Suite, catalog: Mapping[str, Any]
) -> None:
    task = suite.task("error-recovery")
    respelled = replace(
        task,
        spec=task.spec.model_copy(update={"seedReferences": ["appkit.retry.retry_with_backoff"]}),
    )
    [row] = check_catalog_references([respelled], catalog)
    assert not row.ok and "differ from the unsupported references" in row.detail


def test_the_report_is_a_table_with_mismatch_details_and_a_summary() -> None:
    report = VerifyReport(
        verifier="fake",
        rows=(
            CaseResult("forms", "correct", "pass", "pass", ok=True),
            CaseResult(
                "forms",
                "greets-username",
                "fail: valid-submission-accepted",
                "pass",
                ok=False,
                detail="assertions: not failed ['valid-submission-accepted']",
            ),
        ),
        seconds=1.25,
    )
    text = format_report(report)
    lines = text.splitlines()
    assert lines[0].split() == ["TASK", "CASE", "EXPECTED", "OBSERVED", "RESULT"]
    assert lines[1].split()[-1] == "OK" and lines[2].split()[-1] == "MISMATCH"
    assert "forms/greets-username: assertions: not failed" in text
    assert text.rstrip().endswith("2 fixture cases with the fake verifier in 1.2 s: 1 mismatch(es)")


def test_long_cells_wrap_onto_continuation_lines() -> None:
    long = "fail: " + ", ".join(f"assertion-number-{n}" for n in range(6))
    report = VerifyReport("fake", (CaseResult("t", "c", long, long, ok=True),), 0.0)
    lines = format_report(report, width=30).splitlines()
    assert lines[1].endswith("OK") and lines[2].startswith(" ")
    assert all(len(line.split("  ")[0]) <= 30 for line in lines[1:3])


def test_an_unknown_verifier_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["tasks", "verify", "--verifier", "kubernetes"])
    assert result.exit_code == 2


def test_the_deprecated_engine_option_still_selects_a_verifier_and_says_so() -> None:
    result = CliRunner().invoke(main, ["tasks", "verify", "--engine", "kubernetes"])
    assert result.exit_code == 2
    result = CliRunner().invoke(
        main, ["tasks", "verify", "--engine", "local", "--verifier", "docker"]
    )
    assert result.exit_code == 2 and "disagree" in result.output


def test_repeats_that_agree_pass_and_a_verdict_that_changes_between_repeats_is_flaky(
    cases: dict[str, FixtureCase],
) -> None:
    steady = FakeVerifier(as_declared(cases))
    chosen = [cases["forms/correct"]]
    [result] = run_cases(chosen, steady, repeat=3)
    assert result.ok and len(steady.seen) == 3
    answers = iter([set(), {"typed-values-parsed"}, set()])

    def wobbling(spec: TaskSpec, solution_dir: Path) -> Verification:
        return verification(spec, next(answers), set())

    [flaky] = run_cases(chosen, FakeVerifier(wobbling), repeat=3)
    assert not flaky.ok and flaky.observed == "flaky"
    assert "repeat 2 of 3 differs from the first" in flaky.detail
    assert "typed-values-parsed" in flaky.detail


def test_a_mismatch_explains_itself_with_each_finding_s_place_and_each_assertion_s_message(
    cases: dict[str, FixtureCase],
) -> None:
    def wrong(spec: TaskSpec, solution_dir: Path) -> Verification:
        seen = verification(spec, {spec.assertionIds[0]}, {"hallucinated-api"})
        analysis = seen.analysis.model_copy(
            update={"diagnostics": [
                Diagnostic(category="type-error", message="no attribute 'nope'", path="solution.py",
                           line=7)
            ]}
        )  # fmt: skip
        failed = [
            a.model_copy(update={"message": "greets the wrong user", "observedValue": "'bob'"})
            if not a.passed
            else a
            for a in seen.behaviour.assertions
        ]
        behaviour = seen.behaviour.model_copy(update={"assertions": failed})
        return replace(seen, analysis=analysis, behaviour=behaviour)

    [row] = run_cases([cases["forms/correct"]], FakeVerifier(wrong))
    first = cases["forms/correct"].task.spec.assertionIds[0]
    assert row.explanations == (
        "solution.py:7: type-error: no attribute 'nope'",
        "hallucinated-api: appkit.nope is not part of the library's public API",
        f"assertion {first}: greets the wrong user (observed: 'bob')",
    )
    text = format_report(VerifyReport("fake", (row,), 0.1))
    assert "    solution.py:7: type-error: no attribute 'nope'\n" in text
    document = FixtureReport.model_validate_json(
        VerifyReport("fake", (row,), 0.1).to_model().model_dump_json()
    )
    assert document.rows[0].explanations == list(row.explanations)
    assert not document.ok and not document.rows[0].infrastructure


@pytest.mark.parametrize(
    ("rows", "raised", "code"),
    [
        ((CaseResult("t", "c", "pass", "pass", ok=True),), None, 0),
        ((CaseResult("t", "c", "pass", "fail: x", ok=False, detail="d"),), None, 1),
        (
            (
                CaseResult("t", "c", "pass", "infrastructure failure", ok=False,
                           detail="warm-up timed out", infrastructure=True),
            ),
            None,
            3,
        ),
        (
            (
                CaseResult("t", "a", "pass", "fail: x", ok=False, detail="d"),
                CaseResult("t", "c", "pass", "infrastructure failure", ok=False,
                           detail="warm-up timed out", infrastructure=True),
            ),
            None,
            1,
        ),
        ((), InfrastructureError("the analysis warm-up timed out after 600 s"), 3),
    ],
)  # fmt: skip
def test_verify_exits_3_when_only_the_harness_failed_and_1_for_a_mismatch(
    monkeypatch: pytest.MonkeyPatch,
    rows: tuple[CaseResult, ...],
    raised: Exception | None,
    code: int,
) -> None:
    def fake_verify(*args: object, **kwargs: object) -> VerifyReport:
        if raised is not None:
            raise raised
        return VerifyReport("local", rows, 0.5)

    monkeypatch.setattr("agent_eval.cli.tasks.verify_tasks", fake_verify)
    result = CliRunner().invoke(main, ["tasks", "verify", "--project", str(REPO), "--json"])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    if raised is None:
        report = FixtureReport.model_validate_json(result.stdout)
        assert [r.case for r in report.rows] == [r.case for r in rows]
    else:
        assert result.stderr.strip() == f"error: {raised}"
