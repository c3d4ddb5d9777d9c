"""A scripted model provider that answers every task with a planned solution.

    python3 oracle_model.py ANSWERS.json

It stands for a model provider in ``agent-eval try-agent``: it runs in a
container of its own on the trial's network, and the batch's gateway reaches
it as an upstream, exactly as it would reach a real provider. It needs only
the standard library (it runs in the gateway image, as an unprivileged user).

ANSWERS.json: ``{"port", "served", "tasks": [{"title", "files": {name: text},
"first": {name: text}}]}``; ``first`` (optional) is what a first attempt
writes instead of ``files``, a planned failure that its repair then fixes
(a conversation is a repair when its prompt says the previous submission
failed verification). With ``"unix": PATH`` instead of a port it serves on
that Unix socket (as the gateway would: the benchmark of the gateway's cost
puts it in its place); with ``"delayS": SECONDS`` every model turn is
answered that long after it was asked (a real model's latency: the benchmark
of runs in flight waits on it).

A conversation is matched to a task by the task's title in its user messages.
It speaks two provider APIs:

- Anthropic Messages (``POST /v1/messages``, streamed), as Claude Code asks it:
  one ``Write`` tool call per file not yet written in this conversation (the
  CLI runs its tools and comes back), then a short text turn. Each file is
  read first: the CLI refuses to overwrite a file it has not read (a task's
  starter file, or the submission a repair replaces).
- OpenAI Chat Completions (``POST /v1/chat/completions``), as mini-swe-agent
  asks it: one ``bash`` tool call that writes every file, then the command
  that submits.

``GET /v1/models/<id>`` answers the gateway's preflight.
Nothing here is evidence: the gateway records what this server said.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import socketserver
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ANSWERS: dict[str, Any] = {}
"""ANSWERS.json, read at start."""
_WHERE = re.compile(r"Write only these files in (\S+): ")
_REPAIR = "Your previous submission (still in the working directory) failed verification."
"""How a repair's prompt begins its feedback (the adapters' build_prompt)."""
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
"""The command with which mini-swe-agent submits."""
USAGE = {"input": 100, "output": 50}
"""Tokens each answer says it used."""


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict)]


def _events(model: str, block: dict[str, Any], delta: dict[str, Any], stop: str) -> bytes:
    message: dict[str, Any] = {
        "id": "msg_oracle", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": USAGE["input"], "output_tokens": 1},
    }  # fmt: skip
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": USAGE["output"]}}),
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


def planned(messages: list[dict[str, Any]]) -> tuple[str, dict[str, str]] | None:
    """The output directory and the files this conversation's plan writes, or None
    when it is not a task conversation (a title or topic request, say)."""
    prompt = "\n".join(
        t for m in messages if m.get("role") == "user" for t in _texts(m.get("content"))
    )
    task = next((t for t in ANSWERS["tasks"] if t["title"] in prompt), None)
    where = _WHERE.search(prompt)
    if task is None or where is None:
        return None
    files = task["files"] if _REPAIR in prompt else task.get("first", task["files"])
    return where.group(1).rstrip("/"), files


def answer(body: dict[str, Any]) -> bytes:
    """The next turn of the Anthropic Messages conversation in *body*."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    plan = planned(messages)
    if plan is None or not any(b.get("name") == "Write" for b in body.get("tools", [])):
        return _text("Nothing to do.")
    where, files = plan
    used = [
        b
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    read = {b.get("input", {}).get("file_path") for b in used if b.get("name") == "Read"}
    written = {b.get("input", {}).get("file_path") for b in used if b.get("name") == "Write"}
    for name, text in sorted(files.items()):
        path = f"{where}/{name}"
        if path in written:
            continue
        if path not in read:  # a starter file or the last submission may be there
            return _tool("Read", {"file_path": path}, len(used))
        return _tool("Write", {"file_path": path, "content": text}, len(used))
    return _text("Done: the solution is written.")


def _write_command(where: str, files: dict[str, str]) -> str:
    """One shell command that writes *files* under *where*, whatever bytes they hold."""
    steps = []
    for name, text in sorted(files.items()):
        path = shlex.quote(f"{where}/{name}")
        encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
        steps.append(f'mkdir -p "$(dirname {path})" && printf %s {encoded} | base64 -d > {path}')
    return " && ".join(steps)


def chat_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The next turn of the OpenAI Chat Completions conversation in *body*: the files
    in one bash call, then the submission (a plain answer without a bash tool)."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    plan = planned(messages)
    calls = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
    offers_bash = any(
        isinstance(t, dict) and t.get("function", {}).get("name") == "bash"
        for t in body.get("tools", [])
    )
    message: dict[str, Any] = {"role": "assistant", "content": "Nothing to do."}
    if plan is not None and offers_bash:
        command = _write_command(*plan) if calls == 0 else SUBMIT
        message = {
            "role": "assistant",
            "content": "Writing the solution." if calls == 0 else "Submitting.",
            "tool_calls": [{
                "id": f"call_oracle_{calls}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }],
        }  # fmt: skip
    return {
        "id": "chatcmpl-oracle", "object": "chat.completion", "created": 0,
        "model": ANSWERS["served"],
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
        "usage": {"prompt_tokens": USAGE["input"], "completion_tokens": USAGE["output"],
                  "total_tokens": USAGE["input"] + USAGE["output"]},
    }  # fmt: skip


def chat_events(completion: dict[str, Any]) -> bytes:
    """*completion* as a Chat Completions stream: the whole message in one chunk, then
    the usage, then ``[DONE]``."""
    choice = completion["choices"][0]
    base = {k: completion[k] for k in ("id", "created", "model")}
    chunks = [
        {**base, "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": choice["message"], "finish_reason": choice["finish_reason"]}
        ]},
        {**base, "object": "chat.completion.chunk", "choices": [],
         "usage": completion["usage"]},
    ]  # fmt: skip
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


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
            model = {"type": "model", "object": "model", "id": ANSWERS["served"],
                     "display_name": "oracle"}  # fmt: skip
            self._send(200, "application/json", json.dumps(model).encode())
        else:
            self._send(404, "application/json", b"{}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.startswith("/v1/messages") and "count_tokens" not in self.path:
            time.sleep(float(ANSWERS.get("delayS", 0)))
            self._send(200, "text/event-stream", answer(body))
        elif self.path.startswith("/v1/chat/completions"):
            time.sleep(float(ANSWERS.get("delayS", 0)))
            completion = chat_answer(body)
            if body.get("stream"):
                self._send(200, "text/event-stream", chat_events(completion))
            else:
                self._send(200, "application/json", json.dumps(completion).encode())
        else:
            self._send(404, "application/json", b"{}")
            return
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
