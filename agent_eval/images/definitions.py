"""What each image is: its layers and its runtime config, prepared on the host.

These functions replace the Dockerfiles. The legacy builder (the only one the
engine here has) is not reproducible: every ``RUN`` and ``COPY`` layer
carries the build's mtimes, the config its ``created`` time and history. So
nothing runs in a build container but bytecode compilation
(:mod:`.compile`); every other step is host-side preparation with the same
effect, and :mod:`.layers` and :mod:`.archive` write the result
deterministically.

The security properties of the images, kept step for step:

* **No setuid or setgid file.** The base has some (su, mount, passwd, …);
  the first layer of the verifier and the runner base re-adds each without
  those bits (``find / -perm /6000 -exec chmod ug-s`` before), and every other
  file is written 0644 or 0755.
* **Root-owned, read-only harness.** Everything added is owned by 0:0 and
  not writable by anyone else; the runner user owns only ``/solution``.
* **verifier:** mypy and pip (hash-pinned wheels) in python3's
  dist-packages, compiled; the library's dependency wheels in
  ``/opt/agent-eval/wheelhouse``; mount points ``/verifier``, ``/solution``,
  ``/consumer`` (0755) and ``/grader``, ``/grader/task``, ``/result`` (0700,
  so the solution cannot reach the grader whatever its files' modes). A
  verification mounts its staged ``/verifier`` (0711, not listable:
  ``trusted/`` 0700 with the harness, the repository's graders and
  ``attempt.json``; ``sandbox/`` world-readable with only what the solution's
  process imports before the solution), the grader read-only, a copy of the
  solution read-only, the batch's consumer read-only and ``/result`` as the
  only writable mount (a host directory: the engine cannot copy out of a
  tmpfs). ``USER 0:0``, ``WORKDIR /verifier``,
  ``PYTHONPATH=/verifier/trusted``, bytecode never written; the command is an
  argument vector, no shell.
* **runner-base:** the non-root user ``agent`` (UID/GID 10001, no home,
  nologin) appended to ``/etc/passwd`` and ``/etc/group``, ``/solution`` owned
  by it, ``/consumer`` root's; ``USER 10001:10001``, ``WORKDIR /solution``,
  ``HOME=/tmp/agent`` (the root filesystem is read-only at run time).
* **reference-runner:** the runner base plus the reference runners and the
  fixtures they submit (self-test only; never in an agent's image).
* **runner-<agent>:** the runner base plus the CLI's payload (its first layer,
  kept apart from the adapters so that an adapter change rebuilds only the
  second), the stdlib-only adapters under ``/opt/agent-eval`` found through
  a ``.pth`` file, and ``/opt/agent-eval/runner-version`` read from the
  payload's own metadata; ``images/runners/<agent>/image.json`` says the rest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pydantic import ValidationError

from agent_eval.engine import RUNNER_USER, ContainerEngine
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import format_validation_error
from agent_eval.images.archive import DEFAULT_PATH
from agent_eval.images.base import BaseImage
from agent_eval.images.compile import compile_trees
from agent_eval.images.layers import Entry, directory, regular, tree
from agent_eval.images.npm import NPM_CPU, check_package_lock, install_packages
from agent_eval.images.recipes import Sources, listing
from agent_eval.images.wheels import (
    ARCHITECTURES,
    LockedDistribution,
    check_requirements_lock,
    download_source,
    download_wheels,
    normalise,
    parse_requirements,
    platform_tags,
    unpack_source_package,
    unpack_wheel,
)
from agent_eval.layout import DEPENDENCY_LOCK, RECIPE_LOCK, staged_files
from agent_eval.models import InstallRecipe, RunnerImage

__all__ = [
    "Plan",
    "Workspace",
    "check_runner_lock",
    "lock_command",
    "plan_image",
]

DIST_PACKAGES = "/usr/local/lib/python3.11/dist-packages"
"""Debian python3's site directory for packages it does not manage."""
_AGENT_UID = 10001
_LOCALE = ("LANG=C.UTF-8", "LC_ALL=C.UTF-8")

Log = Callable[[str], None]
Run = Callable[..., subprocess.CompletedProcess[str]]
_M = TypeVar("_M", InstallRecipe, RunnerImage)


