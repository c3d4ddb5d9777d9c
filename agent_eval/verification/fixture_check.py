"""Verify the task suite with its fixtures: correct solutions pass, negatives fail as declared.

``verify_tasks`` validates the suite (``agent_eval.suite``), loads every
fixture case (``agent_eval.suite.fixture_cases``), checks that the negatives cover
every declared assertion, checks the tasks' library references against the
API catalog, then runs each case through static analysis and behavioural
grading with a :class:`~agent_eval.verification.protocol.Verifier` and
compares what it observed with the case's ``expect.json``:

* a correct case must clear static analysis, pass every assertion, finish
  grading without an error and not ask for review;
* a negative case must fail exactly its declared assertions and trigger
  exactly its declared static findings (analysis diagnostic categories, plus
  ``hallucinated-api``).

An infrastructure failure is never a match: it says nothing about the case.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_eval.errors import InfrastructureError
from agent_eval.models.fixture import CorrectCase, FixtureCaseRow, FixtureReport
from agent_eval.project import Project
from agent_eval.suite.fixture_cases import FixtureCase, coverage_gaps, load_fixture_cases
from agent_eval.suite.tasks import Suite, Task, load_suite
from agent_eval.verification.analysis import seeded_references
from agent_eval.verification.analysis.symbols import SymbolIndex
from agent_eval.verification.protocol import Verification, Verifier, VerifierFactory

__all__ = [
    "CaseResult",
    "Observation",
    "VerifyReport",
    "check_catalog_references",
    "compare",
    "format_report",
    "observe",
    "run_cases",
    "verify_tasks",
]

REFERENCES_ROW = "(references)"
COVERAGE_ROW = "(coverage)"
COLUMN_WIDTH = 48
"""Expected and observed cells wider than this wrap onto continuation lines."""


@dataclass(frozen=True)
class Observation:
    """What static analysis and grading saw for one solution, in comparable form."""

    failed_assertions: frozenset[str]
    findings: frozenset[str]
    behaviour_error: str | None
    """Category and message when grading stopped early (a crash, an import failure)."""
    needs_review: bool
    infrastructure_error: str | None = None
    analysis_passed: bool = True
    """Static analysis cleared every check (syntax, types, contract, integration, API)."""
    explanations: tuple[str, ...] = dataclasses.field(default=(), compare=False)
    """Each finding and failed assertion in the verifier's words (not compared between
    repeats: a message may name a temporary path)."""


@dataclass(frozen=True)
class CaseResult:
    """One row of the report."""

    task_id: str
    case: str
    expected: str
    observed: str
    ok: bool
    detail: str = ""
    explanations: tuple[str, ...] = ()
    """For a mismatch: the findings and failed assertions, each with its message."""
    infrastructure: bool = False
    """The harness could not verify the case: nothing is decided about it."""


@dataclass(frozen=True)
class VerifyReport:
    """Every row, and how long it took."""

    verifier: str
    rows: tuple[CaseResult, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        """Every row matched."""
        return all(row.ok for row in self.rows)

    @property
    def mismatches(self) -> list[CaseResult]:
        """The rows that did not match."""
        return [row for row in self.rows if not row.ok]

    @property
    def undecided(self) -> bool:
        """Only the harness's own failures stand between this report and all matching."""
        return not self.ok and all(row.infrastructure for row in self.mismatches)

    def to_model(self) -> FixtureReport:
        """The report as its wire format (``tasks verify --json``)."""
        return FixtureReport(
            schemaVersion=1,
            verifier=self.verifier,
            seconds=round(self.seconds, 3),
            ok=self.ok,
            rows=[
                FixtureCaseRow(
                    taskId=r.task_id, case=r.case, expected=r.expected, observed=r.observed,
                    ok=r.ok, infrastructure=r.infrastructure, detail=r.detail,
                    explanations=list(r.explanations),
                )
                for r in self.rows
            ],
        )  # fmt: skip


def observe(verification: Verification) -> Observation:
    """Reduce a verification to the facts an expectation talks about."""
    analysis, behaviour = verification.analysis, verification.behaviour
    findings: set[str] = {d.category for d in analysis.diagnostics}
    if analysis.hallucinatedApiCount:
        findings.add("hallucinated-api")
    error = behaviour.error
    infrastructure = (
        error.message if error is not None and behaviour.infrastructure_failed else None
    )
    explanations = [
        f"{_where(d.path, d.line)}{d.category}: {d.message}"
        for d in (*analysis.diagnostics, *behaviour.diagnostics)
    ]
    explanations += [
        f"hallucinated-api: {name} is not part of the library's public API"
        for name in analysis.hallucinatedApi
    ]
    explanations += [
        f"assertion {a.id}: {a.message or 'failed'}"
        + (f" (observed: {a.observedValue})" if a.observedValue else "")
        for a in behaviour.assertions
        if not a.passed
    ]
    return Observation(
        failed_assertions=frozenset(behaviour.failed_assertion_ids),
        findings=frozenset(findings),
        behaviour_error=None if error is None else f"{error.category}: {error.message}",
        needs_review=behaviour.needsReview,
        infrastructure_error=infrastructure,
        analysis_passed=analysis.passed,
        explanations=tuple(explanations),
    )


