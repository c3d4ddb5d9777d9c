"""The Docker engine: :class:`~agent_eval.engine.api.ContainerEngine` over the Docker SDK.

The only module of the harness that imports ``docker``. It reaches the engine
over a local Unix socket only (the runner config's ``runtimePath`` when
given, else ``DOCKER_HOST`` when it is a ``unix://`` URL, else the default
socket; any other ``DOCKER_HOST`` is refused), and uses the SDK's low-level
API: ``create_container`` never pulls, unlike ``containers.run``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import docker
import docker.errors
import requests

from agent_eval.engine.api import (
    BoundedOutput,
    ContainerEngine,
    ContainerSpec,
    ContainerSummary,
    ImageDetails,
    ImageIdentity,
    WaitResult,
    container_labels,
)
from agent_eval.engine.policy import (
    LABEL_BATCH,
    LABEL_LEASE,
    LABEL_ROLE,
    LABEL_RUN,
    check_network_name,
    local_socket_path,
    match_pinned_image,
)
from agent_eval.engine.run_queue import RunQueue, RunQueueMeter, ThreadClocks, ThreadTimes
from agent_eval.errors import (
    CleanupError,
    ConfigError,
    EngineUnavailableError,
    InfrastructureError,
    NotStartedError,
)
from agent_eval.models.runner_config import check_pinned_image

__all__ = ["DockerEngine", "ProcThreadClocks", "connect_local_engine"]

ANSWER_TIMEOUT_S = 8.0
"""An engine that accepts a connection must answer its first ping within this."""
_REMOVE_DELAYS_S = (0.0, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0)
_RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)
"""Back-off while the engine is unreachable (about 16 s: a restart, not an outage)."""
_UNREACHABLE_WAIT_S = 20.0
"""How long a wait keeps asking an engine that stopped answering."""
_KILL_WAIT_S = 10.0
_SETTLE_S = 30.0
"""How long an interrupted create is waited for, to remove what it made."""
_STDIN_TIMEOUT_S = 30.0
_LOG_CHUNK = 64 * 1024
_STDERR_READ_LIMIT = 64 * 1024 * 1024
"""A stream is read at most this far (its tail is kept from within it)."""


def _ping(path: str, timeout_s: float) -> None:
    """Ask the engine for ``/_ping`` over its socket, giving up after *timeout_s*.

    A socket that accepts connections but never answers (a frozen or
    half-started engine) would otherwise hold the SDK for its whole timeout.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout_s)
        probe.connect(path)
        probe.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        answer = probe.recv(64)
    if not answer.startswith(b"HTTP/"):
        raise OSError(f"not an HTTP answer: {answer[:40]!r}")


