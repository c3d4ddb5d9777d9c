"""Declared value types cross the verifier container's boundary as they do locally.

The ``tests/data/value-types`` task runs in the hardened verifier container
(the trusted parent, the solution in an unprivileged child): a solution
whose functions take a ``date`` and a ``Decimal`` and return a ``timedelta``,
a ``date`` and a dataclass passes with a clean contract check; one returning
a type the grader did not declare fails on its own account (a behaviour
error), never as infrastructure, and no container is left behind.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agent_eval.consumer.source import prepare_source_consumer
from agent_eval.engine import list_leftovers
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.images.build import build_images
from agent_eval.project import find_project
from agent_eval.verification.container.run import VerifierSetup, verify_in_container
from agent_eval.verification.protocol import Verification
from tests.grading.test_graders_kit_values import SOLUTION, TASK
from tests.paths import REPO
from tests.verification.test_value_types_verified import (
    WRONG_TYPE,
    check_passes,
    check_wrong_type_fails_on_its_own,
    solution_dir,
    task,
)

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def verifier_image(engine: DockerEngine, base_image: str) -> str:
    return build_images(engine, find_project(REPO).root).verifier


@pytest.fixture(scope="module")
def consumer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_source_consumer(REPO / "packages", tmp_path_factory.mktemp("c") / "consumer")


def verify(
    engine: DockerEngine, image: str, consumer: Path, root: Path, source: str
) -> Verification:
    batch = f"test-values-{uuid.uuid4().hex[:12]}"
    staging = root / "staging"
    staging.mkdir(parents=True)
    try:
        return verify_in_container(
            VerifierSetup(
                engine=engine,
                image=image,
                consumer_dir=consumer,
                graders_dir=REPO / "graders",
                batch_id=batch,
                staging_root=staging,
            ),
            task(),
            TASK,
            solution_dir(root, source),
            run_id="value-types-1",
            slot=0,
        ).as_verification()
    finally:
        assert list_leftovers(engine, batch) == []


def test_a_solution_using_the_declared_types_passes_in_the_verifier_container(
    engine: DockerEngine, verifier_image: str, consumer: Path, tmp_path: Path
) -> None:
    check_passes(verify(engine, verifier_image, consumer, tmp_path, SOLUTION))


def test_a_solution_returning_an_undeclared_type_fails_in_the_container_on_its_own(
    engine: DockerEngine, verifier_image: str, consumer: Path, tmp_path: Path
) -> None:
    check_wrong_type_fails_on_its_own(
        verify(engine, verifier_image, consumer, tmp_path, WRONG_TYPE)
    )
