"""The build lock and its wheelhouse: what builds the library's wheels, pinned by hash.

``packages/build-requirements.lock`` pins, as ``name==version`` with sha256
hashes, every distribution's ``[build-system] requires`` and their
dependencies. The wheels come from a wheelhouse on this machine, filled once
by :func:`fetch_build_wheels` (the only step that reaches a package index)
and checked against the lock's hashes each time they are used.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from agent_eval.digests import file_sha256
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.packing.sources import SourceDistribution, normalise_name
from agent_eval.processes import run_group

__all__ = [
    "BUILD_LOCK",
    "BuildLock",
    "LockedWheel",
    "check_build_requirements",
    "fetch_build_wheels",
    "read_build_lock",
    "verified_wheels",
]

BUILD_LOCK = "build-requirements.lock"
"""The build lock's name in the packages directory."""

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)$")
_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")
_FETCH_TIMEOUT_S = 600


@dataclass(frozen=True)
class LockedWheel:
    """One pinned build requirement."""

    name: str
    """Its normalised name."""
    version: str
    """Its exact version."""
    hashes: frozenset[str]
    """The sha256 digests (hex) a wheel of it may have."""


@dataclass(frozen=True)
class BuildLock:
    """A parsed build lock."""

    path: Path
    """The lock file."""
    sha256: str
    """The digest of its bytes (what a cached build environment is keyed by)."""
    pins: dict[str, LockedWheel]
    """Every pin, by normalised name."""


