"""Benchmark one whole 18-run batch with the real Claude Code CLI against a scripted model.

    .venv/bin/python benchmarks/agent_batch.py

Builds the claude-code runner image (``images/runners/claude-code``) and, FROM its
id, a benchmark image that adds the scripted Messages endpoint of the tests
(``tests/data/agents/claude-code/model_server.py``) and its per-task variant
(``benchmarks/agent_model_server.py``), which recognises each task from its
prompt and makes the CLI write that task's correct fixture solution. The runner
command starts the endpoint on 127.0.0.1 inside the container, then execs the
adapter, so the container keeps network ``none``. A runner.json pinned to the
image id goes through ``run_batch`` with the docker verifier, as ``eval-agent``
runs it; the key is a canary in the run's environment. Then ``check-agent-eval``
judges the batch.

Prints, from one run: wall time, phase times, median attempt and verification
time, first/final successes, the check decision with its reasons, and whether
the canary appears anywhere in the batch directory. A table and one JSON line.
Needs the engine and the images (scripts/setup). Evidence goes to a temporary
directory.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from agent_scripted_model import MODEL_DIR, PORT, files_containing  # noqa: E402
from batch import TimedVerifier  # noqa: E402

from agent_eval.batch.run import run_batch  # noqa: E402
from agent_eval.engine import ContainerEngine  # noqa: E402
from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.evidence_io import write_model_atomic  # noqa: E402
from agent_eval.images.build import build_runner_image  # noqa: E402
from agent_eval.layout import SOLUTION_MOUNT  # noqa: E402
from agent_eval.models import ModelIdentity, Receipt, RunnerIdentity  # noqa: E402
from agent_eval.project import find_project  # noqa: E402
from agent_eval.reference.config import reference_config  # noqa: E402
from agent_eval.suite.tasks import load_suite  # noqa: E402
from agent_eval.verification.container.verifier import batch_verifier_factory  # noqa: E402
from agent_eval.verification.protocol import (  # noqa: E402
    Verifier,
    VerifierContext,
)

AGENT = "claude-code"
VERSION = json.loads((ROOT / "images" / "runners" / AGENT / "install.json").read_text())[
    "packages"
][0].rsplit("@", 1)[1]
"""The CLI version the recipe pins, which the adapter reports."""
MODEL = ModelIdentity(id="claude-scripted-1", settings={"max_turns": 8})
ENDPOINT_ENV = "AGENT_EVAL_MODEL_URL"
REQUEST_LOG = "/tmp/model-requests.jsonl"
"""Inside the runner container, outside the workspace: never collected."""
SUBMISSION_TIMEOUT_MS = 180_000

_DOCKERFILE = f"""\
ARG BASE
FROM ${{BASE}}
COPY model_server.py agent_model_server.py script.json {MODEL_DIR}/
"""


def benchmark_image(engine: ContainerEngine, work: Path) -> tuple[str, str]:
    """(runner image id, benchmark image id): the real runner image plus the scripted model."""
    project = find_project(ROOT)
    suite = load_suite(project.tasks, graders_dir=project.graders)
    runner_image = build_runner_image(engine, ROOT, AGENT)
    context = work / "image"
    context.mkdir(parents=True)
    shutil.copyfile(ROOT / "tests" / "data" / "agents" / AGENT / "model_server.py",
                    context / "model_server.py")  # fmt: skip
    shutil.copyfile(ROOT / "benchmarks" / "agent_model_server.py",
                    context / "agent_model_server.py")  # fmt: skip
    tasks = {}
    for task in suite.tasks:
        solution = project.fixtures / task.id / "correct" / "solution.py"
        tasks[f"# {task.spec.title}\n"] = solution.read_text(encoding="utf-8")
    script = {
        "port": PORT,
        "log": REQUEST_LOG,
        "file": f"{SOLUTION_MOUNT}/solution.py",
        "first": "",
        "repair": "",
        "tasks": tasks,
    }
    (context / "script.json").write_text(json.dumps(script), encoding="utf-8")
    (context / "Dockerfile").write_text(_DOCKERFILE, encoding="utf-8")
    image = engine.build_image(
        context,
        tag=f"agent-eval/bench-scripted-{AGENT}:local",
        buildargs={"BASE": runner_image},
        labels={"agent-eval.image": f"bench-scripted-{AGENT}"},
    )
    return runner_image, image


def check(receipt: Path, archives: Path) -> tuple[int, str]:
    """``check-agent-eval`` on the batch: its exit code and output."""
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "check-agent-eval"), "--receipt", str(receipt),
         "--archives", str(archives)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode, (done.stdout + done.stderr).strip()


def main() -> int:
    engine = connect_local_engine()
    project = find_project(ROOT)
    canary = "sk-ant-canary-" + uuid.uuid4().hex
    timed: list[TimedVerifier] = []
    make = batch_verifier_factory(project)

    def factory(context: VerifierContext) -> Verifier:
        verifier = TimedVerifier(make(context))
        timed.append(verifier)
        return verifier

    with tempfile.TemporaryDirectory(prefix="agent-eval-agent-bench-") as tmp:
        work = Path(tmp)
        started = time.monotonic()
        runner_image, image = benchmark_image(engine, work)
        image_seconds = time.monotonic() - started
        base = reference_config(
            engine, "oracle", project_root=ROOT, runtime_path="/var/run/docker.sock"
        )
        args = [
            "-B", f"{MODEL_DIR}/agent_model_server.py", f"{MODEL_DIR}/script.json", "correct",
            "--", "/usr/bin/python3", "-B", "-m", "agent_eval.adapters.claude_code",
            "--model", MODEL.id,
            *(f"--setting={k}={json.dumps(v)}" for k, v in MODEL.settings.items()),
            "--endpoint-env", ENDPOINT_ENV,
        ]  # fmt: skip
        config = base.model_copy(
            update={
                "executable": "/usr/bin/python3",
                "args": args,
                "envAllowlist": sorted(["ANTHROPIC_API_KEY", ENDPOINT_ENV]),
                "runnerImage": image,
                "expectedRunner": RunnerIdentity(name=AGENT, version=VERSION),
                "expectedModel": MODEL,
                "submissionTimeoutMs": SUBMISSION_TIMEOUT_MS,
                "network": "none",
            }
        )
        evidence = work / "evidence"
        bench_project = type(project)(
            root=project.root,
            packages=project.packages,
            tasks=project.tasks,
            graders=project.graders,
            fixtures=project.fixtures,
            evidence=evidence,
        )
        config_path = work / "runner.json"
        write_model_atomic(config_path, config)
        environ = {
            **os.environ,
            "ANTHROPIC_API_KEY": canary,
            ENDPOINT_ENV: f"http://127.0.0.1:{PORT}",
        }
        started = time.monotonic()
        outcome = run_batch(config_path, bench_project, verifier_factory=factory, environ=environ)
        wall = time.monotonic() - started
        receipt = Receipt.model_validate_json(outcome.receipt.read_bytes())
        batch_dir = outcome.receipt.parent
        check_code, check_output = check(outcome.receipt, batch_dir / "archives.json")
        leaked = [str(p.relative_to(batch_dir)) for p in files_containing(batch_dir, canary)]
        leaked += [str(p.relative_to(work)) for p in files_containing(evidence / ".work", canary)
                   if (evidence / ".work").is_dir()]  # fmt: skip
    attempts = [a.durationMs / 1000 for r in receipt.runs for a in r.attempts]
    verify = timed[0].seconds if timed else []
    reasons = [line for line in check_output.splitlines() if line.strip()]
    report: dict[str, Any] = {
        "status": outcome.status,
        "runner": receipt.runner.model_dump() if receipt.runner else None,
        "model": receipt.model.model_dump() if receipt.model else None,
        "runnerImage": runner_image,
        "benchmarkImage": image,
        "imageBuildSeconds": round(image_seconds, 2),
        "concurrency": config.concurrency or 2,
        "wallSeconds": round(wall, 2),
        "phaseSeconds": {k: round(v, 2) for k, v in outcome.phase_seconds.items()},
        "attempts": len(attempts),
        "attemptMedianSeconds": round(statistics.median(attempts), 3) if attempts else None,
        "verificationMedianSeconds": round(statistics.median(verify), 3) if verify else None,
        "firstSuccesses": outcome.first_successes,
        "finalSuccesses": outcome.final_successes,
        "selfTest": receipt.selfTest,
        "checkExitCode": check_code,
        "checkOutput": reasons,
        "canaryFiles": leaked,
    }
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(report, sort_keys=True))
    ok = outcome.status == "completed" and outcome.final_successes == 18 and not leaked
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
