"""A resumed batch runs only what its predecessor left without a valid final verdict, bound to
the same identities, and the checker's decision on the chain equals one whole batch's.

On the fake engine, with the repository's real suite and real wheels (see
test_run.py): a batch stopped by an infrastructure failure after some runs
is resumed; the new batch runs the runs left, names its predecessor and the
runs it reuses, and qualifies exactly as a batch that ran everything at
once. What would bind it to other identities, or leave nothing to run, is
refused before any run, naming the field (not-run, exit 2).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agent_eval.batch.run import BatchOutcome, run_batch
from agent_eval.digests import file_sha256
from agent_eval.engine.fake import Outcome
from agent_eval.errors import InfrastructureError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.models import Receipt, RunnerConfig, TaskSpec
from agent_eval.report.render import write_report
from agent_eval.verdict.qualification import current_anchors, qualify_files
from agent_eval.verification.protocol import Verification, Verifier
from tests.batch.test_run import NOW, Fixture, PassingVerifier, install_consumer
from tests.paths import EXAMPLE_SUITE


class BreakingVerifier(PassingVerifier):
    """Verifies *good* solutions, then fails on the harness's side (the batch stops)."""

    def __init__(self, good: int) -> None:
        self.left = good
        self.lock = threading.Lock()

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        with self.lock:
            self.left -= 1
            broken = self.left < 0
        if broken:
            raise InfrastructureError("the verifier container could not be started")
        return super().verify(task, solution_dir, run_id)


def run(
    batch: Fixture, verifier: Verifier, resume: Path | None = None
) -> tuple[BatchOutcome, Path]:
    before = set(batch.project.evidence.iterdir()) if batch.project.evidence.exists() else set()
    if not before:
        # The consumer is made once, then kept in the consumer cache for the next batches.
        batch.engine.script(Outcome(on_start=install_consumer))
    outcome = run_batch(
        batch.config, batch.project, verifier_factory=lambda _context: verifier,
        connect=lambda _path: batch.engine, environ={}, clock=lambda: NOW, resume=resume,
    )  # fmt: skip
    (made,) = [
        p for p in set(batch.project.evidence.iterdir()) - before if not p.name.startswith(".")
    ]
    return outcome, made


def receipt(run_dir: Path) -> Receipt:
    return read_model(run_dir / "receipt.json", Receipt, what="receipt")


def decision(batch: Fixture, run_dir: Path) -> list[str]:
    result = qualify_files(
        run_dir / "receipt.json", run_dir / "archives.json", current_anchors(batch.project)
    )
    return sorted({r.split(":")[0] for r in result.reasons})


@pytest.fixture
def batch(tmp_path: Path) -> Fixture:
    return Fixture(tmp_path)


def test_a_resumed_batch_runs_only_the_lost_runs_and_decides_as_one_batch(
    batch: Fixture,
) -> None:
    first, first_dir = run(batch, BreakingVerifier(good=9))
    assert first.status == "infrastructure-failure"
    lost = receipt(first_dir)
    kept = [
        r.runId for r in lost.runs if r.attempts and r.attempts[-1].infrastructureStatus == "ok"
    ]
    assert 0 < len(kept) < 18
    digest = file_sha256(first_dir / "receipt.json")

    second, second_dir = run(batch, PassingVerifier(), resume=first_dir)
    assert (second.status, second.exit_code) == ("completed", 0)
    resumed = receipt(second_dir)
    assert resumed.predecessor is not None
    assert (resumed.predecessor.batchId, resumed.predecessor.receiptDigest) == (
        lost.batchId, digest,
    )  # fmt: skip
    assert resumed.predecessor.reusedRuns == sorted(kept)
    ran = [r.runId for r in resumed.runs]
    assert ran == [r for r in EXAMPLE_SUITE.run_ids() if r not in kept]
    # The predecessor is left as it was: its evidence stays where it was written.
    assert file_sha256(first_dir / "receipt.json") == digest

    whole, whole_dir = run(batch, PassingVerifier())
    assert whole.final_successes == 18
    # The fakes' analyses and a checkout with changes reject both alike.
    assert decision(batch, second_dir) == decision(batch, whole_dir)
    assert "not-self-test" in decision(batch, whole_dir)
    chain = qualify_files(
        second_dir / "receipt.json", second_dir / "archives.json", current_anchors(batch.project)
    ).chain
    assert chain is not None
    assert [(c.batchId, c.runs) for c in chain] == [
        (lost.batchId, [r for r in EXAMPLE_SUITE.run_ids() if r in kept]),
        (resumed.batchId, ran),
    ]
    # The report says which run came from which batch, and sums what each spent.
    page = write_report(second_dir, current=current_anchors(batch.project)).read_text()
    assert f'<tr data-batch="{lost.batchId}"><td class="mono">{lost.batchId}</td>' in page
    assert f"{resumed.batchId} (this batch)" in page
    assert f"<td>{len(ran)}: {', '.join(ran)}</td>" in page
    # A second resume of a whole chain has nothing to run.
    again, again_dir = run(batch, PassingVerifier(), resume=second_dir)
    assert (again.status, again.exit_code) == ("not-run", 2)
    assert receipt(again_dir).reasons == [
        f"--resume: every run of batch {resumed.batchId} has a valid final verdict: there is "
        "nothing to resume"
    ]


def test_a_resume_with_another_runner_config_is_refused_naming_the_field(
    batch: Fixture,
) -> None:
    _, first_dir = run(batch, BreakingVerifier(good=3))
    changed = read_model(batch.config, RunnerConfig, what="config")
    write_model_atomic(batch.config, changed.model_copy(update={"concurrency": 1}))
    outcome, run_dir = run(batch, PassingVerifier(), resume=first_dir)
    assert (outcome.status, outcome.exit_code) == ("not-run", 2)
    (reason,) = receipt(run_dir).reasons
    assert reason.startswith(
        f"--resume: the batch is not bound to what its predecessor {receipt(first_dir).batchId} "
        "was: receipt.json field runnerConfigDigest differ(s)"
    ), reason
    assert receipt(run_dir).runs == []


def test_only_a_finished_batch_of_this_projects_evidence_can_be_resumed(
    batch: Fixture, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outcome, run_dir = run(batch, PassingVerifier(), resume=elsewhere)
    assert (outcome.status, outcome.exit_code) == ("not-run", 2)
    (reason,) = receipt(run_dir).reasons
    assert "must be in this project's evidence directory" in reason