@dataclass(frozen=True)
class Layer:
    """One layer of a plan."""

    comment: str
    """What it holds (its history entry)."""
    entries: tuple[Entry, ...]
    """Its content."""


@dataclass(frozen=True)
class Plan:
    """An image's own layers and its runtime config."""

    layers: tuple[Layer, ...]
    """The layers added to the parent's."""
    env: tuple[str, ...]
    """``NAME=value``, in order."""
    cmd: tuple[str, ...] | None
    """The default command."""
    working_dir: str
    """WORKDIR."""
    user: str
    """USER."""


@dataclass(frozen=True)
class Workspace:
    """What preparing a plan may use."""

    engine: ContainerEngine
    """The engine (bytecode is compiled in a container from the base)."""
    base: BaseImage
    """The base image, read."""
    sources: Sources
    """The checkout the inputs come from."""
    architecture: str
    """``x86_64`` or ``aarch64``: which wheels and npm packages."""
    cache_root: Path
    """Content-keyed downloads (wheels, npm installs)."""
    work_dir: Path
    """An empty directory for staged trees, removed after the build."""
    python: str = sys.executable
    """Interpreter whose pip downloads."""
    run: Run = subprocess.run
    """``subprocess.run`` for pip (replaceable in tests)."""
    log: Log = print
    """Progress messages."""


GATEWAY = "gateway"
"""The model gateway's recipe: ``images/gateway/``."""
GATEWAY_SITE = "/opt/gateway/site"
"""Where the gateway image keeps mitmproxy and its closure."""
GATEWAY_MOUNT = "/gateway"
"""The gateway container's mount points live below this."""


def lock_command(agent: str) -> str:
    """The command that (re)generates *agent*'s lock (or the gateway's)."""
    if agent == GATEWAY:
        return "agent-eval images lock --gateway"
    return f"agent-eval images lock --runner {agent}"


def plan_image(name: str, workspace: Workspace, parent: Plan | None) -> Plan:
    """Prepare image *name*'s layers and config (*parent*: the runner base's plan, if FROM it).

    Raises:
        ConfigError: A recipe or lock is missing, stale or invalid.
        InfrastructureError: A download, the compilation or an import check failed.
    """
    if name == "verifier":
        return _verifier(workspace)
    if name == "runner-base":
        return _runner_base(workspace)
    if parent is None:
        raise ConfigError(f"{name} is built FROM the runner base, and it was not given")
    if name == "reference-runner":
        return _reference_runner(workspace, parent)
    if name == GATEWAY:
        return _gateway(workspace, parent)
    return _agent_runner(workspace, name.removeprefix("runner-"), parent)


# --- Shared pieces ----------------------------------------------------------------------------


def _without_setuid(base: BaseImage) -> Layer:
    entries = tuple(
        Entry(f.path, "file", f.mode & 0o1777, f.uid, f.gid, data=f.data, mtime=f.mtime)
        for f in base.setuid
    )
    return Layer("the base's setuid and setgid files, without those bits", entries)


def _with_parents(entries: Iterable[Entry], existing: Iterable[str]) -> tuple[Entry, ...]:
    """*entries* plus a root-owned 0755 entry for each missing parent directory."""
    given = {e.path: e for e in entries}
    known = set(existing) | {e.path for e in given.values() if e.kind == "dir"}
    for entry in list(given.values()):
        for parent in PurePosixPath(entry.path).parents:
            if str(parent) in known or str(parent) == "/":
                continue
            known.add(str(parent))
            given[str(parent)] = directory(str(parent))
    return tuple(given.values())


def _files(root: Path, relatives: Sequence[str], target: str) -> list[Entry]:
    entries: list[Entry] = []
    for rel in relatives:
        path = root / rel
        mode = 0o755 if path.stat().st_mode & 0o100 else 0o644
        entries.append(Entry(f"{target}/{rel}", "file", mode, source=path))
    return entries


def _staged_harness(sources: Sources, kind: str, target: str) -> list[Entry]:
    return _files(sources.harness, staged_files(sources.harness, kind), target)


def _downloaded(
    ws: Workspace, requirements: Path, locked: Sequence[LockedDistribution], *architectures: str
) -> list[Path]:
    """The lock's wheels for *architectures* (the build's own by default), hash-checked."""
    tags = [platform_tags(a) for a in architectures or (ws.architecture,)]
    return download_wheels(
        requirements, locked, tags, ws.cache_root, python=ws.python, run=ws.run, log=ws.log
    )


