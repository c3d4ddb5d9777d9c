"""A consumer cache cannot move a verdict unseen.

An entry and its record sit in one directory, so whoever writes the cache can
change both and every digest of the batch still agrees. The batch therefore
records, in its consumer-lock.json, where its consumer came from and the
digest of its files; the plain check names a cached consumer in a note, and
``--reverify`` (its own consumer, installed again) rejects one whose files
differ, as ``consumer-integrity``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_eval.digests import sha256_bytes
from agent_eval.models import ArchivesManifest, ConsumerLock, LockedDistribution
from agent_eval.project import Project
from agent_eval.verdict.qualification import qualify_files
from agent_eval.verdict.reverify import reverify_files
from agent_eval.verdict.words import decision_lines
from agent_eval.verification.protocol import Verifier
from tests.evidence_builders import CURRENT, Batch, attempt, rebind, receipt, run, write_batch
from tests.paths import REPO
from tests.verdict.test_reverify import Echo

ENTRY = sha256_bytes(b"the cache entry's inputs")
FILES = sha256_bytes(b"the consumer's files")

PROJECT = Project(
    root=REPO,
    packages=REPO / "packages",
    tasks=REPO / "tasks",
    graders=REPO / "graders",
    fixtures=REPO / "fixtures",
    evidence=REPO / ".verification" / "agent-eval",
)


def batch_with(tmp_path: Path, **lock_fields: Any) -> Batch:
    """A batch (nothing verified: only the consumer is compared) whose lock has *lock_fields*."""
    unverified = [run("forms-1", [attempt("forms-1", success=False, submitted=False)])]
    batch = write_batch(tmp_path, receipt(unverified))
    lock_path = batch.root / "consumer-lock.json"
    lock_path.write_text(json.dumps({**json.loads(lock_path.read_text()), **lock_fields}))
    rebind(batch)
    return batch


def reverify_against(batch: Batch, files: str) -> list[str]:
    """``--reverify``'s reasons when its own consumer's files have the digest *files*."""
    lock = ConsumerLock.model_validate_json((batch.root / "consumer-lock.json").read_bytes())

    @contextlib.contextmanager
    def fresh(
        manifest: ArchivesManifest, run_dir: Path
    ) -> Iterator[tuple[Verifier, list[LockedDistribution], str]]:
        yield Echo(lambda analysis, behaviour: None), lock.distributions, files

    return reverify_files(batch.receipt, batch.archives, PROJECT, fresh, workers=1)


def test_a_cached_consumer_rewritten_with_its_record_is_rejected_by_reverify(
    tmp_path: Path,
) -> None:
    batch = batch_with(tmp_path, installedDigest=FILES, cacheEntry=ENTRY)
    assert reverify_against(batch, FILES) == []
    reasons = reverify_against(batch, sha256_bytes(b"what the archives install"))
    assert len(reasons) == 1, reasons
    assert reasons[0].startswith("consumer-integrity: the consumer-cache entry " + ENTRY)
    assert FILES in reasons[0]


def test_a_fresh_consumer_whose_files_differ_is_rejected_too(tmp_path: Path) -> None:
    batch = batch_with(tmp_path, installedDigest=FILES)
    reasons = reverify_against(batch, sha256_bytes(b"other"))
    assert [r.split(":")[0] for r in reasons] == ["consumer-integrity"]
    assert "installed for the batch" in reasons[0]


def test_a_lock_without_the_files_digest_cannot_be_compared_and_is_rejected(
    tmp_path: Path,
) -> None:
    batch = batch_with(tmp_path)
    reasons = reverify_against(batch, FILES)
    assert [r.split(":")[0] for r in reasons] == ["consumer-integrity"]
    assert "records no digest" in reasons[0]


def test_the_plain_check_names_the_cache_entry_in_a_note(tmp_path: Path) -> None:
    cached = batch_with(tmp_path / "cached", installedDigest=FILES, cacheEntry=ENTRY)
    result = qualify_files(cached.receipt, cached.archives, CURRENT)
    assert result.notes is not None and len(result.notes) == 1
    assert ENTRY in result.notes[0] and "--reverify" in result.notes[0]
    assert not any(r.startswith("consumer") for r in result.reasons), result.reasons
    assert any(ENTRY in line and "note:" in line for line in decision_lines(result))

    fresh = batch_with(tmp_path / "fresh", installedDigest=FILES)
    assert qualify_files(fresh.receipt, fresh.archives, CURRENT).notes is None
