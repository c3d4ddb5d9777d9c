"""The API catalog is generated from the installed distributions, never written by hand.

Rule: every public module (no ``_`` in its dotted name), and in it every name
of its ``__all__`` (or, without one, every name it defines or re-exports
explicitly) is listed once, with its kind, defining module, signature and first
docstring line; class members likewise; a re-export names the symbol it
re-exports, so both spellings are supported. The same installation always
gives the same canonical JSON, whose digest the host model reproduces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent_eval.consumer.catalog import (
    GUIDE_FILE,
    CatalogError,
    build_catalog,
    catalog_digest,
    render_markdown,
    write_catalog,
)
from agent_eval.digests import canonical_json, sha256_bytes, sha256_json
from agent_eval.layout import CATALOG_FILE
from agent_eval.models.catalog import (
    ApiCatalog,
    CatalogDistribution,
    CatalogEntry,
    CatalogShadowed,
)
from tests.paths import DATA, REPO

SAMPLE_SRC = DATA / "analysis" / "samplekit" / "src"
PACKAGES = REPO / "packages"


def write_dist_info(root: Path, name: str, version: str, packages: list[str]) -> Path:
    """Make *root* look like site-packages holding *name*'s metadata (its code is elsewhere)."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "top_level.txt").write_text("\n".join(packages) + "\n", encoding="utf-8")
    return root


def forget_modules(prefix: str) -> None:
    for name in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    meta = write_dist_info(tmp_path_factory.mktemp("site"), "samplekit", "1.2.3", ["samplekit"])
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(SAMPLE_SRC))
        patch.syspath_prepend(str(meta))
        try:
            yield build_catalog(["samplekit"])
        finally:
            forget_modules("samplekit")


def entries(catalog: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in catalog["symbols"]}


def test_the_distribution_is_recorded_with_its_version_and_packages(
    catalog: dict[str, Any],
) -> None:
    assert catalog["schemaVersion"] == 1
    assert catalog["distributions"] == [
        {"name": "samplekit", "version": "1.2.3", "packages": ["samplekit"]}
    ]


def test_every_public_module_is_catalogued_and_private_ones_are_not(
    catalog: dict[str, Any],
) -> None:
    modules = {name for name, e in entries(catalog).items() if e["kind"] == "module"}
    assert modules == {
        "samplekit",
        "samplekit.extras",
        "samplekit.retry",
        "samplekit.sub",
        "samplekit.sub.deep",
        "samplekit.validation",
    }


def test_a_modules_all_decides_its_public_names(catalog: dict[str, Any]) -> None:
    found = entries(catalog)
    names = {n for n in found if n.startswith("samplekit.validation.") and n.count(".") == 2}
    assert names == {
        "samplekit.validation.MAX_RULES",
        "samplekit.validation.Rule",
        "samplekit.validation.ValidationResult",
        "samplekit.validation.Validator",
        "samplekit.validation.create_validator",
    }
    assert found["samplekit.validation.MAX_RULES"]["kind"] == "constant"
    assert found["samplekit.validation.MAX_RULES"]["type"] == "int"
    assert found["samplekit.validation.MAX_RULES"]["doc"] == "Most keys a rule may name."
    assert found["samplekit.validation.Rule"]["kind"] == "type"
    assert found["samplekit.validation.Rule"]["type"] == "dict[str, type]"
    assert found["samplekit.__version__"]["kind"] == "constant"


def test_without_all_a_module_exports_what_it_defines_and_explicit_reexports(
    catalog: dict[str, Any],
) -> None:
    found = entries(catalog)
    names = {n for n in found if n.startswith("samplekit.retry.") and n.count(".") == 2}
    assert names == {
        "samplekit.retry.ATTEMPTS",
        "samplekit.retry.P",
        "samplekit.retry.RetryError",
        "samplekit.retry.T",
        "samplekit.retry.Validator",
        "samplekit.retry.retry",
        "samplekit.retry.traced",
    }
    assert found["samplekit.retry.Validator"]["reexportOf"] == "samplekit.validation.Validator"


def test_a_reexport_names_its_defining_symbol_and_keeps_its_signature(
    catalog: dict[str, Any],
) -> None:
    found = entries(catalog)
    alias = found["samplekit.create_validator"]
    origin = found["samplekit.validation.create_validator"]
    assert alias["reexportOf"] == "samplekit.validation.create_validator"
    assert origin["reexportOf"] is None
    assert alias["kind"] == origin["kind"] == "function"
    signature = "(rule: Rule, *, strict: bool = False) -> Validator"
    assert alias["signature"] == origin["signature"] == signature
    assert alias["module"] == origin["module"] == "samplekit.validation"
    assert alias["returns"] == origin["returns"] == "samplekit.validation.Validator"


