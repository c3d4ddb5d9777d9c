"""An interpreter without mypy is named as such, never reported as a failed check; mypy's
version is read as importlib.metadata reads it, without its import."""

from __future__ import annotations

import email
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.verification.analysis.typecheck import (
    MypyError,
    _version_header,
    installed_mypy_version,
    run_mypy,
)
from tests.paths import REPO


def test_a_missing_mypy_is_said_plainly(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "solution.py").write_text("x: int = 1\n")
    (tmp_path / "cache").mkdir()
    with pytest.raises(MypyError) as caught:
        run_mypy(
            ["solution.py"], workdir=work, cache_dir=tmp_path / "cache",
            python=str(bare / "bin" / "python"),
        )  # fmt: skip
    assert "mypy is not installed for" in str(caught.value)
    assert "install agent-eval with its dependencies" in str(caught.value)


def test_the_installed_mypy_checks() -> None:
    """mypy is a dependency of the base install (the local verifier needs it)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.startswith("mypy 2.4.1"), done


def test_mypys_version_is_read_as_importlib_metadata_reads_it() -> None:
    assert installed_mypy_version() == importlib.metadata.version("mypy")


def _dist(root: Path, name: str, metadata: str | None, kind: str = "dist-info") -> None:
    folder = root / f"{name}.{kind}"
    folder.mkdir(parents=True)
    if metadata is not None:
        (folder / ("METADATA" if kind == "dist-info" else "PKG-INFO")).write_text(metadata)


LAYOUTS: dict[str, list[tuple[str, str | None, str]]] = {
    "plain": [("mypy-1.2.3", "Metadata-Version: 2.1\nName: mypy\nVersion: 1.2.3\n", "dist-info")],
    "case and separators": [
        ("MyPy-9.0", "Name: MyPy\nversion:  9.0 \n\nVersion: 1\n", "dist-info")
    ],
    "another project only": [
        ("mypy_extensions-1.0", "Name: mypy_extensions\nVersion: 1.0\n", "dist-info")
    ],
    "no version header": [("mypy-1", "Name: mypy\n", "dist-info")],
    "no metadata file": [("mypy-1", None, "dist-info")],
    "an egg-info": [("mypy-0.9", "Name: mypy\nVersion: 0.9\n", "egg-info")],
    "version after the headers": [("mypy-1", "Name: mypy\n\nVersion: 5\n", "dist-info")],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_mypys_version_is_importlib_metadatas_or_left_to_it(layout: str, tmp_path: Path) -> None:
    """Either the same answer as importlib.metadata over the same path, or None (then the
    analysis asks importlib.metadata itself): never another version."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    (first / "unrelated.py").write_text("")
    for name, metadata, kind in LAYOUTS[layout]:
        _dist(second, name, metadata, kind)
    path = [str(tmp_path / "missing"), str(first), str(second)]
    found = installed_mypy_version(path)
    dists = list(importlib.metadata.distributions(name="mypy", path=path))
    expected = dists[0].version if dists else None
    assert found is None or found == expected, (found, expected)
    if layout in {"plain", "case and separators"}:
        assert found == expected and found is not None


def test_a_file_first_on_the_path_is_left_to_importlib_metadata(tmp_path: Path) -> None:
    archive = tmp_path / "lib.zip"
    archive.write_bytes(b"")
    _dist(tmp_path / "site", "mypy-1.0", "Version: 1.0\n")
    assert installed_mypy_version([str(archive), str(tmp_path / "site")]) is None
    assert installed_mypy_version([str(tmp_path / "site")]) == "1.0"


def test_the_analysis_process_starts_without_importlib_metadata() -> None:
    """Its import (email, zipfile, csv) once cost over half of every analysis's start."""
    probe = (
        "import sys, agent_eval.verification.analysis.__main__; "
        "print(sorted(m for m in ('importlib.metadata', 'email', 'zipfile') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); {probe}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


_LINES = st.sampled_from(
    ["Name: mypy\n", "Version: 2.4.1\n", "version:3 \n", "VERSION:\t4\r\n", " folded\n",
     "\n", "\r\n", "no colon here\n", "Version:\n", "Summary: x: y\r", "Version: 5\x0b6\n"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=6))
def test_the_version_header_is_the_email_parsers_or_none(lines: list[str]) -> None:
    text = "".join(lines)
    found = _version_header(text)
    assert found is None or found == email.message_from_string(text)["Version"], text
