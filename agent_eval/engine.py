"""The container engine boundary: the only module that imports ``docker``.

Everything the harness does with containers and images goes through the
:class:`ContainerEngine` interface; :class:`DockerEngine` implements it over
the Docker SDK's low-level API, and ``agent_eval.engine_fake.FakeEngine``
implements it in memory for unit tests.

Invariants:

* **Local only.** The engine is reached over a local Unix socket: the runner
  config's ``runtimePath`` when given, else ``DOCKER_HOST`` when it is a
  ``unix://`` URL, else the default socket. Any other ``DOCKER_HOST``
  (``tcp://``, ``ssh://``, ...) is refused, even when ``runtimePath`` is given.
* **Never pulls.** A container is created from an image id that this module
  resolved itself after checking that the image is present locally and is the
  pinned one (``name@sha256:`` in its RepoDigests, or ``sha256:`` equal to its
  Id). The low-level ``create_container`` is used: it never pulls, unlike the
  SDK's ``containers.run``.
* **One place for the hardening flags:** :class:`Hardening`. Every container
  runs with ``--init``, a read-only root, no network (unless a runner spec asks
  for the engine's default network), ``no-new-privileges``, every capability
  dropped but a per-role set, a fixed user, pid/memory/CPU limits with memory
  equal to memory+swap, and a small ``noexec`` tmpfs on ``/tmp``. It is never
  privileged and has no mounts but the bind mounts its spec lists (read-only
  unless stated); the engine socket, the host home, credential directories and
  a git work tree are refused as mount sources.
* **Labelled.** Every container carries ``agent-eval.batch``, ``agent-eval.run``
  and ``agent-eval.role``, so the leftovers of an interrupted batch can be
  found and removed by label.
* **Deadlines from outside.** :meth:`ContainerEngine.wait` kills a container
  that outlives its deadline and reports a timeout; the container's own
  cooperation is never needed.
* **Bounded output.** Logs are read as streams and cut at a byte limit, with a
  flag saying so; stdout and stderr are kept apart.
* **Confirmed removal.** :meth:`ContainerEngine.remove` returns only when a
  follow-up lookup says the container is gone; otherwise it raises
  :class:`~agent_eval.errors.CleanupError`, an infrastructure failure that
  stops the batch.
"""

from __future__ import annotations

import abc
import contextlib
import io
import os
import re
import socket
import stat
import tarfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Literal, cast

import docker
import docker.errors
import requests

from agent_eval.errors import (
    CleanupError,
    ConfigError,
    EngineUnavailableError,
    InfrastructureError,
)
from agent_eval.models.runner_config import check_pinned_image

__all__ = [
    "DEFAULT_SOCKET",
    "LABEL_BATCH",
    "LABEL_ROLE",
    "LABEL_RUN",
    "RUNNER_USER",
    "VERIFIER_CAPABILITIES",
    "BoundedOutput",
    "ContainerEngine",
    "ContainerRun",
    "ContainerSpec",
    "ContainerSummary",
    "DockerEngine",
    "Hardening",
    "ImageIdentity",
    "Mount",
    "Network",
    "ResourceLimits",
    "Role",
    "WaitResult",
    "check_mounts",
    "connect_local_engine",
    "list_leftovers",
    "local_socket_path",
    "match_pinned_image",
    "remove_leftovers",
    "run_container",
]

Role = Literal["verifier", "runner", "consumer"]
Network = Literal["none", "default"]

LABEL_BATCH = "agent-eval.batch"
LABEL_RUN = "agent-eval.run"
LABEL_ROLE = "agent-eval.role"

DEFAULT_SOCKET = "/var/run/docker.sock"
"""Where the engine listens when neither runtimePath nor DOCKER_HOST says otherwise."""

VERIFIER_CAPABILITIES = ("SETUID", "SETGID", "DAC_OVERRIDE", "KILL")
"""What the verifier's trusted parent needs: drop to the child's UID/GID, read
its own 0700/0600 files whatever their owner, and kill the child."""

RUNNER_USER = "10001:10001"
"""The non-root agent user of the runner-base image (images/runner-base/Dockerfile)."""

_ROLE_USERS: Mapping[Role, str] = {"verifier": "0:0", "runner": RUNNER_USER, "consumer": "0:0"}
_ROLE_CAPABILITIES: Mapping[Role, tuple[str, ...]] = {
    "verifier": VERIFIER_CAPABILITIES,
    "runner": (),
    "consumer": (),
}
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ENGINE_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
_FORBIDDEN_TARGETS = ("/proc", "/sys", "/dev", "/tmp")
_REMOVE_DELAYS_S = (0.0, 0.2, 0.5, 1.0, 2.0)
_KILL_WAIT_S = 10.0
_STDIN_TIMEOUT_S = 30.0
_LOG_CHUNK = 64 * 1024
_TAR_OVERHEAD = 64 * 1024


# --- Specs and results --------------------------------------------------------


