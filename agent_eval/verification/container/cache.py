"""mypy's cache of the consumer's library, warmed in a verifier container and kept with the
consumer's cache entry.

A warm-up is one verifier container that type-checks a solution importing
only the library. A batch whose consumer came from the consumer cache
(:mod:`agent_eval.consumer.cache`) keeps the mypy cache it warmed beside that
entry, under the digest of everything the cache depends on: the consumer's
key (which holds the verifier image's id), the image's id again, and the
harness files that run the analysis (the staged verifier set and the
container side that stages and starts it). The next batch of the same key
mounts it instead of warming one again.

A kept cache is never trusted. mypy checks each of its entries against the
sources and options, but a cache whose files were changed to agree with
them could still change a type-check verdict; so its record holds the digest
of its files when it was made, each use hashes them again, and one that
differs is discarded, said, and warmed again. That holds against accidents,
not against whoever writes the cache (who rewrites the record too): it is
only ever kept with a consumer-cache entry, which the batch's
consumer-lock.json names, and the checker's ``--reverify`` warms its own.

Layout, in the consumer's entry (``<consumer entry>/analysis/``):

    <key hex>/entry.json    the key's inputs and the digest of the cache's files
    <key hex>/mypy-cache/   mypy's cache, as the warm-up left it
    .building-<uuid>/       a warm-up under way; renamed into place when complete
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from agent_eval.consumer.cache import (
    BUILDING_PREFIX,
    discard_entry,
    files_digest,
    kept_entry,
    prune_unused,
    publish_entry,
)
from agent_eval.digests import (
    DigestError,
    file_sha256,
    regular_files,
    sha256_json,
    solution_digest,
)
from agent_eval.engine import ContainerRuntime, ContainerSpec, Mount, run_container
from agent_eval.engine.pressure import recent_cpu_pressure
from agent_eval.errors import ConfigError, EvidenceError, InfrastructureError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.layout import (
    ANALYSIS_FILE,
    CONSUMER_MOUNT,
    HARNESS_ROOT,
    IN_CONTAINER_CONSUMER,
    RESULT_MOUNT,
    SOLUTION_MOUNT,
    VERIFIER_GRADER_MOUNT,
    VERIFIER_RUNTIME_MOUNT,
    VERIFIER_TRUSTED,
    ConsumerLayout,
    staged_files,
)
from agent_eval.models.base import WireModel
from agent_eval.suite.tasks import TASK_FILE
from agent_eval.verification.container.limits import VerificationLimits
from agent_eval.verification.container.run import (
    LOG_TAIL_BYTES,
    VERIFIER_ENVIRONMENT,
    check_consumer,
)
from agent_eval.verification.container.staging import stage_runtime
from agent_eval.verification.runtime.attempt import ANALYSIS_GRACE_S, MYPY_CACHE_DIR

__all__ = ["AnalysisCacheEntry", "analysis_cache_key", "kept_analysis_cache", "warm_analysis_cache"]

ANALYSIS_DIR = "analysis"
"""The directory of a consumer's cache entry that its mypy caches are kept in."""
_ENTRY_FILE = "entry.json"
_CACHE_DIR = "mypy-cache"
"""A cache unused this long is removed (the consumer's entry goes after as long unused)."""
_RUNNERS = (
    "verification/container/cache.py",
    "verification/container/run.py",
    "verification/container/staging.py",
)
"""The host side that stages the analysis and starts its container: inputs too."""


class AnalysisCacheEntry(WireModel):
    """``entry.json``: what a kept mypy cache was made from and the digest of its files."""

    schemaVersion: Literal[1]
    """The format of this record."""
    key: str
    """The digest of ``inputs``: the entry's directory name."""
    inputs: dict[str, Any]
    """Everything the cache was made from, as :func:`analysis_cache_key` lists it."""
    filesDigest: str
    """The cache's files: canonical JSON of their sorted (path, sha256) pairs."""


WARM_UP_BACKSTOP_S = 1800.0
"""The analysis cache warm-up's wall-clock backstop: at load 100-150 the grading limit
(300 s) killed it and no batch could start."""


