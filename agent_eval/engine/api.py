"""The container engine interface and its value types.

Everything the harness does with containers goes through
:class:`ContainerRuntime`, everything it does with images through
:class:`ImageStore`; each caller is typed with the half it uses, and
:class:`ContainerEngine` is both, over one connection.
``agent_eval.engine.docker_engine.DockerEngine`` implements it over the Docker
SDK (the only module that imports ``docker``); ``agent_eval.engine.fake``
implements each half in memory, for unit tests, and ``FakeEngine`` both.

Invariants every implementation keeps:

* **Local only, never pulls.** A container is created from an image id the
  engine resolved itself after checking that the image is present locally
  and is the pinned one (``name@sha256:`` in its RepoDigests, or
  ``sha256:`` equal to its Id).
* **Hardened by one policy.** The flags come from
  :class:`~agent_eval.engine.policy.Hardening`, the mounts are checked by
  :func:`~agent_eval.engine.policy.check_mounts`; nothing else adds flags.
* **Labelled.** Every container carries ``agent-eval.batch``,
  ``agent-eval.run`` and ``agent-eval.role``, so the leftovers of an
  interrupted batch can be found and removed by label.
* **Deadlines from outside.** :meth:`ContainerRuntime.wait` kills a container
  that outlives its deadline and reports a timeout; the container's own
  cooperation is never needed.
* **Bounded output.** Logs are read as streams and cut at a byte limit, with a
  flag saying so; stdout and stderr are kept apart.
* **Confirmed removal.** :meth:`ContainerRuntime.remove` returns only when a
  follow-up lookup says the container is gone; otherwise it raises
  :class:`~agent_eval.errors.CleanupError`, an infrastructure failure that
  stops the batch.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from agent_eval.engine.policy import (
    LABEL_BATCH,
    LABEL_LEASE,
    LABEL_ROLE,
    LABEL_RUN,
    Hardening,
    Mount,
    Network,
    ResourceLimits,
    Role,
    check_label_value,
)
from agent_eval.engine.run_queue import RunQueue
from agent_eval.errors import CleanupError, ConfigError, NotStartedError
from agent_eval.models.runner_config import check_pinned_image

__all__ = [
    "BoundedOutput",
    "ContainerEngine",
    "ContainerRun",
    "ContainerRuntime",
    "ContainerSpec",
    "ContainerSummary",
    "ImageDetails",
    "ImageIdentity",
    "ImageStore",
    "WaitResult",
    "container_labels",
    "list_leftovers",
    "remove_leftovers",
    "run_container",
]


@dataclass(frozen=True)
class ContainerSpec:
    """What to run, as whom, with what; the engine adds the hardening."""

    image: str
    """Pinned reference: ``name@sha256:<manifest digest>`` or an image id ``sha256:<hex>``."""
    command: tuple[str, ...]
    """Argument vector of the container's process (no shell)."""
    role: Role
    """verifier, runner, consumer, build or gateway: chooses the user and capabilities."""
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
    """``none``; the gateway alone may have another (``default`` or a named network)."""
    hosts: Mapping[str, str] = field(default_factory=dict)
    """Fixed host entries (the gateway's, in a test network only)."""
    stdin: bool = False
    """Whether the process gets data on stdin (written once, then closed)."""
    own_init: bool = False
    """The command is PID 1 and an init itself (the verifier's zygote); see ``Hardening``."""

    def __post_init__(self) -> None:
        try:
            check_pinned_image(self.image)
        except ValueError as exc:
            raise ConfigError(f"container image: {exc}") from None
        if not self.command or any("\x00" in arg for arg in self.command):
            raise ConfigError("container command must be a non-empty argument vector")
        for name, value in (("batch id", self.batch_id), ("run id", self.run_id)):
            check_label_value(name, value)
        # Raises for a network on anything but the gateway, an own init but the verifier's.
        self.hardening  # noqa: B018

    @property
    def hardening(self) -> Hardening:
        """The hardening this spec's container runs with."""
        return Hardening.for_role(
            self.role, self.limits, self.network, self.hosts, own_init=self.own_init
        )

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
class ImageDetails:
    """What the engine says about a local image (no pinning check)."""

    image_id: str
    """The image's id ``sha256:…``: the digest of its config."""
    repo_tags: tuple[str, ...]
    """Its ``name:tag`` references."""
    labels: Mapping[str, str]
    """Its config's labels."""
    diff_ids: tuple[str, ...]
    """Its layers' uncompressed digests, bottom first."""
    architecture: str = ""
    """Its config's architecture (``amd64``, ``arm64``)."""


