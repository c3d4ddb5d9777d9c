"""The storage-hash grader passes the reference solution, fails every negative fixture on
exactly its declared assertions, counts any refusal of tampered content as safe (only
appkit's IntegrityError as right), and never lets a malformed digest reach the store.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from tests.task_grading import (
    correct_cases,
    expected_failures,
    grade_fixture,
    grade_stand_in,
    negative_cases,
)

TASK = "storage-hash"


@pytest.mark.parametrize("case", correct_cases(TASK), ids=lambda c: c.name)
def test_the_reference_solution_passes_every_assertion(case: Any) -> None:
    report = grade_fixture(case)
    assert report.all_passed, report.failed_ids


@pytest.mark.parametrize("case", negative_cases(TASK), ids=lambda c: c.name)
def test_each_negative_fails_exactly_its_declared_assertions(case: Any) -> None:
    assert set(grade_fixture(case).failed_ids) == expected_failures(case)


def canonical_store() -> dict[str, Any]:
    """A hand-written solution: right digests and bytes, loads refused with *error*."""

    def store_document(document: dict[str, Any], write: Any) -> str:
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        write(digest, text)
        return digest

    return {"store_document": store_document}


def test_refusing_every_load_is_safe_but_not_a_round_trip() -> None:
    def make() -> dict[str, Any]:
        def load_document(digest: str, read: Any) -> dict[str, Any]:
            raise RuntimeError("storage is read-only today")

        return {**canonical_store(), "load_document": load_document}

    report = grade_stand_in(TASK, make)
    assert report.passed("digest-is-content-hash") and report.passed("stored-bytes-canonical")
    assert report.passed("tampered-content-rejected")
    assert set(report.failed_ids) == {
        "round-trip",
        "integrity-error-raised",
        "missing-document-reported",
        "malformed-digest-rejected",
    }


def test_returning_whatever_is_stored_is_unsafe() -> None:
    def make() -> dict[str, Any]:
        def load_document(digest: str, read: Any) -> dict[str, Any]:
            text = read(digest)
            if text is None:
                raise LookupError(digest)
            document: dict[str, Any] = json.loads(text)
            return document

        return {**canonical_store(), "load_document": load_document}

    report = grade_stand_in(TASK, make)
    assert not report.passed("tampered-content-rejected")
    assert report.outcome("tampered-content-rejected").safety
