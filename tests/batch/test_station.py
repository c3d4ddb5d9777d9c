"""The station's site: the one check of the runs in flight at once (the schema's bound, then
what the machine's memory holds), verifications bounded by cores, the images as the engine
has them (one reason for each that is missing), and the stage a refusal is said under."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agent_eval.batch.admission import Machine
from agent_eval.batch.station import NotReady, Site, step
from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError
from agent_eval.models import RunnerConfig
from agent_eval.models.runner_config import MAX_CONCURRENCY
from agent_eval.verification.protocol import VerifierContext
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


ROOMY = Machine(cores=2, available_bytes=512 << 30)
"""A machine whose memory holds every runs-in-flight figure the schema allows."""


def site(
    tmp_path: Path, engine: FakeEngine, slots: int, *images: str, machine: Machine = ROOMY
) -> Site:
    return Site(
        engine, config(*images), "b", tmp_path / "work", slots=slots, machine=lambda: machine
    )


@pytest.mark.parametrize("slots", [0, MAX_CONCURRENCY + 1])
def test_a_site_refuses_runs_at_once_outside_the_one_bound(tmp_path: Path, slots: int) -> None:
    engine = FakeEngine()
    images = (engine.add_image(), engine.add_image())
    with pytest.raises(ConfigError, match=rf"{slots} runs at once is not in \[1, 128\]"):
        site(tmp_path, engine, slots, *images)
    assert site(tmp_path, engine, MAX_CONCURRENCY, *images).slots == MAX_CONCURRENCY


def test_a_site_refuses_more_runs_than_its_machine_holds_before_anything_starts(
    tmp_path: Path,
) -> None:
    engine = FakeEngine()
    images = (engine.add_image(), engine.add_image())
    small = Machine(cores=2, available_bytes=8 << 30)  # 8 - 1 margin - 2 verifiers: 20 runners
    with pytest.raises(ConfigError, match=r"concurrency 21: this machine holds 20 runs"):
        site(tmp_path, engine, 21, *images, machine=small)
    assert site(tmp_path, engine, 20, *images, machine=small).slots == 20
    assert engine.list_containers("b") == []


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


@pytest.mark.parametrize(("slots", "cores", "verifications"), [(64, 2, 2), (1, 8, 1), (6, 8, 6)])
def test_a_site_verifies_at_most_one_attempt_per_core_whatever_its_runs_in_flight(
    tmp_path: Path, slots: int, cores: int, verifications: int
) -> None:
    engine = FakeEngine()
    image = engine.add_image()
    machine = Machine(cores=cores, available_bytes=512 << 30)
    seen: list[VerifierContext] = []

    def factory(context: VerifierContext) -> Any:
        seen.append(context)
        return object()

    here = site(tmp_path, engine, slots, image, image, machine=machine)
    here.verifier(factory, here.images(), cast(Any, SimpleNamespace(root=tmp_path)))
    assert [context.slots for context in seen] == [verifications]
