"""Build one installed distribution's catalog and check it against the import system.

Run as ``python -m tests.consumer.catalog_agreement DIST``, in a fresh interpreter per
distribution (the catalog imports every public module). Prints one JSON object:
``{"distribution", "names", "disagreements", "unresolved", "probe", "error"}`` where
``names`` counts the names checked, each disagreement is ``[name, why]`` and
``probe`` is a sample of ``[module, name]`` pairs for a mypy probe.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

from agent_eval.consumer.catalog import CatalogError, build_catalog

_PROBE_PER_DISTRIBUTION = 40


def _typed_source(module_name: str) -> bool:
    """Whether mypy reads *module_name* from Python source of a package marked py.typed.

    Not when a stub-only package (``requests-stubs``) is installed for it: mypy
    reads such a package before the source it describes (PEP 561).
    """
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None) or ""
    top_name = module_name.partition(".")[0]
    top = sys.modules.get(top_name)
    top_file = getattr(top, "__file__", None) or ""
    stubbed = any(Path(entry, f"{top_name}-stubs").is_dir() for entry in sys.path if entry)
    return file.endswith(".py") and (Path(top_file).parent / "py.typed").is_file() and not stubbed


def check(distribution: str) -> dict[str, Any]:
    result: dict[str, Any] = {"distribution": distribution, "names": 0, "disagreements": []}
    result.update(unresolved=[], probe=[], error=None)
    try:
        catalog = build_catalog([distribution])
    except CatalogError as exc:
        result["error"] = str(exc)
        return result
    listed = {entry["name"] for entry in catalog["symbols"]}
    unresolved = {item["name"] for item in catalog.get("unresolved", [])}
    result["unresolved"] = sorted(unresolved)
    # A module entry that re-exports another module is an attribute, not an import path.
    modules = sorted(
        e["name"] for e in catalog["symbols"] if e["kind"] == "module" and not e["reexportOf"]
    )
    module_set = set(modules)
    names: set[str] = set()
    for entry in catalog["symbols"]:
        if entry["name"].rpartition(".")[0] in module_set:
            names.add(entry["name"])  # a module-level name (submodules included)
    shadowed = {item["name"] for item in catalog.get("shadowed", [])}
    for module_name in modules:
        module = importlib.import_module(module_name)
        parent, _, key = module_name.rpartition(".")
        if parent in module_set:
            attribute = vars(importlib.import_module(parent)).get(key, module)
            if (attribute is not module) != (module_name in shadowed):
                result["disagreements"].append([module_name, "shadowed by its package or not"])
        declared = module.__dict__.get("__all__")
        for key in declared if isinstance(declared, list | tuple) else ():
            spelling = f"{module_name}.{key}"
            if spelling not in listed and spelling not in unresolved:
                result["disagreements"].append([spelling, "in __all__, not in the catalog"])
            names.add(spelling)
    for spelling in sorted(names):
        if spelling in unresolved:
            continue
        parent, _, key = spelling.rpartition(".")
        try:
            getattr(importlib.import_module(parent), key)
        except Exception as exc:  # any failure is a disagreement to report
            result["disagreements"].append([spelling, f"{type(exc).__name__}: {exc}"[:200]])
    result["names"] = len(names)
    # A submodule its package shadows imports by its path (checked above); the
    # package's attribute of that name is another value, exported or not.
    hidden = {item["name"] for item in catalog.get("shadowed", []) if not item["exported"]}
    public = sorted(
        n
        for n in names - unresolved - hidden
        if not n.rpartition(".")[2].startswith("_") and _typed_source(n.rpartition(".")[0])
    )
    step = max(1, len(public) // _PROBE_PER_DISTRIBUTION)
    result["probe"] = [list(n.rpartition(".")[::2]) for n in public[::step]]
    return result


if __name__ == "__main__":
    print(json.dumps(check(sys.argv[1])))
