"""An interpreter without mypy is named as such, never reported as a failed check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_eval.verification.analysis.typecheck import MypyError, run_mypy


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
