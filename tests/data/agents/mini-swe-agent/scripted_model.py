"""A scripted OpenAI-compatible model for mini-swe-agent: a fake provider behind the gateway.

    python3 -B scripted_model.py PORT LOG MARKER SCRIPT

It serves ``POST /v1/chat/completions`` on PORT on every address of its container,
which sits on a test network the gateway reaches (the runner reaches only the gateway),
and appends each request to LOG, tagged with the attempt number the test wrote to MARKER.
Every answer is one ``bash`` tool call.

Scripts:

* ``correct`` — writes solutions/correct.py, probes the shell's imports, submits;
* ``repair`` — solutions/wrong.py first, solutions/correct.py once the prompt
  carries repair feedback;
* ``printenv`` — runs ``env`` first, then as ``correct``;
* ``slow`` — every command takes five seconds: the harness's deadline comes first;
* ``loop`` — quick commands that never submit: mini's own step limit comes first.

The log keeps each request's method, path, body and a sha256 of its
Authorization header, never the header itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REQUESTS: list[dict[str, Any]] = []
PORT, LOG, MARKER, SCRIPT = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
LOCK = threading.Lock()


PROBE = (
    "python3 -c 'import appkit, importlib.util as u; "
    'print(appkit.__file__); print("litellm", u.find_spec("litellm"))\''
)


def next_command(body: dict[str, Any]) -> str:
    messages = body.get("messages", [])
    if SCRIPT == "slow":
        return "sleep 5; echo still working"
    if SCRIPT == "loop":
        return "echo still working"
    repairing = "Failed checks:" in json.dumps(messages)
    name = "correct" if SCRIPT in ("correct", "printenv") or repairing else "wrong"
    done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
    if SCRIPT == "printenv":
        if done == 0:
            return "env"
        done -= 1
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
        entry = {
            "attempt": int(MARKER.read_text(encoding="utf-8") or 0),
            "method": self.command,
            "path": self.path,
            "authSha256": hashlib.sha256(auth.encode()).hexdigest() if auth else None,
            "contentType": self.headers.get("Content-Type"),
            "body": body,
        }
        with LOCK, open(LOG, "a", encoding="utf-8") as handle:
            REQUESTS.append(entry)
            handle.write(json.dumps(entry) + "\n")

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
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
