"""The generic ``command`` adapter: any CLI, from an argument template.

    python3 -m agent_eval.adapters.command --model ID [--setting K=V]... -- ARG...

Each ARG may contain ``{prompt}``, ``{prompt_file}``, ``{workdir}``,
``{time_budget_s}`` and ``{model}``; the CLI's exit status 0 means completed.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from agent_eval.adapters.common import AdapterOptions, Request, main, run_cli


def run(request: Request, options: AdapterOptions, prompt: str, budget_s: float) -> bool:
    """Fill the template and run it in the output directory."""
    if not options.extra:
        raise ValueError("the command adapter needs the CLI's arguments after --")
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, dir="/tmp") as handle:
        handle.write(prompt)
    values = {
        "prompt": prompt,
        "prompt_file": handle.name,
        "workdir": str(request.output_dir),
        "time_budget_s": str(int(budget_s)),
        "model": options.model,
    }
    argv = [arg.format(**values) for arg in options.extra]
    result = run_cli(argv, cwd=request.output_dir, env=os.environ, timeout_s=budget_s)
    Path(handle.name).unlink(missing_ok=True)
    return result.exit_code == 0


if __name__ == "__main__":
    sys.exit(main("command", run))
