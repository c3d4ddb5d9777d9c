"""A scripted Anthropic Messages endpoint for Claude Code: a fake provider behind the gateway.

    python3 model_server.py SCRIPT.json MODE

It serves on SCRIPT's ``port`` on every address of its container, which sits on a test
network the gateway reaches (the runner reaches only the gateway).

SCRIPT.json: ``{"port", "log", "marker", "file", "first", "repair"}``. MODE is
``correct`` (always write ``repair``), ``repair`` (write ``first`` unless the
prompt says the previous submission failed verification, then ``repair``),
``printenv`` (first ask the Bash tool to print the environment, then write
``repair``), ``unauthorized`` (refuse every message with a 401, as a provider
refuses a revoked key) or ``hang`` (accept the request and never answer). On a repair it
reads the file first (the CLI refuses to overwrite a file it has not read);
after its Write it closes with a text turn.

Every request is appended to ``log`` as one JSON line, tagged with the attempt
number the test wrote to ``marker``: method, path, header names, the API
version, the key's SHA-256 (never the key), the model, whether it streams, the
tool names, the message roles, the prompt text and the tools' results.
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

SCRIPT: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
MODE = sys.argv[2]
LOCK = threading.Lock()


def log(entry: dict[str, Any]) -> None:
    entry["attempt"] = int(Path(SCRIPT["marker"]).read_text(encoding="utf-8") or 0)
    with LOCK, open(SCRIPT["log"], "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict)]


def sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def reply(model: str, block: dict[str, Any], deltas: list[dict[str, Any]], stop: str) -> bytes:
    message = {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }  # fmt: skip
    return sse(
        [
            ("message_start", {"type": "message_start", "message": message}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block}),
            *[("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d})
              for d in deltas],
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ]
    )  # fmt: skip


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self, body: dict[str, Any] | None) -> None:
        key = self.headers.get("x-api-key") or self.headers.get("authorization") or ""
        entry: dict[str, Any] = {
            "method": self.command,
            "path": self.path,
            "headers": sorted(h.lower() for h in self.headers),
            "anthropicVersion": self.headers.get("anthropic-version"),
            "apiKeySha256": hashlib.sha256(key.encode()).hexdigest() if key else None,
        }
        if body is not None:
            messages = body.get("messages", [])
            entry.update(
                model=body.get("model"),
                stream=body.get("stream"),
                tools=[t.get("name") for t in body.get("tools", [])],
                roles=[m.get("role") for m in messages],
                prompt="\n".join(t for m in messages if m.get("role") == "user"
                                 for t in texts(m.get("content"))),
                toolResults=json.dumps([b.get("content") for m in messages
                                        if isinstance(m.get("content"), list)
                                        for b in m["content"] if isinstance(b, dict)
                                        and b.get("type") == "tool_result"]),
            )  # fmt: skip
        log(entry)

    def do_HEAD(self) -> None:
        self._record(None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._record(None)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self._record(body)
        if not self.path.startswith("/v1/messages") or self.path.startswith(
            "/v1/messages/count_tokens"
        ):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if MODE == "hang":
            time.sleep(3600)
        if MODE == "unauthorized":
            data = json.dumps(
                {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                }
            )
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(self.answer(body))
        self.wfile.flush()
        self.close_connection = True

    def answer(self, body: dict[str, Any]) -> bytes:
        model = str(body.get("model"))
        messages = body.get("messages", [])
        tool_names = {t.get("name") for t in body.get("tools", [])}
        used = [
            b.get("name")
            for m in messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        prompt = "\n".join(t for m in messages if m.get("role") == "user"
                           for t in texts(m.get("content")))  # fmt: skip
        repairing = "failed verification" in prompt
        if MODE == "printenv" and "Bash" not in used:
            return tool_use(model, "Bash", {"command": "env", "description": "print the env"})
        if "Write" in used or "Write" not in tool_names:
            return reply(model, {"type": "text", "text": ""},
                         [{"type": "text_delta", "text": "Done."}], "end_turn")  # fmt: skip
        if repairing and "Read" not in used:
            # The CLI refuses to overwrite a file it has not read in this session.
            return tool_use(model, "Read", {"file_path": SCRIPT["file"]})
        content = SCRIPT["repair"] if MODE == "correct" or repairing else SCRIPT["first"]
        return tool_use(model, "Write", {"file_path": SCRIPT["file"], "content": content})


def tool_use(model: str, name: str, arguments: dict[str, Any]) -> bytes:
    return reply(
        model,
        {"type": "tool_use", "id": f"toolu_{name.lower()}", "name": name, "input": {}},
        [{"type": "input_json_delta", "partial_json": json.dumps(arguments)}],
        "tool_use",
    )


if __name__ == "__main__":
    server = ThreadingHTTPServer(("0.0.0.0", int(SCRIPT["port"])), Handler)
    server.daemon_threads = True
    server.serve_forever()
