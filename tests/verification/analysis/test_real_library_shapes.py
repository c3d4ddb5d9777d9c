"""Correct code against a library laid out as large real ones are gets no finding.

Rule: what the runtime and mypy both accept is supported, whatever shape the
library gives it: attributes a class assigns on ``self`` in a private module
(``httpx._exceptions``), an Enum's ``name``/``value`` and own methods (which
``dir`` hides), a named tuple's ``_asdict``/``_replace``, classic attrs fields,
attributes a standard-library base assigns (``CalledProcessError.returncode``),
a public module bound under a second name (``numpy.emath``), names served by a
``ModuleType`` subclass installed as the module (a lazy module), and, in a
module without ``__all__``, a decorated ``def`` that became an object and a name
bound inside a ``with`` block. The same shapes' missing members are still
``hallucinated-api``. A class whose ``__module__`` the library set to where it is
documented (numpy's ``set_module``) is read from the file that defines it. Every
documented use is also run, so "correct" is the
runtime's word, not ours.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agent_eval.models.analysis import Analysis
from agent_eval.verification.analysis import analyse_solution
from tests.paths import DATA
from tests.verification.analysis.test_analysis import generate_catalog, make_task, write_files

SHAPEKIT_SRC = DATA / "analysis" / "shapekit" / "src"

DOCUMENTED = """\
import subprocess

import shapekit
import shapekit.plain as plain
from shapekit import Client, CmdError, Color, Gauge, Legacy, Point, StatusError
from shapekit.lazy import Model


def show(colour: Color) -> str:
    return colour.value + colour.name + colour.describe() + colour.label


def main() -> list[object]:
    seen: list[object] = [show(Color.parse("RED")), Color.BLUE.value]
    client = Client("http://localhost")
    seen += [client.base_url, client.timeout]
    try:
        client.fetch()
    except StatusError as exc:
        seen.append(exc.code)
    point = Point(1)
    seen += [point._asdict(), point._replace(y=2), Point._make([3, 4]), Point._fields]
    legacy = Legacy(3)
    seen += [legacy.size, legacy.name]
    try:
        raise CmdError(2, ["tool"])
    except subprocess.CalledProcessError as exc:
        seen += [exc.returncode, exc.cmd, exc.output]
    seen.append(shapekit.emath.sqrt(-1.0))
    seen += [plain.hello.invoke(), plain.double(4), plain.RETRIES]
    seen.append(Model("m").predict(1))
    seen.append(Gauge(3).limit)
    return seen
"""

HALLUCINATED = """\
import shapekit
from shapekit import Client, Color, Point, StatusError


def main(exc: StatusError) -> list[object]:
    return [
        Color.RED.colour,
        Client("x").base,
        exc.status,
        Point(1)._asdict_all(),
        shapekit.emath.cbrt(8.0),
    ]
"""


NARROWED = """\
from shapekit import Argument, Notice, Option, Param, StatusError, __version__


def flag(param: Param) -> object:
    if isinstance(param, Option):
        return param.is_flag
    return param.name


def nargs(param: Param) -> int:
    if not isinstance(param, Argument):
        return 0
    return param.nargs


def either(param: Param) -> object:
    if isinstance(param, (Option, Argument)):
        return param.name
    return param.is_flag if isinstance(param, Option) else param.name


def checked(param: Param) -> bool:
    assert isinstance(param, Option)
    return param.is_flag


def matched(param: Param) -> object:
    match param:
        case Option() as option:
            return option.is_flag
        case Argument():
            return param.nargs
    return isinstance(param, Option) and param.is_flag


def caught() -> object:
    try:
        raise StatusError("refused", 503)
    except Exception as exc:
        if isinstance(exc, StatusError):
            return exc.code
        raise


def main() -> list[object]:
    params = [Option("--v", is_flag=True), Argument("path", 2), Param("p")]
    seen: list[object] = [flag(p) for p in params]
    seen += [nargs(p) for p in params] + [either(p) for p in params]
    seen += [checked(params[0]), matched(params[0]), matched(params[1]), matched(params[2])]
    notice = Notice("moved", level=2)
    seen += [caught(), notice.message, notice.level, __version__]
    return seen
"""

NARROWED_WRONGLY = """\
from shapekit import Option, Param


def main(param: Param) -> list[object]:
    seen: list[object] = []
    if isinstance(param, Option):
        seen.append(param.is_flagg)
    seen.append(param.is_flag)
    seen.append(isinstance(param, Option) or param.is_flag)
    return seen
