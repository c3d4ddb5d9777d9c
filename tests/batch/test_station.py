"""The station's site: the one check of the runs in flight at once, the images as the engine
has them (one reason for each that is missing), and the stage a refusal is said under."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_eval.batch.station import NotReady, Site, step
from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError
from agent_eval.models import RunnerConfig
from agent_eval.models.runner_config import MAX_CONCURRENCY
from tests.batch.test_schedule import MODEL, RUNNER


def config(runner_image: str, verifier_image: str, **changes: Any) -> RunnerConfig:
    """A runner.json for the fake engine's two images (*changes* override its fields)."""
    fields: dict[str, Any] = {
        "schemaVersion": 1,
        "executable": "/usr/bin/runner",
        "args": [],
        "envAllowlist": [],
        "expectedRunner": RUNNER,
        "expectedModel": MODEL,
        "submissionTimeoutMs": 60_000,
        "batchTimeoutMs": 600_000,
        "runtimePath": "/run/fake.sock",
        "runnerImage": runner_image,
        "verifierImage": verifier_image,
    }
    return RunnerConfig(**{**fields, **changes})


def site(tmp_path: Path, engine: FakeEngine, slots: int, *images: str) -> Site:
    return Site(engine, config(*images), "b", tmp_path / "work", slots=slots)


@pytest.mark.parametrize("slots", [0, MAX_CONCURRENCY + 1])
def test_a_site_refuses_runs_at_once_outside_the_one_bound(tmp_path: Path, slots: int) -> None:
    engine = FakeEngine()
    images = (engine.add_image(), engine.add_image())
    with pytest.raises(ConfigError, match=rf"{slots} runs at once is not in \[1, 16\]"):
        site(tmp_path, engine, slots, *images)
    assert site(tmp_path, engine, MAX_CONCURRENCY, *images).slots == MAX_CONCURRENCY


def test_a_site_names_each_image_the_engine_does_not_have(tmp_path: Path) -> None:
    engine = FakeEngine()
    present = engine.add_image()
    absent = "sha256:" + "0" * 64
    with pytest.raises(NotReady) as refused:
        site(tmp_path, engine, 1, absent, absent).images()
    assert [r.split(":")[0] for r in refused.value.reasons] == ["runnerImage", "verifierImage"]
    found = site(tmp_path, engine, 1, present, present).images()
    assert (found.runner.image_id, found.verifier.image_id, found.gateway) == (
        present,
        present,
        None,
    )


def test_a_step_says_its_stage_unless_its_refusal_has_its_own_words() -> None:
    def refused() -> None:
        raise ConfigError("no such thing")

    def own() -> None:
        raise NotReady(["runnerImage: absent", "verifierImage: absent"])

    with pytest.raises(NotReady) as staged:
        step("suite", refused)
    assert staged.value.reasons == ["suite: no such thing"]
    with pytest.raises(NotReady) as kept:
        step("images", own)
    assert kept.value.reasons == ["runnerImage: absent", "verifierImage: absent"]
    assert step("config", lambda: 3) == 3
