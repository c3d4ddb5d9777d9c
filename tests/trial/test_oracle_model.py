"""The scripted model of try-agent answers a task conversation turn by turn.

Invariants: a conversation is matched to its task by the title; each file is
read before it is written (the CLI refuses to overwrite an unread file), in
the output directory the prompt names; once every file is written the turn
is text; a conversation that matches no task, or offers no Write tool, gets
text and no tool call. A delay asked for holds every model turn that long (a real
model's latency), never the preflight.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from agent_eval.trial import oracle_model

TITLE = "A task with two files"
PROMPT = f"# {TITLE}\n\nDo it.\n\nWrite only these files in /solution: a.py, b.py. Work on.\n"


@pytest.fixture(autouse=True)
def answers() -> Iterator[None]:
    oracle_model.ANSWERS.update(
        {"port": 1, "served": "model-1", "tasks": [
            {"title": TITLE, "files": {"a.py": "A = 1\n", "b.py": "B = 2\n"}},
        ]}
    )  # fmt: skip
    yield
    oracle_model.ANSWERS.clear()


def turn(data: bytes) -> tuple[str, dict[str, Any] | str]:
    """The one content block of a streamed answer: a tool call with its input, or text."""
    events = [
        json.loads(line.removeprefix("data: "))
        for line in data.decode().splitlines()
        if line.startswith("data: ")
    ]
    start = next(e for e in events if e["type"] == "content_block_start")["content_block"]
    delta = next(e for e in events if e["type"] == "content_block_delta")["delta"]
    assert next(e for e in events if e["type"] == "message_start")["message"]["model"] == "model-1"
    if start["type"] == "tool_use":
        return start["name"], json.loads(delta["partial_json"])
    return "text", delta["text"]


def conversation(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": PROMPT}]}
    ]
    for number, (name, arguments) in enumerate(calls):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{number}", "name": name, "input": arguments}
        ]})  # fmt: skip
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{number}", "content": "ok"}
        ]})  # fmt: skip
    return {"model": "m", "messages": messages, "tools": [{"name": "Read"}, {"name": "Write"}]}


def test_every_file_is_read_then_written_in_the_named_directory_then_the_turn_is_text() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(4):
        name, arguments = turn(oracle_model.answer(conversation(*calls)))
        assert isinstance(arguments, dict)
        calls.append((name, arguments))
    assert calls == [
        ("Read", {"file_path": "/solution/a.py"}),
        ("Write", {"file_path": "/solution/a.py", "content": "A = 1\n"}),
        ("Read", {"file_path": "/solution/b.py"}),
        ("Write", {"file_path": "/solution/b.py", "content": "B = 2\n"}),
    ]
    assert turn(oracle_model.answer(conversation(*calls)))[0] == "text"


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "write a title for this chat"}],
         "tools": [{"name": "Write"}]},
        {"messages": [{"role": "user", "content": PROMPT}], "tools": []},
        {"messages": [{"role": "user", "content": f"# {TITLE}\nno output line"}],
         "tools": [{"name": "Write"}]},
    ],
    ids=["another-conversation", "no-write-tool", "no-output-directory"],
)  # fmt: skip
def test_a_conversation_that_is_not_a_task_gets_text_and_no_tool_call(
    body: dict[str, Any],
) -> None:
    assert turn(oracle_model.answer(body))[0] == "text"


def test_a_model_turn_is_answered_after_the_delay_asked_and_a_preflight_at_once() -> None:
    oracle_model.ANSWERS["delayS"] = 0.5
    server = ThreadingHTTPServer(("127.0.0.1", 0), oracle_model.Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host, port = server.server_address[:2]

        def timed(method: str, path: str, body: bytes | None = None) -> tuple[int, float]:
            connection = http.client.HTTPConnection(str(host), int(port), timeout=10)
            started = time.monotonic()
            connection.request(method, path, body=body)
            response = connection.getresponse()
            response.read()
            connection.close()
            return response.status, time.monotonic() - started

        status, waited = timed("POST", "/v1/messages", json.dumps(conversation()).encode())
        assert status == 200 and waited >= 0.5
        status, waited = timed("GET", "/v1/models/model-1")
        assert status == 200 and waited < 0.5
    finally:
        server.shutdown()
        server.server_close()
