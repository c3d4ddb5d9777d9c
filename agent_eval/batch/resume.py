"""Resuming a batch: running only the runs its chain left without a valid final verdict.

``eval-agent --resume RUN_DIR`` makes a new batch whose receipt names its
predecessor (its batch id and the digest of its receipt as found) and the
runs whose verdict it takes from the predecessor's chain; it runs the others.
The reused runs' evidence stays where it was written. The new batch must be
bound to exactly what its predecessor was (archives, suite, images, harness,
consumer lock, runner config): what differs is refused, naming the field,
before any run. The checker decides on the union of the chain
(:mod:`agent_eval.verdict.chain`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent_eval.batch.lease import owner_alive, read_lease
from agent_eval.digests import DigestError, file_sha256, sha256_json
from agent_eval.errors import ConfigError, EvidenceError
from agent_eval.evidence_io import read_model
from agent_eval.layout import RunDirectory
from agent_eval.models import ArchivesManifest, Predecessor, Receipt, RunnerConfig
from agent_eval.models.chain import has_final_verdict

__all__ = ["Resumption", "open_resumption", "runner_config_digest"]


def runner_config_digest(config: RunnerConfig) -> str:
    """sha256 of the validated runner config as canonical JSON (what a resume is bound to)."""
    return sha256_json(config.model_dump(mode="json"))


@dataclass(frozen=True)
class Resumption:
    """The predecessor a batch resumes, and what is left to run."""

    run_dir: Path
    receipt: Receipt
    """The predecessor's receipt, as its digest binds it."""
    archives: ArchivesManifest
    """The predecessor's archives.json."""
    predecessor: Predecessor
    """What the new receipt records of it."""

    def remaining(self, schedule: list[str]) -> list[str]:
        """The runs of *schedule* (the predecessor's) the new batch runs, in schedule order."""
        reused = set(self.predecessor.reusedRuns)
        return [run_id for run_id in schedule if run_id not in reused]


def open_resumption(run_dir: Path, evidence_dir: Path) -> Resumption:
    """The batch at *run_dir*, checked resumable: a finished batch of this project's evidence
    directory whose receipt is bound to its archives.json.

    Raises:
        ConfigError: It is not a batch to resume (the message says why).
    """
    where = f"--resume {run_dir}"
    if not run_dir.is_dir():
        raise ConfigError(f"{where}: not a run directory")
    if run_dir.resolve().parent != evidence_dir.resolve():
        raise ConfigError(
            f"{where}: a resumed batch's predecessor must be in this project's evidence "
            f"directory ({evidence_dir}), where the checker finds it by its batch id"
        )
    evidence = RunDirectory(run_dir)
    try:
        lease = read_lease(run_dir)
    except EvidenceError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    if lease is not None and owner_alive(lease):
        raise ConfigError(f"{where}: the batch is still running (process {lease.pid})")
    try:
        receipt = read_model(evidence.receipt, Receipt, what="receipt")
        digest = file_sha256(evidence.receipt)
    except (EvidenceError, DigestError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    if receipt.status == "running":
        raise ConfigError(
            f"{where}: {evidence.receipt} field status is 'running': its owner is gone but "
            "it was not closed yet (agent-eval cleanup closes it)"
        )
    if receipt.archivesDigest is None or receipt.evaluatorDigest is None:
        raise ConfigError(f"{where}: the batch ran nothing ({receipt.status}); start a new one")
    try:
        archives = read_model(evidence.archives_manifest, ArchivesManifest, what="archives")
        archives_digest = file_sha256(evidence.archives_manifest)
    except (EvidenceError, DigestError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    if archives_digest != receipt.archivesDigest:
        raise ConfigError(
            f"{where}: {evidence.archives_manifest} is {archives_digest}, but the receipt's "
            f"field archivesDigest is {receipt.archivesDigest}: it was changed"
        )
    if receipt.runnerConfigDigest is None:
        raise ConfigError(
            f"{where}: {evidence.receipt} has no field runnerConfigDigest (a batch of an "
            "earlier harness): its runner config cannot be bound; start a new batch"
        )
    earlier = receipt.predecessor.reusedRuns if receipt.predecessor else []
    valid = [r.runId for r in receipt.runs if has_final_verdict(r)]
    reused = sorted(set(earlier) | set(valid))
    predecessor = Predecessor(batchId=receipt.batchId, receiptDigest=digest, reusedRuns=reused)
    return Resumption(run_dir, receipt, archives, predecessor)
