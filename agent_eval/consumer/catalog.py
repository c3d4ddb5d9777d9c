"""The API catalog: every public symbol of the installed library, as JSON and Markdown.

The catalog is generated from the *installed* distributions (their metadata,
their importable packages and what ``inspect`` finds in them), never written by
hand, so it cannot drift from the archives under evaluation. Static analysis
uses it as the list of supported symbols; the agent reads the Markdown guide.

This module imports only the standard library (and the stdlib-only
``agent_eval.digests``/``agent_eval.errors``): it runs inside a minimal
container that has Python, mypy and the library, run as::

    python3 -m agent_eval.consumer.catalog --distribution appkit-core \\
        --distribution appkit-forms --output-dir OUT

which writes ``OUT/api-catalog.json`` and ``OUT/API.md`` and prints one JSON
line ``{"catalog": ..., "guide": ..., "digest": ...}``.

What counts as public:

* a module is public when no component of its dotted name starts with ``_``;
* a module's public names are its ``__all__`` when it has one; otherwise the
  names without a leading underscore that the module defines itself,
  re-exports explicitly (``from x import name as name``, ``import a as a``) or
  takes in with ``from x import *`` (the public names of ``x``, by this same
  rule, across any chain of modules), as mypy's ``--no-implicit-reexport``
  reads them and as the import system binds them;
* a name both imported implicitly and assigned or defined by the module (a
  fallback after ``try: from x import name`` / ``except ImportError:``) is the
  binding mypy reads first: ``try`` before its handlers, ``else`` and
  ``finally``, and only the branch of an ``if`` that a condition mypy decides
  (``TYPE_CHECKING``, ``sys.version_info``, ``sys.platform``) takes; when that
  is the import, the name is not exported, whatever the fallback binds at run time;
* a name of ``__all__`` that the module's own ``__getattr__`` serves (PEP 562,
  or a lazy module's: a ``ModuleType`` subclass the library installed as the
  module) is a member: a module, class or function it yields is catalogued as what it
  is, any other value with kind ``lazy``; a module with a ``__getattr__``
  lists it, since both the runtime and mypy then accept further names;
* a name that cannot be resolved (``__all__`` lists it but nothing serves it,
  a public submodule fails to import) is listed under ``unresolved`` with the
  reason, and the rest of the catalog is still generated;
* a class's public members are the names without a leading underscore found on
  it or its bases (methods, properties, class attributes; an Enum's too, which
  ``dir`` hides), a named tuple's ``_asdict``/``_replace``/``_make``/``_fields``,
  its dataclass fields and annotations, and attributes its library methods
  assign on ``self`` (in any module of the library, private ones too; a class
  or method under an ``if``/``try``/``with`` block, a positional-only ``self``). Its
  constructor signature (``__init__``) is the class entry's signature, and a
  ``__getattr__`` defined in the library is listed (its instances answer any
  attribute);
* a submodule whose package binds its name to another value
  (``from filelock.version import version`` in ``filelock/__init__.py``) is a
  module entry, imported by its path; the package's attribute of that name is
  that value for the runtime and for mypy, and is noted under ``shadowed``.

A name whose object is defined elsewhere is a *re-export* (``appkit.Field`` of
``appkit.validation.Field``); both spellings are supported symbols.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import functools
import importlib
import importlib.metadata
import inspect
import itertools
import json
import os
import pkgutil
import re
import sys
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval.digests import canonical_json, sha256_json
from agent_eval.errors import AgentEvalError
from agent_eval.layout import CATALOG_FILE

__all__ = [
    "GUIDE_FILE",
    "CatalogError",
    "build_catalog",
    "catalog_digest",
    "main",
    "render_markdown",
    "write_catalog",
]

SCHEMA_VERSION = 1
GUIDE_FILE = "API.md"


_MAX_DEFAULT_CHARS = 80
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class CatalogError(AgentEvalError):
    """The catalog cannot be generated (distribution missing, module not importable...)."""


# --------------------------------------------------------------------------- distributions


def _top_level_packages(dist: importlib.metadata.Distribution, name: str) -> list[str]:
    text = dist.read_text("top_level.txt")
    if text:
        found = {line.strip() for line in text.splitlines() if line.strip()}
    else:
        found = set()
        for file in dist.files or ():
            parts = file.parts
            if not parts or parts[0] in {"..", "__pycache__"} or parts[0].endswith(".dist-info"):
                continue
            if len(parts) > 1 and parts[-1] == "__init__.py":
                found.add(parts[0])
            elif len(parts) == 1 and parts[0].endswith(".py"):
                found.add(parts[0][:-3])
    public = sorted(p for p in found if p.isidentifier() and not p.startswith("_"))
    if not public:
        raise CatalogError(
            f"distribution {name!r} declares no importable top-level package "
            "(no top_level.txt and no package in its RECORD); reinstall it with a standard backend"
        )
    return public


def _distribution(name: str) -> dict[str, Any]:
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise CatalogError(
            f"distribution {name!r} is not installed for {sys.executable}; "
            "install the candidate archives first"
        ) from None
    canonical = dist.metadata["Name"] or name
    return {
        "name": canonical,
        "version": dist.version,
        "packages": _top_level_packages(dist, name),
    }


# --------------------------------------------------------------------------- formatting


class _Text:
    """An annotation or default that ``inspect`` prints verbatim (no quotes)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _annotation_text(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    text = inspect.formatannotation(annotation)
    return text.replace("NoneType", "None")


def _default_text(default: Any) -> str:
    text = _ADDRESS.sub("", repr(default))
    if len(text) > _MAX_DEFAULT_CHARS:
        return "..."
    return text


def _signature(obj: Any, *, drop_first: bool) -> str | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    if inspect.isclass(obj):
        # A constructor's signature: calling the class returns an instance, not None.
        sig = sig.replace(return_annotation=inspect.Signature.empty)
    params = list(sig.parameters.values())
    if (
        drop_first
        and params
        and params[0].kind
        in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
    ):
        params = params[1:]
    rendered = []
    for param in params:
        changes: dict[str, Any] = {}
        if param.annotation is not inspect.Parameter.empty:
            changes["annotation"] = _Text(_annotation_text(param.annotation))
        if param.default is not inspect.Parameter.empty:
            changes["default"] = _Text(_default_text(param.default))
        rendered.append(param.replace(**changes))
    ret: Any = inspect.Signature.empty
    if sig.return_annotation is not inspect.Signature.empty:
        ret = _Text(_annotation_text(sig.return_annotation))
    return str(sig.replace(parameters=rendered, return_annotation=ret))


def _first_line(doc: object) -> str:
    # A class's ``__doc__`` slot may hold anything (numpy's compiled classes keep a
    # descriptor there); only text is a docstring.
    if not isinstance(doc, str) or not doc:
        return ""
    for line in inspect.cleandoc(doc).splitlines():
        if line.strip():
            return line.strip()
    return ""


def _own_doc(obj: Any) -> str:
    """First line of *obj*'s own docstring (a class's, not its base's)."""
    if inspect.isclass(obj):
        return _first_line(obj.__dict__.get("__doc__"))
    return _first_line(getattr(obj, "__doc__", None))


def _is_type_construct(obj: Any) -> bool:
    if isinstance(obj, typing.TypeVar | typing.ParamSpec | types.GenericAlias | types.UnionType):
        return True
    return type(obj).__module__ == "typing"


# --------------------------------------------------------------------------- source facts


@dataclass
class _ModuleSource:
    """What a module's source says about names the runtime cannot attribute."""

    assigned: set[str] = field(default_factory=set)
    imported: dict[str, str] = field(default_factory=dict)  # local name -> origin dotted name
    explicit_reexports: set[str] = field(default_factory=set)
    # name -> what binds it first where mypy reads: "define", "import" or "reexport"
    first_binding: dict[str, str] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)  # bound by an assignment, def or class
    definitions: set[str] = field(default_factory=set)  # bound by a def or class statement
    value_text: dict[str, str] = field(default_factory=dict)
    annotation_text: dict[str, str] = field(default_factory=dict)
    docs: dict[str, str] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)  # qualname -> node
    star_sources: list[str] = field(default_factory=list)  # ``from x import *``: each x


