"""A solution in the library's documented spelling gets no finding, whatever the re-export route.

Rule: a name reached through ``from x import *`` (with or without ``__all__``,
along a chain), an explicit alias or a module ``__getattr__`` is supported, and
a required integration called through a re-exported spelling counts; a name
neither the import system nor mypy accepts is still ``hallucinated-api``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_eval.models.analysis import Analysis
from agent_eval.verification.analysis import analyse_solution
from tests.paths import DATA
from tests.verification.analysis.test_analysis import generate_catalog, make_task, write_files

STARKIT_SRC = DATA / "analysis" / "starkit" / "src"

DOCUMENTED = """\
import starkit
from starkit import Engine, __version__
from starkit.converters import to_bool
from starkit.validators import in_, instance_of


def check(value: object) -> bool:
    engine = Engine()
    engine.run(2)
    versioned = bool(__version__ + starkit.__author__)
    return to_bool(value) and in_([1]) and instance_of(int) and versioned
"""

HALLUCINATED = """\
from starkit.validators import not_listed
from starkit.converters import path


def check(value: object) -> bool:
    not_listed()
    return path is not None
"""


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return generate_catalog(
        tmp_path_factory.mktemp("catalog"), "starkit", "1.0", "starkit", STARKIT_SRC
    )


def analyse(tmp_path: Path, catalog: dict[str, Any], source: str) -> dict[str, Any]:
    task = make_task(
        allowedImports=["starkit/*"],
        requiredIntegration=[
            {"symbols": ["starkit.to_bool"]},
            {"symbols": ["starkit.validators.in_"]},
            {"symbols": ["starkit.Engine.run"]},
        ],
    )
    result = analyse_solution(
        task,
        write_files(tmp_path / "solution", {"solution.py": source}),
        catalog,
        scratch_dir=tmp_path / "scratch",
        search_path=[STARKIT_SRC],
    )
    Analysis.model_validate(result)
    return result


def test_the_documented_spellings_get_no_finding(tmp_path: Path, catalog: dict[str, Any]) -> None:
    result = analyse(tmp_path, catalog, DOCUMENTED)
    assert result["diagnostics"] == []
    assert result["hallucinatedApi"] == []


def test_names_the_module_does_not_export_are_still_hallucinated(
    tmp_path: Path, catalog: dict[str, Any]
) -> None:
    result = analyse(tmp_path, catalog, HALLUCINATED)
    flagged = {(d["category"], d["line"]) for d in result["diagnostics"]}
    assert {("unsupported-api", 1), ("unsupported-api", 2)} <= flagged
    assert result["hallucinatedApi"] == [
        "starkit.converters.path",
        "starkit.validators.not_listed",
    ]


SHADOWED = """\
import starkit.release
import starkit.release as aliased
from starkit import release
from starkit import stamp
from starkit.release import release as by_path


def check() -> str:
    return stamp + by_path + starkit.release + str(aliased)
"""


def test_a_shadowed_submodule_imports_by_its_path_and_its_unexported_attribute_is_hallucinated(
    tmp_path: Path, catalog: dict[str, Any]
) -> None:
    # starkit binds ``release`` (not exported) and ``stamp`` (in __all__) to str,
    # shadowing the submodules. ``import starkit.release as aliased`` binds the str
    # too at run time, though mypy takes it for the module: flagged from the catalog.
    result = analyse(tmp_path, catalog, SHADOWED)
    flagged = sorted(d["line"] for d in result["diagnostics"] if d["category"] == "unsupported-api")
    assert flagged == [2, 3, 9], result["diagnostics"]
    assert result["hallucinatedApi"] == ["starkit.release"]
