"""The ``codex`` adapter: Codex CLI's ``exec``, one non-interactive run per attempt.

    /usr/bin/python3 -B -m agent_eval.adapters.codex --model ID [--setting K=V]...
        [--upstream NAME]

The model id goes to the CLI's ``model`` as is. The CLI speaks the OpenAI
Responses API (``POST <base>/responses``, streaming) to one provider written
into a fresh ``config.toml``: the batch's gateway, through a loopback relay
to its socket of the upstream (``--upstream NAME``, default the only one),
with the attempt's placeholder token as ``OPENAI_API_KEY``; the real key
never enters the container.

Settings (each one is written to the CLI's configuration, or the attempt
fails: the reported model identity must be what the CLI really used):
``model_reasoning_effort``, ``model_reasoning_summary``, ``model_verbosity``.

The CLI runs in the output directory with approvals off and its own sandbox
off (``danger-full-access``: the runner container is the sandbox); web search
is disabled: the consumer's guides and API catalog are the documentation.
``CODEX_HOME`` is a fresh directory under /tmp; update checks, analytics and
the plugin and app lookups are off. The attempt is completed when the CLI
exits 0 and its JSON events end the turn with ``turn.completed`` and report
no error.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agent_eval.adapters.common import (
    AdapterOptions,
    AgentFailed,
    BudgetSpent,
    Request,
    gateway_endpoint,
    keep_transcript,
    main,
    provider_failure_in,
    report_usage,
    run_cli,
    stdout_to_file,
)

EXECUTABLE = "/opt/codex/bin/codex"
"""Where the image keeps the CLI's static binary."""
KEY_ENV = "OPENAI_API_KEY"
PROVIDER = "agent-eval"
SETTINGS = ("model_reasoning_effort", "model_reasoning_summary", "model_verbosity")
_MAX_FORWARDED_EVENTS = 64 * 1024
_FAILED_EVENTS = {"turn.failed", "error"}


def _toml_string(value: object) -> str:
    # A JSON string is a valid TOML basic string (same escapes).
    return json.dumps(str(value), ensure_ascii=True)


def config_toml(options: AdapterOptions, url: str) -> str:
    """The CLI's whole configuration: one provider, no approvals, nothing phoning home.

    Raises:
        ValueError: An unknown model setting.
    """
    unknown = sorted(set(options.settings) - set(SETTINGS))
    if unknown:
        raise ValueError(f"unsupported codex settings {unknown}; known: {sorted(SETTINGS)}")
    lines = [
        f"model = {_toml_string(options.model)}",
        f"model_provider = {_toml_string(PROVIDER)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        'web_search = "disabled"',
        "check_for_update_on_startup = false",
        *(f"{key} = {_toml_string(options.settings[key])}" for key in SETTINGS
          if key in options.settings),
        "",
        f"[model_providers.{PROVIDER}]",
        f"name = {_toml_string(PROVIDER)}",
        f"base_url = {_toml_string(url)}",
        f"env_key = {_toml_string(KEY_ENV)}",
        'wire_api = "responses"',
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        *(f"{name} = false" for name in
          ("plugins", "remote_plugin", "plugin_sharing", "apps", "tool_suggest")),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def cli_arguments(request: Request, prompt: str) -> list[str]:
    """The CLI's argument vector for one ``exec`` run (stdin is /dev/null)."""
    return [
        EXECUTABLE, "exec",
        "--json",
        "--color", "never",
        "--skip-git-repo-check",
        "--ephemeral",
        "--strict-config",
        "-C", str(request.output_dir),
        prompt,
    ]  # fmt: skip


def _event_types(events: Sequence[str]) -> list[object]:
    types = []
    for line in events:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            types.append(event.get("type"))
    return types


def usage_of(lines: Sequence[str]) -> tuple[int | None, int | None]:
    """Tokens in (cached included) and out, summed over the turns the CLI reported."""
    totals: list[int | None] = [None, None]
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        usage = event.get("usage") if isinstance(event, dict) else None
        if not isinstance(usage, dict) or event.get("type") != "turn.completed":
            continue
        for index, key in enumerate(("input_tokens", "output_tokens")):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[index] = (totals[index] or 0) + value
    return totals[0], totals[1]


def turn_completed(events: Sequence[str]) -> bool:
    """Whether the CLI's JSON events end the run with a completed turn and no error."""
    types = _event_types(events)
    return "turn.completed" in types and not _FAILED_EVENTS & set(types)


def run(request: Request, options: AdapterOptions, prompt: str, budget_s: float) -> bool:
    """Run ``codex exec`` once in the output directory; completed when its turn completed."""
    endpoint = gateway_endpoint(options.upstream)
    scratch = Path(tempfile.mkdtemp(prefix="codex.", dir="/tmp"))
    home = scratch / "codex-home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        config_toml(options, f"{endpoint.base_url}/v1"), encoding="utf-8"
    )
    env = {**os.environ, "CODEX_HOME": str(home), "HOME": str(scratch), "NO_COLOR": "1",
           "TERM": "dumb", KEY_ENV: endpoint.token}  # fmt: skip
    events = scratch / "events.jsonl"
    argv = stdout_to_file(events)
    argv += cli_arguments(request, prompt)
    outcome = run_cli(argv, cwd=request.output_dir, env=env, timeout_s=budget_s)
    lines = events.read_text(encoding="utf-8", errors="replace").splitlines()
    keep_transcript(lines)
    text = "\n".join(lines)[-_MAX_FORWARDED_EVENTS:]
    if text:
        print(text, file=sys.stderr, flush=True)
    if outcome.timed_out:
        raise BudgetSpent("the CLI did not finish within the time budget")
    completed = turn_completed(lines)
    report_usage(*usage_of(lines))
    print(
        f"adapter: codex exited {outcome.exit_code} after {outcome.seconds:.1f}s; "
        f"turn completed: {completed}",
        file=sys.stderr,
    )
    if outcome.exit_code == 0 and completed:
        return True
    provider = provider_failure_in(text)
    if provider is not None:
        raise AgentFailed("provider", provider)
    if _FAILED_EVENTS & set(_event_types(lines)):
        raise AgentFailed("error", "the CLI reported a failed turn")
    raise AgentFailed("refused", f"the CLI exited {outcome.exit_code} without a completed turn")


if __name__ == "__main__":
    sys.exit(main("codex", run))
