"""The static rules behind the analysis, checked without running the type checker.

Rule: a library reference is resolved from the source alone — through import
aliases, attribute chains, local aliases, instances made by a library
constructor or a function whose catalogued return type is a library class, and
parameters annotated with one — and a name shadowed by a local binding is not a
library reference. Only calls, constructions, arguments, decorators and
callables kept in attributes are value uses. The contract's exports are its
``__all__`` or its public functions, classes and annotated variables, and the
generated check module is valid Python that names no solution internals.
The stdlib-only analysis agrees with the host models on shared rules.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from typing import Any

import pytest

from agent_eval.models.analysis import MAX_DIAGNOSTIC_CHARS as MODEL_MAX_CHARS
from agent_eval.models.analysis import Analysis, DiagnosticCategory
from agent_eval.models.task import TaskSpec
from agent_eval.suite.contract import build_check_module, load_contract, readable
from agent_eval.verification.analysis import allows_import, analyse_solution
from agent_eval.verification.analysis.references import Occurrence, analyse_module
from agent_eval.verification.analysis.rules import CATEGORY_ORDER, MAX_DIAGNOSTIC_CHARS
from agent_eval.verification.analysis.symbols import SymbolIndex
from agent_eval.verification.analysis.typecheck import blank_checker_comments


def entry(name: str, kind: str, *, reexport: str | None = None, returns: str | None = None) -> Any:
    return {
        "name": name,
        "kind": kind,
        "module": name.rsplit(".", 1)[0],
        "signature": None,
        "type": None,
        "doc": "",
        "reexportOf": reexport,
        "returns": returns,
        "inherited": False,
        "bases": [],
    }


CATALOG: dict[str, Any] = {
    "schemaVersion": 1,
    "distributions": [{"name": "kit", "version": "1", "packages": ["kit"]}],
    "symbols": sorted(
        [
            entry("kit", "module"),
            entry("kit.Validator", "class", reexport="kit.core.Validator"),
            entry("kit.make", "function", reexport="kit.core.make"),
            entry("kit.core", "module"),
            entry("kit.core.Validator", "class"),
            entry("kit.core.Validator.check", "method", returns="kit.core.Result"),
            entry("kit.core.Validator.result", "property", returns="kit.core.Result"),
            entry("kit.core.Result", "class"),
            entry("kit.core.Result.ok", "attribute"),
            entry("kit.core.make", "function", returns="kit.core.Validator"),
            entry("kit.core.trace", "function"),
            entry("kit.core.Error", "class"),
            entry("kit.core.Error.code", "attribute"),
            entry("kit.core.Lazy", "class"),
            entry("kit.core.Lazy.__getattr__", "method"),
            entry("kit.json", "module", reexport="json"),
        ],
        key=lambda e: e["name"],
    ),
}
INDEX = SymbolIndex(CATALOG)


def occurrences(source: str) -> list[Occurrence]:
    tree = ast.parse(source)
    return analyse_module(tree, index=INDEX, path="solution.py", module="solution").occurrences


def unsupported(source: str) -> list[str]:
    return sorted({o.symbol for o in occurrences(source) if not o.supported})


def contexts(source: str, symbol: str) -> set[str]:
    return {o.context for o in occurrences(source) if o.canonical == symbol}


# --------------------------------------------------------------------------- references


def test_attribute_chains_resolve_through_import_aliases() -> None:
    source = "import kit.core as c\nimport kit\nc.nope\nkit.core.also_nope()\nkit.core.make\n"
    assert unsupported(source) == ["kit.core.also_nope", "kit.core.nope"]


def test_members_resolve_on_instances_made_by_constructors_and_typed_factories() -> None:
    source = (
        "from kit import Validator, make\n"
        "a = Validator()\na.chekc()\n"
        "b = make()\nb.check().okay\nb.result.ok\n"
        "Validator().missing\n"
    )
    assert unsupported(source) == [
        "kit.core.Result.okay",
        "kit.core.Validator.chekc",
        "kit.core.Validator.missing",
    ]


def test_members_resolve_on_annotated_parameters_and_variables() -> None:
    source = (
        "import kit\n"
        "def f(v: kit.Validator, w: 'kit.Validator | None') -> None:\n"
        "    v.nope()\n"
        "    x: kit.core.Result = v.check()\n"
        "    x.nah\n"
    )
    assert unsupported(source) == ["kit.core.Result.nah", "kit.core.Validator.nope"]


def test_a_name_shadowed_by_a_local_binding_is_not_a_library_reference() -> None:
    source = (
        "from kit import Validator\n"
        "def f(Validator: object) -> None:\n    Validator.nope\n"
        "class Mine(Validator):\n    pass\n"
        "Mine().anything\n"
        "Validator = object\nValidator.whatever\n"
    )
    assert unsupported(source) == []


def test_a_caught_library_exception_is_an_instance_of_its_class() -> None:
    source = (
        "from kit.core import Error\ntry:\n    pass\nexcept Error as e:\n    e.code\n    e.cdoe\n"
    )
    assert unsupported(source) == ["kit.core.Error.cdoe"]


def test_a_class_with_getattr_and_an_outside_module_accept_any_attribute() -> None:
    source = "from kit.core import Lazy\nimport kit\nLazy().anything\nkit.json.dumps\n"
    assert unsupported(source) == []


def test_dunder_attributes_are_never_unsupported() -> None:
    assert unsupported("import kit\nkit.__name__\nkit.Validator().__class__\n") == []


def test_unknown_modules_and_names_are_reported_by_their_first_missing_part() -> None:
    source = (
        "import kit.gone.deeper\nfrom kit.gone import x\nfrom kit import absent as a\n"
        "a.b.c()\nimport kit.core.make\n"
    )
    assert unsupported(source) == ["kit.absent", "kit.core.make", "kit.gone"]


def test_star_imports_bind_the_modules_public_names() -> None:
    assert unsupported("from kit.core import *\nValidator().nope\nmake()\n") == [
        "kit.core.Validator.nope"
    ]


def test_literal_dynamic_imports_are_imports() -> None:
    tree = ast.parse("import importlib\nimportlib.import_module('requests')\n__import__('kit.x')\n")
    facts = analyse_module(tree, index=INDEX, path="s.py", module="s")
    assert [i.module for i in facts.imports] == ["importlib", "requests", "kit.x"]
    assert [o.symbol for o in facts.occurrences if not o.supported] == ["kit.x"]


def test_module_level_definitions_include_guarded_and_imported_names() -> None:
    source = (
        "import kit\nfrom kit import make as build\nX = 1\n"
        "if kit:\n    def f() -> None: ...\n"
        "try:\n    class C: ...\nexcept ImportError:\n    pass\n"
        "def outer() -> None:\n    inner = 1\n"
    )
    facts = analyse_module(ast.parse(source), index=INDEX, path="s.py", module="s")
    assert set(facts.definitions) == {"kit", "build", "X", "f", "C", "outer"}


# --------------------------------------------------------------------------- value uses


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from kit import make\nmake()\n", {"import", "call"}),
        ("from kit import make\ncheck = make\ncheck()\n", {"import", "alias", "call"}),
        ("from kit import make\n@make\ndef f() -> None: ...\n", {"import", "decorator"}),
        ("from kit import make\nsorted([], key=make)\n", {"import", "argument"}),
        ("from kit import make\nlist(map(make, []))\n", {"import", "argument"}),
        ("from kit import make\nprint([make])\n", {"import", "argument"}),
        (
            "from kit import make\nclass A:\n    def __init__(self) -> None:\n"
            "        self.f = make\n",
            {"import", "assignment"},
        ),
        ("from kit import make\nf = lambda: make()\n", {"import", "call"}),
    ],
)
def test_value_uses_are_recognised(source: str, expected: set[str]) -> None:
    assert contexts(source, "kit.core.make") == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from kit import make\n", {"import"}),
        ("from kit import make\nmake\n", {"import", "load"}),
        ("from kit import make\nunused = make\n", {"import", "alias"}),
        ("from kit import make\ndef f(x: make) -> make: ...\n", {"import", "annotation"}),
        ("from kit import make\ndef f(x: 'make') -> None: ...\n", {"import", "annotation"}),
        ("from kit import make\nx: 'list[make]' = []\n", {"import", "annotation"}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kit import make\n"
            "    make()\n",
            {"import", "type-only"},
        ),
        (
            "from typing import cast\nfrom kit import make\ncast(make, 1)\n",
            {"import", "annotation"},
        ),
    ],
)
def test_imports_annotations_and_type_only_uses_are_not_value_uses(
    source: str, expected: set[str]
) -> None:
    assert contexts(source, "kit.core.make") == expected


def test_a_method_called_on_a_library_instance_is_a_value_use_of_that_method() -> None:
    source = "from kit import make\nv = make()\nv.check()\n"
    assert contexts(source, "kit.core.Validator.check") == {"call"}


# --------------------------------------------------------------------------- contract


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_contract_exports_are_public_functions_classes_and_annotated_variables(
    tmp_path: Path,
) -> None:
    contract = load_contract(
        write(
            tmp_path,
            "c.pyi",
            "from typing import TypeVar, TypeAlias\nT = TypeVar('T')\nAlias: TypeAlias = int\n"
            "LIMIT: int\ndef f() -> None: ...\nclass C: ...\ndef _helper() -> None: ...\n",
        )
    )
    assert contract.exports == ("LIMIT", "f", "C")


def test_a_contracts_all_lists_its_exports_exactly(tmp_path: Path) -> None:
    contract = load_contract(
        write(tmp_path, "c.pyi", "__all__ = ['g']\ndef f() -> None: ...\ndef g() -> int: ...\n")
    )
    assert contract.exports == ("g",)


CONTRACT = """\
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar, overload

