"""The consumer project: prepared offline in the verifier image, kept by :mod:`.cache`.

Layout (mounted read-only into every runner and verifier container):

    /consumer/pyproject.toml       the consumer project, depending on the exact archives
    /consumer/requirements.txt     every distribution pinned by version and sha256
    /consumer/site/                the archives and their dependencies, installed by pip
    /consumer/docs/                <distribution>/GUIDE.md (or its docs directory), API.md
                                   and api-catalog.json

It holds no task: an attempt's prompt (its contract in it) reaches the runner in its
request only, so an agent never reads another task's prompt.

``consumer-lock.json`` binds every installed distribution (its RECORD digest)
and the archives.json it came from. Nothing is reinstalled per attempt.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import tomli_w

from agent_eval.digests import (
    DigestError,
    file_sha256,
    regular_files,
    solution_digest,
    solution_files,
)
from agent_eval.engine import ContainerRuntime, ContainerSpec, Mount, ResourceLimits, run_container
from agent_eval.errors import EvidenceError, InfrastructureError
from agent_eval.evidence_io import read_model
from agent_eval.layout import (
    ARCHIVES_MOUNT,
    CONSUMER_MOUNT,
    HARNESS_ROOT,
    ConsumerLayout,
    staged_files,
)
from agent_eval.models import ArchiveEntry, ConsumerLock, LockedDistribution
from agent_eval.models.catalog import ApiCatalog
from agent_eval.packing import normalise_name
from agent_eval.project import DEFAULT_GUIDE

__all__ = ["PreparedConsumer", "load_consumer", "prepare_consumer"]

_SETUP_TIMEOUT_S = 600.0
_LOG_LIMIT = 64 * 1024
_STAGE_MOUNT = "/verifier"


@dataclass(frozen=True)
class PreparedConsumer:
    """A consumer ready to be mounted read-only."""

    root: Path
    python: str
    distributions: list[LockedDistribution]
    catalog: ApiCatalog
    mypy_version: str
    cache_entry: str | None = None
    """The consumer-cache key it was taken from; None when installed for this batch."""

    def lock(self, archives_digest: str) -> ConsumerLock:
        """consumer-lock.json, bound to the archives.json it was installed from.

        It records the digest of the files the batch really used and where they
        came from: a cache entry's own record certifies nothing against whoever
        writes the cache, so the checker's fresh install is held to this instead.

        Raises:
            DigestError: The consumer holds something other than regular files.
        """
        return ConsumerLock(
            schemaVersion=1,
            archivesDigest=archives_digest,
            python=self.python,
            distributions=self.distributions,
            installedDigest=installed_digest(self.root),
            cacheEntry=self.cache_entry,
        )


def installed_digest(root: Path) -> str:
    """The digest of the consumer's files under *root*, but its guides (``docs/``).

    The guides are left out: re-verification installs without them, and no
    verdict reads them. The files are deterministic (hash-checked byte code),
    so two installs of the same archives in the same image agree.
    """
    files = solution_files(root)
    return solution_digest({rel: sha for rel, sha in files.items() if not rel.startswith("docs/")})


def stage_harness(stage: Path) -> Path:
    """Copy the installer's standard-library-only harness modules into ``stage/agent_eval``."""
    source = HARNESS_ROOT
    for rel in staged_files(source, "consumer"):
        target = stage / "agent_eval" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, target)
    for path in [stage, *stage.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return stage


def write_project(
    root: Path,
    archives: list[ArchiveEntry],
    dependency_lock: Path | None,
    guides: dict[str, Path],
) -> None:
    """Write the consumer project's files on the host (before installation)."""
    layout = ConsumerLayout(root)
    root.mkdir(parents=True)
    project = {
        "project": {
            "name": "agent-eval-consumer",
            "version": "0.0.0",
            "requires-python": ">=3.11",
            "dependencies": [f"{a.distribution}=={a.version}" for a in archives],
        },
        "tool": {
            "agent-eval": {
                "archives": {a.filename: a.sha256 for a in archives},
            }
        },
    }
    (root / "pyproject.toml").write_text(tomli_w.dumps(project), encoding="utf-8")
    lines = [
        f"{a.distribution}=={a.version} --hash=sha256:{a.sha256.removeprefix('sha256:')}"
        for a in archives
    ]
    if dependency_lock is not None:
        lines.append(dependency_lock.read_text(encoding="utf-8"))
    layout.requirements.write_text("\n".join(lines) + "\n", encoding="utf-8")
    docs = layout.docs
    docs.mkdir()
    for name, guide in sorted(guides.items()):
        # A docs directory is copied whole; a single file is the distribution's GUIDE.md.
        if guide.is_dir():
            shutil.copytree(guide, docs / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (docs / name).mkdir()
            shutil.copyfile(guide, docs / name / DEFAULT_GUIDE)
    layout.site.mkdir()


def prepare_consumer(
    engine: ContainerRuntime,
    *,
    verifier_image: str,
    root: Path,
    stage: Path,
    archives_dir: Path,
    archives: list[ArchiveEntry],
    dependency_lock: Path | None,
    guides: dict[str, Path],
    batch_id: str,
) -> PreparedConsumer:
    """Write, install (in a consumer container) and lock the consumer.

    Raises:
        InfrastructureError: the installation or the catalog failed, cleanup did, or the
            container left anything but plain directories and regular files.
    """
    write_project(root, archives, dependency_lock, guides)
    stage_harness(stage)
    spec = ContainerSpec(
        image=verifier_image,
        command=(
            "/usr/bin/python3",
            "-B",
            "-m",
            "agent_eval.consumer.setup",
            *[arg for a in archives for arg in ("--distribution", a.distribution)],
        ),
        role="consumer",
        batch_id=batch_id,
        run_id="consumer",
        mounts=(
            Mount(stage, _STAGE_MOUNT),
            Mount(archives_dir, ARCHIVES_MOUNT),
            Mount(root, CONSUMER_MOUNT, read_only=False),
        ),
        environment={"PYTHONPATH": _STAGE_MOUNT},
        limits=ResourceLimits(pids=128, memory_bytes=1024 * 1024 * 1024, tmp_bytes=256 << 20),
    )
    done = run_container(engine, spec, timeout_s=_SETUP_TIMEOUT_S, log_limit_bytes=_LOG_LIMIT)
    if done.wait.timed_out or done.wait.exit_code != 0:
        tail = done.output.stderr.decode("utf-8", "replace")[-2000:]
        raise InfrastructureError(
            f"preparing the consumer failed (exit {done.wait.exit_code}, "
            f"timed out: {done.wait.timed_out}): {tail}"
        )
    try:
        # The container, which imports the library, wrote the tree: checked before any
        # file of it is read, so that no link leads a read outside the consumer.
        regular_files(root)
    except DigestError as exc:
        raise InfrastructureError(f"the consumer {root} is refused: {exc}") from exc
    return load_consumer(root, archives)


def load_consumer(root: Path, archives: list[ArchiveEntry]) -> PreparedConsumer:
    """Describe the consumer installed under *root* from *archives*, from its own files.

    Its tree must hold only plain directories and regular files (see
    :func:`prepare_consumer`; a kept one was checked by its files' digest).

    Raises:
        InfrastructureError: Its catalog, versions or distributions are missing or unreadable.
    """
    try:
        catalog = read_model(ConsumerLayout(root).catalog, ApiCatalog, what="API catalog")
        python = (root / "python-version").read_text(encoding="utf-8").strip()
        mypy_version = (root / "mypy-version").read_text(encoding="utf-8").strip()
    except EvidenceError as exc:
        raise InfrastructureError(str(exc)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InfrastructureError(f"the consumer {root} is incomplete: {exc}") from exc
    return PreparedConsumer(
        root=root,
        python=python,
        distributions=installed_distributions(ConsumerLayout(root).site, archives),
        catalog=catalog,
        mypy_version=mypy_version,
    )


def installed_distributions(site: Path, archives: list[ArchiveEntry]) -> list[LockedDistribution]:
    """Describe every distribution installed under *site*."""
    candidates = {normalise_name(a.distribution): a for a in archives}
    found: list[LockedDistribution] = []
    for info in sorted(site.glob("*.dist-info")):
        metadata = Parser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
        name = normalise_name(metadata["Name"])
        archive = candidates.get(name)
        if archive is not None and metadata["Version"] != archive.version:
            raise InfrastructureError(
                f"the consumer has {name} {metadata['Version']}, not the candidate "
                f"{archive.version}"
            )
        found.append(
            LockedDistribution(
                name=name,
                version=metadata["Version"],
                recordDigest=file_sha256(info / "RECORD"),
                candidate=archive is not None,
                archiveSha256=archive.sha256 if archive else None,
            )
        )
    missing = sorted(set(candidates) - {d.name for d in found})
    if missing:
        raise InfrastructureError(f"the consumer lacks the candidate distributions {missing}")
    return found