def test_an_object_of_a_private_module_is_catalogued_under_its_public_name(
    catalog: dict[str, Any],
) -> None:
    found = entries(catalog)
    engine = found["samplekit.extras.Engine"]
    assert engine["reexportOf"] is None
    assert engine["module"] == "samplekit._engine"
    assert found["samplekit.extras.Engine.start"]["signature"] == "() -> bool"
    assert not any(name.startswith("samplekit._engine") for name in found)


def test_class_members_have_kinds_signatures_types_and_first_doc_lines(
    catalog: dict[str, Any],
) -> None:
    found = entries(catalog)
    cls = found["samplekit.validation.Validator"]
    assert cls["kind"] == "class"
    assert cls["signature"] == "(rule: Rule, *, strict: bool = False)"
    assert cls["doc"] == "Checks mappings against a rule; build one with :func:`create_validator`."
    members = {
        name.rsplit(".", 1)[1]: entry
        for name, entry in found.items()
        if name.startswith("samplekit.validation.Validator.")
    }
    assert {k: e["kind"] for k, e in members.items()} == {
        "describe": "staticmethod",
        "empty": "classmethod",
        "kind": "attribute",
        "rule": "attribute",
        "size": "property",
        "strict": "attribute",
        "validate": "method",
    }
    assert members["validate"]["signature"] == "(data: dict[str, Any]) -> ValidationResult"
    assert members["validate"]["doc"] == "Check ``data`` and return every problem found."
    assert members["validate"]["returns"] == "samplekit.validation.ValidationResult"
    assert members["describe"]["signature"] == "(rule: Rule) -> str"
    assert members["empty"]["signature"] == "() -> Validator"
    assert members["size"]["type"] == "int"
    assert members["rule"]["type"] == "Rule"
    assert members["strict"]["type"] == "bool"


def test_dataclass_fields_instance_attributes_and_inherited_members_are_members(
    catalog: dict[str, Any],
) -> None:
    found = entries(catalog)
    assert found["samplekit.validation.ValidationResult.ok"]["type"] == "bool"
    assert found["samplekit.retry.RetryError.attempts"]["type"] == "int"
    assert found["samplekit.retry.RetryError.attempts"]["inherited"] is False
    assert found["samplekit.retry.RetryError.args"]["inherited"] is True
    assert found["samplekit.retry.RetryError"]["bases"] == ["Exception"]


def test_subpackages_are_walked(catalog: dict[str, Any]) -> None:
    deep = entries(catalog)["samplekit.sub.deep.deep_function"]
    assert deep["signature"] == "(value: int, /, scale: float = 1.0) -> float"


def test_the_catalog_is_sorted_and_its_digest_is_that_of_canonical_json(
    catalog: dict[str, Any], tmp_path: Path
) -> None:
    names = [entry["name"] for entry in catalog["symbols"]]
    assert names == sorted(names)
    assert len(names) == len(set(names))
    written = write_catalog(catalog, tmp_path)
    data = (tmp_path / CATALOG_FILE).read_bytes()
    assert data == canonical_json(catalog) + b"\n"
    assert written["digest"] == catalog_digest(catalog) == sha256_bytes(canonical_json(catalog))
    assert written["digest"] == sha256_json(json.loads(data))


def test_the_host_model_accepts_the_catalog_and_reproduces_its_digest(
    catalog: dict[str, Any],
) -> None:
    model = ApiCatalog.model_validate(catalog)
    assert model.digest() == catalog_digest(catalog)
    assert model.supported("samplekit.create_validator")
    assert not model.supported("samplekit.nope")


def test_the_host_model_pins_its_field_sets() -> None:
    assert set(ApiCatalog.model_fields) == {
        "schemaVersion",
        "distributions",
        "symbols",
        "unresolved",
        "shadowed",
    }
    assert set(CatalogShadowed.model_fields) == {"name", "exported", "type"}
    assert set(CatalogDistribution.model_fields) == {"name", "version", "packages"}
    assert set(CatalogEntry.model_fields) == {
        "name",
        "kind",
        "module",
        "signature",
        "type",
        "doc",
        "reexportOf",
        "returns",
        "inherited",
        "bases",
    }


