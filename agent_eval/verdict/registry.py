"""The reviewed-runner registry: matching a batch against it, and adding a reviewed entry.

The registry is a TOML file committed in the repository. ``check-agent-eval``
reads it as committed at the batch's source commit (never the working copy),
checks that its digest is the one the batch recorded, and qualifies the batch
only when one entry equals the batch's runner, model, images and upstreams
exactly. ``agent-eval runners review`` appends an entry for a runner.json,
written with tomli-w; nothing in it can be a credential (runner.json names
credentials, it never holds them, and the note is refused if it looks like one).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import ValidationError

from agent_eval.errors import ConfigError, EvidenceError
from agent_eval.evidence_io import (
    format_validation_error,
    nesting_exceeds,
    read_bounded,
    write_bytes_atomic,
)
from agent_eval.gateway.host import recorded_upstreams
from agent_eval.models import (
    ArchivesManifest,
    RecordedUpstream,
    RegistryEntry,
    RunnerConfig,
    RunnerRegistry,
)
from agent_eval.models.runner_config import check_no_literal_secret
from agent_eval.processes import run_group
from agent_eval.reference import is_reference_name

__all__ = [
    "RegistryAt",
    "RegistryChange",
    "RegistryChanged",
    "commit_time",
    "entry_differences",
    "head_commit",
    "is_ancestor",
    "parse_registry",
    "registry_at_commit",
    "registry_changed",
    "review_runner",
]

RegistryAt = Callable[[str], bytes | None]
"""The registry's bytes at a commit (None: the file is not in that commit)."""
MAX_REGISTRY_BYTES = 1024 * 1024


def parse_registry(data: bytes, where: str) -> RunnerRegistry:
    """The registry in *data*.

    Raises:
        EvidenceError: It is not TOML, or not a registry (the message names the field).
    """
    if len(data) > MAX_REGISTRY_BYTES:
        raise EvidenceError(f"{where} is larger than {MAX_REGISTRY_BYTES} bytes")
    if nesting_exceeds(data):
        raise EvidenceError(f"{where} nests arrays or tables too deeply")
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise EvidenceError(f"{where} is not TOML: {exc}") from None
    except RecursionError:
        raise EvidenceError(f"{where} nests arrays or tables too deeply") from None
    try:
        registry = RunnerRegistry.model_validate(document)
    except ValidationError as exc:
        raise EvidenceError(f"{where}: {format_validation_error(exc)}") from None
    for index, entry in enumerate(registry.runner):
        if _reserved(entry.runner.name):
            raise EvidenceError(
                f"{where}: runner.{index}.runner.name: {entry.runner.name!r} is reserved for "
                "the built-in reference runners, which prove no agent and are never reviewed"
            )
    return registry


def _reserved(name: str) -> bool:
    """A runner name of the built-in reference runners (however it is spelled)."""
    return is_reference_name(name)


def commit_time(repository: Path) -> Callable[[str], datetime | None]:
    """When a commit of *repository* was committed (its committer date), or None."""

    def read(commit: str) -> datetime | None:
        done = run_group(
            ["git", "-C", str(repository), "show", "-s", "--format=%cI", "--end-of-options",
             commit, "--"],
            text=True, timeout=60,
        )  # fmt: skip
        try:
            return datetime.fromisoformat(done.stdout.strip()) if done.returncode == 0 else None
        except ValueError:
            return None

    return read


def is_ancestor(repository: Path) -> Callable[[str, str], bool | None]:
    """Whether one commit is in the history of (or is) another, by *repository*'s graph.

    None: git could not tell (a commit is unknown, or git failed). History, never the
    committer dates, which whoever commits sets at will.
    """

    def read(ancestor: str, descendant: str) -> bool | None:
        done = run_group(
            ["git", "-C", str(repository), "merge-base", "--is-ancestor", "--end-of-options",
             ancestor, descendant],
            text=True, timeout=60,
        )  # fmt: skip
        return {0: True, 1: False}.get(done.returncode)

    return read


