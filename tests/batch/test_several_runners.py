"""Several runners in one command share one preparation and one set of slots, and each
still writes the batch it would write alone.

``run_batches`` on the fake engine with the repository's real suite: the library is
packed once and the consumer prepared once; the runners' runs take the shared slots
in turn (round-robin over the configs), so no runner gets a quieter moment than
another; every batch has its own receipt, bound to its own runner and to the same
archives, and passes the checker's evidence rules on its own. Configs that cannot
share a command (another engine, verifier or slot count; one named twice; one agent
twice) are refused naming the file and the field, before any evidence is made. A
signal during the schedules closes every receipt as ``interrupted``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_eval.batch import preflight, station
from agent_eval.batch.run import SeveralOutcome, run_batches
from agent_eval.batch.signals import stopping_on_signals
from agent_eval.cli.run import eval_agent_command, report_several
from agent_eval.engine import ContainerSpec
from agent_eval.engine.fake import FakeEngine, Outcome
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.models import ArchivesManifest, ModelIdentity, Receipt, RunnerIdentity
from agent_eval.project import Project, find_project
from agent_eval.verdict.qualification import current_anchors, evidence_reasons
from agent_eval.verification.protocol import Verifier, VerifierContext
from tests.batch.test_run import NOW, PassingVerifier, install_consumer
from tests.batch.test_station import config
from tests.paths import EXAMPLE_SUITE, REPO

MODEL = ModelIdentity(id="scripted-model", settings={})
ALPHA = RunnerIdentity(name="alpha", version="1")
BETA = RunnerIdentity(name="beta", version="2")


def _mount(spec: ContainerSpec, target: str) -> Path:
    return next(m.source for m in spec.mounts if m.target == target)


class Several:
    """Two runner images on one fake engine, each answering as its own runner."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.engine = FakeEngine(default_outcome=Outcome(on_start=self.answer))
        self.verifier_image = self.engine.add_image(tags=("verifier:test",))
        self.images = {
            ALPHA.name: self.engine.add_image(tags=("alpha:test",)),
            BETA.name: self.engine.add_image(tags=("beta:test",)),
        }
        self.identity_of = {
            self.engine.resolve_image(ref).image_id: name for name, ref in self.images.items()
        }
        self.project: Project = dataclasses.replace(
            find_project(REPO), evidence=tmp_path / "evidence"
        )
        self.configs = [self.write(ALPHA), self.write(BETA)]
        self.on_runner: Callable[[int], None] = lambda _n: None
        self.runner_calls = 0
        self._lock = threading.Lock()

    def write(self, runner: RunnerIdentity, name: str | None = None, **changes: Any) -> Path:
        path = self.tmp_path / (name or f"{runner.name}.json")
        fields = {"expectedRunner": runner, "expectedModel": MODEL, "concurrency": 2, **changes}
        write_model_atomic(path, config(self.images[runner.name], self.verifier_image, **fields))
        return path

    def answer(self, spec: ContainerSpec, stdin: bytes | None) -> bytes:
        with self._lock:
            self.runner_calls += 1
            calls = self.runner_calls
        self.on_runner(calls)
        runner = ALPHA if self.identity_of[spec.image] == ALPHA.name else BETA
        request = json.loads(stdin or b"{}")
        (_mount(spec, "/solution") / request["allowedOutputPaths"][0]).write_text("VALUE = 1\n")
        response = {
            "schemaVersion": 1, "runId": request["runId"], "taskId": request["taskId"],
            "status": "completed", "runner": runner.model_dump(), "model": MODEL.model_dump(),
        }  # fmt: skip
        return json.dumps(response).encode()

    def run(
        self,
        configs: list[Path] | None = None,
        factory: Callable[[VerifierContext], Verifier] = lambda _c: PassingVerifier(),
    ) -> SeveralOutcome:
        self.engine.script(Outcome(on_start=install_consumer))
        return run_batches(
            configs or self.configs,
            self.project,
            verifier_factory=factory,
            connect=lambda _path: self.engine,
            environ={},
            clock=lambda: NOW,
        )

    def evidence_entries(self) -> list[str]:
        if not self.project.evidence.exists():
            return []
        return sorted(p.name for p in self.project.evidence.iterdir())


