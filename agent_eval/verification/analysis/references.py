"""Find every reference a source file makes into the library, and how it is used.

One pass over a module's AST resolves, without executing anything:

* imports of library modules and names (``import appkit.validation as v``,
  ``from appkit import create_validator``);
* attribute chains on them (``appkit.validation.nope``, ``v.Field``);
* members of library instances whose class is known statically: created in the
  same scope by a library constructor or by a function whose catalogued return
  type is a library class, or a parameter/variable annotated with one;
* aliases (``check = create_validator`` makes ``check(...)`` a call of it).

Each reference is an :class:`Occurrence` with the *context* of its use:
``import``; value uses ``call``, ``argument``, ``decorator``, ``assignment``
(to an attribute or item, i.e. kept to be called later); and non-value uses
``annotation``, ``type-only`` (inside ``if TYPE_CHECKING:``), ``alias``,
``except``, ``base`` and ``load`` (anything else). String annotations are
parsed and count as annotations. Each occurrence carries a *fingerprint* of the
statement it is in (the statement's AST without its nested body, plus the
enclosing scopes), so a solution can be compared with its starter file.

Bindings are tracked in source order within a scope; function bodies are
resolved after their enclosing scope, against its final bindings.
"""

from __future__ import annotations

import ast
import contextlib
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

from agent_eval.syntax import parse_expression
from agent_eval.verification.analysis.symbols import CALLABLE_KINDS, SymbolIndex

__all__ = ["VALUE_CONTEXTS", "ModuleFacts", "Occurrence", "analyse_module"]

VALUE_CONTEXTS = frozenset({"call", "argument", "decorator", "assignment"})
_BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
_DYNAMIC_IMPORTS = {"import_module", "__import__"}


@dataclass(frozen=True)
class PathRef:
    """An expression that denotes the library name *path* (which may not exist)."""

    path: str


@dataclass(frozen=True)
class InstanceRef:
    """An expression that evaluates to an instance of the library class *cls*."""

    cls: str


Ref = PathRef | InstanceRef


@dataclass(frozen=True)
class Occurrence:
    """One reference into the library."""

    symbol: str
    """The symbol as referenced; for a missing one, its shortest missing prefix."""
    canonical: str
    """The defining spelling (re-exports followed)."""
    supported: bool
    """Whether the symbol is in the catalog."""
    path: str
    line: int
    context: str
    fingerprint: str


@dataclass(frozen=True)
class ImportFact:
    """An absolute import of *module* (relative imports are local and not listed)."""

    module: str
    path: str
    line: int


@dataclass
class ModuleFacts:
    """Everything the analysis needs from one file."""

    occurrences: list[Occurrence] = field(default_factory=list)
    imports: list[ImportFact] = field(default_factory=list)
    definitions: dict[str, int] = field(default_factory=dict)
    """Module-level names bound by the file, with the line of their first binding."""
    classes: set[str] = field(default_factory=set)
    """Names of every class the file defines (at any depth)."""


@dataclass
class _Scope:
    name: str
    is_class: bool = False
    bindings: dict[str, Ref | None] = field(default_factory=dict)


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _header_fingerprint(node: ast.AST) -> str:
    shallow = copy.copy(node)
    for name in _BODY_FIELDS:
        if hasattr(shallow, name):
            setattr(shallow, name, [])
    return ast.dump(shallow, include_attributes=False)


def _target_names(target: ast.expr) -> Iterator[str]:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            yield node.id


