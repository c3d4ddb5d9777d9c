"""pip locks and wheels: a CLI's whole closure, hash-pinned, installed without pip's installer.

A pip lock is a requirements file in which every distribution of the closure
is pinned by version and by the sha256 of each binary wheel the images can
use: CPython 3.11 (Debian bookworm's python3) on manylinux with glibc up to
2.36, for x86_64 and aarch64 (:data:`ARCHITECTURES`). :func:`lock_requirements`
makes one with pip's own resolver (``pip install --dry-run --report`` once per
architecture, which reads the index's hashes without installing anything);
:func:`check_requirements_lock` refuses a lock that is missing, unhashed or
made for other roots or another target.

A build downloads the lock's wheels (``pip download --require-hashes
--no-deps``, into a cache keyed by the lock's bytes and the platform), checks
every file's sha256 against the lock again, and :func:`unpack_wheel` lays each
out as ``pip install --target`` would, without console scripts: the result is
a function of the wheels' bytes alone, whatever pip the host has.

pip runs with no configuration file (``PIP_CONFIG_FILE`` is the null device)
and without the environment's find-links, extra indexes or constraints: the
lock and the downloads come from the index alone (pip's default, or
``PIP_INDEX_URL``), while the environment's TLS, proxy and timeout settings
still apply.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent_eval.errors import ConfigError, InfrastructureError

__all__ = [
    "ARCHITECTURES",
    "LockedDistribution",
    "check_requirements_lock",
    "download_source",
    "download_wheels",
    "lock_requirements",
    "normalise",
    "parse_requirements",
    "platform_tags",
    "publish",
    "unpack_source_package",
    "unpack_wheel",
]

TARGET_PYTHON = "3.11"
"""Debian bookworm's python3, the interpreter of every image."""
ARCHITECTURES = ("x86_64", "aarch64")
"""The machines a lock covers."""
_GLIBC_MINORS = range(36, 16, -1)
"""manylinux_2_36 (bookworm's glibc) down to manylinux_2_17 (manylinux2014)."""
_TIMEOUT_S = 1800
_TAIL_LINES = 20
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)")
_DROPPED_ENV = ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_CONSTRAINT")

Run = Callable[..., subprocess.CompletedProcess[str]]
Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def platform_tags(architecture: str) -> list[str]:
    """pip's ``--platform`` values for *architecture*, the most specific first."""
    if architecture not in ARCHITECTURES:
        raise ConfigError(f"architecture {architecture!r} is not one of {', '.join(ARCHITECTURES)}")
    tags = [f"manylinux_2_{minor}_{architecture}" for minor in _GLIBC_MINORS]
    return [*tags, f"manylinux2014_{architecture}"]


def _target_line() -> str:
    return f"cp{TARGET_PYTHON.replace('.', '')} manylinux_2_17-2_{_GLIBC_MINORS[0]} " + " ".join(
        ARCHITECTURES
    )


def pip_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment pip runs in here: no config file, no find-links or extra index."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()}
    for name in _DROPPED_ENV:
        env.pop(name, None)
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _pip_command(python: str, verb: str, architecture_tags: Sequence[str]) -> list[str]:
    command = [python, "-m", "pip", verb, "--quiet", "--only-binary=:all:"]
    command += ["--implementation", "cp", "--python-version", TARGET_PYTHON]
    for tag in architecture_tags:
        command += ["--platform", tag]
    return command


def _run_pip(command: list[str], what: str, run: Run) -> None:
    done = run(
        command, capture_output=True, text=True, env=pip_environment(), timeout=_TIMEOUT_S,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-_TAIL_LINES:])
        raise InfrastructureError(f"pip could not {what} (exit {done.returncode}):\n{tail}")


# --- The lock file -----------------------------------------------------------------------


@dataclass(frozen=True)
class LockedDistribution:
    """One pinned line of a requirements lock."""

    name: str
    """Normalised distribution name."""
    version: str
    """The pinned version."""
    hashes: tuple[str, ...]
    """sha256 hex digests of its acceptable files."""


