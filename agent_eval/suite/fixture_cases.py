"""Fixture cases: developer-written solutions with the verdict each must get.

A case is ``fixtures/<task-id>/<case>/``: the solution files (paths from the
task's ``allowedOutputPaths``) and ``expect.json``, which says what the case
is for::

    {"schemaVersion": 1, "kind": "correct", "description": "..."}
    {"schemaVersion": 1, "kind": "negative", "description": "...",
     "failedAssertions": ["invalid-order-never-saved"], "findings": []}

A correct case must pass everything. A negative case names exactly the
assertions that must fail (``"all"`` when the solution cannot even be
imported) and exactly the static-analysis findings it must trigger (the
analysis categories, plus ``hallucinated-api`` for an unsupported reference
that is not an unchanged seed).

Coverage: for every task, the negatives that name their failing assertions
one by one must together fail every declared assertion, safety assertions
included. A case that fails ``"all"`` covers nothing, since it says nothing
about any single rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from agent_eval.errors import EvidenceError, SuiteError
from agent_eval.evidence_io import format_validation_error, parse_json, read_bounded
from agent_eval.models.fixture import CorrectCase, NegativeCase, parse_expectation
from agent_eval.suite.tasks import Suite, Task, check_plain_tree

__all__ = ["FixtureCase", "coverage_gaps", "load_fixture_cases"]

EXPECT_FILE = "expect.json"

_IGNORED = {"__pycache__", ".mypy_cache", ".pytest_cache"}
_MAX_EXPECT_BYTES = 64 * 1024


@dataclass(frozen=True)
class FixtureCase:
    """One case directory and its validated expectation."""

    task: Task
    name: str
    directory: Path
    expectation: CorrectCase | NegativeCase

    @property
    def label(self) -> str:
        """``<task-id>/<case>``."""
        return f"{self.task.id}/{self.name}"

    def solution_files(self) -> list[str]:
        """The case's solution files (relative paths, from allowedOutputPaths)."""
        return [p for p in self.task.spec.allowedOutputPaths if (self.directory / p).is_file()]


def _error(label: str, message: str) -> SuiteError:
    return SuiteError(f"fixture {label}: {message}")


def _read_expectation(path: Path, label: str) -> CorrectCase | NegativeCase:
    try:
        data = read_bounded(path, what=EXPECT_FILE, max_bytes=_MAX_EXPECT_BYTES)
        parse_json(data, where=EXPECT_FILE)
        return parse_expectation(data)
    except EvidenceError as exc:
        raise _error(label, str(exc)) from exc
    except ValidationError as exc:
        raise _error(label, f"{EXPECT_FILE}: {format_validation_error(exc)}") from exc


def _files_under(directory: Path) -> list[str]:
    found = []
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if _IGNORED.intersection(rel.parts) or path.is_dir():
            continue
        found.append(rel.as_posix())
    return found


def _load_case(task: Task, directory: Path) -> FixtureCase:
    label = f"{task.id}/{directory.name}"
    expectation = _read_expectation(directory / EXPECT_FILE, label)
    allowed = set(task.spec.allowedOutputPaths)
    for rel in _files_under(directory):
        if rel != EXPECT_FILE and rel not in allowed:
            raise _error(
                label,
                f"{rel} is neither {EXPECT_FILE} nor in the task's allowedOutputPaths "
                f"{sorted(allowed)}",
            )
    case = FixtureCase(task=task, name=directory.name, directory=directory, expectation=expectation)
    if not case.solution_files():
        raise _error(label, f"has no solution file (expected one of {sorted(allowed)})")
    if isinstance(expectation, NegativeCase):
        unknown = sorted(expectation.targeted - set(task.spec.assertionIds))
        if unknown:
            raise _error(
                label,
                f"failedAssertions {unknown} are not assertions of task {task.id!r} "
                f"{list(task.spec.assertionIds)}",
            )
    return case


def load_fixture_cases(fixtures_dir: Path, suite: Suite) -> list[FixtureCase]:
    """Every fixture case of every task, in suite order, then by case name.

    Raises:
        SuiteError: A task has no fixtures or no correct case, a directory is
            not a task, a case is malformed or names assertions its task does
            not declare.
    """
    if not fixtures_dir.is_dir():
        raise SuiteError(f"{fixtures_dir}: the fixtures directory does not exist")
    check_plain_tree(fixtures_dir, "the fixtures directory")
    known = {task.id for task in suite.tasks}
    strays = sorted(
        p.name
        for p in fixtures_dir.iterdir()
        if p.is_dir() and p.name not in known and p.name not in _IGNORED
    )
    if strays:
        raise SuiteError(f"{fixtures_dir}: {strays} are not task ids of the suite {sorted(known)}")
    cases: list[FixtureCase] = []
    for task in suite.tasks:
        task_dir = fixtures_dir / task.id
        if not task_dir.is_dir():
            raise SuiteError(f"fixtures for task {task.id!r}: {task_dir} does not exist")
        found = [
            _load_case(task, d)
            for d in sorted(task_dir.iterdir())
            if d.is_dir() and d.name not in _IGNORED
        ]
        if not any(isinstance(c.expectation, CorrectCase) for c in found):
            raise SuiteError(
                f"fixtures for task {task.id!r}: no correct case; add at least one "
                f"reference solution with kind 'correct'"
            )
        cases.extend(found)
    return cases


def coverage_gaps(tasks: Iterable[Task], cases: Sequence[FixtureCase]) -> dict[str, list[str]]:
    """For each task, the declared assertions that no negative case fails one by one.

    Returns:
        ``{task_id: [assertion ids]}`` for the tasks with gaps; empty when covered.
    """
    gaps: dict[str, list[str]] = {}
    for task in tasks:
        covered: set[str] = set()
        for case in cases:
            if case.task.id == task.id and isinstance(case.expectation, NegativeCase):
                covered |= case.expectation.targeted
        missing = [a for a in task.spec.assertionIds if a not in covered]
        if missing:
            gaps[task.id] = missing
    return gaps
