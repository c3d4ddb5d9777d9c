"""A batch's wheels, unpacked on this machine, give their API catalog again; a wheel whose
member would land outside the unpacked tree, or that is no wheel, is refused by name."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from agent_eval.consumer.wheels import catalog_of_wheels
from agent_eval.errors import EvidenceError

MODULE = '''"""A tiny library."""

__all__ = ["LIMIT", "greet"]

LIMIT: int = 3
"""How many."""


def greet(name: str, *, loud: bool = False) -> str:
    """Say hello."""
    return name
'''


def wheel(path: Path, name: str, members: dict[str, str]) -> Path:
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in members.items():
            archive.writestr(member, text)
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        archive.writestr(f"{info}/top_level.txt", f"{name}\n")
    return path


def test_the_catalog_of_a_wheel_is_generated_from_it_alone(tmp_path: Path) -> None:
    members = {"tinylib/__init__.py": MODULE, "tinylib-1.0.data/scripts/x": "ignored"}
    made = wheel(tmp_path / "tinylib-1.0-py3-none-any.whl", "tinylib", members)
    catalog = catalog_of_wheels([made], ["tinylib"])
    assert [d.name for d in catalog.distributions] == ["tinylib"]
    symbols = {s.name: s for s in catalog.symbols}
    assert set(symbols) == {"tinylib", "tinylib.LIMIT", "tinylib.greet"}
    assert symbols["tinylib.greet"].signature == "(name: str, *, loud: bool = False) -> str"
    assert symbols["tinylib.LIMIT"].type == "int"
    assert catalog_of_wheels([made], ["tinylib"]).digest() == catalog.digest()


@pytest.mark.parametrize("member", ["../outside.py", "/etc/outside.py", "a\\..\\b.py"])
def test_a_member_that_leaves_the_wheel_is_refused(tmp_path: Path, member: str) -> None:
    made = wheel(tmp_path / "bad-1.0-py3-none-any.whl", "bad", {member: "X = 1\n"})
    with pytest.raises(EvidenceError, match="leaves the wheel"):
        catalog_of_wheels([made], ["bad"])
    assert not (tmp_path / "outside.py").exists()


def test_a_file_that_is_no_wheel_is_refused_by_name(tmp_path: Path) -> None:
    fake = tmp_path / "fake-1.0-py3-none-any.whl"
    fake.write_bytes(b"PK\x03\x04 not really a wheel")
    with pytest.raises(EvidenceError, match=r"fake-1\.0-py3-none-any\.whl: cannot unpack"):
        catalog_of_wheels([fake], ["fake"])
