"""What every command shares: turning library errors into messages and exit codes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_eval.errors import AgentEvalError
from agent_eval.layout import evidence_holding

if TYPE_CHECKING:
    from agent_eval.engine import ContainerEngine
    from agent_eval.project import Project
    from agent_eval.verdict.qualification import Anchors

MAX_REPETITIONS = 20
"""The most runs per task ``eval-agent --repetitions`` takes; equal to the receipt's bound
(``agent_eval.models.receipt.MAX_REPETITIONS``, a test keeps them equal), spelled here so
the command's options need no model imported."""

__all__ = [
    "BATCH_HELP",
    "EXISTING_DIR",
    "EXISTING_FILE",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "OUTPUT_FILE",
    "SOCKET",
    "batch_dir",
    "gate_anchors",
    "located_project",
    "not_evidence",
    "project_option",
    "report_anchors",
    "reported_errors",
]

EXIT_FAILURE = 1
EXIT_USAGE = 2
"""click's own exit code for a usage error: a path or setting that is not there or not
allowed, refused before anything is done or written."""

# Every path a command takes is one of these: a name that is not there (or not of the
# kind asked for) is a usage error, exit 2, before the command does anything.
EXISTING_DIR = click.Path(path_type=Path, file_okay=False, exists=True)
"""A directory that must be there (a repository, a run directory)."""
EXISTING_FILE = click.Path(path_type=Path, dir_okay=False, exists=True)
"""A file that must be there (a receipt, a config)."""


class _OutputFile(click.Path):
    """A file to write whose directory is already there: a typo in it is refused, never
    created on the way."""

    name = "output file"

    def __init__(self) -> None:
        super().__init__(path_type=Path, dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        parent = Path(os.path.abspath(os.fsdecode(path))).parent
        if not parent.is_dir():
            self.fail(f"{parent} is not a directory (it is not created)", param, ctx)
        if (why := not_evidence(Path(os.fsdecode(path)))) is not None:
            self.fail(why, param, ctx)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return path
        except OSError as exc:
            self.fail(f"{os.fsdecode(path)!r}: {exc.strerror}", param, ctx)
        if not stat.S_ISREG(mode):
            # A FIFO would block the write, a device or a link would take it elsewhere.
            self.fail(f"{os.fsdecode(path)!r} is there and is not a regular file", param, ctx)
        return path


def not_evidence(path: Path) -> str | None:
    """Why *path* may not be written: it is (or lies in) a batch's evidence. None: it may."""
    held = evidence_holding(path)
    if held is None:
        return None
    return (
        f"{path} is part of the evidence of the batch in {held}: written there, it would "
        "replace or add a file the checker holds that batch to; write outside its "
        "receipt, archives and runs/"
    )


OUTPUT_FILE = _OutputFile()
"""A file a command writes, in a directory that is there."""


class _Socket(click.ParamType[str]):
    """The engine's Unix socket: an absolute path to a socket that is there."""

    name = "socket"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value)
        if not text.startswith("/") or "\x00" in text:
            self.fail(f"{text!r} is not an absolute path", param, ctx)
        try:
            mode = os.stat(text).st_mode
        except OSError as exc:
            self.fail(f"{text!r}: {exc.strerror}", param, ctx)
        if not stat.S_ISSOCK(mode):
            self.fail(f"{text!r} is not a Unix socket", param, ctx)
        return text


SOCKET = _Socket()
"""``--runtime-path``: the engine's socket, there when the command starts."""


def project_option(help_text: str) -> Any:
    """``--project``: a repository directory that is there."""
    return click.option("--project", type=EXISTING_DIR, default=None, help=help_text)


def located_project(project: Path | None, what: str = "batch") -> Project:
    """The repository a command works in; none found, or one whose ``[tool.agent-eval]``
    breaks a rule, is a usage error (exit 2) before anything is done.

    Without the repository every rule that needs it would reject: a typo, not a verdict.
    """
    from agent_eval.project import ProjectNotFoundError, find_project

    try:
        return find_project(project)
    except ProjectNotFoundError as exc:
        raise click.UsageError(
            f"{exc}, or name the repository the {what} belongs to with --project"
        ) from None
    except AgentEvalError as exc:
        raise click.UsageError(str(exc)) from None


@contextmanager
def reported_errors(exit_code: int = EXIT_FAILURE) -> Iterator[None]:
    """Print an AgentEvalError as one line on stderr (no traceback) and exit.

    The message may quote what a batch recorded (a node's name, a checker's reason):
    each control or formatting character is written as its code point, so none can move
    the terminal or forge a line."""
    try:
        yield
    except AgentEvalError as exc:
        from agent_eval.report.text import one_line

        click.echo(f"error: {one_line(str(exc))}", err=True)
        raise SystemExit(exit_code) from exc


BATCH_HELP = (
    "The batch: its run directory, a unique prefix of its id (as agent-eval list shows "
    "it), or latest."
)


def batch_dir(spec: str, project: Path | None) -> Path:
    """The run directory *spec* names (a path, an id prefix, or ``latest``); a name that
    finds no batch, or several, is a usage error (exit 2) saying which."""
    from agent_eval.report.batches import UnknownBatch, find_batch, names_a_path

    if names_a_path(spec):
        return Path(spec)
    located = located_project(project)
    try:
        return find_batch(spec, located.evidence)
    except UnknownBatch as exc:
        raise click.BadParameter(str(exc), param_hint="RUN") from None


def gate_anchors(located: Project) -> Anchors:
    """What a batch is held against here: the checkout's anchors, and this machine's engine
    for an image pinned by registry digest (connected only if a batch names one)."""
    import dataclasses

    from agent_eval.verdict.qualification import current_anchors

    return dataclasses.replace(current_anchors(located), resolve_image=_LocalImages().resolve)


class _LocalImages:
    """The local engine (``DOCKER_HOST`` or the default socket), connected on first use."""

    def __init__(self) -> None:
        self._engine: ContainerEngine | None = None

    def resolve(self, reference: str) -> str:
        """The id of the image *reference* names here.

        Raises:
            AgentEvalError: No engine answers, or it holds no such image.
        """
        if self._engine is None:
            from agent_eval.engine.docker_engine import connect_local_engine

            self._engine = connect_local_engine()
        return self._engine.resolve_image(reference).image_id


def report_anchors(project: Path | None) -> Anchors | None:
    """:func:`gate_anchors` of the checkout found from *project*; None when none is found
    (the report then says why in its decision)."""
    from agent_eval.project import find_project

    try:
        located = find_project(project)
    except AgentEvalError:
        return None
    return gate_anchors(located)
