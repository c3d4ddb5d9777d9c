"""``check-agent-eval``: qualify or reject a saved batch."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agent_eval.cli.common import (
    EXISTING_DIR,
    EXISTING_FILE,
    OUTPUT_FILE,
    batch_dir,
    gate_anchors,
    located_project,
)

__all__ = ["check_command"]


@click.command()
@click.argument("batch", required=False, metavar="[RUN]")
@click.option(
    "--receipt",
    type=EXISTING_FILE,
    default=None,
    help="The batch's receipt.json, in its run directory (instead of RUN).",
)
@click.option(
    "--archives",
    type=EXISTING_FILE,
    default=None,
    help="The batch's archives.json, in the same run directory (with --receipt).",
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
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["auto", "json", "text"]),
    default="auto",
    show_default=True,
    help="What stdout gets: the JSON line, the decision with one reason a line, or (auto) "
    "the JSON line and, on a terminal, the lines after it.",
)
@click.option(
    "--junit",
    "junit_path",
    type=OUTPUT_FILE,
    default=None,
    help="Also write the batch and its decision as JUnit XML here (one test case per run, "
    "one for the decision), for a CI system's test page.",
)
def check_command(
    batch: str | None,
    receipt: Path | None,
    archives: Path | None,
    project: Path | None,
    reverify: bool,
    output_format: str,
    junit_path: Path | None,
) -> None:
    """Qualify a saved batch or reject it with reasons.

    RUN is the batch's run directory, a unique prefix of its id, or latest; or
    name its files with --receipt and --archives. Prints {"qualified": bool,
    "reasons": [...]} and exits 0 when the batch qualifies, 1 when it is
    rejected, 2 on a usage error (a file that is not there, no repository to
    hold the batch against, a name that finds no batch). Under --reverify,
    SIGINT, SIGTERM or SIGHUP stop it with no verdict (exit 128 + the
    signal's number) once the verifications under way have ended.

    \b
    Examples:
      check-agent-eval latest
      check-agent-eval 3f2a --junit results.xml
      check-agent-eval --receipt evidence/RUN/receipt.json \\
                       --archives evidence/RUN/archives.json
    """
    located = located_project(project)
    receipt, archives = _batch_files(batch, receipt, archives, project)
    junit = junit_path
    from agent_eval.models import QualificationResult
    from agent_eval.verdict.qualification import decide_files

    anchors = gate_anchors(located)
    decided = decide_files(receipt, archives, anchors)
    result = decided.result
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
        result = QualificationResult(
            qualified=not reasons, reasons=reasons, chain=result.chain, notes=result.notes
        )
    recorded = decided.counted  # a resumed batch's: its chain's union, the runs decided on
    if junit is not None:
        from agent_eval.evidence_io import write_bytes_atomic
        from agent_eval.verdict.junit import junit_xml

        try:
            write_bytes_atomic(junit, junit_xml(recorded, result))
        except OSError as exc:
            click.echo(f"check-agent-eval: cannot write {junit}: {exc.strerror}", err=True)
            sys.exit(2)
    if output_format != "text":
        click.echo(result.model_dump_json(exclude_none=True))
    if output_format == "text" or (output_format == "auto" and sys.stdout.isatty()):
        from agent_eval.verdict.words import decision_lines

        for line in decision_lines(result, recorded):
            click.echo(line)
    sys.exit(0 if result.qualified else 1)


def _batch_files(
    batch: str | None, receipt: Path | None, archives: Path | None, project: Path | None
) -> tuple[Path, Path]:
    if batch is not None:
        if receipt is not None or archives is not None:
            raise click.UsageError("give RUN, or --receipt and --archives, not both")
        run_dir = batch_dir(batch, project)
        found = run_dir / "receipt.json", run_dir / "archives.json"
        for path in found:
            if not path.is_file():
                raise click.UsageError(f"{run_dir} holds no {path.name}: is it a run directory?")
        return found
    if receipt is None or archives is None:
        raise click.UsageError(
            "name the batch: RUN (its run directory, an id prefix, or latest), or both "
            "--receipt and --archives"
        )
    return receipt, archives