def _unpacked(wheels: Sequence[Path], site: Path) -> Path:
    site.mkdir(parents=True)
    for wheel in wheels:
        unpack_wheel(wheel, site)
    return site


# --- The verifier and the runner base ---------------------------------------------------------


def _verifier(ws: Workspace) -> Plan:
    project = ws.sources.project
    requirements = ws.sources.shipped.verifier_requirements()
    try:
        text = requirements.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{requirements}: cannot read ({exc.strerror})") from None
    _, locked = parse_requirements(text, str(requirements))
    site = _unpacked(_downloaded(ws, requirements, locked), ws.work_dir / "verifier" / "site")
    ws.log("compiling the verifier's packages (python3 of the base, in a build container)")
    compile_trees(ws.engine, ws.base.image_id, [(site, DIST_PACKAGES)], imports=("mypy.api",))
    house: list[Path] = []
    lock = project.packages / DEPENDENCY_LOCK
    if lock.is_file():
        _, dependencies = parse_requirements(lock.read_text(encoding="utf-8"), str(lock))
        house = _downloaded(ws, lock, dependencies, *ARCHITECTURES)
    wheelhouse = [directory("/opt/agent-eval"), directory("/opt/agent-eval/wheelhouse")]
    wheelhouse += [
        Entry(f"/opt/agent-eval/wheelhouse/{w.name}", "file", 0o644, source=w) for w in house
    ]
    mounts = [directory(p) for p in ("/verifier", "/solution", "/consumer")]
    mounts += [directory(p, 0o700) for p in ("/grader", "/grader/task", "/result")]
    return Plan(
        layers=(
            _without_setuid(ws.base),
            Layer(
                "mypy and pip (images/verifier/requirements.txt), compiled",
                tuple(tree(site, DIST_PACKAGES)),
            ),
            Layer("the consumer's wheelhouse and the mount points", (*wheelhouse, *mounts)),
        ),
        env=(
            f"PATH={DEFAULT_PATH}",
            "PYTHONPATH=/verifier/trusted",
            "PYTHONDONTWRITEBYTECODE=1",
            *_LOCALE,
        ),
        cmd=(
            "/usr/bin/python3",
            "-B",
            "-m",
            "agent_eval.verification.runtime.attempt",
            "/verifier/trusted/attempt.json",
        ),
        working_dir="/verifier",
        user="0:0",
    )


def _appended(base: BaseImage, path: str, line: str, taken: Callable[[list[str]], bool]) -> Entry:
    file = base.files[path]
    text = file.data.decode("utf-8")
    if any(taken(row.split(":")) for row in text.splitlines() if row):
        raise ConfigError(f"the base image already has the runner user or group in {path}")
    data = (text if text.endswith("\n") or not text else text + "\n") + line + "\n"
    return Entry(path, "file", file.mode & 0o777, file.uid, file.gid, data=data.encode("utf-8"))


def _runner_base(ws: Workspace) -> Plan:
    uid = str(_AGENT_UID)
    user = (
        _appended(
            ws.base,
            "/etc/passwd",
            f"agent:x:{uid}:{uid}::/tmp/agent:/usr/sbin/nologin",
            lambda row: row[0] == "agent" or row[2:3] == [uid],
        ),
        _appended(
            ws.base,
            "/etc/group",
            f"agent:x:{uid}:",
            lambda row: row[0] == "agent" or row[2:3] == [uid],
        ),
        directory("/solution", uid=_AGENT_UID, gid=_AGENT_UID),
        directory("/consumer"),
    )
    return Plan(
        layers=(_without_setuid(ws.base), Layer("the agent user, /solution and /consumer", user)),
        env=(f"PATH={DEFAULT_PATH}", "HOME=/tmp/agent", *_LOCALE),
        cmd=None,
        working_dir="/solution",
        user=RUNNER_USER,
    )


