"""eval-agent --resume: its schedule is the resumed batch's, so --only and --repetitions with it
are usage errors (exit 2) before anything runs, as is a run directory that is not there."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.cli.run import eval_agent_command
from tests.paths import REPO


@pytest.mark.parametrize(
    "options, said",
    [
        (["--only", "forms"], "--resume takes its schedule from the batch it resumes"),
        (["--repetitions", "2"], "--resume takes its schedule from the batch it resumes"),
    ],
)
def test_resume_with_a_schedule_of_its_own_is_a_usage_error(
    tmp_path: Path, options: list[str], said: str
) -> None:
    config = tmp_path / "runner.json"
    config.write_text("{}")
    result = CliRunner().invoke(
        eval_agent_command,
        [
            "--runner-config",
            str(config),
            "--project",
            str(REPO),
            "--resume",
            str(tmp_path),
            *options,
        ],
    )
    assert result.exit_code == 2, result.output
    assert said in result.output and "Traceback" not in result.output


def test_resume_of_a_directory_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    config.write_text("{}")
    result = CliRunner().invoke(
        eval_agent_command,
        ["--runner-config", str(config), "--resume", str(tmp_path / "gone")],
    )
    assert result.exit_code == 2 and "--resume" in result.output, result.output
