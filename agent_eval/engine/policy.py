"""The hardening policy and the pure checks every container engine applies.

Nothing here talks to an engine: :class:`Hardening` is the one place that
holds the flags of every container (``--init``, a read-only root, no network
but for the model gateway's container,
``no-new-privileges``, every capability dropped but a per-role set, a fixed
user, pid/memory/CPU limits with memory equal to memory+swap, a small
``noexec`` tmpfs on ``/tmp``); :func:`check_mounts` refuses mounts that could
hand a container the host; :func:`local_socket_path` keeps the engine local;
:func:`match_pinned_image` checks an image against its pin. The Docker engine
and the fake engine both use them, so a unit test of the fake proves the same
rules the real engine enforces.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from agent_eval.errors import ConfigError, EngineUnavailableError, InfrastructureError
from agent_eval.models.runner_config import check_pinned_image

__all__ = [
    "DEFAULT_SOCKET",
    "LABEL_BATCH",
    "LABEL_LEASE",
    "LABEL_ROLE",
    "LABEL_RUN",
    "RUNNER_USER",
    "VERIFIER_CAPABILITIES",
    "Hardening",
    "Mount",
    "Network",
    "ResourceLimits",
    "Role",
    "check_label_value",
    "check_mounts",
    "check_network_name",
    "local_socket_path",
    "match_pinned_image",
]

Role = Literal["verifier", "runner", "consumer", "build", "gateway"]
Network = str
"""``none``, or (for the gateway only) ``default`` or the name of an engine network."""
_NETWORK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_network_name(name: str) -> None:
    """Raise ConfigError unless *name* can name an engine network."""
    if not _NETWORK_NAME.match(name):
        raise ConfigError(f"{name!r} is not an engine network name")


LABEL_BATCH = "agent-eval.batch"
LABEL_RUN = "agent-eval.run"
LABEL_ROLE = "agent-eval.role"
LABEL_LEASE = "agent-eval.lease"
"""The token of the lease of the batch that created the container: the reaper removes a dead
batch's containers only when they carry both its batch label and its lease's token."""

DEFAULT_SOCKET = "/var/run/docker.sock"
"""Where the engine listens when neither runtimePath nor DOCKER_HOST says otherwise."""

VERIFIER_CAPABILITIES = ("SETUID", "SETGID", "DAC_OVERRIDE", "KILL")
"""What the verifier's trusted parent needs: drop to the child's UID/GID, read
its own 0700/0600 files whatever their owner, and kill the child."""

RUNNER_USER = "10001:10001"
"""The non-root agent user of the runner-base image (``agent_eval.images.definitions``)."""

_ROLE_USERS: Mapping[Role, str] = {
    "verifier": "0:0",
    "runner": RUNNER_USER,
    "consumer": "0:0",
    "build": "0:0",
    "gateway": RUNNER_USER,
}
_ROLE_CAPABILITIES: Mapping[Role, tuple[str, ...]] = {
    "verifier": VERIFIER_CAPABILITIES,
    "runner": (),
    "consumer": (),
    "build": (),
    "gateway": (),
}
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ENGINE_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
_FORBIDDEN_TARGETS = ("/proc", "/sys", "/dev", "/tmp")


def check_label_value(name: str, value: str) -> None:
    """Refuse a label value the engine would not keep as given.

    Raises:
        ConfigError: *value* is not letters, digits, ``._-``, at most 128 characters.
    """
    if not _LABEL_VALUE.match(value):
        raise ConfigError(
            f"{name} {value!r} is not a label value: letters, digits, '.', '_', '-', "
            "at most 128 characters"
        )


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
    """verifier, runner, consumer, build or gateway."""
    user: str
    """``uid:gid`` the container's first process runs as."""
    cap_add: tuple[str, ...]
    """The only capabilities kept; every other one is dropped."""
    network: Network
    """``none``; the gateway alone may have another (``default`` or a named network)."""
    limits: ResourceLimits
    """pids, memory (= memory+swap), CPU and /tmp size."""
    hosts: tuple[tuple[str, str], ...] = ()
    """Fixed name-to-address entries (the gateway's, in a test network only)."""
    own_init: bool = False
    """The command is its own init (the verifier's zygote reaps orphans and forwards
    signals), so the engine adds none; every other container gets the engine's."""

    @classmethod
    def for_role(
        cls,
        role: Role,
        limits: ResourceLimits | None = None,
        network: Network = "none",
        hosts: Mapping[str, str] | None = None,
        own_init: bool = False,
    ) -> Hardening:
        """The hardening of *role*.

        Args:
            role: verifier (UID 0 with SETUID, SETGID, DAC_OVERRIDE and KILL),
                runner (the non-root agent user, no capabilities), consumer
                (UID 0, no capabilities: it writes only into its own mount) or
                build (the same as consumer: an image build's step that runs
                the image's own interpreter, bytecode compilation, writing
                only into the staged tree it compiles), gateway (the
                non-root user, no capabilities: the model gateway, the only
                container with a network).
            limits: Resource limits; the defaults otherwise.
            network: Anything but ``none`` is accepted for the gateway only.
            hosts: Fixed host entries, for the gateway only.
            own_init: The command is its own init; for the verifier only.

        Returns:
            The frozen hardening.

        Raises:
            ConfigError: A verifier or consumer was asked to have a network, or
                another role than the verifier to be its own init.
        """
        if (network != "none" or hosts) and role != "gateway":
            raise ConfigError(
                f"a {role} container never has a network (asked for {network!r}); "
                "only the model gateway reaches the model providers"
            )
        if network != "none":
            check_network_name(network)
        if own_init and role != "verifier":
            raise ConfigError(f"only the verifier's command is its own init, not a {role}'s")
        return cls(
            role=role,
            user=_ROLE_USERS[role],
            cap_add=_ROLE_CAPABILITIES[role],
            network=network,
            hosts=tuple(sorted((hosts or {}).items())),
            limits=limits or ResourceLimits(),
            own_init=own_init,
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
            "init": not self.own_init,
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
            **({"extra_hosts": dict(self.hosts)} if self.hosts else {}),
        }


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