def warm_analysis_cache(
    engine: ContainerRuntime,
    verifier_image: str,
    consumer_dir: Path,
    target: Path,
    *,
    batch_id: str,
    limits: VerificationLimits | None = None,
) -> Path:
    """Make a mypy cache of the consumer's library, to seed every attempt's analysis.

    One verifier container (the same image, hardening and mount points)
    analyses a solution that only imports the library's packages (from the
    catalog), with nothing submitted anywhere; mypy's cache is kept in
    *target*. Attempts mount it read-only and copy it into their own scratch.
    It only saves time: mypy checks every entry against its source and
    options, so a stale cache is rebuilt, never believed.

    Args:
        engine: The engine.
        verifier_image: The pinned verifier image the attempts use.
        consumer_dir: The batch's consumer (see
            :class:`~agent_eval.verification.container.run.VerifierSetup`).
        target: Created; must not exist. Holds the cache afterwards.
        batch_id: Batch label of the container.
        limits: The container limits and the analysis time limit.

    Returns:
        The cache directory, for ``analysis_cache``.

    Raises:
        ConfigError: The consumer is unusable.
        InfrastructureError: The analysis did not produce a cache.
        CleanupError: The container's removal was not confirmed.
    """
    limits = limits or VerificationLimits()
    # The harness's own work on the library, never a submission's: a crowded machine
    # slows it, and only a generous backstop bounds it (never the grading limit).
    warm_up_s = max(limits.analysis_timeout_s, WARM_UP_BACKSTOP_S)
    check_consumer(consumer_dir)
    catalog = json.loads(ConsumerLayout(consumer_dir).catalog.read_text(encoding="utf-8"))
    packages = sorted(
        {str(p) for d in catalog.get("distributions", []) for p in d.get("packages", [])}
    )
    if not packages:
        raise ConfigError(f"consumer {consumer_dir}: the API catalog names no package")
    target.mkdir(mode=0o700)
    runtime, task_stage, solution, out = (target / n for n in ("runtime", "task", "sol", "out"))
    stage_runtime(runtime, None)  # the analysis alone: no grader runs
    task_stage.mkdir(mode=0o700)
    warm_task = {
        "schemaVersion": 1,
        "id": "analysis-cache",
        "allowedOutputPaths": ["warm.py"],
        "allowedImports": [f"{p}/*" for p in packages],
        "seedReferences": [],
        "requiredIntegration": [],
    }
    (task_stage / TASK_FILE).write_text(json.dumps(warm_task), encoding="utf-8")
    solution.mkdir(mode=0o755)
    (solution / "warm.py").write_text("".join(f"import {p}\n" for p in packages), "utf-8")
    os.chmod(solution / "warm.py", 0o644)
    out.mkdir(mode=0o700)
    spec = ContainerSpec(
        image=verifier_image,
        command=(
            "/usr/bin/python3",
            "-B",
            "-m",
            "agent_eval.verification.analysis",
            *("--task", f"{VERIFIER_GRADER_MOUNT}/{TASK_FILE}", "--solution", SOLUTION_MOUNT),
            *("--catalog", str(IN_CONTAINER_CONSUMER.catalog)),
            *(
                "--scratch",
                f"{RESULT_MOUNT}/scratch",
                "--output",
                f"{RESULT_MOUNT}/{ANALYSIS_FILE}",
            ),
            *("--search-path", str(IN_CONTAINER_CONSUMER.site)),
            *("--timeout", f"{warm_up_s:g}"),
        ),
        role="verifier",
        batch_id=batch_id,
        run_id="analysis-cache",
        mounts=(
            Mount(runtime, VERIFIER_RUNTIME_MOUNT),
            Mount(task_stage, VERIFIER_GRADER_MOUNT),
            Mount(solution, SOLUTION_MOUNT),
            Mount(consumer_dir.resolve(), CONSUMER_MOUNT),
            Mount(out, RESULT_MOUNT, read_only=False),
        ),
        environment=VERIFIER_ENVIRONMENT,
        working_dir=VERIFIER_TRUSTED,
        limits=limits.container,
    )
    done = run_container(
        engine,
        spec,
        timeout_s=warm_up_s + ANALYSIS_GRACE_S,
        log_limit_bytes=LOG_TAIL_BYTES,
    )
    cache = out / "scratch" / MYPY_CACHE_DIR
    failed = done.wait.timed_out or done.wait.exit_code != 0
    if not failed:
        # The container that wrote out/ is gone. No link in it may be mounted into the
        # verifier containers (the engine would follow one on the host) or kept.
        try:
            regular_files(out)
        except DigestError as exc:
            raise InfrastructureError(f"warming the analysis cache left {exc}") from exc
    if failed or not cache.is_dir():
        tail = done.output.stderr.decode("utf-8", errors="replace").strip()[-1000:]
        timed = (
            f", timed out after {warm_up_s:g} s, host CPU pressure {recent_cpu_pressure()}"
            if done.wait.timed_out
            else ""
        )
        raise InfrastructureError(
            f"warming the analysis cache failed (exit {done.wait.exit_code}{timed}): "
            f"{tail or 'no output'}"
        )
    return cache