def connect_local_engine(
    runtime_path: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
    answer_timeout_s: float = ANSWER_TIMEOUT_S,
) -> DockerEngine:
    """Connect to the local Docker engine and check that it answers.

    Args:
        runtime_path: The runner config's ``runtimePath``, if any.
        environ: Environment to read ``DOCKER_HOST`` from; ``os.environ`` by default.
        timeout_s: Timeout of ordinary API calls (waits have their own).
        answer_timeout_s: How long an engine that accepts the connection may take to
            answer its first ping.

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
    # Knock first, and bounded: the SDK leaks its socket when the connection is
    # refused, and would wait its whole timeout on an engine that never answers.
    try:
        _ping(path, answer_timeout_s)
    except TimeoutError:
        raise EngineUnavailableError(
            f"the engine at {path} accepts connections but does not answer within "
            f"{answer_timeout_s:g} s; check the engine (it may be frozen or still starting)"
        ) from None
    except OSError as exc:
        raise EngineUnavailableError(f"no engine listens on {path} ({exc}); {fix}") from None
    try:
        api = docker.APIClient(
            base_url=f"unix://{path}", version="auto", timeout=max(1, int(answer_timeout_s))
        )
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        raise EngineUnavailableError(
            f"the engine at {path} does not answer ({exc}); {fix}"
        ) from None
    api.timeout = int(timeout_s)
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
    if _unreachable(exc):
        return InfrastructureError(f"{what}: the connection to the engine failed ({exc})")
    return InfrastructureError(f"{what}: {exc}")


_ENGINE_ERRORS = (docker.errors.DockerException, requests.RequestException, OSError)
# A dropped or refused connection, or an engine restarting under us: worth
# asking again. An answer with a status code is an answer and is never retried.
# A response cut off mid-body ("Response ended prematurely") is a dropped connection too.
_UNREACHABLE = (
    requests.ConnectionError,
    requests.exceptions.ChunkedEncodingError,
    ConnectionError,
    FileNotFoundError,
)
T = TypeVar("T")


class _Outages:
    """How often any engine call of this process found an engine unreachable.

    A container's outcome is judged against it: an engine that went away and came back
    (a restart kills its running containers, exit 143) while a container lived, seen by
    any call, not only that container's own wait, leaves its non-zero exit untrusted.
    Process-wide rather than per engine (an exception does not say which socket it
    came from): a process with several engines may take an outage of one for another,
    which only ever sends an outcome to the infrastructure (a try again), never to the
    agent.
    """

    _lock = threading.Lock()
    _seen = 0

    @classmethod
    def saw_one(cls) -> None:
        with cls._lock:
            cls._seen += 1

    @classmethod
    def count(cls) -> int:
        with cls._lock:
            return cls._seen


def _unreachable(exc: BaseException) -> bool:
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return False
    unreachable = isinstance(exc, _UNREACHABLE) or (
        isinstance(exc, docker.errors.DockerException)
        and not isinstance(exc, docker.errors.APIError)
        and isinstance(exc.__context__, _UNREACHABLE)
    )
    if unreachable:
        _Outages.saw_one()
    return unreachable


def _never_sent(exc: BaseException) -> bool:
    """Whether *exc* says the connection never opened, so the engine saw no request.

    Over a Unix socket only ``connect`` raises these: the socket is missing
    (the engine is restarting) or nothing listens on it. A reset or a closed
    connection may come after the engine acted, and is not in this class.
    """
    seen: list[BaseException] = [exc]
    while seen:
        current = seen.pop()
        if isinstance(current, (FileNotFoundError, ConnectionRefusedError)):
            return True
        seen += [arg for arg in current.args if isinstance(arg, BaseException)]
        seen += [link for link in (current.__cause__, current.__context__) if link is not None]
    return False


def _once(what: str, call: Callable[[], T]) -> T:
    """Run an engine call that must not run twice, asking again only when it never reached it.

    Raises:
        InfrastructureError: The engine answered with an error, the connection
            failed after the request may have been sent, or it stayed
            unreachable through every retry.
    """
    for delay in (*_RETRY_DELAYS_S, None):
        try:
            return call()
        except _ENGINE_ERRORS as exc:
            if not _never_sent(exc) or delay is None:
                detail = " (the engine stayed unreachable)" if _never_sent(exc) else ""
                raise _api_error(what + detail, exc) from None
        time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _again(what: str, call: Callable[[], T], *, delays: Sequence[float] | None = None) -> T:
    """Run an idempotent engine call, asking again while the engine is unreachable.

    "Not found" answers are the caller's to interpret and pass through as they are.

    Raises:
        docker.errors.NotFound: The engine answered that the object does not exist.
        InfrastructureError: The engine answered with another error, or stayed
            unreachable through every retry (the message says which).
    """
    for delay in (*(_RETRY_DELAYS_S if delays is None else delays), None):
        try:
            return call()
        except docker.errors.NotFound:
            raise
        except _ENGINE_ERRORS as exc:
            if not _unreachable(exc) or delay is None:
                detail = " (the engine stayed unreachable)" if _unreachable(exc) else ""
                raise _api_error(what + detail, exc) from None
        time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _gone(container_id: str, what: str) -> InfrastructureError:
    """A container removed (a stop, cleanup, another hand) while it was *what*: the
    infrastructure's, like every other engine answer, never the engine client's own error."""
    return InfrastructureError(
        f"container {container_id[:12]} is gone: it was removed while it was {what}"
    )


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


_CGROUP_ROOT = Path("/sys/fs/cgroup")
_PEAK_FILES = (
    ("memory/docker/{id}/memory.max_usage_in_bytes", 1),  # v1, cgroupfs driver
    ("memory/system.slice/docker-{id}.scope/memory.max_usage_in_bytes", 1),  # v1, systemd
    ("docker/{id}/memory.peak", 1),  # v2, cgroupfs driver
    ("system.slice/docker-{id}.scope/memory.peak", 1),  # v2, systemd
)
_CPU_FILES = (
    ("cpuacct/docker/{id}/cpuacct.usage", 1e-9),  # v1, cgroupfs driver: nanoseconds
    ("cpuacct/system.slice/docker-{id}.scope/cpuacct.usage", 1e-9),  # v1, systemd
    ("docker/{id}/cpu.stat", 1e-6),  # v2: usage_usec
    ("system.slice/docker-{id}.scope/cpu.stat", 1e-6),
)
_THREAD_FILES = (
    "cpuacct/docker/{id}/tasks",  # v1, cgroupfs driver: every thread of the container
    "cpuacct/system.slice/docker-{id}.scope/tasks",  # v1, systemd
    "docker/{id}/cgroup.threads",  # v2, cgroupfs driver
    "system.slice/docker-{id}.scope/cgroup.threads",  # v2, systemd
)
_SAMPLE_S = 0.25
_THREADS_EVERY = 4
"""Thread counters are read every fourth sample: once a second."""


def _read_counter(path: Path) -> int | None:
    """A cgroup counter: the file's number, or cpu.stat's ``usage_usec``."""
    try:
        text = path.read_text(encoding="ascii")
    except OSError:
        return None
    if path.name == "cpu.stat":
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                text = value
                break
        else:
            return None
    try:
        return int(text.strip())
    except ValueError:
        return None


class _CgroupCounter:
    """One of a container's cgroup counters, found once among the places an engine keeps it.

    Its highest reading so far, in the counter's unit times *scale*; None until read.
    """

    def __init__(self, container_id: str, places: tuple[tuple[str, float], ...]) -> None:
        self._places = [(_CGROUP_ROOT / pattern.format(id=container_id), scale)
                        for pattern, scale in places]  # fmt: skip
        self.value: float | None = None

    def read(self) -> None:
        for path, scale in self._places:
            if (raw := _read_counter(path)) is not None:
                self._places = [(path, scale)]  # found: only this one from now on
                self.value = max(self.value or 0, raw * scale)
                return


_SIGKILLED = 128 + 9
"""A container's exit status when SIGKILL ended its first process."""
_PAGE_SLACK = 1 << 20
"""How far below the limit a sampled peak may be at an OOM kill (charges move by pages)."""


