"""The engine interface is two halves, and a caller's fake is only the half it uses.

Invariants: every operation of :class:`ContainerEngine` belongs to exactly one
of :class:`ContainerRuntime` (containers and networks) and :class:`ImageStore`
(images), the connection's ``close`` aside; the runtime's fake has no image
operation and the store's fake no container operation; a runtime creates a
container only from an image its store holds and checks it as the engine does;
the whole fake shares one store between its halves.
"""

from __future__ import annotations

import inspect

import pytest

from agent_eval.engine import ContainerEngine, ContainerRuntime, ContainerSpec, ImageStore
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.engine.fake import FakeEngine, FakeImageStore, FakeRuntime
from agent_eval.errors import InfrastructureError


def operations(protocol: type) -> set[str]:
    return {
        name
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def public_methods(cls: type) -> set[str]:
    return {name for name, member in inspect.getmembers(cls, inspect.isfunction) if name[0] != "_"}


RUNTIME = operations(ContainerRuntime)
IMAGES = operations(ImageStore)


def test_each_operation_of_the_engine_is_in_exactly_one_half() -> None:
    assert not RUNTIME & IMAGES
    assert {"create", "start", "wait", "logs", "remove", "create_network"} <= RUNTIME
    assert {"resolve_image", "load_image", "build_image", "inspect_image"} <= IMAGES
    assert operations(ContainerEngine) == {"close"}
    assert public_methods(DockerEngine) >= RUNTIME | IMAGES | {"close"}


def test_the_runtime_fake_has_no_image_operation_and_the_store_fake_no_container_one() -> None:
    assert public_methods(FakeRuntime) & IMAGES == set()
    assert public_methods(FakeImageStore) & RUNTIME == set()
    assert public_methods(FakeEngine) >= RUNTIME | IMAGES


def spec(image: str) -> ContainerSpec:
    return ContainerSpec(image=image, command=("true",), role="runner", batch_id="b", run_id="r")


def test_a_runtime_creates_containers_only_from_the_images_its_store_holds() -> None:
    runtime = FakeRuntime()
    absent = "sha256:" + "0" * 64
    with pytest.raises(InfrastructureError, match="is not present in the local engine"):
        runtime.create(spec(absent))
    image = runtime.store.add_image(tags=("runner:test",))
    container = runtime.create(spec(image))
    assert runtime.containers[container].image_id == image
    assert runtime.store.pulls == []


def test_the_whole_fake_is_one_store_under_both_halves() -> None:
    engine = FakeEngine()
    assert engine.store is engine
    image = engine.add_image(tags=("verifier:test",))
    assert engine.resolve_image(image).image_id == image
    container = engine.create(spec(image))
    engine.remove(container)
    assert engine.list_containers() == []
    assert not engine.closed
    engine.close()
    assert engine.closed