def test_the_host_model_refuses_unsorted_symbols_and_dangling_reexports(
    catalog: dict[str, Any],
) -> None:
    shuffled = dict(catalog, symbols=list(reversed(catalog["symbols"])))
    with pytest.raises(ValidationError, match="sorted"):
        ApiCatalog.model_validate(shuffled)
    dangling = [
        dict(e, reexportOf="samplekit.validation.Gone") if e["name"] == "samplekit.Validator" else e
        for e in catalog["symbols"]
    ]
    with pytest.raises(ValidationError, match="not catalogued"):
        ApiCatalog.model_validate(dict(catalog, symbols=dangling))
    with pytest.raises(ValidationError):
        ApiCatalog.model_validate(dict(catalog, schemaVersion=2))
    not_a_module = [{"name": "samplekit.Validator", "exported": False, "type": "str"}]
    with pytest.raises(ValidationError, match="not a catalogued module"):
        ApiCatalog.model_validate(dict(catalog, shadowed=not_a_module))


def test_the_guide_groups_symbols_by_module(catalog: dict[str, Any]) -> None:
    guide = render_markdown(catalog)
    assert guide == render_markdown(catalog)
    section = guide.split("## `samplekit.validation`", 1)[1].split("\n## ", 1)[0]
    assert "- class `Validator(rule: Rule, *, strict: bool = False)`" in section
    assert "  - method `validate(data: dict[str, Any]) -> ValidationResult`" in section
    assert "- type `Rule = dict[str, type]`" in section
    top = guide.split("## `samplekit`\n", 1)[1].split("\n## ", 1)[0]
    assert "- `create_validator` = `samplekit.validation.create_validator`" in top


def test_a_distribution_that_is_not_installed_is_refused_with_the_fix() -> None:
    with pytest.raises(CatalogError, match=r"not installed.*install the candidate"):
        build_catalog(["surely-not-installed-anywhere"])


def run_catalog_cli(pythonpath: list[Path], out: Path, *dists: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in [REPO, *pythonpath]))
    args = [arg for dist in dists for arg in ("--distribution", dist)]
    done = subprocess.run(
        [sys.executable, "-m", "agent_eval.consumer.catalog", *args, "--output-dir", str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_command_line_writes_json_and_guide_and_prints_the_digest(
    catalog: dict[str, Any], tmp_path: Path
) -> None:
    meta = write_dist_info(tmp_path / "site", "samplekit", "1.2.3", ["samplekit"])
    result = run_catalog_cli([meta, SAMPLE_SRC], tmp_path / "out", "samplekit")
    assert result["digest"] == catalog_digest(catalog)
    assert Path(result["catalog"]).name == CATALOG_FILE
    assert Path(result["guide"]).name == GUIDE_FILE
    assert Path(result["guide"]).read_text(encoding="utf-8") == render_markdown(catalog)


def test_the_command_line_exits_1_with_a_message_for_a_missing_distribution(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_eval.consumer.catalog",
            "--distribution",
            "nope-nope",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    assert "'nope-nope' is not installed" in done.stderr


def library_distributions(root: Path) -> list[tuple[str, str, list[str], Path]]:
    found = []
    for project in sorted(root.glob("*/pyproject.toml")):
        meta = tomllib.loads(project.read_text(encoding="utf-8"))["project"]
        src = project.parent / "src"
        packages = sorted(p.parent.name for p in src.glob("*/__init__.py"))
        found.append((meta["name"], meta["version"], packages, src))
    return found


@pytest.mark.skipif(
    not (PACKAGES / "appkit-core" / "src" / "appkit" / "__init__.py").is_file(),
    reason="the library under evaluation is not in packages/ yet",
)
def test_the_real_library_catalog_supports_both_spellings_of_its_reexports(
    tmp_path: Path,
) -> None:
    dists = library_distributions(PACKAGES)
    site = tmp_path / "site"
    for name, version, packages, _ in dists:
        write_dist_info(site, name, version, packages)
    result = run_catalog_cli(
        [site, *(src for *_, src in dists)], tmp_path / "out", *(name for name, *_ in dists)
    )
    data = json.loads(Path(result["catalog"]).read_text(encoding="utf-8"))
    model = ApiCatalog.model_validate(data)
    assert model.digest() == result["digest"]
    found = entries(data)
    assert found["appkit.create_validator"]["reexportOf"] == "appkit.validation.create_validator"
    assert found["appkit.validation.create_validator"]["kind"] == "function"
    assert found["appkit.validation.Validator.validate"]["kind"] == "method"
    assert {d["name"] for d in data["distributions"]} == {name for name, *_ in dists}
    assert "## `appkit.validation`" in Path(result["guide"]).read_text(encoding="utf-8")