def head_commit(repository: Path) -> str | None:
    """The full id of *repository*'s HEAD commit; None: not a repository, or no commit yet."""
    done = run_group(
        ["git", "-C", str(repository), "rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        text=True, timeout=60,
    )  # fmt: skip
    commit = done.stdout.strip()
    full = re.fullmatch(r"[0-9a-f]{40}(?:[0-9a-f]{24})?", commit)
    return commit if done.returncode == 0 and full else None


@dataclass(frozen=True)
class RegistryChange:
    """The last commit, at or before a batch's, that changed the registry."""

    commit: str
    committed_at: datetime


RegistryChanged = Callable[[str], RegistryChange | None]


def registry_changed(repository: Path, path: str) -> RegistryChanged:
    """A reader of the last change to *path* in the history of a given commit."""

    def read(commit: str) -> RegistryChange | None:
        done = run_group(
            ["git", "-C", str(repository), "log", "-1", "--format=%H %cI", "--end-of-options",
             commit, "--", path],
            text=True, timeout=60,
        )  # fmt: skip
        try:
            sha, when = done.stdout.split()
            return RegistryChange(sha, datetime.fromisoformat(when))
        except ValueError:
            return None

    return read


def registry_at_commit(repository: Path, path: str) -> RegistryAt:
    """A reader of *path* (relative to *repository*) as committed at a given commit."""

    def read(commit: str) -> bytes | None:
        done = run_group(
            ["git", "-C", str(repository), "show", "--end-of-options", f"{commit}:{path}"],
            timeout=60,
        )
        return done.stdout if done.returncode == 0 else None

    return read


def _upstreams(items: list[RecordedUpstream]) -> list[dict[str, Any]]:
    return sorted((u.model_dump(mode="json") for u in items), key=lambda u: str(u["name"]))


def _batch_fields(archives: ArchivesManifest) -> dict[str, Any]:
    gateway = archives.gateway
    return {
        "runner": archives.runner.model_dump(mode="json"),
        "model": archives.model.model_dump(mode="json"),
        "runnerImage": {archives.runnerImage.reference, archives.runnerImage.imageId},
        "verifierImage": {archives.verifierImage.reference, archives.verifierImage.imageId},
        "gatewayImage": {gateway.image} if gateway else set(),
        "upstreams": _upstreams(gateway.upstreams) if gateway else [],
        "command": archives.runnerCommand,
        "envAllowlist": sorted(archives.envAllowlist)
        if archives.envAllowlist is not None
        else None,
    }


def entry_differences(entry: RegistryEntry, archives: ArchivesManifest) -> list[str]:
    """The fields in which *entry* differs from the batch (empty: it matches)."""
    batch = _batch_fields(archives)
    wanted = {
        "runner": entry.runner.model_dump(mode="json"),
        "model": entry.model.model_dump(mode="json"),
        "upstreams": _upstreams(entry.upstreams),
        "command": list(entry.command),
        "envAllowlist": sorted(entry.envAllowlist),
    }
    differing = [name for name, value in wanted.items() if batch[name] != value]
    for name in ("runnerImage", "verifierImage", "gatewayImage"):
        if getattr(entry, name) not in batch[name]:
            differing.append(name)
    return differing


def _entry_of(
    config: RunnerConfig, reviewer: str, note: str, now: datetime, source_commit: str
) -> RegistryEntry:
    if not config.models or config.gatewayImage is None:
        raise ConfigError(
            "models: a runner that reaches no model gateway proves no agent; "
            "only a configuration with models[] can be reviewed"
        )
    if _reserved(config.expectedRunner.name):
        raise ConfigError(
            f"expectedRunner.name: {config.expectedRunner.name!r} is reserved for the "
            "built-in reference runners, which prove no agent and are never reviewed"
        )
    if config.gateway.privateUpstreams:
        raise ConfigError(
            "gateway.privateUpstreams: a test set-up (a fake provider) is never reviewed"
        )
    adapter = " ".join([config.executable, *config.args])
    try:
        check_no_literal_secret(note)
    except ValueError as exc:
        raise ConfigError(f"--note: {exc}") from None
    return RegistryEntry(
        runner=config.expectedRunner,
        model=config.expectedModel,
        adapter=adapter,
        command=[config.executable, *config.args],
        envAllowlist=sorted(config.envAllowlist),
        runnerImage=config.runnerImage,
        verifierImage=config.verifierImage,
        gatewayImage=config.gatewayImage,
        upstreams=recorded_upstreams(config.models),
        reviewer=reviewer,
        reviewedAt=now,
        note=note,
        sourceCommit=source_commit,
    )


def review_runner(
    registry: Path,
    config: RunnerConfig,
    *,
    reviewer: str,
    note: str,
    now: datetime,
    repository: Path,
) -> RegistryEntry:
    """Append an entry for *config* to the registry file (created when absent), atomically.

    The entry records *repository*'s HEAD as the commit it was reviewed at: it counts
    only for batches packed from that commit or a later one in its history.

    Raises:
        ConfigError: The config cannot be reviewed, the note looks like a secret, or
            *repository* has no commit to record.
        EvidenceError: The registry exists but is not one.
    """
    source_commit = head_commit(repository)
    if source_commit is None:
        raise ConfigError(
            f"{repository} has no commit: an entry records the commit it was reviewed at; "
            "commit the repository first"
        )
    try:
        entry = _entry_of(config, reviewer, note, now, source_commit)
    except ValidationError as exc:
        raise ConfigError(f"--reviewer: {format_validation_error(exc)}") from None
    current = RunnerRegistry(schemaVersion=1)
    if registry.exists() or registry.is_symlink():
        # Never blocks on a FIFO, never reads a directory or a device.
        data = read_bounded(registry, what="registry", max_bytes=MAX_REGISTRY_BYTES)
        current = parse_registry(data, str(registry))
    reviewed = {"reviewer", "reviewedAt", "note", "sourceCommit"}
    # An entry without sourceCommit counts for no batch: reviewing it again adds one that does.
    if any(
        e.sourceCommit is not None
        and e.model_dump(exclude=reviewed) == entry.model_dump(exclude=reviewed)
        for e in current.runner
    ):
        raise ConfigError(f"{registry} already has an entry for exactly this configuration")
    updated = current.model_copy(update={"runner": [*current.runner, entry]})
    text = tomli_w.dumps(updated.model_dump(mode="json", exclude_none=True))
    write_bytes_atomic(registry, text.encode("utf-8"))
    registry.chmod(0o644)
    return entry
