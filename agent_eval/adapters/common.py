"""What every adapter shares: the request, the prompt, running a CLI, the response."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The mount points and names the harness gives every runner container, spelled once.
from agent_eval.layout import GATEWAY_MODELS_ENV as MODELS_ENV
from agent_eval.layout import GATEWAY_MOUNT as GATEWAY_DIR
from agent_eval.layout import GATEWAY_TOKEN_ENV as TOKEN_ENV
from agent_eval.layout import MAX_TRANSCRIPT_BYTES, TRANSCRIPT_FILE
from agent_eval.layout import TRANSCRIPT_MOUNT as TRANSCRIPT_DIR

__all__ = [
    "AdapterOptions",
    "AgentFailed",
    "BudgetSpent",
    "ModelEndpoint",
    "Request",
    "agent_python",
    "build_prompt",
    "gateway_endpoint",
    "keep_transcript",
    "main",
    "provider_failure_in",
    "read_request",
    "report_usage",
    "run_cli",
    "stdout_to_file",
]

MAX_STDERR_BYTES = 256 * 1024
"""What the adapter forwards of the CLI's output to its own stderr."""
_SAFETY_MARGIN_S = 2.0
"""Time kept back from the budget to print the response before being killed."""
VERSION_FILE = "/opt/agent-eval/runner-version"
"""Written when the image is built: the CLI's real version as installed."""


@dataclass(frozen=True)
class Request:
    """The fields of the runner request an adapter uses."""

    run_id: str
    task_id: str
    task_text: str
    consumer_dir: str
    output_dir: Path
    allowed_output_paths: tuple[str, ...]
    attempt: int
    time_budget_s: float
    failed_assertion_ids: tuple[str, ...]
    diagnostics: tuple[Mapping[str, Any], ...]


def read_request(text: str) -> Request:
    """Parse the request (validated again by nothing else here: fail loudly)."""
    data = json.loads(text)
    if data.get("schemaVersion") != 1:
        raise ValueError("unsupported runner request schemaVersion")
    feedback = data.get("repairFeedback") or {}
    return Request(
        run_id=str(data["runId"]),
        task_id=str(data["taskId"]),
        task_text=str(data["taskText"]),
        consumer_dir=str(data["consumerDir"]),
        output_dir=Path(data["outputDir"]),
        allowed_output_paths=tuple(str(p) for p in data["allowedOutputPaths"]),
        attempt=int(data["attempt"]),
        time_budget_s=int(data["timeBudgetMs"]) / 1000,
        failed_assertion_ids=tuple(str(i) for i in feedback.get("failedAssertionIds", ())),
        diagnostics=tuple(feedback.get("diagnostics", ())),
    )


def build_prompt(request: Request) -> str:
    """The task text, the output rules and, on a repair, the feedback.

    The feedback holds failed assertion ids and diagnostics only: expected
    values never reach the runner, so they cannot reach the model.
    """
    parts = [
        request.task_text.rstrip(),
        "",
        f"Write only these files in {request.output_dir}: "
        + ", ".join(request.allowed_output_paths)
        + ". Work non-interactively; nobody will answer questions.",
    ]
    if request.attempt > 1:
        parts += [
            "",
            "Your previous submission (still in the working directory) failed verification.",
        ]
        if request.failed_assertion_ids:
            parts.append("Failed checks: " + ", ".join(request.failed_assertion_ids))
        for diagnostic in request.diagnostics[:20]:
            where = diagnostic.get("path") or ""
            if diagnostic.get("line"):
                where += f":{diagnostic['line']}"
            text = str(diagnostic.get("message", ""))[:2000]
            parts.append(f"- [{diagnostic.get('category', '?')}] {where} {text}".rstrip())
        parts.append("Fix the solution so that it passes.")
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class CliResult:
    """How the CLI ended."""

    exit_code: int | None
    timed_out: bool
    seconds: float


def _pump(source: Any, budget: list[int]) -> None:
    """Copy the CLI's output to our stderr, at most MAX_STDERR_BYTES in all."""
    while chunk := source.read(4096):
        if budget[0] > 0:
            sys.stderr.buffer.write(chunk[: budget[0]])
            sys.stderr.buffer.flush()
            budget[0] -= len(chunk)


def run_cli(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    stdin_text: str | None = None,
) -> CliResult:
    """Run *argv* in its own process group; kill the whole group at the deadline.

    The CLI's stdout and stderr are forwarded to the adapter's stderr (bounded);
    the adapter's stdout stays reserved for the one response object.
    """
    started = time.monotonic()
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    budget = [MAX_STDERR_BYTES]
    pump = threading.Thread(target=_pump, args=(process.stdout, budget), daemon=True)
    pump.start()
    if stdin_text is not None and process.stdin is not None:
        try:
            process.stdin.write(stdin_text.encode("utf-8"))
            process.stdin.close()
        except BrokenPipeError:
            pass
    timed_out = False
    try:
        process.wait(timeout=max(0.1, timeout_s))
    except subprocess.TimeoutExpired:
        timed_out = True
    # Whatever happened, nothing of the CLI outlives it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    exit_code = process.wait()
    pump.join(timeout=2)
    if process.stdout is not None:
        process.stdout.close()
    return CliResult(None if timed_out else exit_code, timed_out, time.monotonic() - started)


