"""The catalog lists what ``import`` and the type checker accept, and notes what it cannot resolve.

Rule: a module without ``__all__`` exports what it defines, what it re-exports
explicitly (``import a as a``, ``from m import n as n``) and what it takes in
with ``from x import *`` (``x``'s ``__all__``, or ``x``'s exports by this same
rule, along any chain, a cycle included); a name of ``__all__`` that the
module's ``__getattr__`` serves is a member (a module, class or function as
what it is, another value as ``lazy``); a name nothing serves, or a submodule
that fails to import (whatever it raises, ``SystemExit`` included), is listed
under ``unresolved`` and the rest is still
catalogued. A name bound both by an implicit import and by a fallback assignment
or ``def`` is not exported when the import is the binding mypy reads first
(``try`` before its handlers; of an ``if``, only the branch a condition mypy
decides takes), whatever the fallback binds at run time. A
submodule whose package binds its name to another value is a module (its import
path) noted as shadowed, with that value's type and whether it is exported. Every
listed name imports at run time and passes mypy with ``--no-implicit-reexport``,
and every other runtime value fails it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_eval.consumer.catalog import catalog_digest, render_markdown
from agent_eval.models.catalog import ApiCatalog
from tests.paths import DATA, REPO

STARKIT_SRC = DATA / "analysis" / "starkit" / "src"


def starkit_env() -> dict[str, str]:
    """This environment, where a probe run here (and mypy) finds the starkit package."""
    return dict(os.environ, PYTHONPATH=str(STARKIT_SRC), MYPYPATH=str(STARKIT_SRC))


def mypy_without_reexport(probe: Path) -> subprocess.CompletedProcess[str]:
    """mypy over *probe* as the analysis holds a solution to it (no implicit re-export)."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--no-implicit-reexport", "--no-incremental", str(probe)],
        capture_output=True,
        text=True,
        env=starkit_env(),
        timeout=300,
    )


def generate(work: Path) -> dict[str, Any]:
    """Catalogue starkit as if installed, in a fresh interpreter."""
    info = work / "site" / "starkit-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: starkit\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("starkit\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, [REPO, info.parent, STARKIT_SRC])))
    command = [sys.executable, "-m", "agent_eval.consumer.catalog", "--distribution", "starkit"]
    command += ["--output-dir", str(work / "out")]
    subprocess.run(command, check=True, capture_output=True, env=env, timeout=120)
    catalog: dict[str, Any] = json.loads((work / "out" / "api-catalog.json").read_text("utf-8"))
    return catalog


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return generate(tmp_path_factory.mktemp("starkit"))


def entries(catalog: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in catalog["symbols"]}


def module_names(catalog: dict[str, Any], module: str) -> set[str]:
    prefix = module + "."
    return {
        name[len(prefix) :]
        for name in entries(catalog)
        if name.startswith(prefix) and "." not in name[len(prefix) :]
    }


def test_a_star_import_honours_the_source_modules_all(catalog: dict[str, Any]) -> None:
    # starkit.validators: ``from starkit._impl.validators import *``, whose __all__
    # leaves out ``not_listed`` and the imported ``os``.
    assert module_names(catalog, "starkit.validators") == {"in_", "instance_of"}
    assert entries(catalog)["starkit.validators.in_"]["kind"] == "function"


def test_a_chain_of_star_imports_without_all_carries_public_and_explicit_names(
    catalog: dict[str, Any],
) -> None:
    # converters <- * _impl.chain <- * _impl.conv: what conv defines, and what it
    # re-exports explicitly (``import json as json``, ``from typing import Any as Any``);
    # not ``path`` (an implicit import) nor ``_private``.
    assert module_names(catalog, "starkit.converters") == {"Any", "json", "to_bool"}
    found = entries(catalog)
    assert found["starkit.converters.json"]["reexportOf"] == "json"
    assert found["starkit.converters.to_bool"]["reexportOf"] == "starkit.to_bool"