class _UsageWatch:
    """Samples a running container's peak memory and CPU time from its cgroup, and its
    threads' scheduler counters.

    The cgroup is gone once the container exits, so both are as last sampled:
    lower bounds that miss only what the container used after the last
    sample. An engine whose cgroups are elsewhere (rootless, another parent)
    gives None, never a guess. The thread counters are read every
    :data:`_THREADS_EVERY` samples (a runner may have hundreds of threads) and
    once more when the wait ends, before a container past its deadline is killed.
    """

    def __init__(self, container_id: str, clocks: ThreadClocks) -> None:
        self._id = container_id
        self._memory = _CgroupCounter(container_id, _PEAK_FILES)
        self._cpu = _CgroupCounter(container_id, _CPU_FILES)
        self._clocks = clocks
        self._meter = RunQueueMeter(time.monotonic())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="usage")

    @property
    def peak(self) -> int | None:
        return None if self._memory.value is None else int(self._memory.value)

    @property
    def cpu_s(self) -> float | None:
        return self._cpu.value

    @property
    def run_queue(self) -> RunQueue | None:
        return self._meter.figures()

    def __enter__(self) -> _UsageWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if not self._thread.is_alive():
            self._read_threads()

    def _read_threads(self) -> None:
        self._meter.add(time.monotonic(), self._clocks.read(self._id))

    def _sample(self) -> None:
        tick = 0
        while True:
            self._memory.read()
            self._cpu.read()
            if tick % _THREADS_EVERY == 0:
                self._read_threads()
            tick += 1
            if self._stop.wait(_SAMPLE_S):
                return


