"""A repository's ``[tool.agent-eval]`` is user input: whatever it holds, eval-agent and
check-agent-eval answer with one line naming the file, the key and the rule, exit 2,
write no evidence, and never show a traceback or hang.

The property suite writes arbitrary values (and arbitrary text) as pyproject.toml and
runs both commands on it.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
import tomli_w
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_eval.cli.check import check_command
from agent_eval.cli.run import eval_agent_command
from agent_eval.errors import ConfigError
from agent_eval.project import MAX_SETTING_CHARS, find_project


def _pyproject(root: Path, text: str) -> Path:
    (root / "pyproject.toml").write_text(text, encoding="utf-8")
    return root / "pyproject.toml"


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _check(root: Path) -> Result:
    (root / "r.json").write_text("{}")
    return CliRunner().invoke(
        check_command,
        ["--receipt", str(root / "r.json"), "--archives", str(root / "r.json"),
         "--project", str(root)],
    )  # fmt: skip


def _eval_agent(root: Path) -> Result:
    (root / "runner.json").write_text("{}")
    return CliRunner().invoke(
        eval_agent_command,
        ["--runner-config", str(root / "runner.json"), "--project", str(root),
         "--progress", "none"],
    )  # fmt: skip


def _error_line(result: Result) -> str:
    [line] = [x for x in result.output.splitlines() if x.startswith("Error: ")]
    return line


SETTINGS = [
    ('evidence = "evfile"', "[tool.agent-eval].evidence: ", "is not a directory"),
    ('evidence = "evfile/below"', "[tool.agent-eval].evidence: ", "is not a directory"),
    ('evidence = "a\\u0000b"', "[tool.agent-eval].evidence ", "control or invisible"),
    ('evidence = "a\\u202eb"', "[tool.agent-eval].evidence ", "control or invisible"),
    (f'evidence = "{"a" * 5000}"', "[tool.agent-eval].evidence ", f"at most {MAX_SETTING_CHARS}"),
    (f'evidence = "{"a" * 300}/x"', "[tool.agent-eval].evidence ", "at most 255 bytes"),
    ("evidence = 3", "[tool.agent-eval].evidence ", "not a integer"),
    ('evidence = ""', "[tool.agent-eval].evidence ", "not empty"),
    ('evidence = "../out"', "[tool.agent-eval].evidence ", "relative path in the repository"),
    ('registry = "dir"', "[tool.agent-eval].registry: ", "is not a regular file"),
    ('registry = "fifo"', "[tool.agent-eval].registry: ", "is not a regular file"),
    ('tasks = "evfile"', "[tool.agent-eval].tasks: ", "is not a directory"),
    ("guides = 1", "[tool.agent-eval].guides ", "must be a table"),
    ('guides = {core = ["x"]}', "[tool.agent-eval].guides.core ", "not a array"),
    ('guides = {"a\\u0007" = "x"}', "[tool.agent-eval].guides.'a\\x07'", "directory name"),
    (f"x = {'[' * 3000}{']' * 3000}", "not TOML", "nested too deep"),
    ('nope = 1\n"\\u0000" = 2', "[tool.agent-eval] has unknown keys", "allowed:"),
]


@pytest.mark.parametrize(("setting", "key", "rule"), SETTINGS, ids=lambda v: v[:40])
@pytest.mark.parametrize("command", [_check, _eval_agent], ids=["check", "eval-agent"])
def test_a_bad_setting_is_one_line_naming_file_key_and_rule_exit_2_nothing_written(
    tmp_path: Path, setting: str, key: str, rule: str, command: object
) -> None:
    pyproject = _pyproject(tmp_path, f"[tool.agent-eval]\n{setting}\n")
    (tmp_path / "evfile").write_text("")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    before = _tree(tmp_path)
    assert callable(command)
    result = command(tmp_path)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    line = _error_line(result)
    assert line.startswith(f"Error: {pyproject}: ") and key in line and rule in line, line
    assert set(_tree(tmp_path)) - set(before) <= {"r.json", "runner.json"}


def test_a_tool_that_is_not_a_table_is_refused(tmp_path: Path) -> None:
    _pyproject(tmp_path, "tool = 3\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml: \[tool\] must be a table"):
        find_project(tmp_path)


def test_a_pyproject_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.agent-eval]\nevidence = '\xff'\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml: not UTF-8 text: .* at byte 30"):
        find_project(tmp_path)


def test_the_default_layout_and_a_nested_evidence_directory_are_accepted(tmp_path: Path) -> None:
    _pyproject(tmp_path, '[tool.agent-eval]\nevidence = "out/evidence"\nguides = {a = "a.md"}\n')
    project = find_project(tmp_path)
    assert project.evidence == tmp_path / "out" / "evidence"
    assert project.declared_guides == {"a": tmp_path / "a.md"}


# The property suite.

_PATHS = st.sampled_from(
    ["evfile", "evfile/x", "dir", "dir/x", "a" * 5000, "a" * 256, "..", "../x", "/abs",
     "a\x00b", "x\u202ey", "x\ny", ".", "./", "", "pyproject.toml", "fifo", "fifo/x",
     "link", "link/x", "tasks", "\u00e9t\u00e9", "a//b", "~", "$HOME", "C:\\x"]
)  # fmt: skip
_SCALARS = st.one_of(
    _PATHS,
    st.text(max_size=40),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = st.one_of(
    st.sampled_from(["packages", "tasks", "graders", "fixtures", "evidence", "registry"]),
    st.text(max_size=12),
)
_SECTIONS = st.one_of(
    st.dictionaries(_KEYS, _VALUES, max_size=4),
    st.dictionaries(_KEYS, _PATHS, max_size=4),
    st.fixed_dictionaries({"guides": st.dictionaries(st.text(max_size=8), _VALUES, max_size=3)}),
)


def _as_toml(section: dict[str, object]) -> str:
    try:
        return tomli_w.dumps({"tool": {"agent-eval": section}})
    except (TypeError, ValueError):
        return "[tool.agent-eval]\nevidence = 1\n"


_TEXTS = st.one_of(
    _SECTIONS.map(_as_toml),
    st.text(max_size=200).map(lambda body: f"[tool.agent-eval]\n{body}\n"),
    st.integers(min_value=1, max_value=6000).map(
        lambda depth: f"[tool.agent-eval]\nx = {'[' * depth}{']' * depth}\n"
    ),
    st.integers(min_value=1, max_value=6000).map(
        lambda depth: f"[tool.agent-eval]\nx = {'{a=' * depth}1{'}' * depth}\n"
    ),
)

_ONE_LINE = re.compile(r"^Error: [^\n]*$", re.M)


def _fixture_tree(root: Path) -> None:
    (root / "evfile").write_text("")
    (root / "dir").mkdir()
    os.mkfifo(root / "fifo")
    (root / "link").symlink_to(root / "evfile")


def _holds(result: Result, pyproject: Path) -> None:
    """No traceback: an exit the command chose; a refusal of the file names it."""
    assert isinstance(result.exception, SystemExit) or result.exception is None, (
        repr(result.exception),
        result.output,
    )
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 1, 2), result.output
    if str(pyproject) in result.output:
        [line] = [x for x in result.output.splitlines() if str(pyproject) in x]
        assert _ONE_LINE.match(line) and result.exit_code == 2, result.output


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)  # fmt: skip
@given(text=_TEXTS)
def test_property_check_agent_eval_never_shows_a_traceback(text: str) -> None:
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        _fixture_tree(root)
        pyproject = _pyproject(root, text)
        _holds(_check(root), pyproject)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXTS)
def test_property_eval_agent_never_shows_a_traceback(text: str) -> None:
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        _fixture_tree(root)
        pyproject = _pyproject(root, text)
        result = _eval_agent(root)
        _holds(result, pyproject)
        # The runner config is {}: a project it accepts is a batch not run (exit 2).
        assert result.exit_code == 2, result.output
