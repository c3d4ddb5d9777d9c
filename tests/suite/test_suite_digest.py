"""The suite digest is the same for equal task and grader trees wherever they are checked
out, and any edit, addition or removal of a task file or a shared grader file changes it.

A receipt is bound to the suite digest, so a stale receipt must be detectable
after any task change, and a fresh checkout elsewhere must not look stale.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from agent_eval.project import Project
from tests.paths import REPO


def checkout(root: Path) -> Project:
    """A copy of the repository's tasks and graders under *root*, as a project."""
    for name in ("tasks", "graders"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return Project(
        root=root,
        packages=root / "packages",
        tasks=root / "tasks",
        graders=root / "graders",
        fixtures=root / "fixtures",
        evidence=root / ".verification" / "agent-eval",
    )


def flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_two_checkouts_of_the_same_tree_have_the_same_digest(tmp_path: Path) -> None:
    first = checkout(tmp_path / "one")
    second = checkout(tmp_path / "two" / "deeper")
    # Timestamps, modes and bytecode caches are not content.
    os.utime(second.tasks / "forms" / "prompt.md", (0, 0))
    (second.tasks / "forms" / "grader.py").chmod(0o600)
    (second.graders / "__pycache__").mkdir(exist_ok=True)
    (second.graders / "__pycache__" / "results.cpython-311.pyc").write_bytes(b"\0cache")
    assert first.suite_digest() == second.suite_digest()
    assert first.suite_digest().startswith("sha256:")


def test_a_one_byte_edit_of_any_task_file_changes_the_digest(tmp_path: Path) -> None:
    project = checkout(tmp_path / "repo")
    before = project.suite_digest()
    files = sorted(p for p in project.tasks.rglob("*") if p.is_file())
    assert {p.name for p in files} >= {"task.json", "prompt.md", "contract.pyi", "grader.py"}
    seen = {before}
    for path in files:
        original = path.read_bytes()
        flip_one_byte(path)
        changed = project.suite_digest()
        assert changed not in seen, f"editing {path.relative_to(project.root)} went unnoticed"
        seen.add(changed)
        path.write_bytes(original)
        assert project.suite_digest() == before


def test_a_one_byte_edit_of_the_shared_graders_changes_the_digest(tmp_path: Path) -> None:
    project = checkout(tmp_path / "repo")
    before = project.suite_digest()
    flip_one_byte(project.graders / "results.py")
    assert project.suite_digest() != before


def test_adding_renaming_or_removing_a_task_file_changes_the_digest(tmp_path: Path) -> None:
    project = checkout(tmp_path / "repo")
    before = project.suite_digest()
    extra = project.tasks / "forms" / "notes.md"
    extra.write_text("", encoding="utf-8")
    added = project.suite_digest()
    extra.rename(project.tasks / "forms" / "notes2.md")
    renamed = project.suite_digest()
    (project.tasks / "forms" / "notes2.md").unlink()
    assert len({before, added, renamed}) == 3
    assert project.suite_digest() == before
    (project.tasks / "error-recovery" / "starter" / "solution.py").unlink()
    assert project.suite_digest() != before
