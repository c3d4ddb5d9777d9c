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
from agent_eval.models import Receipt, RunnerConfig
from agent_eval.reference.config import reference_config
from tests.paths import REPO

BIN = Path(sys.executable).parent


def project_copy(
    tmp_path: Path, own_suite: dict[str, str] | None = None, repetitions: int = 2
) -> Path:
    """A clean git checkout of the repository's library, tasks and graders, with its evidence
    in the checkout (the harness reads [tool.agent-eval]); the checker rebuilds the
    archives from its commit.

    With *own_suite* (example task id -> the copy's own id), the copy is a repository with a
    suite of its own: only those tasks and their fixtures, renamed, *repetitions* runs each,
    its own thresholds; its images are built from the recipes shipped with the harness (its
    reference runner holds its fixtures).
    """
    text = (REPO / "pyproject.toml").read_text()
    root = tmp_path / "project"
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".mypy_cache")
    if own_suite is None:
        for name in ("packages", "tasks", "graders", "fixtures"):
            shutil.copytree(REPO / name, root / name, ignore=ignore)
    else:
        for name in ("packages", "graders", "tasks/_shared"):
            shutil.copytree(REPO / name, root / name, ignore=ignore)
        for old, new in own_suite.items():
            for kind in ("tasks", "fixtures"):
                shutil.copytree(REPO / kind / old, root / kind / new, ignore=ignore)
            spec = root / "tasks" / new / "task.json"
            spec.write_text(json.dumps({**json.loads(spec.read_text()), "id": new}))
            grader = root / "tasks" / new / "grader.py"
            grader.write_text(
                grader.read_text().replace(f'task_id = "{old}"', f'task_id = "{new}"')
            )
        runs = len(own_suite) * repetitions
        declared = {
            "schemaVersion": 1, "taskIds": list(own_suite.values()),
            "repetitions": repetitions, "scheduledRuns": runs, "minFirstSuccesses": runs - 1,
            "requiredFinalSuccesses": runs, "maxAttemptsPerRun": 2,
        }  # fmt: skip
        (root / "tasks" / "suite.json").write_text(json.dumps(declared, indent=2))
    (root / "pyproject.toml").write_text(
        text.replace('evidence = ".verification/agent-eval"', f'evidence = "{"evidence"}"')
    )
    (root / ".gitignore").write_text("/evidence/\n")
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        git(root, *command)
    return root


def git(root: Path, *args: str) -> None:
    """git in *root* with a fixed author, as a maintainer's commit would be made."""
    identity = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    identity |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        timeout=60,
        env={**os.environ, **identity},
    )


Verdicts = list[tuple[str, bool, bool, tuple[tuple[object, bool, object], ...]]]
"""Each run's id, first and final success, and each attempt's category, unsafe, safety."""


MUTANT_VERDICTS = REPO / "tests" / "data" / "batches" / "mutant-verdicts.json"
"""The mutant batch's verdicts, run by run and attempt by attempt: those of a machine
without the load rig (the matrix test of the parallel phase holds a real batch to
them) and what a crowded machine must give too. Its first attempts are the fixtures
the reference runner's failing_case picks; a change there, or to a fixture's verdict,
changes this file."""


def mutant_verdicts() -> Verdicts:
    """The verdicts of :data:`MUTANT_VERDICTS`, as :func:`signature` gives them."""
    runs = json.loads(MUTANT_VERDICTS.read_text(encoding="utf-8"))
    return [
        (
            r["runId"],
            r["firstSuccess"],
            r["finalSuccess"],
            tuple((a["failureCategory"], a["unsafe"], a["safetyPassed"]) for a in r["attempts"]),
        )
        for r in runs
    ]


def signature(receipt: Receipt) -> Verdicts:
    """Each run's verdict, attempt by attempt: what must not depend on the machine."""
    return [
        (
            run.runId,
            run.firstSuccess,
            run.finalSuccess,
            tuple((a.failureCategory, a.unsafe, a.safetyPassed) for a in run.attempts),
        )
        for run in receipt.runs
    ]


def write_config(
    engine: ContainerEngine, path: Path, mode: str, project: Path = REPO, **changes: Any
) -> Path:
    config = reference_config(
        engine, mode, project_root=project, runtime_path="/var/run/docker.sock"
    )
    # Validated as the user's file would be.
    write_model_atomic(
        path, RunnerConfig.model_validate({**config.model_dump(mode="json"), **changes})
    )
    return path


def eval_agent(
    project: Path, config: Path, env: dict[str, str] | None = None, *options: str
) -> tuple[int, dict[str, Any]]:
    done = eval_agent_process(project, config, env, *options)
    return done.returncode, json.loads(done.stdout)


def eval_agent_process(
    project: Path, config: Path, env: dict[str, str] | None = None, *options: str
) -> subprocess.CompletedProcess[str]:
    """The finished eval-agent, its stdout checked to be its one line."""
    done = subprocess.run(
        [
            str(BIN / "eval-agent"),
            "--runner-config",
            str(config),
            "--project",
            str(project),
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.stdout.count("\n") == 1, (done.stdout, done.stderr)
    return done


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
