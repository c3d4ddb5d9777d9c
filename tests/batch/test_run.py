"""A batch ends with a receipt whatever happens before its first run, and leaves nothing behind.

``run_batch`` on the fake engine, with the repository's real suite and real
wheels: the consumer container is scripted to write what the installer
would, runner containers answer from the request they are given, and the
verifier comes from a factory the test controls. Every problem before the
first run (the verifier's preparation included) is a ``not-run`` receipt
naming it, Ctrl-C there an ``interrupted`` one; in every case the batch's
work directory is gone and no container of the batch is left.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_eval.batch.admission import Machine
from agent_eval.batch.lease import this_process
from agent_eval.batch.ports import Notice, RemoteContext, StartPhase
from agent_eval.batch.run import BatchOutcome, run_batch
from agent_eval.batch.schedule import ExecutorFactory, Schedule
from agent_eval.batch.station import NotReady, Site, StationImages
from agent_eval.consumer.archives import PreparedConsumer
from agent_eval.digests import sha256_bytes
from agent_eval.engine import ContainerSpec
from agent_eval.engine.fake import FakeEngine, Outcome
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.layout import ARCHIVES_MOUNT, CONSUMER_MOUNT, ConsumerLayout
from agent_eval.models import (
    Analysis,
    BehaviourResult,
    Lease,
    ModelIdentity,
    Receipt,
    RunnerIdentity,
    TaskSpec,
)
from agent_eval.project import Project, find_project
from agent_eval.verdict.qualification import current_anchors, qualify_files
from agent_eval.verification.protocol import Verification, Verifier, VerifierContext
from tests.batch.test_executor import NodeExecutor
from tests.batch.test_station import config
from tests.paths import EXAMPLE_SUITE

REPO = Path(__file__).resolve().parents[2]
RUNNER = RunnerIdentity(name="scripted", version="1")
MODEL = ModelIdentity(id="scripted-model", settings={})
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _mount(spec: ContainerSpec, target: str) -> Path:
    return next(m.source for m in spec.mounts if m.target == target)


def install_consumer(spec: ContainerSpec, stdin: bytes | None) -> None:
    """What the installer leaves in the consumer: versions, the catalog, one dist-info each."""
    layout = ConsumerLayout(_mount(spec, CONSUMER_MOUNT))
    (layout.root / "python-version").write_text("3.11.2\n")
    (layout.root / "mypy-version").write_text("1.0\n")
    distributions = []
    for wheel in sorted(_mount(spec, ARCHIVES_MOUNT).glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        info = layout.site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Name: {name.replace('_', '-')}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
        distributions.append({"name": name, "version": version, "packages": [name]})
    catalog = {"schemaVersion": 1, "distributions": distributions, "symbols": []}
    layout.catalog.write_text(json.dumps(catalog))


def answer(spec: ContainerSpec, stdin: bytes | None) -> bytes:
    """A runner that writes a solution and answers the request it was given."""
    request = json.loads(stdin or b"{}")
    (_mount(spec, "/solution") / request["allowedOutputPaths"][0]).write_text("VALUE = 1\n")
    response = {
        "schemaVersion": 1,
        "runId": request["runId"],
        "taskId": request["taskId"],
        "status": "completed",
        "runner": RUNNER.model_dump(),
        "model": MODEL.model_dump(),
    }
    return json.dumps(response).encode()


class PassingVerifier:
    name = "fake"

    def api_catalog(self) -> Mapping[str, Any]:
        return {}

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        analysis = {
            "schemaVersion": 1, "taskId": task.id, "solutionDigest": sha256_bytes(b"s"),
            "syntaxOk": True, "typeCheckOk": True, "contractOk": True, "integrationOk": True,
            "unsupportedApi": [], "unsupportedApiCount": 0, "hallucinatedApi": [],
            "hallucinatedApiCount": 0, "missingDependencies": [], "integration": [],
            "diagnostics": [], "mypyVersion": "1",
        }  # fmt: skip
        behaviour = {
            "schemaVersion": 1, "taskId": task.id, "needsReview": False, "error": None,
            "diagnostics": [],
            "assertions": [
                {"id": a, "passed": True, "observed": True, "safety": a in task.safetyAssertionIds}
                for a in task.assertionIds
            ],
        }  # fmt: skip
        return Verification(
            Analysis.model_validate(analysis),
            json.dumps(analysis).encode(),
            BehaviourResult.model_validate(behaviour),
        )

    def cancel_all(self) -> None:
        pass


class Fixture:
    def __init__(self, tmp_path: Path) -> None:
        self.engine = FakeEngine(default_outcome=Outcome(on_start=answer))
        self.runner_image = self.engine.add_image(tags=("runner:test",))
        self.verifier_image = self.engine.add_image(tags=("verifier:test",))
        self.project: Project = dataclasses.replace(
            find_project(REPO), evidence=tmp_path / "evidence"
        )
        self.config = tmp_path / "runner.json"
        write_model_atomic(
            self.config,
            config(self.runner_image, self.verifier_image, expectedModel=MODEL, concurrency=2),
        )

    def run(
        self, factory: Callable[[VerifierContext], Verifier], only: tuple[str, ...] = ()
    ) -> BatchOutcome:
        # The consumer container is the first one created; runners follow.
        self.engine.script(Outcome(on_start=install_consumer))
        return run_batch(
            self.config,
            self.project,
            verifier_factory=factory,
            connect=lambda _path: self.engine,
            environ={},
            clock=lambda: NOW,
            only=only,
        )

    def run_dir(self) -> Path:
        [batch] = [
            p
            for p in self.project.evidence.iterdir()
            if p.name != ".work" and "batch" not in p.name
        ]
        return batch

    def receipt(self) -> Receipt:
        return read_model(self.run_dir() / "receipt.json", Receipt, what="receipt")

    def assert_nothing_left(self) -> None:
        assert not (self.project.evidence / ".work").exists()
        assert self.engine.list_containers() == []
        # The lease is given up once the cleanup is confirmed; no reserved space stays.
        assert (
            sorted(p.name for p in self.run_dir().iterdir() if p.name.startswith((".", "l"))) == []
        )


@pytest.fixture
def batch(tmp_path: Path) -> Fixture:
    return Fixture(tmp_path)


def test_a_verifier_that_cannot_be_prepared_ends_the_batch_as_not_run(batch: Fixture) -> None:
    def broken(context: VerifierContext) -> Verifier:
        assert (context.consumer_dir / "docs" / "api-catalog.json").is_file()
        raise ConfigError("warming the analysis cache failed: mypy is missing")

    outcome = batch.run(broken)
    assert outcome.status == "not-run" and outcome.exit_code == 2
    receipt = batch.receipt()
    assert receipt.status == "not-run" and receipt.runs == []
    assert receipt.reasons == ["verifier: warming the analysis cache failed: mypy is missing"]
    batch.assert_nothing_left()


def test_ctrl_c_while_the_verifier_warms_up_leaves_an_interrupted_receipt(
    batch: Fixture,
) -> None:
    def interrupted(context: VerifierContext) -> Verifier:
        raise KeyboardInterrupt

    outcome = batch.run(interrupted)
    assert (outcome.status, outcome.exit_code) == ("interrupted", 1)
    receipt = batch.receipt()
    assert receipt.status == "interrupted" and receipt.runs == []
    assert "before the first run" in receipt.reasons[0]
    batch.assert_nothing_left()


def test_ctrl_c_while_the_consumer_is_installed_leaves_an_interrupted_receipt(
    batch: Fixture,
) -> None:
    def never(context: VerifierContext) -> Verifier:
        raise AssertionError("the verifier is never prepared")

    batch.engine.script(Outcome(start_raises=KeyboardInterrupt()))
    outcome = run_batch(
        batch.config,
        batch.project,
        verifier_factory=never,
        connect=lambda _path: batch.engine,
        environ={},
        clock=lambda: NOW,
    )
    assert outcome.status == batch.receipt().status == "interrupted"
    batch.assert_nothing_left()


def test_an_unreadable_config_is_not_run_before_any_engine_is_asked(batch: Fixture) -> None:
    batch.config.write_text("{not json")
    outcome = batch.run(lambda context: PassingVerifier())
    assert outcome.status == "not-run"
    assert batch.receipt().reasons[0].startswith("config: runner config")
    assert batch.engine.containers == {}
    batch.assert_nothing_left()


def test_more_runs_in_flight_than_the_machine_holds_are_refused_before_any_container(
    batch: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = Machine(cores=2, available_bytes=7 << 29)  # 3.5 - 1 margin - 2 verifiers: 2 runners
    monkeypatch.setattr("agent_eval.batch.station.read_machine", lambda: small)
    write_model_atomic(
        batch.config,
        config(batch.runner_image, batch.verifier_image, expectedModel=MODEL, concurrency=3),
    )
    outcome = batch.run(lambda context: PassingVerifier())
    assert (outcome.status, outcome.exit_code) == ("not-run", 2)
    [reason] = batch.receipt().reasons
    assert reason.startswith("config: concurrency 3: this machine holds 2 runs in flight, not 3")
    assert batch.engine.list_containers() == []


def test_a_declared_guide_that_is_missing_is_not_run_naming_the_key(
    batch: Fixture, tmp_path: Path
) -> None:
    # The repository's own setting, not the harness's failure: not-run, exit 2.
    [name, *_] = batch.project.distributions()
    batch.project = dataclasses.replace(
        batch.project, declared_guides={name: tmp_path / "no-such-guide.md"}
    )
    outcome = batch.run(lambda context: PassingVerifier())
    assert (outcome.status, outcome.exit_code) == ("not-run", 2)
    [reason] = batch.receipt().reasons
    assert reason.startswith(f"config: [tool.agent-eval.guides].{name}: ")
    assert "does not exist" in reason
    assert batch.engine.list_containers() == []


def test_a_batch_on_fakes_runs_every_scheduled_run_and_cleans_up(batch: Fixture) -> None:
    outcome = batch.run(lambda context: PassingVerifier())
    assert (outcome.status, outcome.first_successes, outcome.final_successes) == (
        "completed",
        18,
        18,
    )
    receipt = batch.receipt()
    assert [r.runId for r in receipt.runs] == EXAMPLE_SUITE.run_ids()
    assert receipt.selfTest  # no network: the model could only be a scripted one
    assert set(outcome.phase_seconds) == {"preflight", "pack", "consumer", "schedule"}
    batch.assert_nothing_left()


def test_a_partial_batch_runs_only_the_named_runs_and_never_qualifies(batch: Fixture) -> None:
    outcome = batch.run(lambda context: PassingVerifier(), only=("forms", "storage-hash-2"))
    assert (outcome.status, outcome.final_successes) == ("completed", 4)
    receipt = batch.receipt()
    selected = ["storage-hash-2", "forms-1", "forms-2", "forms-3"]
    selected.sort(key=EXAMPLE_SUITE.run_ids().index)
    assert [r.runId for r in receipt.runs] == selected == receipt.selection
    assert receipt.scheduledRuns == 4
    run_dir = batch.run_dir()
    reasons = qualify_files(
        run_dir / "receipt.json", run_dir / "archives.json", current_anchors(batch.project)
    ).reasons
    assert any(r.startswith("partial: the batch ran only ") for r in reasons), reasons
    batch.assert_nothing_left()


def test_an_only_that_names_nothing_of_the_suite_is_not_run_before_any_container(
    batch: Fixture,
) -> None:
    outcome = batch.run(lambda context: PassingVerifier(), only=("forms-4", "nosuch"))
    assert outcome.status == "not-run" and outcome.exit_code == 2
    (reason,) = batch.receipt().reasons
    assert reason.startswith("--only: 'forms-4', 'nosuch' is no task or run of the suite")
    assert batch.engine.containers == {}


def test_a_container_that_cannot_be_removed_stops_the_batch_and_keeps_the_lease(
    batch: Fixture,
) -> None:
    batch.engine.default_outcome = Outcome(on_start=answer, cleanup_fails=True)
    outcome = batch.run(lambda context: PassingVerifier())
    assert (outcome.status, outcome.exit_code) == ("infrastructure-failure", 1)
    receipt = batch.receipt()
    assert any(r.startswith("cleanup:") and "could not be removed" in r for r in receipt.reasons)
    assert any("infrastructure failure in" in r for r in receipt.reasons)
    # Its cleanup is unconfirmed: the lease stays for the reaper.
    assert (batch.run_dir() / "lease.json").is_file()


def old_batch(batch: Fixture, *, lease: Lease) -> Path:
    """A run directory left as SIGKILL leaves one: lease, running receipt, container, work."""
    run_dir = batch.project.evidence / lease.batchId
    run_dir.mkdir(parents=True)
    write_model_atomic(run_dir / "lease.json", lease)
    write_model_atomic(
        run_dir / "receipt.json", Receipt.opened(batch_id=lease.batchId, created_at=NOW)
    )
    spec = ContainerSpec(
        image=batch.runner_image,
        command=("sleep", "1000"),
        role="runner",
        batch_id=lease.batchId,
        run_id="forms-1",
    )
    batch.engine.lease_token = lease.token  # as its batch's bound connection labelled it
    batch.engine.leave_container(spec)
    batch.engine.lease_token = None
    (batch.project.evidence / ".work" / lease.batchId / "runs").mkdir(parents=True)
    return run_dir


def test_a_new_batch_reaps_one_whose_owner_died_and_leaves_a_live_one_alone(
    batch: Fixture,
) -> None:
    finished = subprocess.Popen(["true"])
    finished.wait()  # its pid names no live process now
    dead = this_process("old-batch", NOW).model_copy(update={"pid": finished.pid})
    alive = this_process("live-batch", NOW)
    dead_dir = old_batch(batch, lease=dead)
    live_dir = old_batch(batch, lease=alive)
    notices: list[str] = []
    batch.engine.script(Outcome(on_start=install_consumer))
    outcome = run_batch(
        batch.config,
        batch.project,
        verifier_factory=lambda context: PassingVerifier(),
        connect=lambda _path: batch.engine,
        environ={},
        clock=lambda: NOW,
        notice=notices.append,
    )
    assert outcome.status == "completed"
    closed = read_model(dead_dir / "receipt.json", Receipt, what="receipt")
    assert closed.status == "abandoned" and "is gone" in closed.reasons[-1]
    assert not (dead_dir / "lease.json").exists()
    assert not (batch.project.evidence / ".work" / "old-batch").exists()
    assert batch.engine.list_containers("old-batch") == []
    assert notices == [
        "reaped batch old-batch: marked its receipt abandoned, removed 1 container(s), "
        "removed its work directory"
    ]
    # The live one is untouched.
    assert read_model(live_dir / "receipt.json", Receipt, what="receipt").status == "running"
    assert (live_dir / "lease.json").exists()
    assert len(batch.engine.list_containers("live-batch")) == 1


def test_the_lease_names_the_engine_the_batch_started_containers_on(batch: Fixture) -> None:
    batch.engine.default_outcome = Outcome(on_start=answer, cleanup_fails=True)
    batch.run(lambda context: PassingVerifier())
    lease = read_model(batch.run_dir() / "lease.json", Lease, what="lease")
    assert lease.engine == batch.engine.address


def test_a_batch_whose_containers_are_on_another_engine_keeps_its_lease(batch: Fixture) -> None:
    finished = subprocess.Popen(["true"])
    finished.wait()
    dead = this_process("old-batch", NOW).model_copy(
        update={"pid": finished.pid, "engine": "/run/other-engine.sock"}
    )
    dead_dir = old_batch(batch, lease=dead)
    notices: list[str] = []
    batch.engine.script(Outcome(on_start=install_consumer))
    run_batch(
        batch.config,
        batch.project,
        verifier_factory=lambda context: PassingVerifier(),
        connect=lambda _path: batch.engine,
        environ={},
        clock=lambda: NOW,
        notice=notices.append,
    )
    # Marked abandoned, but its container is not looked for here, and its lease stays.
    assert read_model(dead_dir / "receipt.json", Receipt, what="receipt").status == "abandoned"
    assert len(batch.engine.list_containers("old-batch")) == 1
    assert (dead_dir / "lease.json").exists()
    assert "--runtime-path /run/other-engine.sock" in notices[0]


class FakeCluster:
    """A cluster's placement whose steps can fail; every node it 'has' is lost at its first
    run."""

    gateway = None

    def __init__(self, fail_at: str | None = None) -> None:
        self.fail_at = fail_at
        self.steps: list[str] = []

    def join(self, site: Site, images: StationImages, phase: StartPhase, notice: Notice) -> None:
        self.steps.append("connect")
        phase("cluster", "joining the cluster")
        if self.fail_at == "connect":
            raise NotReady(["cluster: nothing answers at the Ray cluster's address 127.0.0.1:1"])

    def equip(
        self,
        site: Site,
        images: StationImages,
        consumer: PreparedConsumer,
        environment: Mapping[str, str],
        phase: StartPhase,
    ) -> None:
        self.steps.append("equip")

    def executor(self, context: RemoteContext, phase: StartPhase) -> ExecutorFactory:
        self.steps.append("prepare")
        phase("nodes", "preparing the cluster's nodes")
        assert context.lock_digest == context.receipt.consumerLockDigest
        if self.fail_at == "prepare":
            raise NotReady(
                ["cluster: runnerImage r is sha256:aa on node n-1 but sha256:bb on the driver"]
            )

        def lost(schedule: Schedule) -> NodeExecutor:
            return NodeExecutor(schedule, set(EXAMPLE_SUITE.run_ids()))

        return lost

    def close(self) -> list[str]:
        self.steps.append("close")
        return []


def never_prepared(context: VerifierContext) -> Verifier:
    raise AssertionError("on a cluster the driver prepares no verifier of its own")


@pytest.mark.parametrize("step", ["connect", "prepare"])
def test_a_cluster_that_cannot_take_the_batch_ends_it_not_run_and_is_closed(
    batch: Fixture, step: str
) -> None:
    cluster = FakeCluster(fail_at=step)
    batch.engine.script(Outcome(on_start=install_consumer))
    outcome = run_batch(
        batch.config, batch.project, verifier_factory=never_prepared,
        connect=lambda _path: batch.engine, environ={}, clock=lambda: NOW, remote=cluster,
    )  # fmt: skip
    assert (outcome.status, outcome.exit_code) == ("not-run", 2)
    (reason,) = batch.receipt().reasons
    assert reason.startswith("cluster: ") and ("127.0.0.1:1" in reason or "node n-1" in reason)
    assert cluster.steps == (["connect", "close"] if step == "connect" else [
        "connect", "equip", "prepare", "close",
    ])  # fmt: skip
    if step == "connect":  # refused before anything was packed or installed
        assert batch.engine.containers == {}
    batch.assert_nothing_left()


def test_on_a_cluster_the_runs_are_the_nodes_and_the_driver_verifies_nothing(
    batch: Fixture,
) -> None:
    cluster = FakeCluster()
    batch.engine.script(Outcome(on_start=install_consumer))
    outcome = run_batch(
        batch.config, batch.project, verifier_factory=never_prepared,
        connect=lambda _path: batch.engine, environ={}, clock=lambda: NOW, remote=cluster,
    )  # fmt: skip
    assert outcome.status == "infrastructure-failure"
    receipt = batch.receipt()
    assert len(receipt.runs) == 18 and receipt.reasons[-1].startswith("no node is left")
    assert cluster.steps == ["connect", "equip", "prepare", "close"]
    assert "nodes" in outcome.phase_seconds
    batch.assert_nothing_left()
