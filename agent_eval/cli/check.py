"""``check-agent-eval``: qualify or reject a saved batch."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_eval.cli.common import EXISTING_DIR, EXISTING_FILE, located_project

__all__ = ["check_command"]


@click.command()
@click.option(
    "--receipt",
    required=True,
    type=EXISTING_FILE,
    help="The batch's receipt.json, in its run directory.",
)
@click.option(
    "--archives",
    required=True,
    type=EXISTING_FILE,
    help="The batch's archives.json, in the same run directory.",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository whose current suite the batch must match (default: the current one).",
)
@click.option(
    "--reverify",
    is_flag=True,
    help="Also run the recorded verifier image on every saved solution and require the "
    "recorded verdicts (needs the local container engine).",
)
def check_command(receipt: Path, archives: Path, project: Path | None, reverify: bool) -> None:
    """Qualify a saved batch or reject it with reasons.

    Prints {"qualified": bool, "reasons": [...]} and exits 0 when the batch
    qualifies, 1 when it is rejected, 2 on a usage error (a file that is not
    there, no repository to hold the batch against). Under --reverify,
    SIGINT, SIGTERM or SIGHUP stop it with no verdict (exit 128 + the
    signal's number) once the verifications under way have ended.

    \b
    Example:
      check-agent-eval --receipt evidence/RUN/receipt.json \\
                       --archives evidence/RUN/archives.json
    """
    from agent_eval.models import QualificationResult
    from agent_eval.verdict.qualification import current_anchors, qualify_files

    located = located_project(project)
    anchors = current_anchors(located)
    result = qualify_files(receipt, archives, anchors)
    if reverify:  # its engine, verifier and consumer code is imported only when asked for
        from agent_eval.batch.signals import Stop, stopping_on_signals
        from agent_eval.cli.compose import recorded_verifier
        from agent_eval.verdict.reverify import reverify_files

        try:
            # A signal stops the verifications under way, waits for their containers to
            # go, then ends here; a later one is only counted so as not to cut that short.
            with stopping_on_signals(until_exit=True) as signals:
                again = reverify_files(
                    receipt,
                    archives,
                    located,
                    lambda manifest, run_dir: recorded_verifier(located, manifest, run_dir),
                )
                signals.settle()
        except Stop as stop:
            click.echo(
                f"check-agent-eval: {stop.reason} while verifying again; no verdict",
                err=True,
            )
            sys.exit(128 + stop.signum)
        reasons = [*result.reasons, *again]
        result = QualificationResult(qualified=not reasons, reasons=reasons)
    click.echo(result.model_dump_json())
    sys.exit(0 if result.qualified else 1)
