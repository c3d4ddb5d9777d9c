"""Build the base, verifier and runner-base images, offline and pinned.

Invariants:

* Nothing is pulled and nothing is downloaded inside a build: builds run
  with ``pull=False`` and ``network_mode="none"``, FROM the base image's id
  (never a tag). The base is made offline by debootstrap + import when absent.
* The verifier's Python packages (mypy) come from ``images/verifier/
  requirements.txt``, hash-pinned, installed on the host with ``pip install
  --target`` into a cached directory that becomes the build context.
* What is printed is pinned: image ids (``sha256:…``), or, with a loopback
  registry, ``name@sha256:<manifest digest>`` read back from RepoDigests.
  Only a loopback registry is accepted; no other host is ever contacted.
* Quick when nothing changed: the package directory is reused when its
  requirements did not change, and the builder's layer cache does the rest.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_eval.engine import ContainerEngine
from agent_eval.errors import ConfigError, InfrastructureError

__all__ = [
    "BASE_REFERENCE",
    "IMAGE_LABEL",
    "REFERENCE_RUNNER_TAG",
    "RUNNER_BASE_TAG",
    "VERIFIER_TAG",
    "BuiltImages",
    "build_images",
    "check_loopback_registry",
    "ensure_base_image",
    "prepare_verifier_packages",
]

BASE_REFERENCE = "agent-eval/base:bookworm"
"""The offline base image; scripts/setup and tests/conftest.py name the same reference."""
BASE_SUITE = "bookworm"
VERIFIER_TAG = "agent-eval/verifier:local"
RUNNER_BASE_TAG = "agent-eval/runner-base:local"
REFERENCE_RUNNER_TAG = "agent-eval/reference-runner:local"
IMAGE_LABEL = "agent-eval.image"
"""Label every image built here carries: base, verifier or runner-base."""
TARGET_PYTHON = "3.11"
"""Debian bookworm's python3, the interpreter of every image."""

Log = Callable[[str], None]
Runner = Callable[..., subprocess.CompletedProcess[str]]

_TAIL_LINES = 20


@dataclass(frozen=True)
class BuiltImages:
    """Pinned references of the three images."""

    base: str
    """The base image (an id, or a registry digest reference)."""
    verifier: str
    """The verifier image."""
    runner_base: str
    """The runner base image, the FROM of every runner image."""
    reference_runner: str
    """The built-in reference runners (self-test only), FROM the runner base."""

    def to_json(self) -> str:
        """``{"base", "verifier", "runnerBase", "referenceRunner"}`` with sorted keys."""
        return json.dumps(
            {
                "base": self.base,
                "verifier": self.verifier,
                "runnerBase": self.runner_base,
                "referenceRunner": self.reference_runner,
            },
            sort_keys=True,
        )


def _quiet(_: str) -> None:
    pass


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-_TAIL_LINES:])


# --- Registry -----------------------------------------------------------------------


def check_loopback_registry(registry: str) -> str:
    """Accept ``host:port`` of a registry on this machine's loopback only.

    Args:
        registry: ``127.0.0.1:5000``, ``localhost:5000`` or ``[::1]:5000``.

    Returns:
        The registry as given.

    Raises:
        ConfigError: It is not loopback ``host:port`` (a scheme, a path, another host).
    """
    match = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})", registry)
    if match is None or not 0 < int(match.group(2)) < 65536:
        raise ConfigError(
            f"registry {registry!r} is not host:port; use a loopback registry such as "
            "127.0.0.1:5000"
        )
    host = match.group(1).strip("[]")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ConfigError(
                f"registry {registry!r} is not on the loopback interface; only a registry on "
                "this machine (127.0.0.0/8, localhost, [::1]) is accepted"
            )
    return registry


# --- Verifier packages ----------------------------------------------------------------


_WHEELHOUSE_PLATFORMS = ("manylinux2014_x86_64", "manylinux2014_aarch64")


def _download_wheelhouse(lock: Path, dest: Path, python: str, run: Runner, log: Log) -> None:
    """Download the lock's wheels for every supported platform (hashes required)."""
    log(f"downloading the consumer's dependency wheels from {lock.name} (pip, on the host)")
    for platform_tag in _WHEELHOUSE_PLATFORMS:
        command = [
            python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--no-input", "--no-deps", "--require-hashes", "--only-binary=:all:",
            "--implementation", "cp", "--python-version", TARGET_PYTHON,
            "--platform", platform_tag, "-d", str(dest), "-r", str(lock),
        ]  # fmt: skip
        done = run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise InfrastructureError(
                f"pip could not download {lock} for {platform_tag} "
                f"(exit {done.returncode}):\n{_tail(done.stderr or done.stdout)}"
            )