@dataclass(frozen=True)
class ResourceLimits:
    """Per-container resource limits; memory and memory+swap are always equal."""

    pids: int = 256
    """Process and thread count (``--pids-limit``)."""
    memory_bytes: int = 1024 * 1024 * 1024
    """Memory limit, also used as the memory+swap limit (no swap)."""
    nano_cpus: int = 1_000_000_000
    """CPU quota in billionths of a CPU (``--cpus`` times 1e9)."""
    tmp_bytes: int = 64 * 1024 * 1024
    """Size of the ``/tmp`` tmpfs."""

    def __post_init__(self) -> None:
        if self.pids < 8:
            raise ConfigError(f"pids limit {self.pids} is too small (at least 8)")
        if self.memory_bytes < 16 * 1024 * 1024:
            raise ConfigError(f"memory limit {self.memory_bytes} bytes is below 16 MiB")
        if self.nano_cpus < 10_000_000:
            raise ConfigError(f"CPU quota {self.nano_cpus} nano-CPUs is below 0.01 CPU")
        if self.tmp_bytes < 1024 * 1024:
            raise ConfigError(f"/tmp size {self.tmp_bytes} bytes is below 1 MiB")


@dataclass(frozen=True)
class Mount:
    """A host directory or file bind-mounted into a container, read-only unless stated."""

    source: Path
    """Absolute host path (a staged copy, never the repository itself)."""
    target: str
    """Absolute path inside the container."""
    read_only: bool = True
    """Whether the container may only read it."""

    def as_api(self) -> dict[str, Any]:
        """The Engine API's ``Mounts`` entry for this bind mount."""
        return {
            "Type": "bind",
            "Source": str(self.source),
            "Target": self.target,
            "ReadOnly": self.read_only,
        }