class ProcThreadClocks:
    """A local engine's container threads: the thread list of the container's cgroup,
    and each thread's ``/proc/<tid>/schedstat``.

    The cgroup lists thread ids as this process's pid namespace sees them: a harness
    that does not see the engine's processes (another pid namespace, a remote engine)
    reads none, and a container whose threads are listed but none readable is not
    measured (None), never taken for one that was idle.
    """

    def __init__(self, cgroup_root: Path = _CGROUP_ROOT, proc_root: Path = Path("/proc")) -> None:
        self._cgroups = cgroup_root
        self._proc = proc_root

    def read(self, container_id: str) -> dict[int, ThreadTimes] | None:
        """See :meth:`ThreadClocks.read`."""
        for pattern in _THREAD_FILES:
            try:
                listed = (self._cgroups / pattern.format(id=container_id)).read_text("ascii")
                tids = [int(tid) for tid in listed.split()]
                break
            except (OSError, ValueError):
                continue
        else:
            return None
        threads: dict[int, ThreadTimes] = {}
        for tid in tids:
            try:
                fields = (self._proc / str(tid) / "schedstat").read_text("ascii").split()
                threads[tid] = ThreadTimes(int(fields[0]), int(fields[1]))
            except (OSError, ValueError, IndexError):
                continue  # it ended since the list was read
        return None if tids and not threads else threads


