"""A batch's work directory, ``<evidence>/.work/<batch>``, made and removed without following links.

Whoever can write into the project can plant a link where the work root or a
batch's work directory should be. Both are therefore opened with
``O_NOFOLLOW`` below the evidence directory (which the project names, and may
reach through a link of its own) and removed through directory file
descriptors (``shutil.rmtree`` with ``dir_fd``, which never descends into a
link): a link at the work root is refused with its path named, never followed
or deleted through. A link where a batch's work directory should be lies
inside the harness's own root and leads nowhere the harness made, so it is
removed as the link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from agent_eval.errors import CleanupError

__all__ = ["WORK_ROOT", "make_work_dir", "remove_work_dir"]

WORK_ROOT = ".work"
"""The directory under the evidence directory holding each running batch's work directory."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refused(path: Path) -> CleanupError:
    return CleanupError(
        f"{path} is a symbolic link (or not a directory); it is neither followed nor removed "
        "through: remove it by hand and run again"
    )


@contextlib.contextmanager
def _open_dir(name: str, path: Path, dir_fd: int | None) -> Iterator[int]:
    """The directory *name* opened without following a link (*dir_fd* None: the evidence
    directory itself, which the project names and may reach through a link); *path* names it."""
    flags = _DIR_FLAGS if dir_fd is not None else _DIR_FLAGS & ~os.O_NOFOLLOW
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refused(path) from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def make_work_dir(evidence_dir: Path, batch_id: str) -> Path:
    """Create the work directory of *batch_id* (and the work root), refusing any link on the way.

    Returns:
        Its path.

    Raises:
        CleanupError: The work root or the batch's work directory is a link.
        OSError: It could not be created.
    """
    root = evidence_dir / WORK_ROOT
    with _open_dir(str(evidence_dir), evidence_dir, None) as top:
        with contextlib.suppress(FileExistsError):
            os.mkdir(WORK_ROOT, 0o700, dir_fd=top)
        with _open_dir(WORK_ROOT, root, top) as work:
            with contextlib.suppress(FileExistsError):
                os.mkdir(batch_id, 0o700, dir_fd=work)
            with _open_dir(batch_id, root / batch_id, work):
                pass
    return root / batch_id


def remove_work_dir(evidence_dir: Path, batch_id: str) -> bool:
    """Remove the work directory of *batch_id*, and the work root once it is empty.

    Nothing under the evidence directory is followed: the tree is removed through
    directory file descriptors.

    Returns:
        Whether there was one to remove.

    Raises:
        CleanupError: The work root is a link, or the work directory could not be removed.
    """
    root = evidence_dir / WORK_ROOT
    path = root / batch_id
    try:
        with (
            _open_dir(str(evidence_dir), evidence_dir, None) as top,
            _open_dir(WORK_ROOT, root, top) as work,
        ):
            try:
                mode = os.lstat(batch_id, dir_fd=work).st_mode
            except FileNotFoundError:
                return False
            failures: list[str] = []
            if stat.S_ISDIR(mode):
                shutil.rmtree(
                    batch_id,
                    dir_fd=work,
                    onerror=lambda _f, p, e: failures.append(f"{p}: {e[1]}"),
                )
            else:
                os.unlink(batch_id, dir_fd=work)  # the link (or file), never where it leads
            if failures:
                raise CleanupError(
                    f"cannot remove the work directory {path}: " + "; ".join(failures)
                )
            with contextlib.suppress(OSError):
                os.rmdir(WORK_ROOT, dir_fd=top)  # only once no other batch works there
    except FileNotFoundError:
        return False
    except CleanupError:
        raise
    except OSError as exc:
        raise CleanupError(
            f"cannot remove the work directory {path}: {exc.strerror or exc}"
        ) from None
    return True