def parse_requirements(text: str, where: str) -> tuple[dict[str, str], list[LockedDistribution]]:
    """The ``# key: value`` header lines and the pinned distributions of a requirements lock.

    Raises:
        ConfigError: A line is not ``name==version`` with at least one sha256 hash.
    """
    header: dict[str, str] = {}
    locked: list[LockedDistribution] = []
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if line.startswith("#"):
            key, sep, value = line.lstrip("# ").partition(": ")
            if sep and re.fullmatch(r"[a-z][a-z-]*", key):
                header[key] = value.strip()
            continue
        if not line:
            continue
        match = _PIN.fullmatch(line.split()[0])
        hashes = tuple(_HASH.findall(line))
        if match is None or not hashes or len(hashes) != len(line.split()) - 1:
            raise ConfigError(f"{where}: {line[:80]!r} is not name==version with --hash=sha256:")
        locked.append(LockedDistribution(normalise(match.group(1)), match.group(2), hashes))
    return header, locked


def _roots_line(packages: Sequence[str]) -> str:
    return " ".join(sorted(packages))


def _source_only_line(source_only: Sequence[str]) -> str:
    return " ".join(sorted(source_only)) or "none"


def check_requirements_lock(
    path: Path, packages: Sequence[str], fix: str, source_only: Sequence[str] = ()
) -> list[LockedDistribution]:
    """The lock's distributions, once it is known to be the lock of *packages* for this target.

    Args:
        path: The requirements lock.
        packages: The roots it must be the closure of (install.json's packages).
        fix: The command that regenerates it, for the messages.
        source_only: Dependencies the lock leaves out (install.json's sourceOnly).

    Raises:
        ConfigError: It is missing, unhashed, or stale (other roots, another target,
            a root not pinned at its version).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: the lock is missing ({exc.strerror}); run `{fix}`") from None
    header, locked = parse_requirements(text, str(path))
    stale = f"{path} is stale"
    if header.get("roots") != _roots_line(packages):
        raise ConfigError(
            f"{stale}: it locks {header.get('roots') or 'no roots'}, install.json asks for "
            f"{_roots_line(packages)}; run `{fix}`"
        )
    if header.get("source-only", "none") != _source_only_line(source_only):
        raise ConfigError(
            f"{stale}: it leaves out {header.get('source-only', 'none')}, install.json's "
            f"sourceOnly is {_source_only_line(source_only)}; run `{fix}`"
        )
    if header.get("target") != _target_line():
        raise ConfigError(
            f"{stale}: it is for {header.get('target')!r}, not {_target_line()!r}; run `{fix}`"
        )
    pinned = {d.name: d.version for d in locked}
    for package in packages:
        name, _, version = package.partition("==")
        if pinned.get(normalise(name)) != version:
            raise ConfigError(f"{stale}: {package} is not pinned in it; run `{fix}`")
    return locked


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return normalise(match.group(1)) if match else ""


def _resolve(
    python: str,
    architecture: str,
    requirements: Sequence[str],
    scratch: Path,
    run: Run,
    *,
    no_deps: bool = False,
) -> list[dict[str, object]]:
    """pip's resolution report's ``install`` entries for *requirements* on *architecture*."""
    report = scratch / f"{architecture}-{'roots' if no_deps else 'closure'}.json"
    pip = _pip_command(python, "install", platform_tags(architecture))
    pip += ["--dry-run", "--ignore-installed", "--report", str(report)]
    pip += ["--target", str(scratch / "target"), *(["--no-deps"] if no_deps else [])]
    _run_pip([*pip, *requirements], f"resolve {' '.join(requirements)} for {architecture}", run)
    try:
        installs = json.loads(report.read_text(encoding="utf-8"))["install"]
        assert isinstance(installs, list)
        return installs
    except (OSError, KeyError, TypeError, ValueError, AssertionError) as exc:
        raise InfrastructureError(f"pip's resolution report is unreadable: {exc}") from None


def _dependencies_but(roots: Sequence[dict[str, object]], left_out: set[str]) -> list[str]:
    """The roots' own requirements (with their markers), less extras and *left_out*."""
    wanted: list[str] = []
    for item in roots:
        metadata = item.get("metadata")
        assert isinstance(metadata, dict)
        for requirement in metadata.get("requires_dist") or []:
            text = str(requirement)
            if "extra ==" in text.replace("extra==", "extra =="):
                continue
            if _requirement_name(text) not in left_out:
                wanted.append(text)
    return wanted


