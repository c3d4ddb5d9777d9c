"""Built-in reference runners, run inside the reference runner image.

    python3 reference_runner.py MODE [--fixtures DIR]

reads one runner request on stdin and answers on stdout, like any runner.
Their receipts are marked self-test and can never qualify: they prove the
harness, not an agent.

- ``oracle`` writes the task's correct fixture solution.
- ``mutant`` writes a failing fixture first (the first negative, by name, that
  fails behavioural assertions) and the correct one on the repair attempt.
- ``null`` completes without writing anything.
- ``misbehave:<how>`` breaks the protocol or the sandbox on purpose; used only
  by the harness's own tests.

Standard library only: the runner image has no third-party packages.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

NAMES = ("oracle", "mutant", "null", "misbehave")
MISBEHAVIOURS = (
    "silent", "two-objects", "trailing-text", "wrong-ids", "wrong-runner", "wrong-model",
    "oversized", "early-exit", "sleep", "score", "tamper", "symlink", "hardlink", "fifo",
    "traversal",
)  # fmt: skip
"""The ways ``misbehave:<how>`` breaks the protocol or the sandbox."""
PREFIX = "agent-eval-"
"""Every reference runner's identity name starts so: a reserved prefix, always self-test."""
VERSION = "1"
MODEL = {"id": "none", "settings": {}}
DEFAULT_FIXTURES = "/opt/agent-eval/fixtures"


def identity(mode: str) -> dict[str, str]:
    """The runner identity a reference runner reports (and a config must expect)."""
    return {"name": f"{PREFIX}{mode.split(':', 1)[0]}", "version": VERSION}


def failing_case(task_dir: Path) -> Path:
    """The task's first negative fixture, by name, that fails behavioural assertions (the
    correct one when it has none): what a planned failing first attempt submits."""
    for case in sorted(p for p in task_dir.iterdir() if p.is_dir()):
        expect = json.loads((case / "expect.json").read_text(encoding="utf-8"))
        if expect.get("kind") == "negative" and expect.get("failedAssertions"):
            return case
    return task_dir / "correct"


def _fixture(fixtures: Path, task_id: str, attempt: int, mode: str) -> Path:
    if mode == "mutant" and attempt == 1:
        return failing_case(fixtures / task_id)
    return fixtures / task_id / "correct"


def _write_solution(case: Path, output: Path, allowed: list[str]) -> None:
    for rel in allowed:
        source = case / rel
        if source.is_file():
            target = output / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def _response(request: dict[str, Any], mode: str, status: str = "completed") -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "runId": request["runId"],
        "taskId": request["taskId"],
        "status": status,
        "runner": identity(mode),
        "model": MODEL,
    }


def _misbehave(how: str, request: dict[str, Any], output: Path) -> int:
    answer = _response(request, "misbehave:" + how)
    line = json.dumps(answer)
    if how == "silent":
        return 0
    if how == "two-objects":
        print(line)
        print(line)
    elif how == "trailing-text":
        print(line + "\nall done")
    elif how == "wrong-ids":
        print(json.dumps({**answer, "runId": request["runId"] + "0"}))
    elif how == "wrong-runner":
        print(json.dumps({**answer, "runner": {"name": f"{PREFIX}misbehave", "version": "9"}}))
    elif how == "wrong-model":
        print(json.dumps({**answer, "model": {"id": "fallback-model", "settings": {}}}))
    elif how == "oversized":
        print(json.dumps({**answer, "message": "x" * 1000}) + " " * 200_000)
    elif how == "early-exit":
        sys.stdout.write(line[: len(line) // 2])
        sys.stdout.flush()
        os._exit(3)
    elif how == "sleep":
        time.sleep(3600)
    elif how == "score":
        print(json.dumps({**answer, "score": 1.0}))
    elif how == "tamper":
        # The consumer is mounted read-only; the attempt must fail, not the harness.
        try:
            (Path(request["consumerDir"]) / "planted.txt").write_text("x")
        except OSError as exc:
            print(f"tamper refused: {exc}", file=sys.stderr)
        print(line)
    elif how in {"symlink", "hardlink", "fifo", "traversal"}:
        target = output / request["allowedOutputPaths"][0]
        if how == "symlink":
            target.symlink_to("/etc/passwd")
        elif how == "hardlink":
            (output / "real.py").write_text("x = 1\n")
            os.link(output / "real.py", target)
        elif how == "fifo":
            os.mkfifo(target)
        else:
            (output / "escape").symlink_to("../../..")
            target.write_text("x = 1\n")
        print(line)
    else:
        print(f"unknown misbehaviour {how!r}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0].split(":", 1)[0] not in NAMES:
        print(f"usage: reference_runner.py {{{'|'.join(NAMES)}}}[:how] [--fixtures DIR]",
              file=sys.stderr)  # fmt: skip
        return 2
    mode = argv[0]
    fixtures = (
        Path(argv[2]) if len(argv) > 2 and argv[1] == "--fixtures" else Path(DEFAULT_FIXTURES)
    )
    request = json.loads(sys.stdin.read())
    output = Path(request["outputDir"])
    if mode.startswith("misbehave:"):
        return _misbehave(mode.split(":", 1)[1], request, output)
    if mode != "null":
        case = _fixture(fixtures, request["taskId"], int(request["attempt"]), mode)
        _write_solution(case, output, list(request["allowedOutputPaths"]))
    print(json.dumps(_response(request, mode)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