def prepare_verifier_packages(
    requirements: Path,
    cache_root: Path,
    *,
    wheelhouse_lock: Path | None = None,
    python: str = sys.executable,
    run: Runner = subprocess.run,
    log: Log = _quiet,
) -> Path:
    """Install the verifier's hash-pinned packages for Python 3.11 into a cached directory.

    The directory is keyed by the requirements' bytes and this machine's
    architecture; an existing one is reused without running pip.

    Args:
        requirements: images/verifier/requirements.txt (every line pinned and hashed).
        cache_root: Where the keyed directories live (under .verification/).
        wheelhouse_lock: The library's hash-pinned third-party dependencies; their wheels
            are downloaded into ``wheelhouse/`` so that consumers install offline.
        python: Interpreter whose pip installs the packages.
        run: ``subprocess.run`` (replaceable in tests).
        log: Progress messages.

    Returns:
        A build context directory holding ``site-packages/`` and ``wheelhouse/``.

    Raises:
        ConfigError: The requirements file is unreadable.
        InfrastructureError: pip failed.
    """
    try:
        wanted = requirements.read_bytes()
        if wheelhouse_lock is not None:
            wanted += b"|" + wheelhouse_lock.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{exc.filename}: cannot read ({exc.strerror})") from None
    key = hashlib.sha256(wanted + f"|{TARGET_PYTHON}|{platform.machine()}".encode()).hexdigest()
    context = cache_root / f"verifier-{key[:16]}"
    if (context / "site-packages").is_dir():
        return context
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="verifier-packages.", dir=cache_root))
    try:
        command = [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "--no-deps",
            "--no-compile",
            "--require-hashes",
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            TARGET_PYTHON,
            "--target",
            str(staging / "site-packages"),
            "-r",
            str(requirements),
        ]
        log(f"installing the verifier's packages from {requirements.name} (pip, on the host)")
        done = run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise InfrastructureError(
                f"pip could not install {requirements} for Python {TARGET_PYTHON} "
                f"(exit {done.returncode}):\n{_tail(done.stderr or done.stdout)}"
            )
        # Console scripts carry the host interpreter's path; the image uses python3 -m.
        shutil.rmtree(staging / "site-packages" / "bin", ignore_errors=True)
        (staging / "wheelhouse").mkdir()
        if wheelhouse_lock is not None:
            _download_wheelhouse(wheelhouse_lock, staging / "wheelhouse", python, run, log)
        staging.rename(context)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return context


# --- Base image -------------------------------------------------------------------------


def _apt_mirrors(suite: str) -> list[str]:
    """Mirrors of this machine's apt sources that serve *suite* (deb822 and one-line)."""
    mirrors: list[str] = []
    sources = Path("/etc/apt")
    for path in sorted(sources.glob("sources.list.d/*.sources")):
        try:
            stanzas = path.read_text(encoding="utf-8").split("\n\n")
        except OSError:
            continue
        for stanza in stanzas:
            fields: dict[str, list[str]] = {}
            for line in stanza.splitlines():
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.split()
            if "deb" in fields.get("types", []) and suite in fields.get("suites", []):
                mirrors.extend(fields.get("uris", [])[:1])
    for path in [sources / "sources.list", *sorted(sources.glob("sources.list.d/*.list"))]:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            words = re.sub(r"\[[^]]*\]", "", line).split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                mirrors.append(words[1])
    return list(dict.fromkeys(mirrors))


def _remove_rootfs(rootfs: Path) -> None:
    # debootstrap mounts /proc and /sys in the target; an interrupted run can
    # leave them mounted, and rmtree must never walk into them.
    prefix = str(rootfs) + "/"
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    except OSError:
        points = []
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    shutil.rmtree(rootfs, ignore_errors=True)


def ensure_base_image(
    engine: ContainerEngine,
    work_root: Path,
    *,
    reference: str = BASE_REFERENCE,
    mirror: str | None = None,
    log: Log = _quiet,
) -> str:
    """The base image's id, made offline (debootstrap + import) when it is absent.

    Args:
        engine: The engine.
        work_root: Where the temporary root filesystem is made (under .verification/).
        reference: name:tag of the base image.
        mirror: Debian mirror for debootstrap; by default its own, then this
            machine's apt mirror for the suite.
        log: Progress messages.

    Returns:
        The base image's id.

    Raises:
        InfrastructureError: It is absent and cannot be made here (not root,
            no debootstrap, debootstrap or the import failed).
    """
    present = engine.image_id(reference)
    if present is not None:
        return present
    how = "run scripts/setup as root, or make it as images/base/README.md describes"
    if os.geteuid() != 0:
        raise InfrastructureError(
            f"the base image {reference} is absent, and making it needs root (debootstrap); {how}"
        )
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise InfrastructureError(
            f"the base image {reference} is absent and debootstrap is not installed "
            f"(apt-get install debootstrap); {how}"
        )
    mirrors: Sequence[str | None] = [mirror] if mirror else [None, *_apt_mirrors(BASE_SUITE)[:1]]
    work_root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rootfs = Path(tempfile.mkdtemp(prefix="base-rootfs.", dir=work_root))
    try:
        failure = ""
        for candidate in mirrors:
            log(f"making {reference}: debootstrap {BASE_SUITE} from {candidate or 'its default'}")
            command = [debootstrap, "--variant=minbase", "--include=python3", BASE_SUITE]
            command += [str(rootfs), *([candidate] if candidate else [])]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode == 0:
                break
            failure = _tail(done.stdout + done.stderr)
            _remove_rootfs(rootfs)
            rootfs.mkdir()
        else:
            raise InfrastructureError(f"debootstrap failed for {reference}:\n{failure}")
        for leftovers in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (rootfs / leftovers).glob("*"):
                if item.is_file():
                    item.unlink()
        log(f"debootstrap done in {time.monotonic() - started:.0f} s; importing")
        name, _, tag = reference.rpartition(":")
        with subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as tar:
            assert tar.stdout is not None
            image_id = engine.import_image(tar.stdout, repository=name, tag=tag)
            _, tar_errors = tar.communicate()
        if tar.returncode != 0:
            raise InfrastructureError(f"tar of the base root filesystem failed: {tar_errors!r}")
    finally:
        _remove_rootfs(rootfs)
    log(f"made {reference} ({image_id}) in {time.monotonic() - started:.0f} s")
    return image_id


