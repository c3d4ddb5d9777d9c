"""``eval-agent``: run one whole batch and print where its receipt is."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from agent_eval.cli.common import (
    EXISTING_DIR,
    EXISTING_FILE,
    MAX_REPETITIONS,
    OUTPUT_FILE,
    gate_anchors,
    located_project,
    report_anchors,
    reported_errors,
)
from agent_eval.cli.progress import MODES, Mode, make_display
from agent_eval.errors import AgentEvalError

if TYPE_CHECKING:
    from agent_eval.batch.ports import Placement
    from agent_eval.batch.run import BatchOutcome, SeveralOutcome
    from agent_eval.project import Project

# The library is imported where a command runs, never at import: --help and a usage
# error cost the interpreter and click alone.

__all__ = ["eval_agent_command", "report_outcome"]


def _say(line: str) -> None:
    click.echo(f"eval-agent: {line}", err=True)


def report_outcome(
    outcome: BatchOutcome,
    project: Path,
    say: Callable[[str], None] | None = None,
    *,
    partial: bool = False,
    junit: Path | None = None,
    line_out: bool = True,
) -> dict[str, object]:
    """Say how the batch ended: its reasons and report on stderr, the one line on stdout
    (with ``"partial": true`` for a batch of some runs only); with *junit*, the batch
    and check-agent-eval's decision as JUnit XML there too. Without *line_out*, the line
    is only returned (one batch of several, whose line names them all).

    The report is written first and whatever stderr and stdout have become (a pipe whose
    reader a Ctrl-C ended): a line that cannot be shown never costs the report.
    """
    say = _unbroken(say or _say)
    report: str | None = None
    if outcome.receipt_written:
        # The reviewer's view; a batch whose report cannot be written keeps its exit code.
        try:
            from agent_eval.report.render import write_report

            written = write_report(
                outcome.receipt.parent, project=project, current=report_anchors(project)
            )
            report = f"report: {written}"
        except AgentEvalError as exc:
            report = f"warning: no report: {exc}"
        if junit is not None:
            _write_junit(outcome.receipt, project, junit, say)
    if outcome.status != "completed":
        for reason in outcome.reasons:
            say(f"{outcome.status}: {reason}")
    if outcome.receipt_written and (note := _infrastructure_note(outcome.receipt)):
        say(note)
    if report is not None:
        say(report)
    try:
        shown = outcome.receipt.relative_to(Path.cwd())
    except ValueError:
        shown = outcome.receipt
    line: dict[str, object] = {
        "status": outcome.status,
        "receipt": str(shown),
        "firstSuccesses": outcome.first_successes,
        "finalSuccesses": outcome.final_successes,
    }
    if partial:
        line["partial"] = True
    if line_out:
        with contextlib.suppress(OSError):
            click.echo(json.dumps(line))
    return line


def _infrastructure_note(receipt: Path) -> str | None:
    """The batch's retries, starved runners and host pressure, if any (never an error)."""
    from agent_eval.evidence_io import read_model
    from agent_eval.models import Receipt
    from agent_eval.verdict.qualification import infrastructure_note

    try:
        return infrastructure_note(read_model(receipt, Receipt, what="receipt"))
    except AgentEvalError:
        return None


def _unbroken(say: Callable[[str], None]) -> Callable[[str], None]:
    """*say*, quiet once its stream is gone (a closed or broken pipe)."""

    def said(text: str) -> None:
        with contextlib.suppress(OSError):
            say(text)

    return said


def _write_junit(receipt: Path, project: Path, junit: Path, say: Callable[[str], None]) -> None:
    """The batch and its decision by check-agent-eval's rules as JUnit XML; a file that
    cannot be written is said, and the batch keeps its exit code."""
    from agent_eval.evidence_io import write_bytes_atomic
    from agent_eval.project import find_project
    from agent_eval.verdict.junit import junit_xml
    from agent_eval.verdict.qualification import decide_files

    try:
        decided = decide_files(
            receipt, receipt.with_name("archives.json"), gate_anchors(find_project(project))
        )
        if decided.counted is not None:  # a resumed batch's: its chain's union, as decided
            write_bytes_atomic(junit, junit_xml(decided.counted, decided.result))
    except (AgentEvalError, OSError) as exc:
        say(f"warning: no JUnit XML at {junit}: {exc}")
        return
    if decided.counted is None:
        say(f"warning: no JUnit XML at {junit}: {'; '.join(decided.result.reasons)}")
    else:
        say(f"junit: {junit}")


