"""``agent-eval compare`` and ``agent-eval plan``: did a change help, and how many runs
would show it."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import BaseModel

from agent_eval.cli.common import (
    EXISTING_DIR,
    OUTPUT_FILE,
    batch_dir,
    gate_anchors,
    located_project,
    reported_errors,
)
from agent_eval.compare.compare import ALLOWABLE, as_text, compare_batches
from agent_eval.compare.matrix import as_text as matrix_text
from agent_eval.compare.matrix import matrix_of_batches
from agent_eval.compare.matrix_compare import as_text as matrices_text
from agent_eval.compare.matrix_compare import compare_matrices
from agent_eval.compare.matrix_page import write_matrix_page
from agent_eval.compare.page import write_comparison_page
from agent_eval.compare.share import (
    as_markdown,
    matrix_markdown,
    share_matrix_comparison,
    share_summary,
)
from agent_eval.compare.statistics import BeyondPlanning, runs_needed
from agent_eval.consumer.wheels import catalog_of_wheels
from agent_eval.errors import AgentEvalError, EvidenceError
from agent_eval.evidence_io import write_model_atomic
from agent_eval.layout import RunDirectory
from agent_eval.models.receipt import MAX_REPETITIONS
from agent_eval.project import find_project
from agent_eval.suite.tasks import read_suite_spec

__all__ = ["compare_command", "matrix_command", "plan_command", "summary_command"]


def _write(path: Path, model: BaseModel) -> None:
    try:
        write_model_atomic(path, model)
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot be written: {exc.strerror or exc}") from exc


def _dirs(value: str) -> list[Path]:
    return [Path(part) for part in value.split(",") if part]


def _refuse_batch_file(what: str, file: Path) -> None:
    """A batch's own evidence file is no matrix record: read as one, it would be refused
    for the record's missing fields, which says nothing of the mistake."""
    run = RunDirectory(file.parent)
    if file.name in (run.receipt.name, run.archives_manifest.name):
        raise click.UsageError(
            f"{what}: {file} is the {file.name} of the batch in {file.parent}, not a matrix "
            f"record: name the batch by its run directory ({file.parent})"
        )


def _records(sides: list[tuple[str, str]]) -> list[Path] | None:
    """The matrix records the *sides* (what the argument is called, what it says) name,
    or None when they name batches. A side naming an existing file is a matrix record; a
    mix of the two kinds, or a record among several names, is a usage error saying which
    file and the rule."""
    records: list[Path | None] = []
    for what, value in sides:
        parts = [part for part in value.split(",") if part]
        files = [Path(part) for part in parts if Path(part).is_file()]
        for file in files:
            _refuse_batch_file(what, file)
        if files and len(parts) > 1:
            raise click.UsageError(
                f"{what}: {files[0]} is a matrix record (a file): a side is one matrix "
                "record, or run directories joined by commas, never both"
            )
        records.append(files[0] if files else None)
    kinds = [r is not None for r in records]
    if all(kinds):
        return [r for r in records if r is not None]
    if any(kinds):
        i = kinds.index(True)
        other_what, other_value = sides[1 - i]
        raise click.UsageError(
            f"{sides[i][0]}: {records[i]} is a matrix record (a file) but {other_what} "
            f"{other_value!r} names batches: compare sets batches against batches, or one "
            "matrix record against another, never a mix"
        )
    return None