@pytest.fixture
def several(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Several:
    return Several(tmp_path)


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[object]:
    calls: list[object] = []
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_two_runners_pack_once_prepare_one_consumer_and_write_a_batch_each(
    several: Several, monkeypatch: pytest.MonkeyPatch
) -> None:
    packs = _counted(monkeypatch, preflight, "build_archives")
    consumers = _counted(monkeypatch, station, "batch_consumer")
    outcome = several.run()
    assert (len(packs), len(consumers)) == (1, 1)
    assert [o.status for o in outcome.outcomes] == ["completed", "completed"]
    assert outcome.exit_code == 0
    anchors = current_anchors(several.project)
    manifests = []
    for batch, runner in zip(outcome.outcomes, (ALPHA, BETA), strict=True):
        run_dir = batch.receipt.parent
        receipt = read_model(batch.receipt, Receipt, what="receipt")
        assert receipt.runner == runner and receipt.status == "completed"
        assert [r.runId for r in receipt.runs] == EXAMPLE_SUITE.run_ids()
        assert receipt.finalSuccesses == len(EXAMPLE_SUITE.run_ids())
        # Each batch stands on its own before the checker: its archives, bindings and
        # files are whole (the fake verifier's analyses name a solution digest of their
        # own, the one thing the checker finds; the docker test has none of that).
        reasons = evidence_reasons(batch.receipt, run_dir / "archives.json", anchors)
        assert reasons and all(r.startswith("analysis-integrity: ") for r in reasons), reasons
        manifests.append(read_model(run_dir / "archives.json", ArchivesManifest, what="a"))
        assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith((".", "l"))) == []
    # The same library for both, each batch with its own copy of the wheels.
    assert manifests[0].archives == manifests[1].archives
    assert manifests[0].runner != manifests[1].runner
    assert outcome.outcomes[0].receipt.parent != outcome.outcomes[1].receipt.parent
    assert several.engine.list_containers() == []
    assert not (several.project.evidence / ".work").exists()


def test_the_runners_take_the_shared_slots_in_turn(several: Several) -> None:
    outcome = several.run()
    members = [member for member, _ in outcome.order]
    runs = len(EXAMPLE_SUITE.run_ids())
    assert members == [0, 1] * runs
    assert [r for m, r in outcome.order if m == 0] == EXAMPLE_SUITE.run_ids()
    assert [r for m, r in outcome.order if m == 1] == EXAMPLE_SUITE.run_ids()


def test_one_runner_stopped_by_infrastructure_leaves_the_other_running(
    several: Several,
) -> None:
    beta_image = several.engine.resolve_image(several.images[BETA.name]).image_id
    answer = several.answer

    def beta_fails(spec: ContainerSpec, stdin: bytes | None) -> bytes:
        if spec.image == beta_image:
            raise OSError("the engine went away")
        return answer(spec, stdin)

    several.engine.default_outcome = Outcome(on_start=beta_fails)
    outcome = several.run()
    alpha, beta = outcome.outcomes
    assert alpha.status == "completed" and alpha.final_successes == len(EXAMPLE_SUITE.run_ids())
    assert beta.status == "infrastructure-failure"
    assert outcome.exit_code == 1


def test_a_runner_that_cannot_be_prepared_runs_none_of_them(several: Several) -> None:
    def broken(context: VerifierContext) -> Verifier:
        raise ConfigError("warming the analysis cache failed")

    outcome = several.run(factory=broken)
    first, second = outcome.outcomes
    assert (first.status, second.status) == ("not-run", "not-run")
    assert first.reasons == ("verifier: warming the analysis cache failed",)
    [reason] = second.reasons
    assert str(several.configs[0]) in reason and "none of them ran" in reason
    assert several.runner_calls == 0
    assert outcome.exit_code == 2
    assert several.engine.list_containers() == []


