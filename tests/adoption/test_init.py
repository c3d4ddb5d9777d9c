"""``agent-eval init`` adopts the harness in a library's repository and starts it from green.

Invariants: the function's signature is read from the library's source, never
imported (re-exports followed, a classmethod's ``cls`` dropped, an instance
method or a coroutine refused by name); the generated task passes
``tasks verify --verifier local`` as written (its correct case calls the real
function, its negative fails the one assertion); a second run with the same
answers writes nothing and says so; a file that holds something else is named,
exit 2, and nothing at all is written; without a build lock the first command it
gives is the one that writes it (init itself reaches no index).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_eval.adoption.init import LOCK_COMMAND, NEXT_COMMANDS, init_repository, read_function
from agent_eval.cli import main
from agent_eval.errors import ConfigError
from agent_eval.packing import BUILD_LOCK
from agent_eval.project import find_project
from agent_eval.suite.tasks import load_suite

LIBRARY = {
    "__init__.py": (
        '"""Dates."""\n\nfrom .spans import Span\nfrom .text import parse_day as parse_day\n'
        "from .text import parse_week\n"
    ),
    "text.py": (
        '"""Parsing."""\n\n\n'
        "def parse_day(text: str, /, strict: bool = True, *, sep: str = '-') -> list[int]:\n"
        '    """Day, month and year of a date such as 2024-01-31."""\n'
        "    parts = [int(p) for p in text.split(sep)]\n"
        "    if strict and len(parts) != 3:\n"
        '        raise ValueError(f"not a date: {text}")\n'
        "    return parts\n\n\n"
        "def parse_week(text: str) -> int:\n"
        "    return int(text)\n\n\n"
        "def json(text: str) -> list[str]:\n"
        '    """The fields of a line, named as a module the grader itself imports."""\n'
        '    return text.split(",")\n'
    ),
    "py.typed": "",
    "spans.py": (
        '"""Spans."""\n\nfrom __future__ import annotations\n\n\n'
        "class Span:\n"
        "    @classmethod\n"
        "    def days(cls, start: str, end: Span | None = None) -> int:\n"
        "        return len(start)\n\n"
        "    def width(self) -> int:\n"
        "        return 0\n\n"
        "    async def later(self) -> int:\n"
        "        return 0\n\n\n"
        "def span_of(start: str) -> Span | None:\n"
        "    return Span()\n"
    ),
}


def library_repository(root: Path) -> Path:
    """A repository holding one distribution, daydate, under packages/ (no agent-eval yet)."""
    package = root / "packages" / "daydate" / "src" / "daydate"
    package.mkdir(parents=True)
    for name, text in LIBRARY.items():
        (package / name).write_text(text)
    (root / "packages" / "daydate" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '\n[project]\nname = "daydate"\nversion = "1.0"\n'
    )
    return root


def test_a_re_exported_function_is_read_from_its_source_with_its_signature(
    tmp_path: Path,
) -> None:
    packages = library_repository(tmp_path)
    fn = read_function(packages / "packages", "daydate:parse_day")
    assert (fn.symbol, fn.name, fn.distribution.name) == (
        "daydate.parse_day",
        "parse_day",
        "daydate",
    )
    assert fn.parameters == ("text: str", "/", "strict: bool = ...", "*", "sep: str = ...")
    assert fn.defined == ("text: str", "/", "strict: bool = True", "*", "sep: str = '-'")
    assert fn.forwarded == ("text", "strict", "sep=sep")
    assert fn.returns == "list[int]"


def test_a_classmethod_loses_cls_and_a_library_type_is_any_in_the_contract(
    tmp_path: Path,
) -> None:
    packages = library_repository(tmp_path) / "packages"
    fn = read_function(packages, "daydate.spans:Span.days")
    assert fn.parameters == ("start: str", "end: Any = ...")
    assert (fn.forwarded, fn.returns, fn.symbol) == (
        ("start", "end"),
        "int",
        "daydate.spans.Span.days",
    )


STAR_CHAIN = {
    # converters <- * _chain (no __all__) <- * _impl (__all__ lists to_bool only)
    "converters.py": '"""Converters."""\n\nfrom ._chain import *  # noqa: F403\n',
    "_chain.py": "from daydate._impl import *  # noqa: F403\n",
    "_impl.py": (
        '__all__ = ["to_bool"]\n\n\n'
        "def to_bool(value: str, default: bool = False) -> bool:\n"
        "    return value == 'yes' or default\n\n\n"
        "def not_listed() -> int:\n"
        "    return 0\n"
    ),
}


def test_a_function_reached_through_a_chain_of_star_imports_is_read(tmp_path: Path) -> None:
    packages = library_repository(tmp_path) / "packages"
    for name, text in STAR_CHAIN.items():
        (packages / "daydate" / "src" / "daydate" / name).write_text(text)
    fn = read_function(packages, "daydate.converters:to_bool")
    assert (fn.symbol, fn.parameters, fn.returns) == (
        "daydate.converters.to_bool",
        ("value: str", "default: bool = ..."),
        "bool",
    )
    # The chain's first __all__ leaves not_listed out: neither import * nor mypy exports it.
    with pytest.raises(ConfigError, match="defines no not_listed"):
        read_function(packages, "daydate.converters:not_listed")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("daydate.parse_day", "give module:function"),
        ("nolib:parse", "no distribution under .* has nolib; packages there: daydate"),
        ("daydate:missing", "defines no missing"),
        (
            "daydate:parse_week",
            r"daydate imports parse_week without re-exporting it .*"
            r"name daydate\.text:parse_week",
        ),
        ("daydate.spans:Span.width", "a method needs an instance"),
        ("daydate.spans:Span.later", "a coroutine cannot be called"),
        ("daydate.spans:Span", "daydate.spans.Span is not a function"),
    ],
)
def test_a_function_that_cannot_be_a_task_is_refused_by_name(
    tmp_path: Path, spec: str, message: str
) -> None:
    packages = library_repository(tmp_path) / "packages"
    with pytest.raises(ConfigError, match=message):
        read_function(packages, spec)


def test_the_generated_task_passes_the_local_verifier_as_written(tmp_path: Path) -> None:
    root = library_repository(tmp_path / "repo")
    (root / "pyproject.toml").write_text('[project]\nname = "daydate-repo"\n')
    examples: list[list[object]] = [["2024-01-31"], ["2024-01"], ["2024-01", False]]
    init_repository(root, "daydate:parse_day", examples)
    project = find_project(root)
    assert project.packages == root / "packages"
    assert (root / ".gitignore").read_text() == ".verification/\n"
    assert (root / "pyproject.toml").read_text().startswith('[project]\nname = "daydate-repo"\n')
    suite = load_suite(project.tasks, graders_dir=project.graders)
    assert [t.id for t in suite.tasks] == ["parse-day"]
    assert json.loads((root / "tasks" / "suite.json").read_text())["scheduledRuns"] == 3
    verified = CliRunner().invoke(
        main, ["tasks", "verify", "--verifier", "local", "--project", str(root)]
    )
    assert verified.exit_code == 0, verified.output
    rows = [line.split() for line in verified.output.splitlines() if line.startswith("parse-day")]
    assert [(row[1], row[-1]) for row in rows if row[1] in ("correct", "raises-instead")] == [
        ("correct", "OK"), ("raises-instead", "OK"),
    ]  # fmt: skip
    assert "all match" in verified.output


def test_a_second_run_with_the_same_answers_writes_nothing_and_says_so(tmp_path: Path) -> None:
    root = library_repository(tmp_path / "repo")
    runner = CliRunner()
    args = ["init", "--function", "daydate:parse_day", "--example", '["2024-01-31"]',
            "--project", str(root)]  # fmt: skip
    first = runner.invoke(main, args)
    assert first.exit_code == 0, first.output
    assert "wrote tasks/parse-day/grader.py" in first.output
    assert first.output.endswith(
        "next:\n  agent-eval lock-build\n  agent-eval tasks verify --verifier local\n"
        "  agent-eval images build\n  agent-eval tasks verify --verifier docker\n"
    )
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    second = runner.invoke(main, args)
    assert second.exit_code == 0, second.output
    assert "nothing to change" in second.output and "wrote" not in second.output
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_with_a_build_lock_the_next_commands_leave_out_writing_one(tmp_path: Path) -> None:
    root = library_repository(tmp_path / "repo")
    (root / "packages" / BUILD_LOCK).write_text("setuptools==84.2.1 --hash=sha256:" + "0" * 64)
    done = init_repository(root, "daydate:parse_day", [["1-2-3"]])
    assert done.next_commands == NEXT_COMMANDS
    (root / "packages" / BUILD_LOCK).unlink()
    again = init_repository(root, "daydate:parse_day", [["1-2-3"]])
    assert again.next_commands == (LOCK_COMMAND, *NEXT_COMMANDS) and again.written == ()


def test_a_file_that_differs_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    root = library_repository(tmp_path / "repo")
    contract = root / "tasks" / "parse-day" / "contract.pyi"
    contract.parent.mkdir(parents=True)
    contract.write_text("def parse_day(text: str) -> str: ...\n")
    result = CliRunner().invoke(
        main, ["init", "--function", "daydate:parse_day", "--example", '["1-2-3"]',
               "--project", str(root)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "init would overwrite tasks/parse-day/contract.pyi" in result.output
    assert "Traceback" not in result.output
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == sorted(
        [*(f"packages/daydate/src/daydate/{n}" for n in LIBRARY),
         "packages/daydate/pyproject.toml", "tasks/parse-day/contract.pyi"]
    )  # fmt: skip


def test_a_second_task_is_added_to_the_suite_with_its_runs(tmp_path: Path) -> None:
    root = library_repository(tmp_path / "repo")
    init_repository(root, "daydate:parse_day", [["1-2-3"]])
    done = init_repository(root, "daydate.spans:Span.days", [["a"]], task_id="days")
    assert root / "tasks" / "suite.json" in done.written
    suite = json.loads((root / "tasks" / "suite.json").read_text())
    assert suite["taskIds"] == ["parse-day", "days"]
    assert (suite["scheduledRuns"], suite["requiredFinalSuccesses"]) == (6, 6)
    loaded = load_suite(root / "tasks", graders_dir=root / "graders")
    assert [t.id for t in loaded.tasks] == ["parse-day", "days"]
    again = init_repository(root, "daydate.spans:Span.days", [["a"]], task_id="days")
    assert again.written == ()
    shutil.rmtree(root / "tasks" / "parse-day")
    with pytest.raises(ConfigError, match="--example: give at least one"):
        init_repository(root, "daydate:parse_day", [])


def test_a_function_returning_a_type_beyond_json_is_refused_saying_why(tmp_path: Path) -> None:
    packages = library_repository(tmp_path) / "packages"
    with pytest.raises(ConfigError, match=r"it returns Span \| None, and Span is not a JSON value"):
        read_function(packages, "daydate.spans:span_of")


def test_a_function_named_as_a_module_the_grader_imports_gets_a_grader_that_works(
    tmp_path: Path,
) -> None:
    root = library_repository(tmp_path / "repo")
    init_repository(root, "daydate.text:json", [["a,b"], [""]])
    verified = CliRunner().invoke(
        main, ["tasks", "verify", "--verifier", "local", "--project", str(root)]
    )
    assert verified.exit_code == 0, verified.output
    assert "all match" in verified.output


@pytest.mark.parametrize(
    ("path", "make"),
    [
        (".gitignore", lambda p: p.mkdir()),
        ("tasks/suite.json", lambda p: os.mkfifo(p)),
        ("pyproject.toml", lambda p: os.mkfifo(p)),
    ],
)
def test_a_file_init_reads_that_is_not_a_regular_file_is_one_clear_error_and_no_hang(
    tmp_path: Path, path: str, make: Callable[[Path], None]
) -> None:
    root = library_repository(tmp_path / "repo")
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    make(root / path)
    result = CliRunner().invoke(
        main, ["init", "--function", "daydate:parse_day", "--example", '["1-2-3"]',
               "--project", str(root)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.output == (
        f"error: {path} is not a regular file (init reads and writes only regular files); "
        "move it away and run init again\n"
    )
    assert not (root / "tasks" / "parse-day").exists()
