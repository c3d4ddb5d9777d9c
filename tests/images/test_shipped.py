"""The image recipes and example runner configs ship with the harness; a repository overrides one.

Invariants: a repository with no ``images/`` or ``examples/`` builds from the
recipes shipped in ``agent_eval/shipped/`` and its recipe names them; a file
or recipe directory of the repository's own wins over the shipped one, and
the recipe then names the repository's path, so an override is another recipe
digest and only the images reading it change; a lock is never written into
an installed harness; an image that is not present says which recipe digest
was expected and why the one there is not it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.images import lock
from agent_eval.images.build import Builder, build_images, image_for_checkout
from agent_eval.images.recipes import Sources, make_recipe, recipe_digest
from agent_eval.layout import SHIPPED_DIR, ShippedFiles
from tests.batches import git
from tests.images.builders import FakePip, load_fake_base, make_project, make_wheel, report_item
from tests.images.builders import sha256 as file_hash
from tests.paths import REPO, SHIPPED

BASE = "sha256:" + "b" * 64


def bare_repository(root: Path) -> Path:
    """A library repository holding no recipe of its own."""
    (root / "fixtures" / "t" / "correct").mkdir(parents=True)
    (root / "fixtures" / "t" / "correct" / "solution.py").write_text("x = 1\n")
    (root / "packages").mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "lib"\n')
    return root


def recipes(root: Path, *names: str) -> dict[str, dict[str, str]]:
    sources = Sources.of(root)
    found = {}
    for name in names:
        parent = None if name in ("verifier", "runner-base") else "sha256:" + "0" * 64
        recipe = make_recipe(sources, name, base=BASE, architecture="x86_64", parent=parent)
        found[name] = {"digest": recipe_digest(recipe), **recipe.files}
    return found


def test_the_shipped_recipes_are_the_harness_package_data() -> None:
    assert SHIPPED == REPO / "agent_eval" / SHIPPED_DIR
    for relative in ("images/verifier/requirements.txt", "images/gateway/install.json",
                     "images/README.md", "examples/runners/claude-code.json"):  # fmt: skip
        assert (SHIPPED / relative).is_file(), relative
    assert not (REPO / "images").exists() and not (REPO / "examples").exists()
    shipped = ShippedFiles(REPO, REPO / "agent_eval")
    assert shipped.runner_agents() == ["aider", "claude-code", "codex", "mini-swe-agent"]


def test_a_repository_without_recipes_builds_from_the_shipped_ones(tmp_path: Path) -> None:
    root = bare_repository(tmp_path / "lib")
    found = recipes(root, "verifier", "gateway", "runner-codex")
    assert "agent_eval/shipped/images/verifier/requirements.txt" in found["verifier"]
    assert "agent_eval/shipped/images/gateway/requirements.lock" in found["gateway"]
    assert "agent_eval/shipped/images/runners/codex/package-lock.json" in found["runner-codex"]
    assert not any(key.startswith("images/") for r in found.values() for key in r)


def test_an_overridden_verifier_recipe_is_another_digest_and_changes_no_other_image(
    tmp_path: Path,
) -> None:
    root = bare_repository(tmp_path / "lib")
    before = recipes(root, "verifier", "runner-base", "gateway")
    own = root / "images" / "verifier" / "requirements.txt"
    own.parent.mkdir(parents=True)
    shutil.copyfile(SHIPPED / "images" / "verifier" / "requirements.txt", own)
    after = recipes(root, "verifier", "runner-base", "gateway")
    assert "images/verifier/requirements.txt" in after["verifier"]
    assert "agent_eval/shipped/images/verifier/requirements.txt" not in after["verifier"]
    assert after["verifier"]["digest"] != before["verifier"]["digest"]
    assert after["runner-base"] == before["runner-base"] and after["gateway"] == before["gateway"]


def test_an_overridden_runner_recipe_replaces_the_whole_directory_and_adds_an_agent(
    tmp_path: Path,
) -> None:
    root = bare_repository(tmp_path / "lib")
    own = root / "images" / "runners" / "codex"
    shutil.copytree(SHIPPED / "images" / "runners" / "codex", own)
    (own / "package-lock.json").unlink()
    shipped = Sources.of(root).shipped
    assert shipped.runner_recipe("codex") == own
    assert shipped.runner_recipe("aider") == SHIPPED / "images" / "runners" / "aider"
    keys = set(recipes(root, "runner-codex")["runner-codex"]) - {"digest"}
    assert sorted(k for k in keys if not k.startswith("agent_eval/")) == [
        "images/runners/codex/image.json", "images/runners/codex/install.json",
        "images/runners/codex/package.json",
    ]  # fmt: skip
    assert not any("/shipped/" in k for k in keys)
    extra = root / "images" / "runners" / "mine"
    extra.mkdir()
    (extra / "image.json").write_text("{}")
    assert "mine" in shipped.runner_agents()
    with pytest.raises(ConfigError, match=r"no runner recipe .*nobody/image\.json; known: aider"):
        Sources.of(root).check_runner("nobody")


def test_an_example_runner_config_of_the_repository_wins(tmp_path: Path) -> None:
    root = bare_repository(tmp_path / "lib")
    shipped = Sources.of(root).shipped
    assert shipped.example_runner_config("codex") == SHIPPED / "examples/runners/codex.json"
    own = root / "examples" / "runners" / "codex.json"
    own.parent.mkdir(parents=True)
    own.write_text("{}")
    assert shipped.example_runner_config("codex") == own


def test_a_lock_of_a_shipped_recipe_is_written_into_the_repository_not_the_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = tmp_path / "site" / "agent_eval"
    shipped = harness / SHIPPED_DIR / "images" / "runners" / "demo"
    shipped.mkdir(parents=True)
    (shipped / "install.json").write_text(
        json.dumps({"schemaVersion": 1, "kind": "pip", "packages": ["demo-cli==2.0"]})
    )
    shutil.copyfile(SHIPPED / "images" / "runners" / "aider" / "image.json", shipped / "image.json")
    root = bare_repository(tmp_path / "lib")
    wheel = make_wheel(tmp_path / "w", "demo_cli", "2.0", {"democli/__init__.py": b""})
    real = Sources.of
    monkeypatch.setattr(Sources, "of", lambda r: Sources(real(r).project, harness))
    item = [report_item("demo-cli", "2.0", file_hash(wheel))]
    pip = FakePip([wheel], reports={"x86_64": item, "aarch64": item})
    (written,) = lock.lock_runner(root, "demo", run=pip)
    assert written == root / "images" / "runners" / "demo" / "requirements.lock"
    assert (written.parent / "install.json").read_bytes() == (shipped / "install.json").read_bytes()
    assert sorted(p.name for p in shipped.iterdir()) == ["image.json", "install.json"]


def test_an_image_not_built_names_the_recipe_digest_expected(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "wheels", "mypy", "1.0", {"mypy/__init__.py": b"x = 1\n"})
    root = make_project(tmp_path / "repo", [wheel])
    engine = FakeEngine()
    load_fake_base(engine, tmp_path / "base")
    base = engine.image_id("agent-eval/base:bookworm")
    assert base is not None
    builder = Builder(engine, Sources.of(root), base, work_dir=root, cache_root=tmp_path)
    digest = recipe_digest(builder.recipe("verifier"))
    with pytest.raises(InfrastructureError) as raised:
        image_for_checkout(engine, root, "verifier")
    assert f"this tree's verifier recipe {digest}" in str(raised.value)
    assert "run `agent-eval images build`" in str(raised.value)


def test_an_image_built_from_an_uncommitted_tree_says_so_once_the_tree_is_committed(
    tmp_path: Path,
) -> None:
    wheel = make_wheel(tmp_path / "wheels", "mypy", "1.0", {"mypy/__init__.py": b"x = 1\n"})
    root = make_project(tmp_path / "repo", [wheel])
    git(root, "init", "-q")
    engine = FakeEngine()
    load_fake_base(engine, tmp_path / "base")
    build_images(engine, root, run=FakePip([wheel]), cache_root=tmp_path / "cache")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "recipes")
    with pytest.raises(InfrastructureError, match="built while its input files differed"):
        image_for_checkout(engine, root, "verifier")