@dataclass(frozen=True)
class WaitResult:
    """How a container ended."""

    exit_code: int
    """Exit status of its first process (137 when it was killed)."""
    timed_out: bool
    """Killed from outside because it outlived its deadline."""
    oom_killed: bool
    """The engine reports an OOM kill (cgroup v1: any process of the container)."""
    peak_memory_bytes: int | None = None
    """The container's peak memory use (page cache included) as last sampled while it
    ran, a lower bound of the true peak; None when the engine's cgroups were not readable."""
    cpu_seconds: float | None = None
    """CPU time its processes used, as last sampled while it ran (a lower bound);
    None when the engine's cgroups were not readable."""
    engine_lost: bool = False
    """The engine could not be reached at some point while it ran: what the engine
    collected of it (its output above all) may be incomplete."""
    run_queue: RunQueue | None = None
    """How long its threads ran and waited for a CPU, sampled while it ran; None when
    the engine could not read its threads' scheduler counters."""


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
    lease_token: str = ""
    """Its lease label ("" when it has none)."""


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


class ContainerRuntime(Protocol):
    """Running containers: what the schedule, the verifier, the gateway and the reaper need.

    A container is created from a pinned reference that the runtime resolves
    itself (as :meth:`ImageStore.resolve_image` does), so a caller that only
    runs containers needs nothing of the image store.
    """

    address: str
    """Where the engine listens (its socket), so that what a batch left is sought there."""
    lease_token: str | None = None
    """The token of the lease of the batch using this connection, once it is bound to it:
    every container created from then on carries it as its lease label."""

    @abc.abstractmethod
    def create(self, spec: ContainerSpec) -> str:
        """Create (not start) a hardened, labelled container.

        Args:
            spec: What to run; the image is resolved as :meth:`ImageStore.resolve_image` does.

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
            NotStartedError: It certainly did not run with its input (the start
                never took effect, or its stdin was lost with the connection while
                it waited for it): a fresh container may take its place.
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

        stdout keeps its start (where a protocol object is), stderr its end (which
        says how the process ended).

        Args:
            container_id: An exited container that has not been removed.
            limit_bytes: Bytes kept per stream.

        Returns:
            The bounded output with truncation flags.

        Raises:
            InfrastructureError: The engine could not return the logs.
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
    def create_network(self, name: str, labels: Mapping[str, str]) -> None:
        """Create an internal bridge network: the engine gives it no way out.

        Only ``agent-eval try-agent`` makes one, to put a scripted upstream and
        the gateway side by side; a batch only joins the network its config names.

        Raises:
            ConfigError: *name* is not a network name.
            InfrastructureError: The engine refused (a network of that name exists, say).
        """

    @abc.abstractmethod
    def remove_network(self, name: str) -> None:
        """Remove a network made by :meth:`create_network`; one already gone counts.

        Raises:
            CleanupError: The engine kept it (a container still on it, say).
        """

    @abc.abstractmethod
    def address_on(self, container_id: str, network: str) -> str:
        """The IPv4 address a running container has on *network*.

        Raises:
            InfrastructureError: It is not on that network, or the engine did not answer.
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
    def unreachable(self) -> str | None:
        """Why the engine does not answer a ping now, within a few seconds (None: it does).

        Asked when calls keep failing, to tell an engine that is gone from one that
        erred: it never raises.
        """


