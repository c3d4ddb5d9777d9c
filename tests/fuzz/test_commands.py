"""Hostile input on the command line ends with the documented exit code and no traceback.

eval-agent: 2 (not-run, with a receipt saying why); check-agent-eval: 1
(rejected, with a reason); review-agent-eval: 1 (one ``error:`` line). The
inputs are the readers' worst cases: a FIFO, a document nested 100 000 deep,
bytes that are not UTF-8, a boolean where a number belongs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli.check import check_command
from agent_eval.cli.review import review_command
from agent_eval.cli.run import eval_agent_command
from tests.evidence_builders import attempt, receipt, run, write_batch
from tests.paths import REPO, SHIPPED


def fifo(path: Path) -> None:
    os.mkfifo(path)


def deep(path: Path) -> None:
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)


def not_utf8(path: Path) -> None:
    path.write_bytes(b"\xff\xfe{}")


def boolean_version(path: Path) -> None:
    data = json.loads((SHIPPED / "examples" / "runners" / "claude-code.json").read_text())
    path.write_text(json.dumps({**data, "schemaVersion": True}))


HOSTILE: dict[str, Callable[[Path], None]] = {
    "fifo": fifo,
    "deep": deep,
    "not-utf8": not_utf8,
    "boolean-version": boolean_version,
}


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    text = (REPO / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(
        text.replace('evidence = ".verification/agent-eval"', 'evidence = "evidence"')
    )
    return root


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_eval_agent_with_a_hostile_config_is_not_run_with_exit_two(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    config = tmp_path / "runner.json"
    make(config)
    root = project(tmp_path)
    result = CliRunner().invoke(
        eval_agent_command, ["--runner-config", str(config), "--project", str(root)]
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    line = json.loads(result.stdout)
    assert line["status"] == "not-run"
    printed = Path(line["receipt"])
    saved = json.loads((printed if printed.is_absolute() else Path.cwd() / printed).read_text())
    assert saved["status"] == "not-run" and saved["reasons"][0].startswith("config:")


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_check_with_a_hostile_receipt_rejects_with_exit_one(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    batch = write_batch(tmp_path / "b")
    batch.receipt.unlink()
    make(batch.receipt)
    result = CliRunner().invoke(
        check_command, ["--receipt", str(batch.receipt), "--archives", str(batch.archives)]
    )
    assert result.exit_code == 1
    decision = json.loads(result.stdout)
    assert decision["reasons"][0].startswith("receipt-readable:")


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_review_of_a_hostile_receipt_is_one_error_line_with_exit_one(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    runs = [run(r, [attempt(r, needs_review=True)]) for r in ["forms-1"]]
    batch = write_batch(tmp_path / "b", receipt(runs))
    batch.receipt.unlink()
    make(batch.receipt)
    args = ["--receipt", str(batch.receipt), "--run", "forms-1", "--attempt", "1"]
    result = CliRunner().invoke(review_command, [*args, "--reviewer", "a", "--decision", "accept"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output
