"""The container verifier: the :class:`~agent_eval.verification.protocol.Verifier` of a batch.

One verifier container per attempt (see :mod:`.run`), up to *slots* at once,
each slot with its own child UID, from the pinned verifier image with the
verifier hardening of :class:`agent_eval.engine.Hardening` (read-only root, no
network, ``no-new-privileges``, UID 0 keeping only SETUID, SETGID,
DAC_OVERRIDE and KILL, pids/memory/CPU limits). The factories build one for
a batch (from its consumer, with the mypy cache kept beside a cached consumer
or warmed for it), one for ``tasks verify`` (from a consumer made of the
library's sources) and one for re-verification (from the batch's archives);
each runs on the engine it is given, never one it connects to itself.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from agent_eval.anchored import make_dirs
from agent_eval.consumer.archives import installed_digest, prepare_consumer
from agent_eval.consumer.source import prepare_source_consumer
from agent_eval.engine import ContainerEngine, remove_leftovers
from agent_eval.errors import CleanupError, ConfigError, InfrastructureError
from agent_eval.images.build import image_for_checkout
from agent_eval.layout import DEPENDENCY_LOCK, ConsumerLayout, RunDirectory
from agent_eval.models import ArchivesManifest, LockedDistribution
from agent_eval.models.task import TaskSpec
from agent_eval.project import Project
from agent_eval.verification.container.cache import kept_analysis_cache, warm_analysis_cache
from agent_eval.verification.container.limits import MAX_SLOTS, VerificationLimits
from agent_eval.verification.container.run import (
    VerifierSetup,
    check_consumer,
    verify_in_container,
)
from agent_eval.verification.protocol import Verification, VerifierContext, VerifierFactory
from agent_eval.verification.retry import verify_with_retries

__all__ = [
    "ContainerVerifier",
    "batch_verifier_factory",
    "evidence_verifiers",
    "source_verifiers",
]


class ContainerVerifier:
    """Verifies attempts in verifier containers, up to *slots* at once.

    Implements :class:`~agent_eval.verification.protocol.Verifier`. Each
    verification takes a free slot (its own child UID) for its duration.
    """

    name = "docker"

    def __init__(self, setup: VerifierSetup, *, tasks_dir: Path, slots: int = 1) -> None:
        if not 1 <= slots <= MAX_SLOTS:
            raise ConfigError(f"verifier slots {slots} is not in [1, {MAX_SLOTS}]")
        check_consumer(setup.consumer_dir)
        self.setup = setup
        self._tasks_dir = tasks_dir
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(slots):
            self._slots.put(slot)
        self._catalog: Mapping[str, Any] | None = None
        self._stopped = threading.Event()
        """Set by :meth:`cancel_all`: no verifier container is started after it."""

    def api_catalog(self) -> Mapping[str, Any]:
        """The consumer's API catalog (what static analysis supports)."""
        if self._catalog is None:
            path = ConsumerLayout(self.setup.consumer_dir).catalog
            try:
                self._catalog = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise InfrastructureError(f"{path}: cannot read the API catalog: {exc}") from exc
        return self._catalog

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        """Analyse and grade *solution_dir* for *task* in a verifier container.

        Raises:
            SuiteError: The analysis refused the task's own files.
            InfrastructureError: No trusted result could be produced.
            CleanupError: A container's removal was not confirmed.
        """

        def once() -> Verification:
            slot = self._slots.get()
            try:
                if self._stopped.is_set():
                    raise InfrastructureError("the batch stopped: no verifier container started")
                return verify_in_container(
                    self.setup,
                    task,
                    self._tasks_dir / task.id,
                    solution_dir,
                    run_id=run_id,
                    slot=slot,
                ).as_verification()
            finally:
                self._slots.put(slot)

        return verify_with_retries(once, stopped=self._stopped.is_set)

    def cancel_all(self) -> None:
        """Remove every verifier container still running (each removal confirmed).

        Raises:
            CleanupError: One or more removals were not confirmed (all are tried first).
        """
        self._stopped.set()
        failures = []
        for container_id in self.setup.running.snapshot():
            try:
                self.setup.engine.remove(container_id)
            except CleanupError as exc:
                failures.append(str(exc))
        if failures:
            raise CleanupError("; ".join(failures))


def local_verifier_image(engine: ContainerEngine, project_root: Path) -> str:
    """The id of this checkout's verifier image, found by its recipe digest.

    Another checkout's build never changes the answer: the image is tagged by
    the digest of this checkout's recipe (``agent-eval images build`` makes it).

    Raises:
        InfrastructureError: It is not present.
    """
    try:
        return image_for_checkout(engine, project_root, "verifier")
    except InfrastructureError as exc:
        raise InfrastructureError(
            f"{exc} (or pass --verifier-image with a pinned reference)"
        ) from None