class ImageStore(Protocol):
    """Managing local images: finding and checking them, loading, saving, building, tagging."""

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
    def inspect_image(self, reference: str) -> ImageDetails | None:
        """Describe a local image by name, tag or id, without any pinning check.

        Args:
            reference: A name[:tag] or id.

        Returns:
            Its id, tags, labels and layers, or None when it is not present.

        Raises:
            InfrastructureError: The engine could not be asked.
        """

    @abc.abstractmethod
    def load_image(self, archive: Path) -> None:
        """Load a docker-archive tarball (``docker load``), tagging what its manifest names.

        Layers the engine already holds (those of a parent image) need not be
        in the tarball.

        Args:
            archive: The tarball on the host.

        Raises:
            InfrastructureError: The engine refused it.
        """

    @abc.abstractmethod
    def save_image(self, image_id: str, destination: Path) -> None:
        """Write a local image as a docker-archive tarball (``docker save``).

        Args:
            image_id: The image.
            destination: The tarball to write.

        Raises:
            InfrastructureError: The image is absent or the engine failed.
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


class ContainerEngine(ContainerRuntime, ImageStore, Protocol):
    """Both halves over one connection: what connecting to an engine gives.

    A caller that checks its pinned images and then runs containers from them
    (a batch's preflight, a node's) takes this; every other one takes the half
    it uses.
    """

    def close(self) -> None:
        """Release the connection to the engine (its owner, who connected, calls it)."""


# --- Logic over any engine --------------------------------------------------------


_START_ATTEMPTS = 3
"""Containers tried for one run when they do not get going (the engine dropped the start)."""


def run_container(
    engine: ContainerRuntime,
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

    A container that did not get going (:class:`NotStartedError`: not started,
    or its stdin lost with the engine's connection) is removed and a fresh one
    run in its place, at most :data:`_START_ATTEMPTS` times in all.

    Raises:
        ConfigError: The spec is refused.
        InfrastructureError: The image, the engine, or cleanup failed.
    """
    if stdin is not None and not spec.stdin:
        raise ConfigError("stdin data given for a spec without stdin=True")
    started = clock()
    for attempt in range(1, _START_ATTEMPTS + 1):
        container_id = engine.create(spec)
        try:
            deadline = clock() + timeout_s
            try:
                engine.start(container_id, stdin)
            except NotStartedError:
                # Nothing ran with this input: a fresh container is the same run.
                if attempt == _START_ATTEMPTS:
                    raise
                continue
            # Time spent delivering stdin counts against the deadline.
            waited = engine.wait(container_id, max(deadline - clock(), 0.0))
            output = engine.logs(container_id, log_limit_bytes)
        finally:
            engine.remove(container_id)
        return ContainerRun(container_id, waited, output, clock() - started)
    raise AssertionError("unreachable")  # pragma: no cover


def list_leftovers(engine: ContainerRuntime, batch_id: str | None = None) -> list[ContainerSummary]:
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


def container_labels(spec: ContainerSpec, lease_token: str | None) -> dict[str, str]:
    """The labels a container of *spec* is created with on a connection bound to *lease_token*."""
    if lease_token is None:
        return spec.labels
    return {**spec.labels, LABEL_LEASE: lease_token}


def remove_leftovers(
    engine: ContainerRuntime, batch_id: str | None = None, *, lease_token: str | None = None
) -> list[str]:
    """Remove every container of an interrupted batch, confirming each removal.

    Args:
        engine: The engine.
        batch_id: The batch whose containers go; None removes every agent-eval one.
        lease_token: When given, only containers that also carry it as their lease label go
            (a batch label alone is a name anyone can give a directory).

    Returns:
        Ids of the containers removed.

    Raises:
        CleanupError: One or more removals were not confirmed (all are tried first).
    """
    removed: list[str] = []
    failures: list[str] = []
    for leftover in engine.list_containers(batch_id):
        if lease_token is not None and leftover.lease_token != lease_token:
            continue
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
