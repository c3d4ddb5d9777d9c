"""``agent-eval runners review`` appends one reviewed entry to the committed registry,
refuses what must never be approved, and an entry it wrote is what the checker matches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from agent_eval.errors import EvidenceError
from agent_eval.models import ArchivesManifest, RunnerConfig
from agent_eval.verdict.registry import entry_differences, parse_registry
from tests.evidence_builders import archives_manifest
from tests.paths import SHIPPED

BIN = Path(sys.executable).parent
EXAMPLE = SHIPPED / "examples" / "runners" / "claude-code.json"


def git(root: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.org",
        "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.org",
        "PATH": os.environ["PATH"], "HOME": str(root),
    }  # fmt: skip
    done = subprocess.run(
        ["git", "-C", str(root), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def project(tmp_path: Path, *, committed: bool = True) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    if committed:
        git(root, "init", "-q")
        git(root, "add", "pyproject.toml")
        git(root, "commit", "-q", "-m", "demo")
    return root


def test_the_entry_records_the_commit_it_was_reviewed_at(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = review(root, example())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sourceCommit"] == git(root, "rev-parse", "HEAD")
    (entry,) = parse_registry((root / "reviewed-runners.toml").read_bytes(), "r").runner
    assert entry.sourceCommit == git(root, "rev-parse", "HEAD")


def test_an_entry_without_a_source_commit_can_be_reviewed_again(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert review(root, example()).returncode == 0
    path = root / "reviewed-runners.toml"
    document = tomllib.loads(path.read_text())
    del document["runner"][0]["sourceCommit"]
    path.write_text(tomli_w.dumps(document))
    done = review(root, example())
    assert done.returncode == 0, done.stderr
    assert len(parse_registry(path.read_bytes(), "r").runner) == 2


def test_a_repository_with_no_commit_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path, committed=False)
    done = review(root, example())
    assert done.returncode != 0 and "commit the repository first" in done.stderr
    assert not (root / "reviewed-runners.toml").exists()


def review(root: Path, config: dict[str, Any], *extra: str, note: str = "recipe read") -> Any:
    path = root.parent / "runner.json"
    path.write_text(json.dumps(config))
    return subprocess.run(
        [str(BIN / "agent-eval"), "runners", "review", "--config", str(path),
         "--reviewer", "Ann Reviewer", "--note", note, "--project", str(root), *extra],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return data


def test_an_entry_is_appended_and_a_second_configuration_adds_a_second(tmp_path: Path) -> None:
    root = project(tmp_path)
    done = review(root, example())
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)
    assert entry["reviewer"] == "Ann Reviewer" and entry["upstreams"][0]["name"] == "anthropic"
    document = tomllib.loads((root / "reviewed-runners.toml").read_text())
    assert document["schemaVersion"] == 1 and len(document["runner"]) == 1
    other = {
        **example(),
        "expectedModel": {"id": "claude-sonnet-4-5", "settings": {"max_turns": 8}},
    }
    assert review(root, other).returncode == 0
    registry = parse_registry((root / "reviewed-runners.toml").read_bytes(), "registry")
    assert [e.model.settings for e in registry.runner] == [{}, {"max_turns": 8}]


def test_the_same_configuration_twice_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert review(root, example()).returncode == 0
    again = review(root, example())
    assert again.returncode != 0 and "already has an entry" in again.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"models": [], "gatewayImage": None}, "only a configuration with models[]"),
        ({"gateway": {"privateUpstreams": True}}, "never reviewed"),
    ],
)
def test_what_proves_no_agent_is_never_reviewed(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    done = review(project(tmp_path), {**example(), **change})
    assert done.returncode != 0 and said in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "repo" / "reviewed-runners.toml").exists()


def test_a_note_holding_a_secret_or_a_bad_reviewer_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path)
    secret = review(root, example(), note="key sk-ant-abcdefghijklmnopqrstuvwxyz0123")
    assert secret.returncode != 0 and "--note" in secret.stderr
    path = root.parent / "runner.json"
    bad = subprocess.run(
        [str(BIN / "agent-eval"), "runners", "review", "--config", str(path),
         "--reviewer", "x\n", "--note", "n", "--project", str(root)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode != 0 and "--reviewer" in bad.stderr
    assert not (root / "reviewed-runners.toml").exists()


def test_the_entry_written_matches_a_batch_of_that_configuration(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert review(root, example()).returncode == 0
    (entry,) = parse_registry((root / "reviewed-runners.toml").read_bytes(), "r").runner
    config = RunnerConfig.model_validate(example())
    manifest = archives_manifest(b"wheel")
    manifest.update(
        runner=config.expectedRunner.model_dump(),
        model=config.expectedModel.model_dump(),
        runnerCommand=[config.executable, *config.args],
        envAllowlist=sorted(config.envAllowlist),
        runnerImage={"reference": config.runnerImage, "imageId": "sha256:" + "c" * 64},
        verifierImage={"reference": config.verifierImage, "imageId": "sha256:" + "d" * 64},
        gateway={
            "image": config.gatewayImage,
            "upstreams": [
                {"name": m.name, "upstream": m.upstream, "credentialHeader": m.credentialHeader,
                 "servedModels": m.servedModels}
                for m in config.models
            ],
            "network": "default", "privateUpstreams": False, "tokenBudget": 20000000,
        },
    )  # fmt: skip
    archives = ArchivesManifest.model_validate(manifest)
    assert entry_differences(entry, archives) == []
    changed = archives.model_copy(update={"model": archives.model.model_copy(update={"id": "x"})})
    assert entry_differences(entry, changed) == ["model"]

    other = archives.model_copy(update={"runnerCommand": ["/bin/sh", "-c", "canned.sh"]})
    assert entry_differences(entry, other) == ["command"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "nested"])
def test_a_registry_that_is_not_a_readable_file_is_an_error_naming_it(
    tmp_path: Path, kind: str
) -> None:
    """No hang on a FIFO, no traceback on a directory or a deeply nested document."""
    root = project(tmp_path)
    registry = root / "reviewed-runners.toml"
    if kind == "fifo":
        os.mkfifo(registry)
    elif kind == "directory":
        registry.mkdir()
    else:
        registry.write_text("schemaVersion = 1\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    done = review(root, example())
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "registry" in done.stderr and str(registry) in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["agent-eval-oracle", "Agent-Eval-anything", " agent-eval-x"])
def test_a_reference_runners_name_is_never_reviewed_nor_read_from_a_registry(
    tmp_path: Path, name: str
) -> None:
    root = project(tmp_path)
    config = {**example(), "expectedRunner": {"name": name, "version": "1"}}
    done = review(root, config)
    assert done.returncode != 0 and "reserved" in done.stderr, done.stderr
    assert not (root / "reviewed-runners.toml").exists()
    assert review(root, example()).returncode == 0
    text = (root / "reviewed-runners.toml").read_text()
    forged = text.replace('name = "claude-code"', f'name = "{name}"', 1)
    assert forged != text
    with pytest.raises(EvidenceError, match=r"runner\.0\.runner\.name: .* is reserved"):
        parse_registry(forged.encode(), "registry")
