"""The dependencies between the harness's packages point one way, as ARCHITECTURE.md draws them.

Every module of ``agent_eval`` is parsed with ``ast`` (nothing is imported) and
each of its imports, relative ones resolved, is checked against the table
below: a package may import only the packages its row lists, the standard
library and third-party libraries aside. Imports under ``if TYPE_CHECKING:``
are not dependencies at run time and are left out. ``cli`` is the composition
root: it alone connects to the real engine and picks which verifier runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "agent_eval"

LEAVES = frozenset(
    {
        "errors",
        "digests",
        "layout",
        "syntax",
        "models",
        "evidence_io",
        "processes",
        "project",
        "anchored",
    }
)
ALLOWED: dict[str, frozenset[str]] = {
    "__init__": frozenset(),
    "errors": frozenset(),
    "digests": frozenset(),
    "layout": frozenset(),
    "syntax": frozenset(),
    "models": frozenset({"digests", "errors", "layout"}),
    "evidence_io": frozenset({"errors"}),
    "processes": frozenset(),
    "anchored": frozenset({"errors"}),
    "redaction": frozenset({"gateway"}),
    "project": frozenset({"digests", "errors", "layout", "models"}),
    "engine": LEAVES,
    "suite": LEAVES | {"grading"},
    "grading": frozenset(),
    "packing": LEAVES,
    "consumer": LEAVES | {"engine", "packing"},
    "verification": LEAVES | {"engine", "suite", "grading", "consumer", "packing", "images"},
    "gateway": LEAVES | {"engine"},
    "batch": LEAVES
    | {"engine", "suite", "packing", "consumer", "reference", "gateway", "redaction"},
    "verdict": LEAVES | {"packing", "reference", "suite", "verification", "gateway"},
    "report": LEAVES | {"verdict"},
    "compare": LEAVES | {"verdict", "report"},
    "export": LEAVES,
    "images": LEAVES | {"engine"},
    "reference": LEAVES | {"engine", "images"},
    "adapters": frozenset({"layout"}),
    "trial": LEAVES
    | {"engine", "images", "suite", "batch", "verdict", "verification", "reference"},
    "cluster": LEAVES | {"engine", "suite", "batch", "verification", "gateway"},
    "adoption": LEAVES | {"packing"},
}
ALLOWED["cli"] = frozenset(ALLOWED) - {"__init__", "cli"}
"""Per package (the first name below ``agent_eval``), the other packages it may import."""
NARROW = {
    "batch": {
        "verification": {"agent_eval.verification.protocol", "agent_eval.verification.failure"}
    },
    "trial": {"verification": {"agent_eval.verification.protocol"}},
}
"""Packages that may reach another one through named modules only."""


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _runtime_imports(path: Path, module: str) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            yield name
            yield from (f"{name}.{alias.name}" for alias in node.names)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


MODULES = list(_modules())


@pytest.mark.parametrize("module,path", MODULES, ids=[m for m, _ in MODULES])
def test_each_module_imports_only_what_its_package_may(module: str, path: Path) -> None:
    unit = _unit(module)
    assert unit in ALLOWED, f"{module}: add its package to ARCHITECTURE.md and this table"
    problems = []
    for name in _runtime_imports(path, module):
        if not name.startswith("agent_eval.") or name == "agent_eval":
            continue
        target = _unit(name)
        if target == unit:
            continue
        narrow = NARROW.get(unit, {}).get(target)
        if narrow is not None:
            if not any(name == n or name.startswith(n + ".") for n in narrow):
                problems.append(f"{name} (only {sorted(narrow)} of {target})")
        elif target not in ALLOWED[unit]:
            problems.append(name)
    assert not problems, f"{module} imports {sorted(set(problems))}"


def test_only_the_docker_engine_imports_docker() -> None:
    importers = sorted(
        module
        for module, path in MODULES
        if any(n == "docker" or n.startswith("docker.") for n in _runtime_imports(path, module))
    )
    assert importers == ["agent_eval.engine.docker_engine"]


def test_only_the_ray_executor_imports_ray() -> None:
    # The base install has no Ray: anything else importing it would break it.
    importers = sorted(
        module
        for module, path in MODULES
        if any(n == "ray" or n.startswith("ray.") for n in _runtime_imports(path, module))
    )
    assert importers == ["agent_eval.cluster.ray_cluster"]


ENGINE_CONNECTION = ("agent_eval.engine.docker_engine",)
"""What connects to a real engine: chosen by the composition root (``cli``) alone."""
VERIFIER_IMPLEMENTATIONS = (
    "agent_eval.verification.container.verifier",
    "agent_eval.verification.local",
)
"""The modules that build a verifier: chosen by the composition root alone."""


def _importers(targets: tuple[str, ...], *, besides: set[str]) -> list[str]:
    """Modules outside the units *besides* that import any of *targets* (or a name in one)."""
    return sorted(
        module
        for module, path in MODULES
        if _unit(module) not in besides
        and any(
            name == target or name.startswith(target + ".")
            for name in _runtime_imports(path, module)
            for target in targets
        )
    )


def test_only_the_composition_root_connects_to_an_engine() -> None:
    # Everything else is given its engine, so a fake can stand in for it.
    assert _importers(ENGINE_CONNECTION, besides={"cli", "engine"}) == []


def test_only_the_composition_root_picks_a_verifier() -> None:
    # The batch, the node, the fixture check and the checker work with the Verifier given.
    assert _importers(VERIFIER_IMPLEMENTATIONS, besides={"cli"}) == []


def test_verification_never_imports_the_batch() -> None:
    for module, path in MODULES:
        if module.startswith("agent_eval.verification"):
            assert not any(
                n.startswith("agent_eval.batch") for n in _runtime_imports(path, module)
            ), module


def test_the_staged_packages_run_without_the_rest_of_the_harness() -> None:
    for module, path in MODULES:
        if _unit(module) in {"grading", "adapters"} or module.endswith(
            ("reference.runner", "consumer.setup", "consumer.catalog")
        ):
            outside = [
                n
                for n in _runtime_imports(path, module)
                if n.startswith("agent_eval.")
                and _unit(n) != _unit(module)
                and _unit(n) not in {"errors", "digests", "layout"}
            ]
            assert outside == [], module