# --- All images ---------------------------------------------------------------------------


def build_images(
    engine: ContainerEngine,
    project_root: Path,
    *,
    registry: str | None = None,
    mirror: str | None = None,
    python: str = sys.executable,
    run: Runner = subprocess.run,
    log: Log = _quiet,
) -> BuiltImages:
    """Build the base (when absent), verifier and runner-base images; optionally push them.

    Args:
        engine: The engine.
        project_root: The repository holding ``images/``.
        registry: A loopback registry ``host:port`` to push to, or None.
        mirror: Debian mirror for the base, when it has to be made.
        python: Interpreter whose pip installs the verifier's packages.
        run: ``subprocess.run`` for pip (replaceable in tests).
        log: Progress messages.

    Returns:
        Image ids, or registry digest references when pushed.

    Raises:
        ConfigError: The recipes are missing or the registry is not loopback.
        InfrastructureError: A build, pip, or a push failed.
    """
    if registry is not None:
        check_loopback_registry(registry)
    recipes = project_root / "images"
    for recipe in ("verifier", "runner-base"):
        if not (recipes / recipe / "Dockerfile").is_file():
            raise ConfigError(f"{recipes / recipe / 'Dockerfile'}: recipe not found")
    work_root = project_root / ".verification" / "images"
    base = ensure_base_image(engine, work_root, mirror=mirror, log=log)

    lock = project_root / "packages" / "requirements.lock"
    verifier_context = prepare_verifier_packages(
        recipes / "verifier" / "requirements.txt",
        work_root,
        wheelhouse_lock=lock if lock.is_file() else None,
        python=python,
        run=run,
        log=log,
    )
    shutil.copyfile(recipes / "verifier" / "Dockerfile", verifier_context / "Dockerfile")
    ids: dict[str, str] = {"base": base}
    for name, context, tag in (
        ("verifier", verifier_context, VERIFIER_TAG),
        ("runner-base", recipes / "runner-base", RUNNER_BASE_TAG),
    ):
        started = time.monotonic()
        ids[name] = engine.build_image(
            context, tag=tag, buildargs={"BASE": base}, labels={IMAGE_LABEL: name}
        )
        log(f"built {tag} ({ids[name]}) in {time.monotonic() - started:.1f} s")
    ids["reference-runner"] = _build_reference_runner(
        engine, project_root, work_root, ids["runner-base"], log
    )
    if registry is not None:
        for name in ("base", "verifier", "runner-base", "reference-runner"):
            started = time.monotonic()
            ids[name] = engine.push_image(
                ids[name], repository=f"{registry}/agent-eval/{name}", tag="local"
            )
            log(f"pushed {ids[name]} in {time.monotonic() - started:.1f} s")
    return BuiltImages(
        base=ids["base"],
        verifier=ids["verifier"],
        runner_base=ids["runner-base"],
        reference_runner=ids["reference-runner"],
    )


def _build_reference_runner(
    engine: ContainerEngine, project_root: Path, work_root: Path, runner_base: str, log: Log
) -> str:
    """Stage the reference runners with the fixtures and build them FROM the runner base."""
    context = work_root / "reference-runner"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    shutil.copyfile(
        project_root / "images" / "reference-runner" / "Dockerfile", context / "Dockerfile"
    )
    shutil.copyfile(
        Path(__file__).resolve().parents[1] / "reference" / "runner.py",
        context / "reference_runner.py",
    )
    shutil.copytree(
        project_root / "fixtures",
        context / "fixtures",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    started = time.monotonic()
    image = engine.build_image(
        context,
        tag=REFERENCE_RUNNER_TAG,
        buildargs={"BASE": runner_base},
        labels={IMAGE_LABEL: "reference-runner"},
    )
    log(f"built {REFERENCE_RUNNER_TAG} ({image}) in {time.monotonic() - started:.1f} s")
    return image