@dataclass(frozen=True)
class Hardening:
    """The one place that holds the hardening flags of every container.

    ``host_config_kwargs`` gives the keyword arguments of the Engine API's host
    config (``APIClient.create_host_config``); ``user`` goes into the container
    config. Nothing else adds flags to a container.
    """

    role: Role
    """verifier, runner or consumer."""
    user: str
    """``uid:gid`` the container's first process runs as."""
    cap_add: tuple[str, ...]
    """The only capabilities kept; every other one is dropped."""
    network: Network
    """``none``; ``default`` only for a runner that must reach a model provider."""
    limits: ResourceLimits
    """pids, memory (= memory+swap), CPU and /tmp size."""

    @classmethod
    def for_role(
        cls, role: Role, limits: ResourceLimits | None = None, network: Network = "none"
    ) -> Hardening:
        """The hardening of *role*.

        Args:
            role: verifier (UID 0 with SETUID, SETGID, DAC_OVERRIDE and KILL),
                runner (the non-root agent user, no capabilities) or consumer
                (UID 0, no capabilities: it writes only into its own mount).
            limits: Resource limits; the defaults otherwise.
            network: ``default`` is accepted for a runner only.

        Returns:
            The frozen hardening.

        Raises:
            ConfigError: A verifier or consumer was asked to have a network.
        """
        if network != "none" and role != "runner":
            raise ConfigError(
                f"a {role} container never has a network (asked for {network!r}); "
                "only a runner that must reach a model provider may use the default network"
            )
        return cls(
            role=role,
            user=_ROLE_USERS[role],
            cap_add=_ROLE_CAPABILITIES[role],
            network=network,
            limits=limits or ResourceLimits(),
        )

    def host_config_kwargs(
        self, mounts: Sequence[Mount] = (), *, engine_socket: str | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for ``APIClient.create_host_config``.

        Args:
            mounts: The spec's bind mounts; each is checked by :func:`check_mounts`.
            engine_socket: The engine's own socket, refused as a mount source
                besides the usual socket paths.

        Returns:
            A fresh dict (callers may not add flags to it).

        Raises:
            ConfigError: A mount is refused.
        """
        check_mounts(mounts, engine_socket=engine_socket)
        size = self.limits.tmp_bytes
        return {
            "init": True,
            "read_only": True,
            "network_mode": self.network,
            "security_opt": ["no-new-privileges"],
            "cap_drop": ["ALL"],
            "cap_add": list(self.cap_add),
            "privileged": False,
            "pids_limit": self.limits.pids,
            "mem_limit": self.limits.memory_bytes,
            "memswap_limit": self.limits.memory_bytes,
            "nano_cpus": self.limits.nano_cpus,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,noexec,size={size}"},
            "mounts": [mount.as_api() for mount in mounts],
        }


@dataclass(frozen=True)
class ContainerSpec:
    """What to run, as whom, with what; the engine adds the hardening."""

    image: str
    """Pinned reference: ``name@sha256:<manifest digest>`` or an image id ``sha256:<hex>``."""
    command: tuple[str, ...]
    """Argument vector of the container's process (no shell)."""
    role: Role
    """verifier, runner or consumer: chooses the user and capabilities."""
    batch_id: str
    """Batch label value."""
    run_id: str
    """Run label value (``<task-id>-<n>``, or a name for batch-wide containers)."""
    mounts: tuple[Mount, ...] = ()
    """Bind mounts, read-only unless stated; nothing else is mounted."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Environment of the process (names and values; nothing is inherited)."""
    working_dir: str | None = None
    """Working directory inside the container; the image's otherwise."""
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    """Resource limits."""
    network: Network = "none"
    """``default`` only for a runner that must reach a real model provider."""
    stdin: bool = False
    """Whether the process gets data on stdin (written once, then closed)."""

    def __post_init__(self) -> None:
        try:
            check_pinned_image(self.image)
        except ValueError as exc:
            raise ConfigError(f"container image: {exc}") from None
        if not self.command or any("\x00" in arg for arg in self.command):
            raise ConfigError("container command must be a non-empty argument vector")
        for name, value in (("batch id", self.batch_id), ("run id", self.run_id)):
            if not _LABEL_VALUE.match(value):
                raise ConfigError(
                    f"{name} {value!r} is not a label value: letters, digits, '.', '_', '-', "
                    "at most 128 characters"
                )
        # Raises for a network on a verifier or consumer.
        Hardening.for_role(self.role, self.limits, self.network)

    @property
    def hardening(self) -> Hardening:
        """The hardening this spec's container runs with."""
        return Hardening.for_role(self.role, self.limits, self.network)

    @property
    def labels(self) -> dict[str, str]:
        """The labels every container carries."""
        return {LABEL_BATCH: self.batch_id, LABEL_RUN: self.run_id, LABEL_ROLE: self.role}


@dataclass(frozen=True)
class ImageIdentity:
    """A locally present image that matched its pinned reference."""

    reference: str
    """The pinned reference that was checked."""
    image_id: str
    """The image's id ``sha256:…``: what containers are created from."""
    repo_digests: tuple[str, ...]
    """The image's RepoDigests as the engine reports them."""


@dataclass(frozen=True)
class WaitResult:
    """How a container ended."""

    exit_code: int
    """Exit status of its first process (137 when it was killed)."""
    timed_out: bool
    """Killed from outside because it outlived its deadline."""
    oom_killed: bool
    """The engine reports an OOM kill (cgroup v1: any process of the container)."""


@dataclass(frozen=True)
class BoundedOutput:
    """A container's output, each stream cut at a byte limit."""

    stdout: bytes
    """At most the limit's first bytes of stdout."""
    stderr: bytes
    """At most the limit's first bytes of stderr."""
    stdout_truncated: bool
    """stdout was longer than the limit."""
    stderr_truncated: bool
    """stderr was longer than the limit."""


@dataclass(frozen=True)
class ContainerSummary:
    """A container found by label."""

    container_id: str
    """Full container id."""
    batch_id: str
    """Its batch label."""
    run_id: str
    """Its run label."""
    role: str
    """Its role label."""
    state: str
    """created, running, exited, ..."""


@dataclass(frozen=True)
class ContainerRun:
    """The outcome of :func:`run_container`: the container is gone when this exists."""

    container_id: str
    """Id of the (removed) container."""
    wait: WaitResult
    """Exit code, timeout, OOM."""
    output: BoundedOutput
    """Bounded stdout and stderr."""
    seconds: float
    """Wall-clock time from create to confirmed removal."""


# --- Pure checks ----------------------------------------------------------------


def local_socket_path(runtime_path: str | None, environ: Mapping[str, str]) -> str:
    """The local engine socket to use.

    Args:
        runtime_path: The runner config's ``runtimePath``, if any; it wins over
            ``DOCKER_HOST``.
        environ: The environment to read ``DOCKER_HOST`` from.

    Returns:
        An absolute socket path.

    Raises:
        EngineUnavailableError: ``DOCKER_HOST`` is set to anything but a
            ``unix://`` URL, or a path is not absolute.
    """
    host = environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        raise EngineUnavailableError(
            f"DOCKER_HOST={host!r} is not a local unix:// socket; agent-eval uses a local "
            "engine only: unset DOCKER_HOST or set it to unix:///path/to/docker.sock"
        )
    if runtime_path:
        path, where = runtime_path, "runtimePath"
    elif host:
        path, where = host.removeprefix("unix://"), "DOCKER_HOST"
    else:
        return DEFAULT_SOCKET
    if not path.startswith("/") or "\x00" in path:
        raise EngineUnavailableError(
            f"{where} {path!r} is not an absolute path of the engine's Unix socket"
        )
    return path


def _familiar(name: str) -> str:
    """``docker.io/library/debian`` → ``debian``, as the engine reports RepoDigests."""
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if name.startswith(prefix):
            name = name.removeprefix(prefix)
            return name.removeprefix("library/")
    return name


def match_pinned_image(reference: str, image_id: str, repo_digests: Sequence[str]) -> None:
    """Check that a local image is the one *reference* pins.

    Args:
        reference: ``name@sha256:<manifest digest>`` or ``sha256:<image id>``.
        image_id: The local image's ``Id``.
        repo_digests: The local image's ``RepoDigests``.

    Raises:
        ConfigError: *reference* is not pinned.
        InfrastructureError: The image is not the pinned one.
    """
    try:
        check_pinned_image(reference)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if reference.startswith("sha256:"):
        if image_id != reference:
            raise InfrastructureError(
                f"image {reference} is pinned by id, but the local image resolved for it has "
                f"id {image_id}; rebuild or re-pin it (agent-eval images build prints the ids)"
            )
        return
    name, _, digest = reference.partition("@")
    wanted = f"{_familiar(name)}@{digest}"
    if wanted not in {
        _familiar(d.partition("@")[0]) + "@" + d.partition("@")[2] for d in repo_digests
    }:
        raise InfrastructureError(
            f"image {reference}: the local image {image_id} does not carry that digest "
            f"(its RepoDigests: {sorted(repo_digests) or 'none'}); re-push it to the pinned "
            "registry or re-pin the reference"
        )


def _is_within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def check_mounts(mounts: Sequence[Mount], *, engine_socket: str | None = None) -> None:
    """Refuse mounts that could hand a container the host.

    Refused as a source: a missing or relative path; a Unix socket; the engine
    socket or a directory holding it; the host home, a directory holding it,
    or a dot-directory in it (credentials); a git work tree (the repository is
    never mounted, only staged copies of files). Refused as a target: a
    relative path, ``/``, ``/proc``, ``/sys``, ``/dev``, ``/tmp`` (and below),
    and a target used twice.

    Args:
        mounts: The bind mounts of one container.
        engine_socket: The engine's own socket path, if known.

    Raises:
        ConfigError: A mount is refused; the message names it and why.
    """
    sockets = {Path(p) for p in _ENGINE_SOCKETS}
    if engine_socket:
        sockets.add(Path(os.path.realpath(engine_socket)))
    homes = {Path("/root"), Path("/home")}
    with contextlib.suppress(RuntimeError, KeyError):  # no home beyond the usual places
        homes.add(Path(os.path.realpath(Path.home())))
    targets: set[str] = set()
    for mount in mounts:
        where = f"mount {mount.source} -> {mount.target}"
        if not mount.source.is_absolute():
            raise ConfigError(f"{where}: the source must be an absolute path")
        try:
            mode = os.stat(mount.source).st_mode
        except OSError as exc:
            raise ConfigError(f"{where}: the source cannot be read ({exc.strerror})") from None
        real = Path(os.path.realpath(mount.source))
        if stat.S_ISSOCK(mode):
            raise ConfigError(f"{where}: a socket is never mounted into a container")
        for sock in sockets:
            if _is_within(sock, real):
                raise ConfigError(f"{where}: it holds the engine socket {sock}")
        for home in homes:
            if _is_within(home, real):
                raise ConfigError(f"{where}: it is or holds the host home {home}")
            if home in real.parents and real.relative_to(home).parts[0].startswith("."):
                raise ConfigError(f"{where}: dot-directories of the home hold credentials")
        if (real / ".git").exists():
            raise ConfigError(
                f"{where}: it is a git work tree; mount a staged copy of the needed files instead"
            )
        target = PurePosixPath(mount.target)
        if not target.is_absolute() or ".." in target.parts or str(target) == "/":
            raise ConfigError(f"{where}: the target must be an absolute path below /")
        if any(_is_within(Path(target), Path(t)) for t in _FORBIDDEN_TARGETS):
            raise ConfigError(f"{where}: {target} is managed by the engine or the hardening")
        if str(target) in targets:
            raise ConfigError(f"{where}: the target is used twice")
        targets.add(str(target))


# --- The interface --------------------------------------------------------------


class ContainerEngine(abc.ABC):
    """What the harness needs from a container engine."""

    @abc.abstractmethod
    def resolve_image(self, reference: str) -> ImageIdentity:
        """Find a locally present image and check that it is the pinned one.

        Args:
            reference: ``name@sha256:<manifest digest>`` or ``sha256:<image id>``.

        Returns:
            The image's identity; containers are created from its id.

        Raises:
            ConfigError: The reference is not pinned.
            InfrastructureError: The image is not present locally (nothing is
                ever pulled) or is not the pinned one.
        """

    @abc.abstractmethod
    def create(self, spec: ContainerSpec) -> str:
        """Create (not start) a hardened, labelled container.

        Args:
            spec: What to run; the image is resolved with :meth:`resolve_image`.

        Returns:
            The container id.

        Raises:
            ConfigError: The spec or a mount is refused.
            InfrastructureError: The image is absent or not the pinned one, or
                the engine refused to create the container.
        """

    @abc.abstractmethod
    def start(self, container_id: str, stdin: bytes | None = None) -> None:
        """Start a created container, writing *stdin* to it and closing it.

        A container that exits without reading its stdin is not an error: its
        exit status tells.

        Args:
            container_id: A container made by :meth:`create`.
            stdin: Data for a spec with ``stdin=True``; None sends nothing.

        Raises:
            InfrastructureError: The engine could not start it (the CLI's exit 125).
        """

    @abc.abstractmethod
    def wait(self, container_id: str, timeout_s: float) -> WaitResult:
        """Wait for a started container to exit, killing it at the deadline.

        Args:
            container_id: A started container.
            timeout_s: Seconds from now; the container is killed when they pass.

        Returns:
            Its exit status, whether it timed out and whether it was OOM-killed.

        Raises:
            InfrastructureError: The engine stopped answering, or reported an
                error of its own for the container.
        """

    @abc.abstractmethod
    def logs(self, container_id: str, limit_bytes: int) -> BoundedOutput:
        """Read a container's stdout and stderr, each cut at *limit_bytes*.

        Args:
            container_id: An exited container that has not been removed.
            limit_bytes: Bytes kept per stream.

        Returns:
            The bounded output with truncation flags.

        Raises:
            InfrastructureError: The engine could not return the logs.
        """

    @abc.abstractmethod
    def copy_file_out(self, container_id: str, path: str, max_bytes: int) -> bytes:
        """Read one regular file from a container's filesystem or bind mounts.

        Files on a tmpfs (``/tmp``) cannot be read this way: write results to
        a writable bind mount instead.

        Args:
            container_id: A container that has not been removed.
            path: Absolute path in the container.
            max_bytes: Largest file accepted.

        Returns:
            The file's bytes.

        Raises:
            InfrastructureError: The file is absent, not a regular file, or larger
                than *max_bytes*.
        """

    @abc.abstractmethod
    def remove(self, container_id: str) -> None:
        """Remove a container (killing it if needed) and confirm it is gone.

        Args:
            container_id: Any container id; one already gone counts as removed.

        Raises:
            CleanupError: Removal was not confirmed after bounded retries.
        """

    @abc.abstractmethod
    def list_containers(self, batch_id: str | None = None) -> list[ContainerSummary]:
        """List agent-eval containers, running or not.

        Args:
            batch_id: Only this batch's; every container with a batch label otherwise.

        Returns:
            The containers found, in the engine's order.

        Raises:
            InfrastructureError: The engine could not list them.
        """

    @abc.abstractmethod
    def image_id(self, reference: str) -> str | None:
        """The id of a local image by name, tag or id, without any pinning check.

        Args:
            reference: A name[:tag] or id.

        Returns:
            Its id, or None when no such image is present (nothing is pulled).

        Raises:
            InfrastructureError: The engine could not be asked.
        """

    @abc.abstractmethod
    def build_image(
        self,
        context_dir: Path,
        *,
        tag: str,
        buildargs: Mapping[str, str],
        labels: Mapping[str, str],
    ) -> str:
        """Build an image with no network and no pull, from a local context.

        Args:
            context_dir: Directory holding the Dockerfile and everything it copies.
            tag: name:tag given to the result.
            buildargs: ``ARG`` values (the base image id, for example).
            labels: Labels added to the image.

        Returns:
            The built image's id.

        Raises:
            InfrastructureError: The build failed; the message has the builder's last lines.
        """

    @abc.abstractmethod
    def import_image(self, stream: IO[bytes], *, repository: str, tag: str) -> str:
        """Import a root filesystem tar stream as an image (``docker import``).

        Args:
            stream: An uncompressed tar of the root filesystem.
            repository: Name of the new image.
            tag: Its tag.

        Returns:
            The new image's id.

        Raises:
            InfrastructureError: The engine refused the import.
        """

    @abc.abstractmethod
    def push_image(self, image_id: str, *, repository: str, tag: str) -> str:
        """Tag a local image as ``repository:tag``, push it, and pin it by digest.

        Args:
            image_id: The local image.
            repository: ``registry-host:port/name``.
            tag: The tag pushed.

        Returns:
            ``repository@sha256:<manifest digest>`` read back from RepoDigests.

        Raises:
            InfrastructureError: The push failed or no RepoDigest appeared.
        """

    def close(self) -> None:  # noqa: B027 -- optional hook, nothing to do by default
        """Release the connection to the engine."""


# --- Logic over any engine --------------------------------------------------------


def run_container(
    engine: ContainerEngine,
    spec: ContainerSpec,
    *,
    timeout_s: float,
    log_limit_bytes: int,
    stdin: bytes | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ContainerRun:
    """Create, start, wait (deadline from outside), read bounded logs, remove (confirmed).

    The container is removed whatever happens after it was created; when its
    removal cannot be confirmed, the :class:`CleanupError` wins over any other
    error in flight (it stops the batch).

    Args:
        engine: The engine.
        spec: What to run.
        timeout_s: Deadline from the start, enforced by killing the container.
        log_limit_bytes: Bytes kept per output stream.
        stdin: Data written to the container's stdin (needs ``spec.stdin``).
        clock: Monotonic seconds, for the duration.

    Returns:
        Exit status, timeout and OOM flags, bounded output, duration.

    Raises:
        ConfigError: The spec is refused.
        InfrastructureError: The image, the engine, or cleanup failed.
    """
    if stdin is not None and not spec.stdin:
        raise ConfigError("stdin data given for a spec without stdin=True")
    started = clock()
    container_id = engine.create(spec)
    try:
        deadline = clock() + timeout_s
        engine.start(container_id, stdin)
        # Time spent delivering stdin counts against the deadline.
        waited = engine.wait(container_id, max(deadline - clock(), 0.0))
        output = engine.logs(container_id, log_limit_bytes)
    finally:
        engine.remove(container_id)
    return ContainerRun(container_id, waited, output, clock() - started)


def list_leftovers(engine: ContainerEngine, batch_id: str | None = None) -> list[ContainerSummary]:
    """Containers of *batch_id* (every batch when None) still known to the engine.

    Args:
        engine: The engine.
        batch_id: A batch id, or None for all agent-eval containers.

    Returns:
        The containers found.

    Raises:
        InfrastructureError: The engine could not list them.
    """
    return engine.list_containers(batch_id)


def remove_leftovers(engine: ContainerEngine, batch_id: str | None = None) -> list[str]:
    """Remove every container of an interrupted batch, confirming each removal.

    Args:
        engine: The engine.
        batch_id: The batch whose containers go; None removes every agent-eval one.

    Returns:
        Ids of the containers removed.

    Raises:
        CleanupError: One or more removals were not confirmed (all are tried first).
    """
    removed: list[str] = []
    failures: list[str] = []
    for leftover in engine.list_containers(batch_id):
        try:
            engine.remove(leftover.container_id)
        except CleanupError as exc:
            failures.append(str(exc))
        else:
            removed.append(leftover.container_id)
    if failures:
        raise CleanupError(
            f"{len(failures)} leftover container(s) could not be removed: " + "; ".join(failures)
        )
    return removed


# --- Docker -----------------------------------------------------------------------


def connect_local_engine(
    runtime_path: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
) -> DockerEngine:
    """Connect to the local Docker engine and check that it answers.

    Args:
        runtime_path: The runner config's ``runtimePath``, if any.
        environ: Environment to read ``DOCKER_HOST`` from; ``os.environ`` by default.
        timeout_s: Timeout of ordinary API calls (waits have their own).

    Returns:
        A connected engine.

    Raises:
        EngineUnavailableError: ``DOCKER_HOST`` is not local, the socket is
            missing, or the engine does not answer.
    """
    path = local_socket_path(runtime_path, os.environ if environ is None else environ)
    fix = "start the engine (scripts/setup does) or point runtimePath/DOCKER_HOST at its socket"
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise EngineUnavailableError(
            f"no engine socket at {path} ({exc.strerror}); {fix}"
        ) from None
    if not stat.S_ISSOCK(mode):
        raise EngineUnavailableError(f"{path} is not a Unix socket; {fix}")
    # Knock first: the SDK leaks its socket when the connection is refused.
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(5)
            probe.connect(path)
    except OSError as exc:
        raise EngineUnavailableError(f"no engine listens on {path} ({exc}); {fix}") from None
    try:
        api = docker.APIClient(base_url=f"unix://{path}", version="auto", timeout=int(timeout_s))
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        raise EngineUnavailableError(
            f"the engine at {path} does not answer ({exc}); {fix}"
        ) from None
    try:
        api.ping()
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        api.close()
        raise EngineUnavailableError(
            f"the engine at {path} does not answer a ping ({exc})"
        ) from None
    return DockerEngine(api, socket_path=path)


def _api_error(what: str, exc: Exception) -> InfrastructureError:
    if isinstance(exc, docker.errors.APIError):
        detail = exc.explanation or str(exc)
        return InfrastructureError(f"{what}: the engine answered {exc.status_code}: {detail}")
    return InfrastructureError(f"{what}: {exc}")


_ENGINE_ERRORS = (docker.errors.DockerException, requests.RequestException, OSError)


def _close_attached(attached: Any) -> None:
    """Close an attach socket: the SDK's SocketIO wrapper and the socket under it."""
    if attached is None:
        return
    raw = getattr(attached, "_sock", None)
    attached.close()
    if raw is not None:
        raw.close()


def _close_stream(stream: Any) -> None:
    """Stop a streamed response early and release its socket (the SDK's close alone does not)."""
    close = getattr(stream, "close", None)
    if close is not None:
        close()
    response = getattr(stream, "_response", None)
    if response is not None:
        response.close()


class DockerEngine(ContainerEngine):
    """:class:`ContainerEngine` over the Docker SDK's low-level API on a local socket."""

    def __init__(self, api: docker.APIClient, *, socket_path: str) -> None:
        """Use *api*, an already connected client of the engine at *socket_path*."""
        self._api = api
        self.socket_path = socket_path

    def close(self) -> None:
        """Close the client's connections."""
        self._api.close()

    def _inspect_image(self, reference: str) -> dict[str, Any]:
        # types-docker leaves inspect_image untyped.
        return cast(dict[str, Any], cast(Any, self._api).inspect_image(reference))

    def resolve_image(self, reference: str) -> ImageIdentity:
        """See :meth:`ContainerEngine.resolve_image`."""
        try:
            check_pinned_image(reference)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        try:
            info = self._inspect_image(reference)
        except docker.errors.ImageNotFound:
            self._refuse_other_digests(reference)
            raise InfrastructureError(
                f"image {reference} is not present in the local engine, and nothing is ever "
                "pulled; build it with `agent-eval images build` (or load it) and pin what "
                "that prints"
            ) from None
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"inspecting image {reference}", exc) from None
        image_id = str(info["Id"])
        digests = tuple(str(d) for d in info.get("RepoDigests") or ())
        match_pinned_image(reference, image_id, digests)
        return ImageIdentity(reference, image_id, digests)

    def _refuse_other_digests(self, reference: str) -> None:
        """Name the digests a local image of the pinned repository does carry, if any."""
        if reference.startswith("sha256:"):
            return
        repository = reference.partition("@")[0]
        try:
            local = self._api.images(name=repository)
        except _ENGINE_ERRORS:
            return  # the caller's "not present" error stands
        for item in local:
            match_pinned_image(reference, str(item["Id"]), item.get("RepoDigests") or [])

    def create(self, spec: ContainerSpec) -> str:
        """See :meth:`ContainerEngine.create`."""
        hardening = spec.hardening
        host_kwargs = hardening.host_config_kwargs(spec.mounts, engine_socket=self.socket_path)
        image = self.resolve_image(spec.image)
        try:
            host_config = self._api.create_host_config(**host_kwargs)
            created = self._api.create_container(
                image.image_id,
                command=list(spec.command),
                user=hardening.user,
                environment=dict(spec.environment),
                working_dir=spec.working_dir,
                labels=spec.labels,
                stdin_open=spec.stdin,
                host_config=host_config,
            )
        except _ENGINE_ERRORS as exc:
            raise _api_error(
                f"creating the {spec.role} container of run {spec.run_id}", exc
            ) from None
        return str(created["Id"])

    def start(self, container_id: str, stdin: bytes | None = None) -> None:
        """See :meth:`ContainerEngine.start`."""
        attached: Any = None
        try:
            if stdin is not None:
                # Attach before start so that no byte is lost; StdinOnce closes
                # the container's stdin when this attachment ends.
                attached = self._api.attach_socket(container_id, params={"stdin": 1, "stream": 1})
            self._api.start(container_id)
        except _ENGINE_ERRORS as exc:
            _close_attached(attached)
            raise _api_error(f"starting container {container_id[:12]}", exc) from None
        if attached is None or stdin is None:
            return
        raw = cast(socket.socket, attached._sock)
        try:
            raw.settimeout(_STDIN_TIMEOUT_S)
            raw.sendall(stdin)
            raw.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # it exited or stopped reading: its exit status tells
        finally:
            _close_attached(attached)

    def wait(self, container_id: str, timeout_s: float) -> WaitResult:
        """See :meth:`ContainerEngine.wait`."""
        timed_out = False
        try:
            cast(Any, self._api).wait(container_id, timeout=max(timeout_s, 0.001))
        except requests.RequestException:
            # The client's read timeout is the deadline; the container runs on
            # until it is killed here.
            timed_out = True
        except docker.errors.DockerException as exc:
            raise _api_error(f"waiting for container {container_id[:12]}", exc) from None
        if timed_out:
            try:
                self._api.kill(container_id)
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: it exited in the meantime
                    raise _api_error(f"killing container {container_id[:12]}", exc) from None
            try:
                cast(Any, self._api).wait(container_id, timeout=_KILL_WAIT_S)
            except _ENGINE_ERRORS as exc:
                raise _api_error(f"container {container_id[:12]} survived its kill", exc) from None
        try:
            state = self._api.inspect_container(container_id)["State"]
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"inspecting container {container_id[:12]}", exc) from None
        if state.get("Error"):
            raise InfrastructureError(
                f"the engine reported an error for container {container_id[:12]}: {state['Error']}"
            )
        return WaitResult(
            exit_code=int(state["ExitCode"]),
            timed_out=timed_out,
            oom_killed=bool(state.get("OOMKilled")),
        )

    def _bounded_stream(self, container_id: str, limit: int, *, stdout: bool) -> tuple[bytes, bool]:
        chunks: Iterator[bytes] = self._api.logs(
            container_id, stdout=stdout, stderr=not stdout, stream=True, follow=False
        )
        kept = bytearray()
        truncated = False
        try:
            for chunk in chunks:
                kept += chunk
                if len(kept) > limit:
                    truncated = True
                    break
        finally:
            _close_stream(chunks)
        return bytes(kept[:limit]), truncated

    def logs(self, container_id: str, limit_bytes: int) -> BoundedOutput:
        """See :meth:`ContainerEngine.logs`."""
        try:
            out, out_cut = self._bounded_stream(container_id, limit_bytes, stdout=True)
            err, err_cut = self._bounded_stream(container_id, limit_bytes, stdout=False)
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"reading the logs of container {container_id[:12]}", exc) from None
        return BoundedOutput(out, err, out_cut, err_cut)

    def copy_file_out(self, container_id: str, path: str, max_bytes: int) -> bytes:
        """See :meth:`ContainerEngine.copy_file_out`."""
        where = f"{path} in container {container_id[:12]}"
        try:
            chunks, info = self._api.get_archive(container_id, path, chunk_size=_LOG_CHUNK)
        except docker.errors.NotFound:
            raise InfrastructureError(f"{where} does not exist") from None
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"copying {where}", exc) from None
        if int(info.get("size", 0)) > max_bytes:
            raise InfrastructureError(f"{where} has {info['size']} bytes, over {max_bytes}")
        archive = bytearray()
        for chunk in chunks:
            archive += chunk
            if len(archive) > max_bytes + _TAR_OVERHEAD:
                raise InfrastructureError(f"{where} is larger than {max_bytes} bytes")
        with tarfile.open(fileobj=io.BytesIO(bytes(archive)), mode="r:") as tar:
            members = tar.getmembers()
            if len(members) != 1 or not members[0].isreg():
                raise InfrastructureError(f"{where} is not a regular file")
            handle = tar.extractfile(members[0])
            assert handle is not None  # a regular member always has data
            return handle.read()

    def remove(self, container_id: str) -> None:
        """See :meth:`ContainerEngine.remove`."""
        last = "no answer"
        for delay in _REMOVE_DELAYS_S:
            time.sleep(delay)
            try:
                self._api.remove_container(container_id, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except _ENGINE_ERRORS as exc:
                last = str(exc)  # e.g. 409 "removal already in progress": look again
            try:
                self._api.inspect_container(container_id)
            except docker.errors.NotFound:
                return
            except _ENGINE_ERRORS as exc:
                last = str(exc)
        raise CleanupError(
            f"removal of container {container_id} was not confirmed after "
            f"{len(_REMOVE_DELAYS_S)} attempts ({last}); remove it (docker rm -f "
            f"{container_id[:12]}) and check the engine before the next batch"
        )

    def list_containers(self, batch_id: str | None = None) -> list[ContainerSummary]:
        """See :meth:`ContainerEngine.list_containers`."""
        label = LABEL_BATCH if batch_id is None else f"{LABEL_BATCH}={batch_id}"
        try:
            found = self._api.containers(all=True, filters={"label": [label]})
        except _ENGINE_ERRORS as exc:
            raise _api_error("listing agent-eval containers", exc) from None
        return [
            ContainerSummary(
                container_id=str(item["Id"]),
                batch_id=str(item["Labels"].get(LABEL_BATCH, "")),
                run_id=str(item["Labels"].get(LABEL_RUN, "")),
                role=str(item["Labels"].get(LABEL_ROLE, "")),
                state=str(item.get("State", "")),
            )
            for item in found
        ]

    def image_id(self, reference: str) -> str | None:
        """See :meth:`ContainerEngine.image_id`."""
        try:
            return str(self._inspect_image(reference)["Id"])
        except docker.errors.ImageNotFound:
            return None
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"inspecting image {reference}", exc) from None

    def build_image(
        self,
        context_dir: Path,
        *,
        tag: str,
        buildargs: Mapping[str, str],
        labels: Mapping[str, str],
    ) -> str:
        """See :meth:`ContainerEngine.build_image`."""
        tail: list[str] = []
        image_id: str | None = None
        try:
            for item in self._api.build(
                path=str(context_dir),
                tag=tag,
                pull=False,
                network_mode="none",
                rm=True,
                forcerm=True,
                buildargs=dict(buildargs),
                labels=dict(labels),
                decode=True,
            ):
                if "stream" in item:
                    tail = (tail + str(item["stream"]).splitlines())[-20:]
                if "aux" in item and "ID" in item["aux"]:
                    image_id = str(item["aux"]["ID"])
                if "error" in item:
                    tail.append(str(item["error"]))
                    raise InfrastructureError(
                        f"building {tag} from {context_dir} failed:\n" + "\n".join(tail)
                    )
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"building {tag} from {context_dir}", exc) from None
        if image_id is None:
            raise InfrastructureError(f"building {tag} gave no image id:\n" + "\n".join(tail))
        return image_id

    def import_image(self, stream: IO[bytes], *, repository: str, tag: str) -> str:
        """See :meth:`ContainerEngine.import_image`."""
        try:
            self._api.import_image_from_stream(stream, repository=repository, tag=tag)
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"importing {repository}:{tag}", exc) from None
        image_id = self.image_id(f"{repository}:{tag}")
        if image_id is None:
            raise InfrastructureError(f"importing {repository}:{tag} left no such image")
        return image_id

    def push_image(self, image_id: str, *, repository: str, tag: str) -> str:
        """See :meth:`ContainerEngine.push_image`."""
        try:
            self._api.tag(image_id, repository, tag)
            for item in self._api.push(repository, tag=tag, stream=True, decode=True):
                if "error" in item:
                    raise InfrastructureError(f"pushing {repository}:{tag}: {item['error']}")
            digests = self._inspect_image(image_id).get("RepoDigests") or []
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"pushing {repository}:{tag}", exc) from None
        for digest in digests:
            if str(digest).startswith(f"{repository}@sha256:"):
                return str(digest)
        raise InfrastructureError(
            f"pushed {repository}:{tag}, but the image has no RepoDigest for it ({digests})"
        )
