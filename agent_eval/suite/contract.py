"""The task contract (a ``.pyi`` stub) and the module that type-checks a solution against it.

The contract declares the solution's required exports: its ``__all__`` when it
has one, otherwise every public module-level function, class and annotated
variable. Everything else in it (imports, type aliases, TypeVars, private
helpers) only supports those declarations.

Compatibility is decided by mypy, on a generated *check module* that imports
the solution and assigns each export to a variable typed by the contract:

* a function ``f`` becomes a callback protocol whose ``__call__`` has ``f``'s
  exact parameters (names, kinds, defaults, overloads) and return type, and
  ``_: Protocol_f = solution.f`` must type-check;
* a class ``C`` is imported from the solution, so the contract's own signatures
  that mention ``C`` mean the solution's class; then the constructor (its
  ``__init__``, or its fields for a ``@dataclass``) is checked the same way,
  every method, property and annotated attribute through an instance protocol
  (attributes are read-only properties, so a frozen dataclass satisfies them),
  every declared base through ``type[Base]``, and every plain class attribute
  (enum members) by access;
* an annotated variable ``X: T`` is assigned to a variable of type ``T``.

mypy's findings in the check module are mapped back to the export they concern.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval.errors import AgentEvalError
from agent_eval.syntax import parse_expression, parse_module

__all__ = [
    "CHECK_MODULE",
    "Contract",
    "ContractError",
    "build_check_module",
    "load_contract",
    "readable",
]

CHECK_MODULE = "_agent_eval_contract_check"
_SOLUTION = "_agent_eval_solution"
_PROTOCOL = "_AgentEvalProtocol"
_ANY = "_AgentEvalAny"
_SKIPPED_BASES = {"object", "Protocol", "Generic", "TypedDict", "NamedTuple"}
_STRUCTURAL_BASES = {"Protocol", "TypedDict"}
_GENERATED = re.compile(
    r"_AgentEval(Export|Instance|Constructor|Contract)_(\w+)|_agent_eval_\w+|"
    + re.escape(_SOLUTION)
    + r"\.?"
)


class ContractError(AgentEvalError):
    """The contract stub cannot be read or parsed (a task-authoring error)."""


@dataclass(frozen=True)
class Contract:
    """A parsed contract and the names it requires."""

    tree: ast.Module
    exports: tuple[str, ...]


@dataclass
class CheckModule:
    """Generated source, and which export each of its lines checks."""

    source: str
    line_exports: dict[int, str] = field(default_factory=dict)


def load_contract(path: Path) -> Contract:
    """Parse the contract stub and list its required exports.

    Raises:
        ContractError: the file cannot be read, does not parse, or its
            ``__all__`` is not a literal list of strings.
    """
    try:
        text = path.read_text(encoding="utf-8")
        tree = parse_module(text, filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ContractError(f"{path}: cannot read the contract stub: {exc}") from exc
    declared: list[str] | None = None
    public: list[str] = []
    for stmt in tree.body:
        targets = _assigned(stmt)
        if "__all__" in targets:
            value = getattr(stmt, "value", None)
            try:
                literal = ast.literal_eval(value) if value is not None else None
            except ValueError:
                literal = None
            if not isinstance(literal, list | tuple) or not all(
                isinstance(n, str) for n in literal
            ):
                raise ContractError(f"{path}: __all__ must be a literal list of strings")
            declared = list(literal)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            public.append(stmt.name)
        elif (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and not _is_type_alias(stmt)
        ):
            public.append(stmt.target.id)
    names = declared if declared is not None else [n for n in public if not n.startswith("_")]
    return Contract(tree=tree, exports=tuple(dict.fromkeys(names)))


def _assigned(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    return []


def _is_type_alias(stmt: ast.AnnAssign) -> bool:
    annotation = stmt.annotation
    return (isinstance(annotation, ast.Name) and annotation.id == "TypeAlias") or (
        isinstance(annotation, ast.Attribute) and annotation.attr == "TypeAlias"
    )


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _decorated_by(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _name_of(target) == name:
            return True
    return False


def _stub_body() -> list[ast.stmt]:
    return [ast.Expr(ast.Constant(...))]


def _as_call(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The contract function as a protocol's ``__call__`` (a ``self`` added first)."""
    method = copy.deepcopy(func)
    method.name = "__call__"
    method.decorator_list = [d for d in method.decorator_list if _name_of(d) == "overload"]
    method.body = _stub_body()
    self_arg = ast.arg(arg="self")
    if method.args.posonlyargs:
        method.args.posonlyargs.insert(0, self_arg)
    else:
        method.args.posonlyargs = [self_arg]
    return method


