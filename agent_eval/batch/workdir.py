"""A batch's work directory, ``<evidence>/.work/<batch>``, made and removed without following links.

Whoever can write into the project can plant a link where the work root or a
batch's work directory should be, or swap any directory below it for one while
the batch runs. Everything the harness makes or removes there (the work
directory, an attempt's workspace, the verifier's directory, a cluster node's
directories) is therefore reached from a directory the project names (the
evidence directory or a node's root, which may be reached through a link of
its own) one name at a time, each opened with ``O_NOFOLLOW`` relative to its
parent's descriptor, never by its path again; trees are removed through
directory descriptors (``shutil.rmtree`` with ``dir_fd``, which never descends
into a link). A link on the way is refused with its path named, never
followed or deleted through; a link where the directory to remove should be
leads nowhere the harness made, so it is removed as the link.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from agent_eval.anchored import make_dirs, open_dir, remove_tree

__all__ = ["WORK_ROOT", "make_work_dir", "remove_work_dir"]

WORK_ROOT = ".work"
"""The directory under the evidence directory holding each running batch's work directory."""


def make_work_dir(evidence_dir: Path, batch_id: str) -> Path:
    """Create the work directory of *batch_id* (and the work root), refusing any link on the way.

    Returns:
        Its path.

    Raises:
        CleanupError: The work root or the batch's work directory is a link.
        OSError: It could not be created.
    """
    return make_dirs(evidence_dir, evidence_dir / WORK_ROOT / batch_id)


def remove_work_dir(evidence_dir: Path, batch_id: str) -> bool:
    """Remove the work directory of *batch_id*, and the work root once it is empty.

    Nothing under the evidence directory is followed (:func:`remove_tree`).

    Returns:
        Whether there was one to remove.

    Raises:
        CleanupError: The work root is a link, or the work directory could not be removed.
    """
    removed = remove_tree(evidence_dir, evidence_dir / WORK_ROOT / batch_id)
    if removed:
        with (
            contextlib.suppress(OSError),
            open_dir(str(evidence_dir), evidence_dir, None) as top,
        ):
            os.rmdir(WORK_ROOT, dir_fd=top)  # only once no other batch works there
    return removed
