"""``agent-eval init``: the layout, the suite and one worked task for a function of the library.

Run in a library's repository (its distributions under ``packages/``), it writes
``[tool.agent-eval]`` into ``pyproject.toml``, ``tasks/suite.json``, a task for
the function the maintainer names (``task.json``, ``prompt.md``,
``contract.pyi``, ``grader.py``), its fixtures (a ``correct`` case that calls
the real function and a negative that fails the task's one assertion),
``graders/`` and ``.verification/`` in ``.gitignore``.

Invariants:

* **Nothing of the library runs.** The function's signature is read from its
  source with :mod:`ast` (following ``from … import`` re-exports); the grader
  calls the real function only when a verifier grades.
* **Green as written.** The generated task passes ``agent-eval tasks verify``
  for a function whose examples' arguments and results are JSON. A function
  annotated to return something else is refused saying why; an unannotated one
  whose answer is not JSON makes the grader say so (``GraderError``). The grader
  reaches the library as one aliased module, so no name of it shadows the
  grader's own imports.
* **Idempotent, never destructive.** Every file is compared first: one that
  exists with other bytes is named and nothing at all is written; a second run
  with the same answers writes nothing and says so. ``pyproject.toml`` and
  ``.gitignore`` are only appended to; a second task is added to an existing
  ``tasks/suite.json`` (its runs and required successes grown by its
  repetitions). A path init reads that is not a regular file (a directory, a
  FIFO) is refused before anything is opened.
"""

from __future__ import annotations

import ast
import json
import re
import stat
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_eval.errors import ConfigError
from agent_eval.models import SuiteSpec
from agent_eval.packing import BUILD_LOCK, SourceDistribution, find_distributions
from agent_eval.project import find_project

__all__ = [
    "LOCK_COMMAND",
    "NEXT_COMMANDS",
    "init_repository",
    "read_function",
]

NEXT_COMMANDS = (
    "agent-eval tasks verify --verifier local",
    "agent-eval images build",
    "agent-eval tasks verify --verifier docker",
)
"""What a maintainer runs next, in order (printed by the command)."""
LOCK_COMMAND = "agent-eval lock-build"
"""What writes the build lock, run first when there is none: init itself never reaches a
package index, and asking a backend what it needs runs the library's build code."""

ASSERTION = "answers-as-the-library"
"""The generated task's one assertion."""
NEGATIVE_CASE = "raises-instead"
"""The generated negative fixture: it raises where the library answers."""

_SECTION = """
[tool.agent-eval]
packages = "packages"
tasks = "tasks"
graders = "graders"
fixtures = "fixtures"
evidence = ".verification/agent-eval"
"""
_IGNORED = ".verification/"
# Annotations a contract can carry as they are; anything else is Any there.
_PLAIN_TYPES = frozenset(
    {"str", "int", "float", "bool", "None", "bytes", "list", "dict", "tuple", "set", "object"}
)
_MAX_REEXPORTS = 8
# What the written grader can compare: a value that round-trips through JSON.
_JSON_TYPES = frozenset(
    {"str", "int", "float", "bool", "None", "list", "dict", "tuple", "Any", "Optional", "Union",
     "List", "Dict", "Tuple", "typing", "Sequence", "Mapping"}
)  # fmt: skip


@dataclass(frozen=True)
class LibraryFunction:
    """A function of the library as its source declares it (read, never imported)."""

    module: str
    """The module the maintainer named (``semver.version``)."""
    qualname: str
    """The function, or ``Class.function`` for a classmethod or staticmethod."""
    distribution: SourceDistribution
    """The distribution whose ``src/`` holds the module."""
    parameters: tuple[str, ...]
    """The contract's parameter list, each as Python source (``version: str``)."""
    defined: tuple[str, ...]
    """The same list as a solution defines it: the library's own (literal) defaults."""
    forwarded: tuple[str, ...]
    """The same parameters as the arguments of a call that forwards them."""
    returns: str
    """The contract's return annotation."""

    @property
    def name(self) -> str:
        """The export a solution defines: the function's own name."""
        return self.qualname.rpartition(".")[2]

    @property
    def symbol(self) -> str:
        """The fully qualified symbol the solution must use."""
        return f"{self.module}.{self.qualname}"

    @property
    def imported(self) -> str:
        """What a solution imports from the module: the owner, aliased when the export
        it defines has the same name (``from lib import parse as _parse``)."""
        owner = self.qualname.partition(".")[0]
        return f"{owner} as _{owner}" if owner == self.name else owner

    @property
    def called(self) -> str:
        """The function as a solution that imported :attr:`imported` calls it."""
        owner, dot, rest = self.qualname.partition(".")
        return ("_" if owner == self.name else "") + owner + dot + rest

    @property
    def top_level(self) -> str:
        """The library's top-level package, the solution's allowed import."""
        return self.module.partition(".")[0]


