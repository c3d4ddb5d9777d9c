"""The scripted model of try-agent answers a task conversation turn by turn.

Invariants: a conversation is matched to its task by the title; each file is
read before it is written (the CLI refuses to overwrite an unread file), in
the output directory the prompt names; once every file is written the turn
is text; a conversation that matches no task, or offers no Write tool, gets
text and no tool call. A delay asked for holds every model turn that long (a real
model's latency), never the preflight. Over Chat Completions (mini-swe-agent), the
first turn is one bash command that writes exactly the files, whatever they hold,
and the next one submits. A planned failure is what a first attempt writes, in
either API, and its repair writes the solution.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.errors import ConfigError
from agent_eval.project import find_project
from agent_eval.reference.runner import failing_case
from agent_eval.trial import oracle_model
from agent_eval.trial.run import scripted_answers
from tests.paths import REPO

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


REPAIR = (
    "\nYour previous submission (still in the working directory) failed verification.\n"
    "Failed checks: a-works\nFix the solution so that it passes.\n"
)
BASH = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]


def chat(prompt: str = PROMPT, calls: int = 0, tools: list[Any] = BASH) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": prompt},
    ]
    for number in range(calls):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{number}", "type": "function",
             "function": {"name": "bash", "arguments": "{}"}}]})  # fmt: skip
        messages.append({"role": "tool", "tool_call_id": f"c{number}", "content": "ok"})
    return {"model": "gpt", "messages": messages, "tools": tools}


def command_of(completion: dict[str, Any]) -> str | None:
    assert completion["model"] == "model-1"
    assert completion["usage"]["total_tokens"] > 0
    calls = completion["choices"][0]["message"].get("tool_calls")
    if not calls:
        assert completion["choices"][0]["finish_reason"] == "stop"
        return None
    assert [c["function"]["name"] for c in calls] == ["bash"]
    command = json.loads(calls[0]["function"]["arguments"])["command"]
    assert isinstance(command, str)
    return command


@settings(max_examples=25, deadline=None)
@given(
    files=st.dictionaries(
        st.sampled_from(["a.py", "pkg/b.py", "it's $HOME.txt", "c d/e.py"]),
        st.text(st.characters(blacklist_categories=["Cs"]), max_size=300),
        min_size=1,
    )
)
def test_the_chat_answer_writes_exactly_the_files_then_submits(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, str]
) -> None:
    out = tmp_path_factory.mktemp("solution")
    oracle_model.ANSWERS["tasks"] = [{"title": TITLE, "files": files}]
    prompt = f"# {TITLE}\n\nWrite only these files in {out}: a.py. Work on.\n"
    command = command_of(oracle_model.chat_answer(chat(prompt)))
    assert command is not None
    done = subprocess.run(["bash", "-c", command], capture_output=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    written = {
        str(p.relative_to(out)): p.read_bytes().decode("utf-8")
        for p in out.rglob("*")
        if p.is_file()
    }
    assert written == files
    assert command_of(oracle_model.chat_answer(chat(prompt, calls=1))) == oracle_model.SUBMIT


@pytest.mark.parametrize(
    "body",
    [chat("write a title for this chat"), chat(tools=[]), chat(f"# {TITLE}\nno output line")],
    ids=["another-conversation", "no-bash-tool", "no-output-directory"],
)
def test_a_chat_that_is_not_a_task_gets_text_and_no_tool_call(body: dict[str, Any]) -> None:
    assert command_of(oracle_model.chat_answer(body)) is None


def test_a_planned_failure_is_the_first_attempt_in_either_api_and_the_repair_fixes_it() -> None:
    oracle_model.ANSWERS["tasks"][0]["first"] = {"a.py": "A = 0\n"}
    assert turn(oracle_model.answer(conversation(("Read", {"file_path": "/solution/a.py"}))))[
        1
    ] == {"file_path": "/solution/a.py", "content": "A = 0\n"}
    assert oracle_model.planned(chat()["messages"]) == ("/solution", {"a.py": "A = 0\n"})
    repair = chat(PROMPT + REPAIR)["messages"]
    assert oracle_model.planned(repair) == ("/solution", {"a.py": "A = 1\n", "b.py": "B = 2\n"})
    command = command_of(oracle_model.chat_answer(chat()))
    assert command is not None and "b.py" not in command


def test_a_streamed_chat_answer_says_what_the_plain_one_says() -> None:
    completion = oracle_model.chat_answer(chat())
    chunks = [
        json.loads(line.removeprefix("data: "))
        for line in oracle_model.chat_events(completion).decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    assert oracle_model.chat_events(completion).decode().endswith("data: [DONE]\n\n")
    assert chunks[0]["choices"][0]["delta"] == completion["choices"][0]["message"]
    assert chunks[-1]["usage"] == completion["usage"]
    assert {c["model"] for c in chunks} == {"model-1"}


def test_the_chat_api_is_served_over_http_and_other_paths_are_not_found() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), oracle_model.Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host, port = server.server_address[:2]

        def post(path: str, body: dict[str, Any]) -> tuple[int, bytes]:
            connection = http.client.HTTPConnection(str(host), int(port), timeout=10)
            connection.request("POST", path, body=json.dumps(body).encode())
            response = connection.getresponse()
            data = response.read()
            connection.close()
            return response.status, data

        status, data = post("/v1/chat/completions", chat())
        assert status == 200 and command_of(json.loads(data)) is not None
        status, data = post("/v1/chat/completions", {**chat(), "stream": True})
        assert status == 200 and data.startswith(b"data: ")
        assert post("/v1/responses", chat())[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_a_plan_fails_first_with_the_mutants_fixture_and_names_what_it_cannot_plan() -> None:
    project = find_project(REPO)
    answers = scripted_answers(project, "model-1", ["forms"])
    tasks = answers["tasks"]
    assert isinstance(tasks, list)
    planned = [t for t in tasks if "first" in t]
    assert len(planned) == 1
    failing = failing_case(project.fixtures / "forms")
    assert failing.name != "correct"
    assert planned[0]["first"] == {
        name: (failing / name).read_text(encoding="utf-8") for name in planned[0]["first"]
    }
    assert planned[0]["first"] != planned[0]["files"]
    with pytest.raises(ConfigError, match=r"\['no-such-task'\] are not tasks of the suite"):
        scripted_answers(project, "model-1", ["no-such-task"])