@dataclass(frozen=True)
class AdapterOptions:
    """What the runner config passes to an adapter in ``args``."""

    model: str
    settings: dict[str, Any] = field(default_factory=dict)
    upstream: str | None = None
    extra: tuple[str, ...] = ()


def parse_options(argv: Sequence[str]) -> AdapterOptions:
    """``--model ID [--setting KEY=JSON]... [--upstream NAME] [-- EXTRA...]``."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--model", required=True)
    parser.add_argument("--setting", action="append", default=[])
    parser.add_argument("--upstream", default=None)
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args(list(argv))
    settings: dict[str, Any] = {}
    for item in args.setting:
        key, _, raw = item.partition("=")
        try:
            settings[key] = json.loads(raw)
        except json.JSONDecodeError:
            settings[key] = raw
    return AdapterOptions(args.model, settings, args.upstream, tuple(args.extra))


# --- The transcript ---------------------------------------------------------------------------


def keep_transcript(lines: Iterable[str], directory: str = TRANSCRIPT_DIR) -> None:
    """Leave the CLI's own events as ``transcript.jsonl``: one JSON object a line.

    A line that is not a JSON object is kept as ``{"text": line}``. Past
    :data:`MAX_TRANSCRIPT_BYTES` the rest is dropped and the cut marked. Without
    the directory (a runner run by hand) nothing is written. Best effort: a
    transcript is diagnostics, never a reason for the attempt to fail.
    """
    folder = Path(directory)
    if not folder.is_dir():
        return
    kept, dropped = bytearray(), 0
    for line in lines:
        if not line.strip():
            continue
        try:
            is_object = isinstance(json.loads(line), dict)
        except ValueError:
            is_object = False
        data = (line if is_object else json.dumps({"text": line})).encode("utf-8") + b"\n"
        if dropped or len(kept) + len(data) > MAX_TRANSCRIPT_BYTES:
            dropped += len(data)
            continue
        kept += data
    if dropped:
        kept += json.dumps({"agentEvalTranscriptCut": True, "droppedBytes": dropped}).encode()
        kept += b"\n"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        fd = os.open(folder / TRANSCRIPT_FILE, flags, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(kept)
    except OSError as exc:
        print(f"adapter: no transcript kept: {exc}", file=sys.stderr)


# --- The model gateway -----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelEndpoint:
    """Where the CLI reaches its model: a loopback relay to the gateway, and its token."""

    base_url: str
    """``http://127.0.0.1:<port>`` (no path: each adapter adds its API's root)."""
    token: str
    """This attempt's placeholder credential; the gateway swaps it for the real one."""


class _Relay(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target: str) -> None:
        self.target = target
        super().__init__(("127.0.0.1", 0), _RelayHandler)


class _RelayHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.server.target)  # type: ignore[attr-defined]
        except OSError:
            upstream.close()
            return
        client: socket.socket = self.request

        def pump(source: socket.socket, sink: socket.socket) -> None:
            try:
                while chunk := source.recv(65536):
                    sink.sendall(chunk)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)

        back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        back.start()
        pump(client, upstream)
        back.join()
        upstream.close()


_ENDPOINTS: dict[str, ModelEndpoint] = {}


def gateway_endpoint(
    upstream: str | None, environ: Mapping[str, str] | None = None, gateway_dir: str = GATEWAY_DIR
) -> ModelEndpoint:
    """Relay a loopback port to the gateway's socket of *upstream* (default: the only one).

    The runner container has no network; the CLI is given this relay as its
    base URL and the attempt's token as its key.

    Raises:
        ValueError: The batch has no gateway, or no such upstream.
    """
    environ = os.environ if environ is None else environ
    names = [n for n in environ.get(MODELS_ENV, "").split(",") if n]
    token = environ.get(TOKEN_ENV, "")
    if not names or not token:
        raise ValueError(
            "this batch has no model gateway (no models[] in the runner config): "
            "the runner reaches nothing"
        )
    if upstream is None:
        if len(names) != 1:
            raise ValueError(f"several upstreams ({', '.join(names)}): pass --upstream NAME")
        upstream = names[0]
    if upstream not in names:
        raise ValueError(f"no upstream {upstream!r} in this batch; it has {', '.join(names)}")
    if upstream not in _ENDPOINTS:
        relay = _Relay(f"{gateway_dir}/{upstream}.sock")
        threading.Thread(target=relay.serve_forever, daemon=True, name="relay").start()
        port = relay.server_address[1]
        _ENDPOINTS[upstream] = ModelEndpoint(f"http://127.0.0.1:{port}", token)
    return _ENDPOINTS[upstream]


# --- How an attempt failed ---------------------------------------------------------------------


