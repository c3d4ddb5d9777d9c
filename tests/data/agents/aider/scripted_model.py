"""A scripted OpenAI-compatible model for aider: a fake provider behind the gateway.

    python3 -B scripted_model.py PORT LOG MARKER SCRIPT

It serves ``POST /v1/chat/completions`` on PORT on every address of its container,
which sits on a test network the gateway reaches (the runner reaches only the gateway),
and appends each request to LOG, tagged with the attempt number the test wrote to MARKER.

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


def reply_text(body: dict[str, Any]) -> str:
    prompt = json.dumps(body.get("messages", []))
    repairing = "Failed checks:" in prompt
    name = "correct" if SCRIPT == "correct" or repairing else "wrong"
    code = (HERE / "solutions" / f"{name}.py").read_text(encoding="utf-8")
    text = f"solution.py\n```python\n{code.rstrip()}\n```\n"
    return text


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
            if index == len(deltas):
                chunk["usage"] = {"prompt_tokens": 12, "completion_tokens": 34}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main() -> int:
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
