"""Lookups over the API catalog: which library names exist, and what they are.

A *symbol* is a dotted name. Module members are spelled as imported
(``appkit.create_validator``); class members are spelled on the class's
canonical name (``appkit.validation.Validator.validate``), whatever spelling
the class was reached through.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CALLABLE_KINDS", "SymbolIndex"]

CALLABLE_KINDS = frozenset({"function", "method", "classmethod", "staticmethod"})
_MAX_HOPS = 16


class SymbolIndex:
    """The supported symbols of one catalog, with re-exports resolved."""

    def __init__(self, catalog: Mapping[str, Any]) -> None:
        self.entries: dict[str, Mapping[str, Any]] = {
            entry["name"]: entry for entry in catalog["symbols"]
        }
        self.packages = frozenset(
            package for dist in catalog["distributions"] for package in dist["packages"]
        )
        # A submodule its package's attribute shadows -> whether the package exports it.
        self._shadowed: dict[str, bool] = {
            item["name"]: bool(item["exported"]) for item in catalog.get("shadowed", ())
        }
        self._short_classes: dict[str, set[str]] = {}
        for name, entry in self.entries.items():
            if entry["kind"] == "class" and not entry["reexportOf"]:
                self._short_classes.setdefault(name.rsplit(".", 1)[1], set()).add(name)

    def in_library(self, dotted: str) -> bool:
        """Whether *dotted* is inside one of the catalogued top-level packages."""
        return dotted.split(".", 1)[0] in self.packages

    def exists(self, dotted: str) -> bool:
        """Whether *dotted* is a supported symbol."""
        return dotted in self.entries

    def canonical(self, dotted: str) -> str:
        """The defining spelling of *dotted* (re-exports followed); *dotted* itself otherwise."""
        current = dotted
        for _ in range(_MAX_HOPS):
            entry = self.entries.get(current)
            target = entry["reexportOf"] if entry is not None else None
            if not target or target not in self.entries:
                return current
            current = target
        return current

    def shadowed(self, dotted: str) -> bool | None:
        """For a submodule whose package binds its name to another value, whether the
        package exports that value; None for any other name.

        The submodule imports by its path (``import filelock.version``); the package's
        attribute (``filelock.version``, ``from filelock import version``) is the value.
        """
        return self._shadowed.get(dotted)

    def kind(self, dotted: str) -> str | None:
        """The kind of the symbol (``module``, ``class``...), or None when it does not exist."""
        entry = self.entries.get(dotted)
        return None if entry is None else str(entry["kind"])

    def is_external(self, dotted: str) -> bool:
        """Whether *dotted* re-exports something defined outside the catalog."""
        entry = self.entries.get(dotted)
        return bool(entry and entry["reexportOf"] and entry["reexportOf"] not in self.entries)

    def returns(self, dotted: str) -> str | None:
        """Canonical class an attribute, property or call of *dotted* yields, when known."""
        entry = self.entries.get(self.canonical(dotted))
        value = entry["returns"] if entry is not None else None
        return value if isinstance(value, str) and value in self.entries else None

    def member(self, class_name: str, attr: str) -> str:
        """The symbol naming member *attr* of the class *class_name* (any spelling)."""
        return f"{self.canonical(class_name)}.{attr}"

    def missing_prefix(self, dotted: str) -> str:
        """The shortest prefix of *dotted* that is not a supported symbol (or *dotted*)."""
        parts = dotted.split(".")
        for size in range(1, len(parts) + 1):
            prefix = ".".join(parts[:size])
            if prefix not in self.entries:
                return prefix
        return dotted

    def module_members(self, module: str) -> dict[str, str]:
        """Public names directly in *module*, mapped to their symbols (for ``import *``)."""
        prefix = module + "."
        return {
            name[len(prefix) :]: name
            for name, entry in self.entries.items()
            if name.startswith(prefix)
            and "." not in name[len(prefix) :]
            and self.entries.get(self.canonical(name), entry)["kind"] != "module"
        }

    def classes_named(self, short: str) -> set[str]:
        """Canonical names of the catalogued classes whose own name is *short*."""
        return set(self._short_classes.get(short, ()))
