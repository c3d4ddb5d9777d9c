"""The exception tree drawn in ``agent_eval.errors`` is the tree the code defines.

Every class named in the drawing exists where it says, derives from the class
drawn above it, and every error class the harness defines is drawn.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import agent_eval.errors

ROOT = Path(agent_eval.errors.__file__).resolve().parent
NODE = re.compile(r"^(?P<indent>[ │├└─]*?)(?P<name>[A-Z]\w+Error)\b(?P<rest>.*)$")


def _drawn() -> dict[str, tuple[str | None, str | None]]:
    """Each drawn class: (its drawn parent, the module path named beside it, if any)."""
    drawn: dict[str, tuple[str | None, str | None]] = {}
    stack: list[tuple[int, str]] = []
    lines = (agent_eval.errors.__doc__ or "").splitlines()
    for number, line in enumerate(lines):
        found = NODE.match(line.strip("\n")[4:]) if line.startswith("    ") else None
        if found is None:
            continue
        depth = len(found["indent"])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        note = found["rest"]
        if number + 1 < len(lines) and not NODE.match(lines[number + 1][4:]):
            note += lines[number + 1]
        where = re.search(r"\(([\w/]+\.py)\)", note)
        drawn[found["name"]] = (stack[-1][1] if stack else None, where and where[1])
        stack.append((depth, found["name"]))
    return drawn


def _module_of(relative: str) -> object:
    return importlib.import_module("agent_eval." + relative.removesuffix(".py").replace("/", "."))


def test_every_drawn_error_derives_from_the_one_drawn_above_it() -> None:
    drawn = _drawn()
    assert "AgentEvalError" in drawn and "InfrastructureError" in drawn
    for name, (parent, where) in drawn.items():
        module = _module_of(where) if where else agent_eval.errors
        cls = getattr(module, name)
        if parent is not None:
            assert cls.__bases__[0].__name__ == parent, name


def test_every_error_class_the_harness_defines_is_drawn() -> None:
    defined = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {getattr(base, "id", getattr(base, "attr", "")) for base in node.bases}
            if bases & set(_drawn()) and node.name.endswith("Error"):
                defined.add(node.name)
    assert defined <= set(_drawn()), sorted(defined - set(_drawn()))