def lock_requirements(
    packages: Sequence[str],
    *,
    command: str,
    source_only: Sequence[str] = (),
    python: str = sys.executable,
    run: Run = subprocess.run,
    log: Log = _quiet,
) -> str:
    """Resolve *packages* for every architecture and write their hash-pinned closure.

    Args:
        packages: ``name==version`` roots.
        command: The command that makes this lock, named in its header.
        source_only: ``name==version`` dependencies that have no wheel: left out of the
            closure (the roots are then resolved without their own dependencies, and
            those dependencies but these resolved as the closure).
        python: Interpreter whose pip resolves.
        run: ``subprocess.run`` (replaceable in tests).
        log: Progress messages.

    Returns:
        The lock's text.

    Raises:
        ConfigError: The closure differs between architectures (a dependency
            only one of them needs, or another version).
        InfrastructureError: pip failed.
    """
    resolved: dict[str, dict[str, tuple[str, str]]] = {}
    left_out = {_requirement_name(p) for p in source_only}
    with tempfile.TemporaryDirectory(prefix="pip-lock.") as scratch:
        for architecture in ARCHITECTURES:
            log(f"resolving {' '.join(packages)} for {architecture} (pip --dry-run, on the host)")
            if left_out:
                roots = _resolve(python, architecture, packages, Path(scratch), run, no_deps=True)
                rest = _dependencies_but(roots, left_out)
                installs = roots + (
                    _resolve(python, architecture, rest, Path(scratch), run) if rest else []
                )
            else:
                installs = _resolve(python, architecture, packages, Path(scratch), run)
            try:
                resolved[architecture] = {
                    normalise(str(item["metadata"]["name"])): (  # type: ignore[index]
                        str(item["metadata"]["version"]),  # type: ignore[index]
                        str(item["download_info"]["archive_info"]["hashes"]["sha256"]),  # type: ignore[index]
                    )
                    for item in installs
                }
            except (KeyError, TypeError) as exc:
                raise InfrastructureError(f"pip's resolution report is unreadable: {exc}") from None
            if left_out & set(resolved[architecture]):
                raise ConfigError(
                    f"{', '.join(sorted(left_out & set(resolved[architecture])))} is still "
                    "needed by another distribution of the closure; it cannot be left out"
                )
    versions = {
        arch: {name: version for name, (version, _) in found.items()}
        for arch, found in resolved.items()
    }
    first, *others = ARCHITECTURES
    for other in others:
        if versions[other] != versions[first]:
            differing = sorted(set(versions[other].items()) ^ set(versions[first].items()))
            raise ConfigError(
                f"the closure of {' '.join(packages)} differs between {first} and {other} "
                f"({differing[:6]}); one lock cannot pin both"
            )
    lines = [
        f"# {' '.join(sorted(packages))} and its whole dependency closure, for CPython "
        f"{TARGET_PYTHON} on manylinux",
        f"# {' and '.join(ARCHITECTURES)}: binary wheels only, every distribution pinned by "
        "version and by the",
        "# sha256 of each wheel an image may use.",
        f"# Generated by `{command}`; do not edit.",
        f"# roots: {_roots_line(packages)}",
        *([f"# source-only: {_source_only_line(source_only)}"] if source_only else []),
        f"# target: {_target_line()}",
    ]
    for name in sorted(versions[first]):
        hashes = sorted({resolved[arch][name][1] for arch in ARCHITECTURES})
        lines.append(f"{name}=={versions[first][name]} \\")
        lines += [f"    --hash=sha256:{h} \\" for h in hashes[:-1]]
        lines.append(f"    --hash=sha256:{hashes[-1]}")
    return "\n".join(lines) + "\n"


