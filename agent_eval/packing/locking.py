"""Writing the build lock: every distribution's build requirements, resolved by pip and pinned.

:func:`lock_build_requirements` reads each distribution's ``[build-system]
requires`` under the packages directory, has pip resolve their closure
(``pip install --dry-run --ignore-installed --only-binary :all: --report``, for
this interpreter, which is the build environment's), and writes
``build-requirements.lock`` in the format :mod:`~agent_eval.packing.lock`
reads, each wheel pinned by the sha256 pip's report gives. Packing also
checks what each backend's ``get_requires_for_build_wheel`` asks for against
the lock, so the backends are asked in a build environment of the lock made
so far, and anything they add is resolved again with the rest, until nothing
new is asked. Besides ``fetch-build-wheels`` this is the one step of packing
that reaches a package index.

The resolution is a port (:class:`Resolver`): :class:`PipResolver` runs pip,
:class:`RecordedResolver` answers from a recorded report.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from packaging.requirements import InvalidRequirement, Requirement

from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.evidence_io import write_bytes_atomic
from agent_eval.packing.build import BuildCache, wheel_build_requirements
from agent_eval.packing.environment import build_environment
from agent_eval.packing.lock import (
    BUILD_LOCK,
    BuildLock,
    check_build_requirements,
    fetch_build_wheels,
    read_build_lock,
    run_pip,
)
from agent_eval.packing.sources import SourceDistribution, find_distributions, normalise_name

__all__ = [
    "AskBackends",
    "LockWritten",
    "PipResolver",
    "RecordedResolver",
    "ResolvedWheel",
    "Resolver",
    "backend_requirements",
    "lock_build_requirements",
    "lock_text",
    "parse_pip_report",
]

_HEADER = """\
# What builds the library's wheels: every distribution's [build-system] requires and
# their dependencies, pinned by hash. Packing installs exactly these, offline, into an
# isolated build environment (`agent-eval fetch-build-wheels` downloads them once); the
# checker rebuilds a commit's wheels with the lock of that commit.
# Written by `agent-eval lock-build`.
"""
# Each round adds what the backends asked for; a backend that keeps asking for more is refused.
_MAX_ROUNDS = 4
# A backend asked for its requirements needs some version; it does not depend on which.
_PLACEHOLDER_VERSION = "0"


@dataclass(frozen=True)
class ResolvedWheel:
    """One wheel of a resolution, as pip's report names it."""

    name: str
    """Its normalised name."""
    version: str
    """Its exact version."""
    sha256: str
    """The sha256 (hex) of the wheel pip chose."""


def parse_pip_report(data: bytes, where: str) -> list[ResolvedWheel]:
    """The wheels of a ``pip install --report`` (version 1) document, sorted by name.

    Raises:
        InfrastructureError: The report is not JSON, not version 1, or an entry lacks its
            name, version or sha256, or is not a wheel (named at *where*).
    """
    try:
        report = json.loads(data)
    except ValueError as exc:
        raise InfrastructureError(f"{where}: pip's report is not JSON: {exc}") from None
    if not isinstance(report, dict) or report.get("version") != "1":
        version = report.get("version") if isinstance(report, dict) else None
        raise InfrastructureError(f"{where}: pip's report has version {version!r}, not '1'")
    installs = report.get("install")
    if not isinstance(installs, list):
        raise InfrastructureError(f"{where}: pip's report has no install list")
    wheels: dict[str, ResolvedWheel] = {}
    for number, item in enumerate(installs):
        entry = f"{where}: install[{number}]"
        try:
            metadata, info = item["metadata"], item["download_info"]
            name, version = str(metadata["name"]), str(metadata["version"])
            url = str(info["url"])
            sha256 = info["archive_info"]["hashes"]["sha256"]
        except (KeyError, TypeError) as exc:
            raise InfrastructureError(
                f"{entry}: no name, version and archive_info.hashes.sha256 ({exc!r} missing)"
            ) from None
        if not (isinstance(sha256, str) and len(sha256) == 64):
            raise InfrastructureError(f"{entry} ({name}): {sha256!r} is not a sha256")
        if not url.split("#", 1)[0].endswith(".whl"):
            raise InfrastructureError(f"{entry} ({name}): {url} is not a wheel")
        wheels[normalise_name(name)] = ResolvedWheel(normalise_name(name), version, sha256)
    return [wheels[name] for name in sorted(wheels)]