@click.command()
@click.option(
    "--runner-config",
    "runner_configs",
    required=True,
    multiple=True,
    # A path that is not there is a usage error (exit 2) before any evidence is made.
    type=EXISTING_FILE,
    help="runner.json: the runner, its identity, images and limits. Repeat it to run "
    "several runners in one command over one packing, one consumer and shared slots: a "
    "batch each, then their matrix.",
)
@click.option(
    "--project",
    type=EXISTING_DIR,
    default=None,
    help="Repository to evaluate (default: the current one).",
)
@click.option(
    "--only",
    "only",
    multiple=True,
    metavar="TASK[-N]",
    help="Run only this task's runs, or this one run (repeatable); the receipt is partial "
    "and can never qualify.",
)
@click.option(
    "--repetitions",
    type=click.IntRange(1, MAX_REPETITIONS),
    default=None,
    metavar="N",
    help="Run each task N times instead of as the suite declares: a measurement batch, "
    "to compare with agent-eval compare; it can never qualify.",
)
@click.option(
    "--resume",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    metavar="RUN_DIR",
    help="Run only the runs this batch's chain left without a valid final verdict (missing, "
    "infrastructure, interrupted), in a new batch bound to the same identities; "
    "check-agent-eval decides on the whole chain.",
)
@click.option(
    "--progress",
    "progress",
    type=click.Choice(MODES),
    default="auto",
    show_default=True,
    help="How progress is shown on stderr: one line redrawn in place with a ticking clock and "
    "an estimate, one line per event after its UTC time, or nothing (auto: the bar on a "
    "terminal, lines otherwise).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the runs execute: this machine, or the nodes of a Ray cluster (each with "
    "its own local engine holding the same images; see the README).",
)
@click.option(
    "--ray-address",
    default=None,
    metavar="HOST:PORT",
    help="The Ray cluster's address (with --executor ray).",
)
@click.option(
    "--ray-node-ip",
    default=None,
    metavar="IP",
    help="This machine's address in the Ray cluster (with --executor ray; default: Ray's "
    "own guess).",
)
@click.option(
    "--junit",
    "junit_path",
    type=OUTPUT_FILE,
    default=None,
    help="Also write the batch and check-agent-eval's decision as JUnit XML here.",
)
def eval_agent_command(
    runner_configs: tuple[Path, ...],
    project: Path | None,
    only: tuple[str, ...],
    repetitions: int | None,
    resume: Path | None,
    progress: Mode,
    executor: str,
    ray_address: str | None,
    ray_node_ip: str | None,
    junit_path: Path | None,
) -> None:
    """Run every scheduled run of the suite; print one JSON line saying how it ended.

    The line holds "status", "receipt", "firstSuccesses" and "finalSuccesses".
    With several --runner-config, it holds "status" (the first that is not
    "completed", if any), "batches" (that line for each, in the configs' order) and
    "matrix" (the matrix record's path, or null when the batches could not be set
    side by side).

    The line is printed however the batch ends. Exit 0 when the schedule
    completed (whether or not it qualifies: ask check-agent-eval), 2 when the
    batch did not run, 3 when not even its final receipt could be written,
    1 when it stopped early (interrupted, stopped, an infrastructure failure).
    SIGINT, SIGTERM and SIGHUP stop it with a truthful receipt.
    """
    from agent_eval.batch.run import run_batch
    from agent_eval.batch.signals import stopping_on_signals
    from agent_eval.engine.docker_engine import connect_local_engine
    from agent_eval.verification.container.verifier import batch_verifier_factory

    junit = junit_path
    if resume is not None and (only or repetitions is not None):
        raise click.UsageError("--resume takes its schedule from the batch it resumes")
    if len(runner_configs) > 1:
        for name, given in (
            ("--resume", resume is not None),
            ("--junit", junit is not None),
            ("--executor ray", executor != "local"),
        ):
            if given:
                raise click.UsageError(
                    f"{name} runs one runner: give one --runner-config with it (several "
                    f"runners in one command run on this machine, each a new batch)"
                )
        _run_several(runner_configs, project, only, repetitions, progress)
    runner_config = runner_configs[0]
    # A repository that is not there or whose [tool.agent-eval] breaks a rule: not run,
    # exit 2, and no evidence (where it would go is not known).
    located = located_project(project)
    with reported_errors():
        remote = _remote(executor, ray_address, ray_node_ip)
    display = make_display(progress, sys.stderr, "eval-agent")
    with stopping_on_signals(until_exit=True) as signals:
        try:
            outcome = run_batch(
                runner_config,
                located,
                verifier_factory=batch_verifier_factory(located, display.say),
                connect=connect_local_engine,
                progress=display,
                notice=display.say,
                only=only,
                remote=remote,
                repetitions=repetitions,
                resume=resume,
            )
        finally:
            with contextlib.suppress(OSError):  # a stderr gone with its reader
                display.close()
        signals.settle()
        report_outcome(outcome, located.root, display.say, partial=bool(only), junit=junit)
    sys.exit(outcome.exit_code)


