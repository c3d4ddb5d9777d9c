"""The verifier container gives every fixture exactly the verdict the local verifier gives,
and ``agent-eval tasks verify --verifier docker`` runs it from the command line.

The local verifier analyses in-process against the library's sources and grades
in a subprocess; the container analyses and grades inside the verifier image
against a consumer made from the same sources. Per fixture, the observed
failing assertions, static findings, early errors and review requests must be
equal. A warm analysis cache may only make the container faster: the analysis
it writes is byte-identical to a cold one. These run every fixture on both
engines, so they take a few minutes.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.consumer.source import prepare_source_consumer
from agent_eval.engine import list_leftovers
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.images.build import build_images
from agent_eval.project import find_project
from agent_eval.suite.tasks import load_suite
from agent_eval.verification.container.cache import warm_analysis_cache
from agent_eval.verification.container.run import VerifierSetup, verify_in_container
from agent_eval.verification.container.verifier import source_verifiers
from agent_eval.verification.fixture_check import VerifyReport, verify_tasks
from agent_eval.verification.local import LocalVerifier
from agent_eval.verification.protocol import Verifier
from tests.paths import REPO

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def verifier_image(engine: DockerEngine, base_image: str) -> str:
    return build_images(engine, find_project(REPO).root).verifier


def verdicts(report: VerifyReport) -> dict[tuple[str, str], tuple[str, bool]]:
    return {(row.task_id, row.case): (row.observed, row.ok) for row in report.rows}


def test_the_docker_verifier_gives_every_fixture_the_verdict_of_the_local_verifier(
    verifier_image: str, engine: DockerEngine
) -> None:
    project = find_project(REPO)

    def local(work_dir: Path) -> Verifier:
        return LocalVerifier.prepare(
            packages_dir=project.packages,
            tasks_dir=project.tasks,
            graders_dir=project.graders,
            work_dir=work_dir,
            slots=2,
        )

    local_report = verify_tasks(project, local, concurrency=2)
    with source_verifiers(engine, project, verifier_image=verifier_image, slots=2) as build:
        docker_report = verify_tasks(project, build, concurrency=2)

    assert docker_report.verifier == "docker" and local_report.verifier == "local"
    assert local_report.ok, [r for r in local_report.rows if not r.ok]
    assert docker_report.ok, [r for r in docker_report.rows if not r.ok]
    assert verdicts(docker_report) == verdicts(local_report)
    assert len([r for r in docker_report.rows if not r.case.startswith("(")]) >= 50


def _tasks_verify_containers(engine: DockerEngine) -> set[str]:
    return {
        c.container_id for c in list_leftovers(engine) if c.batch_id.startswith("tasks-verify-")
    }


# Serial: a tasks-verify container that appears while it runs is its own (one left by
# a run killed before this one, on a reused engine, is not).
@pytest.mark.serial
def test_tasks_verify_runs_the_docker_verifier_from_the_command_line(
    tmp_path: Path, verifier_image: str, engine: DockerEngine
) -> None:
    before = _tasks_verify_containers(engine)
    for name in ("tasks", "graders", "packages"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    for case in sorted((REPO / "fixtures").glob("*/correct")):
        shutil.copytree(case, tmp_path / "fixtures" / case.parent.name / case.name)

    result = CliRunner().invoke(
        main,
        [
            "tasks",
            "verify",
            "--verifier",
            "docker",
            "--concurrency",
            "2",
            "--verifier-image",
            verifier_image,
            "--project",
            str(tmp_path),
        ],
    )

    # Only the reference solutions are there: they pass, and the coverage rows
    # report the missing negatives.
    assert result.exit_code == 1, result.output
    rows = [line.split() for line in result.output.splitlines() if line.strip()]
    correct = [r for r in rows if len(r) >= 2 and r[1] == "correct"]
    assert len(correct) == 6 and all(r[-1] == "OK" for r in correct), result.output
    assert "6 fixture cases with the docker verifier" in result.output
    # Only this command's containers (a fresh tasks-verify batch) are its business.
    assert _tasks_verify_containers(engine) - before == set()


def test_a_warm_analysis_cache_changes_no_finding(
    tmp_path: Path, engine: DockerEngine, verifier_image: str
) -> None:
    project = find_project(REPO)
    suite = load_suite(project.tasks, graders_dir=project.graders)
    consumer = prepare_source_consumer(project.packages, tmp_path / "consumer")
    batch = f"test-cache-{uuid.uuid4().hex[:12]}"
    cache = warm_analysis_cache(
        engine, verifier_image, consumer, tmp_path / "cache", batch_id=batch
    )
    task = next(t for t in suite.tasks if t.id == "error-recovery")
    solution = tmp_path / "solution"
    solution.mkdir()
    shutil.copy(project.fixtures / task.id / "edited-seed-alias" / "solution.py", solution)

    runs = [
        verify_in_container(
            VerifierSetup(
                engine=engine,
                image=verifier_image,
                consumer_dir=consumer,
                graders_dir=find_project(task.directory).graders,
                batch_id=batch,
                analysis_cache=seed,
            ),
            task.spec,
            task.directory,
            solution,
            run_id=f"{task.id}-{n}",
            slot=0,
        )
        for n, seed in enumerate((None, cache))
    ]

    cold, warm = runs
    assert warm.analysis_json == cold.analysis_json
    assert json.loads(warm.analysis_json)["hallucinatedApiCount"] > 0
    assert warm.behaviour == cold.behaviour
    assert list_leftovers(engine, batch) == []