@dataclass(frozen=True)
class Initialised:
    """What ``init`` did."""

    written: tuple[Path, ...]
    """Files written or appended to."""
    unchanged: tuple[Path, ...]
    """Files that already held exactly what init would write."""
    next_commands: tuple[str, ...]
    """What to run next, in order (:data:`LOCK_COMMAND` first when there is no build lock)."""


def read_function(packages: Path, spec: str) -> LibraryFunction:
    """The function ``module:name`` (or ``module:Class.name``) of a distribution under *packages*.

    Raises:
        ConfigError: The spec is malformed, no distribution holds the module, or the
            name is not a function, classmethod or staticmethod there.
    """
    module, colon, qualname = spec.partition(":")
    dotted = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
    if not colon or not re.fullmatch(dotted, module) or not re.fullmatch(dotted, qualname):
        raise ConfigError(f"--function {spec!r}: give module:function, e.g. yourlib.dates:parse")
    if qualname.count(".") > 1:
        raise ConfigError(f"--function {spec!r}: a function or Class.function, nothing deeper")
    distributions = find_distributions(packages)
    top = module.partition(".")[0]
    owner = next((d for d in distributions if top in d.packages), None)
    if owner is None:
        known = ", ".join(p for d in distributions for p in d.packages)
        raise ConfigError(f"--function {spec!r}: no distribution under {packages} has {top}; "
                          f"packages there: {known}")  # fmt: skip
    node = _find_definition(owner.src, module, qualname, spec)
    parameters, defined, forwarded = _parameters(node, spec, method="." in qualname)
    _returns_json(node, spec)
    return LibraryFunction(
        module=module,
        qualname=qualname,
        distribution=owner,
        parameters=parameters,
        defined=defined,
        forwarded=forwarded,
        returns=_annotation(node.returns),
    )