def _where(path: str | None, line: int | None) -> str:
    if path is None:
        return ""
    return f"{path}:{line}: " if line is not None else f"{path}: "


def _describe(failed: Sequence[str] | str, findings: Sequence[str]) -> str:
    parts = []
    if failed:
        parts.append("fail: " + (failed if isinstance(failed, str) else ", ".join(failed)))
    if findings:
        parts.append("finding: " + ", ".join(findings))
    return "; ".join(parts) or "pass"


def _ordered(values: frozenset[str], order: Sequence[str]) -> list[str]:
    known = [v for v in order if v in values]
    return known + sorted(values - set(order))


def compare(case: FixtureCase, observation: Observation) -> CaseResult:
    """Judge one case: does what was observed equal what the case declares?"""
    order = case.task.spec.assertionIds
    failed = _ordered(observation.failed_assertions, order)
    if observation.failed_assertions == frozenset(order) and observation.behaviour_error:
        shown_failed: Sequence[str] | str = "all"
    else:
        shown_failed = failed
    observed = _describe(shown_failed, sorted(observation.findings))
    expectation = case.expectation
    if observation.infrastructure_error is not None:
        return CaseResult(
            case.task.id,
            case.name,
            _expected_text(case),
            "infrastructure failure",
            ok=False,
            detail=observation.infrastructure_error,
            infrastructure=True,
        )
    if isinstance(expectation, CorrectCase):
        problems = []
        if observation.failed_assertions or observation.findings:
            problems.append("a correct solution must pass everything")
        elif not observation.analysis_passed:
            problems.append("static analysis did not pass")
        if observation.behaviour_error is not None:
            problems.append(f"grading stopped early ({observation.behaviour_error})")
        if observation.needs_review:
            problems.append("grading asked for a review")
        return CaseResult(
            case.task.id, case.name, "pass", observed, ok=not problems,
            detail="; ".join(problems), explanations=observation.explanations if problems else (),
        )  # fmt: skip
    expected_failed = expectation.expected_failures(order)
    expected_findings = frozenset(expectation.findings)
    problems = []
    if observation.failed_assertions != expected_failed:
        missing = _ordered(expected_failed - observation.failed_assertions, order)
        extra = _ordered(observation.failed_assertions - expected_failed, order)
        problems.append(f"assertions: not failed {missing}, failed unexpectedly {extra}")
    if observation.findings != expected_findings:
        missing_f = sorted(expected_findings - observation.findings)
        extra_f = sorted(observation.findings - expected_findings)
        problems.append(f"findings: missing {missing_f}, unexpected {extra_f}")
    return CaseResult(
        case.task.id,
        case.name,
        _expected_text(case),
        observed,
        ok=not problems,
        detail="; ".join(problems),
        explanations=observation.explanations if problems else (),
    )


def _expected_text(case: FixtureCase) -> str:
    expectation = case.expectation
    if isinstance(expectation, CorrectCase):
        return "pass"
    failed = expectation.failedAssertions
    shown: Sequence[str] | str = (
        failed
        if isinstance(failed, str)
        else _ordered(frozenset(failed), case.task.spec.assertionIds)
    )
    return _describe(shown, sorted(expectation.findings))


def check_catalog_references(tasks: Sequence[Task], catalog: Mapping[str, Any]) -> list[CaseResult]:
    """Required integration symbols must exist; seed references must be the starter's.

    A required symbol missing from the catalog could never be satisfied; a
    seed reference spelled differently from the analysis' spelling would
    count the untouched starter as hallucinated.
    """
    index = SymbolIndex(catalog)
    rows = []
    for task in tasks:
        spec = task.spec
        problems = []
        for requirement in spec.requiredIntegration:
            missing = [s for s in requirement.symbols if not index.exists(s)]
            if missing:
                problems.append(f"requiredIntegration {missing} are not in the API catalog")
        starter = task.starter_dir
        seeded = seeded_references(catalog, starter, spec.allowedOutputPaths) if starter else []
        if sorted(spec.seedReferences) != seeded:
            problems.append(
                f"seedReferences {sorted(spec.seedReferences)} differ from the unsupported "
                f"references of the starter files {seeded}"
            )
        rows.append(
            CaseResult(
                task.id,
                REFERENCES_ROW,
                "library references and seeds valid",
                "ok" if not problems else "mismatch",
                ok=not problems,
                detail="; ".join(problems),
            )
        )
    return rows


def _coverage_rows(suite: Suite, cases: Sequence[FixtureCase]) -> list[CaseResult]:
    gaps = coverage_gaps(suite.tasks, cases)
    rows = []
    for task in suite.tasks:
        missing = gaps.get(task.id, [])
        rows.append(
            CaseResult(
                task.id,
                COVERAGE_ROW,
                "negatives fail every assertion",
                "covered" if not missing else f"not failed by any negative: {', '.join(missing)}",
                ok=not missing,
            )
        )
    return rows


