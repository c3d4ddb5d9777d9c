"""Building the library's wheels as each distribution's own build system says, offline.

Every distribution is built through its PEP 517 backend in the isolated build
environment of the build lock (:mod:`agent_eval.packing.environment`), from a
clean copy of its source (stale ``build/`` or ``*.egg-info`` directories would
otherwise leak deleted modules into the wheel) whose files have git's modes
(a backend may record them; the checkout's umask must not reach a wheel),
without an index, with SOURCE_DATE_EPOCH fixed so that the same source gives
the same bytes. A
version computed from git (setuptools-scm, hatch-vcs) is given to the backend
as ``SETUPTOOLS_SCM_PRETEND_VERSION``, derived from ``git describe`` of the
commit being packed, so that it is the same whenever that commit is built. A
source distribution's ``PKG-INFO`` (the metadata of the build that made it) is
then left out of the copy the backend sees: hatchling takes every dynamic field
from it when it is there, and would build the sdist's version instead. Every
wheel's version, in its file name and its ``METADATA``, is held to the one
packing computed (or the pyproject's own); a wheel of another version is an
error, never an archive.

A wheel built once is kept in the wheel cache (:mod:`agent_eval.packing.cache`)
under the digest of everything its bytes depend on, and taken from there, held
to the digest recorded when it was built, while those inputs stay the same.
"""

from __future__ import annotations

import email.parser
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version
from pyproject_hooks import BackendInvalid, BackendUnavailable, BuildBackendHookCaller, HookMissing

from agent_eval.digests import file_sha256
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.models import ArchiveEntry
from agent_eval.packing.cache import (
    COPY_FILTER,
    Origin,
    WheelCache,
    copy_as_git_holds,
    source_digest,
    wheel_key,
)
from agent_eval.packing.environment import build_environment
from agent_eval.packing.lock import (
    BUILD_LOCK,
    BuildLock,
    check_build_requirements,
    clean_environment,
    read_build_lock,
)
from agent_eval.packing.sources import SourceDistribution, find_distributions
from agent_eval.processes import run_group

__all__ = [
    "BuildCache",
    "build_archives",
    "git_version",
    "rebuild_archives",
    "wheel_build_requirements",
]

# 1980-01-01: the earliest time a zip archive can record. A constant rather than the
# commit's time: the same tree gives the same wheel whichever commit holds it.
_EPOCH = "315532800"
_BUILD_TIMEOUT_S = 300
_GIT_TIMEOUT_S = 30
_OUTPUT_LINES = 20


@dataclass(frozen=True)
class BuildCache:
    """Where packing keeps the build lock's wheels, its build environments and built wheels."""

    wheelhouse: Path
    """The downloaded wheels of build locks (checked against a lock's hashes on every use)."""
    environments: Path
    """Build environments, one per lock digest and interpreter (checked on every use)."""
    built: Path | None = None
    """The wheel cache: built wheels by the digest of their inputs (checked on every use);
    None: every wheel is built."""

    @classmethod
    def default(cls) -> BuildCache:
        """The user's cache, shared by every checkout: ``$XDG_CACHE_HOME/agent-eval/packing``."""
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        packing = root / "agent-eval" / "packing"
        return cls(packing / "wheels", packing / "envs", packing / "built")


