"""``python3 -m agent_eval.verification.runtime JOB.json``: one verification, its result file.

Started inside the verifier container (or by the local engine) with this
package's root (the staged harness) and the repository's ``graders/`` on ``sys.path``. The job may
add directories for the parent's imports; the solution never sees them.
Exit status 0: a result was written (whatever it says); 1: it could not be
written; 2: the job was refused.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .job import JobError, load_job


def main(argv: list[str] | None = None) -> int:
    """Validate the job, extend the parent's import path, run it."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python3 -m agent_eval.verification.runtime JOB.json", file=sys.stderr)
        return 2
    try:
        job = load_job(Path(args[0]))
    except JobError as exc:
        print(f"verifier: {exc}", file=sys.stderr)
        return 2
    from .zygote import Zygote, ZygoteBroken

    try:
        zygote = Zygote.inherited()  # when started by one, each child is its fork
    except ZygoteBroken as exc:
        print(f"verifier: {exc}", file=sys.stderr)
        return 1
    for path in reversed(job.parent_import_paths):
        sys.path.insert(0, str(path))
    from .parent import run_and_write  # needs the job's import paths (the library) first

    return run_and_write(job, zygote)


if __name__ == "__main__":
    sys.exit(main())
