"""The changed public symbols come from the two API catalogs the sides recorded: a symbol is
added, removed or changed (kind or signature) and nothing else counts; a catalog is used only
when it is the one its batch recorded, by digest, and otherwise the changes are not known."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_eval.compare.compare import as_text, compare_batches
from agent_eval.compare.symbols import symbol_changes
from agent_eval.errors import InfrastructureError
from agent_eval.models import ApiCatalog
from tests.evidence_builders import CURRENT, Batch, receipt, write_batch


def entry(name: str, kind: str = "function", signature: str | None = "(x: int) -> int",
          **fields: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "name": name, "kind": kind, "module": name.split(".")[0], "signature": signature,
        "type": None, "doc": "", "reexportOf": None, "returns": None, "inherited": False,
        "bases": [], **fields,
    }  # fmt: skip


def catalog(*entries: dict[str, Any]) -> ApiCatalog:
    return ApiCatalog.model_validate(
        {
            "schemaVersion": 1,
            "distributions": [{"name": "appkit-core", "version": "0.1.0", "packages": ["appkit"]}],
            "symbols": sorted([entry("appkit", "module", None), *entries], key=lambda e: e["name"]),
        }
    )


BEFORE = catalog(
    entry("appkit.kept"),
    entry("appkit.documented", doc="Old words."),
    entry("appkit.gone"),
    entry("appkit.reshaped", signature="(x: int) -> int"),
    entry("appkit.LIMIT", "constant", None, type="int"),
    entry("appkit.turned", "function", "(x: int) -> int"),
)
AFTER = catalog(
    entry("appkit.kept"),
    entry("appkit.documented", doc="New words.", module="appkit"),
    entry("appkit.fresh", signature="(name: str) -> None"),
    entry("appkit.reshaped", signature="(x: int, *, strict: bool = False) -> int"),
    entry("appkit.LIMIT", "constant", None, type="float"),
    entry("appkit.turned", "class", "(x: int) -> int"),
)


def test_added_removed_and_changed_symbols_are_listed_by_name() -> None:
    changes = {c.name: c for c in symbol_changes(BEFORE, AFTER)}
    assert list(changes) == sorted(changes)
    assert set(changes) == {
        "appkit.fresh", "appkit.gone", "appkit.reshaped", "appkit.LIMIT", "appkit.turned"
    }  # fmt: skip
    fresh, gone = changes["appkit.fresh"], changes["appkit.gone"]
    assert (fresh.change, fresh.baselineKind, fresh.candidateKind) == ("added", None, "function")
    assert fresh.candidateSignature == "(name: str) -> None" and fresh.baselineSignature is None
    assert (gone.change, gone.candidateKind, gone.candidateSignature) == ("removed", None, None)
    reshaped = changes["appkit.reshaped"]
    assert reshaped.change == "changed"
    assert reshaped.candidateSignature == "(x: int, *, strict: bool = False) -> int"
    limit = changes["appkit.LIMIT"]
    assert (limit.baselineSignature, limit.candidateSignature) == ("int", "float")
    turned = changes["appkit.turned"]
    assert (turned.change, turned.baselineKind, turned.candidateKind) == (
        "changed", "function", "class"
    )  # fmt: skip


def test_an_unchanged_catalog_has_no_changes_and_a_docstring_is_not_one() -> None:
    assert symbol_changes(BEFORE, BEFORE) == []
    assert "appkit.documented" not in {c.name for c in symbol_changes(BEFORE, AFTER)}


# --- Through the comparison ---------------------------------------------------------------


def batch_with(root: Path, recorded: ApiCatalog) -> Batch:
    digest = recorded.digest()
    return write_batch(
        root, receipt(batchId=f"batch-{root.name}"), lambda m: m.update(apiCatalogDigest=digest)
    )


class Catalogs:
    """Generates each run directory's catalog from a table (the port's fake)."""

    def __init__(self, table: dict[Path, ApiCatalog]) -> None:
        self.table = table
        self.asked: list[tuple[list[str], list[str]]] = []

    def __call__(self, wheels: Sequence[Path], distributions: Sequence[str]) -> ApiCatalog:
        self.asked.append(([w.name for w in wheels], list(distributions)))
        return self.table[wheels[0].parent.parent]


def test_the_comparison_lists_the_changes_between_the_recorded_catalogs(tmp_path: Path) -> None:
    a, b = batch_with(tmp_path / "a", BEFORE), batch_with(tmp_path / "b", AFTER)
    catalogs = Catalogs({a.root: BEFORE, b.root: AFTER})
    result = compare_batches([a.root], [b.root], CURRENT, catalogs=catalogs)
    assert result.api.status == "compared" and result.api.note is None
    assert result.api.changes == symbol_changes(BEFORE, AFTER)
    assert catalogs.asked == [(["appkit_core-0.1.0-py3-none-any.whl"], ["appkit-core"])] * 2
    assert [d.field for d in result.differences] == ["apiCatalogDigest"]
    text = as_text(result)
    assert "  public symbols: 1 added, 1 removed, 3 changed" in text
    assert "    + appkit.fresh  function (name: str) -> None" in text
    assert "    - appkit.gone  function (x: int) -> int" in text
    assert "    ~ appkit.turned  function (x: int) -> int -> class (x: int) -> int" in text
    assert "    ~ appkit.LIMIT  constant int -> constant float" in text


def test_one_recorded_catalog_on_both_sides_is_not_generated_again(tmp_path: Path) -> None:
    a, b = batch_with(tmp_path / "a", BEFORE), batch_with(tmp_path / "b", BEFORE)
    catalogs = Catalogs({})
    result = compare_batches([a.root], [b.root], CURRENT, catalogs=catalogs)
    assert result.api.status == "same-catalog" and result.api.changes == []
    assert catalogs.asked == [] and "public symbols" not in as_text(result)


def test_a_catalog_that_is_not_the_recorded_one_makes_the_changes_unknown(tmp_path: Path) -> None:
    a, b = batch_with(tmp_path / "a", BEFORE), batch_with(tmp_path / "b", AFTER)
    elsewhere = catalog(entry("appkit.kept"))  # what this machine's Python made of the wheels
    result = compare_batches(
        [a.root], [b.root], CURRENT, catalogs=Catalogs({a.root: BEFORE, b.root: elsewhere})
    )
    assert result.api.status == "unavailable" and result.api.changes == []
    assert result.api.note is not None
    assert "generated from the candidate's wheels on this machine is not the one" in result.api.note
    assert AFTER.digest() in result.api.note
    assert "  public symbols: not known (the API catalog generated" in as_text(result)


def test_a_generator_that_fails_makes_the_changes_unknown_with_its_reason(tmp_path: Path) -> None:
    a, b = batch_with(tmp_path / "a", BEFORE), batch_with(tmp_path / "b", AFTER)

    def failing(wheels: Sequence[Path], distributions: Sequence[str]) -> ApiCatalog:
        raise InfrastructureError("generating the API catalog failed (exit 3): no module")

    result = compare_batches([a.root], [b.root], CURRENT, catalogs=failing)
    assert result.api.status == "unavailable"
    assert result.api.note == (
        "the baseline's API catalog cannot be generated from its wheels: generating the API "
        "catalog failed (exit 3): no module"
    )
    unasked = compare_batches([a.root], [b.root], CURRENT)
    assert unasked.api.status == "unavailable"


def test_the_terminal_lists_at_most_forty_symbols_and_counts_the_rest(tmp_path: Path) -> None:
    many = catalog(*(entry(f"appkit.f{i:03}") for i in range(45)))
    a, b = batch_with(tmp_path / "a", BEFORE), batch_with(tmp_path / "b", many)
    result = compare_batches(
        [a.root], [b.root], CURRENT, catalogs=Catalogs({a.root: BEFORE, b.root: many})
    )
    lines = as_text(result).splitlines()
    listed = [line for line in lines if line.startswith("    + ") or line.startswith("    - ")]
    assert len(listed) == 40
    more = len(result.api.changes) - 40
    assert f"    ... and {more} more (every one in --json and --html)" in lines
