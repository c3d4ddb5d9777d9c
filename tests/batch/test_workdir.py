"""A batch's work directory is made and removed without following a planted link.

The work root and a batch's work directory are opened from the evidence
directory down without following links: a link at the work root is refused
with its path named, at creation (``eval-agent``) as at removal (its own
cleanup and the reaper's), and nothing behind it is touched. The same holds for
every directory made, filled or removed below it mid-batch, whichever of the
directories on the way was swapped for a link since it was last checked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_eval.anchored import copy_into, hand_over, make_dirs, remove_tree
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


# Every directory between the evidence directory and an attempt's workspace, any of which
# whoever writes into the project may swap for a link while the batch runs.
WORKSPACE = (".work", "b-1", "runs", "forms-1", "attempt-1")


def swapped(tmp_path: Path, depth: int) -> tuple[Path, Path, Path]:
    """The workspace's tree, its directory at *depth* swapped for a link to a copy outside
    (as it was when checked): the evidence directory, the workspace, the outside copy."""
    evidence = tmp_path / "evidence"
    workspace = evidence.joinpath(*WORKSPACE)
    (workspace / "keep").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    moved = evidence.joinpath(*WORKSPACE[: depth + 1])
    moved.rename(outside / moved.name)
    moved.symlink_to(outside / moved.name, target_is_directory=True)
    return evidence, workspace, outside / moved.name


@pytest.mark.parametrize("depth", range(len(WORKSPACE) - 1))
def test_a_tree_below_a_directory_swapped_for_a_link_is_neither_removed_nor_made(
    tmp_path: Path, depth: int
) -> None:
    evidence, workspace, behind = swapped(tmp_path, depth)
    linked = evidence.joinpath(*WORKSPACE[: depth + 1])
    with pytest.raises(CleanupError, match=f"{linked} is a symbolic link"):
        remove_tree(evidence, workspace)
    assert (behind.joinpath(*WORKSPACE[depth + 1 :]) / "keep").is_dir()
    with pytest.raises(CleanupError, match=f"{linked} is a symbolic link"):
        make_dirs(evidence, workspace.with_name("attempt-2"))
    assert not behind.joinpath(*WORKSPACE[depth + 1 : -1], "attempt-2").exists()
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "solution.py").write_text("x = 1\n")
    with pytest.raises(CleanupError, match=f"{linked} is a symbolic link"):
        copy_into(seed, evidence, workspace.with_name("attempt-3"))
    assert not behind.joinpath(*WORKSPACE[depth + 1 : -1], "attempt-3").exists()
    kept = behind.joinpath(*WORKSPACE[depth + 1 :]) / "keep"
    kept.chmod(0o700)
    with pytest.raises(CleanupError, match=f"{linked} is a symbolic link"):
        hand_over(evidence, workspace, 10001, 10001)
    assert (kept.stat().st_uid, kept.stat().st_mode & 0o777) == (os.getuid(), 0o700)


def test_a_workspace_swapped_for_a_link_is_removed_as_the_link(tmp_path: Path) -> None:
    evidence, workspace, behind = swapped(tmp_path, len(WORKSPACE) - 1)
    assert remove_tree(evidence, workspace)
    assert not workspace.is_symlink() and (behind / "keep").is_dir()


def test_a_tree_is_copied_with_its_links_as_links_and_its_modes(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    (seed / "pkg").mkdir(parents=True)
    (seed / "pkg" / "mod.py").write_text("y = 2\n")
    (seed / "run.sh").write_text("#!/bin/sh\n")
    (seed / "run.sh").chmod(0o755)
    (seed / "out").symlink_to(tmp_path / "elsewhere")
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    copied = copy_into(seed, evidence, evidence.joinpath(*WORKSPACE))
    assert (copied / "pkg" / "mod.py").read_text() == "y = 2\n"
    assert (copied / "run.sh").stat().st_mode & 0o777 == 0o755
    assert os.readlink(copied / "out") == str(tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(FileExistsError):
        copy_into(seed, evidence, copied)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a tree away takes root")
def test_a_tree_is_handed_over_and_nothing_its_links_name_changes(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True, mode=0o700)
    (outside / "file").write_text("host\n")
    evidence = tmp_path / "evidence"
    workspace = make_dirs(evidence.parent, evidence.joinpath(*WORKSPACE))
    (workspace / "pkg").mkdir(mode=0o700)
    (workspace / "pkg" / "mod.py").write_text("y = 2\n")
    (workspace / "to-file").symlink_to(outside / "file")
    (workspace / "pkg" / "to-dir").symlink_to(outside / "dir", target_is_directory=True)
    hand_over(evidence, workspace, 10001, 10002)
    for path in (workspace, workspace / "pkg", workspace / "pkg" / "mod.py"):
        assert (path.stat().st_uid, path.stat().st_gid) == (10001, 10002), path
    assert (workspace / "pkg").stat().st_mode & 0o777 == 0o755
    assert (workspace / "to-file").lstat().st_uid == 10001
    for path in (outside / "dir", outside / "file"):
        assert path.stat().st_uid == 0, path
    assert (outside / "dir").stat().st_mode & 0o777 == 0o700
    # A workspace swapped for a link is refused, not handed over where it leads.
    workspace.rename(workspace.with_name("moved"))
    workspace.symlink_to(outside, target_is_directory=True)
    with pytest.raises(CleanupError, match=f"{workspace} is a symbolic link"):
        hand_over(evidence, workspace, 10001, 10002)
    assert outside.stat().st_uid == 0


def test_a_path_not_below_its_anchor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        remove_tree(tmp_path / "evidence", tmp_path / "outside")
    with pytest.raises(ValueError):
        make_dirs(tmp_path / "evidence", tmp_path / "evidence" / ".." / "outside")
