"""Image building, checked against the fake engine.

Invariants: images are assembled on the host and loaded, never built by a
builder, FROM the base image's id; each is tagged and labelled by the digest of
its recipe, and a build with that tag present reuses it; the same inputs give
the same image ids with the engine emptied (only the base kept); changing one
input changes only the recipes that name it; "the image of this checkout" is
found by recipe, whatever else is tagged; setuid bits never reach an image;
only a loopback registry is accepted.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from pathlib import Path

import pytest

from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.images.base import BASE_REFERENCE, ensure_base_image
from agent_eval.images.build import (
    BuiltImages,
    build_images,
    check_loopback_registry,
    image_for_checkout,
)
from agent_eval.images.recipes import (
    LABEL_IMAGE,
    LABEL_RECIPE,
    LABEL_RECIPE_DIGEST,
    LABEL_SOURCE_COMMIT,
)
from tests.images.builders import FakePip, load_fake_base, make_project, make_wheel

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    return make_wheel(tmp_path / "wheels", "mypy", "1.0", {"mypy/__init__.py": b"x = 1\n"})


@pytest.fixture
def project(tmp_path: Path, wheel: Path) -> Path:
    return make_project(tmp_path / "repo", [wheel])


@pytest.fixture
def engine(tmp_path: Path) -> FakeEngine:
    fake = FakeEngine()
    load_fake_base(fake, tmp_path / "base")
    return fake


def build(
    engine: FakeEngine, project: Path, wheel: Path, tmp_path: Path, **kwargs: object
) -> BuiltImages:
    return build_images(
        engine, project, run=FakePip([wheel]), cache_root=tmp_path / "cache", **kwargs
    )  # type: ignore[arg-type]


def files_of(engine: FakeEngine, image_id: str) -> dict[str, tarfile.TarInfo]:
    """Every entry of the image's own layers (not the base's), by path."""
    found: dict[str, tarfile.TarInfo] = {}
    for diff_id in engine.images[image_id].diff_ids[1:]:
        with tarfile.open(fileobj=io.BytesIO(engine.layers[diff_id])) as layer:
            found.update({"/" + m.name: m for m in layer.getmembers()})
    return found


# --- Registry -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "registry", ["127.0.0.1:5000", "127.8.9.10:80", "localhost:5000", "[::1]:5000"]
)
def test_a_loopback_registry_is_accepted(registry: str) -> None:
    assert check_loopback_registry(registry) == registry


@pytest.mark.parametrize(
    "registry", ["10.0.0.1:5000", "192.168.1.2:5000", "registry.example:5000", "0.0.0.0:5000"]
)
def test_a_registry_off_this_machine_is_refused(registry: str) -> None:
    with pytest.raises(ConfigError, match="loopback"):
        check_loopback_registry(registry)


@pytest.mark.parametrize(
    "registry", ["http://127.0.0.1:5000", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "a/b:1"]
)
def test_a_registry_that_is_not_host_and_port_is_refused(registry: str) -> None:
    with pytest.raises(ConfigError, match="host:port"):
        check_loopback_registry(registry)


def test_a_non_loopback_registry_is_refused_before_anything_is_built(
    project: Path, engine: FakeEngine, wheel: Path, tmp_path: Path
) -> None:
    loaded = list(engine.loads)
    with pytest.raises(ConfigError):
        build(engine, project, wheel, tmp_path, registry="10.1.2.3:5000")
    assert engine.loads == loaded and engine.builds == []


# --- Building ------------------------------------------------------------------------------


def test_images_are_loaded_from_the_base_id_and_tagged_by_their_recipe_digest(
    project: Path, engine: FakeEngine, wheel: Path, tmp_path: Path
) -> None:
    base = engine.image_id(BASE_REFERENCE)
    built = build(engine, project, wheel, tmp_path)
    assert built.base == base and engine.builds == [] and engine.pulls == []
    for name, image_id in (("verifier", built.verifier), ("runner-base", built.runner_base),
                           ("reference-runner", built.reference_runner)):  # fmt: skip
        image = engine.images[image_id]
        digest = built.recipes[name]
        assert f"agent-eval/{name}:{digest.removeprefix('sha256:')[:16]}" in image.repo_tags
        assert image.labels[LABEL_IMAGE] == name
        assert image.labels[LABEL_RECIPE_DIGEST] == digest
        assert json.loads(image.labels[LABEL_RECIPE])["base"] == base
        assert LABEL_SOURCE_COMMIT in image.labels
        assert engine.images[base].diff_ids == image.diff_ids[:1]
        assert DIGEST.fullmatch(image_id)
    assert not any(tag.endswith(":local") for i in engine.images.values() for tag in i.repo_tags)


def test_the_same_inputs_give_the_same_ids_with_the_engine_emptied(
    project: Path, wheel: Path, tmp_path: Path
) -> None:
    ids = []
    for attempt in ("first", "second"):
        fresh = FakeEngine()
        load_fake_base(fresh, tmp_path / "base")
        built = build(fresh, project, wheel, tmp_path / attempt)
        ids.append((built.verifier, built.runner_base, built.reference_runner))
    assert ids[0] == ids[1]


def test_a_rebuild_with_its_tags_present_loads_nothing_and_downloads_nothing(
    project: Path, engine: FakeEngine, wheel: Path, tmp_path: Path
) -> None:
    pip = FakePip([wheel])
    first = build_images(engine, project, run=pip, cache_root=tmp_path / "cache")
    loads, calls = list(engine.loads), len(pip.calls)
    assert build_images(engine, project, run=pip, cache_root=tmp_path / "cache") == first
    assert engine.loads == loads and len(pip.calls) == calls


def test_a_changed_fixture_changes_only_the_reference_runner(
    project: Path, engine: FakeEngine, wheel: Path, tmp_path: Path
) -> None:
    first = build(engine, project, wheel, tmp_path)
    (project / "fixtures" / "forms" / "correct" / "solution.py").write_text("x = 2\n")
    second = build(engine, project, wheel, tmp_path)
    assert (second.verifier, second.runner_base) == (first.verifier, first.runner_base)
    assert second.reference_runner != first.reference_runner
    assert first.reference_runner in engine.images  # the first checkout's image is untouched
    tags = engine.images[first.reference_runner].repo_tags
    assert tags == [f"agent-eval/reference-runner:{first.recipes['reference-runner'][7:23]}"]


def test_the_image_of_a_checkout_is_found_by_its_recipe_not_by_the_latest_build(
    project: Path, engine: FakeEngine, wheel: Path, tmp_path: Path
) -> None:
    first = build(engine, project, wheel, tmp_path)
    other = tmp_path / "other"
    make_project(other, [wheel])
    (other / "fixtures" / "forms" / "correct" / "solution.py").write_text("y = 1\n")
    second = build(engine, other, wheel, tmp_path)
    assert image_for_checkout(engine, project, "reference-runner") == first.reference_runner
    assert image_for_checkout(engine, other, "reference-runner") == second.reference_runner
    assert image_for_checkout(engine, other, "verifier") == first.verifier


def test_an_image_not_built_for_this_checkout_names_the_build_command(
    project: Path, engine: FakeEngine
) -> None:
    with pytest.raises(InfrastructureError, match="agent-eval images build"):
        image_for_checkout(engine, project, "verifier")


def test_no_setuid_bit_reaches_an_image_and_the_mount_points_keep_their_modes(
    project: Path, engine: FakeEngine, wheel: Path, tmp_path: Path
) -> None:
    built = build(engine, project, wheel, tmp_path)
    verifier = files_of(engine, built.verifier)
    assert verifier["/usr/bin/su"].mode == 0o755  # re-added without the bit
    assert all(not m.mode & 0o6000 for m in verifier.values())
    modes = {p: verifier[p].mode for p in ("/verifier", "/grader", "/grader/task", "/result")}
    assert modes == {"/verifier": 0o755, "/grader": 0o700, "/grader/task": 0o700, "/result": 0o700}
    assert verifier["/usr/local/lib/python3.11/dist-packages/mypy/__init__.py"].uid == 0
    assert all(
        (m.uid, m.gid, m.mtime) == (0, 0, 0) for p, m in verifier.items() if p != "/usr/bin/su"
    )
    runner = files_of(engine, built.runner_base)
    assert (runner["/solution"].uid, runner["/solution"].mode) == (10001, 0o755)
    config = json.loads(engine.images[built.runner_base].config)["config"]
    assert (config["User"], config["WorkingDir"]) == ("10001:10001", "/solution")


def test_the_runner_user_is_appended_to_the_base_user_database(
    project: Path, engine: FakeEngine, wheel: Path, tmp_path: Path
) -> None:
    built = build(engine, project, wheel, tmp_path)
    diff_id = engine.images[built.runner_base].diff_ids[-1]
    with tarfile.open(fileobj=io.BytesIO(engine.layers[diff_id])) as layer:
        passwd = layer.extractfile("etc/passwd")
        assert passwd is not None
        assert passwd.read().decode().splitlines() == [
            "root:x:0:0:root:/root:/bin/bash",
            "agent:x:10001:10001::/tmp/agent:/usr/sbin/nologin",
        ]


def test_with_a_loopback_registry_the_pushed_digests_are_printed(
    project: Path, engine: FakeEngine, wheel: Path, tmp_path: Path
) -> None:
    built = build(engine, project, wheel, tmp_path, registry="127.0.0.1:5000")
    assert built.verifier.startswith("127.0.0.1:5000/agent-eval/verifier@sha256:")
    assert built.reference_runner.startswith("127.0.0.1:5000/agent-eval/reference-runner@sha256:")
    assert built.base.startswith("127.0.0.1:5000/agent-eval/base@sha256:")


def test_the_printed_json_names_the_images_and_their_recipes() -> None:
    built = BuiltImages(
        base="b", verifier="v", runner_base="r", reference_runner="rr", gateway="g",
        runners={"aider": "a"}, recipes={"verifier": "sha256:" + "1" * 64},
    )  # fmt: skip
    assert json.loads(built.to_json()) == {
        "base": "b",
        "verifier": "v",
        "runnerBase": "r",
        "referenceRunner": "rr",
        "gateway": "g",
        "runners": {"aider": "a"},
        "recipes": {"verifier": "sha256:" + "1" * 64},
    }


def test_an_absent_base_needs_root_and_says_how_to_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(InfrastructureError, match=r"needs root.*scripts/setup"):
        ensure_base_image(FakeEngine(), tmp_path)


def test_a_present_base_is_reused_as_it_is(tmp_path: Path, engine: FakeEngine) -> None:
    (tmp_path / "work").mkdir()
    assert ensure_base_image(engine, tmp_path / "work") == engine.image_id(BASE_REFERENCE)
    assert list((tmp_path / "work").iterdir()) == []


def test_the_registry_alternative_is_pinned_by_a_placeholder_digest() -> None:
    from tests.paths import SHIPPED

    text = (SHIPPED / "images" / "base" / "Dockerfile.registry").read_text()
    assert re.search(r"^FROM debian:bookworm-slim@sha256:0{64}$", text, re.MULTILINE)
