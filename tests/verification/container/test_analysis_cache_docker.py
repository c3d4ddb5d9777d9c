"""A second batch of the same commit mounts the mypy cache kept with its consumer: no warm-up
container runs, and every attempt gets the verdict it got in the first batch.

Against the real engine, two whole oracle batches in a row, with every
container the engine creates recorded by its labels (batch, run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_eval.batch.run import run_batch
from agent_eval.consumer.cache import kept_entry
from agent_eval.engine import ContainerSpec, list_leftovers
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.layout import CONSUMER_MOUNT
from agent_eval.models import Receipt
from agent_eval.project import find_project
from agent_eval.verification.container.cache import ANALYSIS_DIR
from agent_eval.verification.container.staging import CACHE_SEED_MOUNT
from agent_eval.verification.container.verifier import batch_verifier_factory
from tests.batches import project_copy, write_config

pytestmark = pytest.mark.docker

WARM_UP = "analysis-cache"


def _verdicts(receipt: Receipt) -> dict[tuple[str, int], dict[str, Any]]:
    """Each attempt's verdict and the findings it rests on."""
    fields = {
        "success", "failureCategory", "syntaxOk", "typeCheckOk", "contractOk",
        "integrationOk", "unsupportedApiCount", "hallucinatedApiCount", "safetyPassed",
        "diagnostics",
    }  # fmt: skip
    return {
        (run.runId, attempt.attempt): {
            **attempt.model_dump(mode="json", include=fields),
            "assertions": [(a.id, a.passed, a.observed) for a in attempt.assertions],
        }
        for run in receipt.runs
        for attempt in run.attempts
    }


def test_a_second_batch_reuses_the_kept_mypy_cache_and_gives_the_same_verdicts(
    engine: DockerEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = find_project(project_copy(tmp_path))
    config = write_config(engine, tmp_path / "r.json", "oracle")
    created: list[ContainerSpec] = []
    create = engine.create

    def recorded(spec: ContainerSpec) -> str:
        created.append(spec)
        return create(spec)

    monkeypatch.setattr(engine, "create", recorded)
    notices: list[str] = []
    outcomes = []
    for _ in range(2):
        outcomes.append(
            run_batch(
                config,
                project,
                verifier_factory=batch_verifier_factory(project, notices.append),
                connect=lambda _path: engine,
                notice=notices.append,
            )
        )

    receipts = [Receipt.model_validate_json(o.receipt.read_bytes()) for o in outcomes]
    first, second = (r.batchId for r in receipts)
    assert [(o.status, o.final_successes) for o in outcomes] == [("completed", 18)] * 2
    warm_ups = [(s.batch_id, s.role) for s in created if s.run_id == WARM_UP]
    assert warm_ups == [(first, "verifier")]
    assert not [line for line in notices if "cache" in line], notices

    # Every verification of the second batch started from the cache the first one kept.
    seeds = {
        m.source
        for s in created
        if s.batch_id == second and s.role == "verifier"
        for m in s.mounts
        if m.target == CACHE_SEED_MOUNT
    }
    [seed] = seeds
    consumers = {
        m.source
        for s in created
        if s.batch_id == second
        for m in s.mounts
        if m.target == CONSUMER_MOUNT
    }
    [consumer] = consumers
    entry = kept_entry(consumer)
    assert entry is not None and seed.parent.parent == entry.entry / ANALYSIS_DIR
    assert sum(s.batch_id == second and s.role == "verifier" for s in created) >= 18

    assert _verdicts(receipts[1]) == _verdicts(receipts[0])
    assert all(list_leftovers(engine, r.batchId) == [] for r in receipts)
