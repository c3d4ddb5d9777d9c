"""A scripted OpenAI-compatible model for aider, started inside the test container.

    python3 -B scripted_model.py SCRIPT -- ADAPTER-ARGV...

The wrapper reads the runner request, serves ``POST /v1/chat/completions`` on
127.0.0.1 (the container keeps network none), points the adapter at it
through ``OPENAI_API_BASE``, runs the adapter with the request on stdin and
passes its stdout on unchanged. Afterwards it writes the request log to
``/solution/.scripted-model-attempt-<n>.jsonl``, a name outside the task's
allowed output paths: the harness records it as refused and never grades it.

Scripts (aider's whole-file edit format, streamed as SSE or plain JSON):

* ``correct`` — answers with solutions/correct.py;
* ``repair`` — solutions/wrong.py, and solutions/correct.py once the prompt
  carries repair feedback;
* ``never`` — never answers.

The log keeps each request's method, path, body and a sha256 of its
Authorization header, never the header itself.
"""

from __future__ import annotations

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


def reply_text(body: dict[str, Any]) -> str:
    prompt = json.dumps(body.get("messages", []))
    repairing = "Failed checks:" in prompt
    name = "correct" if SCRIPT == "correct" or repairing else "wrong"
    code = (HERE / "solutions" / f"{name}.py").read_text(encoding="utf-8")
    return f"solution.py\n```python\n{code.rstrip()}\n```\n"


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
        if SCRIPT == "never":
            time.sleep(3600)
            return
        text = reply_text(body)
        model = str(body.get("model", "scripted"))
        if body.get("stream"):
            self._stream(model, text)
        else:
            self._json(model, text)

    def _json(self, model: str, text: str) -> None:
        data = json.dumps(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
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

    def _stream(self, model: str, text: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        pieces = [text[i : i + 400] for i in range(0, len(text), 400)]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": piece} for piece in pieces]
        for index, delta in enumerate([*deltas, {}]):
            chunk = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "finish_reason": "stop" if index == len(deltas) else None,
                    }
                ],
            }
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


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