def lock_text(wheels: Sequence[ResolvedWheel]) -> str:
    """The build lock pinning *wheels*, in the format :func:`~.lock.read_build_lock` reads."""
    lines = [f"{w.name}=={w.version} \\\n    --hash=sha256:{w.sha256}\n" for w in wheels]
    return _HEADER + "".join(lines)


class Resolver(Protocol):
    """Resolves requirements to the wheels of their whole closure."""

    def resolve(self, requirements: Sequence[str]) -> list[ResolvedWheel]:
        """The closure of *requirements* for this interpreter, one wheel per distribution.

        Raises:
            ConfigError: They cannot be resolved (no such distribution, conflicts).
            InfrastructureError: The resolver could not run or answered nonsense.
        """
        ...


class PipResolver:
    """pip's own resolver, for this interpreter, reaching the index the user's pip settings name."""

    def resolve(self, requirements: Sequence[str]) -> list[ResolvedWheel]:
        """See :meth:`Resolver.resolve`."""
        with tempfile.TemporaryDirectory(prefix="agent-eval-lock-") as scratch:
            report = Path(scratch) / "report.json"
            done = run_pip(
                ["install", "--dry-run", "--ignore-installed", "--only-binary", ":all:",
                 "--target", str(Path(scratch) / "target"), "--report", str(report), "-q",
                 *requirements],
                doing=f"resolving {' '.join(requirements)}",
            )  # fmt: skip
            if done.returncode != 0:
                raise ConfigError(
                    f"pip cannot resolve the build requirements {' '.join(requirements)} "
                    f"(exit {done.returncode}): {done.stderr.strip()[-1500:]}"
                )
            return parse_pip_report(report.read_bytes(), "pip install --dry-run --report")


@dataclass
class RecordedResolver:
    """A resolver that answers every request with the next recorded pip report (for tests)."""

    reports: list[bytes]
    """The reports, answered in order."""
    asked: list[tuple[str, ...]] = field(default_factory=list)
    """The requirements of each request, in order."""

    def resolve(self, requirements: Sequence[str]) -> list[ResolvedWheel]:
        """See :meth:`Resolver.resolve`."""
        self.asked.append(tuple(requirements))
        return parse_pip_report(self.reports.pop(0), f"recorded report {len(self.asked)}")


AskBackends = Callable[[Path, Sequence[SourceDistribution]], dict[str, tuple[str, ...]]]
"""Given a lock file and the distributions: what each backend's
``get_requires_for_build_wheel`` asks for, by distribution name."""


def backend_requirements(cache: BuildCache) -> AskBackends:
    """The real :data:`AskBackends`: fetches the lock's wheels into *cache*, makes its build
    environment there and asks each backend in it."""

    def ask(lock_path: Path, dists: Sequence[SourceDistribution]) -> dict[str, tuple[str, ...]]:
        fetch_build_wheels(lock_path, cache.wheelhouse)
        python = build_environment(read_build_lock(lock_path), cache.wheelhouse, cache.environments)
        return {
            d.name: wheel_build_requirements(
                d, python, _PLACEHOLDER_VERSION if d.version_from_git else None
            )
            for d in dists
        }

    return ask


@dataclass(frozen=True)
class LockWritten:
    """What :func:`lock_build_requirements` did."""

    path: Path
    """The build lock."""
    wheels: tuple[ResolvedWheel, ...]
    """What it pins."""
    changed: bool
    """Whether the file was written (False: it already pinned exactly these)."""


def _requirements(dist: SourceDistribution, texts: Sequence[str], field_name: str) -> list[str]:
    for text in texts:
        try:
            Requirement(text)
        except InvalidRequirement as exc:
            raise ConfigError(
                f"{dist.pyproject}: {field_name} {text!r} is not a requirement: {exc}"
            ) from None
    return list(texts)


