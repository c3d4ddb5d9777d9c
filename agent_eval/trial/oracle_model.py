"""A scripted Anthropic Messages API that answers every task with its reference solution.

    python3 oracle_model.py ANSWERS.json

It stands for a model provider in ``agent-eval try-agent``: it runs in a
container of its own on the trial's network, and the batch's gateway reaches
it as an upstream, exactly as it would reach a real provider. It needs only
the standard library (it runs in the gateway image, as an unprivileged user).

ANSWERS.json: ``{"port", "served", "tasks": [{"title", "files": {name: text}}]}``;
with ``"unix": PATH`` instead of a port it serves on that Unix socket (as the
gateway would: the benchmark of the gateway's cost puts it in its place); with
``"delayS": SECONDS`` every model turn is answered that long after it was asked
(a real model's latency: the benchmark of runs in flight waits on it).
A conversation is matched to a task by the task's title in its first user
message. The answer is one ``Write`` tool call per file not yet written in
this conversation (the CLI runs its tools and comes back), then a short text
turn. Each file is read first: the CLI refuses to overwrite a file it has
not read (a task's starter file, or the submission a repair replaces).
``GET /v1/models/<id>`` answers the gateway's preflight.
Nothing here is evidence: the gateway records what this server said.
"""

from __future__ import annotations

import json
import os
import re
import socketserver
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ANSWERS: dict[str, Any] = {}
"""ANSWERS.json, read at start."""
_WHERE = re.compile(r"Write only these files in (\S+): ")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict)]


def _events(model: str, block: dict[str, Any], delta: dict[str, Any], stop: str) -> bytes:
    message: dict[str, Any] = {
        "id": "msg_oracle", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 1},
    }  # fmt: skip
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 50}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events)


def _tool(name: str, arguments: dict[str, Any], number: int) -> bytes:
    block = {"type": "tool_use", "id": f"toolu_oracle_{number}", "name": name, "input": {}}
    delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
    return _events(ANSWERS["served"], block, delta, "tool_use")


def _text(text: str) -> bytes:
    block = {"type": "text", "text": ""}
    return _events(ANSWERS["served"], block, {"type": "text_delta", "text": text}, "end_turn")


def answer(body: dict[str, Any]) -> bytes:
    """The next turn of the conversation in *body*."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    prompt = "\n".join(
        t for m in messages if m.get("role") == "user" for t in _texts(m.get("content"))
    )
    task = next((t for t in ANSWERS["tasks"] if t["title"] in prompt), None)
    where = _WHERE.search(prompt)
    if (
        task is None
        or where is None
        or not any(b.get("name") == "Write" for b in body.get("tools", []))
    ):
        # Not a task conversation (a title or topic request, say): a plain answer.
        return _text("Nothing to do.")
    used = [
        b
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    read = {b.get("input", {}).get("file_path") for b in used if b.get("name") == "Read"}
    written = {b.get("input", {}).get("file_path") for b in used if b.get("name") == "Write"}
    for name, text in sorted(task["files"].items()):
        path = f"{where.group(1).rstrip('/')}/{name}"
        if path in written:
            continue
        if path not in read:  # a starter file or the last submission may be there
            return _tool("Read", {"file_path": path}, len(used))
        return _tool("Write", {"file_path": path, "content": text}, len(used))
    return _text("Done: the solution is written.")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, kind: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_HEAD(self) -> None:
        self._send(200, "application/json", b"")

    def do_GET(self) -> None:
        if self.path.startswith("/v1/models/"):
            model = {"type": "model", "id": ANSWERS["served"], "display_name": "oracle"}
            self._send(200, "application/json", json.dumps(model).encode())
        else:
            self._send(404, "application/json", b"{}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
            self._send(404, "application/json", b"{}")
            return
        time.sleep(float(ANSWERS.get("delayS", 0)))
        self._send(200, "text/event-stream", answer(body))
        self.close_connection = True


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


if __name__ == "__main__":
    ANSWERS.update(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
    server: socketserver.BaseServer
    if "unix" in ANSWERS:
        server = UnixHTTPServer(ANSWERS["unix"], Handler)
        os.chmod(ANSWERS["unix"], 0o666)
    else:
        server = ThreadingHTTPServer(("0.0.0.0", int(ANSWERS["port"])), Handler)
        server.daemon_threads = True
    print("listening", flush=True)
    server.serve_forever()
