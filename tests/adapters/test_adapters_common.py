"""Adapters answer every request with exactly one response on stdout, never leak the
CLI's output into it, kill the CLI's whole process group at the deadline, and pass the
repair feedback (failed ids and diagnostics) into the prompt, nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_eval.adapters.common import build_prompt, read_request, run_cli
from tests.paths import REPO


def request(tmp_path: Path, attempt: int = 1, budget_ms: int = 20_000) -> dict[str, object]:
    data: dict[str, object] = {
        "schemaVersion": 1, "runId": "forms-1", "taskId": "forms", "taskText": "Build it.",
        "consumerDir": "/consumer", "outputDir": str(tmp_path),
        "allowedOutputPaths": ["solution.py"], "attempt": attempt, "timeBudgetMs": budget_ms,
        "repairFeedback": None,
    }  # fmt: skip
    if attempt == 2:
        data["repairFeedback"] = {
            "schemaVersion": 1,
            "failedAssertionIds": ["user-values-escaped"],
            "diagnostics": [
                {"category": "type-error", "message": "bad type", "path": "solution.py", "line": 3}
            ],
        }
    return data


def test_the_repair_prompt_carries_ids_and_diagnostics(tmp_path: Path) -> None:
    prompt = build_prompt(read_request(json.dumps(request(tmp_path, attempt=2))))
    assert "Build it." in prompt and "user-values-escaped" in prompt
    assert "[type-error] solution.py:3 bad type" in prompt
    assert "failed verification" not in build_prompt(read_request(json.dumps(request(tmp_path))))


def test_the_command_adapter_prints_one_response_and_keeps_cli_output_off_stdout(
    tmp_path: Path,
) -> None:
    script = "print('noise on stdout'); open('solution.py', 'w').write('x = 1\\n')"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_eval.adapters.command",
            "--model",
            "m",
            "--setting",
            "temperature=0",
            "--",
            sys.executable,
            "-c",
            script,
        ],
        input=json.dumps(request(tmp_path)),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    response = json.loads(done.stdout)
    assert done.stdout.count("\n") == 1 and response["status"] == "completed"
    assert response["model"] == {"id": "m", "settings": {"temperature": 0}}
    assert response["runner"]["name"] == "command"
    assert "noise on stdout" in done.stderr
    assert (tmp_path / "solution.py").read_text() == "x = 1\n"


def test_a_cli_failure_is_reported_as_failed(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent_eval.adapters.command", "--model", "m", "--", "false"],
        input=json.dumps(request(tmp_path)),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert json.loads(done.stdout)["status"] == "failed"


@pytest.mark.slow
def test_the_whole_process_group_is_killed_at_the_deadline(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild-alive"
    grandchild = tmp_path / "grandchild.py"
    grandchild.write_text(f"import time\ntime.sleep(3)\nopen({str(marker)!r}, 'w').close()\n")
    parent = tmp_path / "parent.py"
    parent.write_text(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(grandchild)!r}])\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    result = run_cli([sys.executable, str(parent)], cwd=tmp_path, env={}, timeout_s=1.0)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 10
    time.sleep(3.5)
    assert not marker.exists()
