"""Declared value types cross the real process boundary, and the contract check accepts them.

The local verifier analyses the ``tests/data/value-types`` task's solutions
with mypy against its contract (whose signatures take ``date`` and
``Decimal`` and return ``timedelta``, ``date`` and a dataclass) and grades
them through the trusted parent and a separate child process: a solution
using those types passes with a clean contract check; one returning a type
the grader did not declare (a ``datetime`` for a ``date``, which mypy
accepts) fails on its own account, a behaviour error, never the
infrastructure's; one whose signature says another type fails the contract.
A child that forges what goes on the pipe (a tag its own encoder would never
write: out of range, undeclared, malformed) fails on its own account too: the
trusted parent refuses the value, it never raises on it.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_eval.models.task import TaskSpec
from agent_eval.verification.local import LocalVerifier
from agent_eval.verification.local_grading import grade_in_subprocess
from agent_eval.verification.protocol import Verification
from tests.grading.test_graders_kit_values import SOLUTION, TASK
from tests.paths import REPO

# A datetime is a date to mypy, but not the type the grader declared.
WRONG_TYPE = SOLUTION.replace(
    "    return due + grace",
    "    from datetime import datetime\n\n    return datetime(2026, 12, 19)",
)
MISTYPED = SOLUTION.replace(
    "def grace_period(due: date, balance: Decimal) -> timedelta:",
    "def grace_period(due: date, balance: Decimal) -> int:",
)


def task() -> TaskSpec:
    return TaskSpec.model_validate_json((TASK / "task.json").read_bytes())


def solution_dir(root: Path, source: str) -> Path:
    directory = root / "solution"
    directory.mkdir(parents=True)
    (directory / "solution.py").write_text(source, encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def local_verifier(tmp_path_factory: pytest.TempPathFactory) -> LocalVerifier:
    return LocalVerifier.prepare(
        packages_dir=REPO / "packages",
        tasks_dir=TASK.parent,
        graders_dir=REPO / "graders",
        work_dir=tmp_path_factory.mktemp("local-verifier"),
    )


def check_passes(verification: Verification) -> None:
    assert verification.analysis.contractOk, verification.analysis.diagnostics
    behaviour = verification.behaviour
    assert behaviour.error is None, behaviour.error
    assert [a.id for a in behaviour.assertions if not a.passed] == []


def check_wrong_type_fails_on_its_own(verification: Verification) -> None:
    assert verification.analysis.contractOk, verification.analysis.diagnostics
    behaviour = verification.behaviour
    assert behaviour.error is not None and behaviour.error.category == "behaviour"
    assert "non-JSON value of type datetime" in behaviour.error.message
    assert [a.id for a in behaviour.assertions if not a.passed] == ["pay-by-date"]


def test_a_solution_using_the_declared_types_passes_the_local_verifier(
    local_verifier: LocalVerifier, tmp_path: Path
) -> None:
    check_passes(local_verifier.verify(task(), solution_dir(tmp_path, SOLUTION), "value-types-1"))


def test_a_solution_returning_an_undeclared_type_fails_the_local_verifier_on_its_own(
    local_verifier: LocalVerifier, tmp_path: Path
) -> None:
    solution = solution_dir(tmp_path, WRONG_TYPE)
    check_wrong_type_fails_on_its_own(local_verifier.verify(task(), solution, "value-types-2"))


def test_a_signature_returning_another_type_fails_the_contract_check(
    local_verifier: LocalVerifier, tmp_path: Path
) -> None:
    solution = solution_dir(tmp_path, MISTYPED)
    analysis = local_verifier.verify(task(), solution, "value-types-3").analysis
    assert not analysis.contractOk
    assert any(
        d.category == "contract-mismatch" and "`grace_period`" in d.message
        for d in analysis.diagnostics
    ), analysis.diagnostics


FORGED: dict[str, Any] = {
    "decimal-exponent": {"$type": "decimal", "value": "1e-99999999999999999999"},
    "duration-range": {"$type": "timedelta", "value": -(10**6) * 86400 * 999999999 - 1},
    "enum-by-module-name": {"$type": "enum", "name": "os.system", "value": "true"},
    "record-missing-field": {
        "$type": "record",
        "name": "Window",
        "fields": {"start": {"$type": "date", "value": "2026-12-03"}},
    },
    "unknown-tag": {"$type": "pickle", "value": "gASVAAAA"},
    "too-deep": json.loads("[" * 80 + "]" * 80),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_value_on_the_pipe_is_refused_as_the_solutions_failure(
    name: str, tmp_path: Path
) -> None:
    # The solution replaces its process's encoder, so its answers are raw wire.
    forged = json.dumps(FORGED[name])
    source = SOLUTION + textwrap.dedent(
        f"""
        import json as _json, sys as _sys

        _child = _sys.modules.get("agent_eval.verification.runtime.child")
        if _child is not None:
            _child.encode = lambda value, types=None: _json.loads({forged!r})
        """
    )
    behaviour = grade_in_subprocess(
        TASK,
        solution_dir(tmp_path, source),
        [REPO / "packages" / "appkit-core" / "src"],
        graders_dir=REPO / "graders",
    )
    assert behaviour.error is not None, behaviour
    assert behaviour.error.category == "behaviour", behaviour.error
    assert "refused" in behaviour.error.message
    assert not any(a.passed for a in behaviour.assertions)
