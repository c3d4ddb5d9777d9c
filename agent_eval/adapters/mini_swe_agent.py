"""The ``mini-swe-agent`` adapter: one ``mini`` run per attempt, in yolo mode.

    /usr/bin/python3 -B -m agent_eval.adapters.mini_swe_agent --model ID [--setting K=V]...
        [--upstream NAME]

The model id is mini's ``model_name`` as is (``openai/<name>`` for an
OpenAI-compatible endpoint, through litellm). Its ``api_base`` is a loopback
relay to the batch's gateway (``--upstream NAME``, default the only one) and
its ``api_key`` the attempt's placeholder token; the agent's own shell
commands get no key or endpoint variable at all.

Settings: ``step_limit`` (the agent's step limit, default 50) and
``command_timeout`` (seconds per shell command, default 60); every other
setting is a model keyword argument passed with each request (for example
``temperature``), so the reported model identity is what mini really sent.

The attempt is completed only when mini's trajectory says
``info.exit_status == "Submitted"``: its exit code is 0 even when it gave up.
``LimitsExceeded`` (its step or cost limit) is a failure of kind budget;
``TimeExceeded`` (the wall time the adapter gave it, just short of the
harness's deadline) is the time budget, so the harness records a timeout;
a model API error is of kind provider.
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
    Request,
    agent_python,
    gateway_endpoint,
    keep_transcript,
    main,
    provider_failure_in,
    report_usage,
    run_cli,
)

AGENT_SITE = "/opt/agent/site"
"""Where the image keeps mini-swe-agent and its dependencies."""
SCRATCH = Path("/tmp/mini-swe-agent-adapter")
_AGENT_SETTINGS = {"step_limit": 50, "command_timeout": 60}
_RESERVED_MODEL_KWARGS = {"api_base", "base_url", "api_key", "drop_params"}
_PROVIDER_STATUSES = {
    "AuthenticationError", "PermissionDeniedError", "RateLimitError", "APIConnectionError",
    "APIError", "InternalServerError", "ServiceUnavailableError", "NotFoundError", "Timeout",
}  # fmt: skip
"""litellm's exceptions, as mini names the exit status after the one that ended it."""


def cli_environment(environ: Mapping[str, str], scratch: Path) -> dict[str, str]:
    """mini's environment: configured, silent, no price-list fetch, no retries."""
    env = dict(environ)
    env.update(
        {
            "HOME": str(scratch / "home"),
            "MSWEA_CONFIGURED": "true",
            "MSWEA_GLOBAL_CONFIG_DIR": str(scratch / "config"),
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
            "MSWEA_SILENT_STARTUP": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "NO_COLOR": "1",
            "TERM": "dumb",
        }
    )
    return env


def overlay(
    request: Request,
    options: AdapterOptions,
    environ: Mapping[str, str],
    budget_s: float,
) -> dict[str, Any]:
    """The config merged over mini.yaml: model, limits, and the shell the agent gets."""
    settings = dict(options.settings)
    agent = {key: settings.pop(key, default) for key, default in _AGENT_SETTINGS.items()}
    reserved = sorted(set(settings) & _RESERVED_MODEL_KWARGS)
    if reserved:
        raise ValueError(f"settings {reserved} are set by the adapter, not the config")
    endpoint = gateway_endpoint(options.upstream, environ)
    model_kwargs: dict[str, Any] = {
        **settings,
        "drop_params": True,
        "api_base": f"{endpoint.base_url}/v1",
        "api_key": endpoint.token,
    }
    # The agent's commands see the library under evaluation, never the agent's own
    # packages, and no credential.
    shell_env = {"PYTHONPATH": environ.get("PYTHONPATH", ""), "HOME": str(SCRATCH / "home")}
    for name in environ:
        if name.endswith(("_API_KEY", "_API_BASE", "_BASE_URL")) or name.startswith("AGENT_EVAL_"):
            shell_env[name] = ""
    return {
        "agent": {
            "mode": "yolo",
            "confirm_exit": False,
            "cost_limit": 0,
            "step_limit": int(agent["step_limit"]),
            "wall_time_limit_seconds": max(1, int(budget_s) - 5),
        },
        "model": {
            "model_name": options.model,
            "cost_tracking": "ignore_errors",
            "model_kwargs": model_kwargs,
        },
        "environment": {
            "environment_class": "local",
            "cwd": str(request.output_dir),
            "timeout": int(agent["command_timeout"]),
            "env": shell_env,
        },
    }


def trajectory_lines(trajectory: Path) -> list[str]:
    """mini's trajectory as transcript lines: its info, then one line per message."""
    try:
        data = json.loads(trajectory.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict):
        return [json.dumps({"trajectory": data})]
    messages = data.get("messages")
    lines = [json.dumps({"info": data.get("info")})]
    if isinstance(messages, list):
        lines += [json.dumps(m if isinstance(m, dict) else {"message": m}) for m in messages]
    return lines


def instance_cost(trajectory: Path) -> float | None:
    """``info.model_stats.instance_cost`` of mini's trajectory (its own pricing), if any."""
    try:
        data = json.loads(trajectory.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    stats = data.get("info", {}).get("model_stats", {}) if isinstance(data, dict) else {}
    cost = stats.get("instance_cost") if isinstance(stats, dict) else None
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def exit_status(trajectory: Path) -> str:
    """``info.exit_status`` of mini's trajectory, or "" when there is none."""
    try:
        data = json.loads(trajectory.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    info = data.get("info") if isinstance(data, dict) else None
    status = info.get("exit_status") if isinstance(info, dict) else None
    return status if isinstance(status, str) else ""


def run(request: Request, options: AdapterOptions, prompt: str, budget_s: float) -> bool:
    """Run mini once in the output directory and read its trajectory."""
    for sub in ("home", "config"):
        (SCRATCH / sub).mkdir(parents=True, exist_ok=True)
    env = cli_environment(os.environ, SCRATCH)
    config = SCRATCH / "overlay.yaml"
    # JSON is YAML: the adapter stays standard-library only.
    config.write_text(
        json.dumps(overlay(request, options, env, budget_s), indent=2), encoding="utf-8"
    )
    trajectory = SCRATCH / "trajectory.json"
    trajectory.unlink(missing_ok=True)
    argv = [
        *agent_python(AGENT_SITE, "minisweagent.run.mini"),
        "-c", "mini.yaml", "-c", str(config),
        "-t", prompt, "-o", str(trajectory), "--exit-immediately",
    ]  # fmt: skip
    result = run_cli(argv, cwd=request.output_dir, env=env, timeout_s=budget_s)
    keep_transcript(trajectory_lines(trajectory))
    if result.timed_out:
        raise BudgetSpent
    status = exit_status(trajectory)
    report_usage(cost_usd=instance_cost(trajectory))
    print(f"adapter: mini exit_status={status or 'none'}", file=sys.stderr)
    if status == "Submitted":
        return True
    if status == "TimeExceeded":
        raise BudgetSpent("mini stopped at the wall time it was given")
    if status == "LimitsExceeded":
        raise AgentFailed("budget", "mini reached its step or cost limit")
    if status in _PROVIDER_STATUSES or provider_failure_in(status):
        raise AgentFailed("provider", f"the model API failed: {status}")
    if not status:
        raise AgentFailed("error", f"mini left no trajectory (exit {result.exit_code})")
    raise AgentFailed("refused", f"mini ended with {status}")


if __name__ == "__main__":
    sys.exit(main("mini-swe-agent", run))
