"""Runner locks: the whole closure, hash-pinned, made on purpose and never by a build.

Invariants: every committed runner recipe has a lock that is fresh for its
install.json; a pip lock pins every distribution with the hashes of every
architecture's wheel, from the index alone (no pip configuration file,
find-links or extra index); a closure that differs between architectures is
refused; a build refuses a missing or stale lock and names the command that
makes it, before anything is loaded; wheels are laid out without scripts and
never outside their target.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError
from agent_eval.images.build import build_images
from agent_eval.images.lock import lock_runner
from agent_eval.images.npm import check_package_lock
from agent_eval.images.recipes import runner_agents
from agent_eval.images.wheels import (
    check_requirements_lock,
    parse_requirements,
    publish,
    unpack_wheel,
)
from agent_eval.models import InstallRecipe
from agent_eval.project import find_project
from tests.images.builders import (
    FakePip,
    load_fake_base,
    make_project,
    make_wheel,
    report_item,
    sha256,
)
from tests.paths import REPO, SHIPPED

RUNNERS = SHIPPED / "images" / "runners"


def install(agent: str) -> InstallRecipe:
    return InstallRecipe.model_validate_json((RUNNERS / agent / "install.json").read_bytes())


@pytest.mark.parametrize("agent", runner_agents(find_project(REPO)))
def test_every_committed_runner_lock_is_fresh_for_its_install_json(agent: str) -> None:
    recipe = install(agent)
    fix = f"agent-eval images lock --runner {agent}"
    if recipe.kind == "pip":
        locked = check_requirements_lock(
            RUNNERS / agent / "requirements.lock", recipe.packages, fix
        )
        assert len(locked) > len(recipe.packages)  # the closure, not just the roots
    else:
        check_package_lock(RUNNERS / agent, agent, recipe.packages, fix)
        lock = json.loads((RUNNERS / agent / "package-lock.json").read_bytes())
        assert not any("resolved" in entry for entry in lock["packages"].values())


def test_the_verifier_requirements_pin_every_distribution_by_hash() -> None:
    _, locked = parse_requirements(
        (SHIPPED / "images" / "verifier" / "requirements.txt").read_text(), "requirements.txt"
    )
    assert {d.name for d in locked} >= {"mypy", "pip"}


# --- pip locks -------------------------------------------------------------------------------


def demo_project(tmp_path: Path, wheel: Path) -> Path:
    project = make_project(tmp_path / "repo", [wheel])
    recipe = project / "images" / "runners" / "demo"
    recipe.mkdir()
    (recipe / "install.json").write_text(
        json.dumps({"schemaVersion": 1, "kind": "pip", "packages": ["demo-cli==2.0"]})
    )
    image = json.loads((RUNNERS / "aider" / "image.json").read_bytes())
    image.update(importCheck="democli", version="site/demo_cli-*.dist-info/METADATA")
    (recipe / "image.json").write_text(json.dumps(image))
    return project


@pytest.fixture
def cli_wheels(tmp_path: Path) -> list[Path]:
    return [
        make_wheel(tmp_path / "w", "demo_cli", "2.0", {"democli/__init__.py": b""}),
        make_wheel(tmp_path / "w", "helper", "1.0", {"helper.py": b""}),
    ]


def reports(wheels: list[Path], arm_version: str = "1.0") -> FakePip:
    x86 = [
        report_item("demo-cli", "2.0", sha256(wheels[0])),
        report_item("helper", "1.0", sha256(wheels[1])),
    ]
    arm = [
        report_item("demo-cli", "2.0", sha256(wheels[0])),
        report_item("helper", arm_version, "a" * 64),
    ]
    return FakePip(wheels, reports={"x86_64": x86, "aarch64": arm})


def test_a_pip_lock_pins_the_closure_with_every_architectures_hashes(
    tmp_path: Path, cli_wheels: list[Path]
) -> None:
    project = demo_project(tmp_path, cli_wheels[0])
    pip = reports(cli_wheels)
    (written,) = lock_runner(project, "demo", run=pip)
    header, locked = parse_requirements(written.read_text(), str(written))
    assert header["roots"] == "demo-cli==2.0"
    assert [(d.name, d.version) for d in locked] == [("demo-cli", "2.0"), ("helper", "1.0")]
    assert set(locked[1].hashes) == {sha256(cli_wheels[1]), "a" * 64}
    assert all("--dry-run" in call and "--report" in call for call in pip.calls)
    for env in pip.environments:
        assert env["PIP_CONFIG_FILE"] == os.devnull and "PIP_FIND_LINKS" not in env


def test_a_closure_that_differs_between_architectures_is_refused(
    tmp_path: Path, cli_wheels: list[Path]
) -> None:
    project = demo_project(tmp_path, cli_wheels[0])
    with pytest.raises(ConfigError, match="differs between x86_64 and aarch64"):
        lock_runner(project, "demo", run=reports(cli_wheels, arm_version="1.1"))
    assert not (project / "images" / "runners" / "demo" / "requirements.lock").exists()


def test_a_build_with_a_missing_or_stale_lock_names_the_lock_command(
    tmp_path: Path, cli_wheels: list[Path]
) -> None:
    project = demo_project(tmp_path, cli_wheels[0])
    engine = FakeEngine()
    load_fake_base(engine, tmp_path / "base")
    pip = FakePip(cli_wheels)
    loaded = list(engine.loads)
    with pytest.raises(ConfigError, match=r"missing.*agent-eval images lock --runner demo"):
        build_images(engine, project, runners=["demo"], run=pip, cache_root=tmp_path / "c")
    assert engine.loads == loaded and pip.calls == []
    lock_runner(project, "demo", run=reports(cli_wheels))
    recipe = project / "images" / "runners" / "demo" / "install.json"
    recipe.write_text(recipe.read_text().replace("2.0", "2.1"))
    with pytest.raises(ConfigError, match=r"stale.*agent-eval images lock --runner demo"):
        build_images(engine, project, runners=["demo"], run=pip, cache_root=tmp_path / "c")
    assert engine.loads == loaded and pip.calls == []


def test_a_pip_runner_image_holds_the_unpacked_closure_the_adapters_and_the_version(
    tmp_path: Path, cli_wheels: list[Path]
) -> None:
    project = demo_project(tmp_path, cli_wheels[0])
    lock_runner(project, "demo", run=reports(cli_wheels))
    engine = FakeEngine()
    load_fake_base(engine, tmp_path / "base")
    built = build_images(
        engine, project, runners=["demo"], run=FakePip(cli_wheels), cache_root=tmp_path / "c"
    )
    image = engine.images[built.runners["demo"]]
    payload, adapters = (engine.layers[d] for d in image.diff_ids[-2:])
    with tarfile.open(fileobj=io.BytesIO(payload)) as layer:
        assert "opt/agent/site/democli/__init__.py" in layer.getnames()
        assert "opt/agent/site/helper.py" in layer.getnames()
    with tarfile.open(fileobj=io.BytesIO(adapters)) as layer:
        version = layer.extractfile("opt/agent-eval/runner-version")
        assert version is not None and version.read() == b"2.0\n"
        assert "opt/agent-eval/agent_eval/adapters/aider.py" in layer.getnames()
        pth = layer.extractfile("usr/local/lib/python3.11/dist-packages/agent-eval-adapters.pth")
        assert pth is not None and pth.read() == b"/opt/agent-eval\n"
    config = json.loads(image.config)["config"]
    assert config["Cmd"] == ["/usr/bin/python3", "-B", "-m", "agent_eval.adapters.aider", "--help"]
    assert "PYTHONPATH=/opt/agent-eval" in config["Env"] and config["User"] == "10001:10001"


# --- npm locks -------------------------------------------------------------------------------


@pytest.fixture
def npm_recipe(tmp_path: Path) -> Path:
    recipe = tmp_path / "claude-code"
    shutil.copytree(RUNNERS / "claude-code", recipe)
    return recipe


def test_an_npm_lock_out_of_step_with_install_json_is_stale(npm_recipe: Path) -> None:
    with pytest.raises(ConfigError, match=r"package\.json is stale"):
        check_package_lock(npm_recipe, "claude-code", ["@anthropic-ai/claude-code@9.9.9"], "fix")


def test_an_npm_lock_without_integrity_is_refused(npm_recipe: Path) -> None:
    lock = json.loads((npm_recipe / "package-lock.json").read_bytes())
    next(e for k, e in lock["packages"].items() if k).pop("integrity")
    (npm_recipe / "package-lock.json").write_text(json.dumps(lock))
    with pytest.raises(ConfigError, match="has no integrity"):
        check_package_lock(npm_recipe, "claude-code", install("claude-code").packages, "fix")


# --- Wheels -----------------------------------------------------------------------------------


def test_a_wheel_is_laid_out_without_its_scripts(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "tool", "1.0", {
        "tool/__init__.py": b"",
        "tool-1.0.data/scripts/tool": b"#!/host/python\n",
        "tool-1.0.data/purelib/extra.py": b"",
        "tool-1.0.data/data/share/tool.txt": b"",
    })  # fmt: skip
    unpack_wheel(wheel, tmp_path / "site")
    found = sorted(
        p.relative_to(tmp_path / "site").as_posix()
        for p in (tmp_path / "site").rglob("*")
        if p.is_file()
    )
    assert "tool/__init__.py" in found and "extra.py" in found and "share/tool.txt" in found
    assert not any(name.startswith("bin") or "scripts" in name for name in found)


def test_a_wheel_member_outside_its_target_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("../escape.py", b"")
    with pytest.raises(ConfigError, match="leaves the target"):
        unpack_wheel(wheel, tmp_path / "site")
    assert not (tmp_path / "escape.py").exists()


def test_a_download_finished_meanwhile_by_another_build_is_kept(tmp_path: Path) -> None:
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "a.whl").write_bytes(b"a")
    publish(tmp_path / "ours", tmp_path / "theirs")
    assert (tmp_path / "theirs" / "a.whl").read_bytes() == b"a"