def _stage(case: FixtureCase, root: Path) -> Path:
    """Copy only the case's solution files (never expect.json) into a fresh directory."""
    target = root / case.task.id / case.name
    for rel in case.solution_files():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(case.directory / rel, target / rel)
    return target


def run_cases(
    cases: Sequence[FixtureCase],
    verifier: Verifier,
    *,
    concurrency: int = 1,
    on_result: Callable[[CaseResult], None] | None = None,
    repeat: int = 1,
) -> list[CaseResult]:
    """Verify every case with *verifier* and compare; results in the order of *cases*.

    With *repeat* above 1 each case is verified that many times, and a case
    whose observations differ between repeats is a mismatch (a flaky grader
    or analysis): a verdict that cannot be reproduced cannot be re-checked.
    """
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    with tempfile.TemporaryDirectory(prefix="agent-eval-fixtures-") as tmp:
        root = Path(tmp)

        def observed(case: FixtureCase, solution: Path) -> Observation:
            try:
                verification = verifier.verify(case.task.spec, solution, f"fixture-{case.label}")
            except InfrastructureError as exc:
                return Observation(
                    frozenset(), frozenset(), None, False, infrastructure_error=str(exc)
                )
            return observe(verification)

        def one(case: FixtureCase) -> CaseResult:
            solution = _stage(case, root)
            seen = [observed(case, solution) for _ in range(repeat)]
            result = compare(case, seen[0])
            differing = [n for n, o in enumerate(seen[1:], start=2) if o != seen[0]]
            if differing:
                result = dataclasses.replace(
                    result,
                    ok=False,
                    observed="flaky",
                    detail=f"the verdict of repeat {differing[0]} of {repeat} differs from the "
                    f"first ({_describe_observation(seen[0])} vs "
                    f"{_describe_observation(seen[differing[0] - 1])})",
                )
            if on_result is not None:
                on_result(result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return list(pool.map(one, cases))


def verify_tasks(
    project: Project,
    verifier_factory: VerifierFactory[Path],
    *,
    concurrency: int = 1,
    on_result: Callable[[CaseResult], None] | None = None,
    repeat: int = 1,
) -> VerifyReport:
    """Validate the suite and run every fixture case of the project with a verifier.

    Args:
        project: The repository layout (tasks, graders, fixtures, packages).
        verifier_factory: Builds the verifier given a private work directory.
        concurrency: Cases verified in parallel.
        on_result: Called with each case's row as soon as it is known.
        repeat: Verifications per case; a case whose verdict differs between them fails.

    Raises:
        SuiteError: The suite or a fixture case is malformed (before anything runs).
        InfrastructureError: The verifier could not be prepared.
    """
    started = time.monotonic()
    suite = load_suite(project.tasks, graders_dir=project.graders)
    cases = load_fixture_cases(project.fixtures, suite)
    rows = _coverage_rows(suite, cases)
    with tempfile.TemporaryDirectory(prefix="agent-eval-verifier-") as work:
        verifier = verifier_factory(Path(work))
        rows += check_catalog_references(suite.tasks, verifier.api_catalog())
        rows += run_cases(
            cases, verifier, concurrency=concurrency, on_result=on_result, repeat=repeat
        )
    return VerifyReport(
        verifier=verifier.name, rows=tuple(rows), seconds=time.monotonic() - started
    )


def _describe_observation(observation: Observation) -> str:
    failed = sorted(observation.failed_assertions)
    parts = [_describe(failed, sorted(observation.findings))]
    for label, value in (
        ("error", observation.behaviour_error),
        ("infrastructure", observation.infrastructure_error),
    ):
        if value:
            parts.append(f"{label}: {value[:120]}")
    return "; ".join(parts)


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def format_report(report: VerifyReport, *, width: int = COLUMN_WIDTH) -> str:
    """The report as a table (long cells wrapped), mismatch details, and a summary line."""
    header = ("TASK", "CASE", "EXPECTED", "OBSERVED", "RESULT")
    rows = [header] + [
        (r.task_id, r.case, r.expected, r.observed, "OK" if r.ok else "MISMATCH")
        for r in report.rows
    ]
    wrapped = [[_wrap(cell, width) for cell in row] for row in rows]
    widths = [max(len(line) for row in wrapped for line in row[i]) for i in range(len(header))]
    lines = []
    for row in wrapped:
        for index in range(max(len(cell) for cell in row)):
            cells = [cell[index] if index < len(cell) else "" for cell in row]
            lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    details = []
    for r in report.mismatches:
        if r.detail:
            details.append(f"  {r.task_id}/{r.case}: {r.detail}")
        details += [f"    {e}" for e in r.explanations]
    if details:
        lines += ["", "Mismatches:", *details]
    cases = sum(1 for r in report.rows if not r.case.startswith("("))
    verdict = "all match" if report.ok else f"{len(report.mismatches)} mismatch(es)"
    if report.undecided:
        verdict += ", each a failure of the harness's own (nothing decided)"
    lines += [
        "",
        f"{cases} fixture cases with the {report.verifier} verifier in {report.seconds:.1f} s: "
        f"{verdict}",
    ]
    return "\n".join(lines) + "\n"
