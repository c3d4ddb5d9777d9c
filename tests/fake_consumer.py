"""What the consumer's installer leaves, written by the fake engine for cache tests."""

from __future__ import annotations

import json
from pathlib import Path

from agent_eval.engine import ContainerSpec
from agent_eval.layout import ARCHIVES_MOUNT, CONSUMER_MOUNT, ConsumerLayout


def mounted(spec: ContainerSpec, target: str) -> Path:
    """The host directory *spec* mounts at *target*."""
    return next(m.source for m in spec.mounts if m.target == target)


def install(spec: ContainerSpec, stdin: bytes | None = None) -> None:
    """Versions, the catalog, and one dist-info and package per archive (its text in it)."""
    layout = ConsumerLayout(mounted(spec, CONSUMER_MOUNT))
    (layout.root / "python-version").write_text("3.11.2\n")
    (layout.root / "mypy-version").write_text("1.0\n")
    distributions = []
    for wheel in sorted(mounted(spec, ARCHIVES_MOUNT).glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        info = layout.site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Name: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n")
        (layout.site / name).mkdir()
        (layout.site / name / "__init__.py").write_text(f"# {wheel.read_text()}\n")
        distributions.append({"name": name, "version": version, "packages": [name]})
    catalog = {"schemaVersion": 1, "distributions": distributions, "symbols": []}
    layout.catalog.write_text(json.dumps(catalog))
