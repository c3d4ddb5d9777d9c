"""eval-agent writes its report however its streams ended (a pipe whose reader is gone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.batch.run import BatchOutcome
from agent_eval.cli.run import report_outcome
from agent_eval.report import render


def test_a_broken_stderr_and_stdout_never_cost_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Path] = []

    def write_report(batch_dir: Path, *, project: Path, current: object = None) -> Path:
        written.append(batch_dir)
        return batch_dir / "report.html"

    def broken(_text: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def echo(*_args: object, **_kwargs: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(render, "write_report", write_report)
    monkeypatch.setattr("click.echo", echo)
    outcome = BatchOutcome(
        "interrupted", tmp_path / "receipt.json", 1, 1,
        reasons=("interrupted by the operator (Ctrl-C)",),
    )  # fmt: skip
    report_outcome(outcome, tmp_path, broken)
    assert written == [tmp_path]
