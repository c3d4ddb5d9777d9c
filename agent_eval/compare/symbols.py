"""The library's public symbols that differ between two API catalogs.

A symbol is added or removed when only one catalog has its name, and changed when both
have it with another kind, or another signature (for an attribute, property, constant
or type alias: another declared type). A docstring, a defining module or a base class
that moved is not a change of how the symbol is used, so it is not one here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from agent_eval.models.catalog import ApiCatalog, CatalogEntry
from agent_eval.models.compare import SymbolChange

__all__ = ["CatalogOfWheels", "symbol_changes"]

CatalogOfWheels = Callable[[Sequence[Path], Sequence[str]], ApiCatalog]
"""Generates the catalog of the distributions (second argument) installed from the wheels
(first); raises :class:`agent_eval.errors.AgentEvalError` when it cannot."""


def _shape(entry: CatalogEntry | None) -> str | None:
    if entry is None:
        return None
    return entry.signature if entry.signature is not None else entry.type


def symbol_changes(baseline: ApiCatalog, candidate: ApiCatalog) -> list[SymbolChange]:
    """Every symbol added, removed or changed from *baseline* to *candidate*, by name."""
    before = {e.name: e for e in baseline.symbols}
    after = {e.name: e for e in candidate.symbols}
    changes = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is not None and new is not None:
            if (old.kind, _shape(old)) == (new.kind, _shape(new)):
                continue
            change = "changed"
        else:
            change = "added" if old is None else "removed"
        changes.append(
            SymbolChange(
                name=name,
                change=change,
                baselineKind=old.kind if old else None,
                candidateKind=new.kind if new else None,
                baselineSignature=_shape(old),
                candidateSignature=_shape(new),
            )
        )
    return changes