def test_a_later_runner_that_cannot_be_prepared_closes_the_prepared_ones_not_run(
    several: Several,
) -> None:
    made: list[VerifierContext] = []

    def second_fails(context: VerifierContext) -> Verifier:
        made.append(context)
        if len(made) == 2:
            raise ConfigError("warming the analysis cache failed")
        return PassingVerifier()

    outcome = several.run(factory=second_fails)
    first, second = outcome.outcomes
    assert (first.status, second.status) == ("not-run", "not-run")
    [reason] = first.reasons
    assert reason.startswith(f"the batch of {several.configs[1]} (run together with this one)")
    assert second.reasons == ("verifier: warming the analysis cache failed",)
    assert several.runner_calls == 0
    assert several.engine.list_containers() == []
    assert not (several.project.evidence / ".work").exists()


def test_a_signal_during_the_schedules_closes_every_receipt_as_interrupted(
    several: Several,
) -> None:
    def interrupt_once(calls: int) -> None:
        if calls == 3:
            os.kill(os.getpid(), signal.SIGINT)

    several.on_runner = interrupt_once
    with stopping_on_signals() as signals:
        outcome = several.run()
        signals.settle()
    for batch in outcome.outcomes:
        receipt = read_model(batch.receipt, Receipt, what="receipt")
        assert receipt.status == "interrupted", receipt.reasons
        assert "interrupted by the operator (Ctrl-C)" in receipt.reasons
        # The runs it started are recorded; none started after the signal.
        assert 0 < len(receipt.runs) < len(EXAMPLE_SUITE.run_ids())
    assert several.engine.list_containers() == []
    assert outcome.exit_code == 1


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"verifierImage": "other-verifier"}, "verifierImage"),
        ({"runtimePath": "/run/other.sock"}, "runtimePath"),
        ({"concurrency": 1}, "concurrency"),
    ],
)
def test_configs_that_cannot_share_the_batch_are_refused_naming_file_and_field(
    several: Several, changes: dict[str, Any], field: str
) -> None:
    if field == "verifierImage":
        changes = {field: several.engine.add_image(tags=("other:test",))}
    other = several.write(BETA, "other.json", **changes)
    with pytest.raises(ConfigError, match=rf"^{other}: {field} is ") as refused:
        several.run([several.configs[0], other])
    assert str(several.configs[0]) in str(refused.value)
    assert several.evidence_entries() == []


def test_a_config_named_twice_or_twice_the_same_agent_is_refused(several: Several) -> None:
    alpha = several.configs[0]
    with pytest.raises(ConfigError, match="the runner config is named twice"):
        several.run([alpha, alpha])
    copy = several.tmp_path / "copy.json"
    copy.write_bytes(alpha.read_bytes())
    with pytest.raises(ConfigError, match=f"^{copy}: the same runner config as {alpha}"):
        several.run([alpha, copy])
    again = several.write(ALPHA, "again.json", concurrency=2, submissionTimeoutMs=1000)
    with pytest.raises(ConfigError, match=f"^{again}: expectedRunner and expectedModel"):
        several.run([alpha, again])
    assert several.evidence_entries() == []


@pytest.mark.parametrize(
    "option", [["--resume", "."], ["--junit", "out.xml"], ["--executor", "ray"]]
)
def test_options_of_one_runner_with_several_configs_are_usage_errors(
    several: Several, option: list[str]
) -> None:
    configs = [arg for path in several.configs for arg in ("--runner-config", str(path))]
    result = CliRunner().invoke(eval_agent_command, [*configs, "--project", str(REPO), *option])
    assert result.exit_code == 2, result.output
    assert f"{option[0]}" in result.output and "one --runner-config" in result.output
    assert "Traceback" not in result.output


def test_batches_that_cannot_be_set_side_by_side_leave_the_line_without_a_matrix(
    several: Several, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fake verifier's analyses fail the checker's evidence rules: no matrix of them.
    outcome = several.run()
    said: list[str] = []
    code = report_several(outcome, several.project, said.append)
    line = json.loads(capsys.readouterr().out)
    assert code == 1
    assert line["status"] == "completed" and line["matrix"] is None
    # Each batch's own line, in the configs' order (outside the working directory:
    # the absolute path).
    assert [Path(b["receipt"]) for b in line["batches"]] == [o.receipt for o in outcome.outcomes]
    assert [b["finalSuccesses"] for b in line["batches"]] == [18, 18]
    assert any(s.startswith("no matrix: ") for s in said), said
    assert not list(several.project.evidence.glob("matrix-*.json"))