@click.command()
@click.argument("baseline", metavar="BASELINE[,BASELINE...]")
@click.argument("candidate", metavar="CANDIDATE[,CANDIDATE...]")
@click.option(
    "--json",
    "json_path",
    type=OUTPUT_FILE,
    default=None,
    help="Also write the comparison as JSON here.",
)
@click.option(
    "--html",
    "html_path",
    type=OUTPUT_FILE,
    default=None,
    help="Also write the comparison as a self-contained HTML page here.",
)
@click.option(
    "--allow-different",
    "allow",
    multiple=True,
    type=click.Choice(sorted(ALLOWABLE)),
    help="Compare although the sides differ in this too, not only in the library "
    "(repeatable); the difference is said first.",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository the batches belong to (default: the current one).",
)
def compare_command(
    baseline: str, candidate: str, json_path: Path | None, html_path: Path | None,
    allow: tuple[str, ...], project: Path | None,
) -> None:  # fmt: skip
    """Compare the run directories of a baseline with a candidate's, task by task.

    Each side is one batch (a run directory, a unique prefix of a batch id, or latest),
    or several joined by commas, pooled (they must
    share every identity: a measurement batch of `eval-agent --repetitions N` pools
    with others of its kind). Every batch must pass the checker's evidence rules.
    Prints what differs (with the library's public symbols added, removed or changed,
    from each side's API catalog generated again from its wheels) and, per task and
    pooled, the rates, their difference with a 95 % interval, an exact test and a
    verdict: better, worse, or no detectable difference with the change these runs
    could have detected; --html writes the same as a self-contained page. Exit 0 when
    compared, 1 when refused (evidence, or identities that differ), 2 on a usage error.

    Given two matrix records instead (files written by `agent-eval matrix --json`, before
    and after a change to the library), compares each agent both hold: every batch a
    record names must be in the repository's evidence directory and pass the checker's
    rules, the record must be the matrix its batches make, and both must be over the
    same suite and tasks. Each agent's batches are compared as above, the verdicts
    corrected by Holm's method for the number of agents; an agent only one record
    holds is listed. --html is for batches only.

    \b
    Example:
      agent-eval compare .verification/agent-eval/BEFORE .verification/agent-eval/AFTER
      agent-eval compare matrix-before.json matrix-after.json --json change.json
    """
    records = _records([("BASELINE", baseline), ("CANDIDATE", candidate)])
    if records is not None:
        _compare_records(records, json_path, html_path, allow, project)
        return
    base = [batch_dir(str(p), project) for p in _dirs(baseline)]
    cand = [batch_dir(str(p), project) for p in _dirs(candidate)]
    if not base or not cand:
        raise click.UsageError("name at least one run directory on each side")
    for path in (*base, *cand):
        if not path.is_dir():
            raise click.UsageError(f"{path}: no such run directory")
    located = located_project(project, "batches")
    with reported_errors():
        current = gate_anchors(located)
        comparison = compare_batches(base, cand, current, allow, catalogs=catalog_of_wheels)
        if json_path is not None:
            _write(json_path, comparison)
        if html_path is not None:
            try:
                write_comparison_page(html_path, comparison, current.titles)
            except OSError as exc:
                raise EvidenceError(f"{html_path}: cannot be written: {exc.strerror}") from exc
    click.echo(as_text(comparison))


def _compare_records(
    records: list[Path],
    json_path: Path | None,
    html_path: Path | None,
    allow: tuple[str, ...],
    project: Path | None,
) -> None:
    if html_path is not None:
        raise click.UsageError(
            "--html: the page draws a comparison of batches; for matrix records use --json"
        )
    located = located_project(project, "matrix records' batches")
    with reported_errors():
        compared = compare_matrices(
            records[0],
            records[1],
            located.evidence,
            gate_anchors(located),
            allow,
            catalogs=catalog_of_wheels,
        )
        if json_path is not None:
            _write(json_path, compared)
    click.echo(matrices_text(compared))


@click.command()
@click.argument("runs", metavar="RUN...", nargs=-1, required=True)
@click.option(
    "--json",
    "json_path",
    type=OUTPUT_FILE,
    default=None,
    help="Also write the matrix as JSON here.",
)
@click.option(
    "--html",
    "html_path",
    type=OUTPUT_FILE,
    default=None,
    help="Also write the matrix as a self-contained HTML page here.",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository the batches belong to (default: the current one).",
)
def matrix_command(
    runs: tuple[str, ...], json_path: Path | None, html_path: Path | None, project: Path | None
) -> None:
    """Set several agents' batches over one library side by side.

    Each RUN is a run directory, a unique prefix of a batch id, or latest. Batches of
    one runner identity (runner, version, model) pool into one row; every batch must
    pass the checker's evidence rules and share the library, suite, verifier, gateway
    and harness, and none may be named twice. Prints one line per agent (first and final
    rates with Wilson 95 % intervals, unsafe attempts and runs, tokens and seconds per
    run, model calls per success), ranked by final rate, then each pair's verdict from
    the stratified exact test with Holm's correction for the number of pairs. Exit 0
    when set out, 1 when refused, 2 on a usage error.

    \b
    Example:
      agent-eval matrix .verification/agent-eval/A .verification/agent-eval/B
    """
    dirs = [batch_dir(run, project) for run in runs]
    for path in dirs:
        if not path.is_dir():
            raise click.UsageError(f"{path}: no such run directory")
    located = located_project(project, "batches")
    with reported_errors():
        matrix = matrix_of_batches(dirs, gate_anchors(located))
        if json_path is not None:
            _write(json_path, matrix)
        if html_path is not None:
            write_matrix_page(html_path, matrix, {d.name: d / "report.html" for d in dirs})
    click.echo(matrix_text(matrix))


