"""A scripted OpenAI Responses endpoint for Codex CLI: a fake provider behind the gateway.

    python3 model_server.py SCRIPT.json MODE

It serves on SCRIPT's ``port`` on every address of its container, which sits on a test
network the gateway reaches (the runner reaches only the gateway).

SCRIPT.json: ``{"port", "log", "marker", "file", "first", "repair"}``. MODE
is ``correct`` (always write ``repair``), ``repair`` (write ``first`` unless
the prompt says the previous submission failed verification, then
``repair``), ``printenv`` (first run ``env`` with the command tool, then write
``repair``) or ``hang`` (accept the request and never answer). The file is
written by one ``exec_command`` function call; a request whose input ends
with the last call's output is answered with a closing message.

Every request is appended to ``log`` as one JSON line, tagged with the attempt
number the test wrote to ``marker``: method, path, header names, the key's
SHA-256 (never the key), the model, whether it streams, the tool names, the
input item types, the prompt text and the calls' outputs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SCRIPT: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
MODE = sys.argv[2]
LOCK = threading.Lock()


def log(entry: dict[str, Any]) -> None:
    entry["attempt"] = int(Path(SCRIPT["marker"]).read_text(encoding="utf-8") or 0)
    with LOCK, open(SCRIPT["log"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def user_text(items: list[Any]) -> str:
    parts = []
    for item in items:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                parts.append(content)
            else:
                parts += [c.get("text", "") for c in content or [] if isinstance(c, dict)]
    return "\n".join(parts)


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def stream(model: str, item: dict[str, Any], deltas: list[str]) -> bytes:
    response = {"id": "resp_scripted", "object": "response", "model": model,
                "status": "in_progress", "output": []}  # fmt: skip
    done = {**response, "status": "completed", "output": [item],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}  # fmt: skip
    started = {**item, "status": "in_progress"}
    if item["type"] == "message":
        started["content"] = []
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "output_index": 0, "item": started},
        *[{"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
           "item_id": item["id"], "delta": d} for d in deltas],
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": done},
    ]  # fmt: skip
    return sse(events)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self, body: dict[str, Any] | None) -> None:
        key = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        entry: dict[str, Any] = {
            "method": self.command,
            "path": self.path,
            "headers": sorted(h.lower() for h in self.headers),
            "apiKeySha256": hashlib.sha256(key.encode()).hexdigest() if key else None,
        }
        if body is not None:
            items = body.get("input", [])
            entry.update(
                model=body.get("model"),
                stream=body.get("stream"),
                tools=[t.get("name") or t.get("type") for t in body.get("tools", [])],
                inputTypes=[i.get("type") for i in items if isinstance(i, dict)],
                prompt=user_text(items),
                toolResults=json.dumps([i.get("output") for i in items if isinstance(i, dict)
                                        and i.get("type") == "function_call_output"]),
            )  # fmt: skip
        log(entry)

    def _empty(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._record(None)
        self._empty(404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self._record(body)
        if not self.path.endswith("/responses"):
            self._empty(404)
            return
        if MODE == "hang":
            time.sleep(3600)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(self.answer(body))
        self.wfile.flush()
        self.close_connection = True

    def answer(self, body: dict[str, Any]) -> bytes:
        model = str(body.get("model"))
        items = [i for i in body.get("input", []) if isinstance(i, dict)]
        outputs = sum(1 for i in items if i.get("type") == "function_call_output")
        if MODE == "printenv" and outputs == 0:
            call = {"type": "function_call", "id": "fc_env", "call_id": "call_env",
                    "name": "exec_command", "arguments": json.dumps({"cmd": "env"}),
                    "status": "completed"}  # fmt: skip
            return stream(model, call, [])
        if (
            items
            and items[-1].get("type") == "function_call_output"
            and (MODE != "printenv" or outputs >= 2)
        ):
            message = {"type": "message", "id": "msg_scripted", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": "Done.",
                                    "annotations": []}]}  # fmt: skip
            return stream(model, message, ["Done."])
        repairing = "failed verification" in user_text(items)
        content = SCRIPT["repair"] if MODE == "correct" or repairing else SCRIPT["first"]
        encoded = base64.b64encode(content.encode()).decode()
        command = f"echo {encoded} | base64 -d > {shlex.quote(SCRIPT['file'])}"
        call = {"type": "function_call", "id": "fc_scripted", "call_id": "call_scripted",
                "name": "exec_command", "arguments": json.dumps({"cmd": command}),
                "status": "completed"}  # fmt: skip
        return stream(model, call, [])


if __name__ == "__main__":
    server = ThreadingHTTPServer(("0.0.0.0", int(SCRIPT["port"])), Handler)
    server.daemon_threads = True
    server.serve_forever()
