"""Command line of the static analysis: JSON in, ``analysis.json`` out.

    python3 -m agent_eval.verification.analysis --task task.json --solution DIR \\
        --catalog api-catalog.json --scratch DIR [--contract contract.pyi] \\
        [--starter DIR] [--search-path DIR ...] [--output analysis.json] [--timings FILE]

Exit status: 0 the analysis was written (whatever it found); 2 an input is
unusable; 3 mypy could not run (an infrastructure failure, not a finding).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_eval.verification.analysis.rules import AnalysisInputError, analyse_solution
from agent_eval.verification.analysis.typecheck import MypyError
from agent_eval.verification.runtime import timing

__all__ = ["main"]


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AnalysisInputError(f"{path}: cannot read the {what}: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Run the analysis; print or write the result as JSON."""
    parser = argparse.ArgumentParser(
        prog="python3 -m agent_eval.verification.analysis",
        description="Statically analyse a submitted solution (never executes it).",
    )
    parser.add_argument("--task", type=Path, required=True, help="the task's task.json")
    parser.add_argument("--solution", type=Path, required=True, help="collected solution dir")
    parser.add_argument("--catalog", type=Path, required=True, help="api-catalog.json")
    parser.add_argument("--scratch", type=Path, required=True, help="writable scratch dir")
    parser.add_argument("--contract", type=Path, help="the task's contract.pyi")
    parser.add_argument("--starter", type=Path, help="the task's starter dir, if any")
    parser.add_argument(
        "--search-path",
        type=Path,
        action="append",
        default=[],
        help="extra import root for mypy (repeatable)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="mypy timeout in seconds")
    parser.add_argument("--output", type=Path, help="write here instead of stdout")
    parser.add_argument(
        "--timings", type=Path, help="also write where the time went (a profile, not a finding)"
    )
    args = parser.parse_args(argv)
    if args.timings is not None:
        timing.enable()
    try:
        result = analyse_solution(
            _read_json(args.task, "task"),
            args.solution,
            _read_json(args.catalog, "API catalog"),
            scratch_dir=args.scratch,
            contract_path=args.contract,
            starter_dir=args.starter,
            search_path=args.search_path,
            mypy_timeout=args.timeout,
        )
    except AnalysisInputError as exc:
        print(f"analysis: {exc}", file=sys.stderr)
        return 2
    except MypyError as exc:
        print(f"analysis: {exc}", file=sys.stderr)
        return 3
    text = json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    if args.timings is not None:
        timing.record.write(args.timings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
