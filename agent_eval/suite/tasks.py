"""The task suite: load the fixed tasks, check that their files agree, render their prompts.

A task is ``tasks/<id>/`` with ``task.json`` (a :class:`TaskSpec`),
``prompt.md`` (a jinja2 template that embeds the contract), ``contract.pyi``
(the required exports), ``grader.py`` (the live grader, which declares its
assertion ids) and, optionally, ``starter/`` (files the agent starts from).

Validation refuses a suite whose parts could drift apart: task directories
other than the fixed task ids, an ``id`` that is not its directory,
assertion ids in task.json that differ from the grader's, a prompt that does
not render or does not contain the contract, a contract without exports,
starter files the agent may not write, seed references the starter does not
contain. Every error is a :class:`SuiteError` naming the task and the field.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import Any

import jinja2
import jinja2.exceptions
import jinja2.runtime
import jinja2.sandbox

from agent_eval.digests import DigestError, regular_files
from agent_eval.errors import EvidenceError, SuiteError
from agent_eval.evidence_io import parse_model, read_bounded
from agent_eval.grading.errors import GraderError
from agent_eval.grading.grader import Grader
from agent_eval.layout import IN_CONTAINER_CONSUMER
from agent_eval.models.suite import SuiteSpec
from agent_eval.models.task import TaskSpec
from agent_eval.project import CACHE_DIRS
from agent_eval.suite.contract import ContractError, load_contract

__all__ = [
    "CONTRACT_FILE",
    "GRADER_FILE",
    "STARTER_DIR",
    "SUITE_FILE",
    "TASK_FILE",
    "Suite",
    "Task",
    "load_suite",
    "read_suite_spec",
    "task_titles",
]

TASK_FILE = "task.json"
PROMPT_FILE = "prompt.md"
CONTRACT_FILE = "contract.pyi"
GRADER_FILE = "grader.py"
STARTER_DIR = "starter"
SHARED_DIR = "_shared"
"""``tasks/_shared/``: Markdown parts several prompts include (``{% include "x.md" %}``)."""
_MAX_SHARED_FILES = 64
_SHARED_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}\.md")

_MAX_TASK_FILE_BYTES = 256 * 1024
MAX_PROMPT_CHARS = 200_000
"""A rendered prompt at most as long as the runner protocol's taskText."""
RENDER_SECONDS = 5.0
"""A prompt that takes longer to render is refused."""
_VALIDATION_CONSUMER_DIR = str(IN_CONTAINER_CONSUMER.docs)
"""What prompts are rendered with to validate them: the docs as runners see them."""


class _BoundedSandbox(jinja2.sandbox.SandboxedEnvironment):
    """The sandbox, with repetition and powers bounded: a prompt never allocates gigabytes."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        if operator == "**" and isinstance(right, int) and abs(right) > 1000:
            raise jinja2.exceptions.SecurityError(f"an exponent of {right} is too large")
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                sized = isinstance(seq, str | list | tuple) and isinstance(count, int)
                if sized and len(seq) * count > MAX_PROMPT_CHARS:
                    raise jinja2.exceptions.SecurityError("a repetition this long is refused")
        return super().call_binop(context, operator, left, right)


# Markdown for an agent, not HTML: no autoescaping. The sandbox keeps a template
# away from Python internals; prompt.md is the repository's, but it is checked
# like any input.
_ENVIRONMENT = _BoundedSandbox(
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=True,
)


@dataclass(frozen=True)
class DeclaredAssertions:
    """What a task's grader declares about itself."""

    task_id: str
    assertion_ids: tuple[str, ...]
    safety_assertion_ids: tuple[str, ...]
    solution_module: str | None