class DockerEngine(ContainerEngine):
    """:class:`ContainerEngine` over the Docker SDK's low-level API on a local socket."""

    def __init__(
        self,
        api: docker.APIClient,
        *,
        socket_path: str,
        clocks: ThreadClocks | None = None,
    ) -> None:
        """Use *api*, an already connected client of the engine at *socket_path*; its
        containers' thread counters are read with *clocks* (``/proc`` unless given)."""
        self._api = api
        self._clocks: ThreadClocks = clocks or ProcThreadClocks()
        self.socket_path = socket_path
        self.address = socket_path
        # Per container made here: the outage count before it was asked for.
        self._outages_at_create: dict[str, int] = {}

    def close(self) -> None:
        """Close the client's connections."""
        self._api.close()

    def unreachable(self) -> str | None:
        """See :meth:`ContainerEngine.unreachable`."""
        try:
            _ping(self.socket_path, ANSWER_TIMEOUT_S)
        except TimeoutError:
            return f"the engine at {self.socket_path} does not answer within {ANSWER_TIMEOUT_S:g} s"
        except OSError as exc:
            return f"the engine at {self.socket_path} does not answer ({exc})"
        return None

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
            info = _again(f"inspecting image {reference}", lambda: self._inspect_image(reference))
        except docker.errors.ImageNotFound:
            self._refuse_other_digests(reference)
            raise InfrastructureError(
                f"image {reference} is not present in the local engine, and nothing is ever "
                "pulled; build it with `agent-eval images build` (or load it) and pin what "
                "that prints"
            ) from None
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
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"configuring the {spec.role} container", exc) from None
        # A unique name makes creation checkable: when the connection drops after
        # the request was sent, asking again either creates it or answers 409 for
        # the one the engine did create, which is then looked up by that name.
        name = f"agent-eval-{uuid.uuid4().hex}"
        what = f"creating the {spec.role} container of run {spec.run_id}"

        def create() -> str:
            try:
                return str(
                    self._api.create_container(
                        image.image_id,
                        command=list(spec.command),
                        user=hardening.user,
                        environment=dict(spec.environment),
                        working_dir=spec.working_dir,
                        labels=container_labels(spec, self.lease_token),
                        stdin_open=spec.stdin,
                        host_config=host_config,
                        name=name,
                    )["Id"]
                )
            except docker.errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                found = self._api.inspect_container(name)
                labels = found["Config"].get("Labels") or {}
                if any(labels.get(key) != value for key, value in spec.labels.items()):
                    raise  # a container of that name that is not this one: never taken
                return str(found["Id"])

        outages = _Outages.count()
        container_id = self._settled(lambda: _again(what, create))
        self._outages_at_create[container_id] = outages
        return container_id

    def _settled(self, create: Callable[[], str]) -> str:
        """Run *create* in a thread of its own, so that nothing it makes is left unknown.

        A signal (the batch's Stop, KeyboardInterrupt) raised in the caller
        while the request is in flight would otherwise leave a container the
        engine makes after the batch's cleanup has looked. Here the caller
        waits for the answer (bounded), removes what it made, and re-raises.
        """
        outcome: list[str | BaseException] = []
        finished = threading.Event()

        def work() -> None:
            try:
                outcome.append(create())
            except BaseException as exc:  # handed to the caller as it is
                outcome.append(exc)
            finally:
                finished.set()

        threading.Thread(target=work, daemon=True, name="create").start()
        try:
            while not finished.wait(0.05):
                pass
        except BaseException:
            if finished.wait(_SETTLE_S) and outcome and isinstance(outcome[0], str):
                with contextlib.suppress(Exception):
                    self.remove(outcome[0])
            raise
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def start(self, container_id: str, stdin: bytes | None = None) -> None:
        """See :meth:`ContainerEngine.start`.

        Raises :class:`NotStartedError` when the container certainly did not run
        with its input: the attachment or the start never took effect, or the
        connection carrying its stdin broke while it was still waiting for it.
        """
        attached: Any = None
        what = f"starting container {container_id[:12]}"
        try:
            if stdin is not None:
                # Attach before start so that no byte is lost; StdinOnce closes
                # the container's stdin when this attachment ends.
                try:
                    attached = _once(
                        what,
                        lambda: self._api.attach_socket(
                            container_id, params={"stdin": 1, "stream": 1}
                        ),
                    )
                except InfrastructureError as exc:
                    raise NotStartedError(str(exc)) from None
            self._start(container_id, what)
        except InfrastructureError:
            _close_attached(attached)
            raise
        if attached is None or stdin is None:
            return
        raw = cast(socket.socket, attached._sock)
        try:
            raw.settimeout(_STDIN_TIMEOUT_S)
            raw.sendall(stdin)
            raw.shutdown(socket.SHUT_WR)
        except OSError as exc:
            # A container that exited without reading is its own outcome; one still
            # waiting lost its stdin with the connection (over a Unix socket a write
            # to a closed peer fails at once, so this is seen).
            if self._still_running(container_id):
                raise NotStartedError(
                    f"{what}: its stdin did not reach it, the connection to the engine "
                    f"broke ({exc})"
                ) from None
        finally:
            _close_attached(attached)

    def _start(self, container_id: str, what: str) -> None:
        try:
            self._api.start(container_id)
            return
        except _ENGINE_ERRORS as exc:
            if not _unreachable(exc):
                raise _api_error(what, exc) from None
            never_sent = _never_sent(exc)
        # The answer was lost, or the request never arrived: start it unless it started.
        try:
            _again(what, lambda: self._start_once(container_id))
        except docker.errors.NotFound:
            raise _gone(container_id, "started") from None
        except InfrastructureError as exc:
            if never_sent and "stayed unreachable" in str(exc):
                raise NotStartedError(str(exc)) from None
            raise

    def _memory_limit(self, container_id: str) -> int | None:
        """The container's memory limit in bytes; None when it has none."""
        limit = _again(
            f"inspecting container {container_id[:12]}",
            lambda: self._api.inspect_container(container_id)["HostConfig"].get("Memory"),
        )
        return int(limit) if isinstance(limit, int) and limit > 0 else None

    def _state(self, container_id: str) -> dict[str, Any]:
        """The container's ``State``, asked again while the engine is unreachable."""
        return cast(
            dict[str, Any],
            _again(
                f"inspecting container {container_id[:12]}",
                lambda: self._api.inspect_container(container_id)["State"],
            ),
        )

    def _still_running(self, container_id: str) -> bool:
        try:
            return bool(self._state(container_id).get("Running"))
        except (docker.errors.NotFound, InfrastructureError):
            return False

    def _start_once(self, container_id: str) -> None:
        """Start a container unless it already started (a start whose answer was lost)."""
        state = self._api.inspect_container(container_id)["State"]
        if state.get("Running") or not str(state.get("StartedAt", "")).startswith("0001-"):
            return
        self._api.start(container_id)

    def _wait_until(self, container_id: str, deadline: float) -> tuple[bool, bool]:
        """Wait for the container to exit by *deadline* (monotonic).

        Returns whether it exited in time, and whether the engine was
        unreachable at some point meanwhile. The deadline is the harness's own
        clock: a read timeout before it, or a dropped connection, is waited
        again, never taken for the container's timeout; an engine unreachable
        for longer than a restart is an error.
        """
        unreachable_since: float | None = None
        lost = False
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False, lost
            try:
                cast(Any, self._api).wait(container_id, timeout=max(remaining, 0.001))
                return True, lost
            except requests.exceptions.ReadTimeout:
                unreachable_since = None
                continue
            except _ENGINE_ERRORS as exc:
                if not _unreachable(exc):
                    raise _api_error(f"waiting for container {container_id[:12]}", exc) from None
                now = time.monotonic()
                lost = True
                unreachable_since = unreachable_since or now
                if now - unreachable_since > _UNREACHABLE_WAIT_S:
                    raise _api_error(
                        f"waiting for container {container_id[:12]}: the engine stayed "
                        f"unreachable for {_UNREACHABLE_WAIT_S:g} s",
                        exc,
                    ) from None
                time.sleep(min(1.0, max(0.0, deadline - now)))

    def wait(self, container_id: str, timeout_s: float) -> WaitResult:
        """See :meth:`ContainerEngine.wait`."""
        try:
            return self._wait(container_id, timeout_s)
        except docker.errors.NotFound:
            raise _gone(container_id, "waited for") from None

    def _wait(self, container_id: str, timeout_s: float) -> WaitResult:
        short = container_id[:12]
        with _UsageWatch(container_id, self._clocks) as usage:
            exited, lost = self._wait_until(container_id, time.monotonic() + timeout_s)
        created_at = self._outages_at_create.pop(container_id, None)
        # An outage any call saw while the container lived counts as this wait's own.
        lost = lost or (created_at is not None and _Outages.count() != created_at)
        timed_out = not exited
        if timed_out:
            try:
                _again(f"killing container {short}", lambda: self._api.kill(container_id))
            except InfrastructureError as exc:
                if "409" not in str(exc):  # 409: it exited in the meantime
                    raise
            if not self._wait_until(container_id, time.monotonic() + _KILL_WAIT_S)[0]:
                raise InfrastructureError(f"container {short} survived its kill")
        state = self._state(container_id)
        if state.get("Error"):
            raise InfrastructureError(
                f"the engine reported an error for container {short}: {state['Error']}"
            )
        if lost and not timed_out and int(state["ExitCode"]) != 0:
            # A container that ended badly while the engine could not be reached
            # may have been stopped by the engine itself (a restart); one still
            # running at the deadline was not, so its timeout stands.
            raise InfrastructureError(
                f"the engine was unreachable while container {short} ran and it ended with "
                f"exit status {state['ExitCode']}; its outcome is not trusted"
            )
        exit_code = int(state["ExitCode"])
        oom_killed = bool(state.get("OOMKilled"))
        if not oom_killed and not timed_out and exit_code == _SIGKILLED and usage.peak is not None:
            # The engine learns of an OOM kill from an event that can come after the exit
            # it caused (cgroup v1): a container no one here killed, ended by SIGKILL with
            # its memory at the limit, was killed for memory.
            limit = self._memory_limit(container_id)
            oom_killed = limit is not None and usage.peak >= limit - _PAGE_SLACK
        return WaitResult(
            exit_code=exit_code,
            timed_out=timed_out,
            oom_killed=oom_killed,
            peak_memory_bytes=usage.peak,
            cpu_seconds=usage.cpu_s,
            engine_lost=lost,
            run_queue=usage.run_queue,
        )

    def _bounded_stream(self, container_id: str, limit: int, *, stdout: bool) -> tuple[bytes, bool]:
        chunks: Iterator[bytes] = self._api.logs(
            container_id, stdout=stdout, stderr=not stdout, stream=True, follow=False
        )
        kept = bytearray()
        truncated = False
        read = 0
        try:
            for chunk in chunks:
                kept += chunk
                read += len(chunk)
                if len(kept) > limit:
                    truncated = True
                    if stdout:
                        break  # the protocol object is at the start; the rest is refused
                    del kept[: len(kept) - limit]  # stderr: its end says how it ended
                if read > _STDERR_READ_LIMIT:
                    break
        finally:
            _close_stream(chunks)
        return bytes(kept[:limit]), truncated

    def logs(self, container_id: str, limit_bytes: int) -> BoundedOutput:
        """See :meth:`ContainerEngine.logs`."""
        what = f"reading the logs of container {container_id[:12]}"
        try:
            out, out_cut = _again(
                what, lambda: self._bounded_stream(container_id, limit_bytes, stdout=True)
            )
            err, err_cut = _again(
                what, lambda: self._bounded_stream(container_id, limit_bytes, stdout=False)
            )
        except docker.errors.NotFound as exc:
            raise _api_error(what, exc) from None
        return BoundedOutput(out, err, out_cut, err_cut)

    def remove(self, container_id: str) -> None:
        """See :meth:`ContainerEngine.remove`."""
        self._outages_at_create.pop(container_id, None)
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

    def create_network(self, name: str, labels: Mapping[str, str]) -> None:
        """See :meth:`ContainerEngine.create_network`."""
        check_network_name(name)
        try:
            self._api.create_network(name, driver="bridge", internal=True, labels=dict(labels))
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"creating network {name}", exc) from None

    def remove_network(self, name: str) -> None:
        """See :meth:`ContainerEngine.remove_network`."""
        try:
            self._api.remove_network(name)
        except docker.errors.NotFound:
            return
        except _ENGINE_ERRORS as exc:
            raise CleanupError(
                f"network {name} was not removed ({exc}); remove it (docker network rm {name})"
            ) from None

    def address_on(self, container_id: str, network: str) -> str:
        """See :meth:`ContainerEngine.address_on`."""
        try:
            info = _again(
                f"inspecting container {container_id}",
                lambda: self._api.inspect_container(container_id),
            )
        except docker.errors.NotFound:
            raise InfrastructureError(f"container {container_id} is gone") from None
        networks = (info.get("NetworkSettings") or {}).get("Networks") or {}
        address = str((networks.get(network) or {}).get("IPAddress") or "")
        if not address:
            raise InfrastructureError(f"container {container_id} has no address on {network}")
        return address

    def list_containers(self, batch_id: str | None = None) -> list[ContainerSummary]:
        """See :meth:`ContainerEngine.list_containers`."""
        label = LABEL_BATCH if batch_id is None else f"{LABEL_BATCH}={batch_id}"
        found = _again(
            "listing agent-eval containers",
            lambda: self._api.containers(all=True, filters={"label": [label]}),
        )
        return [
            ContainerSummary(
                container_id=str(item["Id"]),
                batch_id=str(item["Labels"].get(LABEL_BATCH, "")),
                run_id=str(item["Labels"].get(LABEL_RUN, "")),
                role=str(item["Labels"].get(LABEL_ROLE, "")),
                state=str(item.get("State", "")),
                lease_token=str(item["Labels"].get(LABEL_LEASE, "")),
            )
            for item in found
        ]

    def image_id(self, reference: str) -> str | None:
        """See :meth:`ContainerEngine.image_id`."""
        try:
            info = _again(f"inspecting image {reference}", lambda: self._inspect_image(reference))
        except docker.errors.ImageNotFound:
            return None
        return str(info["Id"])

    def inspect_image(self, reference: str) -> ImageDetails | None:
        """See :meth:`ContainerEngine.inspect_image`."""
        try:
            info = self._inspect_image(reference)
        except docker.errors.ImageNotFound:
            return None
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"inspecting image {reference}", exc) from None
        return ImageDetails(
            image_id=str(info["Id"]),
            repo_tags=tuple(str(t) for t in info.get("RepoTags") or ()),
            labels={
                str(k): str(v) for k, v in ((info.get("Config") or {}).get("Labels") or {}).items()
            },
            diff_ids=tuple(str(d) for d in (info.get("RootFS") or {}).get("Layers") or ()),
            architecture=str(info.get("Architecture") or ""),
        )

    def load_image(self, archive: Path) -> None:
        """See :meth:`ContainerEngine.load_image`."""
        try:
            with open(archive, "rb") as handle:
                for item in cast(Any, self._api).load_image(handle):
                    if "error" in item:
                        raise InfrastructureError(f"loading {archive.name}: {item['error']}")
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"loading {archive.name}", exc) from None

    def save_image(self, image_id: str, destination: Path) -> None:
        """See :meth:`ContainerEngine.save_image`."""
        try:
            chunks = self._api.get_image(image_id, chunk_size=_LOG_CHUNK)
            with open(destination, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
        except docker.errors.ImageNotFound:
            raise InfrastructureError(f"saving image {image_id}: it is not present") from None
        except _ENGINE_ERRORS as exc:
            raise _api_error(f"saving image {image_id}", exc) from None

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