class AgentFailed(Exception):
    """The attempt failed, and the adapter knows how (the response's failureKind)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


_PROVIDER_SIGNS = re.compile(
    r"(AuthenticationError|PermissionDeniedError|RateLimitError|APIConnectionError"
    r"|InternalServerError|ServiceUnavailableError|NotFoundError: .*model"
    r"|invalid[_ ]api[_ ]key|\b(?:401|403|429|500|502|503|529)\b[^\n]{0,40}"
    r"(?:Unauthorized|Forbidden|Too Many Requests|Internal Server Error|Bad Gateway"
    r"|Service Unavailable|Overloaded|rate limit))",
    re.IGNORECASE,
)


def provider_failure_in(text: str) -> str | None:
    """A line of a CLI's output that says its model provider failed, if one does."""
    match = _PROVIDER_SIGNS.search(text)
    if match is None:
        return None
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end != -1 else None].strip()[:300]


_LAUNCH = (
    "import os, runpy, sys; site = sys.argv.pop(1); module = sys.argv.pop(1); "
    "outer = set(os.environ.get('PYTHONPATH', '').split(os.pathsep)) - {''}; "
    "sys.path[:] = [site] + [p for p in sys.path if p and p not in outer]; "
    "runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


_STDOUT_TO_FILE = (
    "import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600); "
    "os.dup2(fd, 1); os.close(fd); os.execv(sys.argv[2], sys.argv[2:])"
)


def stdout_to_file(path: Path) -> list[str]:
    """Argv prefix that sends the CLI's stdout to *path* (its stderr still reaches ours).

    The wrapper execs the CLI in place, so the process group and its kill at the
    deadline are unchanged.
    """
    return [sys.executable, "-B", "-c", _STDOUT_TO_FILE, str(path)]


def agent_python(site: str, module: str) -> list[str]:
    """Argv prefix running *module* of a Python CLI installed in *site*.

    *site* goes on the CLI's own ``sys.path`` only, in place of PYTHONPATH's
    entries (and the working directory): the CLI never imports the library under evaluation, and the
    commands it spawns keep PYTHONPATH, so they import the library and never
    the CLI's own packages.
    """
    return [sys.executable, "-B", "-c", _LAUNCH, site, module]


def runner_version(default: str = "unknown") -> str:
    """The installed CLI's version, recorded in the image when it was built."""
    try:
        return Path(VERSION_FILE).read_text(encoding="utf-8").strip() or default
    except OSError:
        return default


class BudgetSpent(Exception):
    """Raised by a run whose CLI used up the time budget.

    The adapter then prints no response and waits for the harness to stop the
    container at its deadline, so the attempt is recorded as a timeout, not
    as the agent giving up.
    """


_USAGE: dict[str, int | float] = {}
"""What the CLI reported it used, set by the adapter's run (see :func:`report_usage`)."""


def report_usage(
    input_tokens: int | None = None, output_tokens: int | None = None, cost_usd: float | None = None
) -> None:
    """Record the tokens and cost the CLI itself reported; the response carries them."""
    for key, value in (("inputTokens", input_tokens), ("outputTokens", output_tokens),
                       ("costUsd", cost_usd)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value) or value < 0:
            continue
        _USAGE[key] = value if key == "costUsd" else int(value)


Run = Callable[[Request, AdapterOptions, str, float], bool]
"""(request, options, prompt, seconds left) -> whether the agent completed."""


def main(name: str, run: Run, argv: Sequence[str] | None = None) -> int:
    """Drive one attempt with *run* and print the single response object."""
    options = parse_options(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    request = read_request(sys.stdin.read())
    budget = request.time_budget_s - _SAFETY_MARGIN_S
    completed = False
    message = None
    kind: str | None = None
    try:
        completed = run(request, options, build_prompt(request), budget)
    except AgentFailed as exc:
        kind, message = exc.kind, str(exc)[:2000]
        print(f"adapter: {name} failed ({kind}): {message}", file=sys.stderr)
    except BudgetSpent:
        print(f"adapter: {name} used up its time budget", file=sys.stderr)
        sys.stderr.flush()
        # The harness's deadline is the budget: it stops us well before this ends.
        time.sleep(max(0.0, request.time_budget_s - (time.monotonic() - started)) + 60)
        return 1
    except Exception as exc:  # the runner failed; the harness must still get one answer
        kind, message = "error", f"{type(exc).__name__}: {exc}"[:2000]
        print(f"adapter: {message}", file=sys.stderr)
    response = {
        "schemaVersion": 1,
        "runId": request.run_id,
        "taskId": request.task_id,
        "status": "completed" if completed else "failed",
        "runner": {"name": name, "version": runner_version()},
        "model": {"id": options.model, "settings": options.settings},
    }
    if message:
        response["message"] = message
    if kind is not None and not completed:
        response["failureKind"] = kind
    if _USAGE:
        response["usage"] = dict(_USAGE)
    print(f"adapter: {name} finished in {time.monotonic() - started:.1f}s", file=sys.stderr)
    sys.stdout.write(json.dumps(response) + "\n")
    sys.stdout.flush()
    return 0