@dataclass(frozen=True)
class Task:
    """One validated task."""

    spec: TaskSpec
    directory: Path
    contract_text: str
    contract_exports: tuple[str, ...]
    prompt_template: str
    grader: DeclaredAssertions
    shared: Mapping[str, str] = field(default_factory=dict)
    """The parts under ``tasks/_shared/`` its prompt may include, by file name."""

    @property
    def id(self) -> str:
        """The task id (equal to the directory name)."""
        return self.spec.id

    @property
    def contract_path(self) -> Path:
        """The task's contract stub."""
        return self.directory / CONTRACT_FILE

    @property
    def grader_path(self) -> Path:
        """The task's live grader."""
        return self.directory / GRADER_FILE

    @property
    def starter_dir(self) -> Path | None:
        """The starter files' directory, when the task has one."""
        path = self.directory / STARTER_DIR
        return path if path.is_dir() else None

    def render_prompt(self, consumer_dir: str) -> str:
        """The prompt sent to the agent (the runner's ``taskText``).

        Args:
            consumer_dir: Where the agent finds the library's guides and API catalog.

        Raises:
            SuiteError: The template does not render.
        """
        return _render(self.id, self.prompt_template, self._variables(consumer_dir), self.shared)

    def _variables(self, consumer_dir: str) -> dict[str, Any]:
        return {
            "task_id": self.spec.id,
            "title": self.spec.title,
            "contract": self.contract_text,
            "allowed_output_paths": list(self.spec.allowedOutputPaths),
            "allowed_imports": describe_imports(self.spec.allowedImports),
            "consumer_dir": consumer_dir,
        }


@dataclass(frozen=True)
class Suite:
    """Every task of the repository's suite, in schedule order."""

    spec: SuiteSpec
    tasks: tuple[Task, ...]

    def task(self, task_id: str) -> Task:
        """The task called *task_id*.

        Raises:
            SuiteError: There is no such task.
        """
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise SuiteError(f"no task {task_id!r} in the suite; tasks: {list(self.spec.taskIds)}")


def describe_imports(allowed: Sequence[str]) -> str:
    """``allowedImports`` as prose: ``appkit/*`` becomes "`appkit` (and its submodules)"."""
    parts = []
    for entry in allowed:
        if entry.endswith("/*"):
            parts.append(f"`{entry[:-2]}` (and its submodules)")
        else:
            parts.append(f"`{entry}`")
    return ", ".join(parts)


SUITE_FILE = "suite.json"
"""The repository's suite declaration, inside its tasks directory (so the digest covers it)."""


def read_suite_spec(tasks_dir: Path) -> SuiteSpec:
    """The suite the repository declares in ``<tasks>/suite.json``.

    Raises:
        SuiteError: It is missing, unreadable or inconsistent (the message names the file
            and the field).
    """
    path = tasks_dir / SUITE_FILE
    if not path.exists() and not path.is_symlink():
        raise SuiteError(
            f"{path}: no suite declaration; write one naming the task directories, e.g. "
            '{"schemaVersion": 1, "taskIds": ["my-task"], "repetitions": 3, '
            '"scheduledRuns": 3, "minFirstSuccesses": 3, "requiredFinalSuccesses": 3, '
            '"maxAttemptsPerRun": 2}'
        )
    try:
        data = read_bounded(path, what="file", max_bytes=_MAX_TASK_FILE_BYTES)
        return parse_model(data, SuiteSpec, where="")
    except EvidenceError as exc:
        raise SuiteError(f"{path}: {exc}") from exc


def task_titles(tasks_dir: Path, spec: SuiteSpec) -> dict[str, str]:
    """Each declared task's title from its task.json (a task whose file cannot be read is
    left out: the suite's own checks say why)."""
    titles = {}
    for task_id in spec.taskIds:
        try:
            titles[task_id] = _read_spec(tasks_dir / task_id).title
        except SuiteError:
            continue
    return titles


