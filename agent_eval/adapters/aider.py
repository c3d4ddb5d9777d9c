"""The ``aider`` adapter: aider-chat, one non-interactive ``--message`` run per attempt.

    /usr/bin/python3 -B -m agent_eval.adapters.aider --model ID [--setting K=V]...
        [--upstream NAME]

The model id goes to ``--model`` as is (``openai/<name>`` for an
OpenAI-compatible endpoint). ``--openai-api-base`` is a loopback relay to the
batch's gateway (``--upstream NAME``, default the only one) and
``OPENAI_API_KEY`` the attempt's placeholder token; the real key never enters
the container.

Settings (each one is sent to the CLI, or the attempt fails: the reported
model identity must be what aider really used):

* ``edit_format`` — aider's edit format (default ``whole``);
* ``stream`` — ``false`` for ``--no-stream``;
* ``reasoning_effort``, ``thinking_tokens`` — passed to the matching flags.

Aider edits the allowed output files (created when missing); the task text
names the consumer's guides and API reference and embeds the contract.
(Adding the guides with ``--read`` kept aider 0.86.2 from applying
whole-file edits here, so they are not added.) Every update check,
analytics, release note and price-list fetch is off: the model metadata file
has an entry for the model, so litellm's price list is never downloaded. The
attempt is completed when aider exits 0 within the budget, its chat history
shows an applied edit and an output file is non-empty.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_eval.adapters.common import (
    AdapterOptions,
    AgentFailed,
    BudgetSpent,
    ModelEndpoint,
    Request,
    agent_python,
    gateway_endpoint,
    keep_transcript,
    main,
    provider_failure_in,
    run_cli,
)

AGENT_SITE = "/opt/agent/site"
"""Where the image keeps aider and its dependencies (never on the solution's path)."""
SCRATCH = Path("/tmp/aider-adapter")
_SETTINGS = {"edit_format", "stream", "reasoning_effort", "thinking_tokens"}


def cli_environment(
    environ: Mapping[str, str], home: Path, endpoint: ModelEndpoint
) -> dict[str, str]:
    """The CLI's environment: the container's, a scratch home, the gateway's token as its
    key, nothing phoning home."""
    env = {k: v for k, v in environ.items() if not k.startswith("OPENAI_")}
    env.update(
        {
            "HOME": str(home),
            "AIDER_CHECK_UPDATE": "false",
            "AIDER_ANALYTICS_DISABLE": "true",
            "AIDER_SHOW_RELEASE_NOTES": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "NO_COLOR": "1",
            "TERM": "dumb",
        }
    )
    env["OPENAI_API_KEY"] = endpoint.token
    return env


def model_metadata(model: str) -> dict[str, Any]:
    """An entry for the model, so aider never fetches litellm's price list."""
    return {
        model: {
            "max_input_tokens": 128000,
            "max_output_tokens": 16384,
            "max_tokens": 16384,
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
            "litellm_provider": model.split("/", 1)[0] if "/" in model else "openai",
            "mode": "chat",
        }
    }


def command(
    request: Request,
    options: AdapterOptions,
    prompt: str,
    metadata_file: Path,
    endpoint: ModelEndpoint,
) -> list[str]:
    """aider's argument vector for one attempt."""
    unknown = sorted(set(options.settings) - _SETTINGS)
    if unknown:
        raise ValueError(f"aider does not take the settings {unknown}; known: {sorted(_SETTINGS)}")
    settings = options.settings
    argv = [
        *agent_python(AGENT_SITE, "aider"),
        "--model", options.model,
        "--edit-format", str(settings.get("edit_format", "whole")),
        "--model-metadata-file", str(metadata_file),
        "--no-git", "--no-gitignore", "--yes-always", "--no-check-update",
        "--no-show-release-notes", "--analytics-disable", "--no-show-model-warnings",
        "--no-pretty", "--no-fancy-input", "--no-detect-urls", "--map-tokens", "0",
        # Its linter (flake8) lives in the agent's site, which the shell never sees.
        "--no-auto-lint",
        "--no-restore-chat-history", "--chat-history-file", str(SCRATCH / "chat.md"),
        "--input-history-file", str(SCRATCH / "input.history"),
        "--llm-history-file", str(SCRATCH / "llm.history"),
    ]  # fmt: skip
    argv += ["--openai-api-base", f"{endpoint.base_url}/v1"]
    if settings.get("stream") is False:
        argv.append("--no-stream")
    if "reasoning_effort" in settings:
        argv += ["--reasoning-effort", str(settings["reasoning_effort"])]
    if "thinking_tokens" in settings:
        argv += ["--thinking-tokens", str(settings["thinking_tokens"])]
    argv += ["--message", prompt, "--", *request.allowed_output_paths]
    return argv


def run(request: Request, options: AdapterOptions, prompt: str, budget_s: float) -> bool:
    """Run aider once in the output directory."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    home = SCRATCH / "home"
    home.mkdir(exist_ok=True)
    metadata_file = SCRATCH / "model-metadata.json"
    metadata_file.write_text(json.dumps(model_metadata(options.model)), encoding="utf-8")
    endpoint = gateway_endpoint(options.upstream)
    env = cli_environment(os.environ, home, endpoint)
    argv = command(request, options, prompt, metadata_file, endpoint)
    result = run_cli(argv, cwd=request.output_dir, env=env, timeout_s=budget_s)
    history = SCRATCH / "chat.md"
    text = history.read_text(encoding="utf-8", errors="replace") if history.is_file() else ""
    # aider prints no events: its chat history is its own record, one line each.
    keep_transcript(json.dumps({"chat": line}) for line in text.splitlines())
    if result.timed_out:
        raise BudgetSpent
    written = any(
        (request.output_dir / rel).is_file() and (request.output_dir / rel).stat().st_size > 0
        for rel in request.allowed_output_paths
    )
    if result.exit_code == 0 and "Applied edit to " in text and written:
        return True
    provider = provider_failure_in(text)
    if provider is not None:
        raise AgentFailed("provider", provider)
    if result.exit_code != 0:
        raise AgentFailed("error", f"aider exited {result.exit_code}")
    raise AgentFailed("refused", "aider applied no edit to an allowed file")


if __name__ == "__main__":
    sys.exit(main("aider", run))