def _module_file(src: Path, module: str) -> Path | None:
    base = src.joinpath(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ConfigError(f"{path}: cannot read its source: {exc}") from None


def _find_definition(
    src: Path, module: str, qualname: str, spec: str, depth: int = 0
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    outer, _, inner = qualname.partition(".")
    for _ in range(_MAX_REEXPORTS - depth):
        path = _module_file(src, module)
        if path is None:
            raise ConfigError(f"--function {spec!r}: no module {module} under {src}")
        tree = _parse(path)
        for node in tree.body:
            if getattr(node, "name", None) != outer:
                continue
            if not inner and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return node
            if inner and isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and (
                        item.name == inner
                    ):
                        return item
            raise ConfigError(f"--function {spec!r}: {module}.{qualname} is not a function")
        reexport = _imported_from(tree, module, path, outer)
        if reexport is None:
            found = _through_star(src, tree, module, path, qualname, spec, depth)
            if found is None:
                raise ConfigError(f"--function {spec!r}: {path} defines no {outer}")
            return found
        module = reexport
        depth += 1
    raise ConfigError(f"--function {spec!r}: more than {_MAX_REEXPORTS} re-exports")


def _through_star(
    src: Path, tree: ast.Module, module: str, path: Path, qualname: str, spec: str, depth: int
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The definition a ``from x import *`` of *tree* brings in, as the catalog follows it.

    ``x`` exports the name when its ``__all__`` lists it, or (without ``__all__``) when
    the name is public and ``x`` defines or re-exports it; the last star import wins.
    """
    outer = qualname.partition(".")[0]
    if depth >= _MAX_REEXPORTS or (_declares_all(tree) and outer not in _all_names(tree)):
        return None  # an __all__ that leaves the name out does not export it
    for source in reversed(_star_sources(tree, module, path)):
        source_path = _module_file(src, source)
        if source_path is None:
            continue  # outside this distribution: not the library's to describe
        source_tree = _parse(source_path)
        if _declares_all(source_tree):
            if outer not in _all_names(source_tree):
                continue
        elif outer.startswith("_"):
            continue
        try:
            return _find_definition(src, source, qualname, spec, depth + 1)
        except ConfigError as exc:
            if "defines no" not in str(exc):
                raise
    return None


def _star_sources(tree: ast.Module, module: str, path: Path) -> list[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    sources = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            source = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            sources.append(source)
    return sources


def _imported_from(tree: ast.Module, module: str, path: Path, name: str) -> str | None:
    """The module *name* is re-exported from in *tree*, if it is.

    A re-export is what the API catalog (and mypy's ``--no-implicit-reexport``) takes
    for one: ``from .x import name as name``, or a plain import of a name in a literal
    ``__all__``.

    Raises:
        ConfigError: *name* is imported but not re-exported.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    exported = _all_names(tree)
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            if (alias.asname or alias.name) != name:
                continue
            source = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            if alias.name != name or (alias.asname != name and name not in exported):
                raise ConfigError(
                    f"{module} imports {name} without re-exporting it (no 'as {name}', not in "
                    f"__all__), so the API catalog does not list it; name {source}:{alias.name}"
                )
            return source
    return None


def _declares_all(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        and any(
            isinstance(target, ast.Name) and target.id == "__all__"
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
        for node in tree.body
    )


def _all_names(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)
                    and isinstance(e.value, str)}  # fmt: skip
    return set()


def _annotation(node: ast.expr | None) -> str:
    """The annotation as written when it names only builtin types, else ``Any``."""
    if node is None:
        return "Any"
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and part.id not in _PLAIN_TYPES:
            return "Any"
        if isinstance(part, ast.Attribute) or (
            isinstance(part, ast.Constant) and part.value is not None
        ):
            return "Any"  # a dotted or a string annotation names a type the stub lacks
    return ast.unparse(node)


def _default(node: ast.expr, spec: str, name: str) -> str:
    """A default as a solution writes it: the library's literal (a solution cannot use ``...``)."""
    try:
        ast.literal_eval(node)
    except ValueError:
        raise ConfigError(f"--function {spec!r}: the default of {name} is not a literal "
                          f"({ast.unparse(node)}); choose a function with literal defaults"
                          ) from None  # fmt: skip
    return ast.unparse(node)


def _returns_json(node: ast.FunctionDef | ast.AsyncFunctionDef, spec: str) -> None:
    """Refuse a function whose return annotation names a type that is not JSON: the grader
    init writes compares the library's answer with the solution's as JSON values."""
    if node.returns is None:
        return  # unknown: the grader says so when the library's answer is not JSON
    annotation = node.returns
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return
    names = {
        part.id if isinstance(part, ast.Name) else part.attr
        for part in ast.walk(annotation)
        if isinstance(part, ast.Name | ast.Attribute)
    }
    other = sorted(names - _JSON_TYPES)
    if other:
        raise ConfigError(
            f"--function {spec!r}: it returns {ast.unparse(node.returns)}, and {other[0]} is "
            "not a JSON value; the grader init writes compares JSON values (values beyond JSON "
            "cross only as types a grader declares in value_types): choose a function that "
            "returns str, int, float, bool, None, lists or dicts of them, or write this task's "
            "grader by hand (docs/adopting.md)"
        )


def _parameters(
    node: ast.FunctionDef | ast.AsyncFunctionDef, spec: str, *, method: bool
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The contract's parameters, the solution's, and the arguments forwarding them."""
    if isinstance(node, ast.AsyncFunctionDef):
        raise ConfigError(f"--function {spec!r}: a coroutine cannot be called across the grading "
                          "boundary; choose a plain function")  # fmt: skip
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    only = len(args.posonlyargs)
    if method:
        decorators = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
        if "classmethod" in decorators:
            positional, defaults, only = positional[1:], defaults[1:], max(only - 1, 0)
        elif "staticmethod" not in decorators:
            raise ConfigError(f"--function {spec!r}: a method needs an instance; choose a "
                              "function, a classmethod or a staticmethod")  # fmt: skip
    stub: list[str] = []
    defined: list[str] = []
    forwarded: list[str] = []

    def add(arg: ast.arg, default: ast.expr | None, prefix: str = "") -> None:
        typed = f"{prefix}{arg.arg}: {_annotation(arg.annotation)}"
        stub.append(typed + (" = ..." if default else ""))
        defined.append(typed + (f" = {_default(default, spec, arg.arg)}" if default else ""))

    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        add(arg, default)
        forwarded.append(arg.arg)
        if index + 1 == only:
            stub.append("/")
            defined.append("/")
    if args.vararg is not None:
        add(args.vararg, None, "*")
        forwarded.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        stub.append("*")
        defined.append("*")
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        add(arg, kw_default)
        forwarded.append(f"{arg.arg}={arg.arg}")
    if args.kwarg is not None:
        add(args.kwarg, None, "**")
        forwarded.append(f"**{args.kwarg.arg}")
    return tuple(stub), tuple(defined), tuple(forwarded)


# --- The files -------------------------------------------------------------------------------


def _typing(fn: LibraryFunction) -> str:
    uses_any = any(re.search(r"\bAny\b", part) for part in (*fn.parameters, fn.returns))
    return "from typing import Any\n\n" if uses_any else ""


def _contract(fn: LibraryFunction) -> str:
    typing = _typing(fn)
    return (
        f"{typing}def {fn.name}({', '.join(fn.parameters)}) -> {fn.returns}:\n"
        f'    """Answer exactly as {fn.symbol} does for the same arguments."""\n'
    )


def _solution(fn: LibraryFunction, body: str, doc: str) -> str:
    typing = _typing(fn)
    return (
        f'"""{doc}"""\n\n{typing}from {fn.module} import {fn.imported}\n\n\n'
        f"def {fn.name}({', '.join(fn.defined)}) -> {fn.returns}:\n{body}"
    )


def _grader(fn: LibraryFunction, task_id: str, examples: Sequence[Sequence[Any]]) -> str:
    cls = "".join(part.capitalize() for part in task_id.split("-")) + "Grader"
    return f'''"""Grader of {task_id}: {fn.name} answers as {fn.symbol} does.

The trusted parent calls the library itself for each example and compares what the
solution returns (or the exception it raises) with what the library gave.
"""

from __future__ import annotations

import json
from typing import Any

from agent_eval.grading import Grader, GraderError, Session, SolutionRaised

EXAMPLES: list[list[Any]] = json.loads({json.dumps(json.dumps(list(map(list, examples))))})
"""Each example: the positional arguments of one call."""


def library_answer(args: list[Any]) -> tuple[str, Any]:
    """What the library gives for *args*: its JSON value, or the name of what it raised."""
    # Imported here: the suite reads the grader's declarations where the library is absent.
    # As one aliased module, so that no name of the library shadows the grader's own.
    import {fn.module} as _library

    try:
        answer = _library.{fn.qualname}(*args)
    except Exception as raised:  # the library's own refusal is an answer too
        return "raises", type(raised).__name__
    try:
        return "value", json.loads(json.dumps(answer))
    except (TypeError, ValueError) as exc:
        raise GraderError(
            f"{fn.symbol}{{tuple(args)}} returned a {{type(answer).__name__}}, not a JSON "
            "value: this grader compares JSON values; declare its type in value_types and "
            "compare it, or choose another function"
        ) from exc


class {cls}(Grader):
    """Calls {fn.name} with every example and compares with the library."""

    task_id = "{task_id}"
    assertion_ids = ("{ASSERTION}",)
    safety_assertion_ids = ()

    def run(self, session: Session) -> None:
        """One scenario: every example, one assertion."""
        with session.scenario("the examples") as sc:
            same = True
            for args in EXAMPLES:
                expected = library_answer(args)
                try:
                    got: tuple[str, Any] = ("value", sc.call("{fn.name}", *args))
                except SolutionRaised as raised:
                    got = ("raises", raised.type)
                if got != expected:
                    sc.note(f"{fn.name}{{tuple(args)}}: expected {{expected}}, got {{got}}")
                    same = False
            sc.record("{ASSERTION}", same)


GRADER = {cls}()
'''


def _prompt(fn: LibraryFunction) -> str:
    return f"""# {{{{ title }}}}

Write `{{{{ allowed_output_paths | join("`, `") }}}}` so that it defines `{fn.name}`, which
answers exactly as the library's `{fn.symbol}` does for the same arguments: the same
value, and, where the library raises an exception, an exception of the same type.

## Required library integration

Call `{fn.symbol}`; do not reimplement what it does.

## Where to look

The library's guides and its API catalog (`API.md`, `api-catalog.json`) are in the
consumer directory `{{{{ consumer_dir }}}}`. Only the names listed in the API catalog
exist; do not guess others. You may import {{{{ allowed_imports }}}} and the Python
standard library.

## Contract

Your module must define these exports with exactly these signatures:

```python
{{{{contract}}}}
```
"""


def _json(data: object) -> str:
    return json.dumps(data, indent=2) + "\n"


def task_files(
    fn: LibraryFunction, task_id: str, examples: Sequence[Sequence[Any]]
) -> dict[str, str]:
    """The task's and its fixtures' files, by path relative to tasks/ and fixtures/."""
    spec = {
        "schemaVersion": 1,
        "id": task_id,
        "title": f"Answer as {fn.symbol} does",
        "allowedOutputPaths": ["solution.py"],
        "allowedImports": [f"{fn.top_level}/*"],
        "requiredPeers": [fn.distribution.name],
        "assertionIds": [ASSERTION],
        "safetyAssertionIds": [],
        "seedReferences": [],
        "requiredIntegration": [{"symbols": [fn.symbol]}],
    }
    call = f"{fn.called}({', '.join(fn.forwarded)})"
    correct = _solution(fn, f"    return {call}\n", f"The correct case: {fn.symbol} answers.")
    negative = _solution(
        fn,
        f"    answer = {call}\n"
        f'    raise NotImplementedError(f"{fn.name} would answer {{answer!r}}")\n',
        "A negative case: it raises where the library answers.",
    )
    return {
        f"tasks/{task_id}/task.json": _json(spec),
        f"tasks/{task_id}/prompt.md": _prompt(fn),
        f"tasks/{task_id}/contract.pyi": _contract(fn),
        f"tasks/{task_id}/grader.py": _grader(fn, task_id, examples),
        f"fixtures/{task_id}/correct/solution.py": correct,
        f"fixtures/{task_id}/correct/expect.json": _json(
            {"schemaVersion": 1, "kind": "correct", "description": f"Calls {fn.symbol}."}
        ),
        f"fixtures/{task_id}/{NEGATIVE_CASE}/solution.py": negative,
        f"fixtures/{task_id}/{NEGATIVE_CASE}/expect.json": _json(
            {
                "schemaVersion": 1,
                "kind": "negative",
                "description": "Raises NotImplementedError where the library answers.",
                "failedAssertions": [ASSERTION],
                "findings": [],
            }
        ),
    }


def _suite(task_id: str) -> str:
    return _json(
        {"schemaVersion": 1, "taskIds": [task_id], "repetitions": 3, "scheduledRuns": 3,
         "minFirstSuccesses": 2, "requiredFinalSuccesses": 3, "maxAttemptsPerRun": 2}
    )  # fmt: skip


def _has_section(pyproject: Path) -> bool:
    if not pyproject.is_file():
        return False
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc}") from None
    return "agent-eval" in data.get("tool", {})


def _ignores(gitignore: Path) -> bool:
    if not gitignore.is_file():
        return False
    lines = {line.strip() for line in gitignore.read_text(encoding="utf-8").splitlines()}
    return bool(lines & {_IGNORED, "/" + _IGNORED, ".verification", "/.verification"})


def _regular(path: Path, root: Path) -> bool:
    """Whether *path* exists, refusing anything but a regular file without opening it (a FIFO
    would block a read; a directory cannot be read or appended to)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ConfigError(f"{path.relative_to(root)}: cannot be read: {exc}") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"{path.relative_to(root)} is not a regular file (init reads and writes only "
            "regular files); move it away and run init again"
        )
    return True


def _suite_with(suite: Path, root: Path, task: str) -> str | None:
    """The suite with *task* added (its runs and required successes grown by its
    repetitions), or None when it already lists it."""
    where = suite.relative_to(root)
    try:
        spec = SuiteSpec.model_validate_json(suite.read_bytes())
    except (OSError, ValidationError) as exc:
        raise ConfigError(f"{where}: cannot read it as a suite: {exc}") from None
    if task in spec.taskIds:
        return None
    grown = spec.model_copy(
        update={
            "taskIds": (*spec.taskIds, task),
            "scheduledRuns": spec.scheduledRuns + spec.repetitions,
            "requiredFinalSuccesses": spec.requiredFinalSuccesses + spec.repetitions,
        }
    )
    document = json.loads(grown.model_dump_json(exclude_unset=True))
    try:
        SuiteSpec.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(
            f"{where}: adding {task} to taskIds leaves an invalid suite ({exc}); add it by hand"
        ) from None
    return _json(document)


def _appended(path: Path, text: str) -> str:
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    return old + ("\n" if old and not old.endswith("\n") else "") + text


def init_repository(
    root: Path, function: str, examples: Sequence[Sequence[Any]], *, task_id: str | None = None
) -> Initialised:
    """Write the layout, the suite and a task for *function* into the repository at *root*.

    Args:
        root: The library's repository (its distributions under ``packages/``).
        function: ``module:name`` or ``module:Class.name`` of a function of the library.
        examples: The positional arguments of each call the grader makes (JSON values).
        task_id: The task's id (default: the function's name, in kebab case).

    Raises:
        ConfigError: The function cannot be read, an answer is invalid, or a file exists
            with other content (every such file is named; nothing is written then).
    """
    if not examples:
        raise ConfigError("--example: give at least one argument list, e.g. '[\"1.2.3\"]'")
    pyproject = root / "pyproject.toml"
    for path in (pyproject, root / ".gitignore"):
        _regular(path, root)
    add_section = not _has_section(pyproject)
    project = find_project(root) if not add_section else None
    packages = project.packages if project else root / "packages"
    tasks = project.tasks if project else root / "tasks"
    fixtures = project.fixtures if project else root / "fixtures"
    graders = project.graders if project else root / "graders"
    fn = read_function(packages, function)
    task = task_id or fn.name.replace("_", "-").lower().strip("-")
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", task) or len(task) > 64:
        raise ConfigError(f"task id {task!r}: lowercase words joined by '-' (give --task)")
    bases = {"tasks": tasks, "fixtures": fixtures}
    wanted: dict[Path, str] = {}
    for rel, text in task_files(fn, task, examples).items():
        kind, _, rest = rel.partition("/")
        wanted[bases[kind] / rest] = text
    suite = tasks / "suite.json"
    grown_suite = None
    if not _regular(suite, root):
        wanted[suite] = _suite(task)
    else:
        grown_suite = _suite_with(suite, root, task)
    if not graders.exists():
        wanted[graders / "__init__.py"] = '"""Helpers the task graders share."""\n'
    differing = [
        path for path, text in wanted.items()
        if _regular(path, root) and path.read_bytes() != text.encode("utf-8")
    ]  # fmt: skip
    if differing:
        names = ", ".join(str(p.relative_to(root)) for p in differing)
        raise ConfigError(
            f"init would overwrite {names}, which hold something else; move them or give "
            "another --task"
        )
    written: list[Path] = []
    unchanged = [p for p in wanted if p.exists()]
    if grown_suite is not None:
        suite.write_text(grown_suite, encoding="utf-8")
        written.append(suite)
    elif suite not in wanted:
        unchanged.append(suite)
    if add_section:
        pyproject.write_text(_appended(pyproject, _SECTION.lstrip("\n")), encoding="utf-8")
        written.append(pyproject)
    else:
        unchanged.append(pyproject)
    gitignore = root / ".gitignore"
    if not _ignores(gitignore):
        gitignore.write_text(_appended(gitignore, _IGNORED + "\n"), encoding="utf-8")
        written.append(gitignore)
    else:
        unchanged.append(gitignore)
    for path, text in wanted.items():
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    lock = () if (packages / BUILD_LOCK).exists() else (LOCK_COMMAND,)
    return Initialised(
        written=tuple(written), unchanged=tuple(unchanged), next_commands=(*lock, *NEXT_COMMANDS)
    )
