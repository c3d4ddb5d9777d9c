"""Every command of the CLI tells a typo from a failure: a path that is not there (or not
of the kind asked for), an output into a directory that is not there, a repository that
is not one, is a usage error, exit 2, before anything is done or written.

The tests walk every command ``agent-eval`` has, so a command or option added later is
held to the same rule without a test of its own.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.cli.common import EXISTING_DIR, EXISTING_FILE, OUTPUT_FILE, SOCKET
from tests.evidence_builders import receipt, write_batch


def _walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from _walk(sub, (*path, name))
    else:
        yield path


COMMANDS = list(_walk(main))


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None
        command = found
    return command


def _params(path: tuple[str, ...]) -> list[click.Parameter]:
    return [p for p in _command(path).params if p.name not in ("help", "version")]


NOT_PATHS: dict[str, str] = {
    "run_id": "a run id",
    "reviewer": "a person",
    "note": "free text",
    "only": "task or run ids",
    "ray_address": "HOST:PORT, checked by the command",
    "ray_node_ip": "an IP address, checked by the command",
    "registry": "HOST:PORT of a loopback registry, checked by the command",
    "debian_mirror": "a URL",
    "runners": "agent names",
    "agent": "an agent name",
    "image": "an image reference",
    "verifier_image": "an image reference",
    "baseline": "run directories joined by commas, each checked by the command",
    "candidate": "run directories joined by commas, each checked by the command",
    "function": "module:name",
    "examples": "JSON lists",
    "task_id": "a task id",
    "batch": "a batch: a run directory, an id prefix or latest, found by the command",
    "runs": "batches: each a run directory, an id prefix or latest, found by the command",
    "other_batch": "a batch: a run directory, an id prefix or latest, found by the command",
    "output_format": "a format name",
    "ci": "a CI system's name",
}
"""Every parameter taking free text, and why it is not a path (a new one must say)."""

PATH_TYPES = (EXISTING_DIR, EXISTING_FILE, OUTPUT_FILE, SOCKET)


def test_the_walk_finds_every_command() -> None:
    assert len(COMMANDS) >= 18
    assert ("runners", "review") in COMMANDS and ("images", "build") in COMMANDS


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_parameter_is_a_checked_path_or_says_why_it_is_not_one(
    path: tuple[str, ...],
) -> None:
    for param in _params(path):
        kind = param.type
        if isinstance(kind, click.Path):
            # exists=True, or an output whose directory must be there.
            assert kind is OUTPUT_FILE or kind.exists, (path, param.name)
        elif kind is SOCKET or not isinstance(kind, click.types.StringParamType):
            continue
        else:
            assert param.name in NOT_PATHS, (path, param.name)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # A Unix socket's path is short (108 bytes): not under pytest's long tmp_path.
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def _valid(param: click.Parameter, root: Path) -> list[str]:
    """An argument list giving *param* a value that passes its type."""
    kind = param.type
    if kind is SOCKET:
        value = str(root / "engine.sock")
    elif isinstance(kind, click.Path) and kind is OUTPUT_FILE:
        value = str(root / "out.json")
    elif isinstance(kind, click.Path) and not kind.file_okay:
        value = str(root / "dir")
    elif isinstance(kind, click.Path):
        value = str(root / "file.json")
    elif isinstance(kind, click.Choice):
        value = str(kind.choices[0])
    elif isinstance(kind, click.types._NumberRangeBase):
        value = str(kind.min if kind.min is not None else 1)
    elif param.name == "examples":
        value = "[1]"
    else:
        value = "x"
    if isinstance(param, click.Argument):
        return [value]
    assert isinstance(param, click.Option)
    return [param.opts[0]] if param.is_flag else [param.opts[0], value]


def _missing(param: click.Parameter, root: Path) -> str:
    if param.type is SOCKET:
        return str(root / "missing.sock")
    return str(root / "missing" / "x.json")


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


PATH_PARAMS = [
    (path, param.name)
    for path in COMMANDS
    for param in _params(path)
    if param.type in PATH_TYPES or isinstance(param.type, click.Path)
]


@pytest.mark.parametrize(("path", "name"), PATH_PARAMS, ids=lambda v: str(v))
def test_a_path_that_is_not_there_is_a_usage_error_and_writes_nothing(
    path: tuple[str, ...], name: str, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = short_dir
    (root / "dir").mkdir()
    (root / "file.json").write_text("{}")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(root / "engine.sock"))
    monkeypatch.chdir(root)
    args = list(path)
    tested = None
    for param in _params(path):
        if param.name == name:
            tested = param
            given = _valid(param, root)
            given[-1] = _missing(param, root)
            args += given
        elif param.required:
            args += _valid(param, root)
    assert tested is not None
    before = _tree(root)
    try:
        result = CliRunner().invoke(main, args)
    finally:
        listening.close()
    assert result.exit_code == 2, (args, result.output)
    assert "Invalid value for" in result.output
    hint = tested.get_error_hint(click.Context(_command(path)))
    assert hint.strip("'\"") in result.output or hint in result.output, result.output
    assert _tree(root) == before


@pytest.mark.parametrize(
    "path",
    # init makes a directory a repository: it is the one command that takes one that is not.
    [p for p in COMMANDS if p != ("init",) and any(q.name == "project" for q in _params(p))],
    ids=" ".join,
)
def test_a_project_that_is_no_repository_is_a_usage_error_and_writes_nothing(
    path: tuple[str, ...], short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = short_dir
    (root / "dir").mkdir()
    (root / "file.json").write_text("{}")
    (root / "bare").mkdir()
    monkeypatch.chdir(root)
    args = list(path)
    for param in _params(path):
        if param.name == "project":
            args += ["--project", str(root / "bare")]
        elif param.required:
            args += _valid(param, root)
    if path == ("compare",):
        args[1:3] = [str(root / "dir"), str(root / "dir")]
    if path == ("images", "lock"):
        args += ["--gateway"]
    before = _tree(root)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (args, result.output)
    assert "no pyproject.toml found" in result.output
    assert "Traceback" not in result.output
    assert _tree(root) == before


def test_an_output_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    result = CliRunner().invoke(main, ["reference-config", "oracle", "--output", str(fifo)])
    assert result.exit_code == 2
    assert "is not a regular file" in result.output


def test_reference_config_into_a_missing_directory_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "dir" / "x.json"
    result = CliRunner().invoke(main, ["reference-config", "oracle", "--output", str(target)])
    assert result.exit_code == 2
    assert "is not a directory (it is not created)" in result.output
    assert not (tmp_path / "missing").exists()


def test_an_unknown_reference_runner_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["reference-config", "bogus", "--output", "x.json"])
    assert result.exit_code == 2
    assert "'bogus' is not one of" in result.output


@pytest.mark.docker
def test_the_engine_s_own_socket_passes_runtime_path_and_the_command_runs(
    tmp_path: Path,
) -> None:
    from agent_eval.engine import local_socket_path

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    socket_path = local_socket_path(None, os.environ)
    result = CliRunner().invoke(
        main, ["cleanup", "--project", str(tmp_path), "--runtime-path", socket_path]
    )
    assert result.exit_code == 0, result.output
    assert "nothing to clean up" in result.output


OUTPUT_PARAMS = [
    (path, param.name) for path in COMMANDS for param in _params(path) if param.type is OUTPUT_FILE
]


@pytest.mark.parametrize(("path", "name"), OUTPUT_PARAMS, ids=lambda v: str(v))
@pytest.mark.parametrize(
    "inside", ["receipt.json", "archives.json", "runs/forms-1/attempt-1/solution/solution.py"]
)
def test_an_output_in_a_batchs_evidence_is_a_usage_error_and_writes_nothing(
    path: tuple[str, ...],
    name: str,
    inside: str,
    short_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any command's output named into a batch's receipt, archives or runs/ would replace
    or add evidence the checker holds that batch to (exit 0 before, the batch then failed
    check-agent-eval)."""
    root = short_dir
    (root / "dir").mkdir()
    (root / "file.json").write_text("{}")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    batch = write_batch(root / "evidence", receipt()).root
    monkeypatch.chdir(root)
    args = list(path)
    for param in _params(path):
        if param.name == name:
            given = _valid(param, root)
            given[-1] = str(batch / inside)
            args += given
        elif param.required:
            args += _valid(param, root)
    before = {p: p.read_bytes() for p in batch.rglob("*") if p.is_file()}
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (args, result.output)
    assert "part of the evidence of the batch in" in " ".join(result.output.split())
    assert {p: p.read_bytes() for p in batch.rglob("*") if p.is_file()} == before


def test_an_error_quoting_a_batch_is_one_line_whatever_the_batch_holds() -> None:
    """An error may quote what a batch recorded (a node's name in a checker's reason):
    a terminal gets no escape sequence, no bidi override and no second line from it."""
    from agent_eval.cli.common import reported_errors
    from agent_eval.errors import EvidenceError

    @click.command()
    def failing() -> None:
        with reported_errors():
            raise EvidenceError("node-binding: n\x1b[2J\x07\nFAKE LINE: qualified\u202e")

    result = CliRunner().invoke(failing, [])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "\x1b" not in result.output
    assert "\u202e" not in result.output and "\x07" not in result.output
    assert "U+001B[2JU+0007U+000AFAKE LINE" in result.output
