"""Adapters answer every request with exactly one response on stdout, never leak the
CLI's output into it, say how a failed attempt failed, kill the CLI's whole process group
at the deadline, pass the repair feedback (failed ids and diagnostics) into the prompt,
nothing else, and reach the model only by a loopback relay to the gateway's socket."""

from __future__ import annotations

import http.server
import json
import socketserver
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_eval.adapters import common
from agent_eval.adapters.common import (
    MODELS_ENV,
    TOKEN_ENV,
    build_prompt,
    gateway_endpoint,
    provider_failure_in,
    read_request,
    run_cli,
)
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


def test_a_runner_that_fails_by_itself_says_error_and_one_that_gives_up_says_nothing(
    tmp_path: Path,
) -> None:
    def answer(*extra: str) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "agent_eval.adapters.command", "--model", "m", *extra],
            input=json.dumps(request(tmp_path)), capture_output=True, text=True, cwd=REPO,
            timeout=60, check=False,
        )  # fmt: skip
        response: dict[str, object] = json.loads(done.stdout)
        return response

    crashed = answer()  # no CLI given: the adapter itself fails
    assert (crashed["status"], crashed["failureKind"]) == ("failed", "error")
    gave_up = answer("--", "false")
    assert gave_up["status"] == "failed" and "failureKind" not in gave_up


class _Unix(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"path": self.path, "key": self.headers.get("x-api-key")}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass

    def address_string(self) -> str:
        return "gateway"


@pytest.fixture
def gateway_socket(tmp_path: Path) -> Iterator[Path]:
    server = _Unix(str(tmp_path / "anthropic.sock"), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield tmp_path
    server.shutdown()
    server.server_close()


def test_the_relay_carries_the_clis_requests_to_the_gateways_socket(gateway_socket: Path) -> None:
    environ = {MODELS_ENV: "anthropic", TOKEN_ENV: "ae-token"}
    endpoint = gateway_endpoint(None, environ, gateway_dir=str(gateway_socket))
    assert endpoint.token == "ae-token" and endpoint.base_url.startswith("http://127.0.0.1:")
    ask = urllib.request.Request(f"{endpoint.base_url}/v1/models/m", headers={"x-api-key": "t"})
    with urllib.request.urlopen(ask, timeout=10) as answer:
        assert json.loads(answer.read()) == {"path": "/v1/models/m", "key": "t"}


@pytest.mark.parametrize(
    ("environ", "upstream", "message"),
    [
        ({}, None, "no model gateway"),
        ({MODELS_ENV: "a,b", TOKEN_ENV: "t"}, None, "pass --upstream"),
        ({MODELS_ENV: "a", TOKEN_ENV: "t"}, "b", "no upstream 'b'"),
    ],
)
def test_without_a_gateway_or_with_an_unknown_upstream_the_runner_fails_clearly(
    environ: dict[str, str], upstream: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        gateway_endpoint(upstream, environ)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("litellm.AuthenticationError: OpenAIException - invalid api key", True),
        ("Error: 429 Too Many Requests", True),
        ("API Error: 529 Overloaded", True),
        ("wrote 429 lines to solution.py", False),
        ("all tests passed", False),
    ],
)
def test_a_provider_failure_is_recognised_in_a_clis_output(text: str, found: bool) -> None:
    assert (provider_failure_in(f"noise\n{text}\nmore") is not None) == found


def test_a_transcript_keeps_json_objects_wraps_other_lines_and_marks_a_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "MAX_TRANSCRIPT_BYTES", 64)
    common.keep_transcript(
        [
            '{"type": "start"}',
            "plain text",
            "",
            "[1, 2]",
            '{"type": "x", "pad": "' + "p" * 80 + '"}',
        ],
        str(tmp_path),
    )
    lines = [json.loads(line) for line in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    assert lines[:3] == [{"type": "start"}, {"text": "plain text"}, {"text": "[1, 2]"}]
    assert lines[3]["agentEvalTranscriptCut"] is True and lines[3]["droppedBytes"] > 80


def test_a_transcript_is_never_written_through_a_link_or_without_its_directory(
    tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (tmp_path / "transcript.jsonl").symlink_to(target)
    common.keep_transcript(['{"a": 1}'], str(tmp_path))
    assert target.read_text() == "untouched"
    common.keep_transcript(['{"a": 1}'], str(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists()
