"""Run mypy on a copy of the solution (never importing or executing it) and parse its report.

mypy runs as a subprocess of the same interpreter (``python -P -m mypy``), with
a pinned configuration and its cache in a scratch directory, against the
installed library's inline types. The solution is copied into the scratch
directory with every ``# type: ignore`` and ``# mypy:`` comment blanked, so a
submission cannot silence the checker.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval.errors import InfrastructureError
from agent_eval.verification.runtime import timing

__all__ = [
    "MypyError",
    "MypyFinding",
    "blank_checker_comments",
    "installed_mypy_version",
    "mypy_version",
    "run_mypy",
]

MYPY_CONFIG = """\
[mypy]
python_version = {python_version}
check_untyped_defs = True
strict_equality = True
extra_checks = True
no_implicit_optional = True
explicit_package_bases = True
namespace_packages = True
ignore_missing_imports = False
follow_imports = normal
show_error_codes = True
show_column_numbers = True
show_error_context = False
pretty = False
color_output = False
error_summary = False
"""
"""Pinned settings: strict about what the solution calls, lenient about its own annotations."""

_LINE = re.compile(
    r"^(?P<path>[^:\n]+?):(?P<line>\d+):(?:(?P<column>\d+):)? (?P<severity>error|note|warning): "
    r"(?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)
_SILENCING = re.compile(r"#\s*(type\s*:\s*ignore|mypy\s*:)", re.IGNORECASE)
_MAX_NOTES = 8


class MypyError(InfrastructureError):
    """mypy could not be run, crashed or timed out (never a finding about the solution)."""


@dataclass
class MypyFinding:
    """One mypy error with the notes that follow it."""

    path: str
    line: int
    column: int | None
    message: str
    code: str | None
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The message, its code and its notes, as one string."""
        head = f"{self.message}  [{self.code}]" if self.code else self.message
        return "\n".join([head, *self.notes])


def blank_checker_comments(source: str) -> str:
    """Replace ``# type: ignore`` and ``# mypy:`` comments with spaces (lines and columns kept)."""
    spans: list[tuple[int, int, int]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and _SILENCING.search(token.string):
                spans.append((token.start[0], token.start[1], token.end[1]))
    except (tokenize.TokenError, SyntaxError):
        return source
    if not spans:
        return source
    lines = source.splitlines(keepends=True)
    for row, start, end in spans:
        line = lines[row - 1]
        lines[row - 1] = line[:start] + " " * (end - start) + line[end:]
    return "".join(lines)


def _environment(search_path: Sequence[Path]) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "MYPYPATH", "PYTHONSTARTUP", "PYTHONHOME"}
    }
    if search_path:
        # mypy runs in the scratch directory: relative roots would resolve there.
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in search_path)
    return env


_NAME_RUN = re.compile(r"[-_.]+")


def installed_mypy_version(path: Sequence[str] | None = None) -> str | None:
    """mypy's version as ``importlib.metadata.version("mypy")`` reads it, found without it.

    Importing ``importlib.metadata`` (and with it email, zipfile and csv) was
    over half of the analysis process's start, paid by every verification.
    This looks where it looks: the first entry of *path* (``sys.path``) holding
    a distribution named mypy, the first such ``.dist-info``/``.egg-info`` in
    listing order, and the ``Version`` header of its METADATA. None when that
    is not a ``.dist-info`` with a readable version, or a file (a zip) comes
    first on the path: the caller then asks ``importlib.metadata`` itself.
    """
    for entry in sys.path if path is None else path:
        if os.path.isfile(entry):
            return None  # a zip on the path: importlib.metadata looks inside it
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue  # a missing entry holds nothing
        first = next((n for n in names if _distribution_name(n) == "mypy"), None)
        if first is None:
            continue
        if not first.lower().endswith(".dist-info"):
            return None
        try:
            with open(os.path.join(entry or ".", first, "METADATA"), encoding="utf-8") as handle:
                return _version_header(handle.read())
        except (OSError, UnicodeDecodeError):
            return None
    return None


_HEADER = re.compile(r"([\041-\071\073-\176]*):(.*)", re.DOTALL)


