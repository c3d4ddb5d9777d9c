"""The ``claude-code`` adapter: Claude Code in print mode, one non-interactive run per attempt.

    /usr/bin/python3 -B -m agent_eval.adapters.claude_code --model ID [--setting K=V]...
        [--upstream NAME]

The model id goes to ``--model`` as is. The CLI reaches the Messages API
through the batch's gateway only: ``ANTHROPIC_BASE_URL`` is a loopback relay
to the gateway's socket of the upstream (``--upstream NAME``, default the
only one), and ``ANTHROPIC_API_KEY`` the attempt's placeholder token; the
real key never enters the container.

Settings (each one is sent to the CLI, or the attempt fails: the reported
model identity must be what the CLI really used):

* ``max_turns`` — ``--max-turns``;
* ``effort`` — ``--effort`` (the CLI's reasoning effort level).

The CLI works in the output directory with edits and shell commands allowed
and the consumer's directory added read-only (``--add-dir``); its web tools
are disallowed: the consumer's guides and API catalog are the documentation.
Its configuration lives in a fresh directory under /tmp, and every update
check, telemetry, error report and non-essential request is off. The attempt
is completed when the CLI exits 0 and its own final ``result`` event (stream
JSON) reports success.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent_eval.adapters.common import (
    AdapterOptions,
    AgentFailed,
    BudgetSpent,
    ModelEndpoint,
    Request,
    gateway_endpoint,
    keep_transcript,
    main,
    provider_failure_in,
    report_usage,
    run_cli,
    stdout_to_file,
)

EXECUTABLE = "/opt/claude-code/bin/claude"
"""Where the image keeps the CLI's native binary."""
ALLOWED_TOOLS = "Read,Write,Edit,MultiEdit,Glob,Grep,LS,Bash"
DISALLOWED_TOOLS = "WebFetch,WebSearch"
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "NO_COLOR": "1",
    "TERM": "dumb",
}
"""No update check, telemetry, error report or side request: the model endpoint only."""
_KEY_NAMES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
_MAX_FORWARDED_EVENTS = 64 * 1024


def settings_arguments(settings: Mapping[str, Any]) -> list[str]:
    """The CLI flags for the model settings; an unknown setting is an error."""
    flags = {"max_turns": "--max-turns", "effort": "--effort"}
    unknown = sorted(set(settings) - set(flags))
    if unknown:
        raise ValueError(f"unsupported claude-code settings {unknown}; known: {sorted(flags)}")
    arguments: list[str] = []
    for key, flag in flags.items():
        if key in settings:
            arguments += [flag, str(settings[key])]
    return arguments


def cli_environment(
    environ: Mapping[str, str], scratch: Path, endpoint: ModelEndpoint
) -> dict[str, str]:
    """The CLI's environment: the container's, a scratch home and config, the gateway's
    relay as its API, nothing phoning home."""
    env = {k: v for k, v in environ.items() if k not in _KEY_NAMES}
    env.update(QUIET_ENV)
    env["HOME"] = str(scratch / "home")
    env["CLAUDE_CONFIG_DIR"] = str(scratch / "config")
    env["ANTHROPIC_BASE_URL"] = endpoint.base_url
    env["ANTHROPIC_API_KEY"] = endpoint.token
    return env


def cli_arguments(request: Request, options: AdapterOptions, prompt: str) -> list[str]:
    """The CLI's argument vector for one print-mode run."""
    return [
        EXECUTABLE,
        "-p", prompt,
        "--model", options.model,
        "--output-format", "stream-json",
        "--verbose",
        "--permission-mode", "acceptEdits",
        "--allowedTools", ALLOWED_TOOLS,
        "--disallowedTools", DISALLOWED_TOOLS,
        "--add-dir", request.consumer_dir,
        *settings_arguments(options.settings),
    ]  # fmt: skip


def final_result(events: Sequence[str]) -> dict[str, Any] | None:
    """The CLI's last ``result`` event in its stream-JSON output, if any."""
    found: dict[str, Any] | None = None
    for line in events:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "result":
            found = event
    return found


def succeeded(result: Mapping[str, Any] | None) -> bool:
    """Whether the CLI reported its run as a success."""
    return result is not None and result.get("subtype") == "success" and not result.get("is_error")


def run(request: Request, options: AdapterOptions, prompt: str, budget_s: float) -> bool:
    """Run Claude Code once in the output directory; completed when it says it succeeded."""
    scratch = Path(tempfile.mkdtemp(prefix="claude-code.", dir="/tmp"))
    for name in ("home", "config"):
        (scratch / name).mkdir(mode=0o700)
    env = cli_environment(os.environ, scratch, gateway_endpoint(options.upstream))
    events = scratch / "events.jsonl"
    argv = stdout_to_file(events)
    argv += cli_arguments(request, options, prompt)
    outcome = run_cli(argv, cwd=request.output_dir, env=env, timeout_s=budget_s)
    lines = events.read_text(encoding="utf-8", errors="replace").splitlines()
    keep_transcript(lines)
    _forward_tail(lines)
    if outcome.timed_out:
        raise BudgetSpent("the CLI did not finish within the time budget")
    result = final_result(lines)
    if result is not None:
        report_usage(*usage_of(result))
    print(
        f"adapter: claude exited {outcome.exit_code} after {outcome.seconds:.1f}s; result "
        + json.dumps({k: result.get(k) for k in ("subtype", "is_error", "num_turns",
                                                  "terminal_reason")} if result else None),
        file=sys.stderr,
    )  # fmt: skip
    if outcome.exit_code == 0 and succeeded(result):
        return True
    raise failure_of(result, "\n".join(lines))


def usage_of(result: Mapping[str, Any]) -> tuple[int | None, int | None, float | None]:
    """(input tokens with cache reads and writes, output tokens, cost) of the result event."""
    usage = result.get("usage")
    counts = usage if isinstance(usage, Mapping) else {}
    parts = [counts.get(k) for k in ("input_tokens", "cache_creation_input_tokens",
                                     "cache_read_input_tokens")]  # fmt: skip
    numbers = [p for p in parts if isinstance(p, int) and not isinstance(p, bool)]
    output = counts.get("output_tokens")
    cost = result.get("total_cost_usd")
    return (
        sum(numbers) if numbers else None,
        output if isinstance(output, int) else None,
        cost if isinstance(cost, (int, float)) else None,
    )


def failure_of(result: Mapping[str, Any] | None, output: str) -> AgentFailed:
    """How the run failed, from the CLI's final result event and its output."""
    subtype = str(result.get("subtype", "")) if result else ""
    said = str(result.get("result", ""))[:500] if result else ""
    if subtype == "error_max_turns":
        return AgentFailed("budget", f"the CLI reached its turn limit ({subtype})")
    provider = provider_failure_in(said + "\n" + output[-20000:])
    if provider is not None:
        return AgentFailed("provider", provider)
    if result is None:
        return AgentFailed("error", "the CLI ended without a result event")
    if result.get("is_error") or subtype.startswith("error"):
        return AgentFailed(
            "error", f"the CLI reported {subtype or 'an error'}: {said}".rstrip(": ")
        )
    return AgentFailed("refused", said or "the CLI did not report success")


def _forward_tail(lines: Sequence[str]) -> None:
    """The end of the CLI's events on stderr (bounded), for whoever reads the logs."""
    text = "\n".join(lines)[-_MAX_FORWARDED_EVENTS:]
    if text:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main("claude-code", run))
