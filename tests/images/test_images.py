"""Image building, checked without an engine.

Invariants: only a loopback registry is accepted; the verifier's packages are
installed by pip on the host from hash-pinned wheels for Python 3.11 only,
once per requirements file; the verifier and runner-base images are built
FROM the base image's id; the printed references are pinned (image ids, or
registry digests after a push); the recipes use no BuildKit-only syntax and
strip setuid bits.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.images.build import (
    BASE_REFERENCE,
    IMAGE_LABEL,
    REFERENCE_RUNNER_TAG,
    RUNNER_BASE_TAG,
    VERIFIER_TAG,
    BuiltImages,
    build_images,
    check_loopback_registry,
    ensure_base_image,
    prepare_verifier_packages,
)
from tests.paths import REPO

IMAGES = REPO / "images"


class FakePip:
    """Stands in for ``subprocess.run`` of pip: records calls, writes a package."""

    def __init__(self, returncode: int = 0, stderr: str = "") -> None:
        self.calls: list[list[str]] = []
        self.returncode = returncode
        self.stderr = stderr

    def __call__(self, command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(command)
        if self.returncode == 0:
            target = Path(command[command.index("--target") + 1])
            (target / "mypy").mkdir(parents=True)
            (target / "mypy" / "__init__.py").write_text("")
            (target / "bin").mkdir()
            (target / "bin" / "mypy").write_text("#!/host/python\n")
        return subprocess.CompletedProcess(command, self.returncode, "", self.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(IMAGES, tmp_path / "images")
    (tmp_path / "fixtures" / "forms" / "correct").mkdir(parents=True)
    (tmp_path / "fixtures" / "forms" / "correct" / "solution.py").write_text("x = 1\n")
    return tmp_path


@pytest.fixture
def engine() -> FakeEngine:
    fake = FakeEngine()
    fake.add_image(tags=(BASE_REFERENCE,))
    return fake


# --- Registry -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "registry", ["127.0.0.1:5000", "127.8.9.10:80", "localhost:5000", "[::1]:5000"]
)
def test_a_loopback_registry_is_accepted(registry: str) -> None:
    assert check_loopback_registry(registry) == registry


@pytest.mark.parametrize(
    "registry",
    ["10.0.0.1:5000", "192.168.1.2:5000", "registry.example:5000", "0.0.0.0:5000"],
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
    project: Path, engine: FakeEngine
) -> None:
    pip = FakePip()
    with pytest.raises(ConfigError):
        build_images(engine, project, registry="10.1.2.3:5000", run=pip)
    assert engine.builds == [] and pip.calls == []


# --- Verifier packages -------------------------------------------------------------------------


def test_pip_installs_hash_pinned_wheels_for_python_3_11_into_a_target(tmp_path: Path) -> None:
    pip = FakePip()
    context = prepare_verifier_packages(
        IMAGES / "verifier" / "requirements.txt", tmp_path, python="/py", run=pip
    )
    (command,) = pip.calls
    assert command[:4] == ["/py", "-m", "pip", "install"]
    for flag in ("--require-hashes", "--only-binary=:all:", "--no-deps", "--no-compile"):
        assert flag in command
    assert command[command.index("--python-version") + 1] == "3.11"
    assert (context / "site-packages" / "mypy" / "__init__.py").is_file()
    assert not (context / "site-packages" / "bin").exists()


def test_the_packages_are_installed_once_per_requirements_file(tmp_path: Path) -> None:
    pip = FakePip()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("mypy==1 --hash=sha256:" + "0" * 64 + "\n")
    first = prepare_verifier_packages(requirements, tmp_path / "cache", run=pip)
    again = prepare_verifier_packages(requirements, tmp_path / "cache", run=pip)
    assert first == again and len(pip.calls) == 1
    requirements.write_text("mypy==2 --hash=sha256:" + "1" * 64 + "\n")
    assert prepare_verifier_packages(requirements, tmp_path / "cache", run=pip) != first
    assert len(pip.calls) == 2


def test_a_pip_failure_is_an_infrastructure_error_with_its_output(tmp_path: Path) -> None:
    pip = FakePip(returncode=1, stderr="ERROR: THESE PACKAGES DO NOT MATCH THE HASHES")
    with pytest.raises(InfrastructureError, match="DO NOT MATCH THE HASHES"):
        prepare_verifier_packages(IMAGES / "verifier" / "requirements.txt", tmp_path, run=pip)
    assert list(tmp_path.iterdir()) == []


def test_every_verifier_requirement_is_pinned_and_hashed() -> None:
    text = (IMAGES / "verifier" / "requirements.txt").read_text()
    logical = [
        line for line in text.replace("\\\n", " ").splitlines() if line and not line.startswith("#")
    ]
    assert logical
    for line in logical:
        assert re.match(r"^[a-z0-9-]+==[0-9][^ ]* ", line), line
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", line), line


# --- Building ------------------------------------------------------------------------------------


def test_images_are_built_from_the_base_id_and_printed_as_ids(
    project: Path, engine: FakeEngine
) -> None:
    base_id = engine.image_id(BASE_REFERENCE)
    built = build_images(engine, project, run=FakePip())
    assert built.base == base_id
    verifier, runner, reference = engine.builds
    (verifier_context, verifier_tag, verifier_args) = verifier
    (runner_context, runner_tag, runner_args) = runner
    (reference_context, reference_tag, reference_args) = reference
    assert (verifier_tag, runner_tag) == (VERIFIER_TAG, RUNNER_BASE_TAG)
    assert reference_tag == REFERENCE_RUNNER_TAG
    assert verifier_args == runner_args == {"BASE": base_id}
    assert reference_args == {"BASE": built.runner_base}
    assert (reference_context / "fixtures" / "forms" / "correct" / "solution.py").is_file()
    assert (reference_context / "reference_runner.py").is_file()
    assert (verifier_context / "Dockerfile").read_bytes() == (
        IMAGES / "verifier" / "Dockerfile"
    ).read_bytes()
    assert (verifier_context / "site-packages").is_dir()
    assert runner_context == project / "images" / "runner-base"
    assert engine.images[built.verifier].labels == {IMAGE_LABEL: "verifier"}
    for pinned in (built.base, built.verifier, built.runner_base, built.reference_runner):
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", pinned)


def test_a_rebuild_with_nothing_changed_gives_the_same_ids_without_pip(
    project: Path, engine: FakeEngine
) -> None:
    pip = FakePip()
    first = build_images(engine, project, run=pip)
    assert build_images(engine, project, run=pip) == first
    assert len(pip.calls) == 1


def test_with_a_loopback_registry_the_pushed_digests_are_printed(
    project: Path, engine: FakeEngine
) -> None:
    built = build_images(engine, project, registry="127.0.0.1:5000", run=FakePip())
    assert built.verifier.startswith("127.0.0.1:5000/agent-eval/verifier@sha256:")
    assert built.runner_base.startswith("127.0.0.1:5000/agent-eval/runner-base@sha256:")
    assert built.base.startswith("127.0.0.1:5000/agent-eval/base@sha256:")
    assert built.reference_runner.startswith("127.0.0.1:5000/agent-eval/reference-runner@sha256:")
    assert engine.resolve_image(built.verifier).image_id == engine.image_id(VERIFIER_TAG)


def test_the_printed_json_names_exactly_the_four_images() -> None:
    built = BuiltImages(
        base="sha256:" + "a" * 64, verifier="v", runner_base="r", reference_runner="rr"
    )
    assert json.loads(built.to_json()) == {
        "base": "sha256:" + "a" * 64,
        "verifier": "v",
        "runnerBase": "r",
        "referenceRunner": "rr",
    }


def test_a_missing_recipe_is_a_config_error(project: Path, engine: FakeEngine) -> None:
    shutil.rmtree(project / "images" / "runner-base")
    with pytest.raises(ConfigError, match="runner-base"):
        build_images(engine, project, run=FakePip())


def test_an_absent_base_needs_root_and_says_how_to_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(InfrastructureError, match=r"needs root.*scripts/setup"):
        ensure_base_image(FakeEngine(), tmp_path)


def test_a_present_base_is_reused_as_it_is(tmp_path: Path, engine: FakeEngine) -> None:
    assert ensure_base_image(engine, tmp_path) == engine.image_id(BASE_REFERENCE)
    assert list(tmp_path.iterdir()) == []


# --- Recipes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("recipe", ["verifier", "runner-base"])
def test_recipes_build_from_the_base_argument_with_the_legacy_builder(recipe: str) -> None:
    text = (IMAGES / recipe / "Dockerfile").read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert instructions[:2] == ["ARG BASE", "FROM ${BASE}"]
    assert "--chmod" not in text and "--mount" not in text
    assert "find / -xdev -perm /6000 -type f -exec chmod ug-s {} +" in text


def test_the_verifier_recipe_keeps_the_grader_directory_private() -> None:
    text = (IMAGES / "verifier" / "Dockerfile").read_text()
    assert re.search(r"chmod 0700 /grader /grader/task /result", text)
    assert 'CMD ["/usr/bin/python3"' in text


def test_the_registry_alternative_is_pinned_by_a_placeholder_digest() -> None:
    text = (IMAGES / "base" / "Dockerfile.registry").read_text()
    assert re.search(r"^FROM debian:bookworm-slim@sha256:0{64}$", text, re.MULTILINE)