def analysis_cache_key(consumer_key: str, verifier_image: str) -> tuple[str, dict[str, Any]]:
    """The digest of everything a mypy cache of this consumer depends on, and those inputs.

    The consumer's key already binds the library's wheels, the verifier
    image (mypy, its options' defaults, typeshed) and the consumer's own
    harness; the harness files here decide how mypy is run on it.

    Raises:
        DigestError: A harness file cannot be hashed.
    """
    harness = HARNESS_ROOT
    files = {
        rel: file_sha256(harness / rel) for rel in [*staged_files(harness, "verifier"), *_RUNNERS]
    }
    inputs: dict[str, Any] = {
        "schema": 1,
        "consumer": consumer_key,
        "verifierImage": verifier_image,
        "harness": solution_digest(files),
    }
    return sha256_json(inputs), inputs


def kept_analysis_cache(
    engine: ContainerRuntime,
    verifier_image: str,
    consumer_dir: Path,
    work_dir: Path,
    *,
    batch_id: str,
    limits: VerificationLimits | None = None,
    notice: Callable[[str], None] = lambda _: None,
) -> Path:
    """The mypy cache for a batch's attempts: kept with a cached consumer, else warmed.

    A consumer taken from the consumer cache gets the cache kept in its
    entry for the same key, if its files are still the ones recorded, or one
    warmed now and kept there (built in a private directory and renamed into
    place; a batch that loses the race uses the winner's). Any other consumer,
    or an entry that cannot be written, gets one warmed in *work_dir*, as
    :func:`warm_analysis_cache` does.

    Args:
        engine: The engine.
        verifier_image: The pinned verifier image the attempts use.
        consumer_dir: The batch's consumer.
        work_dir: The batch's private directory, for a cache that is not kept.
        batch_id: Batch label of the warm-up's container.
        limits: The container limits and the analysis time limit.
        notice: Hears, once, why a kept cache was discarded or could not be kept.

    Returns:
        The cache directory, for ``analysis_cache``.

    Raises:
        ConfigError: The consumer is unusable.
        InfrastructureError: The analysis did not produce a cache, or it could not be kept.
        CleanupError: The warm-up container's removal was not confirmed.
    """

    def warm(target: Path) -> Path:
        return warm_analysis_cache(
            engine, verifier_image, consumer_dir, target, batch_id=batch_id, limits=limits
        )

    def warm_unkept() -> Path:
        work_dir.mkdir(parents=True, exist_ok=True)
        return warm(work_dir / _CACHE_DIR)

    consumer = kept_entry(consumer_dir)
    if consumer is None:
        return warm_unkept()
    try:
        key, inputs = analysis_cache_key(consumer.key, verifier_image)
    except (DigestError, OSError) as exc:
        notice(f"mypy cache: the harness cannot be hashed ({exc}); not kept")
        return warm_unkept()
    caches = consumer.entry / ANALYSIS_DIR
    kept = caches / key.removeprefix("sha256:")
    found = _verified(kept, key, notice)
    if found is not None:
        return found
    try:
        caches.mkdir(exist_ok=True)
        building = caches / f"{BUILDING_PREFIX}{uuid.uuid4().hex}"
        building.mkdir()
    except OSError as exc:
        notice(f"mypy cache: {caches} cannot be written ({exc}); not kept")
        return warm_unkept()
    try:
        warm(building / "warm-up").rename(building / _CACHE_DIR)
        shutil.rmtree(building / "warm-up")
        record = AnalysisCacheEntry(
            schemaVersion=1,
            key=key,
            inputs=inputs,
            filesDigest=files_digest(building / _CACHE_DIR),
        )
        write_model_atomic(building / _ENTRY_FILE, record)
        found = publish_entry(building, kept, lambda: _verified(kept, key, notice))
        if found is not None:
            return found
    except (OSError, DigestError) as exc:
        shutil.rmtree(building, ignore_errors=True)
        raise InfrastructureError(f"the mypy cache could not be kept in {caches}: {exc}") from exc
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    prune_unused(caches, keep=kept)
    return kept / _CACHE_DIR


def _verified(kept: Path, key: str, notice: Callable[[str], None]) -> Path | None:
    """The kept cache if it holds exactly the files it recorded; else it is discarded."""
    if not kept.exists():
        return None
    try:
        record = read_model(kept / _ENTRY_FILE, AnalysisCacheEntry, what="mypy cache entry")
        if record.key != key:
            raise EvidenceError(f"it records the key {record.key}")
        if files_digest(kept / _CACHE_DIR) != record.filesDigest:
            raise EvidenceError("its files are not the ones it recorded")
    except (EvidenceError, DigestError, OSError) as exc:
        notice(f"mypy cache: the entry {kept.name[:12]} is discarded ({exc}); warmed again")
        discard_entry(kept)
        return None
    with contextlib.suppress(OSError):
        os.utime(kept)  # its last use, for pruning
    return kept / _CACHE_DIR
