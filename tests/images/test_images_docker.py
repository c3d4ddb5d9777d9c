"""Images built and pushed against a real engine.

Invariants: ``agent-eval images build`` prints the ids of this checkout's
images, found again by their recipe digests, each labelled with its name and
carrying no setuid or setgid file; a push to a
loopback registry yields a ``name@sha256:`` reference read back from
RepoDigests that the engine resolves, and goes on resolving (and
creating containers from) with the registry stopped; another digest of the
same repository is refused as a mismatch.

The registry is Debian's ``docker-registry``, started here on a free
127.0.0.1 port with its storage in a temporary directory; the image pushed is
a tiny one made FROM scratch, so that a push takes well under a second.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.cli.common import _LocalImages
from agent_eval.engine import ContainerSpec, run_container
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.errors import InfrastructureError
from agent_eval.images.build import image_for_checkout
from agent_eval.images.recipes import LABEL_IMAGE
from agent_eval.verdict.qualification import qualify_files
from tests.evidence_builders import CURRENT, Batch, receipt, write_batch
from tests.paths import REPO

pytestmark = pytest.mark.docker

REGISTRY_BINARY = "docker-registry"
READY_SECONDS = 15


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class LoopbackRegistry:
    """A docker-registry process on 127.0.0.1 that a test can stop."""

    def __init__(self, binary: str, root: Path) -> None:
        self.port = _free_loopback_port()
        root.mkdir(parents=True)
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'storage'}\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n"
        )
        self.process = subprocess.Popen(
            [binary, "serve", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + READY_SECONDS
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"{binary} did not listen on 127.0.0.1:{self.port}")
            time.sleep(0.05)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LoopbackRegistry]:
    binary = shutil.which(REGISTRY_BINARY)
    if binary is None:
        pytest.skip(f"{REGISTRY_BINARY} is not installed (apt-get install docker-registry)")
    running = LoopbackRegistry(binary, tmp_path / "registry")
    yield running
    running.stop()


@pytest.fixture
def tiny_image(
    engine: DockerEngine, docker_client: docker.DockerClient, tmp_path: Path
) -> Iterator[str]:
    context = tmp_path / "tiny"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM scratch\nCOPY hello /hello\n")
    (context / "hello").write_text(uuid.uuid4().hex)
    image_id = engine.build_image(
        context,
        tag=f"agent-eval/test-tiny:{uuid.uuid4().hex[:8]}",
        buildargs={},
        labels={"agent-eval.test": "tiny"},
    )
    yield image_id
    docker_client.images.remove(image_id, force=True)


def test_images_build_prints_the_ids_of_the_present_images(
    engine: DockerEngine, base_image: str
) -> None:
    result = CliRunner().invoke(main, ["images", "build"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert printed["base"] == engine.image_id(base_image)
    for key, name in (("verifier", "verifier"), ("runnerBase", "runner-base"),
                      ("referenceRunner", "reference-runner")):  # fmt: skip
        assert printed[key] == image_for_checkout(engine, REPO, name)
        assert (
            engine.image_id(f"agent-eval/{name}:{printed['recipes'][name][7:23]}") == printed[key]
        )


def test_images_build_refuses_a_registry_off_this_machine() -> None:
    result = CliRunner().invoke(main, ["images", "build", "--registry", "10.0.0.1:5000"])
    assert result.exit_code == 2
    assert "loopback" in result.output


def test_a_pushed_image_is_pinned_by_its_registry_digest_and_resolves_offline(
    engine: DockerEngine, registry: LoopbackRegistry, tiny_image: str
) -> None:
    repository = f"{registry.address}/agent-eval/test-tiny"
    reference = engine.push_image(tiny_image, repository=repository, tag="local")
    assert reference.startswith(f"{repository}@sha256:")
    registry.stop()
    assert engine.resolve_image(reference).image_id == tiny_image
    created = engine.create(
        ContainerSpec(
            image=reference,
            command=("/hello",),
            role="verifier",
            batch_id=f"test-{uuid.uuid4().hex[:12]}",
            run_id="push-1",
        )
    )
    engine.remove(created)


def test_another_digest_of_a_pushed_repository_is_a_mismatch(
    engine: DockerEngine, registry: LoopbackRegistry, tiny_image: str
) -> None:
    repository = f"{registry.address}/agent-eval/test-tiny"
    engine.push_image(tiny_image, repository=repository, tag="local")
    with pytest.raises(InfrastructureError, match="does not carry that digest"):
        engine.resolve_image(f"{repository}@sha256:{'0' * 64}")


def test_the_checker_holds_a_registry_digest_to_the_image_the_local_engine_resolves(
    engine: DockerEngine, registry: LoopbackRegistry, tiny_image: str, tmp_path: Path
) -> None:
    """What check-agent-eval composes (gate_anchors' resolver) against a real engine: a
    pushed reference is held to the id archives.json records beside it."""
    repository = f"{registry.address}/agent-eval/test-tiny"
    reference = engine.push_image(tiny_image, repository=repository, tag="local")
    registry.stop()
    resolve = _LocalImages().resolve
    assert resolve(reference) == tiny_image
    current = dataclasses.replace(CURRENT, resolve_image=resolve)

    def pinned(image_id: str) -> Batch:
        def record(manifest: dict[str, Any]) -> None:
            manifest["runnerImage"] = {"reference": reference, "imageId": image_id}

        return write_batch(tmp_path / image_id[7:19], receipt(runnerImage=reference), record)

    def image_reasons(batch: Batch) -> list[str]:
        reasons = qualify_files(batch.receipt, batch.archives, current).reasons
        return [r for r in reasons if r.startswith("runner-image:")]

    assert image_reasons(pinned(tiny_image)) == []
    [moved] = image_reasons(pinned("sha256:" + "7" * 64))
    assert f"resolves here to image {tiny_image}" in moved, moved


def test_built_images_carry_their_label_and_no_setuid_file(
    engine: DockerEngine, base_image: str
) -> None:
    for name in ("verifier", "runner-base"):
        image = image_for_checkout(engine, REPO, name)
        details = engine.inspect_image(image)
        assert details is not None and details.labels[LABEL_IMAGE] == name
        found = run_container(
            engine,
            ContainerSpec(
                image=image,
                command=("/usr/bin/find", "/", "-xdev", "-perm", "/6000", "-type", "f"),
                role="verifier",
                batch_id=f"test-{uuid.uuid4().hex[:12]}",
                run_id="setuid",
            ),
            timeout_s=60,
            log_limit_bytes=65536,
        )
        assert (found.wait.exit_code, found.output.stdout) == (0, b"")