def _git(repository: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_group(["git", "-C", str(repository), *args], text=True, timeout=_GIT_TIMEOUT_S)


def git_version(repository: Path, revision: str, dist: SourceDistribution) -> str:
    """The version of *dist* at *revision*, as setuptools-scm's default scheme computes it.

    A tag on the commit is its version (``v1.2`` is ``1.2``); N commits after a
    tag ``1.2`` it is ``1.3.devN+g<hash>``; with no tag, ``0.1.devN+g<hash>``
    (N counting every commit). The hash is 12 hex digits, so it does not depend
    on how many objects the repository holds.

    Raises:
        ConfigError: There is no such commit in a git repository, or its tag is no version.
    """
    field = f"{dist.pyproject}: [project] dynamic version of {dist.name} (from git)"
    head = _git(repository, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if head.returncode != 0:
        raise ConfigError(
            f"{field} cannot be computed: {revision} is not a commit of a git repository at "
            f"{repository} ({head.stderr.strip()[-300:] or 'no commit'})"
        )
    node = "g" + head.stdout.strip()[:12]
    described = _git(
        repository, "describe", "--tags", "--long", "--abbrev=12", "--match=*[0-9]*", revision
    )
    if described.returncode != 0:
        count = _git(repository, "rev-list", "--count", revision).stdout.strip()
        return f"0.1.dev{count}+{node}"
    tag, distance, _ = described.stdout.strip().rsplit("-", 2)
    try:
        version = Version(tag.removeprefix("v"))
    except InvalidVersion as exc:
        raise ConfigError(f"{field} cannot be computed: the tag {tag!r} is not a version") from exc
    if distance == "0":
        return str(version)
    release = [*version.release[:-1], version.release[-1] + 1]
    return f"{'.'.join(map(str, release))}.dev{distance}+{node}"


class _Hooks:
    """Runs a backend's PEP 517 hooks in the build environment, keeping what they print."""

    def __init__(self, dist: SourceDistribution, source: Path, python: Path, env: dict[str, str]):
        self._dist, self._env, self._output = dist, env, ""
        system = dist.build_system
        self.caller = BuildBackendHookCaller(
            str(source), system.backend, list(system.backend_path) or None,
            runner=self._run, python_executable=str(python),
        )  # fmt: skip

    def _run(
        self,
        cmd: Sequence[str],
        cwd: str | None = None,
        extra_environ: Mapping[str, str] | None = None,
    ) -> None:
        try:
            done = run_group(
                cmd, cwd=cwd, env={**self._env, **(extra_environ or {})}, text=True,
                timeout=_BUILD_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise InfrastructureError(
                f"building {self._dist.name} took over {_BUILD_TIMEOUT_S}s"
            ) from exc
        self._output = (done.stdout + done.stderr).strip()
        if done.returncode != 0:
            raise self.failed(f"exit {done.returncode}")

    def failed(self, why: str, output: str = "") -> ConfigError:
        """The error of a build that failed for *why*, with its last lines of output."""
        printed = output.strip() or self._output
        lines = "\n".join(printed.splitlines()[-_OUTPUT_LINES:])[-3000:]
        return ConfigError(
            f"{self._dist.pyproject}: building the wheel of {self._dist.name} with its "
            f"[build-system] build-backend {self._dist.build_system.backend!r} failed "
            f"({why}); its last lines:\n{lines}"
        )


@contextmanager
def _backend(dist: SourceDistribution, python: Path, version: str | None) -> Iterator[_Hooks]:
    """The backend's hooks over a clean copy of *dist*'s source, for as long as it is kept."""
    with tempfile.TemporaryDirectory(prefix="agent-eval-pack-") as tmp:
        clean = Path(tmp) / dist.directory.name
        shutil.copytree(dist.directory, clean, ignore=COPY_FILTER, copy_function=copy_as_git_holds)
        env = {**clean_environment(), "SOURCE_DATE_EPOCH": _EPOCH}
        if version is not None:
            env["SETUPTOOLS_SCM_PRETEND_VERSION"] = version
            # An sdist's metadata would win over the version given (hatchling reads it).
            (clean / "PKG-INFO").unlink(missing_ok=True)
        hooks = _Hooks(dist, clean, python, env)
        try:
            yield hooks
        except (BackendUnavailable, BackendInvalid, HookMissing) as exc:
            raise hooks.failed(
                f"{type(exc).__name__}: {exc}", getattr(exc, "traceback", "")
            ) from exc


def wheel_build_requirements(
    dist: SourceDistribution, python: Path, version: str | None
) -> tuple[str, ...]:
    """What *dist*'s backend asks for beyond ``[build-system] requires`` to build a wheel
    (its ``get_requires_for_build_wheel``), asked in the build environment of *python*.

    Raises:
        ConfigError: The backend cannot be imported there or the hook fails.
        InfrastructureError: It could not run.
    """
    with _backend(dist, python, version) as hooks:
        return tuple(hooks.caller.get_requires_for_build_wheel())


def _build_wheel(
    dist: SourceDistribution, python: Path, lock: BuildLock, output_dir: Path, version: str | None
) -> ArchiveEntry:
    with (
        tempfile.TemporaryDirectory(prefix="agent-eval-out-") as tmp,
        _backend(dist, python, version) as hooks,
    ):
        out = Path(tmp)
        more = hooks.caller.get_requires_for_build_wheel()
        check_build_requirements(lock, dist, more, "get_requires_for_build_wheel()")
        name = hooks.caller.build_wheel(str(out))
        wheels = sorted(out.glob("*.whl"))
        if wheels != [out / name]:
            raise hooks.failed(f"it made {[w.name for w in wheels]}, not one wheel")
        built = _built_version(hooks, out / name, version or dist.version)
        target = output_dir / name
        shutil.copyfile(out / name, target)
    return ArchiveEntry(
        filename=target.name,
        distribution=dist.name,
        version=built,
        sha256=file_sha256(target),
        size=target.stat().st_size,
    )


def _built_version(hooks: _Hooks, wheel: Path, expected: str | None) -> str:
    """The version of *wheel*, the same in its file name and its METADATA, and *expected*'s
    (the version computed from git or the pyproject's) when there is one."""
    named = wheel.name.split("-")[1] if wheel.name.count("-") >= 4 else ""
    try:
        with zipfile.ZipFile(wheel) as archive:
            metadata = next(
                (n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)),
                None,
            )
            text = archive.read(metadata).decode("utf-8") if metadata else ""
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise hooks.failed(f"its wheel {wheel.name} cannot be read: {exc}") from exc
    header = email.parser.HeaderParser().parsestr(text)
    recorded = str(header.get("Version", ""))
    versions = {"its file name": named, "its METADATA": recorded}
    if expected is not None:
        versions["packing"] = expected
    try:
        parsed = {where: Version(v) for where, v in versions.items()}
    except InvalidVersion as exc:
        raise hooks.failed(f"its wheel {wheel.name} has no valid version: {exc}") from exc
    if len(set(parsed.values())) != 1:
        said = ", ".join(f"{where} says {v!r}" for where, v in versions.items())
        raise hooks.failed(
            f"the wheel {wheel.name} is not of the version packing computed: {said}; "
            "a version from git is given as SETUPTOOLS_SCM_PRETEND_VERSION, so its backend "
            "must read it from there (or the pyproject must state it)"
        )
    return named


def build_archives(
    packages_dir: Path,
    output_dir: Path,
    *,
    cache: BuildCache | None = None,
    revision: tuple[Path, str] | None = None,
    notice: Callable[[str], None] | None = None,
) -> list[ArchiveEntry]:
    """Build one wheel per distribution into *output_dir* and describe each.

    Args:
        packages_dir: The distributions and their build lock (``build-requirements.lock``).
        output_dir: Where the wheels go.
        cache: The wheelhouse, build environments and wheel cache (default: the user's cache).
        revision: The git repository and commit a version computed from git is taken
            from (default: *packages_dir*'s repository at ``HEAD``).
        notice: Hears why a cached wheel was thrown away (default: stderr).

    The builds are independent subprocesses and run side by side. A wheel whose
    inputs are those of a cached one is taken from the wheel cache instead; the
    wheels of a tree git reports changed are kept apart from a commit's.

    Raises:
        ConfigError: A distribution, the lock, a requirement missing from it, a wheel of
            it not matching its hash, a version that cannot be computed, a failed build.
        InfrastructureError: pip or a build could not run.
    """
    origin: Origin = "commit" if _unchanged(packages_dir) else "working-tree"
    return _build_all(
        packages_dir, output_dir, cache or BuildCache.default(),
        revision or (packages_dir, "HEAD"), origin, notice,
    )  # fmt: skip


def _unchanged(packages_dir: Path) -> bool:
    """Whether git holds *packages_dir* as it is (nothing changed, added or removed).

    What makes a cached wheel right is its key's digest of the files a build sees; this
    only keeps the wheels of a tree git reports changed out of a rebuild's reach.
    """
    done = subprocess.run(
        ["git", "--no-optional-locks", "-C", str(packages_dir), "status", "--porcelain",
         "--untracked-files=all", "--", "."],
        capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=False,
    )  # fmt: skip
    return done.returncode == 0 and not done.stdout.strip()


def _build_all(
    packages_dir: Path,
    output_dir: Path,
    cache: BuildCache,
    revision: tuple[Path, str],
    origin: Origin,
    notice: Callable[[str], None] | None,
) -> list[ArchiveEntry]:
    output_dir.mkdir(parents=True, exist_ok=True)
    distributions = find_distributions(packages_dir)
    lock = read_build_lock(packages_dir / BUILD_LOCK)
    for dist in distributions:
        check_build_requirements(lock, dist)
    repository, commit = revision
    versions = {
        d.name: git_version(repository, commit, d) if d.version_from_git else None
        for d in distributions
    }
    wheels = WheelCache(cache.built, notice) if cache.built is not None else None
    keys: dict[str, str] = {}
    found: dict[str, ArchiveEntry] = {}
    for dist in distributions:
        files = source_digest(dist.directory) if wheels is not None else None
        if wheels is None or files is None:
            continue
        keys[dist.name] = wheel_key(
            dist, origin=origin, lock_sha256=lock.sha256, version=versions[dist.name], files=files
        )
        if (entry := wheels.take(keys[dist.name], output_dir)) is not None:
            found[dist.name] = entry
    missing = [d for d in distributions if d.name not in found]
    if missing:
        python = build_environment(lock, cache.wheelhouse, cache.environments)
        with ThreadPoolExecutor(max_workers=min(4, len(missing))) as pool:
            built = list(
                pool.map(
                    lambda d: _build_wheel(d, python, lock, output_dir, versions[d.name]), missing
                )
            )
        for dist, entry in zip(missing, built, strict=True):
            found[dist.name] = entry
            if wheels is not None and dist.name in keys:
                wheels.put(keys[dist.name], output_dir / entry.filename, entry)
    return [found[d.name] for d in distributions]


def rebuild_archives(
    repository: Path,
    packages: str,
    commit: str,
    work_dir: Path,
    *,
    cache: BuildCache | None = None,
    notice: Callable[[str], None] | None = None,
) -> list[ArchiveEntry]:
    """Build the candidate wheels again from *commit*'s ``packages`` tree, as packing does.

    The tree comes from git itself (``git archive``), never from the working
    copy, so what is rebuilt is what the commit holds, with the build lock the
    commit holds. A wheel cached under the key of that tree (its files, the
    commit's lock and version, as a commit's) is taken instead of a build,
    held to its recorded digest; a working tree's wheel is never taken.

    Args:
        repository: The git repository (the project's root).
        packages: The packages directory, relative to the repository root.
        commit: The 40-hex commit recorded in archives.json.
        work_dir: An empty private directory for the tree and the wheels.
        cache: The wheelhouse, build environments and wheel cache (default: the user's cache).
        notice: Hears why a cached wheel was thrown away (default: stderr).

    Raises:
        ConfigError: The commit is unknown here or holds no packages, or its
            distributions do not build (see :func:`build_archives`).
        InfrastructureError: git or a build could not run.
    """
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ConfigError(f"{commit!r} is not a full git commit id")
    # ^{commit}: a tree or blob id is refused, as a commit that is not here is.
    archive = _git_bytes(
        repository, "archive", "--format=tar", f"{commit}^{{commit}}", "--", packages
    )
    if archive.returncode != 0:
        known = _git_bytes(repository, "cat-file", "-e", f"{commit}^{{commit}}")
        if known.returncode != 0:
            raise ConfigError(f"commit {commit} is not in the repository at {repository}")
        stderr = archive.stderr.decode("utf-8", "replace").strip()[-500:]
        raise ConfigError(f"commit {commit} holds no {packages}/: {stderr}")
    tree = work_dir / "tree"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return _build_all(
        tree / packages, work_dir / "wheels", cache or BuildCache.default(),
        (repository, commit), "commit", notice,
    )  # fmt: skip


def _git_bytes(repository: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_group(["git", "-C", str(repository), *args], timeout=120)
