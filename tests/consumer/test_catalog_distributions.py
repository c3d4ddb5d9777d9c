"""Over every distribution of this virtualenv, the catalog agrees with the import system and mypy.

Property: for each installed distribution, built in a fresh interpreter, every
module-level name the catalog lists, and every name its modules' ``__all__``
lists, imports with ``importlib.import_module`` + ``getattr`` (a name the
catalog notes as unresolved is exempt: the runtime refuses it too, e.g.
``attrs.__author__``, which attrs' ``__getattr__`` no longer serves, or
``pydantic.v1.typing`` names defined only under ``TYPE_CHECKING``); and a
sample of the listed public names of packages marked ``py.typed`` (those mypy
reads), imported by a probe file, passes mypy with ``--no-implicit-reexport``.
No disagreement is allowed.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow


# mypy's verdict differs from the catalog's on these names (checked one by one):
KNOWN = {
    # Compiled modules whose shipped stubs lack what the runtime has.
    'Module "ast_serialize" has no attribute "ast_serialize"',
    'Module "rpds" has no attribute "Stack"',
    'Module "rpds" has no attribute "rpds"',
    # Star-imported from _hypothesis_pytestplugin, a top-level module outside the py.typed
    # package, which mypy does not read (the probe's sample decides which names show).
    'Module "hypothesis.extra.pytestplugin" has no attribute ',
    # Classes made at run time by exec of a template, which no checker reads.
    'Module "numpy.distutils.tests.test_ccompiler_opt" has no attribute "TestCCompilerOpt_',
}


def read_from_a_stub(error: str) -> bool:
    """Whether mypy's error is about a module it reads from a shipped ``.pyi`` stub.

    The catalog lists what the runtime serves; where a library ships a stub beside
    its source (numpy's ``matlib.pyi``, ``f2py/*.pyi``), mypy reads the stub, and a
    stub that lists less than the runtime is the library's own disagreement.
    """
    match = re.search(r'Module "([\w.]+)"', error)
    if match is None:
        return False
    # Found on disk from the top-level package: importing the module here would run it.
    top, *rest = match.group(1).split(".")
    spec = importlib.util.find_spec(top)
    for base in (spec.submodule_search_locations or []) if spec is not None else []:
        where = Path(base, *rest)
        if where.with_suffix(".pyi").is_file() or (where / "__init__.pyi").is_file():
            return True
    return False


def installed() -> list[str]:
    return sorted({str(d.metadata["Name"]) for d in importlib.metadata.distributions()})


def agreement(distribution: str) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-m", "tests.consumer.catalog_agreement", distribution],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def results() -> list[dict[str, Any]]:
    return [agreement(name) for name in installed()]


def test_every_listed_and_every_all_name_imports(results: list[dict[str, Any]]) -> None:
    summary = {r["distribution"]: (r["names"], len(r["unresolved"])) for r in results}
    print("catalog agreement (names checked, unresolved):", json.dumps(summary, sort_keys=True))
    for result in results:
        if result["error"] is not None:
            # Stub-only distributions (types-docker...) install no importable package.
            assert "no importable top-level package" in result["error"], result
            assert result["distribution"].startswith("types-"), result
            continue
        assert result["disagreements"] == [], result["distribution"]
    assert sum(r["names"] for r in results) > 5000


def test_a_probe_importing_listed_names_passes_mypy_without_implicit_reexport(
    results: list[dict[str, Any]], tmp_path: Path
) -> None:
    lines: list[str] = []
    for result in results:
        # The probe holds names of py.typed packages' Python modules: what mypy reads.
        for module, name in result["probe"]:
            lines.append(f"from {module} import {name} as _n{len(lines)}")
    probe = tmp_path / "probe.py"
    probe.write_text("\n".join(lines) + "\n", encoding="utf-8")
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-implicit-reexport",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(probe),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error: " in line]
    stubbed = [e for e in errors if read_from_a_stub(e)]
    unknown = [e for e in errors if not any(k in e for k in KNOWN) and e not in stubbed]
    print(
        f"mypy probe: {len(lines)} names, {len(errors)} known disagreements"
        f" ({len(stubbed)} where mypy reads the library's own stub)"
    )
    assert unknown == [], "\n".join(unknown)
    assert checked.returncode == 0 or errors, checked.stdout[-3000:]
