"""The ``aider`` adapter: aider-chat, one non-interactive ``--message`` run per attempt.

    /usr/bin/python3 -B -m agent_eval.adapters.aider --model ID [--setting K=V]...
        [--endpoint-env NAME]

The model id goes to ``--model`` as is (``openai/<name>`` for an
OpenAI-compatible endpoint). ``--endpoint-env NAME`` names the environment
variable holding the endpoint's base URL, passed as ``--openai-api-base``;
the key stays in the environment (``OPENAI_API_KEY``), never in an argument.

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
    BudgetSpent,
    Request,
    agent_python,
    main,
    run_cli,
)

AGENT_SITE = "/opt/agent/site"
"""Where the image keeps aider and its dependencies (never on the solution's path)."""
SCRATCH = Path("/tmp/aider-adapter")
_SETTINGS = {"edit_format", "stream", "reasoning_effort", "thinking_tokens"}


def cli_environment(
    environ: Mapping[str, str], home: Path, endpoint_env: str | None
) -> dict[str, str]:
    """The CLI's environment: the container's, a scratch home, nothing phoning home."""
    env = dict(environ)
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
    if endpoint_env and endpoint_env != "OPENAI_API_BASE":
        env.pop("OPENAI_API_BASE", None)
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
    environ: Mapping[str, str],
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
    if options.endpoint_env:
        base = environ.get(options.endpoint_env)
        if not base:
            raise ValueError(f"the endpoint variable {options.endpoint_env} is not set")
        argv += ["--openai-api-base", base]
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
    env = cli_environment(os.environ, home, options.endpoint_env)
    argv = command(request, options, prompt, metadata_file, env)
    result = run_cli(argv, cwd=request.output_dir, env=env, timeout_s=budget_s)
    if result.timed_out:
        raise BudgetSpent
    if result.exit_code != 0:
        return False
    history = SCRATCH / "chat.md"
    text = history.read_text(encoding="utf-8", errors="replace") if history.is_file() else ""
    if "Applied edit to " not in text:
        return False
    return any(
        (request.output_dir / rel).is_file() and (request.output_dir / rel).stat().st_size > 0
        for rel in request.allowed_output_paths
    )


if __name__ == "__main__":
    sys.exit(main("aider", run))
