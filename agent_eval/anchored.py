"""Directories made, filled and removed below an anchor without following a link.

The anchor is a directory the project names (the evidence directory, a node's
root), which may itself be reached through a link. Everything below it is
reached one name at a time, each directory opened with ``O_NOFOLLOW`` relative
to its parent's descriptor and never by its path again, so a component swapped
for a link at any moment, between two checks or mid-walk, leads to nothing
made or deleted outside: the link is refused with its path named. Trees are
removed through directory descriptors (``shutil.rmtree`` with ``dir_fd``, which
never descends into a link); a link where the tree to remove should be is
removed as the link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from agent_eval.errors import CleanupError

__all__ = ["copy_into", "make_dirs", "open_dir", "remove_tree", "replace_file"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refused(path: Path) -> CleanupError:
    return CleanupError(
        f"{path} is a symbolic link (or not a directory); it is neither followed nor removed "
        "through: remove it by hand and run again"
    )


@contextlib.contextmanager
def open_dir(name: str, path: Path, dir_fd: int | None) -> Iterator[int]:
    """The directory *name* opened without following a link (*dir_fd* None: an anchor
    itself, which the project names and may reach through a link); *path* names it."""
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


def _below(anchor: Path, path: Path) -> tuple[str, ...]:
    """The names leading from *anchor* down to *path* (a path the harness built below it)."""
    parts = path.relative_to(anchor).parts
    if not parts or any(part in (".", "..") for part in parts):
        raise ValueError(f"{path} is not a directory below {anchor}")
    return parts


@contextlib.contextmanager
def _walk(
    anchor: Path, names: Sequence[str], *, mode: int | None = None, exist_ok: bool = True
) -> Iterator[int]:
    """*anchor*'s directory *names* opened one below the other, none through a link; with
    *mode*, each missing one is made (the last must not exist unless *exist_ok*)."""
    with contextlib.ExitStack() as stack:
        fd = stack.enter_context(open_dir(str(anchor), anchor, None))
        path = anchor
        for index, name in enumerate(names):
            path = path / name
            if mode is not None:
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:
                    if not exist_ok and index == len(names) - 1:
                        raise
            fd = stack.enter_context(open_dir(name, path, fd))
        yield fd


def make_dirs(anchor: Path, path: Path, mode: int = 0o700, *, exist_ok: bool = True) -> Path:
    """Make *path* and each missing directory between it and *anchor*, following no link.

    *anchor* is a directory the project names (it may itself be reached through a
    link); each name below it is made with ``mkdir`` in its parent's descriptor and
    opened with ``O_NOFOLLOW``, so a component swapped for a link at any moment makes
    nothing outside.

    Returns:
        *path*.

    Raises:
        CleanupError: A directory on the way is a link (or not a directory).
        FileExistsError: *path* exists and *exist_ok* is false.
        OSError: A directory could not be made.
    """
    with _walk(anchor, _below(anchor, path), mode=mode, exist_ok=exist_ok):
        pass
    return path


def copy_into(source: Path, anchor: Path, path: Path, mode: int = 0o700) -> Path:
    """Copy the tree *source* to the new directory *path* below *anchor* (links as links).

    *path* is made as :func:`make_dirs` makes it, and everything in it is created
    relative to a descriptor of its parent with ``O_EXCL``/``O_NOFOLLOW``: nothing is
    written through a link, wherever one appears meanwhile.

    Raises:
        CleanupError: A directory on the way is a link.
        FileExistsError: *path* exists.
        OSError: *source* could not be read or a copy could not be written.
    """
    with _walk(anchor, _below(anchor, path), mode=mode, exist_ok=False) as fd:
        _copy_entries(source, fd)
        _copy_meta(os.stat(source), fd)
    return path


def _copy_meta(info: os.stat_result, fd: int) -> None:
    os.fchmod(fd, stat.S_IMODE(info.st_mode))
    os.utime(fd, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy_entries(source: Path, into: int) -> None:
    with os.scandir(source) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(entry.path), entry.name, dir_fd=into)
            elif stat.S_ISDIR(info.st_mode):
                os.mkdir(entry.name, 0o700, dir_fd=into)
                with open_dir(entry.name, Path(entry.path), into) as sub:
                    _copy_entries(Path(entry.path), sub)
                    _copy_meta(info, sub)
            elif stat.S_ISREG(info.st_mode):
                # Read through no link either: one swapped in since the scan would copy
                # whatever it names into a directory the runner reads.
                read = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                with (
                    open(os.open(entry.path, read), "rb") as reader,
                    open(os.open(entry.name, flags, 0o600, dir_fd=into), "wb") as writer,
                ):
                    if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
                        raise OSError(errno.EINVAL, f"{entry.path} is no longer a regular file")
                    shutil.copyfileobj(reader, writer)
                    writer.flush()
                    _copy_meta(info, writer.fileno())
            # Anything else (a socket, a device) is not a file of a solution: not copied.


def hand_over(anchor: Path, path: Path, uid: int, gid: int, dir_mode: int = 0o755) -> None:
    """Give the tree *path* below *anchor* to *uid*:*gid*, its directories *dir_mode*,
    through no link: each directory is changed through its own descriptor, each other
    entry (a link as the link) relative to its directory's, so nothing outside the tree
    changes owner or mode, whatever is swapped in meanwhile.

    Raises:
        CleanupError: A directory on the way, or *path* itself, is a link.
        OSError: An owner or mode could not be changed.
    """
    *parents, name = _below(anchor, path)
    with _walk(anchor, parents) as parent, open_dir(name, path, parent) as top:
        for _, _, files, fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            os.fchown(fd, uid, gid)
            os.fchmod(fd, dir_mode)
            for file in files:
                os.chown(file, uid, gid, dir_fd=fd, follow_symlinks=False)


def remove_tree(anchor: Path, path: Path) -> bool:
    """Remove *path* below *anchor*, following no link on the way or inside it.

    Each directory between *anchor* and *path* is opened with ``O_NOFOLLOW``, so one
    swapped for a link is refused, never deleted through; the tree is removed through
    its parent's descriptor (``shutil.rmtree`` with ``dir_fd``, which never descends into
    a link); a *path* that is itself a link is removed as the link.

    Returns:
        Whether there was one to remove.

    Raises:
        CleanupError: A directory on the way is a link, or the tree could not be removed.
    """
    *parents, name = _below(anchor, path)
    try:
        with _walk(anchor, parents) as parent:
            try:
                mode = os.lstat(name, dir_fd=parent).st_mode
            except FileNotFoundError:
                return False
            failures: list[str] = []
            if stat.S_ISDIR(mode):
                shutil.rmtree(
                    name,
                    dir_fd=parent,
                    onerror=lambda _f, p, e: failures.append(f"{p}: {e[1]}"),
                )
            else:
                os.unlink(name, dir_fd=parent)  # the link (or file), never where it leads
    except FileNotFoundError:
        return False
    except CleanupError:
        raise
    except OSError as exc:
        raise CleanupError(f"cannot remove {path}: {exc.strerror or exc}") from None
    if failures:
        raise CleanupError(f"cannot remove {path}: " + "; ".join(failures))
    return True


def replace_file(anchor: Path, path: Path, data: bytes) -> None:
    """Replace the file *path* below *anchor* with *data* atomically, through no link.

    As :func:`agent_eval.evidence_io.write_bytes_atomic` does (a temp file of the same
    name pattern beside it, then a rename; only a regular file or a link is replaced),
    but in its directory's descriptor, reached from *anchor* as :func:`make_dirs` does.

    Raises:
        CleanupError: A directory on the way is a link.
        OSError: It could not be written, or *path* is neither a file nor a link.
    """
    *parents, name = _below(anchor, path)
    with _walk(anchor, parents) as parent:
        try:
            mode = os.lstat(name, dir_fd=parent).st_mode
        except FileNotFoundError:
            pass
        else:
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                raise OSError(
                    errno.EEXIST, "exists and is not a regular file; it is never replaced"
                )
        temp = f".{name}.{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            with open(os.open(temp, flags, 0o600, dir_fd=parent), "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=parent)
            raise
        os.fsync(parent)