def test_names_served_by_a_module_getattr_are_members(catalog: dict[str, Any]) -> None:
    found = entries(catalog)
    assert found["starkit.__version__"]["kind"] == "lazy"
    assert found["starkit.__author__"]["type"] == "str"
    # A class it serves is catalogued as a class, with its members.
    assert found["starkit.Engine"]["kind"] == "class"
    assert found["starkit.Engine.run"]["signature"] == "(steps: int) -> int"
    assert found["starkit.__getattr__"]["kind"] == "function"


def test_a_name_that_cannot_be_resolved_is_noted_and_the_rest_is_catalogued(
    catalog: dict[str, Any],
) -> None:
    reasons = {item["name"]: item["reason"] for item in catalog["unresolved"]}
    failing = {"starkit.broken", "starkit.missing", "starkit.optional", "starkit.needs_display"}
    assert set(reasons) == failing
    assert "RuntimeError: no metadata" in reasons["starkit.broken"]
    assert "ModuleNotFoundError" in reasons["starkit.optional"]
    assert "SystemExit: needs a display" in reasons["starkit.needs_display"]
    assert not failing & set(entries(catalog))


def test_a_class_whose_doc_slot_is_not_text_is_catalogued_without_a_doc_line(
    catalog: dict[str, Any],
) -> None:
    found = entries(catalog)
    assert found["starkit.described.Described"]["kind"] == "class"
    assert found["starkit.described.Described"]["doc"] == ""
    assert found["starkit.described.describe"]["doc"] == "The description of a new Described."


def test_submodules_and_a_cycle_of_star_imports(catalog: dict[str, Any]) -> None:
    found = entries(catalog)
    assert found["starkit.validators"]["kind"] == "module"
    # ring_a and ring_b star-import each other: ring_a ends up with both names, ring_b
    # (imported while ring_a was still empty) with its own only, as at run time.
    assert module_names(catalog, "starkit.ring_a") == {"a", "b"}
    assert module_names(catalog, "starkit.ring_b") == {"b"}


def test_a_name_whose_first_binding_is_an_implicit_import_is_not_listed(
    catalog: dict[str, Any],
) -> None:
    # starkit.fallbacks binds each name twice (fallback imports, version checks);
    # mypy keeps the first binding it reads, whatever value the run time ends with.
    assert module_names(catalog, "starkit.fallbacks") == {
        "LEGACY",  # the import is in a branch for another Python version
        "ON_WINDOWS",  # ... or for another platform
        "OP_NO_COMPRESSION",  # the import re-exports it explicitly
        "backend_version",  # the handler assigns it before ``else`` imports it
    }
    found = entries(catalog)
    assert found["starkit.fallbacks.backend_version"]["kind"] == "constant"
    assert found["starkit.fallbacks.LEGACY"]["type"] == "int"


def test_a_submodule_its_package_shadows_is_a_module_and_is_noted(
    catalog: dict[str, Any], tmp_path: Path
) -> None:
    # starkit/__init__.py: ``from starkit.release import release`` (not in __all__)
    # and ``from starkit.stamp import stamp`` (in __all__) bind the package's
    # attributes to str, as the runtime and mypy both see them.
    assert catalog["shadowed"] == [
        {"name": "starkit.release", "exported": False, "type": "str"},
        {"name": "starkit.stamp", "exported": True, "type": "str"},
    ]
    found = entries(catalog)
    assert found["starkit.release"]["kind"] == "module"
    guide = render_markdown(catalog)
    assert "`release` here is a `str` (not exported), not the submodule" in guide
    assert "(`import starkit.release`)" in guide
    assert found["starkit.release.release"]["kind"] == "constant"
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import starkit.release\n"
        "from starkit.release import release as by_path\n"
        "from starkit import stamp\n"
        "assert isinstance(starkit.release, str) and isinstance(stamp, str)\n"
        "from starkit import release as by_attribute\n",
        encoding="utf-8",
    )
    run = subprocess.run(
        [sys.executable, str(probe)], capture_output=True, text=True, env=starkit_env(), timeout=60
    )
    assert run.returncode == 0, run.stderr
    checked = mypy_without_reexport(probe)
    # Both uses of the attribute (lines 4 and 5) are refused, as not exported; the
    # submodule by its path and the exported attribute pass.
    refused = [line for line in checked.stdout.splitlines() if ": error: " in line]
    assert [line.split(":")[1] for line in refused] == ["4", "5"], checked.stdout
    assert all('not explicitly export attribute "release"' in line for line in refused)


