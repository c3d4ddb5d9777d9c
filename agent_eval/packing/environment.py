"""The isolated build environment: a venv with exactly the build lock's wheels installed.

It is made offline (``pip install --no-index --require-hashes`` from the
verified wheels only), without the system's or the harness's site-packages,
and cached by the lock's digest and the interpreter. A cached one is used only
when its interpreter is this one's base, it does not see the system's
site-packages, and every file of its site-packages is what the locked wheels'
own RECORDs say (those wheels being checked against the lock first); anything
else is thrown away and made again.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
import zipfile
from pathlib import Path

from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.packing.lock import BuildLock, clean_environment, verified_wheels
from agent_eval.processes import run_group

__all__ = ["build_environment"]

_INSTALL_TIMEOUT_S = 300
# Written by the installer, not part of a wheel's RECORD.
_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"})


def _site_packages(env: Path) -> Path:
    relative = Path(sysconfig.get_path("purelib", scheme="venv", vars={"base": "."}))
    return env / relative


def _python(env: Path) -> Path:
    return env / "bin" / "python"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _expected_files(wheel: Path) -> dict[str, str]:
    """Each file *wheel* installs into site-packages, with its RECORD hash."""
    with zipfile.ZipFile(wheel) as archive:
        record = next(
            n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")
        )
        rows = csv.reader(io.StringIO(archive.read(record).decode("utf-8")))
        expected: dict[str, str] = {}
        for row in rows:
            if len(row) < 2 or not row[1]:
                continue
            path = row[0]
            head, _, rest = path.partition("/")
            if head.endswith(".data"):
                scheme, _, inside = rest.partition("/")
                if scheme not in ("purelib", "platlib"):
                    continue  # scripts, headers, data: outside site-packages
                path = inside
            expected[path] = row[1]
        return expected


def _unlike_its_wheels(env: Path, wheels: list[Path]) -> str | None:
    """Why *env*'s site-packages is not exactly what *wheels* install (None: it is)."""
    site = _site_packages(env)
    if not _python(env).exists() or not site.is_dir():
        return f"{env} is not a complete environment"
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    if _python(env).resolve() != base:
        return f"its interpreter is {_python(env).resolve()}, not {base}"
    settings = (env / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace").splitlines()
    if "include-system-site-packages = false" not in settings:
        return "it would see the system's site-packages"
    expected: dict[str, str] = {}
    for wheel in wheels:
        expected.update(_expected_files(wheel))
    for path in sorted(p for p in site.rglob("*") if not p.is_dir()):
        name = path.relative_to(site).as_posix()
        if path.is_symlink():
            return f"{name} is a link"
        want = expected.pop(name, None)
        if want is None:
            if path.parent.name.endswith(".dist-info") and path.name in _INSTALLER_FILES:
                continue
            return f"{name} is not in any locked wheel"
        if _record_hash(path.read_bytes()) != want:
            return f"{name} differs from its wheel"
    return f"{sorted(expected)[0]} is missing" if expected else None


def _install(lock: BuildLock, wheels: list[Path], env: Path) -> None:
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(env)
    links = env / ".wheels"
    links.mkdir()
    for wheel in wheels:
        shutil.copyfile(wheel, links / wheel.name)
    command = [
        sys.executable, "-m", "pip", "--python", str(_python(env)), "install", "--no-index",
        "--find-links", str(links), "--require-hashes", "--no-compile", "--quiet",
        "--no-warn-script-location", "-r", str(lock.path),
    ]  # fmt: skip
    try:
        # pip's --python runs a second pip in the environment's interpreter: the whole
        # group is ended on the time limit, never the outer one alone.
        done = run_group(command, env=clean_environment(), text=True, timeout=_INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise InfrastructureError(
            f"installing {lock.path} into a build environment took over {_INSTALL_TIMEOUT_S}s"
        ) from exc
    finally:
        shutil.rmtree(links, ignore_errors=True)
    if done.returncode != 0:
        raise ConfigError(
            f"{lock.path}: its wheels do not install offline into a build environment "
            f"(a dependency missing from the lock, or a hash that does not match): "
            f"{done.stderr.strip()[-1500:]}"
        )


def build_environment(lock: BuildLock, wheelhouse: Path, cache: Path) -> Path:
    """The interpreter of a build environment with exactly *lock*'s wheels installed.

    Args:
        lock: The build lock.
        wheelhouse: Where its wheels are (checked against its hashes).
        cache: Where environments are kept, one per lock digest and interpreter.

    Raises:
        ConfigError: A wheel is missing or not the locked one, or the lock does not
            install (a dependency it does not pin).
        InfrastructureError: pip could not run.
    """
    wheels = verified_wheels(lock, wheelhouse)
    key = hashlib.sha256(f"{lock.sha256}\0{sys.version}\0{sys.base_prefix}".encode()).hexdigest()
    env = cache / key[:32]
    if env.is_dir():
        if _unlike_its_wheels(env, wheels) is None:
            return _python(env)
        shutil.rmtree(env, ignore_errors=True)  # a changed environment is never used
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".new-", dir=cache))
    try:
        _install(lock, wheels, staging / "env")
        problem = _unlike_its_wheels(staging / "env", wheels)
        if problem is not None:
            raise InfrastructureError(f"a fresh build environment for {lock.path}: {problem}")
        # Made by another packing at the same time: checked below like any cached one.
        with contextlib.suppress(OSError):
            (staging / "env").rename(env)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    problem = _unlike_its_wheels(env, wheels)
    if problem is not None:
        raise InfrastructureError(f"the build environment {env}: {problem}")
    return _python(env)
