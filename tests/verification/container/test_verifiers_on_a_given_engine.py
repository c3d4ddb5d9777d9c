"""The fixture and re-verification verifiers run on the engine they are given, whichever it is.

Invariants, with the in-memory engine standing in for the local one: an
absent verifier image is named with how to build it or pin another; a
recorded verifier image id that its pinned reference does not resolve to here
is refused before any container runs; neither factory leaves a container on
the engine, nor closes it (whoever connected it does).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import InfrastructureError
from agent_eval.models import ArchivesManifest
from agent_eval.project import find_project
from agent_eval.verification.container.verifier import evidence_verifiers, source_verifiers
from tests.evidence_builders import VERIFIER_IMAGE, archives_manifest
from tests.paths import REPO


def test_tasks_verify_without_the_verifier_image_says_how_to_get_one() -> None:
    engine = FakeEngine()
    with (
        pytest.raises(InfrastructureError, match=r"images build.*--verifier-image"),
        source_verifiers(engine, find_project(REPO)),
    ):
        pass
    with (
        pytest.raises(InfrastructureError, match=f"{VERIFIER_IMAGE} is not present"),
        source_verifiers(engine, find_project(REPO), verifier_image=VERIFIER_IMAGE),
    ):
        pass
    assert engine.containers == {} and not engine.closed


def test_a_recorded_verifier_id_its_reference_no_longer_names_is_refused_before_a_container(
    tmp_path: Path,
) -> None:
    engine = FakeEngine()
    found = engine.add_image(repo_digests=(VERIFIER_IMAGE,))
    archives = ArchivesManifest.model_validate(archives_manifest(b"wheel"))
    assert archives.verifierImage.imageId != found
    with (
        pytest.raises(InfrastructureError, match=f"resolves to here \\({found}\\)"),
        evidence_verifiers(engine, find_project(REPO), archives, tmp_path),
    ):
        pass
    assert engine.containers == {} and not engine.closed