def _version_header(text: str) -> str | None:
    """The first Version header as the email parser reads it; None at anything unusual."""
    lines = io.StringIO(text, newline="").readlines()  # split as the parser splits
    for index, line in enumerate(lines):
        if line in ("\n", "\r", "\r\n"):
            return None  # the headers ended
        match = _HEADER.match(line)
        if match is None:
            return None  # a folded or malformed header: left to importlib.metadata
        if match.group(1).lower() == "version":
            folded = index + 1 < len(lines) and lines[index + 1][:1] in (" ", "\t")
            value = match.group(2).lstrip(" \t").rstrip("\r\n")
            return None if folded or not value else value
    return None


def _distribution_name(child: str) -> str | None:
    low = child.lower()
    if not low.endswith((".dist-info", ".egg-info")):
        return None
    return _NAME_RUN.sub("_", low.rpartition(".")[0].partition("-")[0])


def mypy_version(python: str = sys.executable, *, timeout: float = 60.0) -> str:
    """The version of the mypy that *python* runs (``2.4.1``)."""
    try:
        done = subprocess.run(
            [python, "-P", "-m", "mypy", "--version"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=_environment(()),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MypyError(f"cannot run mypy with {python}: {exc}") from exc
    match = re.search(r"mypy (\S+)", done.stdout)
    if done.returncode != 0 or match is None:
        raise MypyError(
            f"'{python} -m mypy --version' failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-500:]}; install mypy for that interpreter"
        )
    return match.group(1)


def run_mypy(
    files: Sequence[str],
    *,
    workdir: Path,
    cache_dir: Path,
    python: str = sys.executable,
    search_path: Sequence[Path] = (),
    timeout: float = 300.0,
) -> list[MypyFinding]:
    """Type-check *files* (relative to *workdir*) and return mypy's errors.

    Args:
        files: module files relative to *workdir*, which is the import root.
        workdir: directory holding the copied solution and the check module.
        cache_dir: mypy's incremental cache (a scratch location).
        python: interpreter whose mypy and installed packages are used.
        search_path: extra import roots for packages (PEP 561: need py.typed).
        timeout: seconds before mypy is stopped.

    Raises:
        MypyError: mypy did not run to completion.
    """
    config = workdir.parent / "mypy.ini"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    config.write_text(MYPY_CONFIG.format(python_version=version), encoding="utf-8")
    command = [
        python,
        "-P",
        "-m",
        "mypy",
        "--config-file",
        str(config),
        "--cache-dir",
        str(cache_dir),
        "--no-error-summary",
        *files,
    ]
    try:
        with timing.span("mypy process"):
            done = subprocess.run(
                command,
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env=_environment(search_path),
            )
    except subprocess.TimeoutExpired as exc:
        raise MypyError(f"mypy did not finish within {timeout:g} s") from exc
    except OSError as exc:
        raise MypyError(f"cannot run mypy with {python}: {exc}") from exc
    findings = _parse(done.stdout)
    if not findings and "No module named mypy" in done.stderr:
        raise MypyError(
            f"mypy is not installed for {python}: the local verifier type-checks on this "
            "interpreter; install agent-eval with its dependencies (mypy is one), or use "
            "the docker verifier"
        )
    if done.returncode not in (0, 1) and not findings:
        raise MypyError(
            f"mypy failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-1000:]}"
        )
    if done.returncode == 1 and not findings:
        said = (done.stdout.strip() or done.stderr.strip())[-1000:]
        raise MypyError(f"mypy reported failure without findings: {said or 'nothing'}")
    return findings


def _parse(output: str) -> list[MypyFinding]:
    findings: list[MypyFinding] = []
    for raw in output.splitlines():
        match = _LINE.match(raw.rstrip())
        if match is None:
            continue
        severity = match.group("severity")
        if severity == "warning":
            continue
        if severity == "note":
            if findings and len(findings[-1].notes) < _MAX_NOTES:
                findings[-1].notes.append(match.group("message"))
            continue
        column = match.group("column")
        findings.append(
            MypyFinding(
                path=match.group("path").replace(os.sep, "/"),
                line=int(match.group("line")),
                column=int(column) if column else None,
                message=match.group("message"),
                code=match.group("code"),
            )
        )
    return findings