def test_the_host_model_accepts_it_and_reproduces_its_digest(catalog: dict[str, Any]) -> None:
    model = ApiCatalog.model_validate(catalog)
    assert model.digest() == catalog_digest(catalog)


def test_a_catalog_without_unresolved_names_keeps_its_former_digest(
    catalog: dict[str, Any],
) -> None:
    # The key is written only when there is a name: a catalog without one is the
    # same document (and digest) as before the key existed.
    bare = {k: v for k, v in catalog.items() if k != "unresolved"}
    assert "unresolved" not in ApiCatalog.model_validate(bare).model_dump(exclude_defaults=True)
    assert ApiCatalog.model_validate(bare).digest() == catalog_digest(bare)


def test_every_listed_name_imports_and_passes_mypy_without_implicit_reexport(
    catalog: dict[str, Any], tmp_path: Path
) -> None:
    modules = {e["name"] for e in catalog["symbols"] if e["kind"] == "module"}
    shadowed = {item["name"] for item in catalog["shadowed"]}
    lines: list[str] = []
    for entry in catalog["symbols"]:
        module, _, name = entry["name"].rpartition(".")
        if entry["name"] in shadowed:
            # Its package's attribute is another value: the submodule imports by its path.
            lines.append(f"import {entry['name']}")
        elif module in modules and not name.startswith("__getattr__"):
            lines.append(f"from {module} import {name} as _{len(lines)}")
    probe = tmp_path / "probe.py"
    probe.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = subprocess.run(
        [sys.executable, str(probe)], capture_output=True, text=True, env=starkit_env(), timeout=60
    )
    assert run.returncode == 0, run.stderr
    checked = mypy_without_reexport(probe)
    assert checked.returncode == 0, checked.stdout


def test_mypy_refuses_every_runtime_name_the_catalog_leaves_out(
    catalog: dict[str, Any], tmp_path: Path
) -> None:
    # The other direction: a module-level value the runtime has but the catalog does
    # not list (modules aside, and modules with a __getattr__, which serves any name)
    # is one mypy refuses with --no-implicit-reexport.
    modules = sorted(
        e["name"] for e in catalog["symbols"] if e["kind"] == "module" and not e["reexportOf"]
    )
    listed = set(entries(catalog))
    list_names = (
        "import importlib, inspect, json, sys\n"
        "found = {}\n"
        "for name in sys.argv[1:]:\n"
        "    module = importlib.import_module(name)\n"
        "    if '__getattr__' not in vars(module):\n"
        "        found[name] = sorted(k for k, v in vars(module).items()\n"
        "            if not k.startswith('_') and not inspect.ismodule(v))\n"
        "print(json.dumps(found))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", list_names, *modules],
        capture_output=True,
        text=True,
        env=starkit_env(),
        timeout=60,
        check=True,
    )
    runtime: dict[str, list[str]] = json.loads(run.stdout)
    left_out = [
        (module, key)
        for module, keys in runtime.items()
        for key in keys
        if f"{module}.{key}" not in listed
    ]
    assert ("starkit.fallbacks", "OP_NO_TICKET") in left_out
    assert ("starkit.fallbacks", "checksum") in left_out
    probe = tmp_path / "probe.py"
    lines = [f"from {module} import {key} as _{n}\n" for n, (module, key) in enumerate(left_out)]
    probe.write_text("".join(lines), encoding="utf-8")
    checked = mypy_without_reexport(probe)
    refused = {
        int(line.split(":")[1]) for line in checked.stdout.splitlines() if ": error: " in line
    }
    accepted = [pair for n, pair in enumerate(left_out, start=1) if n not in refused]
    assert accepted == [], checked.stdout