def _without_self(func: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.arguments:
    arguments = copy.deepcopy(func.args)
    if arguments.posonlyargs:
        arguments.posonlyargs = arguments.posonlyargs[1:]
    elif arguments.args:
        arguments.args = arguments.args[1:]
        if len(arguments.defaults) > len(arguments.args):
            arguments.defaults = arguments.defaults[1:]
    return arguments


def _strip_classvar(annotation: ast.expr) -> ast.expr:
    if isinstance(annotation, ast.Subscript) and _name_of(annotation.value) in {
        "ClassVar",
        "Final",
    }:
        return annotation.slice
    return annotation


def _type_params(node: ast.ClassDef) -> list[ast.expr]:
    for base in node.bases:
        if isinstance(base, ast.Subscript) and _name_of(base.value) in {"Generic", "Protocol"}:
            params = base.slice
            return list(params.elts) if isinstance(params, ast.Tuple) else [params]
    return []


def _parameterised(name: str, count: int) -> str:
    if not count:
        return name
    return f"{name}[{', '.join([_ANY] * count)}]"


class _Builder:
    def __init__(self, contract: Contract, solution_module: str, defined: set[str]) -> None:
        self.contract = contract
        self.solution_module = solution_module
        self.defined = defined
        self.lines: list[str] = []
        self.line_exports: dict[int, str] = {}

    def emit(self, code: str, export: str | None = None) -> None:
        for line in code.splitlines():
            self.lines.append(line)
            if export is not None:
                self.line_exports[len(self.lines)] = export

    def build(self) -> CheckModule:
        contract = self.contract
        exports = set(contract.exports)
        body = contract.tree.body
        classes = {s.name: s for s in body if isinstance(s, ast.ClassDef) and s.name in exports}
        self.emit('"""Generated: the solution\'s exports checked against the task contract."""')
        self.emit("from __future__ import annotations")
        self.emit(f"from typing import Any as {_ANY}, Protocol as {_PROTOCOL}")
        self.emit(f"import {self.solution_module} as {_SOLUTION}")
        for stmt in body:
            if isinstance(stmt, ast.Import | ast.ImportFrom) and not (
                isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
            ):
                self.emit(ast.unparse(stmt))
        for name in sorted(classes):
            if name in self.defined:
                self.emit(f"from {self.solution_module} import {name}", name)
            else:
                # Reported as missing; stand in Any so other exports still check cleanly.
                self.emit(f"from typing import Any as {name}", name)
        for stmt in body:
            if self._is_helper(stmt, exports):
                self.emit(ast.unparse(stmt))
        functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        variables: dict[str, ast.AnnAssign] = {}
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name in exports:
                functions.setdefault(stmt.name, []).append(stmt)
            elif (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id in exports
            ):
                variables[stmt.target.id] = stmt
        for name in contract.exports:
            if name not in self.defined:
                continue
            if name in functions:
                self._function(name, functions[name])
            elif name in classes:
                self._class(classes[name])
            elif name in variables:
                annotation = ast.unparse(variables[name].annotation)
                self.emit(f"_agent_eval_export_{name}: {annotation} = {_SOLUTION}.{name}", name)
            else:
                self.emit(f"_agent_eval_export_{name} = {_SOLUTION}.{name}", name)
        return CheckModule("\n".join(self.lines) + "\n", self.line_exports)

    @staticmethod
    def _is_helper(stmt: ast.stmt, exports: set[str]) -> bool:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            return False
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return stmt.name not in exports
        names = _assigned(stmt)
        if "__all__" in names:
            return False
        if isinstance(stmt, ast.Expr):
            return False
        return not (set(names) & exports)

    def _function(self, name: str, defs: Sequence[ast.FunctionDef | ast.AsyncFunctionDef]) -> None:
        protocol = ast.ClassDef(
            name=f"_AgentEvalExport_{name}",
            bases=[ast.Name(_PROTOCOL)],
            keywords=[],
            body=[_as_call(d) for d in defs],
            decorator_list=[],
        )
        self.emit(ast.unparse(ast.fix_missing_locations(protocol)), name)
        self.emit(f"_agent_eval_export_{name}: _AgentEvalExport_{name} = {_SOLUTION}.{name}", name)

    def _class(self, node: ast.ClassDef) -> None:
        name = node.name
        base_names = {_name_of(b) for b in node.bases}
        params = _type_params(node)
        if base_names & _STRUCTURAL_BASES:
            shape = copy.deepcopy(node)
            shape.name = f"_AgentEvalContract_{name}"
            shape.decorator_list = []
            self.emit(ast.unparse(shape), name)
            self.emit(
                f"def _agent_eval_shape_{name}(value: {_parameterised(name, len(params))}) -> "
                f"{_parameterised(shape.name, len(params))}:\n    return value",
                name,
            )
            return
        instance_body: list[ast.stmt] = []
        init: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        fields: list[ast.AnnAssign] = []
        accessed: list[str] = []
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                if stmt.name == "__init__":
                    init = stmt
                elif stmt.name != "__new__":
                    method = copy.deepcopy(stmt)
                    method.body = _stub_body()
                    instance_body.append(method)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                is_classvar = _strip_classvar(stmt.annotation) is not stmt.annotation
                if not is_classvar:
                    fields.append(stmt)
                prop = ast.FunctionDef(
                    name=stmt.target.id,
                    args=ast.arguments(
                        posonlyargs=[],
                        args=[ast.arg(arg="self")],
                        kwonlyargs=[],
                        kw_defaults=[],
                        defaults=[],
                    ),
                    body=_stub_body(),
                    decorator_list=[ast.Name("property")],
                    returns=_strip_classvar(stmt.annotation),
                )
                instance_body.append(prop)
            elif isinstance(stmt, ast.Assign):
                accessed.extend(_assigned(stmt))
        count = len(params)
        if instance_body:
            protocol_base: ast.expr = ast.Name(_PROTOCOL)
            if params:
                protocol_base = ast.Subscript(
                    ast.Name(_PROTOCOL),
                    ast.Tuple(params) if len(params) > 1 else params[0],
                )
            protocol = ast.ClassDef(
                name=f"_AgentEvalInstance_{name}",
                bases=[protocol_base],
                keywords=[],
                body=instance_body,
                decorator_list=[],
            )
            self.emit(ast.unparse(ast.fix_missing_locations(protocol)), name)
            self.emit(
                f"def _agent_eval_instance_{name}(value: {_parameterised(name, count)}) -> "
                f"{_parameterised(protocol.name, count)}:\n    return value",
                name,
            )
        arguments: ast.arguments | None = None
        if init is not None:
            arguments = _without_self(init)
        elif _decorated_by(node, "dataclass"):
            arguments = self._dataclass_arguments(node, fields)
        if arguments is not None:
            call = ast.FunctionDef(
                name="__call__",
                args=arguments,
                body=_stub_body(),
                decorator_list=[],
                returns=parse_expression(_parameterised(name, count)),
            )
            call.args.posonlyargs.insert(0, ast.arg(arg="self"))
            protocol = ast.ClassDef(
                name=f"_AgentEvalConstructor_{name}",
                bases=[ast.Name(_PROTOCOL)],
                keywords=[],
                body=[call],
                decorator_list=[],
            )
            self.emit(ast.unparse(ast.fix_missing_locations(protocol)), name)
            self.emit(
                f"_agent_eval_constructor_{name}: _AgentEvalConstructor_{name} = {name}", name
            )
        for position, base in enumerate(node.bases):
            if _name_of(base) in _SKIPPED_BASES:
                continue
            self.emit(
                f"_agent_eval_base_{name}_{position}: type[{ast.unparse(base)}] = {name}", name
            )
        for attr in accessed:
            self.emit(f"_agent_eval_attr_{name}_{attr} = {name}.{attr}", name)

    @staticmethod
    def _dataclass_arguments(node: ast.ClassDef, fields: list[ast.AnnAssign]) -> ast.arguments:
        kw_only = any(
            isinstance(d, ast.Call)
            and any(k.arg == "kw_only" and getattr(k.value, "value", False) for k in d.keywords)
            for d in node.decorator_list
        )
        args = [
            ast.arg(arg=f.target.id, annotation=f.annotation)
            for f in fields
            if isinstance(f.target, ast.Name)
        ]
        defaults: list[ast.expr] = [ast.Constant(...) for f in fields if f.value is not None]
        if kw_only:
            return ast.arguments(
                posonlyargs=[],
                args=[],
                kwonlyargs=args,
                kw_defaults=[ast.Constant(...) if f.value is not None else None for f in fields],
                defaults=[],
            )
        return ast.arguments(
            posonlyargs=[], args=args, kwonlyargs=[], kw_defaults=[], defaults=defaults
        )


def build_check_module(contract: Contract, solution_module: str, defined: set[str]) -> CheckModule:
    """Generate the check module for *solution_module*.

    Args:
        contract: the parsed contract.
        solution_module: dotted name of the module that must provide the exports.
        defined: names the solution defines at module level; missing exports are
            reported by the caller and left out here, so each is reported once.
    """
    return _Builder(contract, solution_module, defined).build()


def readable(message: str, export: str) -> str:
    """Replace generated names in a mypy message with what they stand for."""

    def replace(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2)
        if kind == "Export":
            return f"contract signature of {name}"
        if kind == "Instance":
            return f"contract interface of {name}"
        if kind == "Constructor":
            return f"contract constructor of {name}"
        if kind == "Contract":
            return f"contract {name}"
        if match.group(0).startswith(_SOLUTION):
            return ""
        return f"contract check of {export}"

    return _GENERATED.sub(replace, message)