class _Analyser:
    def __init__(self, index: SymbolIndex, path: str, module: str, is_package: bool) -> None:
        self.index = index
        self.path = path
        self.module = module
        self.is_package = is_package
        self.facts = ModuleFacts()
        self.chain: list[_Scope] = []
        self.fingerprint = ""
        self.type_only = False
        self.deferred: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[_Scope], bool]] = []

    # ---- entry

    def run(self, tree: ast.Module) -> ModuleFacts:
        self.chain = [_Scope("module")]
        self._block(tree.body)
        while self.deferred:
            node, chain, type_only = self.deferred.pop(0)
            self._function_body(node, chain, type_only)
        for sub in ast.walk(tree):
            if isinstance(sub, ast.ClassDef):
                self.facts.classes.add(sub.name)
        self._definitions(tree.body)
        return self.facts

    def _definitions(self, body: Sequence[ast.stmt]) -> None:
        for stmt in body:
            names: list[str] = []
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [stmt.name]
            elif isinstance(stmt, ast.Assign):
                names = [n for t in stmt.targets for n in _target_names(t)]
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                names = list(_target_names(stmt.target))
            elif isinstance(stmt, ast.Import | ast.ImportFrom):
                names = [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]
            for name in names:
                self.facts.definitions.setdefault(name, stmt.lineno)
            for attr in ("body", "orelse", "finalbody"):
                if isinstance(stmt, ast.If | ast.Try | ast.With) and hasattr(stmt, attr):
                    self._definitions(getattr(stmt, attr))
            if isinstance(stmt, ast.Try):
                for handler in stmt.handlers:
                    self._definitions(handler.body)

    # ---- scopes

    def _lookup(self, name: str) -> Ref | None:
        innermost = len(self.chain) - 1
        for position in range(innermost, -1, -1):
            scope = self.chain[position]
            if scope.is_class and position != innermost:
                continue
            if name in scope.bindings:
                return scope.bindings[name]
        return None

    def _bind(self, name: str, ref: Ref | None) -> None:
        self.chain[-1].bindings[name] = ref

    def _scope_path(self) -> str:
        return "/".join(scope.name for scope in self.chain)

    # ---- recording

    def _record(self, symbol: str, node: ast.AST, context: str) -> None:
        if not self.index.in_library(symbol):
            return
        supported = self.index.exists(symbol)
        if context != "import" and self.index.shadowed(symbol) is False:
            supported = False  # the package's unexported attribute, not the submodule
        spelled = symbol if supported else self.index.missing_prefix(symbol)
        if self.type_only and context != "import":
            context = "type-only"
        self.facts.occurrences.append(
            Occurrence(
                symbol=spelled,
                canonical=self.index.canonical(spelled),
                supported=supported,
                path=self.path,
                line=getattr(node, "lineno", 0),
                context=context,
                fingerprint=self.fingerprint,
            )
        )

    # ---- statements

    def _block(self, body: Sequence[ast.stmt]) -> None:
        for stmt in body:
            self._stmt(stmt)

    def _set_fingerprint(self, node: ast.AST) -> None:
        self.fingerprint = f"{self._scope_path()}|{_header_fingerprint(node)}"

    def _stmt(self, node: ast.stmt) -> None:
        self._set_fingerprint(node)
        if isinstance(node, ast.Import):
            self._import(node)
        elif isinstance(node, ast.ImportFrom):
            self._import_from(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self._function_def(node)
        elif isinstance(node, ast.ClassDef):
            self._class_def(node)
        elif isinstance(node, ast.Assign):
            self._assign(node.targets, node.value)
        elif isinstance(node, ast.AnnAssign):
            self._ann_assign(node)
        elif isinstance(node, ast.AugAssign):
            self._expr(node.value, "load")
            self._store_target(node.target, None)
        elif isinstance(node, ast.For | ast.AsyncFor):
            self._expr(node.iter, "load")
            self._store_target(node.target, None)
            self._block(node.body)
            self._block(node.orelse)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                self._expr(item.context_expr, "load")
                if item.optional_vars is not None:
                    self._store_target(item.optional_vars, None)
            self._block(node.body)
        elif isinstance(node, ast.If):
            self._expr(node.test, "load")
            checked = self._narrowed_names(node.test)
            with self._narrowed(self._narrowing(node.test, True), checked):
                if _is_type_checking(node.test):
                    saved, self.type_only = self.type_only, True
                    self._block(node.body)
                    self.type_only = saved
                else:
                    self._block(node.body)
            with self._narrowed(self._narrowing(node.test, False), checked):
                self._block(node.orelse)
            # ``if not isinstance(x, C): return``: what the test leaves holds after it.
            if _ends(node.body) and not _ends(node.orelse):
                self._rebind(self._narrowing(node.test, False), checked)
            elif _ends(node.orelse) and not _ends(node.body):
                self._rebind(self._narrowing(node.test, True), checked)
        elif isinstance(node, ast.Assert):
            self._expr(node.test, "load")
            if node.msg is not None:
                self._expr(node.msg, "load")
            self._rebind(self._narrowing(node.test, True), self._narrowed_names(node.test))
        elif isinstance(node, ast.Try | ast.TryStar):
            self._block(node.body)
            for handler in node.handlers:
                self._set_fingerprint(handler)
                caught: Ref | None = None
                if handler.type is not None:
                    symbol, result = self._resolve(handler.type)
                    if symbol is not None:
                        self._record(symbol, handler.type, "except")
                    if isinstance(result, PathRef) and self._is_class(result.path):
                        caught = InstanceRef(self.index.canonical(result.path))
                if handler.name:
                    self._bind(handler.name, caught)
                self._block(handler.body)
            self._block(node.orelse)
            self._block(node.finalbody)
        elif isinstance(node, ast.While):
            self._expr(node.test, "load")
            self._block(node.body)
            self._block(node.orelse)
        elif isinstance(node, ast.Match):
            self._expr(node.subject, "load")
            subject = node.subject.id if isinstance(node.subject, ast.Name) else None
            for case in node.cases:
                self._set_fingerprint(case)
                for sub in ast.walk(case.pattern):
                    if isinstance(sub, ast.MatchClass):
                        self._expr(sub.cls, "load")
                    elif isinstance(sub, ast.MatchAs | ast.MatchStar) and sub.name:
                        self._bind(sub.name, None)
                # ``case C(...)`` / ``case C() as y``: the subject (and y) is a C there.
                pattern: ast.pattern = case.pattern
                alias: str | None = None
                if isinstance(pattern, ast.MatchAs) and pattern.pattern is not None:
                    alias, pattern = pattern.name, pattern.pattern
                matched = (
                    self._instance_of(pattern.cls) if isinstance(pattern, ast.MatchClass) else None
                )
                if alias is not None:
                    self._bind(alias, matched)
                narrowing = (
                    {subject: matched}
                    if subject is not None and isinstance(pattern, ast.MatchClass)
                    else {}
                )
                with self._narrowed(narrowing, set(narrowing)):
                    if case.guard is not None:
                        self._expr(case.guard, "load")
                    self._block(case.body)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            return
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._expr(child, "load")

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            name = alias.name
            self.facts.imports.append(ImportFact(name, self.path, node.lineno))
            if not self.index.in_library(name):
                self._bind((alias.asname or name).split(".")[0], None)
                continue
            if alias.asname and self.index.shadowed(name) is not None:
                # ``import pkg.sub as s`` binds the package's attribute, not the submodule.
                self._shadowing(name, node)
                self._bind(alias.asname, None)
                continue
            if self.index.kind(name) not in (None, "module"):
                # ``import appkit.validation.Field``: not a module, fails at import time.
                self._record_unsupported_import(name, node)
            else:
                self._record(name, node, "import")
            if alias.asname:
                self._bind(alias.asname, PathRef(name))
            else:
                top = name.split(".")[0]
                self._bind(top, PathRef(top))

    def _record_unsupported_import(self, name: str, node: ast.AST) -> None:
        self.facts.occurrences.append(
            Occurrence(
                symbol=name,
                canonical=name,
                supported=False,
                path=self.path,
                line=getattr(node, "lineno", 0),
                context="import",
                fingerprint=self.fingerprint,
            )
        )

    def _import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            for alias in node.names:
                if alias.name != "*":
                    self._bind(alias.asname or alias.name, None)
            return
        self.facts.imports.append(ImportFact(module, self.path, node.lineno))
        if not self.index.in_library(module):
            for alias in node.names:
                if alias.name != "*":
                    self._bind(alias.asname or alias.name, None)
            return
        module_kind = self.index.kind(module)
        if module_kind != "module":
            if module_kind is None:
                self._record(module, node, "import")
            else:
                self._record_unsupported_import(module, node)
            for alias in node.names:
                if alias.name != "*":
                    self._bind(alias.asname or alias.name, PathRef(f"{module}.{alias.name}"))
            return
        for alias in node.names:
            if alias.name == "*":
                self._record(module, node, "import")
                for name, symbol in self.index.module_members(module).items():
                    self._bind(name, PathRef(symbol))
                continue
            symbol = f"{module}.{alias.name}"
            if _dunder(alias.name) and not self.index.exists(symbol):
                # ``from jinja2 import __version__``: a module's dunders are not catalogued
                # names, as ``jinja2.__version__`` is not (see :meth:`_step`).
                self._bind(alias.asname or alias.name, None)
                continue
            if not self.index.exists(symbol) and self.index.exists(f"{module}.__getattr__"):
                # The module's ``__getattr__`` (PEP 562) serves it: not a name to check.
                self._bind(alias.asname or alias.name, None)
                continue
            if self.index.shadowed(symbol) is not None:
                self._shadowing(symbol, node)
                self._bind(alias.asname or alias.name, None)
                continue
            self._record(symbol, node, "import")
            self._bind(alias.asname or alias.name, PathRef(symbol))

    def _shadowing(self, symbol: str, node: ast.AST) -> None:
        """An import of a package's attribute that shadows its submodule *symbol*.

        The runtime and mypy bind the attribute; unless the package exports it, the
        name is not supported. An exported one is a value mypy types: nothing to check.
        """
        if not self.index.shadowed(symbol):
            self._record_unsupported_import(symbol, node)

    def _function_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self._expr(decorator, "decorator")
        arguments = node.args
        for default in [*arguments.defaults, *arguments.kw_defaults]:
            if default is not None:
                self._expr(default, "load")
        for arg in self._all_args(arguments):
            if arg.annotation is not None:
                self._expr(arg.annotation, "annotation")
        if node.returns is not None:
            self._expr(node.returns, "annotation")
        self._bind(node.name, None)
        self.deferred.append((node, list(self.chain), self.type_only))

    @staticmethod
    def _all_args(arguments: ast.arguments) -> list[ast.arg]:
        args = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        if arguments.vararg is not None:
            args.append(arguments.vararg)
        if arguments.kwarg is not None:
            args.append(arguments.kwarg)
        return args

    def _function_body(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, chain: list[_Scope], type_only: bool
    ) -> None:
        saved_chain, saved_type_only = self.chain, self.type_only
        self.chain = [*chain, _Scope(node.name)]
        self.type_only = type_only
        self._set_fingerprint(node)
        for arg in self._all_args(node.args):
            instance = None
            if arg.annotation is not None and arg not in (node.args.vararg, node.args.kwarg):
                instance = self._annotation_instance(arg.annotation)
            self._bind(arg.arg, instance)
        self._block(node.body)
        self.chain, self.type_only = saved_chain, saved_type_only

    def _class_def(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self._expr(decorator, "decorator")
        for base in node.bases:
            self._expr(base, "base")
        for keyword in node.keywords:
            self._expr(keyword.value, "load")
        self.chain.append(_Scope(node.name, is_class=True))
        self._block(node.body)
        self.chain.pop()
        self._bind(node.name, None)

    def _assign(self, targets: Sequence[ast.expr], value: ast.expr) -> None:
        # Kept in an attribute or item, a library callable is "assigned to be called"
        # (a value use); bound to a plain name it is only an alias, whose calls count.
        plain = all(isinstance(t, ast.Name) for t in targets)
        context = "alias" if plain else "assignment"
        result: Ref | None = None
        if isinstance(value, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
            symbol, result = self._resolve(value)
            if symbol is not None:
                self._record(symbol, value, context)
        else:
            self._expr(value, context)
        for target in targets:
            self._store_target(target, result if plain else None)

    def _ann_assign(self, node: ast.AnnAssign) -> None:
        annotation = node.annotation
        alias = (isinstance(annotation, ast.Name) and annotation.id == "TypeAlias") or (
            isinstance(annotation, ast.Attribute) and annotation.attr == "TypeAlias"
        )
        self._expr(annotation, "annotation")
        result: Ref | None = None
        if node.value is not None:
            if alias:
                self._expr(node.value, "annotation")
            else:
                context = "alias" if isinstance(node.target, ast.Name) else "assignment"
                if isinstance(node.value, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
                    symbol, result = self._resolve(node.value)
                    if symbol is not None:
                        self._record(symbol, node.value, context)
                else:
                    self._expr(node.value, context)
        instance = self._annotation_instance(annotation)
        if isinstance(node.target, ast.Name):
            self._bind(node.target.id, instance or result)
        else:
            self._expr(node.target, "load")

    def _store_target(self, target: ast.expr, result: Ref | None) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, result)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._store_target(element, None)
        elif isinstance(target, ast.Starred):
            self._store_target(target.value, None)
        elif isinstance(target, ast.Attribute):
            self._expr(target.value, "load")
        elif isinstance(target, ast.Subscript):
            self._expr(target.value, "load")
            self._expr(target.slice, "load")

    def _annotation_instance(self, annotation: ast.expr) -> InstanceRef | None:
        """The library class an annotation names (``X``, ``X | None``, ``Optional[X]``)."""
        node: ast.expr | None = annotation
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = parse_expression(node.value)
            except SyntaxError:
                return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            sides = [node.left, node.right]
            others = [s for s in sides if not (isinstance(s, ast.Constant) and s.value is None)]
            node = others[0] if len(others) == 1 else None
        elif isinstance(node, ast.Subscript) and (
            (isinstance(node.value, ast.Name) and node.value.id == "Optional")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "Optional")
        ):
            node = node.slice
        if not isinstance(node, ast.Name | ast.Attribute):
            return None
        _, result = self._resolve_silently(node)
        if isinstance(result, PathRef) and self._is_class(result.path):
            return InstanceRef(self.index.canonical(result.path))
        return None

    def _is_class(self, path: str) -> bool:
        return self.index.kind(path) == "class" and not self.index.is_external(path)

    # ---- narrowing

    def _instance_of(self, node: ast.expr) -> Ref | None:
        """An instance of the library class *node* names; None when it names anything else
        (a class outside the library, a tuple of classes)."""
        _, result = self._resolve_silently(node)
        if isinstance(result, PathRef) and self._is_class(result.path):
            return InstanceRef(self.index.canonical(result.path))
        return None

    def _narrowed_names(self, test: ast.expr) -> set[str]:
        """The names *test* checks with ``isinstance``: a branch it guards sees them as
        what it narrows them to, or as unknown (``isinstance(x, A) or isinstance(x, B)``
        leaves x an A or a B, whose common members no one name describes)."""
        return {
            sub.args[0].id
            for sub in ast.walk(test)
            if _isinstance_call(sub) and isinstance(sub.args[0], ast.Name)
        }

    def _narrowing(self, test: ast.expr, holds: bool) -> dict[str, Ref | None]:
        """What the names of ``isinstance(NAME, C)`` in *test* are where *test* is *holds*."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self._narrowing(test.operand, not holds)
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) == holds:
            # All of an ``and`` hold; none of an ``or`` does.
            found: dict[str, Ref | None] = {}
            for value in test.values:
                found.update(self._narrowing(value, holds))
            return found
        if holds and _isinstance_call(test) and isinstance(test.args[0], ast.Name):
            return {test.args[0].id: self._instance_of(test.args[1])}
        return {}

    @contextlib.contextmanager
    def _narrowed(self, narrowing: dict[str, Ref | None], names: set[str]) -> Iterator[None]:
        """Within: each of *names* bound to what *narrowing* says (else unknown); after, to
        what it was, unless the block bound it again."""
        before = {name: self._lookup(name) for name in names}
        bound = self._rebind(narrowing, names)
        try:
            yield
        finally:
            scope = self.chain[-1].bindings
            for name, ref in bound.items():
                if scope.get(name, _UNBOUND) is ref:
                    scope[name] = before[name]

    def _rebind(self, narrowing: dict[str, Ref | None], names: set[str]) -> dict[str, Ref | None]:
        bound: dict[str, Ref | None] = {}
        for name in names:
            bound[name] = narrowing.get(name)
            self._bind(name, bound[name])
        return bound

    # ---- expressions

    def _resolve_silently(self, node: ast.expr) -> tuple[str | None, Ref | None]:
        """Resolve a Name/Attribute chain without recording anything."""
        if isinstance(node, ast.Name):
            ref = self._lookup(node.id)
            return (ref.path if isinstance(ref, PathRef) else None), ref
        if isinstance(node, ast.Attribute):
            _, base = self._resolve_silently(node.value)
            return self._step(base, node.attr)
        return None, None

    def _resolve(self, node: ast.expr, context: str = "load") -> tuple[str | None, Ref | None]:
        """Resolve *node*; record what its sub-expressions reference, but not *node* itself.

        Returns the library symbol *node* denotes (if any) and what it evaluates to.
        *context* is that of *node*; it decides how a subscript's index is recorded.
        """
        if isinstance(node, ast.Name):
            ref = self._lookup(node.id)
            return (ref.path if isinstance(ref, PathRef) else None), ref
        if isinstance(node, ast.Attribute):
            base_symbol, base = self._resolve(node.value)
            if base is None:
                if base_symbol is not None:
                    self._record(base_symbol, node.value, "load")
                return None, None
            return self._step(base, node.attr)
        if isinstance(node, ast.Call):
            return None, self._call(node)
        if isinstance(node, ast.Subscript):
            symbol, base = self._resolve(node.value)
            self._expr(node.slice, "annotation" if context == "annotation" else "load")
            if isinstance(base, PathRef) and self.index.kind(base.path) == "class":
                return symbol, base
            if symbol is not None:
                self._record(symbol, node.value, "load")
            return None, None
        self._expr(node, "load")
        return None, None

    def _step(self, base: Ref | None, attr: str) -> tuple[str | None, Ref | None]:
        if base is None or _dunder(attr):
            return None, None
        index = self.index
        if isinstance(base, InstanceRef):
            symbol = index.member(base.cls, attr)
            kind = index.kind(symbol)
            if kind is None:
                if index.exists(index.member(base.cls, "__getattr__")):
                    return None, None  # the class answers any attribute
                return symbol, None
            if kind in CALLABLE_KINDS:
                return symbol, PathRef(symbol)
            returned = index.returns(symbol)
            return symbol, (InstanceRef(returned) if returned else None)
        path = base.path
        if not index.exists(path):
            return f"{path}.{attr}", PathRef(f"{path}.{attr}")
        if index.is_external(path):
            return None, None  # defined outside the library: not ours to check
        kind = index.kind(path)
        if kind == "module":
            shadowed = index.shadowed(f"{path}.{attr}")
            if shadowed is not None:
                # The package's attribute, not the submodule: unsupported unless exported.
                return (None, None) if shadowed else (f"{path}.{attr}", None)
            if not index.exists(f"{path}.{attr}"):
                # A module bound under another name (``from .lib import scimath as emath``):
                # its attributes are the module's own.
                target = index.canonical(path)
                if target != path and index.kind(target) == "module":
                    return self._step(PathRef(target), attr)
                if index.exists(f"{path}.__getattr__"):
                    return None, None  # the module serves any name (PEP 562); mypy accepts it
            return f"{path}.{attr}", PathRef(f"{path}.{attr}")
        if kind == "class":
            symbol = index.member(path, attr)
            if not index.exists(symbol) and index.exists(index.member(path, "__getattr__")):
                return None, None
            return symbol, PathRef(symbol)
        return None, None

    def _call(self, node: ast.Call) -> Ref | None:
        symbol, func = self._resolve(node.func)
        if symbol is not None:
            self._record(symbol, node.func, "call")
        is_cast = (isinstance(node.func, ast.Name) and node.func.id == "cast") or (
            isinstance(node.func, ast.Attribute) and node.func.attr == "cast"
        )
        self._dynamic_import(node)
        for position, arg in enumerate(node.args):
            value = arg.value if isinstance(arg, ast.Starred) else arg
            self._expr(value, "annotation" if is_cast and position == 0 else "argument")
        for keyword in node.keywords:
            self._expr(keyword.value, "argument")
        if not isinstance(func, PathRef) or not self.index.exists(func.path):
            return None
        kind = self.index.kind(func.path)
        if kind == "class" and not self.index.is_external(func.path):
            return InstanceRef(self.index.canonical(func.path))
        if kind in CALLABLE_KINDS:
            returned = self.index.returns(func.path)
            return InstanceRef(returned) if returned else None
        return None

    def _dynamic_import(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name not in _DYNAMIC_IMPORTS or not node.args:
            return
        first = node.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            self.facts.imports.append(ImportFact(first.value, self.path, node.lineno))
            if self.index.in_library(first.value):
                self._record(first.value, node, "import")

    def _expr(self, node: ast.expr, context: str) -> None:
        if isinstance(node, ast.Name | ast.Attribute | ast.Subscript):
            symbol, _ = self._resolve(node, context)
            if symbol is not None:
                self._record(symbol, node, context)
            return
        if isinstance(node, ast.Call):
            self._call(node)
            return
        if isinstance(node, ast.Constant):
            if context == "annotation" and isinstance(node.value, str):
                self._string_annotation(node)
            return
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            for element in node.elts:
                self._expr(element, context)
            return
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    self._expr(key, "load")
            for value in node.values:
                self._expr(value, context)
            return
        if isinstance(node, ast.Starred):
            self._expr(node.value, context)
            return
        if isinstance(node, ast.Lambda):
            self._lambda(node)
            return
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            self._comprehension(node)
            return
        if isinstance(node, ast.BoolOp):
            # ``isinstance(x, C) and x.attr``; ``not isinstance(x, C) or x.attr``.
            names: set[str] = set()
            narrowing: dict[str, Ref | None] = {}
            with contextlib.ExitStack() as narrowed:
                for value in node.values:
                    narrowed.enter_context(self._narrowed(narrowing, names))
                    self._expr(value, "load")
                    names = self._narrowed_names(value)
                    narrowing = self._narrowing(value, isinstance(node.op, ast.And))
            return
        if isinstance(node, ast.IfExp):
            self._expr(node.test, "load")
            names = self._narrowed_names(node.test)
            with self._narrowed(self._narrowing(node.test, True), names):
                self._expr(node.body, context)
            with self._narrowed(self._narrowing(node.test, False), names):
                self._expr(node.orelse, context)
            return
        if isinstance(node, ast.NamedExpr):
            symbol, result = self._resolve(node.value)
            if symbol is not None:
                self._record(symbol, node.value, "alias")
            self._bind(node.target.id, result)
            return
        child_context = "annotation" if context == "annotation" else "load"
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._expr(child, child_context)

    def _string_annotation(self, node: ast.Constant) -> None:
        assert isinstance(node.value, str)
        try:
            parsed = parse_expression(node.value.strip())
        except SyntaxError:
            return
        for sub in ast.walk(parsed):
            if hasattr(sub, "lineno"):
                ast.copy_location(sub, node)
        self._expr(parsed, "annotation")

    def _lambda(self, node: ast.Lambda) -> None:
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                self._expr(default, "load")
        self.chain.append(_Scope("<lambda>"))
        for arg in self._all_args(node.args):
            self._bind(arg.arg, None)
        self._expr(node.body, "load")
        self.chain.pop()

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> None:
        self.chain.append(_Scope("<comprehension>"))
        for generator in node.generators:
            self._expr(generator.iter, "load")
            self._store_target(generator.target, None)
            for condition in generator.ifs:
                self._expr(condition, "load")
        if isinstance(node, ast.DictComp):
            self._expr(node.key, "load")
            self._expr(node.value, "load")
        else:
            self._expr(node.elt, "load")
        self.chain.pop()


def analyse_module(tree: ast.Module, *, index: SymbolIndex, path: str, module: str) -> ModuleFacts:
    """Resolve every library reference, import and module-level definition of one file.

    Args:
        tree: the parsed file.
        index: the catalog's symbols.
        path: the file's path relative to the solution (recorded in each fact).
        module: the file's dotted module name (resolves relative imports).
    """
    is_package = path.endswith("__init__.py")
    return _Analyser(index, path, module, is_package).run(tree)


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


_UNBOUND = object()


def _isinstance_call(node: ast.AST) -> TypeGuard[ast.Call]:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "isinstance"
        and len(node.args) == 2
        and not node.keywords
    )


def _ends(body: Sequence[ast.stmt]) -> bool:
    """Whether *body* never falls through to what follows it."""
    return bool(body) and isinstance(body[-1], ast.Return | ast.Raise | ast.Continue | ast.Break)
