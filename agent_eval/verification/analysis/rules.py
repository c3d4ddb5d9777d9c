"""The rules of static analysis, applied to one solution: the contents of ``analysis.json``.

The solution is parsed and type-checked, never imported or executed. Findings
keep separate categories (see ``DiagnosticCategory`` in the host's models):

* ``syntax`` — a file does not parse or compile;
* ``type-error`` / ``wrong-arguments`` — mypy, against the installed library;
* ``missing-dependency`` — an import outside the task's ``allowedImports``
  (the standard library and the solution's own modules are always allowed);
* ``unsupported-api`` — a library module, name or member not in the catalog;
* ``contract-mismatch`` — a required export missing or incompatible;
* ``integration`` — a required library symbol never used as a value.

``hallucinatedApi`` is ``unsupportedApi`` minus the task's ``seedReferences``
left exactly as the starter file has them: same file, same statement (compared
as ASTs, nested bodies aside), same enclosing scope, no additional uses.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agent_eval.digests import DigestError, solution_digest, solution_files
from agent_eval.errors import AgentEvalError
from agent_eval.suite.contract import (
    CHECK_MODULE,
    Contract,
    build_check_module,
    load_contract,
    readable,
)
from agent_eval.syntax import compile_module, parse_module
from agent_eval.verification.analysis.references import (
    VALUE_CONTEXTS,
    ModuleFacts,
    Occurrence,
    analyse_module,
)
from agent_eval.verification.analysis.symbols import SymbolIndex
from agent_eval.verification.analysis.typecheck import (
    MypyError,
    MypyFinding,
    blank_checker_comments,
    installed_mypy_version,
    mypy_version,
    run_mypy,
)
from agent_eval.verification.runtime import timing

__all__ = [
    "CATEGORY_ORDER",
    "MAX_DIAGNOSTIC_CHARS",
    "AnalysisInputError",
    "allows_import",
    "analyse_solution",
    "seeded_references",
]

MAX_DIAGNOSTIC_CHARS = 2000
"""Equal to ``agent_eval.models.analysis.MAX_DIAGNOSTIC_CHARS`` (a test keeps them equal)."""
MAX_DIAGNOSTICS_PER_CATEGORY = 50
MAX_PATH_CHARS = 255

CATEGORY_ORDER = (
    "syntax",
    "type-error",
    "wrong-arguments",
    "missing-dependency",
    "unsupported-api",
    "contract-mismatch",
    "integration",
)

_WRONG_ARGUMENT_CODES = {"call-arg", "arg-type", "call-overload"}
_WRONG_ARGUMENT_TEXT = (
    "Too many arguments",
    "Too few arguments",
    "Missing positional argument",
    "Missing named argument",
    "Unexpected keyword argument",
    "No overload variant",
)
_IMPORT_CODES = {"import-not-found", "import-untyped", "import"}
_REFERENCE_CODES = {"attr-defined", *_IMPORT_CODES}
_QUOTED = re.compile(r'"([A-Za-z_][\w.]*)"')
_MODULE_ATTR = re.compile(r'Module "(?P<module>[\w.]+)" has no attribute "(?P<attr>\w+)"')
_CLASS_ATTR = re.compile(
    r'^(?:Item )?"(?:type\[)?(?P<cls>[A-Za-z_][\w.]*?)(?:\[[^"]*\])?\]?"'
    r'(?: of "[^"]*")? has no attribute "(?P<attr>\w+)"'
)


class AnalysisInputError(AgentEvalError):
    """An input of the analysis (task, catalog, contract, directories) is unusable."""


@dataclass(frozen=True)
class _Task:
    id: str
    outputs: tuple[str, ...]
    allowed_imports: tuple[str, ...]
    seeds: frozenset[str]
    integration: tuple[tuple[str, ...], ...]


def _task(task: Mapping[str, Any]) -> _Task:
    def strings(key: str) -> tuple[str, ...]:
        value = task.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise AnalysisInputError(f"task.json: {key!r} must be a list of strings")
        return tuple(value)

    task_id = task.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise AnalysisInputError("task.json: 'id' must be a non-empty string")
    outputs = strings("allowedOutputPaths")
    for path in outputs:
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or not path.endswith(".py"):
            raise AnalysisInputError(f"task.json: allowedOutputPaths entry {path!r} is invalid")
    requirements = task.get("requiredIntegration")
    if not isinstance(requirements, list):
        raise AnalysisInputError("task.json: 'requiredIntegration' must be a list")
    integration: list[tuple[str, ...]] = []
    for requirement in requirements:
        symbols = requirement.get("symbols") if isinstance(requirement, dict) else None
        if (
            not isinstance(symbols, list)
            or not symbols
            or not all(isinstance(s, str) for s in symbols)
        ):
            raise AnalysisInputError(
                "task.json: each requiredIntegration entry needs a non-empty 'symbols' list"
            )
        integration.append(tuple(symbols))
    return _Task(
        id=task_id,
        outputs=outputs,
        allowed_imports=strings("allowedImports"),
        seeds=frozenset(strings("seedReferences")),
        integration=tuple(integration),
    )


def allows_import(allowed: Iterable[str], module: str) -> bool:
    """Whether *module* is allowed by entries like ``appkit`` or ``appkit/*``.

    The same rule as ``TaskSpec.allows_import`` (a test keeps them equal).
    """
    for entry in allowed:
        if entry.endswith("/*"):
            root = entry[:-2]
            if module == root or module.startswith(root + "."):
                return True
        elif module == entry:
            return True
    return False


def _module_name(path: str) -> str:
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class _Diagnostics:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._seen: set[tuple[str, str | None, int | None, str]] = set()

    def add(self, category: str, message: str, path: str | None, line: int | None) -> None:
        if len(message) > MAX_DIAGNOSTIC_CHARS:
            message = message[: MAX_DIAGNOSTIC_CHARS - 1] + "…"
        if path is not None and len(path) > MAX_PATH_CHARS:
            path = None
        key = (category, path, line, message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.items.append(
            {
                "category": category,
                "message": message,
                "path": path,
                "line": line if line is None or line >= 0 else None,
            }
        )

    def has(self, category: str, path: str | None = None, line: int | None = None) -> bool:
        return any(
            item["category"] == category
            and (path is None or item["path"] == path)
            and (line is None or item["line"] == line)
            for item in self.items
        )

    def bounded(self) -> list[dict[str, Any]]:
        order = {category: position for position, category in enumerate(CATEGORY_ORDER)}
        ordered = sorted(
            self.items,
            key=lambda d: (
                order.get(d["category"], len(order)),
                d["path"] or "",
                d["line"] if d["line"] is not None else -1,
                d["message"],
            ),
        )
        result: list[dict[str, Any]] = []
        counts: Counter[str] = Counter()
        for item in ordered:
            counts[item["category"]] += 1
            if counts[item["category"]] <= MAX_DIAGNOSTICS_PER_CATEGORY:
                result.append(item)
        for category, count in sorted(counts.items(), key=lambda kv: order.get(kv[0], 99)):
            if count > MAX_DIAGNOSTICS_PER_CATEGORY:
                result.append(
                    {
                        "category": category,
                        "message": f"{count - MAX_DIAGNOSTICS_PER_CATEGORY} more {category} "
                        "findings not shown",
                        "path": None,
                        "line": None,
                    }
                )
        return result


@dataclass
class _Source:
    path: str
    module: str
    text: str
    decoded: bool = True
    facts: ModuleFacts | None = None


def _read_solution(root: Path, outputs: Sequence[str], diagnostics: _Diagnostics) -> list[_Source]:
    sources: list[_Source] = []
    for rel in outputs:
        path = root / rel
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            diagnostics.add("syntax", f"not UTF-8 text: {exc}", rel, None)
            sources.append(_Source(rel, _module_name(rel), "", decoded=False))
            continue
        except OSError as exc:
            raise AnalysisInputError(f"{path}: cannot read: {exc.strerror}") from exc
        sources.append(_Source(rel, _module_name(rel), text))
    return sources


def _parse(source: _Source, diagnostics: _Diagnostics) -> ast.Module | None:
    try:
        tree = parse_module(source.text, filename=source.path)
        # Compiling (not running) catches what the parser lets through, e.g.
        # 'return' outside a function or a misplaced 'nonlocal'.
        compile_module(tree, source.path)
    except SyntaxError as exc:
        where = f" (column {exc.offset})" if exc.offset else ""
        diagnostics.add("syntax", f"{exc.msg}{where}", source.path, exc.lineno)
        return None
    except ValueError as exc:  # e.g. null bytes in the source
        diagnostics.add("syntax", str(exc), source.path, None)
        return None
    return tree


def _starter_occurrences(
    starter_dir: Path | None, outputs: Sequence[str], index: SymbolIndex
) -> list[Occurrence]:
    if starter_dir is None:
        return []
    found: list[Occurrence] = []
    for rel in outputs:
        path = starter_dir / rel
        if not path.is_file():
            continue
        try:
            tree = parse_module(path.read_text(encoding="utf-8"), filename=rel)
        except (OSError, UnicodeDecodeError, SyntaxError) as exc:
            raise AnalysisInputError(f"starter file {rel} cannot be parsed: {exc}") from exc
        found.extend(
            analyse_module(tree, index=index, path=rel, module=_module_name(rel)).occurrences
        )
    return found


def seeded_references(
    catalog: Mapping[str, Any], starter_dir: Path, outputs: Sequence[str]
) -> list[str]:
    """The unsupported library references the starter files make, spelled as the analysis does.

    A task's ``seedReferences`` should equal this list: task verification can
    compare them, so a seed spelled differently is caught before any run.

    Raises:
        AnalysisInputError: a starter file does not parse.
    """
    index = SymbolIndex(catalog)
    found = _starter_occurrences(starter_dir, outputs, index)
    return sorted({o.symbol for o in found if not o.supported})


def _starter_lines(starter_dir: Path | None, rel: str) -> set[str]:
    if starter_dir is None or not (starter_dir / rel).is_file():
        return set()
    text = (starter_dir / rel).read_text(encoding="utf-8", errors="replace")
    return {line.strip() for line in text.splitlines() if line.strip()}


def _hallucinated(
    occurrences: Sequence[Occurrence], starter: Sequence[Occurrence], seeds: frozenset[str]
) -> set[str]:
    """Unsupported symbols, minus seed references whose every occurrence is a seeded one."""
    by_symbol: dict[str, list[Occurrence]] = {}
    for occurrence in occurrences:
        if not occurrence.supported:
            by_symbol.setdefault(occurrence.symbol, []).append(occurrence)
    result: set[str] = set()
    for symbol, found in by_symbol.items():
        if symbol not in seeds:
            result.add(symbol)
            continue
        seeded = Counter((o.path, o.fingerprint) for o in starter if o.symbol == symbol)
        submitted = Counter((o.path, o.fingerprint) for o in found)
        if submitted - seeded:
            result.add(symbol)
    return result


def _matches(required: str, occurrence: Occurrence, index: SymbolIndex) -> bool:
    if required in (occurrence.symbol, occurrence.canonical):
        return True
    if index.canonical(required) == occurrence.canonical:
        return True
    suffix = "." + required
    return occurrence.canonical.endswith(suffix) or occurrence.symbol.endswith(suffix)


def _describe_uses(uses: Sequence[Occurrence]) -> str:
    if not uses:
        return "it is never referenced"
    labels = {
        "import": "imported",
        "annotation": "used only in an annotation",
        "type-only": "used only under TYPE_CHECKING",
        "alias": "bound to a name that is never called",
        "load": "referenced without being called or passed",
        "except": "used only in an except clause",
        "base": "used only as a base class",
    }
    parts = sorted({f"{labels.get(o.context, o.context)} at {o.path}:{o.line}" for o in uses})
    return "; ".join(parts[:6])


def _check_integration(
    task: _Task, occurrences: Sequence[Occurrence], index: SymbolIndex, diagnostics: _Diagnostics
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for symbols in task.integration:
        related = [
            o for o in occurrences if o.supported and any(_matches(s, o, index) for s in symbols)
        ]
        satisfied = any(o.context in VALUE_CONTEXTS for o in related)
        results.append({"symbols": list(symbols), "satisfied": satisfied})
        if not satisfied:
            names = ", ".join(f"`{s}`" for s in symbols)
            diagnostics.add(
                "integration",
                f"required library integration not satisfied: none of {names} is used as a value "
                f"(called, constructed, passed as an argument, used as a decorator, or kept to be "
                f"called); {_describe_uses(related)}",
                related[0].path if related else None,
                related[0].line if related else None,
            )
    return results


def _is_stdlib(module: str) -> bool:
    top = module.split(".", 1)[0]
    return top in sys.stdlib_module_names or top == "__future__"


def _copy_for_mypy(sources: Sequence[_Source], workdir: Path) -> None:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    for source in sources:
        target = workdir / source.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(blank_checker_comments(source.text), encoding="utf-8")


def _library_class(name: str, index: SymbolIndex, solution_classes: set[str]) -> str | None:
    if "." in name:
        return index.canonical(name) if index.kind(name) == "class" else None
    if name in solution_classes:
        return None
    candidates = index.classes_named(name)
    return next(iter(candidates)) if len(candidates) == 1 else None


@dataclass
class _TypeCheck:
    ok: bool
    extra_unsupported: dict[str, tuple[str, int]]  # symbol -> (path, line), found by mypy only


def _classify(
    finding: MypyFinding,
    *,
    index: SymbolIndex,
    solution_classes: set[str],
) -> tuple[str, str | None]:
    """Category of a finding in a solution file, and the unsupported symbol it names."""
    code = finding.code or ""
    message = finding.message
    if code in _WRONG_ARGUMENT_CODES or message.startswith(_WRONG_ARGUMENT_TEXT):
        return "wrong-arguments", None
    if code in _IMPORT_CODES:
        quoted = _QUOTED.search(message)
        module = quoted.group(1) if quoted else ""
        if module and index.in_library(module):
            if index.kind(module) == "module":
                raise MypyError(
                    f"mypy cannot find the library module {module!r} that the API catalog "
                    "lists; install the library for the interpreter that runs mypy"
                )
            if index.exists(module):
                return "unsupported-api", module  # a class or function is not a module
            return "unsupported-api", index.missing_prefix(module)
        return "missing-dependency", None
    if code in {"attr-defined", "name-defined"}:
        module_attr = _MODULE_ATTR.search(message)
        if module_attr and index.in_library(module_attr.group("module")):
            symbol = f"{module_attr.group('module')}.{module_attr.group('attr')}"
            return "unsupported-api", index.missing_prefix(symbol)
        class_attr = _CLASS_ATTR.search(message)
        if class_attr:
            cls = _library_class(class_attr.group("cls"), index, solution_classes)
            if cls is not None:
                return "unsupported-api", f"{cls}.{class_attr.group('attr')}"
    return "type-error", None


def _type_check(
    *,
    sources: Sequence[_Source],
    entry: _Source | None,
    contract: Contract | None,
    index: SymbolIndex,
    known_unsupported: set[str],
    diagnostics: _Diagnostics,
    scratch_dir: Path,
    python: str,
    search_path: Sequence[Path],
    timeout: float,
) -> _TypeCheck:
    workdir = scratch_dir / "src"
    _copy_for_mypy(sources, workdir)
    files = [source.path for source in sources]
    line_exports: dict[int, str] = {}
    if contract is not None and entry is not None and entry.facts is not None:
        check = build_check_module(contract, entry.module, set(entry.facts.definitions))
        (workdir / f"{CHECK_MODULE}.py").write_text(check.source, encoding="utf-8")
        files.append(f"{CHECK_MODULE}.py")
        line_exports = check.line_exports
    findings = run_mypy(
        files,
        workdir=workdir,
        cache_dir=scratch_dir / "mypy-cache",
        python=python,
        search_path=search_path,
        timeout=timeout,
    )
    solution_classes = {c for s in sources if s.facts for c in s.facts.classes}
    by_path = {source.path: source for source in sources}
    extra: dict[str, tuple[str, int]] = {}
    counted = 0
    for finding in findings:
        if finding.path == f"{CHECK_MODULE}.py":
            counted += 1
            export = line_exports.get(finding.line)
            if export is not None and entry is not None:
                if entry.facts is None or export not in entry.facts.definitions:
                    continue  # already reported as missing
                text = readable(finding.text(), export)
                line = entry.facts.definitions.get(export) if entry.facts else None
                diagnostics.add(
                    "contract-mismatch", f"contract export `{export}`: {text}", entry.path, line
                )
            else:
                diagnostics.add(
                    "contract-mismatch",
                    f"contract: {readable(finding.text(), 'the contract')}",
                    entry.path if entry else None,
                    None,
                )
            continue
        if finding.path not in by_path:
            continue  # a finding inside an imported package is not the solution's
        counted += 1
        if finding.code in _REFERENCE_CODES and diagnostics.has(
            "unsupported-api", finding.path, finding.line
        ):
            continue  # the reference analysis already reported this line, by name
        category, symbol = _classify(finding, index=index, solution_classes=solution_classes)
        if (
            category == "unsupported-api"
            and symbol is not None
            and symbol not in known_unsupported
            and not index.exists(symbol)
        ):
            extra.setdefault(symbol, (finding.path, finding.line))
        if category == "unsupported-api" and diagnostics.has(
            "unsupported-api", finding.path, finding.line
        ):
            continue
        if category == "missing-dependency" and diagnostics.has(
            "missing-dependency", finding.path, finding.line
        ):
            continue
        diagnostics.add(category, finding.text(), finding.path, finding.line)
    return _TypeCheck(ok=counted == 0, extra_unsupported=extra)


def _mypy_version(python: str) -> str:
    if python == sys.executable:
        found = installed_mypy_version()
        if found is not None:
            return found
        import importlib.metadata  # an unusual installation only: its import is costly

        try:
            return importlib.metadata.version("mypy")
        except importlib.metadata.PackageNotFoundError:
            pass
    return mypy_version(python)


@dataclass
class _Analysis:
    """One analysis in progress: its inputs, what was read, and what the rules found so far."""

    spec: _Task
    index: SymbolIndex
    contract: Contract | None
    solution_dir: Path
    starter_dir: Path | None
    scratch_dir: Path
    python: str
    search_path: Sequence[Path]
    mypy_timeout: float
    diagnostics: _Diagnostics = field(default_factory=_Diagnostics)
    sources: list[_Source] = field(default_factory=list)
    missing: set[str] = field(default_factory=set)
    unsupported: set[str] = field(default_factory=set)
    hallucinated: set[str] = field(default_factory=set)
    integration: list[dict[str, Any]] = field(default_factory=list)
    contract_problem: bool = False
    type_checked: bool = False
    type_ok: bool = False

    @property
    def occurrences(self) -> list[Occurrence]:
        """Every library reference of every parsed source."""
        return [o for s in self.sources if s.facts for o in s.facts.occurrences]

    @property
    def syntax_ok(self) -> bool:
        return not self.diagnostics.has("syntax")

    @property
    def entry(self) -> _Source | None:
        """The source of the first allowed output: the module the contract describes."""
        return next((s for s in self.sources if s.path == self.spec.outputs[0]), None)


def _rule_syntax(run: _Analysis) -> None:
    """Every submitted file decodes as UTF-8, parses and compiles (it is never run)."""
    run.sources = _read_solution(run.solution_dir, run.spec.outputs, run.diagnostics)
    for source in run.sources:
        tree = _parse(source, run.diagnostics) if source.decoded else None
        if tree is not None:
            source.facts = analyse_module(
                tree, index=run.index, path=source.path, module=source.module
            )


def _rule_imports(run: _Analysis) -> None:
    """Imports only the standard library, the solution's own modules and allowedImports."""
    local_tops = {source.module.split(".")[0] for source in run.sources} | {
        _module_name(rel).split(".")[0] for rel in run.spec.outputs
    }
    for source in run.sources:
        for fact in source.facts.imports if source.facts else ():
            top = fact.module.split(".")[0]
            if (
                _is_stdlib(fact.module)
                or top in local_tops
                or allows_import(run.spec.allowed_imports, fact.module)
            ):
                continue
            run.missing.add(fact.module)
            run.diagnostics.add(
                "missing-dependency",
                f"imports `{fact.module}`, which the task does not allow (allowed: the standard "
                f"library, the solution's own modules, {', '.join(run.spec.allowed_imports)})",
                fact.path,
                fact.line,
            )


def _rule_supported_api(run: _Analysis) -> None:
    """Every library reference is in the API catalog; unsupported ones not seeded are invented."""
    occurrences = run.occurrences
    run.unsupported |= {o.symbol for o in occurrences if not o.supported}
    for occurrence in occurrences:
        if not occurrence.supported:
            run.diagnostics.add(
                "unsupported-api",
                f"`{occurrence.symbol}` is not part of the library's public API "
                "(see the API catalog)",
                occurrence.path,
                occurrence.line,
            )
    starter = _starter_occurrences(run.starter_dir, run.spec.outputs, run.index)
    run.hallucinated |= _hallucinated(occurrences, starter, run.spec.seeds)


def _rule_integration(run: _Analysis) -> None:
    """Each required library symbol is used as a value, not only imported or named."""
    run.integration = _check_integration(run.spec, run.occurrences, run.index, run.diagnostics)


def _rule_contract_exports(run: _Analysis) -> None:
    """The entry module defines every export of the contract at module level."""
    contract, spec, entry = run.contract, run.spec, run.entry
    if contract is None:
        return
    if entry is None:
        run.contract_problem = True
        run.diagnostics.add(
            "contract-mismatch",
            f"{spec.outputs[0]} was not submitted; the contract requires it to define "
            + ", ".join(f"`{name}`" for name in contract.exports),
            spec.outputs[0],
            None,
        )
    elif entry.facts is not None:
        for name in contract.exports:
            if name not in entry.facts.definitions:
                run.contract_problem = True
                run.diagnostics.add(
                    "contract-mismatch",
                    f"`{name}` is not defined at module level of {entry.path}; "
                    "the contract requires it",
                    entry.path,
                    None,
                )


def _rule_types(run: _Analysis) -> None:
    """mypy, against the installed library and the contract; it also finds unsupported API."""
    if run.syntax_ok and run.sources:
        run.type_checked = True
        checked = _type_check(
            sources=run.sources,
            entry=run.entry,
            contract=run.contract,
            index=run.index,
            known_unsupported=run.unsupported,
            diagnostics=run.diagnostics,
            scratch_dir=run.scratch_dir,
            python=run.python,
            search_path=run.search_path,
            timeout=run.mypy_timeout,
        )
        run.type_ok = checked.ok
        for symbol, (path, line) in checked.extra_unsupported.items():
            run.unsupported.add(symbol)
            text = (run.solution_dir / path).read_text(encoding="utf-8").splitlines()
            line_text = text[line - 1].strip() if 0 < line <= len(text) else ""
            seeded = line_text in _starter_lines(run.starter_dir, path)
            if symbol not in run.spec.seeds or not seeded:
                run.hallucinated.add(symbol)
    elif not run.sources and run.contract is None:
        # With a contract, the missing entry module is already a contract mismatch.
        run.diagnostics.add(
            "type-error",
            "no solution file was submitted (expected "
            + ", ".join(run.spec.outputs)
            + "); nothing was type-checked",
            None,
            None,
        )


RULES = (
    _rule_syntax,
    _rule_imports,
    _rule_supported_api,
    _rule_integration,
    _rule_contract_exports,
    _rule_types,
)
"""The analysis, rule by rule, in order: later rules read what earlier ones found."""


def analyse_solution(
    task: Mapping[str, Any],
    solution_dir: Path,
    catalog: Mapping[str, Any],
    *,
    scratch_dir: Path,
    contract_path: Path | None = None,
    starter_dir: Path | None = None,
    python: str = sys.executable,
    search_path: Sequence[Path] = (),
    mypy_timeout: float = 300.0,
) -> dict[str, Any]:
    """Analyse the solution in *solution_dir* for *task*; return an ``analysis.json`` dict.

    Args:
        task: the task's ``task.json`` (already validated by the host; the
            fields used here are re-checked).
        solution_dir: the collected solution (regular files only); only the
            task's ``allowedOutputPaths`` are analysed.
        catalog: the API catalog (``api-catalog.json``) of the installed library.
        scratch_dir: a writable directory for the copied sources, the generated
            contract check and mypy's cache; its ``src/`` is replaced.
        contract_path: the task's ``contract.pyi``; its exports must be provided
            by the module of the first ``allowedOutputPaths`` entry.
        starter_dir: the task's starter files, for the seed-reference exclusion.
        python: interpreter whose mypy and installed library are used.
        search_path: extra import roots for mypy (the library when it is not
            installed for *python*, e.g. in tests).
        mypy_timeout: seconds before mypy is stopped.

    Returns:
        A dict with exactly the fields of ``agent_eval.models.analysis.Analysis``.

    Raises:
        AnalysisInputError: an input is unusable (a task-side problem).
        MypyError: mypy could not run (infrastructure, never the agent's fault).
    """
    spec = _task(task)
    if catalog.get("schemaVersion") != 1:
        raise AnalysisInputError("the API catalog must have schemaVersion 1")
    contract = None
    if contract_path is not None:
        try:
            contract = load_contract(contract_path)
        except AgentEvalError as exc:
            raise AnalysisInputError(str(exc)) from exc
    if not solution_dir.is_dir():
        raise AnalysisInputError(f"{solution_dir}: solution directory not found")
    try:
        digest = solution_digest(solution_files(solution_dir))
    except DigestError as exc:
        raise AnalysisInputError(f"cannot hash the solution: {exc}") from exc
    run = _Analysis(
        spec=spec,
        index=SymbolIndex(catalog),
        contract=contract,
        solution_dir=solution_dir,
        starter_dir=starter_dir,
        scratch_dir=scratch_dir,
        python=python,
        search_path=search_path,
        mypy_timeout=mypy_timeout,
    )
    for rule in RULES:
        with timing.span(f"rule {rule.__name__.lstrip('_')}"):
            rule(run)
    with timing.span("mypy's version"):
        mypy = _mypy_version(python)
    # Signatures are only known to match once mypy has checked them.
    contract_ok = (
        not run.contract_problem
        and not run.diagnostics.has("contract-mismatch")
        and (contract is None or run.type_checked)
    )
    return {
        "schemaVersion": 1,
        "taskId": spec.id,
        "solutionDigest": digest,
        "syntaxOk": run.syntax_ok,
        "typeCheckOk": run.type_ok,
        "contractOk": contract_ok,
        "integrationOk": all(item["satisfied"] for item in run.integration),
        "unsupportedApi": sorted(run.unsupported),
        "unsupportedApiCount": len(run.unsupported),
        "hallucinatedApi": sorted(run.hallucinated),
        "hallucinatedApiCount": len(run.hallucinated),
        "missingDependencies": sorted(run.missing),
        "integration": run.integration,
        "diagnostics": run.diagnostics.bounded(),
        "mypyVersion": mypy,
    }