def load_suite(tasks_dir: Path, *, graders_dir: Path) -> Suite:
    """Load and validate the suite *tasks_dir* declares, and every task of it.

    Args:
        tasks_dir: The directory holding ``suite.json`` and one directory per task.
        graders_dir: The repository's grading helpers the task graders import (``graders``).

    Raises:
        SuiteError: The declaration or a task is missing, unexpected or inconsistent (the
            message names the file, the task and the field).
    """
    if not tasks_dir.is_dir():
        raise SuiteError(f"{tasks_dir}: the tasks directory does not exist")
    check_plain_tree(tasks_dir, "the tasks directory")
    if graders_dir.exists():
        check_plain_tree(graders_dir, "the graders directory")
    suite = read_suite_spec(tasks_dir)
    present = sorted(p.name for p in tasks_dir.iterdir() if p.is_dir() and _is_task_dir(p))
    expected = list(suite.taskIds)
    missing = [t for t in expected if t not in present]
    extra = [t for t in present if t not in expected]
    if missing or extra:
        raise SuiteError(
            f"{tasks_dir}: the task directories must be exactly the task ids of "
            f"{SUITE_FILE} {expected}; missing {missing}, unexpected {extra} (a suite "
            "changes as one unit: its ids, schedule and thresholds together)"
        )
    tasks = tuple(load_task(tasks_dir / task_id, graders_dir=graders_dir) for task_id in expected)
    return Suite(spec=suite, tasks=tasks)


def _read_shared(tasks_dir: Path, task_id: str) -> dict[str, str]:
    """The prompt parts of ``tasks/_shared/``, by file name (bounded, plain files only)."""
    folder = tasks_dir / SHARED_DIR
    if not folder.is_dir() or folder.is_symlink():
        return {}
    names = sorted(p.name for p in folder.iterdir())
    if len(names) > _MAX_SHARED_FILES:
        raise _error(task_id, SHARED_DIR, f"holds {len(names)} files, at most {_MAX_SHARED_FILES}")
    bad = [n for n in names if not _SHARED_NAME.fullmatch(n)]
    if bad:
        raise _error(task_id, SHARED_DIR, f"{bad[:3]}: only lowercase name.md files are parts")
    return {n: _read_text(folder / n, task_id) for n in names}


def _is_task_dir(path: Path) -> bool:
    return not path.name.startswith((".", "_"))


def load_task(task_dir: Path, *, graders_dir: Path) -> Task:
    """Load and validate one task directory.

    Raises:
        SuiteError: The task's files are missing or disagree (names the task and field).
    """
    name = task_dir.name
    spec = _read_spec(task_dir)
    if spec.id != name:
        raise _error(name, "task.json id", f"is {spec.id!r}; it must equal the directory name")
    contract_text = _read_text(task_dir / CONTRACT_FILE, name).rstrip("\n")
    try:
        contract = load_contract(task_dir / CONTRACT_FILE)
    except ContractError as exc:
        raise _error(name, CONTRACT_FILE, str(exc)) from exc
    if not contract.exports:
        raise _error(name, CONTRACT_FILE, "declares no exports; the solution would owe nothing")
    declared = _declared_by_grader(task_dir / GRADER_FILE, name, graders_dir)
    _check_grader(spec, declared)
    _check_starter(spec, task_dir)
    _check_library_symbols(spec)
    task = Task(
        spec=spec,
        directory=task_dir,
        contract_text=contract_text,
        contract_exports=contract.exports,
        prompt_template=_read_text(task_dir / PROMPT_FILE, name),
        grader=declared,
        shared=_read_shared(task_dir.parent, name),
    )
    rendered = task.render_prompt(_VALIDATION_CONSUMER_DIR)
    if contract_text not in rendered:
        raise _error(
            name,
            PROMPT_FILE,
            "does not contain the contract once rendered; embed it with {{ contract }} "
            "so the prompt and contract.pyi cannot drift apart",
        )
    return task


def check_plain_tree(root: Path, what: str) -> None:
    """Refuse a link or special file anywhere under *root*: what is read is what is hashed.

    Raises:
        SuiteError: Naming the file.
    """
    try:
        regular_files(root, skip_dirs=CACHE_DIRS)
    except DigestError as exc:
        raise SuiteError(f"{what}: {exc}") from exc