def _reference_runner(ws: Workspace, parent: Plan) -> Plan:
    fixtures = ws.sources.project.fixtures
    entries = [
        directory("/opt/agent-eval"),
        Entry(
            "/opt/agent-eval/reference_runner.py",
            "file",
            0o644,
            source=ws.sources.harness / "reference" / "runner.py",
        ),
        *_files(fixtures, listing(fixtures), "/opt/agent-eval/fixtures"),
    ]
    return Plan(
        layers=(
            Layer(
                "the reference runners and their fixtures",
                _with_parents(entries, ws.base.directories),
            ),
        ),
        env=parent.env,
        cmd=("/usr/bin/python3", "-B", "/opt/agent-eval/reference_runner.py", "oracle"),
        working_dir=parent.working_dir,
        user=parent.user,
    )


# --- Agent runners ---------------------------------------------------------------------------


def _read_model(path: Path, model: type[_M]) -> _M:
    try:
        return model.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: {format_validation_error(exc)}") from None


def _recipe_dir(sources: Sources, name: str) -> Path:
    if name == GATEWAY:
        return sources.shipped.gateway_recipe()
    return sources.shipped.runner_recipe(name)


def check_runner_lock(sources: Sources, agent: str) -> None:
    """Refuse a runner recipe whose lock is missing or stale (before anything is built).

    Raises:
        ConfigError: The recipe is invalid, or its lock is missing or stale; the
            message names :func:`lock_command`.
    """
    recipe_dir = _recipe_dir(sources, agent)
    install = _read_model(recipe_dir / "install.json", InstallRecipe)
    if install.kind == "npm":
        check_package_lock(recipe_dir, agent, install.packages, lock_command(agent))
    else:
        check_requirements_lock(
            recipe_dir / RECIPE_LOCK,
            install.packages,
            lock_command(agent),
            list(install.sourceOnly),
        )


def _payload(ws: Workspace, agent: str, install: InstallRecipe) -> tuple[Path, bool]:
    """The installed payload directory, and whether it is staged (writable) for this build."""
    recipe_dir = _recipe_dir(ws.sources, agent)
    if install.kind == "npm":
        check_package_lock(recipe_dir, agent, install.packages, lock_command(agent))
        return install_packages(recipe_dir, ws.architecture, ws.cache_root, ws.log), False
    lock = recipe_dir / RECIPE_LOCK
    locked = check_requirements_lock(
        lock, install.packages, lock_command(agent), list(install.sourceOnly)
    )
    payload = ws.work_dir / agent
    site = _unpacked(_downloaded(ws, lock, locked), payload / "site")
    for pin, source in sorted(install.sourceOnly.items()):
        archive = download_source(
            pin, source.sha256, ws.cache_root, python=ws.python, run=ws.run, log=ws.log
        )
        unpack_source_package(archive, source.path, site, pin)
    return payload, True


def _version(payload: Path, pattern: str, install: InstallRecipe, where: Path) -> str:
    found = sorted(payload.glob(pattern))
    if len(found) != 1:
        raise ConfigError(f"{where}: version {pattern!r} matches {len(found)} files of the payload")
    if found[0].name == "METADATA":
        metadata = Parser().parsestr(found[0].read_text(encoding="utf-8"))
        name, version = str(metadata["Name"]), str(metadata["Version"])
        pinned = {normalise(p.partition("==")[0]): p.partition("==")[2] for p in install.packages}
        ok = pinned.get(normalise(name)) == version
    else:
        manifest = json.loads(found[0].read_bytes())
        name, version = str(manifest["name"]), str(manifest["version"])
        ok = f"{name}@{version}" in install.packages
    if not ok:
        raise ConfigError(f"{where}: the payload has {name} {version}, not install.json's pin")
    return version