# --- Downloads ---------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verified(directory: Path, locked: Sequence[LockedDistribution], where: str) -> list[Path]:
    """The wheels of *directory*, each checked against the lock; every distribution covered."""
    allowed = {h: d.name for d in locked for h in d.hashes}
    wheels = sorted(directory.glob("*.whl"))
    covered: set[str] = set()
    for wheel in wheels:
        name = allowed.get(_sha256(wheel))
        if name is None:
            raise InfrastructureError(f"{wheel}: its sha256 is not in {where}")
        covered.add(name)
    missing = sorted({d.name for d in locked} - covered)
    if missing:
        raise InfrastructureError(f"no wheel of {', '.join(missing)} was downloaded for {where}")
    return wheels


def download_wheels(
    requirements: Path,
    locked: Sequence[LockedDistribution],
    platforms: Sequence[Sequence[str]],
    cache_root: Path,
    *,
    python: str = sys.executable,
    run: Run = subprocess.run,
    log: Log = _quiet,
) -> list[Path]:
    """The lock's wheels for *platforms*, downloaded once into a content-keyed cache.

    Args:
        requirements: The hash-pinned requirements file.
        locked: Its parsed lines.
        platforms: One list of ``--platform`` tags per download (per architecture).
        cache_root: Where the keyed wheel directories live.
        python: Interpreter whose pip downloads.
        run: ``subprocess.run`` (replaceable in tests).
        log: Progress messages.

    Returns:
        The wheel files, sorted, each checked against the lock's hashes.

    Raises:
        InfrastructureError: pip failed, or a file is not one the lock pins.
    """
    key = hashlib.sha256(requirements.read_bytes())
    key.update(json.dumps([TARGET_PYTHON, [list(p) for p in platforms]]).encode())
    directory = cache_root / "wheels" / key.hexdigest()[:24]
    if directory.is_dir():
        return _verified(directory, locked, str(requirements))
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="wheels.", dir=directory.parent))
    try:
        for tags in platforms:
            log(f"downloading the wheels of {requirements.name} for {tags[-1]} (pip, on the host)")
            pip = _pip_command(python, "download", tags)
            pip += ["--no-deps", "--require-hashes", "-d", str(staging), "-r", str(requirements)]
            _run_pip(pip, f"download {requirements} for {tags[-1]}", run)
        wheels = _verified(staging, locked, str(requirements))
        publish(staging, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [directory / w.name for w in wheels]


def publish(staging: Path, directory: Path) -> None:
    """Move a finished download into its keyed place; one made meanwhile by another build wins."""
    try:
        staging.rename(directory)
    except OSError:
        if not directory.is_dir():
            raise


def download_source(
    pin: str,
    sha256: str,
    cache_root: Path,
    *,
    python: str = sys.executable,
    run: Run = subprocess.run,
    log: Log = _quiet,
) -> Path:
    """The source archive of *pin* (``name==version``), downloaded once and hash-checked.

    Raises:
        InfrastructureError: pip failed, or the archive is not the pinned one.
    """
    directory = cache_root / "sources" / sha256[:24]
    found = sorted(directory.glob("*.tar.gz")) if directory.is_dir() else []
    if len(found) == 1 and _sha256(found[0]) == sha256:
        return found[0]
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="source.", dir=directory.parent))
    try:
        requirements = staging / "requirements.txt"
        requirements.write_text(f"{pin} --hash=sha256:{sha256}\n", encoding="utf-8")
        log(f"downloading the source archive of {pin} (pip, on the host)")
        # pip reads the archive's metadata to download it, which runs its build backend: in
        # an isolated environment of its own, so the host interpreter needs no build tools.
        pip = [python, "-m", "pip", "download", "--quiet", "--no-binary=:all:", "--no-deps"]
        pip += ["--require-hashes", "-d", str(staging / "out")]
        _run_pip([*pip, "-r", str(requirements)], f"download the source archive of {pin}", run)
        archives = sorted((staging / "out").glob("*.tar.gz"))
        if len(archives) != 1 or _sha256(archives[0]) != sha256:
            raise InfrastructureError(f"the source archive of {pin} is not the pinned one")
        (staging / "keep").mkdir()
        archives[0].rename(staging / "keep" / archives[0].name)
        publish(staging / "keep", directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return sorted(directory.glob("*.tar.gz"))[0]


def unpack_source_package(archive: Path, package: str, target: Path, pin: str) -> None:
    """Copy *package* (a directory below the archive's top one) into *target*, with its metadata.

    Nothing is built or run: the package is pure Python and used as published.
    Its ``PKG-INFO`` becomes the ``METADATA`` of a ``<name>-<version>.dist-info``.

    Raises:
        ConfigError: The archive holds a link, a path out of place, no such package,
            or metadata of another version.
    """
    name, _, version = pin.partition("==")
    copied = 0
    metadata: bytes | None = None
    with tarfile.open(archive, mode="r:gz") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            parts = PurePosixPath(member.name).parts
            if not parts or member.name.startswith("/") or ".." in parts:
                raise ConfigError(f"{archive.name}: member {member.name!r} leaves the archive")
            inner = PurePosixPath(*parts[1:]) if len(parts) > 1 else None
            if inner is not None and inner.as_posix() == "PKG-INFO" and member.isfile():
                handle = tar.extractfile(member)
                metadata = handle.read() if handle else None
            if inner is None or not inner.is_relative_to(package) or member.isdir():
                continue
            if not member.isfile():
                raise ConfigError(f"{archive.name}: {member.name} is not a regular file")
            if member.name.endswith((".pyc", ".pyo")):
                continue
            destination = target / PurePosixPath(package).name / inner.relative_to(package)
            destination.parent.mkdir(parents=True, exist_ok=True)
            handle = tar.extractfile(member)
            assert handle is not None  # a regular member always has data
            destination.write_bytes(handle.read())
            destination.chmod(0o644)
            copied += 1
    if not copied:
        raise ConfigError(f"{archive.name}: no package {package!r} in it")
    if metadata is None or f"Version: {version}".encode() not in metadata:
        raise ConfigError(f"{archive.name}: its PKG-INFO is not {pin}'s")
    info = target / f"{normalise(name).replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_bytes(metadata)


# --- Unpacking -----------------------------------------------------------------------------


def unpack_wheel(wheel: Path, target: Path) -> None:
    """Lay *wheel* out under *target* as ``pip install --target`` does, without scripts.

    ``<dist>.data/purelib``, ``platlib`` and ``data`` go to *target* itself;
    ``scripts`` and ``headers`` are left out (console scripts name the host's
    interpreter; the images run ``python3 -m``). The wheel's own RECORD stays
    as it is. A file two wheels both install must have the same bytes.

    Raises:
        ConfigError: A member's path leaves *target*, or two wheels disagree on a file.
    """
    with zipfile.ZipFile(wheel) as archive:
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            if info.is_dir():
                continue
            parts = PurePosixPath(info.filename).parts
            if not parts or info.filename.startswith("/") or ".." in parts or "\\" in info.filename:
                raise ConfigError(f"{wheel.name}: member {info.filename!r} leaves the target")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] in ("scripts", "headers"):
                    continue
                if parts[1] not in ("purelib", "platlib", "data"):
                    raise ConfigError(f"{wheel.name}: unknown data directory {parts[1]!r}")
                parts = parts[2:]
            destination = target.joinpath(*parts)
            data = archive.read(info)
            if destination.exists():
                if destination.read_bytes() != data:
                    raise ConfigError(
                        f"{wheel.name} and another wheel both install {'/'.join(parts)}"
                    )
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(data)
            executable = (info.external_attr >> 16) & 0o100
            destination.chmod(0o755 if executable else 0o644)
