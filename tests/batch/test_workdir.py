"""A batch's work directory is made and removed without following a planted link.

The work root and a batch's work directory are opened from the evidence
directory down without following links: a link at the work root is refused
with its path named, at creation (``eval-agent``) as at removal (its own
cleanup and the reaper's), and nothing behind it is touched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.batch.workdir import make_work_dir, remove_work_dir
from agent_eval.errors import CleanupError


def planted(tmp_path: Path) -> tuple[Path, Path]:
    """An evidence directory whose work root is a link to a directory outside it."""
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    outside = tmp_path / "outside"
    (outside / "b-1" / "keep").mkdir(parents=True)
    (evidence / ".work").symlink_to(outside, target_is_directory=True)
    return evidence, outside


def test_making_a_work_directory_under_a_linked_work_root_is_refused(tmp_path: Path) -> None:
    evidence, outside = planted(tmp_path)
    with pytest.raises(CleanupError, match=f"{evidence / '.work'} is a symbolic link"):
        make_work_dir(evidence, "b-2")
    assert not (outside / "b-2").exists()


def test_making_a_work_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    (evidence / ".work").mkdir(parents=True)
    (evidence / ".work" / "b-1").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(CleanupError, match="b-1 is a symbolic link"):
        make_work_dir(evidence, "b-1")


def test_removing_under_a_linked_work_root_is_refused(tmp_path: Path) -> None:
    evidence, outside = planted(tmp_path)
    with pytest.raises(CleanupError, match=f"{evidence / '.work'} is a symbolic link"):
        remove_work_dir(evidence, "b-1")
    assert (outside / "b-1" / "keep").is_dir()


def test_a_work_directory_is_made_then_removed_with_its_root(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    work = make_work_dir(evidence, "b-1")
    (work / "x" / "y").mkdir(parents=True)
    assert remove_work_dir(evidence, "b-1")
    assert not (evidence / ".work").exists()
    assert not remove_work_dir(evidence, "b-1")


def test_an_evidence_directory_reached_through_a_link_is_the_projects_own_choice(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "evidence").symlink_to(real, target_is_directory=True)
    make_work_dir(tmp_path / "evidence", "b-1")
    assert (real / ".work" / "b-1").is_dir()
    assert remove_work_dir(tmp_path / "evidence", "b-1")
    assert not (real / ".work").exists()