"""


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return generate_catalog(
        tmp_path_factory.mktemp("catalog"), "shapekit", "1.0", "shapekit", SHAPEKIT_SRC
    )


def analyse(tmp_path: Path, catalog: dict[str, Any], source: str) -> tuple[dict[str, Any], Path]:
    task = make_task(allowedImports=["shapekit/*"])
    solution = write_files(tmp_path / "solution", {"solution.py": source})
    result = analyse_solution(
        task, solution, catalog, scratch_dir=tmp_path / "scratch", search_path=[SHAPEKIT_SRC]
    )
    Analysis.model_validate(result)
    return result, solution


def printed(solution: Path, expression: str) -> str:
    """What the solution prints for *expression* when run against the library ("correct"
    is the runtime's word, not ours); it must exit cleanly."""
    ran = subprocess.run(
        [sys.executable, "-c", f"import solution; print({expression})"],
        cwd=solution,
        env=dict(os.environ, PYTHONPATH=str(SHAPEKIT_SRC)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout.strip()


def test_every_documented_use_of_the_real_shapes_gets_no_finding_and_runs(
    tmp_path: Path, catalog: dict[str, Any]
) -> None:
    result, solution = analyse(tmp_path, catalog, DOCUMENTED)
    assert result["diagnostics"] == []
    assert result["hallucinatedApi"] == [] and result["unsupportedApi"] == []
    assert printed(solution, "len(solution.main())") == "20"


def test_the_same_shapes_missing_members_are_still_hallucinated(
    tmp_path: Path, catalog: dict[str, Any]
) -> None:
    result, _ = analyse(tmp_path, catalog, HALLUCINATED)
    # Class members are named on the class's public spelling; a module alias's on the module's.
    assert result["hallucinatedApi"] == [
        "shapekit.Client.base",
        "shapekit.Color.colour",
        "shapekit.Point._asdict_all",
        "shapekit.StatusError.status",
        "shapekit.lib.scimath.cbrt",
    ]
    flagged = sorted(d["line"] for d in result["diagnostics"] if d["category"] == "unsupported-api")
    assert flagged == [7, 8, 9, 10, 11], result["diagnostics"]


def test_the_catalog_lists_the_members_dir_and_public_modules_hide(
    catalog: dict[str, Any],
) -> None:
    names = {entry["name"] for entry in catalog["symbols"]}
    expected = {
        "shapekit.Color.name",
        "shapekit.Color.value",
        "shapekit.Color.describe",
        "shapekit.Color.parse",
        "shapekit.Color.label",
        "shapekit.Point._asdict",
        "shapekit.Point._replace",
        "shapekit.Legacy.size",
        "shapekit.Legacy.name",
        "shapekit.CmdError.returncode",
        "shapekit.StatusError.code",
        "shapekit.Client.base_url",
        "shapekit.lazy.Model",
        "shapekit.lazy.__getattr__",
        "shapekit.plain.hello",
        "shapekit.plain.double",
        "shapekit.plain.RETRIES",
    }
    assert expected <= names, sorted(expected - names)
    # Private names stay out, the named tuple's documented API apart.
    assert "shapekit.StatusError._raw" not in names
    assert "shapekit.plain._scale" not in names
    assert not catalog.get("unresolved"), catalog["unresolved"]


def test_code_that_narrows_with_isinstance_or_match_gets_no_finding_and_runs(
    tmp_path: Path, catalog: dict[str, Any]
) -> None:
    """A subclass's members where ``isinstance``/``match`` narrowed a name to it (in an
    ``if``, after an early return, an ``assert``, an ``and``, a conditional expression, a
    ``case``, an ``except`` clause's name), a class defined under a version check with a
    positional-only ``self``, and a module's ``__version__`` imported by name."""
    result, solution = analyse(tmp_path, catalog, NARROWED)
    assert result["diagnostics"] == []
    assert result["hallucinatedApi"] == [] and result["unsupportedApi"] == []
    assert printed(solution, "solution.main()") == (
        "[True, 'path', 'p', 0, 2, 0, '--v', 'path', 'p', True, True, 2, False, "
        "503, 'moved', 2, '1.0']"
    )


def test_a_narrowing_holds_only_where_its_test_does(
    tmp_path: Path, catalog: dict[str, Any]
) -> None:
    """A member the narrowed class lacks is still hallucinated, and the base class is
    what the name is again after the ``if`` and where an ``or`` found it not narrowed."""
    result, _ = analyse(tmp_path, catalog, NARROWED_WRONGLY)
    assert result["hallucinatedApi"] == ["shapekit.Option.is_flagg", "shapekit.Param.is_flag"]
    flagged = sorted(d["line"] for d in result["diagnostics"] if d["category"] == "unsupported-api")
    assert flagged == [7, 8, 9], result["diagnostics"]


def test_analyses_in_several_threads_never_build_two_syntax_trees_at_once(
    tmp_path: Path, catalog: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local verifier analyses from one thread per slot, and CPython 3.11 shares the
    counter that builds a parse's ast objects between threads: a correct solution then
    failed with ``SystemError: AST constructor recursion depth mismatch``."""
    real = ast.parse
    guard = threading.Lock()
    inside = most = 0

    def watched(*args: Any, **kwargs: Any) -> Any:
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        try:
            time.sleep(0.002)  # the window another thread's parse would need
            return real(*args, **kwargs)
        finally:
            with guard:
                inside -= 1

    monkeypatch.setattr(ast, "parse", watched)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda n: analyse(tmp_path / f"slot-{n}", catalog, NARROWED)[0], range(8))
        )
    assert [r["diagnostics"] for r in results] == [[]] * 8
    assert most == 1
