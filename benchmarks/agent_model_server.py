"""The scripted Messages endpoint for the whole-batch Claude Code benchmark, per task.

    python3 agent_model_server.py SCRIPT.json correct [-- ADAPTER ARG...]

A variant of ``tests/data/agents/claude-code/model_server.py`` (copied beside this
file in the benchmark image and imported: the request log, the streaming replies,
the Read-then-Write rule and the launch are that module's). SCRIPT.json holds,
besides its ``port``, ``log`` and ``file``, ``tasks``: the heading each task's
prompt starts with (``# <title>``) mapped to that task's correct fixture solution.
Each request's user text picks the task; the server makes the CLI write that
solution (reading the file first when it already exists, as the CLI requires),
then close with a text turn. An unknown task gets a text turn and no write.

Benchmark infrastructure only: the fixtures are evaluator inputs, never shown to
an agent; this server stands in for the model inside the runner container.
"""

from __future__ import annotations

import os
import sys
from http.server import ThreadingHTTPServer
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import model_server as base  # reads SCRIPT.json and MODE from argv at import


def task_solution(prompt: str) -> str | None:
    """The solution of the task whose heading the prompt carries, if any."""
    for heading, solution in base.SCRIPT["tasks"].items():
        if heading in prompt:
            return str(solution)
    return None


class TaskHandler(base.Handler):
    """The base handler, with the content chosen per task from the prompt."""

    def answer(self, body: dict[str, Any]) -> bytes:
        model = str(body.get("model"))
        messages = body.get("messages", [])
        prompt = "\n".join(t for m in messages if m.get("role") == "user"
                           for t in base.texts(m.get("content")))  # fmt: skip
        solution = task_solution(prompt)
        if solution is None:
            return base.reply(model, {"type": "text", "text": ""},
                              [{"type": "text_delta", "text": "Unknown task."}],
                              "end_turn")  # fmt: skip
        used = [
            b.get("name")
            for m in messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        tool_names = {t.get("name") for t in body.get("tools", [])}
        if (
            "Write" in tool_names
            and not {"Read", "Write"} & set(used)
            and os.path.exists(base.SCRIPT["file"])
        ):
            # A starter file: the CLI refuses to overwrite a file it has not read.
            return base.tool_use(model, "Read", {"file_path": base.SCRIPT["file"]})
        with base.LOCK:  # one container serves one attempt of one task
            base.SCRIPT["repair"] = solution
        return super().answer(body)


if __name__ == "__main__":
    if "--" in sys.argv:
        # The base launch starts ``__file__`` in the background: make that this variant.
        base.__file__ = os.path.abspath(__file__)
        base.launch(sys.argv[sys.argv.index("--") + 1 :])
    server = ThreadingHTTPServer(("127.0.0.1", int(base.SCRIPT["port"])), TaskHandler)
    server.daemon_threads = True
    server.serve_forever()
