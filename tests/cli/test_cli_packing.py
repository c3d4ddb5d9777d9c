"""agent-eval fetch-build-wheels fills the packing cache from a build lock: the checkout's,
or one named with --lock; it prints each wheel, and a lock it cannot read is one error line
naming the file (exit 1), never a traceback."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from agent_eval.cli.packing import fetch_build_wheels_command
from agent_eval.packing import BUILD_LOCK, BuildCache
from tests.paths import REPO


def test_the_checkout_s_build_lock_is_fetched_and_each_wheel_printed() -> None:
    result = CliRunner().invoke(fetch_build_wheels_command, ["--project", str(REPO)])
    assert result.exit_code == 0, result.output
    printed = [Path(line) for line in result.output.splitlines()]
    assert {p.name.split("-")[0] for p in printed} == {"packaging", "setuptools", "wheel"}
    assert all(p.parent == BuildCache.default().wheelhouse and p.is_file() for p in printed)


def test_a_lock_without_hashes_is_one_error_line_naming_it(tmp_path: Path) -> None:
    lock = tmp_path / BUILD_LOCK
    lock.write_text("setuptools==84.2.1\n")
    result = CliRunner().invoke(fetch_build_wheels_command, ["--lock", str(lock)])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {lock}: entry 1 ")
    assert "Traceback" not in result.output