def read_build_lock(path: Path) -> BuildLock:
    """The build lock at *path*.

    Raises:
        ConfigError: It is missing, or a line is not ``name==version`` with a
            ``--hash=sha256:`` each, or a name is pinned twice.
    """
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path}: cannot read the build lock ({exc}); it pins every [build-system] "
            "requires of the distributions, with hashes"
        ) from exc
    pins: dict[str, LockedWheel] = {}
    logical = re.sub(r"\\\n", " ", text)
    for number, line in enumerate(logical.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        match = _PIN.match(words[0])
        hashes = [h.group(1) for w in words[1:] if (h := _HASH.match(w))]
        if match is None or not hashes or len(hashes) != len(words) - 1:
            raise ConfigError(
                f"{path}: entry {number} ({line.strip()[:80]!r}) is not "
                "name==version with --hash=sha256:<hex> options only"
            )
        name = normalise_name(match.group(1))
        if name in pins:
            raise ConfigError(f"{path}: {name} is pinned twice")
        pins[name] = LockedWheel(name, match.group(2), frozenset(hashes))
    if not pins:
        raise ConfigError(f"{path}: the build lock pins nothing")
    return BuildLock(path, hashlib.sha256(data).hexdigest(), pins)


def check_build_requirements(
    lock: BuildLock,
    dist: SourceDistribution,
    requires: Sequence[str] | None = None,
    field: str = "[build-system] requires",
) -> None:
    """Refuse *dist* unless the lock pins each of its build requirements within its range.

    Args:
        lock: The build lock.
        dist: The distribution.
        requires: Its requirements (default: its ``[build-system] requires``).
        field: Where *requires* come from, for the message.

    Raises:
        ConfigError: A requirement is malformed, not pinned, or pinned outside its range.
    """
    where = f"{dist.pyproject}: {field}"
    for text in dist.build_system.requires if requires is None else requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            raise ConfigError(f"{where}: {text!r} is not a requirement: {exc}") from exc
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        pin = lock.pins.get(normalise_name(requirement.name))
        if pin is None:
            raise ConfigError(
                f"{where} {text!r} of {dist.name}, but {lock.path} does not pin "
                f"{requirement.name}: add it (and its dependencies) with their hashes"
            )
        if not requirement.specifier.contains(pin.version, prereleases=True):
            raise ConfigError(
                f"{where} {text!r} of {dist.name}, but {lock.path} pins "
                f"{requirement.name}=={pin.version}"
            )


def _wheel_key(path: Path) -> tuple[str, str] | None:
    parts = path.name.split("-")
    return (normalise_name(parts[0]), parts[1]) if len(parts) >= 5 else None


def verified_wheels(lock: BuildLock, wheelhouse: Path) -> list[Path]:
    """One wheel per pin of *lock* from *wheelhouse*, each matching one of its hashes.

    Raises:
        ConfigError: A pin has no wheel there, or no wheel of it has a locked hash.
    """
    by_pin: dict[tuple[str, str], list[Path]] = {}
    for path in sorted(wheelhouse.glob("*.whl")) if wheelhouse.is_dir() else []:
        if (key := _wheel_key(path)) is not None:
            by_pin.setdefault(key, []).append(path)
    chosen = []
    for pin in sorted(lock.pins.values(), key=lambda p: p.name):
        candidates = by_pin.get((pin.name, pin.version), [])
        if not candidates:
            raise ConfigError(
                f"{lock.path}: {pin.name}=={pin.version} has no wheel in {wheelhouse}; "
                f"download the build lock's wheels with `agent-eval fetch-build-wheels`"
            )
        digests = {path: file_sha256(path).removeprefix("sha256:") for path in candidates}
        matching = [path for path, digest in digests.items() if digest in pin.hashes]
        if not matching:
            named = ", ".join(f"{p.name} is sha256:{d}" for p, d in digests.items())
            raise ConfigError(
                f"{lock.path}: {pin.name}=={pin.version}: {named}, not a hash the lock pins; "
                "the wheel was changed or is another build: remove it and fetch it again"
            )
        chosen.append(matching[0])
    return chosen


def clean_environment() -> dict[str, str]:
    """What an offline pip and a build backend run with: nothing of the user's Python or pip
    settings (no PYTHONPATH, no pip configuration), no version check, no bytecode written."""
    keep = ("PATH", "HOME", "LANG", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
    return {
        **{name: os.environ[name] for name in keep if name in os.environ},
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }


def run_pip(arguments: Sequence[str], *, doing: str) -> subprocess.CompletedProcess[str]:
    """pip of this interpreter with *arguments*, its output captured; the caller reads its exit.

    The user's own pip settings (index, certificates) apply: these are the steps
    that reach a package index.

    Raises:
        InfrastructureError: It ran over :data:`_FETCH_TIMEOUT_S` (*doing* says what it did).
    """
    try:
        return run_group(
            [sys.executable, "-m", "pip", *arguments],
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            text=True, timeout=_FETCH_TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise InfrastructureError(f"{doing} took over {_FETCH_TIMEOUT_S}s") from exc


def fetch_build_wheels(lock_path: Path, wheelhouse: Path) -> list[Path]:
    """Download the wheels *lock_path* pins into *wheelhouse*, by name, checked by hash.

    Wheels already there with a locked hash are kept; this is the one step of
    packing that reaches a package index.

    Returns:
        The lock's wheels in *wheelhouse*.

    Raises:
        ConfigError: The lock is malformed.
        InfrastructureError: pip could not download them.
    """
    lock = read_build_lock(lock_path)
    try:
        return verified_wheels(lock, wheelhouse)
    except ConfigError:
        pass
    wheelhouse.mkdir(parents=True, exist_ok=True)
    # pip writes into a folder of this call's own, and each whole wheel is then renamed
    # in: another process reading or fetching the same wheelhouse never meets half a
    # wheel (two batches, or two test workers, may start at once on a new machine).
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=wheelhouse) as staging:
        done = run_pip(
            ["download", "--no-deps", "--require-hashes", "--only-binary=:all:", "--quiet",
             "--dest", staging, "-r", str(lock_path)],
            doing=f"downloading the wheels of {lock_path}",
        )  # fmt: skip
        if done.returncode != 0:
            raise InfrastructureError(
                f"downloading the wheels of {lock_path} failed (exit {done.returncode}): "
                f"{done.stderr.strip()[-1500:]}"
            )
        for wheel in Path(staging).glob("*.whl"):
            os.replace(wheel, wheelhouse / wheel.name)
    return verified_wheels(lock, wheelhouse)
