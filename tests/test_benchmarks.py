"""Every benchmark still loads: its imports resolve against the library as it is now.

Benchmarks run by hand, not in the suite, so a renamed or removed library
name breaks one silently until somebody needs its figures. Loading each as a
module (not as ``__main__``, so nothing is measured) runs its imports and its
top-level definitions; the performance record's stamp is checked on its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(path for path in (ROOT / "benchmarks").glob("*.py") if path.name != "record.py")


def test_there_are_benchmarks_to_load() -> None:
    assert len(BENCHMARKS) >= 8


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.stem)
def test_a_benchmark_loads_without_running(script: Path) -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import runpy, sys; runpy.run_path(sys.argv[1], run_name='loaded')",
            str(script),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]


def test_a_recorded_line_is_stamped_and_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import record
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    monkeypatch.setattr(record, "RECORD", tmp_path / "record.jsonl")
    record.emit("cli", {"worstCpuSeconds": 0.1}, record=False)
    assert not (tmp_path / "record.jsonl").exists()
    record.emit("cli", {"worstCpuSeconds": 0.1}, record=True)
    record.emit("report", {"renderSeconds": 0.2}, record=True)
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == [{"worstCpuSeconds": 0.1}] * 2 + [{"renderSeconds": 0.2}]
    entries = [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert [entry["benchmark"] for entry in entries] == ["cli", "report"]
    assert entries[0]["figures"] == {"worstCpuSeconds": 0.1}
    assert len(entries[0]["commit"]) == 40
    assert set(entries[0]) == {"benchmark", "at", "commit", "dirty", "cores", "load1", "figures"}