def _agent_runner(ws: Workspace, agent: str, parent: Plan) -> Plan:
    recipe_dir = _recipe_dir(ws.sources, agent)
    install = _read_model(recipe_dir / "install.json", InstallRecipe)
    image = _read_model(recipe_dir / "image.json", RunnerImage)
    where = recipe_dir / "image.json"
    if not (ws.sources.harness / "adapters" / f"{image.adapter}.py").is_file():
        raise ConfigError(f"{where}: there is no adapter agent_eval/adapters/{image.adapter}.py")
    payload, staged = _payload(ws, agent, install)
    names = {"arch": ws.architecture, "npmCpu": NPM_CPU[ws.architecture]}
    hosts = {item.target: payload / item.source.format(**names) for item in image.files}
    for item in image.files:
        if not hosts[item.target].exists():
            raise ConfigError(f"{where}: {item.source} is not in the installed payload")
    if image.compile or image.importCheck:
        trees = [(hosts[t], t) for t in image.compile if t in hosts and hosts[t].is_dir()]
        if not staged or len(trees) != len(image.compile) or not trees:
            raise ConfigError(f"{where}: only directories of a pip payload can be compiled")
        ws.log(f"compiling {agent}'s payload (python3 of the base, in a build container)")
        compile_trees(
            ws.engine,
            ws.base.image_id,
            trees,
            imports=[image.importCheck] if image.importCheck else [],
            import_path=image.compile,
            environment=image.importEnvironment,
        )
    entries: list[Entry] = []
    for target, source in hosts.items():
        if source.is_dir():
            entries += tree(source, target)
        else:
            mode = 0o755 if source.stat().st_mode & 0o100 else 0o644
            entries.append(Entry(target, "file", mode, source=source))
    version = _version(payload, image.version, install, where)
    adapters = [
        directory("/opt/agent-eval"),
        *_staged_harness(ws.sources, "runner", "/opt/agent-eval/agent_eval"),
        regular("/opt/agent-eval/runner-version", f"{version}\n".encode()),
        regular(image.adaptersPth, b"/opt/agent-eval\n"),
    ]
    existing = ws.base.directories
    path = ":".join([*image.pathPrefix, DEFAULT_PATH])
    env = [f"PATH={path}" if e.startswith("PATH=") else e for e in parent.env]
    env += [f"{k}={v}" for k, v in image.environment.items()]
    return Plan(
        layers=(
            Layer(
                f"the {agent} CLI ({' '.join(install.packages)})", _with_parents(entries, existing)
            ),
            Layer("the adapters and the runner version", _with_parents(adapters, existing)),
        ),
        env=tuple(env),
        cmd=("/usr/bin/python3", "-B", "-m", f"agent_eval.adapters.{image.adapter}", "--help"),
        working_dir=parent.working_dir,
        user=parent.user,
    )


# --- The model gateway -----------------------------------------------------------------------


def _gateway(ws: Workspace, parent: Plan) -> Plan:
    """The runner base plus mitmproxy (locked, compiled) and the gateway's addon.

    It runs as the runner base's unprivileged user, with its state in /tmp; its
    mount points are made here so that a read-only root still has them.
    """
    recipe_dir = _recipe_dir(ws.sources, GATEWAY)
    install = _read_model(recipe_dir / "install.json", InstallRecipe)
    if install.kind != "pip":
        raise ConfigError(f"{recipe_dir / 'install.json'}: the gateway is a pip payload")
    payload, _ = _payload(ws, GATEWAY, install)
    site = payload / "site"
    ws.log("compiling the gateway's payload (python3 of the base, in a build container)")
    compile_trees(
        ws.engine,
        ws.base.image_id,
        [(site, GATEWAY_SITE)],
        imports=["mitmproxy.tools.main"],
        import_path=[GATEWAY_SITE],
        environment={"HOME": "/tmp"},
    )
    existing = ws.base.directories
    mounts = [
        directory(f"{GATEWAY_MOUNT}{p}") for p in ("", "/config", "/routes", "/records", "/sockets")
    ]
    harness = [
        directory("/opt/agent-eval"),
        *_staged_harness(ws.sources, GATEWAY, "/opt/agent-eval/agent_eval"),
    ]
    env = [*parent.env, f"PYTHONPATH={GATEWAY_SITE}:/opt/agent-eval", "PYTHONDONTWRITEBYTECODE=1"]
    env = [e for e in env if not e.startswith("HOME=")] + ["HOME=/tmp"]
    return Plan(
        layers=(
            Layer(
                f"mitmproxy ({' '.join(install.packages)}), compiled",
                _with_parents(tree(site, GATEWAY_SITE), existing),
            ),
            Layer(
                "the gateway's addon and mount points", _with_parents([*harness, *mounts], existing)
            ),
        ),
        env=tuple(env),
        cmd=(
            "/usr/bin/python3",
            "-B",
            "-m",
            "agent_eval.gateway.serve",
            f"{GATEWAY_MOUNT}/config/gateway.json",
        ),
        working_dir="/tmp",
        user=parent.user,
    )