T = TypeVar("T")

@overload
def pick(x: int) -> int: ...
@overload
def pick(x: str, /, *, strict: bool = ...) -> str: ...

@dataclass(frozen=True)
class Point:
    x: int
    y: int = 0

class Color(Enum):
    RED = 1

class Box(Generic[T]):
    def __init__(self, item: T) -> None: ...
    def get(self) -> T: ...

class Failure(Exception):
    code: int

class Missing: ...
"""


def test_the_check_module_is_valid_python_covering_every_defined_export(tmp_path: Path) -> None:
    contract = load_contract(write(tmp_path, "c.pyi", CONTRACT))
    defined = {"pick", "Point", "Color", "Box", "Failure"}
    check = build_check_module(contract, "pkg.solution", defined)
    ast.parse(check.source)
    source = check.source
    assert "import pkg.solution as _agent_eval_solution" in source
    assert "from pkg.solution import Box" in source
    assert "from typing import Any as Missing" in source
    assert source.count("@overload") == 2
    assert "def __call__(self, /, x: int) -> int" in source
    assert "def __call__(self, x: str, /, *, strict: bool=...) -> str" in source
    assert "def __call__(self, /, x: int, y: int=...) -> Point" in source
    assert "_agent_eval_attr_Color_RED = Color.RED" in source
    assert "class _AgentEvalInstance_Box(_AgentEvalProtocol[T])" in source
    assert "def __call__(self, /, item: T) -> Box[_AgentEvalAny]" in source
    assert "_agent_eval_base_Failure_0: type[Exception] = Failure" in source
    assert set(check.line_exports.values()) == defined | {"Missing"}


def test_generated_names_are_replaced_in_messages() -> None:
    message = (
        'Incompatible types (expression has type "Callable[[int], int]", variable has type '
        '"_AgentEvalExport_pick") for _agent_eval_export_pick = _agent_eval_solution.pick'
    )
    text = readable(message, "pick")
    assert "_agent_eval" not in text.lower().replace("contract", "")
    assert "contract signature of pick" in text


# --------------------------------------------------------------------------- checker comments


def test_type_ignore_and_mypy_comments_are_blanked_keeping_lines_and_columns() -> None:
    source = (
        "x: int = 's'  # type: ignore[assignment]\n# mypy: ignore-errors\ny = '# type: ignore'\n"
    )
    blanked = blank_checker_comments(source)
    assert "ignore" not in blanked.splitlines()[0]
    assert blanked.splitlines()[1].strip() == ""
    assert blanked.splitlines()[2] == "y = '# type: ignore'"
    assert [len(line) for line in blanked.splitlines()] == [len(x) for x in source.splitlines()]


# --------------------------------------------------------------------------- bounds


def test_diagnostics_are_bounded_in_size_and_number(tmp_path: Path) -> None:
    many = "\n".join(f"kit.missing_{n}" for n in range(60))
    (tmp_path / "solution").mkdir()
    (tmp_path / "solution" / "solution.py").write_text("def broken(:\n", encoding="utf-8")
    (tmp_path / "solution" / "more.py").write_text(f"import kit\n{many}\n", encoding="utf-8")
    long_symbols = [f"kit.{'x' * 190}{n}" for n in range(12)]
    task = {
        "schemaVersion": 1,
        "id": "core-validation",
        "title": "Bounds",
        "allowedOutputPaths": ["solution.py", "more.py"],
        "allowedImports": ["kit/*"],
        "requiredPeers": [],
        "assertionIds": ["a"],
        "safetyAssertionIds": [],
        "seedReferences": [],
        "requiredIntegration": [{"symbols": long_symbols}],
    }
    TaskSpec.model_validate(task)
    result = analyse_solution(
        task, tmp_path / "solution", CATALOG, scratch_dir=tmp_path / "scratch"
    )
    Analysis.model_validate(result)
    unsupported_diags = [d for d in result["diagnostics"] if d["category"] == "unsupported-api"]
    assert len(unsupported_diags) == 51
    assert unsupported_diags[-1]["message"] == "10 more unsupported-api findings not shown"
    assert result["unsupportedApiCount"] == 60
    (integration,) = [d for d in result["diagnostics"] if d["category"] == "integration"]
    assert len(integration["message"]) == MAX_DIAGNOSTIC_CHARS
    assert not (tmp_path / "scratch" / "src").exists()  # a syntax error: mypy never ran


# --------------------------------------------------------------------------- parity with the host


def test_the_diagnostic_bound_equals_the_models() -> None:
    assert MAX_DIAGNOSTIC_CHARS == MODEL_MAX_CHARS


def test_every_category_the_analysis_emits_is_a_model_category() -> None:
    assert set(CATEGORY_ORDER) <= set(typing.get_args(DiagnosticCategory))


@pytest.mark.parametrize(
    "module", ["kit", "kit.core", "kitten", "other", "other.sub", "other.sub.deep", "ki"]
)
def test_allowed_imports_follow_the_task_models_rule(module: str) -> None:
    allowed = ["kit/*", "other.sub"]
    spec = TaskSpec.model_validate(
        {
            "schemaVersion": 1,
            "id": "t",
            "title": "t",
            "allowedOutputPaths": ["s.py"],
            "allowedImports": allowed,
            "requiredPeers": [],
            "assertionIds": ["a"],
            "safetyAssertionIds": [],
            "seedReferences": [],
            "requiredIntegration": [],
        }
    )
    assert allows_import(allowed, module) == spec.allows_import(module)
