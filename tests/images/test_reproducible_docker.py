"""Images are reproducible, content-addressed and verifiable, on the real engine.

Invariants: two fresh clones of one commit assemble the verifier and the
claude-code runner from nothing (no layer of the engine reused, only the
downloads cache) with the same image ids; with the provenance labels the
engine's image carries (the commit its recipe was first built from, which an
unchanged recipe keeps across commits) they assemble exactly that image; a
second checkout with one harness file changed builds its own image beside
the first checkout's, whose pinned images and tags stay as they were;
``agent-eval images verify`` confirms an image built from a commit (exit 0)
and rejects one built with a changed lock (exit 1, naming the lock).

Bounded: one runner (claude-code: a download the cache keeps, no bytecode to
compile), images created here are removed at the end, images that were
already present (another checkout's) are left alone.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.engine.docker_engine import DockerEngine, connect_local_engine
from agent_eval.images.archive import image_id
from agent_eval.images.base import BASE_REFERENCE
from agent_eval.images.build import Builder, build_images, default_cache_root, image_for_checkout
from agent_eval.images.recipes import (
    LABEL_SOURCE_COMMIT,
    LABEL_SOURCE_DIRTY,
    Sources,
    image_tag,
)
from tests.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.serial]

RUNNER = "claude-code"
NAMES = ("verifier", "runner-base", "reference-runner", f"runner-{RUNNER}")


@dataclass
class Checkout:
    """A clone of this repository's HEAD and the images its build printed."""

    root: Path
    ids: dict[str, str]


class CreatedImages:
    """Tags this module makes; at the end, those that were absent before are removed."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        self.tags: dict[str, bool] = {}

    def note(self, engine: DockerEngine, tag: str) -> None:
        if tag not in self.tags:
            self.tags[tag] = engine.inspect_image(tag) is not None

    def remove(self) -> None:
        for tag, existed in reversed(self.tags.items()):  # children before their parent
            if not existed:
                with contextlib.suppress(docker.errors.APIError):
                    self.client.images.remove(tag)


def clone(destination: Path) -> Path:
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(destination)], check=True
    )
    return destination


@pytest.fixture(scope="module")
def engine(docker_client: docker.DockerClient, base_image: str) -> Iterator[DockerEngine]:
    connected = connect_local_engine()
    yield connected
    connected.close()


@pytest.fixture(scope="module")
def created(docker_client: docker.DockerClient) -> Iterator[CreatedImages]:
    images = CreatedImages(docker_client)
    yield images
    images.remove()


def builder(
    engine: DockerEngine, root: Path, work: Path, *, provenance: dict[str, str] | None = None
) -> Builder:
    base = engine.image_id(BASE_REFERENCE)
    assert base is not None
    work.mkdir(parents=True)
    return Builder(
        engine,
        Sources.of(root),
        base,
        work_dir=work,
        cache_root=default_cache_root(),
        labels=None if provenance is None else (lambda _recipe: provenance),
    )


def provenance_of(engine: DockerEngine, image: str) -> dict[str, str]:
    details = engine.inspect_image(image)
    assert details is not None
    return {label: details.labels[label] for label in (LABEL_SOURCE_COMMIT, LABEL_SOURCE_DIRTY)}


def note_tags(engine: DockerEngine, created: CreatedImages, root: Path, work: Path) -> None:
    recipes = builder(engine, root, work)
    for name in NAMES:
        created.note(engine, image_tag(recipes.recipe(name)))


@pytest.fixture(scope="module")
def first(
    engine: DockerEngine, created: CreatedImages, tmp_path_factory: pytest.TempPathFactory
) -> Checkout:
    root = clone(tmp_path_factory.mktemp("first") / "repo")
    note_tags(engine, created, root, tmp_path_factory.mktemp("notes") / "work")
    built = build_images(engine, root, runners=[RUNNER])
    ids = {
        "verifier": built.verifier,
        "runner-base": built.runner_base,
        "reference-runner": built.reference_runner,
        f"runner-{RUNNER}": built.runners[RUNNER],
    }
    return Checkout(root, ids)


def test_two_fresh_clones_assemble_the_same_images_from_nothing(
    engine: DockerEngine, first: Checkout, tmp_path: Path
) -> None:
    second = clone(tmp_path / "second")
    for name in ("verifier", f"runner-{RUNNER}"):
        fresh = {
            image_id(
                builder(engine, root, tmp_path / f"{name}-{index}")
                .assemble(name, keep=False)
                .config
            )
            for index, root in enumerate((first.root, second))
        }
        assert len(fresh) == 1, (name, fresh)
        held = provenance_of(engine, first.ids[name])
        again = builder(engine, second, tmp_path / f"{name}-held", provenance=held)
        assert image_id(again.assemble(name, keep=False).config) == first.ids[name], (name, held)


def test_a_second_checkout_leaves_the_first_checkouts_images_and_tags_untouched(
    engine: DockerEngine, first: Checkout, created: CreatedImages, tmp_path: Path
) -> None:
    second = clone(tmp_path / "second")
    runner = second / "agent_eval" / "reference" / "runner.py"
    runner.write_text(runner.read_text() + "\n# a second checkout's change\n")
    note_tags(engine, created, second, tmp_path / "notes")
    built = build_images(engine, second)
    assert built.reference_runner != first.ids["reference-runner"]
    assert built.verifier == first.ids["verifier"] and built.runner_base == first.ids["runner-base"]
    for name, pinned in first.ids.items():
        assert image_for_checkout(engine, first.root, name) == pinned
        assert engine.inspect_image(pinned) is not None
    assert image_for_checkout(engine, second, "reference-runner") == built.reference_runner


def test_images_verify_confirms_an_image_and_rejects_one_built_with_a_changed_lock(
    engine: DockerEngine, first: Checkout, created: CreatedImages, tmp_path: Path
) -> None:
    cli = CliRunner()
    confirmed = cli.invoke(
        main, ["images", "verify", first.ids["verifier"], "--project", str(first.root)]
    )
    assert confirmed.exit_code == 0, confirmed.output
    assert json.loads(confirmed.stdout)["same"] is True

    changed = clone(tmp_path / "changed")
    lock = changed / "agent_eval" / "shipped" / "images" / "verifier" / "requirements.txt"
    lock.write_text(lock.read_text().split("# pip, so that")[0])  # drop the pip wheel
    note_tags(engine, created, changed, tmp_path / "notes")
    rebuilt = build_images(engine, changed).verifier
    assert rebuilt != first.ids["verifier"]
    rejected = cli.invoke(main, ["images", "verify", rebuilt, "--project", str(changed)])
    assert rejected.exit_code == 1, rejected.output
    report = json.loads(rejected.stdout)
    assert report["same"] is False and report["sourceDirty"] is True
    shipped = "agent_eval/shipped/images/verifier/requirements.txt"
    assert any(line.startswith(shipped) for line in report["differences"])


def test_images_verify_of_an_image_without_a_recipe_is_a_usage_error(
    engine: DockerEngine,
) -> None:
    base = engine.image_id(BASE_REFERENCE)
    assert base is not None
    result = CliRunner().invoke(main, ["images", "verify", base, "--project", str(REPO)])
    assert result.exit_code == 2
    assert "not built by `agent-eval images build`" in result.output