@contextlib.contextmanager
def source_verifiers(
    engine: ContainerEngine,
    project: Project,
    *,
    verifier_image: str | None = None,
    slots: int = 1,
    limits: VerificationLimits | None = None,
    batch_id: str | None = None,
) -> Iterator[VerifierFactory[Path]]:
    """Yield a factory of container verifiers for fixtures, on *engine*.

    The factory prepares a consumer from the project's library sources in the
    work directory it is given. On exit, every container of this run's batch
    is removed (confirmed); the engine stays open (its caller connected it).
    *batch_id* is the label of the lease *engine* is bound to, if it is (its
    containers then carry that lease's token, and only those are removed);
    else a fresh one.

    Raises:
        InfrastructureError: The verifier image is absent or not the pinned one.
        CleanupError: A container's removal was not confirmed.
    """
    batch_id = batch_id or f"tasks-verify-{uuid.uuid4().hex[:12]}"
    token = engine.lease_token
    try:
        image = verifier_image or local_verifier_image(engine, project.root)
        engine.resolve_image(image)

        def build(work_dir: Path) -> ContainerVerifier:
            consumer = prepare_source_consumer(project.packages, work_dir / "consumer")
            cache = warm_analysis_cache(
                engine, image, consumer, work_dir / "analysis-cache", batch_id=batch_id
            )
            setup = VerifierSetup(
                engine=engine,
                image=image,
                consumer_dir=consumer,
                graders_dir=project.graders,
                batch_id=batch_id,
                limits=limits or VerificationLimits(),
                staging_root=work_dir,
                analysis_cache=cache,
            )
            return ContainerVerifier(setup, tasks_dir=project.tasks, slots=slots)

        yield build
    finally:
        remove_leftovers(engine, batch_id, lease_token=token)


@contextlib.contextmanager
def evidence_verifiers(
    engine: ContainerEngine,
    project: Project,
    archives: ArchivesManifest,
    run_dir: Path,
    *,
    slots: int = 2,
    batch_id: str | None = None,
) -> Iterator[tuple[ContainerVerifier, list[LockedDistribution], str]]:
    """The recorded verifier image, over a consumer installed again from the batch's archives.

    For re-verification: the pinned verifier image (by the id archives.json
    records; nothing is pulled), the candidate wheels saved in the run
    directory, installed offline as the batch installed them; up to *slots*
    verifications at once. Yields the
    verifier, the distributions the new consumer holds and the digest of its
    files (to be held against the batch's consumer-lock.json). Never the
    consumer cache nor its mypy caches: they are what is being checked. Every
    container is removed and the work directory deleted on exit; the engine
    stays open (its caller connected it).

    Raises:
        InfrastructureError: The image is absent, or the consumer or the cache failed.
    """
    batch_id = batch_id or f"reverify-{uuid.uuid4().hex[:12]}"
    image = archives.verifierImage.imageId
    lock = project.packages / DEPENDENCY_LOCK
    try:
        # The pinned reference decides what runs; the recorded id must be what it resolves
        # to here, or a lenient image named in the run directory would grade again.
        pinned = engine.resolve_image(archives.verifierImage.reference).image_id
        if pinned != image:
            raise InfrastructureError(
                f"archives.json's verifier image id {image} is not what its pinned reference "
                f"{archives.verifierImage.reference} resolves to here ({pinned})"
            )
        with tempfile.TemporaryDirectory(prefix="agent-eval-reverify-") as tmp:
            work = Path(tmp)
            consumer = prepare_consumer(
                engine,
                verifier_image=image,
                root=work / "consumer",
                stage=work / "consumer-stage",
                archives_dir=RunDirectory(run_dir.resolve()).archives,
                archives=archives.archives,
                dependency_lock=lock if lock.is_file() else None,
                guides={},
                batch_id=batch_id,
            )
            cache = warm_analysis_cache(
                engine, image, consumer.root, work / "mypy-cache", batch_id=batch_id
            )
            setup = VerifierSetup(
                engine=engine,
                image=image,
                consumer_dir=consumer.root,
                graders_dir=project.graders,
                batch_id=batch_id,
                staging_root=work,
                analysis_cache=cache,
            )
            verifier = ContainerVerifier(setup, tasks_dir=project.tasks, slots=slots)
            yield verifier, consumer.distributions, installed_digest(consumer.root)
    finally:
        remove_leftovers(engine, batch_id)


def _say_on_stderr(line: str) -> None:
    print(f"agent-eval: {line}", file=sys.stderr, flush=True)


def batch_verifier_factory(
    project: Project, notice: Callable[[str], None] = _say_on_stderr
) -> VerifierFactory[VerifierContext]:
    """The verifier of a batch: a warm analysis cache, then one container per attempt.

    The cache is the one kept with the batch's consumer when that came from
    the consumer cache (warmed once per key, hashed again at each use), else
    warmed for this batch alone; *notice* hears why a kept one was discarded.
    """

    def make(context: VerifierContext) -> ContainerVerifier:
        anchor = context.work_anchor
        if anchor is None:
            anchor = context.work_dir.parent
            anchor.mkdir(parents=True, exist_ok=True)
        # From the anchor down, never through a link swapped in since the batch began.
        make_dirs(anchor, context.work_dir)
        cache = kept_analysis_cache(
            context.engine,
            context.image_id,
            context.consumer_dir,
            context.work_dir,
            batch_id=context.batch_id,
            notice=notice,
        )
        setup = VerifierSetup(
            engine=context.engine,
            image=context.image_id,
            consumer_dir=context.consumer_dir,
            graders_dir=project.graders,
            batch_id=context.batch_id,
            staging_root=context.work_dir,
            analysis_cache=cache,
        )
        return ContainerVerifier(setup, tasks_dir=project.tasks, slots=context.slots)

    return make
