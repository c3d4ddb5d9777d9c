"""Whole batches through the commands, in a clean git checkout of the repository's library."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent_eval.engine import ContainerEngine
from agent_eval.evidence_io import write_model_atomic
from agent_eval.models import RunnerConfig
from agent_eval.reference.config import reference_config
from tests.paths import REPO

BIN = Path(sys.executable).parent


def project_copy(tmp_path: Path) -> Path:
    """A clean git checkout of the repository's library, tasks and graders, with its evidence
    in the checkout (the harness reads [tool.agent-eval]); the checker rebuilds the
    archives from its commit."""
    text = (REPO / "pyproject.toml").read_text()
    root = tmp_path / "project"
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".mypy_cache")
    for name in ("packages", "tasks", "graders", "fixtures"):
        shutil.copytree(REPO / name, root / name, ignore=ignore)
    (root / "pyproject.toml").write_text(
        text.replace('evidence = ".verification/agent-eval"', f'evidence = "{"evidence"}"')
    )
    (root / ".gitignore").write_text("/evidence/\n")
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    identity |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        subprocess.run(
            ["git", "-C", str(root), *command],
            check=True,
            capture_output=True,
            timeout=60,
            env={**os.environ, **identity},
        )
    return root


def write_config(engine: ContainerEngine, path: Path, mode: str, **changes: Any) -> Path:
    config = reference_config(engine, mode, project_root=REPO, runtime_path="/var/run/docker.sock")
    # Validated as the user's file would be.
    write_model_atomic(
        path, RunnerConfig.model_validate({**config.model_dump(mode="json"), **changes})
    )
    return path


def eval_agent(
    project: Path, config: Path, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [str(BIN / "eval-agent"), "--runner-config", str(config), "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.stdout.count("\n") == 1, (done.stdout, done.stderr)
    return done.returncode, json.loads(done.stdout)


def check(receipt: Path, *options: str) -> tuple[int, dict[str, Any]]:
    # The run directory lives in its project's evidence directory.
    project = receipt.parent.parent.parent
    done = subprocess.run(
        [
            str(BIN / "check-agent-eval"),
            "--receipt",
            str(receipt),
            "--archives",
            str(receipt.parent / "archives.json"),
            "--project",
            str(project),
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, json.loads(done.stdout)


def receipt_of(project: Path, line: dict[str, Any]) -> Path:
    path = Path(line["receipt"])
    return path if path.is_absolute() else Path.cwd() / path