def _same_pins(path: Path, lock: BuildLock) -> bool:
    """Whether the lock at *path* pins exactly *lock*'s versions and hashes (its comments and
    layout are the maintainer's to keep)."""
    try:
        return read_build_lock(path).pins == lock.pins
    except ConfigError:
        return False


def _differences(path: Path, new: Sequence[ResolvedWheel]) -> str:
    try:
        pins = {name: pin.version for name, pin in read_build_lock(path).pins.items()}
    except ConfigError:
        return "it is not a build lock this harness reads"
    wanted = {w.name: w.version for w in new}
    said = [f"{n} {pins[n]} -> {wanted[n]}" for n in sorted(pins.keys() & wanted.keys())
            if pins[n] != wanted[n]]  # fmt: skip
    said += [f"+{n}=={wanted[n]}" for n in sorted(wanted.keys() - pins.keys())]
    said += [f"-{n}=={pins[n]}" for n in sorted(pins.keys() - wanted.keys())]
    return ", ".join(said) or "the same versions, with other hashes or text"


def lock_build_requirements(
    packages_dir: Path,
    *,
    resolver: Resolver | None = None,
    ask_backends: AskBackends | None = None,
    force: bool = False,
) -> LockWritten:
    """Resolve every distribution's build requirements and write ``build-requirements.lock``.

    Args:
        packages_dir: The distributions; the lock is written here.
        resolver: How requirements are resolved (default: pip, reaching the index).
        ask_backends: How the backends are asked for more (default: in a build environment
            of the lock so far, in the user's packing cache).
        force: Replace an existing lock that pins something else.

    Raises:
        ConfigError: A distribution or a requirement is malformed, pip cannot resolve them,
            a backend fails or keeps asking for more, or a lock exists that pins something
            else and *force* is not given (nothing is written then).
        InfrastructureError: pip or a backend could not run.
    """
    resolver = resolver or PipResolver()
    ask_backends = ask_backends or backend_requirements(BuildCache.default())
    distributions = find_distributions(packages_dir)
    wanted: list[str] = []
    for dist in distributions:
        wanted += _requirements(dist, dist.build_system.requires, "[build-system] requires")
    if not wanted:
        names = ", ".join(str(d.pyproject) for d in distributions)
        raise ConfigError(
            f"{names}: [build-system] requires is empty, so there is nothing to lock; a build "
            "lock pins at least the backend"
        )
    path = packages_dir / BUILD_LOCK
    with tempfile.TemporaryDirectory(prefix="agent-eval-lock-") as scratch:
        trial = Path(scratch) / BUILD_LOCK
        for _ in range(_MAX_ROUNDS):
            wheels = resolver.resolve(sorted(set(wanted)))
            text = lock_text(wheels)
            trial.write_text(text, encoding="utf-8")
            lock = read_build_lock(trial)
            asked = ask_backends(trial, distributions)
            missing: list[str] = []
            for dist in distributions:
                more = _requirements(
                    dist, asked.get(dist.name, ()), "get_requires_for_build_wheel()"
                )
                for requirement in more:
                    try:
                        check_build_requirements(lock, dist, [requirement])
                    except ConfigError:
                        missing.append(requirement)
            if not missing:
                break
            wanted += missing
        else:
            raise ConfigError(
                f"{packages_dir}: the backends still ask for {', '.join(sorted(set(missing)))} "
                f"after {_MAX_ROUNDS} resolutions; list them in [build-system] requires"
            )
    if path.exists():
        if _same_pins(path, lock):
            return LockWritten(path, tuple(wheels), changed=False)
        if not force:
            raise ConfigError(
                f"{path} exists and pins something else "
                f"({_differences(path, wheels)}); nothing written: "
                "give --force to replace it"
            )
    try:
        write_bytes_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the build lock: {exc}") from exc
    return LockWritten(path, tuple(wheels), changed=True)