def _error(task_id: str, field: str, message: str) -> SuiteError:
    return SuiteError(f"task {task_id!r}, {field}: {message}")


def _read_text(path: Path, task_id: str) -> str:
    try:
        data = read_bounded(path, what="file", max_bytes=_MAX_TASK_FILE_BYTES)
    except EvidenceError as exc:
        raise _error(task_id, path.name, str(exc)) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(task_id, path.name, f"not UTF-8 (byte {exc.start})") from exc


def _read_spec(task_dir: Path) -> TaskSpec:
    name = task_dir.name
    path = task_dir / TASK_FILE
    try:
        data = read_bounded(path, what="file", max_bytes=_MAX_TASK_FILE_BYTES)
        return parse_model(data, TaskSpec, where="")
    except EvidenceError as exc:
        raise _error(name, TASK_FILE, str(exc)) from exc


class _RenderTimeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block after *seconds* (main thread only: signals reach no other)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise _RenderTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _template_line(exc: BaseException) -> int | None:
    """The prompt.md line an error was raised at (jinja maps its frames to the template)."""
    line = getattr(exc, "lineno", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line if isinstance(line, int) else None


def _render(
    task_id: str, template: str, variables: Mapping[str, Any], shared: Mapping[str, str]
) -> str:
    """Render *template* sandboxed, within a time and a size limit; any failure is a SuiteError.

    ``{% include "name.md" %}`` reaches the parts of *shared* and nothing else.
    """
    chunks: list[str] = []
    size = 0
    deadline = time.monotonic() + RENDER_SECONDS
    environment = _ENVIRONMENT.overlay(loader=jinja2.DictLoader(dict(shared)))
    try:
        with _time_limit(RENDER_SECONDS):
            for chunk in environment.from_string(template).generate(**variables):
                size += len(chunk)
                if size > MAX_PROMPT_CHARS:
                    raise _error(
                        task_id, PROMPT_FILE, f"renders to more than {MAX_PROMPT_CHARS} characters"
                    )
                if time.monotonic() > deadline:
                    raise _RenderTimeout
                chunks.append(chunk)
    except SuiteError:
        raise
    except _RenderTimeout:
        raise _error(
            task_id, PROMPT_FILE, f"takes longer than {RENDER_SECONDS:g} s to render"
        ) from None
    except Exception as exc:  # a template can fail in any way Python code can
        line = _template_line(exc)
        where = f" (line {line})" if line is not None else ""
        message = str(exc)[:300] or type(exc).__name__
        raise _error(
            task_id,
            PROMPT_FILE,
            f"does not render{where}: {type(exc).__name__}: {message}; "
            f"available variables: {sorted(variables)}",
        ) from None
    return "".join(chunks)


@contextlib.contextmanager
def _importable(graders_dir: Path) -> Iterator[None]:
    """Make the repository's grading helpers importable as ``graders`` while a grader loads."""
    root = str(graders_dir.resolve().parent)
    added = root not in sys.path
    if added:
        sys.path.insert(0, root)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(root)


def _declared_by_grader(path: Path, task_id: str, graders_dir: Path) -> DeclaredAssertions:
    """Load the grader (trusted repository code) and read what it declares."""
    if not path.is_file():
        raise _error(task_id, GRADER_FILE, f"{path} does not exist")
    module_name = "_agent_eval_task_grader_" + task_id.replace("-", "_")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise _error(task_id, GRADER_FILE, f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    with _importable(graders_dir):
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise _error(
                task_id, GRADER_FILE, f"does not load: {type(exc).__name__}: {exc}"
            ) from exc
    grader = getattr(module, "GRADER", None)
    if not isinstance(grader, Grader):
        raise _error(task_id, GRADER_FILE, "must bind a graders.Grader instance to GRADER")
    try:
        grader.check_declaration()
    except GraderError as exc:
        raise _error(task_id, GRADER_FILE, str(exc)) from exc
    return DeclaredAssertions(
        task_id=grader.task_id,
        assertion_ids=tuple(grader.assertion_ids),
        safety_assertion_ids=tuple(grader.safety_assertion_ids),
        solution_module=grader.solution_module,
    )


def _differences(grader: Sequence[str], task: Sequence[str]) -> str:
    only_grader = sorted(set(grader) - set(task))
    only_task = sorted(set(task) - set(grader))
    return f"only in the grader {only_grader}, only in task.json {only_task}"


def _check_grader(spec: TaskSpec, declared: DeclaredAssertions) -> None:
    if declared.task_id != spec.id:
        raise _error(spec.id, "grader.py task_id", f"is {declared.task_id!r}, not {spec.id!r}")
    if set(declared.assertion_ids) != set(spec.assertionIds):
        raise _error(
            spec.id,
            "task.json assertionIds",
            "differ from the grader's assertion_ids: "
            + _differences(declared.assertion_ids, spec.assertionIds),
        )
    if set(declared.safety_assertion_ids) != set(spec.safetyAssertionIds):
        raise _error(
            spec.id,
            "task.json safetyAssertionIds",
            "differ from the grader's safety_assertion_ids: "
            + _differences(declared.safety_assertion_ids, spec.safetyAssertionIds),
        )
    modules = {_module_of(path) for path in spec.allowedOutputPaths}
    entry = _module_of(spec.allowedOutputPaths[0])
    called = declared.solution_module or entry
    if called not in modules:
        raise _error(
            spec.id,
            "grader.py solution_module",
            f"{called!r} is not the module of any allowedOutputPaths entry "
            f"{list(spec.allowedOutputPaths)}",
        )
    if called != entry:
        # The contract is checked against the first output; the grader must call that module.
        raise _error(
            spec.id,
            "grader.py solution_module",
            f"{called!r} is not the module of the first allowedOutputPaths entry "
            f"({spec.allowedOutputPaths[0]}), which contract.pyi describes",
        )


def _module_of(path: str) -> str:
    pure = PurePosixPath(path)
    parts = [*pure.parent.parts, pure.stem]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _check_starter(spec: TaskSpec, task_dir: Path) -> None:
    starter = task_dir / STARTER_DIR
    texts: list[str] = []
    if starter.exists():
        if not starter.is_dir() or starter.is_symlink():
            raise _error(spec.id, STARTER_DIR, "must be a plain directory")
        for path in sorted(starter.rglob("*")):
            if "__pycache__" in path.parts or path.is_dir():
                continue
            rel = path.relative_to(starter).as_posix()
            if path.is_symlink() or not path.is_file():
                raise _error(spec.id, f"{STARTER_DIR}/{rel}", "must be a regular file")
            if rel not in spec.allowedOutputPaths:
                raise _error(
                    spec.id,
                    f"{STARTER_DIR}/{rel}",
                    f"is not in allowedOutputPaths {list(spec.allowedOutputPaths)}; "
                    "starter files use the paths the agent may write",
                )
            texts.append(_read_text(path, spec.id))
    for reference in spec.seedReferences:
        name = reference.rsplit(".", 1)[-1]
        if not any(name in text for text in texts):
            raise _error(
                spec.id,
                "task.json seedReferences",
                f"{reference!r} does not appear in any starter file; seed references "
                "name the invalid references planted in starter/",
            )


def _check_library_symbols(spec: TaskSpec) -> None:
    for requirement in spec.requiredIntegration:
        for symbol in requirement.symbols:
            if not spec.allows_import(symbol.split(".", 1)[0]):
                raise _error(
                    spec.id,
                    "task.json requiredIntegration",
                    f"{symbol!r} is not fully qualified under an allowed import "
                    f"{list(spec.allowedImports)} (write e.g. 'appkit.create_validator')",
                )
    for reference in spec.seedReferences:
        if not spec.allows_import(reference.split(".", 1)[0]):
            raise _error(
                spec.id,
                "task.json seedReferences",
                f"{reference!r} is not under an allowed import {list(spec.allowedImports)}",
            )