def _run_several(
    runner_configs: tuple[Path, ...],
    project: Path | None,
    only: tuple[str, ...],
    repetitions: int | None,
    progress: Mode,
) -> NoReturn:
    """Several runners in one command: a batch each, then their matrix; exits."""
    from agent_eval.batch.run import run_batches, shared_configs
    from agent_eval.batch.signals import stopping_on_signals
    from agent_eval.engine.docker_engine import connect_local_engine
    from agent_eval.verification.container.verifier import batch_verifier_factory

    located = located_project(project)
    # Configs that cannot share one command: refused before any evidence (exit 2).
    with reported_errors(exit_code=2):
        shared_configs(runner_configs)
    display = make_display(progress, sys.stderr, "eval-agent")
    with stopping_on_signals(until_exit=True) as signals:
        try:
            with reported_errors(exit_code=2):
                several = run_batches(
                    runner_configs,
                    located,
                    verifier_factory=batch_verifier_factory(located, display.say),
                    connect=connect_local_engine,
                    progress=display,
                    notice=display.say,
                    only=only,
                    repetitions=repetitions,
                )
        finally:
            with contextlib.suppress(OSError):
                display.close()
        signals.settle()
        code = report_several(several, located, display.say, partial=bool(only))
    sys.exit(code)


def report_several(
    several: SeveralOutcome,
    project: Project,
    say: Callable[[str], None] | None = None,
    *,
    partial: bool = False,
) -> int:
    """Say how each batch ended, write their matrix when every one completed, print the
    one line naming them all; the exit code (1 when the matrix could not be made)."""
    say = _unbroken(say or _say)
    lines = []
    for outcome in several.outcomes:
        say(f"batch {outcome.receipt.parent.name} ({outcome.status}):")
        lines.append(report_outcome(outcome, project.root, say, partial=partial, line_out=False))
    code = several.exit_code
    matrix: str | None = None
    if code == 0:
        try:
            matrix = str(_shown(_write_matrix(several, project)))
        except AgentEvalError as exc:
            say(f"no matrix: {exc}")
            code = 1
        else:
            say(f"matrix: {matrix}")
    statuses = [o.status for o in several.outcomes if o.status != "completed"]
    line = {
        "status": statuses[0] if statuses else "completed",
        "batches": lines,
        "matrix": matrix,
    }
    with contextlib.suppress(OSError):
        click.echo(json.dumps(line))
    return code


def _write_matrix(several: SeveralOutcome, project: Project) -> Path:
    """The matrix of the command's batches, written beside them as
    ``matrix-<first batch id>.json`` (never a run directory), and its page as
    ``matrix-<first batch id>.html``, each batch linked to its report.

    Raises:
        AgentEvalError: The batches cannot be set side by side, or it cannot be written.
    """
    from agent_eval.compare.matrix import matrix_of_batches
    from agent_eval.compare.matrix_page import write_matrix_page
    from agent_eval.errors import EvidenceError
    from agent_eval.evidence_io import write_model_atomic

    run_dirs = [o.receipt.parent for o in several.outcomes]
    matrix = matrix_of_batches(run_dirs, gate_anchors(project))
    path = project.evidence / f"matrix-{run_dirs[0].name}.json"
    try:
        write_model_atomic(path, matrix)
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot be written: {exc.strerror or exc}") from exc
    write_matrix_page(
        path.with_suffix(".html"), matrix, {d.name: d / "report.html" for d in run_dirs}
    )
    return path


def _shown(path: Path) -> Path:
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _remote(executor: str, address: str | None, node_ip: str | None) -> Placement | None:
    if executor == "local":
        if address is not None or node_ip is not None:
            raise click.UsageError("--ray-address and --ray-node-ip go with --executor ray")
        return None
    if not address:
        raise click.UsageError("--executor ray needs --ray-address HOST:PORT")
    host, _, port = address.rpartition(":")
    if not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(
            f"{address!r} is not HOST:PORT (a host name or an IP address, and a port "
            "from 1 to 65535)",
            param_hint="--ray-address",
        )
    if node_ip is not None:
        try:
            ipaddress.ip_address(node_ip)
        except ValueError:
            raise click.BadParameter(
                f"{node_ip!r} is not an IP address", param_hint="--ray-node-ip"
            ) from None
    from agent_eval.cli.compose import cluster_node_parts
    from agent_eval.cluster.ray_cluster import RayCluster

    return RayCluster(address, cluster_node_parts(), node_ip=node_ip)


_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\]")
