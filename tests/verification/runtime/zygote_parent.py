"""A stand-in for the verifier's parent, started by a zygote: ``zygote_parent.py MODE OUT``.

``facts``: start the probe module's child twice, once as a fresh interpreter
and once as the zygote's fork, and write what each printed on import to OUT.
``exit``: start a child that exits at once, and write what the zygote told of
it (its status, its /proc state before and after the release) to OUT.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from agent_eval.grading.effects import EffectCall, Refused
from agent_eval.verification.runtime.clock import process_state
from agent_eval.verification.runtime.job import parse_job
from agent_eval.verification.runtime.parent import ChildProcess
from agent_eval.verification.runtime.zygote import Zygote, ZygoteBroken


def _refuse(name: str, call: EffectCall) -> Refused:
    return Refused("no effects here")


def _job(root: Path) -> object:
    return parse_job(
        {
            "schemaVersion": 1,
            "taskId": "probe",
            "graderPath": str(root / "grader.py"),
            "taskPath": str(root / "task.json"),
            "solutionDir": str(root / "solution"),
            "scratchDir": str(root / "scratch"),
            "resultPath": str(root / "result.json"),
        }
    )


def _output_of_start(job: object, zygote: Zygote | None, workdir: Path) -> str:
    child = ChildProcess(job, "probe", workdir, zygote=zygote)  # type: ignore[arg-type]
    child.start(None)
    child.close(_refuse)
    return child.output_tail(100_000)


def _state(pid: int) -> str:
    return process_state(pid) or "gone"


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    zygote = Zygote.inherited()
    assert zygote is not None, "not started by a zygote"
    assert "AGENT_EVAL_ZYGOTE_FD" not in os.environ
    root = out.parent
    if mode == "facts":
        job = _job(root)
        facts = {
            kind: json.loads(_output_of_start(job, z, root / "scratch" / kind))
            for kind, z in (("fresh", None), ("forked", zygote))
        }
        out.write_text(json.dumps(facts))
        return
    if mode == "exit":
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        os.close(write_end)  # the child's first read sees the end: it exits at once
        _, spare = os.pipe2(os.O_CLOEXEC)
        pid = zygote.spawn(str(root), {"PATH": "/usr/bin:/bin"}, (read_end, spare, spare))
        while (status := zygote.exit_status(pid)) is None:
            time.sleep(0.01)
        held = _state(pid)
        try:
            zygote.reap(pid + 100_000, 0.2)
        except TimeoutError as exc:
            never = f"TimeoutError: {exc}"
        zygote.reap(pid, 5)
        try:
            zygote._send({"op": "release", "pid": pid})
            zygote._await(lambda m: m.get("op") == "released", "a release")
            again = "released twice"
        except ZygoteBroken as exc:
            again = str(exc)
        report = {"status": status, "held": held, "after": _state(pid), "never": never}
        out.write_text(json.dumps({**report, "again": again}))
        return
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