def _attribute_docs(body: Sequence[ast.stmt]) -> dict[str, str]:
    """Docstrings written as a string literal right after an assignment."""
    docs: dict[str, str] = {}
    for stmt, following in itertools.pairwise(body):
        if not (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            continue
        for target in _assigned_names(stmt):
            docs[target] = _first_line(following.value.value)
    return docs


def _assigned_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


_COMPARE: dict[type[ast.cmpop], Any] = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}


def _is_sys(node: ast.expr, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _int_tuple(node: ast.expr) -> tuple[int, ...] | None:
    if isinstance(node, ast.Tuple) and all(
        isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts
    ):
        return tuple(typing.cast(int, typing.cast(ast.Constant, e).value) for e in node.elts)
    return None


def _checker_takes(test: ast.expr) -> bool | None:
    """Which branch of ``if test`` mypy reads: True the body, False ``else``, None both.

    mypy decides ``TYPE_CHECKING``/``MYPY`` (true for it), ``not``, ``and``/``or`` of
    decided parts, ``sys.version_info`` against a tuple of ints (its Python version
    is this interpreter's ``major.minor``) and ``sys.platform`` comparisons.
    """
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _checker_takes(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [_checker_takes(value) for value in test.values]
        decisive = isinstance(test.op, ast.Or)  # True decides ``or``, False decides ``and``
        if decisive in parts:
            return decisive
        return (not decisive) if all(p is not None for p in parts) else None
    if isinstance(test, ast.Name | ast.Attribute):
        name = test.id if isinstance(test, ast.Name) else test.attr
        return {"TYPE_CHECKING": True, "MYPY": True, "PY3": True, "PY2": False}.get(name)
    if isinstance(test, ast.Call) and _is_sys_platform_startswith(test):
        return sys.platform.startswith(str(typing.cast(ast.Constant, test.args[0]).value))
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    compare = _COMPARE.get(type(test.ops[0]))
    left, right = test.left, test.comparators[0]
    if compare is None:
        return None
    if _is_sys(left, "platform") and isinstance(right, ast.Constant):
        if isinstance(test.ops[0], ast.Eq | ast.NotEq) and isinstance(right.value, str):
            return bool(compare(sys.platform, right.value))
        return None
    version = tuple(sys.version_info[:2])
    wanted = _int_tuple(right)
    if wanted is None:
        return None
    if _is_sys(left, "version_info"):
        seen = version
    elif (
        isinstance(left, ast.Subscript)
        and _is_sys(left.value, "version_info")
        and isinstance(left.slice, ast.Slice)
        and left.slice.lower is None
        and left.slice.step is None
        and isinstance(left.slice.upper, ast.Constant)
        and left.slice.upper.value in (1, 2)
    ):
        seen = version[: typing.cast(int, left.slice.upper.value)]
    else:
        return None
    exact = isinstance(test.ops[0], ast.Eq | ast.NotEq)
    if len(seen) == len(wanted) or (len(seen) > len(wanted) and not exact):
        return bool(compare(seen, wanted))
    return None


def _is_sys_platform_startswith(call: ast.Call) -> bool:
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr == "startswith"
        and _is_sys(call.func.value, "platform")
        and len(call.args) == 1
        and not call.keywords
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    )


def _module_source(module: types.ModuleType) -> _ModuleSource:
    facts = _ModuleSource()
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return facts
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return facts
    is_package = hasattr(module, "__path__")

    def bind(name: str, how: str, checked: bool) -> None:
        # mypy keeps a module-level name's first binding as its symbol; a later one
        # (a fallback assignment after an import) is checked against it, not exported.
        if checked:
            facts.first_binding.setdefault(name, how)
        if how == "define":
            facts.defined.add(name)

    def visit(body: Sequence[ast.stmt], checked: bool = True) -> None:
        facts.docs.update(_attribute_docs(body))
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bind(stmt.name, "define", checked)
                facts.definitions.add(stmt.name)
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    for leaf in ast.walk(target):
                        if isinstance(leaf, ast.Name):
                            bind(leaf.id, "define", checked)
                for name in _assigned_names(stmt):
                    facts.assigned.add(name)
                    if stmt.value is not None:
                        facts.value_text[name] = ast.unparse(stmt.value)
                    if isinstance(stmt, ast.AnnAssign):
                        facts.annotation_text[name] = ast.unparse(stmt.annotation)
            elif isinstance(stmt, ast.ImportFrom):
                origin = stmt.module or ""
                if stmt.level:
                    origin = _resolve_relative(module.__name__, is_package, stmt.level, stmt.module)
                for alias in stmt.names:
                    if alias.name == "*":
                        facts.star_sources.append(origin)
                        continue
                    local = alias.asname or alias.name
                    facts.imported[local] = f"{origin}.{alias.name}"
                    explicit = alias.asname == alias.name
                    bind(local, "reexport" if explicit else "import", checked)
                    if explicit:
                        facts.explicit_reexports.add(local)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    explicit = alias.asname == alias.name
                    local = alias.asname or alias.name.partition(".")[0]
                    bind(local, "reexport" if explicit else "import", checked)
                    if alias.asname:
                        facts.imported[alias.asname] = alias.name
                        if explicit:
                            facts.explicit_reexports.add(alias.asname)
            elif isinstance(stmt, ast.If):
                # Module-level definitions guarded by a version check: mypy reads only the
                # branch a condition it decides statically takes (both when it cannot).
                taken = _checker_takes(stmt.test)
                visit(stmt.body, checked and taken is not False)
                visit(stmt.orelse, checked and taken is not True)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                # ``with contextlib.suppress(ImportError):`` and the like: the body binds.
                visit(stmt.body, checked)
            elif isinstance(stmt, ast.Try | ast.TryStar):
                # A fallback import: mypy reads the body, the handlers, ``else``, ``finally``.
                visit(stmt.body, checked)
                for handler in stmt.handlers:
                    visit(handler.body, checked)
                visit(stmt.orelse, checked)
                visit(stmt.finalbody, checked)

    visit(tree.body)

    def collect_classes(body: Sequence[ast.stmt], prefix: str) -> None:
        for stmt in _in_blocks(body):
            if isinstance(stmt, ast.ClassDef):
                qualname = f"{prefix}{stmt.name}"
                facts.classes[qualname] = stmt
                collect_classes(stmt.body, qualname + ".")

    collect_classes(tree.body, "")
    return facts


def _in_blocks(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of *body* and of the ``if``/``try``/``with`` blocks in it (a class
    or a method defined under ``if sys.version_info >= ...:`` or in a ``try``), not of
    the functions and classes it defines."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _in_blocks([*stmt.body, *stmt.orelse])
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            yield from _in_blocks(stmt.body)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            handlers = [s for h in stmt.handlers for s in h.body]
            yield from _in_blocks([*stmt.body, *handlers, *stmt.orelse, *stmt.finalbody])


def _self_attributes(node: ast.ClassDef) -> dict[str, str | None]:
    """Public attributes assigned on ``self`` in a class's methods, with annotation text."""
    found: dict[str, str | None] = {}
    for stmt in _in_blocks(node.body):
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        positional = [*stmt.args.posonlyargs, *stmt.args.args]
        if not positional or any(
            isinstance(d, ast.Name) and d.id in {"staticmethod", "classmethod"}
            for d in stmt.decorator_list
        ):
            continue
        # ``def __init__(self, value, /)``: the first parameter may be positional-only.
        self_name = positional[0].arg
        params = {
            arg.arg: ast.unparse(arg.annotation)
            for arg in [*stmt.args.posonlyargs, *stmt.args.args, *stmt.args.kwonlyargs]
            if arg.annotation is not None
        }
        for sub in ast.walk(stmt):
            targets: list[ast.expr] = []
            annotation: ast.expr | None = None
            if isinstance(sub, ast.Assign):
                targets = list(sub.targets)
                if isinstance(sub.value, ast.Name) and sub.value.id in params:
                    # ``self.name = name``: the attribute has the parameter's type.
                    annotation = ast.parse(params[sub.value.id], mode="eval").body
            elif isinstance(sub, ast.AnnAssign | ast.AugAssign):
                targets = [sub.target]
                annotation = sub.annotation if isinstance(sub, ast.AnnAssign) else None
            for target in targets:
                for leaf in ast.walk(target):
                    if (
                        isinstance(leaf, ast.Attribute)
                        and isinstance(leaf.value, ast.Name)
                        and leaf.value.id == self_name
                        and not leaf.attr.startswith("_")
                    ):
                        text = ast.unparse(annotation) if annotation is not None else None
                        if found.get(leaf.attr) is None:
                            found[leaf.attr] = text
    return found


_NAMED_TUPLE_API = ("_asdict", "_field_defaults", "_fields", "_make", "_replace")
"""A named tuple's documented members, public despite their underscore."""


def _member_names(cls: type[Any]) -> list[str]:
    """The public member names of *cls*: what ``dir`` lists and every name its MRO's
    classes define (an Enum's metaclass hides its methods and ``name``/``value`` from
    ``dir``), plus a named tuple's documented ``_asdict``, ``_replace``... API."""
    names = set(dir(cls))
    for klass in cls.__mro__:
        names.update(vars(klass))
    public = {name for name in names if not name.startswith("_")}
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        public.update(name for name in _NAMED_TUPLE_API if hasattr(cls, name))
    return sorted(public)


def _module_getattr(module: types.ModuleType) -> Any:
    """The module's ``__getattr__`` (PEP 562), or its class's when the library installed
    a ``ModuleType`` subclass as the module (a lazy module, as large libraries do)."""
    own = module.__dict__.get("__getattr__")
    if callable(own):
        return own
    kind = type(module)
    if kind is not types.ModuleType:
        served = getattr(kind, "__getattr__", None)
        if callable(served):
            return served
    return None


# --------------------------------------------------------------------------- the walk


def _entry(
    name: str,
    kind: str,
    module: str,
    *,
    signature: str | None = None,
    type_text: str | None = None,
    doc: str = "",
    reexport_of: str | None = None,
    returns: str | None = None,
    inherited: bool = False,
    bases: Sequence[str] = (),
) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "module": module,
        "signature": signature,
        "type": type_text,
        "doc": doc,
        "reexportOf": reexport_of,
        "returns": returns,
        "inherited": inherited,
        "bases": list(bases),
    }


def _origin_of(obj: Any) -> str | None:
    """``module.qualname`` of a class or function, when the runtime knows it."""
    if inspect.ismodule(obj):
        return obj.__name__
    if inspect.isclass(obj) or inspect.isroutine(obj):
        module = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if isinstance(module, str) and isinstance(qualname, str) and "<locals>" not in qualname:
            return f"{module}.{qualname}"
    return None


class _Walker:
    """Imports every public module of the given packages and lists their symbols."""

    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = tuple(packages)
        self.modules: dict[str, types.ModuleType] = {}
        self.sources: dict[str, _ModuleSource] = {}
        self.entries: dict[str, dict[str, Any]] = {}
        self.class_names: dict[int, str] = {}
        self._classes: list[tuple[str, type[Any]]] = []
        self.unresolved: dict[str, str] = {}  # spelling -> why it is not catalogued
        self.shadowed: dict[str, dict[str, Any]] = {}  # submodule -> its package's attribute
        self._exports: dict[str, frozenset[str]] = {}
        self._exporting: set[str] = set()
        self._cuts = 0
        self._files: dict[str, str] | None = None  # a module's file -> its name

    # ---- modules

    def import_all(self) -> None:
        for package in self.packages:
            self._import(package)

    def _import(self, name: str) -> None:
        try:
            module = importlib.import_module(name)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            # BaseException too: a module may end its import with SystemExit or a test
            # framework's skip (numpy's test modules call pytest.skip at import time).
            if "." in name:
                # One submodule (often one needing an optional dependency) is noted,
                # not fatal: the import system refuses it too, so it is not supported.
                self.unresolved[name] = f"import fails: {type(exc).__name__}: {exc}"[:300]
                return
            raise CatalogError(
                f"cannot import {name!r}: {type(exc).__name__}: {exc}; "
                "every top-level package of the library must import cleanly"
            ) from exc
        self.modules[name] = module
        path = getattr(module, "__path__", None)
        if path is None:
            return
        for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
            if not info.name.startswith("_"):
                self._import(f"{name}.{info.name}")

    def _in_library(self, dotted: str) -> bool:
        return any(dotted == p or dotted.startswith(p + ".") for p in self.packages)

    def _source(self, name: str) -> _ModuleSource:
        if name not in self.sources:
            module = sys.modules.get(name)
            self.sources[name] = _ModuleSource() if module is None else _module_source(module)
        return self.sources[name]

    def exports(self, name: str) -> frozenset[str]:
        """What ``from name import *`` binds: its ``__all__``, or its public names."""
        if name in self._exports:
            return self._exports[name]
        module = sys.modules.get(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except KeyboardInterrupt:
                raise
            except BaseException:
                return frozenset()
        if name in self._exporting:
            # A cycle of star imports: the module being computed contributes nothing
            # here; what the import system bound is still read from each __dict__.
            self._cuts += 1
            return frozenset()
        cuts = self._cuts
        self._exporting.add(name)
        try:
            result = frozenset(self._public_names(name, module))
        finally:
            self._exporting.discard(name)
        if cuts == self._cuts or not self._exporting:
            self._exports[name] = result  # a result cut short by a cycle is not kept
        return result

    def public_names(self, name: str) -> list[str]:
        return sorted(self.exports(name))

    def _public_names(self, name: str, module: types.ModuleType) -> list[str]:
        declared = module.__dict__.get("__all__")
        if declared is not None:
            if not isinstance(declared, list | tuple) or not all(
                isinstance(n, str) for n in declared
            ):
                raise CatalogError(f"{name}.__all__ must be a list of strings")
            return sorted(set(declared))
        source = self._source(name)
        starred: set[str] = set()
        for star_source in source.star_sources:
            starred |= self.exports(star_source)
        own = source.assigned | source.definitions
        names = []
        for key, value in module.__dict__.items():
            if key.startswith("_") or (
                inspect.ismodule(value) and key not in source.imported and key not in starred
            ):
                continue
            if (
                key in source.defined
                and source.first_binding.get(key) == "import"
                and key not in starred
                and not inspect.ismodule(value)
            ):
                # Bound by an import and by a fallback assignment or ``def``: mypy's
                # symbol is the implicit import it reads first, which is not exported.
                continue
            origin = _origin_of(value)
            # A name the module binds itself: assigned, or a ``def``/``class`` whose
            # decorator made it an object of another origin (a click command, a partial).
            defined_here = (
                origin == f"{name}.{key}"
                or (origin is None and key in own)
                or (origin is not None and key in own and key not in source.imported)
            )
            if defined_here or key in source.explicit_reexports or key in starred:
                names.append(key)
        return sorted(names)

    # ---- symbols

    def collect(self) -> None:
        for name in self.modules:
            self._source(name)
        pending: dict[str, tuple[str, Any, str]] = {}  # spelling -> (module, object, target)
        for mod_name in sorted(self.modules):
            module = self.modules[mod_name]
            self.entries[mod_name] = _entry(
                mod_name, "module", mod_name, doc=_first_line(module.__doc__)
            )
            source = self.sources[mod_name]
            if _module_getattr(module) is not None:
                self.entries[f"{mod_name}.__getattr__"] = _entry(
                    f"{mod_name}.__getattr__", "function", mod_name
                )
            for key in self.public_names(mod_name):
                spelling = f"{mod_name}.{key}"
                if spelling in self.modules:
                    continue  # a submodule: its own entry (a shadowing value is noted)
                if key in module.__dict__:
                    value = module.__dict__[key]
                else:
                    served = self._served(mod_name, module, key)
                    if served is None:
                        continue
                    value = served[0]
                    if not (
                        inspect.ismodule(value)
                        or inspect.isclass(value)
                        or inspect.isroutine(value)
                    ):
                        self.entries[spelling] = _entry(
                            spelling,
                            "lazy",
                            mod_name,
                            type_text=type(value).__name__,
                            doc="served by the module's __getattr__",
                        )
                        continue
                if inspect.ismodule(value):
                    if value.__name__ != spelling:
                        pending[spelling] = (mod_name, value, value.__name__)
                    continue
                origin = _origin_of(value)
                if origin is None and key in source.imported and key not in source.assigned:
                    origin = source.imported[key]
                if origin is not None and origin != spelling:
                    pending[spelling] = (mod_name, value, origin)
                else:
                    self._add_primary(mod_name, key, value)
        self._note_shadowed()
        self._resolve_reexports(pending)
        for name, cls in sorted(self._classes):
            self._add_members(name, cls)
        self._fill_returns()

    def _note_shadowed(self) -> None:
        """Submodules their package's namespace binds to another value of the same name.

        ``from filelock.version import version`` in ``filelock/__init__.py`` leaves
        the attribute ``filelock.version`` the str for the runtime and for mypy; the
        submodule still imports by its path.
        """
        for mod_name, submodule in self.modules.items():
            parent, _, key = mod_name.rpartition(".")
            holder = self.modules.get(parent)
            if holder is None or key not in holder.__dict__:
                continue
            value = holder.__dict__[key]
            if value is submodule:
                continue
            self.shadowed[mod_name] = {
                "name": mod_name,
                "exported": key in self.exports(parent),
                "type": type(value).__name__,
            }

    def _served(self, mod_name: str, module: types.ModuleType, key: str) -> tuple[Any] | None:
        """The value the module's ``__getattr__`` serves for *key*, or None (noted)."""
        spelling = f"{mod_name}.{key}"
        if _module_getattr(module) is None:
            self.unresolved[spelling] = "listed in __all__, but the module has no such attribute"
            return None
        try:
            return (getattr(module, key),)
        except Exception as exc:  # whatever the library raises, the name is not served
            self.unresolved[spelling] = (
                f"listed in __all__, but the module's __getattr__ raises "
                f"{type(exc).__name__}: {exc}"
            )[:300]
            return None

    def _add_primary(self, mod_name: str, key: str, value: Any) -> None:
        spelling = f"{mod_name}.{key}"
        source = self.sources[mod_name]
        if inspect.isclass(value):
            self._add_class(spelling, value)
        elif inspect.isroutine(value):
            self.entries[spelling] = _entry(
                spelling,
                "function",
                getattr(value, "__module__", None) or mod_name,
                signature=_signature(value, drop_first=False),
                doc=_own_doc(value),
            )
        else:
            kind = "type" if _is_type_construct(value) else "constant"
            type_text = source.annotation_text.get(key)
            if kind == "type":
                type_text = source.value_text.get(key, type_text)
            elif type_text is None and type(value).__module__ == "builtins":
                type_text = type(value).__name__
            self.entries[spelling] = _entry(
                spelling,
                kind,
                mod_name,
                type_text=type_text,
                doc=source.docs.get(key, ""),
            )

    def _add_class(self, spelling: str, cls: type[Any]) -> None:
        self.class_names.setdefault(id(cls), spelling)
        self.entries[spelling] = _entry(
            spelling,
            "class",
            cls.__module__,
            signature=_signature(cls, drop_first=False),
            doc=_own_doc(cls),
            bases=[self._type_name(base) for base in cls.__bases__ if base is not object],
        )
        self._classes.append((spelling, cls))

    def _type_name(self, cls: type[Any]) -> str:
        known = self.class_names.get(id(cls))
        if known:
            return known
        if cls.__module__ == "builtins":
            return cls.__qualname__
        return f"{cls.__module__}.{cls.__qualname__}"

    def _resolve_reexports(self, pending: Mapping[str, tuple[str, Any, str]]) -> None:
        # A library object whose defining name is not public (a private module, or
        # left out of its module's __all__) gets one public spelling as its primary
        # entry: the shortest, then the first in order. The others re-export it.
        by_target: dict[str, list[str]] = {}
        for spelling, (_, _, target) in pending.items():
            by_target.setdefault(target, []).append(spelling)
        primary_for: dict[str, str] = {}
        for target, spellings in sorted(by_target.items()):
            if target in self.entries or not self._in_library(target):
                continue
            chosen = min(spellings, key=lambda s: (s.count("."), s))
            mod_name, value, _ = pending[chosen]
            self._add_primary(mod_name, chosen.rsplit(".", 1)[1], value)
            primary_for[target] = chosen
        for spelling in sorted(pending):
            if spelling in self.entries:
                continue
            mod_name, value, target = pending[spelling]
            canonical = primary_for.get(target, target)
            if inspect.isclass(value) and id(value) in self.class_names:
                canonical = self.class_names[id(value)]
            self.entries[spelling] = self._reexport(spelling, mod_name, value, canonical)

    def _reexport(self, spelling: str, mod_name: str, value: Any, target: str) -> dict[str, Any]:
        base = self.entries.get(target)
        if base is not None:
            copied = dict(base)
            copied.update(name=spelling, reexportOf=target, inherited=False)
            return copied
        if inspect.ismodule(value):
            kind = "module"
        elif inspect.isclass(value):
            kind = "class"
        elif inspect.isroutine(value):
            kind = "function"
        else:
            kind = "type" if _is_type_construct(value) else "constant"
        signature = None
        if kind in {"class", "function"}:
            signature = _signature(value, drop_first=False)
        module = getattr(value, "__module__", None) if kind != "module" else value.__name__
        return _entry(
            spelling,
            kind,
            module if isinstance(module, str) else mod_name,
            signature=signature,
            doc=_own_doc(value) if kind != "constant" else "",
            reexport_of=target,
        )

    # ---- class members

    def _class_node(self, cls: type[Any]) -> ast.ClassDef | None:
        # Any module, private ones of the library too (a public class is often defined
        # in one, ``httpx._exceptions``) and a base's outside it (``returncode`` of a
        # ``subprocess.CalledProcessError`` subclass is assigned in the standard library).
        node = self._source(cls.__module__).classes.get(cls.__qualname__)
        if node is None and (defined := self._defining_module(cls)) is not None:
            node = self._source(defined).classes.get(cls.__qualname__)
        return node

    def _defining_module(self, cls: type[Any]) -> str | None:
        """The module whose file defines *cls*, read from its methods' code: a library
        may set ``__module__`` to where it is documented (numpy's ``set_module``)."""
        for value in vars(cls).values():
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            code = getattr(value, "__code__", None)
            if isinstance(code, types.CodeType):
                if self._files is None:
                    self._files = {
                        os.path.realpath(file): name
                        for name, module in list(sys.modules.items())
                        if isinstance(file := getattr(module, "__file__", None), str)
                    }
                found = self._files.get(os.path.realpath(code.co_filename))
                if found is not None and found != cls.__module__:
                    return found
        return None

    def _add_members(self, class_name: str, cls: type[Any]) -> None:
        members: dict[str, tuple[str, Any, type[Any] | None, str | None]] = {}
        # (kind, raw object, defining class, annotation text)
        for key in _member_names(cls):
            owner = next((k for k in cls.__mro__ if key in k.__dict__), None)
            raw = owner.__dict__[key] if owner is not None else getattr(cls, key, None)
            members[key] = (self._member_kind(raw, cls, key), raw, owner, None)
        for klass in reversed(cls.__mro__):
            if klass is object:
                continue
            annotations = inspect.get_annotations(klass)
            for key, annotation in annotations.items():
                if key.startswith("_") or (key in members and members[key][0] != "attribute"):
                    continue
                annotated = _annotation_text(annotation)
                if annotated.startswith(("ClassVar[", "typing.ClassVar[")):
                    annotated = annotated[annotated.index("[") + 1 : -1]
                members[key] = ("attribute", None, klass, annotated)
            node = self._class_node(klass)
            if node is not None:
                for key, assigned in _self_attributes(node).items():
                    if key not in members or (
                        members[key][0] == "attribute" and not members[key][3]
                    ):
                        members[key] = ("attribute", None, klass, assigned)
        answering = next(
            (
                k
                for k in cls.__mro__
                if "__getattr__" in k.__dict__ and self._in_library(k.__module__)
            ),
            None,
        )
        if answering is not None:
            # Instances answer any attribute; static analysis must not flag unknown ones.
            members["__getattr__"] = ("method", answering.__dict__["__getattr__"], answering, None)
        if dataclasses.is_dataclass(cls):
            for item in dataclasses.fields(cls):
                if not item.name.startswith("_") and item.name not in members:
                    members[item.name] = ("attribute", None, cls, _annotation_text(item.type))
        fields = getattr(cls, "__attrs_attrs__", None)
        if isinstance(fields, tuple):
            # attrs classes (``x = attr.ib()`` leaves no class attribute behind).
            for item in fields:
                name = getattr(item, "name", None)
                if isinstance(name, str) and not name.startswith("_") and name not in members:
                    kind = getattr(item, "type", None)
                    text = None if kind is None else _annotation_text(kind)
                    members[name] = ("attribute", None, cls, text)
        for key in sorted(members):
            kind, raw, owner, text = members[key]
            spelling = f"{class_name}.{key}"
            inherited = owner is not None and owner is not cls
            nested = kind == "class" and raw is not None and raw.__qualname__.endswith(f".{key}")
            if nested and id(raw) not in self.class_names:
                self._add_class(spelling, raw)
                self._add_members(spelling, raw)
                continue
            self.entries[spelling] = self._member_entry(spelling, kind, raw, owner, text, inherited)

    @staticmethod
    def _member_kind(raw: Any, cls: type[Any], key: str) -> str:
        if isinstance(raw, staticmethod):
            return "staticmethod"
        if isinstance(raw, classmethod):
            return "classmethod"
        if isinstance(raw, property | functools.cached_property):
            return "property"
        if inspect.isclass(raw):
            return "class"
        if inspect.isroutine(raw) or inspect.ismethoddescriptor(raw):
            return "method"
        return "attribute"

    def _member_entry(
        self,
        spelling: str,
        kind: str,
        raw: Any,
        owner: type[Any] | None,
        text: str | None,
        inherited: bool,
    ) -> dict[str, Any]:
        module = owner.__module__ if owner is not None else spelling.rsplit(".", 2)[0]
        signature = None
        doc = ""
        if kind in {"method", "staticmethod", "classmethod"}:
            func = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
            signature = _signature(func, drop_first=kind != "staticmethod")
            doc = _own_doc(func)
        elif kind == "property":
            getter = raw.fget if isinstance(raw, property) else raw.func
            doc = _own_doc(getter)
            annotation = getattr(getter, "__annotations__", {}).get("return")
            text = _annotation_text(annotation) if annotation is not None else None
        elif kind == "attribute":
            if owner is not None:
                node = self._class_node(owner)
                if node is not None:
                    doc = _attribute_docs(node.body).get(spelling.rsplit(".", 1)[1], "")
            if isinstance(raw, enum.Enum):
                text = type(raw).__name__
        elif kind == "class":
            doc = _own_doc(raw)
            kind = "attribute"
        return _entry(
            spelling,
            kind,
            module,
            signature=signature,
            type_text=text,
            doc=doc,
            inherited=inherited,
        )

    # ---- return types, for static analysis of instance members

    def _returned_class(self, hint: Any) -> str | None:
        candidate = typing.get_origin(hint) or hint
        if inspect.isclass(candidate):
            return self.class_names.get(id(candidate))
        return None

    def _fill_returns(self) -> None:
        for name, cls in self._classes:
            try:
                hints = typing.get_type_hints(cls)
            except Exception:  # annotations that cannot be evaluated are simply not used
                hints = {}
            for key, hint in hints.items():
                entry = self.entries.get(f"{name}.{key}")
                if entry is not None and entry["kind"] == "attribute":
                    entry["returns"] = self._returned_class(hint)
            for key in dir(cls):
                entry = self.entries.get(f"{name}.{key}")
                if entry is None or entry["kind"] not in {
                    "method",
                    "classmethod",
                    "staticmethod",
                    "property",
                }:
                    continue
                raw = inspect.getattr_static(cls, key)
                if isinstance(raw, staticmethod | classmethod):
                    raw = raw.__func__
                elif isinstance(raw, property):
                    raw = raw.fget
                elif isinstance(raw, functools.cached_property):
                    raw = raw.func
                entry["returns"] = self._return_of(raw)
        for entry in self.entries.values():
            if entry["kind"] == "function" and entry["reexportOf"] is None:
                module_name, _, key = entry["name"].rpartition(".")
                module = self.modules.get(module_name)
                if module is not None:
                    entry["returns"] = self._return_of(module.__dict__.get(key))
        for entry in self.entries.values():
            target = entry["reexportOf"]
            if target in self.entries:
                entry["returns"] = self.entries[target]["returns"]

    def _return_of(self, func: Any) -> str | None:
        if func is None or not callable(func):
            return None
        try:
            hints = typing.get_type_hints(func)
        except Exception:  # annotations that cannot be evaluated are simply not used
            return None
        return self._returned_class(hints.get("return"))


# --------------------------------------------------------------------------- public API


def build_catalog(distributions: Iterable[str]) -> dict[str, Any]:
    """Generate the catalog of the installed *distributions*.

    Args:
        distributions: distribution names, e.g. ``["appkit-core", "appkit-forms"]``;
            each must be installed for the running interpreter.

    Returns:
        A JSON-ready dict ``{"schemaVersion": 1, "distributions": [...],
        "symbols": [...], "unresolved": [...]}``; distributions sorted by name, symbols by ``name``,
        so the same installation always gives the same bytes.

    Raises:
        CatalogError: a distribution is missing, declares no package, or a
            top-level package fails to import. A name that cannot be resolved
            (and a submodule that fails to import) is listed under
            ``"unresolved"`` instead, a key present only when there is one.
            A submodule its package's attribute shadows is noted under
            ``"shadowed"`` (the submodule, whether the package exports the
            attribute, the attribute value's type), also only when there is one.
    """
    names = sorted(set(distributions))
    if not names:
        raise CatalogError("no distribution given; name at least one with --distribution")
    dists = sorted((_distribution(name) for name in names), key=lambda d: d["name"].lower())
    packages = sorted({package for dist in dists for package in dist["packages"]})
    walker = _Walker(packages)
    walker.import_all()
    walker.collect()
    symbols = [walker.entries[name] for name in sorted(walker.entries)]
    catalog: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "distributions": dists,
        "symbols": symbols,
    }
    unresolved = {k: v for k, v in walker.unresolved.items() if k not in walker.entries}
    if unresolved:
        # Only present when needed, so a catalog without such names keeps its digest.
        catalog["unresolved"] = [
            {"name": name, "reason": reason} for name, reason in sorted(unresolved.items())
        ]
    if walker.shadowed:
        catalog["shadowed"] = [walker.shadowed[name] for name in sorted(walker.shadowed)]
    return catalog


def catalog_digest(catalog: Mapping[str, Any]) -> str:
    """``sha256:`` digest of the catalog's canonical JSON (the digest archives.json records)."""
    return sha256_json(catalog)


def _display(entry: Mapping[str, Any], prefix: str) -> str:
    name = entry["name"][len(prefix) :] if entry["name"].startswith(prefix) else entry["name"]
    kind = entry["kind"]
    if kind in {"class", "function", "method", "classmethod", "staticmethod"}:
        signature = entry["signature"] or "(...)"
        return f"`{name}{signature}`"
    if entry["type"]:
        separator = " = " if kind == "type" else ": "
        return f"`{name}{separator}{entry['type']}`"
    return f"`{name}`"


def render_markdown(catalog: Mapping[str, Any]) -> str:
    """Render the catalog as a Markdown guide grouped by module (deterministic)."""
    symbols: list[Mapping[str, Any]] = list(catalog["symbols"])
    by_name = {entry["name"]: entry for entry in symbols}
    modules = [entry for entry in symbols if entry["kind"] == "module" and not entry["reexportOf"]]
    lines = ["# API reference", ""]
    dists = ", ".join(f"{d['name']} {d['version']}" for d in catalog["distributions"])
    lines += [
        f"Generated from the installed distributions: {dists}.",
        "Only the names listed here are supported; anything else is not part of the API.",
        "",
    ]
    for module in modules:
        mod_name = module["name"]
        prefix = mod_name + "."
        lines += [f"## `{mod_name}`", ""]
        if module["doc"]:
            lines += [module["doc"], ""]
        own = [
            entry
            for entry in symbols
            if entry["name"].startswith(prefix)
            and "." not in entry["name"][len(prefix) :]
            and entry["kind"] != "module"
        ]
        for entry in own:
            if entry["reexportOf"]:
                continue
            label = entry["kind"]
            text = f"- {label} {_display(entry, prefix)}"
            if entry["doc"]:
                text += f" — {entry['doc']}"
            lines.append(text)
            if entry["kind"] == "class":
                if entry["bases"]:
                    lines.append(f"  - bases: {', '.join(f'`{b}`' for b in entry['bases'])}")
                member_prefix = entry["name"] + "."
                for member in symbols:
                    rest = member["name"][len(member_prefix) :]
                    if (
                        not member["name"].startswith(member_prefix)
                        or "." in rest
                        or member["inherited"]
                    ):
                        continue
                    text = f"  - {member['kind']} {_display(member, member_prefix)}"
                    if member["doc"]:
                        text += f" — {member['doc']}"
                    lines.append(text)
        reexports = [e for e in own if e["reexportOf"]]
        submodules = [
            e["name"]
            for e in modules
            if e["name"].startswith(prefix) and "." not in e["name"][len(prefix) :]
        ]
        if reexports:
            lines += ["", "Also importable from here:", ""]
            for entry in reexports:
                target = entry["reexportOf"]
                where = " (defined outside the library)" if target not in by_name else ""
                lines.append(f"- `{entry['name'][len(prefix) :]}` = `{target}`{where}")
        if submodules:
            lines += ["", "Submodules: " + ", ".join(f"`{s}`" for s in submodules)]
        for item in catalog.get("shadowed", ()):
            if item["name"].rpartition(".")[0] == mod_name:
                key = item["name"].rpartition(".")[2]
                what = "exported" if item["exported"] else "not exported"
                lines += [
                    "",
                    f"`{key}` here is a `{item['type']}` ({what}), not the submodule: "
                    f"import that by its path (`import {item['name']}`).",
                ]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def write_catalog(catalog: Mapping[str, Any], output_dir: Path) -> dict[str, str]:
    """Write ``api-catalog.json`` (canonical JSON) and ``API.md`` into *output_dir*.

    Returns ``{"catalog": path, "guide": path, "digest": digest}``.
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    catalog_path = output_dir / CATALOG_FILE
    guide_path = output_dir / GUIDE_FILE
    catalog_path.write_bytes(canonical_json(catalog) + b"\n")
    guide_path.write_text(render_markdown(catalog), encoding="utf-8")
    return {
        "catalog": str(catalog_path),
        "guide": str(guide_path),
        "digest": catalog_digest(catalog),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: generate the catalog and the guide; exit 0, or 1 with a message."""
    parser = argparse.ArgumentParser(
        prog="python3 -m agent_eval.consumer.catalog",
        description="Generate the API catalog (JSON) and guide (Markdown) of installed "
        "distributions.",
    )
    parser.add_argument(
        "--distribution",
        action="append",
        required=True,
        help="installed distribution to catalogue (repeatable)",
    )
    parser.add_argument("--output-dir", type=Path, required=True, help="where to write both files")
    args = parser.parse_args(argv)
    try:
        result = write_catalog(build_catalog(args.distribution), args.output_dir)
    except (CatalogError, OSError) as exc:
        print(f"catalog: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