@click.command()
@click.option(
    "--baseline-rate",
    type=click.FloatRange(0.0, 1.0),
    required=True,
    metavar="P",
    help="The rate you expect now (for example a baseline batch's first-try rate).",
)
@click.option(
    "--detect",
    type=click.FloatRange(-1.0, 1.0),
    required=True,
    metavar="D",
    help="The change worth detecting, as a difference of rates (0.1 = ten points up).",
)
def plan_command(baseline_rate: float, detect: float) -> None:
    """Say how many runs per side a comparison needs before any is spent.

    The count is for Fisher's exact test at the 5 % level with 80 % power, both sides
    equal; divide it by the number of tasks for `eval-agent --repetitions`.

    \b
    Example:
      agent-eval plan --baseline-rate 0.8 --detect 0.1
    """
    other = baseline_rate + detect
    if detect == 0 or not 0.0 <= other <= 1.0:
        raise click.UsageError(
            f"--detect: {baseline_rate} + {detect} = {other:g} is not a rate in [0, 1] "
            "other than the baseline's"
        )
    try:
        needed = runs_needed(baseline_rate, detect)
    except BeyondPlanning as beyond:
        smallest = (
            f"the smallest change it plans for from {baseline_rate:g} is "
            f"{beyond.smallest * 100:.0f} points"
            if beyond.smallest is not None
            else f"it plans for no change from {baseline_rate:g}"
        )
        raise click.UsageError(
            f"--detect: {baseline_rate:g} -> {other:g} needs more than {beyond.limit} runs per "
            f"side, more than plan computes; {smallest}"
        ) from None
    tasks = _task_count()
    said = (
        f"{needed} runs per side detect {baseline_rate:g} -> {other:g} with 80 % power at the "
        "5 % level (Fisher's exact test)"
    )
    if tasks:
        per_task = -(-needed // tasks)
        batches = -(-per_task // MAX_REPETITIONS)
        said += f"; with {tasks} task(s): {per_task} runs of each task per side"
        said += (
            f" (eval-agent --repetitions {per_task})"
            if batches == 1
            else f" ({batches} batches of eval-agent --repetitions {-(-per_task // batches)} "
            "per side, pooled with commas in agent-eval compare)"
        )
    click.echo(said)


def _task_count() -> int:
    """The number of tasks the current repository declares (0: none found)."""
    try:
        return len(read_suite_spec(find_project(None).tasks).taskIds)
    except AgentEvalError:
        return 0


@click.command()
@click.argument("batch", metavar="RUN")
@click.option(
    "--compare",
    "other_batch",
    default=None,
    metavar="BASELINE",
    help="Also set the batch against this baseline batch.",
)
@click.option(
    "--json",
    "json_path",
    type=OUTPUT_FILE,
    default=None,
    help="Also write the summary as JSON here.",
)
@click.option(
    "--allow-different",
    "allow",
    multiple=True,
    type=click.Choice(sorted(ALLOWABLE)),
    help="With --compare: compare although the batches differ in this too, not only in the "
    "library (repeatable).",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository the batch belongs to (default: the current one).",
)
def summary_command(
    batch: str,
    other_batch: str | None,
    json_path: Path | None,
    allow: tuple[str, ...],
    project: Path | None,
) -> None:
    """Print a summary of the batch RUN that may be shared, as Markdown.

    RUN (and BASELINE) is a run directory, a unique prefix of a batch id, or latest.

    Counts with their denominators, each task's results, the identities by digest and
    the names of the rules the decision rests on; never a solution, transcript, log,
    prompt, solution file name, environment value, reason wording or local path.

    Given two matrix records (RUN the candidate's, BASELINE the baseline's), shares
    their comparison (see agent-eval compare) redacted as a batch comparison is.

    \b
    Example:
      agent-eval summary .verification/agent-eval/RUN --compare .verification/agent-eval/BEFORE
      agent-eval summary matrix-after.json --compare matrix-before.json
    """
    sides = [("RUN", batch)] + ([("--compare", other_batch)] if other_batch is not None else [])
    records = _records(sides)
    if records is not None:
        if len(records) != 2:
            raise click.UsageError(
                f"RUN: {records[0]} is a matrix record: it is summarised against another "
                "(--compare BASELINE_RECORD)"
            )
        located = located_project(project, "matrix records' batches")
        with reported_errors():
            compared = share_matrix_comparison(
                records[1],
                records[0],
                located.evidence,
                gate_anchors(located),
                catalog_of_wheels,
                allow,
            )
            if json_path is not None:
                _write(json_path, compared)
        click.echo(matrix_markdown(compared), nl=False)
        return
    run_dir = batch_dir(batch, project)
    other = batch_dir(other_batch, project) if other_batch is not None else None
    for path in (run_dir, *([other] if other is not None else [])):
        if not path.is_dir():
            raise click.UsageError(f"{path}: no such run directory")
    if allow and other is None:
        raise click.UsageError("--allow-different needs --compare")
    located = located_project(project)
    with reported_errors():
        shared = share_summary(run_dir, gate_anchors(located), other, catalog_of_wheels, allow)
        if json_path is not None:
            _write(json_path, shared)
    click.echo(as_markdown(shared), nl=False)
