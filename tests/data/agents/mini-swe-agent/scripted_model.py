"""A scripted OpenAI-compatible model for mini-swe-agent, started inside the test container.

    python3 -B scripted_model.py SCRIPT -- ADAPTER-ARGV...

The wrapper reads the runner request, serves ``POST /v1/chat/completions`` on
127.0.0.1 (the container keeps network none), points the adapter at it
through ``OPENAI_API_BASE``, runs the adapter with the request on stdin and
passes its stdout on unchanged. Afterwards it writes the request log to
``/solution/.scripted-model-attempt-<n>.jsonl``, a name outside the task's
allowed output paths: the harness records it as refused and never grades it.

Every reply is one ``bash`` tool call, chosen by how many tool results the
request already carries: write solution.py, then show what the agent's own
Python imports, then ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``.

* ``correct`` — writes solutions/correct.py;
* ``repair`` — solutions/wrong.py, and solutions/correct.py once the task
  carries repair feedback;
* ``never`` — keeps running harmless commands, never submits.

The log keeps each request's method, path, body and a sha256 of its
Authorization header, never the header itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REQUESTS: list[dict[str, Any]] = []
SCRIPT = sys.argv[1]


PROBE = (
    "python3 -c 'import appkit, importlib.util as u; "
    'print(appkit.__file__); print("litellm", u.find_spec("litellm"))\''
)


def next_command(body: dict[str, Any]) -> str:
    messages = body.get("messages", [])
    if SCRIPT == "never":
        return "sleep 1; echo still working"
    repairing = "Failed checks:" in json.dumps(messages)
    name = "correct" if SCRIPT == "correct" or repairing else "wrong"
    done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
    if done == 0:
        code = (HERE / "solutions" / f"{name}.py").read_bytes()
        encoded = base64.b64encode(code).decode()
        return (
            "python3 -c 'import base64, sys; "
            'open("solution.py", "wb").write(base64.b64decode(sys.argv[1]))\' ' + encoded
        )
    if done == 1:
        return PROBE
    return "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self, body: Any) -> None:
        auth = self.headers.get("Authorization", "")
        REQUESTS.append(
            {
                "method": self.command,
                "path": self.path,
                "authSha256": hashlib.sha256(auth.encode()).hexdigest() if auth else None,
                "contentType": self.headers.get("Content-Type"),
                "body": body,
            }
        )

    def do_GET(self) -> None:
        self._record(None)
        self.send_error(404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"unparsed": raw[:2000].decode("utf-8", "replace")}
        self._record(body)
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        command = next_command(body)
        data = json.dumps(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": str(body.get("model", "scripted")),
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": "Next step.",
                            "tool_calls": [
                                {
                                    "id": f"call_{len(REQUESTS)}",
                                    "type": "function",
                                    "function": {
                                        "name": "bash",
                                        "arguments": json.dumps({"command": command}),
                                    },
                                }
                            ],
                        },
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> int:
    adapter = sys.argv[sys.argv.index("--") + 1 :]
    request = sys.stdin.buffer.read()
    attempt = json.loads(request)["attempt"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "OPENAI_API_BASE": f"http://127.0.0.1:{server.server_port}/v1"}
    done = subprocess.run(adapter, input=request, stdout=subprocess.PIPE, env=env, check=False)
    log = Path("/solution") / f".scripted-model-attempt-{attempt}.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in REQUESTS), encoding="utf-8")
    sys.stdout.buffer.write(done.stdout)
    sys.stdout.flush()
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
