"""In-memory engines for unit tests: each half of the interface, and both.

:class:`FakeRuntime` runs containers (for a caller typed with
:class:`~agent_eval.engine.ContainerRuntime`), :class:`FakeImageStore` holds
images (for one typed with :class:`~agent_eval.engine.ImageStore`), and
:class:`FakeEngine` is both over one store, for a caller that needs the whole
:class:`~agent_eval.engine.ContainerEngine`.

It applies the same checks as the real engine where they are pure (pinned
references, hardening, mounts, labels) and lets a test script each
container's outcome: exit code, stdout, stderr, a timeout, an OOM kill, a
failed start, files left in the container, and a removal that cannot be
confirmed. It records what a test may want to assert: the create arguments
(hardening included), stdin, kills, removals, and that nothing was pulled.

Nothing here touches a real engine; ``pulls`` exists only so that tests can
assert it stays empty.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from agent_eval.engine import (
    LABEL_BATCH,
    LABEL_LEASE,
    LABEL_ROLE,
    LABEL_RUN,
    BoundedOutput,
    ContainerEngine,
    ContainerRuntime,
    ContainerSpec,
    ContainerSummary,
    ImageDetails,
    ImageIdentity,
    ImageStore,
    WaitResult,
    container_labels,
    match_pinned_image,
)
from agent_eval.engine.run_queue import RunQueue, ThreadTimes
from agent_eval.errors import CleanupError, ConfigError, InfrastructureError
from agent_eval.models.runner_config import check_pinned_image

__all__ = ["FakeEngine", "FakeImageStore", "FakeRuntime", "FakeThreadClocks", "Outcome"]


@dataclass(frozen=True)
class Outcome:
    """What a fake container does when it runs."""

    exit_code: int = 0
    """Exit status when it ends by itself."""
    stdout: bytes = b""
    """Everything it writes to stdout."""
    stderr: bytes = b""
    """Everything it writes to stderr."""
    timeout: bool = False
    """It never ends by itself: wait() kills it at the deadline (exit 137)."""
    oom_killed: bool = False
    """The engine reports an OOM kill."""
    peak_memory_bytes: int | None = None
    """The peak memory wait() reports (None: not measured)."""
    cpu_seconds: float | None = None
    """The CPU time wait() reports (None: not measured)."""
    engine_lost: bool = False
    """wait() reports that the engine was unreachable while it ran."""
    run_queue: RunQueue | None = None
    """How long its threads ran and waited for a CPU, as wait() reports it (None: not
    measured, as on an engine whose threads cannot be read)."""
    start_error: str | None = None
    """start() fails with this engine message (the CLI's exit 125)."""
    cleanup_fails: bool = False
    """Its removal is never confirmed."""
    files: Mapping[str, bytes] = field(default_factory=dict)
    """Files the process writes, by absolute path in the container: start() writes
    each into the host directory of the writable bind mount that holds it."""
    on_start: Callable[[ContainerSpec, bytes | None], bytes | None] | None = None
    """Called with the spec and stdin when the container starts: a test's stand-in for
    what the process would write into its writable mounts (the spec names their host
    paths); bytes it returns replace ``stdout``."""
    start_raises: BaseException | None = None
    """start() raises this (a KeyboardInterrupt, say) instead of starting."""


class FakeThreadClocks:
    """Thread counters from a script: each read of a container answers its next reading
    (the last one again once the script is spent; None: unreadable)."""

    def __init__(self, readings: Mapping[str, list[Mapping[int, ThreadTimes] | None]]) -> None:
        self._readings = {cid: list(script) for cid, script in readings.items()}
        self.reads: dict[str, int] = {}

    def read(self, container_id: str) -> Mapping[int, ThreadTimes] | None:
        """See :meth:`agent_eval.engine.run_queue.ThreadClocks.read`."""
        self.reads[container_id] = self.reads.get(container_id, 0) + 1
        script = self._readings.get(container_id) or [None]
        return script.pop(0) if len(script) > 1 else script[0]


@dataclass
class FakeImage:
    """An image the fake engine holds."""

    image_id: str
    repo_tags: list[str] = field(default_factory=list)
    repo_digests: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    diff_ids: list[str] = field(default_factory=list)
    config: bytes = b""
    """The config JSON of a loaded image (its id is this digest)."""
    architecture: str = "amd64"


@dataclass
class FakeContainer:
    """A container the fake engine made, with everything recorded about it."""

    container_id: str
    spec: ContainerSpec
    image_id: str
    user: str
    host_config: dict[str, Any]
    labels: dict[str, str]
    outcome: Outcome
    state: str = "created"
    stdin: bytes | None = None
    stdout: bytes | None = None
    """What it printed, when its outcome computed that at start (else the outcome's)."""
    killed: bool = False
    removed: bool = False


class FakeImageStore(ImageStore):
    """In-memory images: present, loaded, built, imported or pushed by a test."""

    def __init__(self) -> None:
        """Start with no image."""
        self.images: dict[str, FakeImage] = {}
        self.pulls: list[str] = []
        self.builds: list[tuple[Path, str, dict[str, str]]] = []
        self.pushes: list[str] = []
        self.loads: list[str] = []
        """Ids of the images loaded, in order."""
        self.layers: dict[str, bytes] = {}
        """Every layer held, by diff_id."""

    def add_image(
        self,
        *,
        tags: tuple[str, ...] = (),
        repo_digests: tuple[str, ...] = (),
        image_id: str | None = None,
    ) -> str:
        """Make an image present; returns its id (derived from the tags when not given)."""
        if image_id is None:
            seed = "|".join((*tags, *repo_digests, str(len(self.images))))
            image_id = "sha256:" + hashlib.sha256(seed.encode()).hexdigest()
        self.images[image_id] = FakeImage(image_id, list(tags), list(repo_digests))
        return image_id

    def _find_image(self, reference: str) -> FakeImage | None:
        if reference in self.images:
            return self.images[reference]
        for image in self.images.values():
            if reference in image.repo_tags or reference in image.repo_digests:
                return image
        return None

    def resolve_image(self, reference: str) -> ImageIdentity:
        """See :meth:`ImageStore.resolve_image`."""
        try:
            check_pinned_image(reference)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        image = self._find_image(reference)
        if image is None and not reference.startswith("sha256:"):
            # As the real engine: name the digests a local image of that repository carries.
            repository = reference.partition("@")[0]
            for other in self.images.values():
                if any(tag.rpartition(":")[0] == repository for tag in other.repo_tags):
                    match_pinned_image(reference, other.image_id, other.repo_digests)
        if image is None:
            raise InfrastructureError(
                f"image {reference} is not present in the local engine, and nothing is ever "
                "pulled; build it with `agent-eval images build` (or load it) and pin what "
                "that prints"
            )
        match_pinned_image(reference, image.image_id, image.repo_digests)
        return ImageIdentity(reference, image.image_id, tuple(image.repo_digests))

    def image_id(self, reference: str) -> str | None:
        """See :meth:`ImageStore.image_id`."""
        image = self._find_image(reference)
        return None if image is None else image.image_id

    def inspect_image(self, reference: str) -> ImageDetails | None:
        """See :meth:`ImageStore.inspect_image`."""
        image = self._find_image(reference)
        if image is None:
            return None
        return ImageDetails(
            image.image_id,
            tuple(image.repo_tags),
            dict(image.labels),
            tuple(image.diff_ids),
            image.architecture,
        )

    def load_image(self, archive: Path) -> None:
        """See :meth:`ImageStore.load_image`: as ``docker load``, layers held are reused."""
        try:
            with tarfile.open(archive, "r:") as tar:
                members = {m.name: m for m in tar.getmembers()}

                def read(name: str) -> bytes:
                    handle = tar.extractfile(members[name])
                    assert handle is not None
                    return handle.read()

                (entry,) = json.loads(read("manifest.json"))
                raw = read(entry["Config"])
                config = json.loads(raw)
                diff_ids = list(config["rootfs"]["diff_ids"])
                if len(diff_ids) != len(entry["Layers"]):
                    raise InfrastructureError(f"loading {archive.name}: layers length mismatch")
                for diff_id, name in zip(diff_ids, entry["Layers"], strict=True):
                    if diff_id in self.layers:
                        continue
                    if name not in members:
                        raise InfrastructureError(f"loading {archive.name}: no layer {name}")
                    data = read(name)
                    if "sha256:" + hashlib.sha256(data).hexdigest() != diff_id:
                        raise InfrastructureError(f"loading {archive.name}: invalid diffID {name}")
                    self.layers[diff_id] = data
        except (OSError, KeyError, ValueError, tarfile.TarError) as exc:
            raise InfrastructureError(f"loading {archive.name}: {exc}") from None
        image_id = "sha256:" + hashlib.sha256(raw).hexdigest()
        image = self.images.setdefault(image_id, FakeImage(image_id))
        image.config, image.diff_ids = raw, diff_ids
        image.architecture = str(config.get("architecture", ""))
        image.labels = dict(config.get("config", {}).get("Labels") or {})
        for tag in entry.get("RepoTags") or []:
            self._untag(tag)
            image.repo_tags.append(tag)
        self.loads.append(image_id)

    def save_image(self, image_id: str, destination: Path) -> None:
        """See :meth:`ImageStore.save_image`: the loaded config and its held layers."""
        image = self.images.get(image_id)
        if image is None or not image.config:
            raise InfrastructureError(f"saving image {image_id}: it is not present")
        with tarfile.open(destination, "w") as tar:

            def add(name: str, data: bytes) -> None:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

            layers = [f"{d.removeprefix('sha256:')}/layer.tar" for d in image.diff_ids]
            for diff_id, name in zip(image.diff_ids, layers, strict=True):
                add(name, self.layers[diff_id])
            config = f"{image_id.removeprefix('sha256:')}.json"
            add(config, image.config)
            add("manifest.json", json.dumps([{"Config": config, "Layers": layers}]).encode())

    def build_image(
        self,
        context_dir: Path,
        *,
        tag: str,
        buildargs: Mapping[str, str],
        labels: Mapping[str, str],
    ) -> str:
        """See :meth:`ImageStore.build_image`: the id hashes the context and arguments."""
        if not (context_dir / "Dockerfile").is_file():
            raise InfrastructureError(f"building {tag}: no Dockerfile in {context_dir}")
        digest = hashlib.sha256()
        for path in sorted(p for p in context_dir.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(context_dir)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
        digest.update(repr(sorted(buildargs.items())).encode())
        image_id = "sha256:" + digest.hexdigest()
        self._untag(tag)
        image = self.images.setdefault(image_id, FakeImage(image_id))
        image.repo_tags.append(tag)
        image.labels.update(labels)
        self.builds.append((context_dir, tag, dict(buildargs)))
        return image_id

    def _untag(self, tag: str) -> None:
        for image in self.images.values():
            if tag in image.repo_tags:
                image.repo_tags.remove(tag)

    def import_image(self, stream: IO[bytes], *, repository: str, tag: str) -> str:
        """See :meth:`ImageStore.import_image`."""
        image_id = "sha256:" + hashlib.sha256(stream.read()).hexdigest()
        self._untag(f"{repository}:{tag}")
        self.images.setdefault(image_id, FakeImage(image_id)).repo_tags.append(
            f"{repository}:{tag}"
        )
        return image_id

    def push_image(self, image_id: str, *, repository: str, tag: str) -> str:
        """See :meth:`ImageStore.push_image`: the manifest digest hashes the image id."""
        image = self.images.get(image_id)
        if image is None:
            raise InfrastructureError(f"pushing {repository}:{tag}: no image {image_id}")
        digest = hashlib.sha256(f"manifest:{image_id}".encode()).hexdigest()
        reference = f"{repository}@sha256:{digest}"
        image.repo_tags.append(f"{repository}:{tag}")
        if reference not in image.repo_digests:
            image.repo_digests.append(reference)
        self.pushes.append(reference)
        return reference


def _write_into_mounts(spec: ContainerSpec, files: Mapping[str, bytes]) -> None:
    writable = [mount for mount in spec.mounts if not mount.read_only]
    for path, data in files.items():
        mount = next((m for m in writable if path.startswith(m.target.rstrip("/") + "/")), None)
        if mount is None:
            raise AssertionError(f"scripted file {path} is in no writable mount of the spec")
        target = mount.source / path[len(mount.target.rstrip("/")) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


class FakeRuntime(ContainerRuntime):
    """In-memory containers with scripted outcomes, created from the images of *store*."""

    def __init__(
        self, *, default_outcome: Outcome | None = None, store: FakeImageStore | None = None
    ) -> None:
        """Start empty; containers get *default_outcome* unless one is scripted."""
        self.store = FakeImageStore() if store is None else store
        """Where the images containers are created from are held."""
        self.gone: str | None = None
        """Set by a test: the engine no longer answers, for this reason."""
        self.containers: dict[str, FakeContainer] = {}
        self.networks: dict[str, dict[str, str]] = {}
        """Networks made, with their labels."""
        self.default_outcome = default_outcome or Outcome()
        self.address = "fake"
        self._scripted: deque[Outcome] = deque()
        self._counter = 0

    def unreachable(self) -> str | None:
        """See :meth:`ContainerRuntime.unreachable`: the test's :attr:`gone`."""
        return self.gone

    def script(self, *outcomes: Outcome) -> None:
        """Queue outcomes for the next containers created, in order."""
        self._scripted.extend(outcomes)

    def leave_container(self, spec: ContainerSpec, state: str = "running") -> str:
        """Make a container as an interrupted batch would have left it."""
        container_id = self.create(spec)
        self.containers[container_id].state = state
        return container_id

    def create(self, spec: ContainerSpec) -> str:
        """See :meth:`ContainerRuntime.create`."""
        hardening = spec.hardening
        host_config = hardening.host_config_kwargs(spec.mounts)
        image = self.store.resolve_image(spec.image)
        self._counter += 1
        container_id = hashlib.sha256(f"fake-container-{self._counter}".encode()).hexdigest()
        outcome = self._scripted.popleft() if self._scripted else self.default_outcome
        self.containers[container_id] = FakeContainer(
            container_id=container_id,
            spec=spec,
            image_id=image.image_id,
            user=hardening.user,
            host_config=host_config,
            labels=container_labels(spec, self.lease_token),
            outcome=outcome,
        )
        return container_id

    def _get(self, container_id: str) -> FakeContainer:
        container = self.containers.get(container_id)
        if container is None or container.removed:
            raise InfrastructureError(f"no such container: {container_id[:12]}")
        return container

    def start(self, container_id: str, stdin: bytes | None = None) -> None:
        """See :meth:`ContainerRuntime.start`."""
        container = self._get(container_id)
        if container.outcome.start_error is not None:
            raise InfrastructureError(
                f"starting container {container_id[:12]}: the engine answered 500: "
                f"{container.outcome.start_error}"
            )
        if container.outcome.start_raises is not None:
            raise container.outcome.start_raises
        container.stdin = stdin
        container.state = "running"
        _write_into_mounts(container.spec, container.outcome.files)
        if container.outcome.on_start is not None:
            printed = container.outcome.on_start(container.spec, stdin)
            if printed is not None:
                container.stdout = printed

    def wait(self, container_id: str, timeout_s: float) -> WaitResult:
        """See :meth:`ContainerRuntime.wait`."""
        container = self._get(container_id)
        container.state = "exited"
        if container.outcome.timeout:
            container.killed = True
            return WaitResult(
                exit_code=137,
                timed_out=True,
                oom_killed=False,
                cpu_seconds=container.outcome.cpu_seconds,
                run_queue=container.outcome.run_queue,
            )
        return WaitResult(
            exit_code=container.outcome.exit_code,
            timed_out=False,
            oom_killed=container.outcome.oom_killed,
            peak_memory_bytes=container.outcome.peak_memory_bytes,
            cpu_seconds=container.outcome.cpu_seconds,
            engine_lost=container.outcome.engine_lost,
            run_queue=container.outcome.run_queue,
        )

    def logs(self, container_id: str, limit_bytes: int) -> BoundedOutput:
        """See :meth:`ContainerRuntime.logs`."""
        container = self._get(container_id)
        outcome = container.outcome
        stdout = outcome.stdout if container.stdout is None else container.stdout
        return BoundedOutput(
            stdout=stdout[:limit_bytes],
            stderr=outcome.stderr[-limit_bytes:] if limit_bytes else b"",
            stdout_truncated=len(stdout) > limit_bytes,
            stderr_truncated=len(outcome.stderr) > limit_bytes,
        )

    def remove(self, container_id: str) -> None:
        """See :meth:`ContainerRuntime.remove`."""
        container = self.containers.get(container_id)
        if container is None or container.removed:
            return
        if container.outcome.cleanup_fails:
            raise CleanupError(
                f"removal of container {container_id} was not confirmed (scripted failure)"
            )
        container.removed = True

    def create_network(self, name: str, labels: Mapping[str, str]) -> None:
        """See :meth:`ContainerRuntime.create_network`."""
        if name in self.networks:
            raise InfrastructureError(f"network {name} exists")
        self.networks[name] = dict(labels)

    def remove_network(self, name: str) -> None:
        """See :meth:`ContainerRuntime.remove_network`."""
        self.networks.pop(name, None)

    def address_on(self, container_id: str, network: str) -> str:
        """See :meth:`ContainerRuntime.address_on`."""
        container = self.containers.get(container_id)
        if container is None or container.removed or network not in self.networks:
            raise InfrastructureError(f"container {container_id} has no address on {network}")
        return f"10.99.0.{2 + list(self.containers).index(container_id) % 250}"

    def list_containers(self, batch_id: str | None = None) -> list[ContainerSummary]:
        """See :meth:`ContainerRuntime.list_containers`."""
        return [
            ContainerSummary(
                container_id=c.container_id,
                batch_id=c.labels[LABEL_BATCH],
                run_id=c.labels[LABEL_RUN],
                role=c.labels[LABEL_ROLE],
                state=c.state,
                lease_token=c.labels.get(LABEL_LEASE, ""),
            )
            for c in self.containers.values()
            if not c.removed and (batch_id is None or c.labels[LABEL_BATCH] == batch_id)
        ]


class FakeEngine(FakeRuntime, FakeImageStore, ContainerEngine):
    """Both halves over one store, as a connection to a real engine is."""

    def __init__(self, *, default_outcome: Outcome | None = None) -> None:
        """Start empty; containers get *default_outcome* unless one is scripted."""
        FakeImageStore.__init__(self)
        FakeRuntime.__init__(self, default_outcome=default_outcome, store=self)
        self.closed = False
        """Whether its owner closed it (what is given an engine never does)."""

    def close(self) -> None:
        """See :meth:`ContainerEngine.close`."""
        self.closed = True
