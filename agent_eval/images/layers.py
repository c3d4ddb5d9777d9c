"""Deterministic layer tarballs: the same entries give the same bytes on any machine.

A layer is a list of :class:`Entry` (a directory, a regular file or a
symlink, each at an absolute path of the image). :func:`write_layer` writes
them as an uncompressed POSIX (pax) tar, which is what a layer's ``diff_id``
hashes, with everything that usually varies fixed:

* entries sorted by path, each directory before what it holds;
* every mtime :data:`EPOCH` (the ``SOURCE_DATE_EPOCH`` of every image here);
* numeric owners only (uid/gid as given, user and group names empty);
* modes given explicitly: :func:`tree` maps a host tree to 0755 directories
  and 0644 files (0755 when the owner may execute), so no setuid, setgid or
  sticky bit and no host umask ever reaches an image.

Nothing here reads the clock, the host's users or the order of a directory
listing.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Literal, Protocol, cast

from agent_eval.errors import ConfigError

__all__ = [
    "EPOCH",
    "Entry",
    "HashingWriter",
    "directory",
    "regular",
    "tree",
    "write_layer",
]

EPOCH = 0
"""The timestamp of every file, layer and config written here (1970-01-01T00:00:00Z)."""

_CHUNK = 1 << 20

Kind = Literal["dir", "file", "symlink"]


class Sink(Protocol):
    """Where a layer is written."""

    def write(self, data: bytes, /) -> int:
        """Write *data*; return how many bytes were taken."""


@dataclass(frozen=True)
class Entry:
    """One tar entry of a layer."""

    path: str
    """Absolute POSIX path in the image."""
    kind: Kind
    """dir, file or symlink."""
    mode: int
    """Permission bits (``0o7777`` at most)."""
    uid: int = 0
    """Numeric owner."""
    gid: int = 0
    """Numeric group."""
    source: Path | None = None
    """A regular file's content on the host (or *data*)."""
    data: bytes | None = None
    """A regular file's content (or *source*)."""
    link: str = ""
    """A symlink's target."""
    mtime: int = EPOCH
    """Modification time; :data:`EPOCH` unless a base file is re-added as it was."""

    def __post_init__(self) -> None:
        pure = PurePosixPath(self.path)
        if (
            not pure.is_absolute()
            or ".." in pure.parts
            or str(pure) != self.path
            or len(pure.parts) < 2
        ):
            raise ConfigError(
                f"layer entry {self.path!r} is not a normalised absolute path below /"
            )
        if self.mode & ~0o7777:
            raise ConfigError(f"layer entry {self.path}: mode {self.mode:o} has file-type bits")
        if self.kind == "file" and (self.source is None) == (self.data is None):
            raise ConfigError(f"layer entry {self.path}: a file needs exactly one of source, data")


def directory(path: str, mode: int = 0o755, *, uid: int = 0, gid: int = 0) -> Entry:
    """A directory entry."""
    return Entry(path, "dir", mode, uid, gid)


def regular(path: str, data: bytes, mode: int = 0o644, *, uid: int = 0, gid: int = 0) -> Entry:
    """A regular file with inline content."""
    return Entry(path, "file", mode, uid, gid, data=data)


def tree(source: Path, target: str, *, skip: Sequence[str] = ()) -> list[Entry]:
    """Every directory, file and symlink under *source*, placed at *target* (root-owned).

    Directories become 0755, files 0644 or, when the owner may execute them,
    0755. Hard links become separate files. *skip* names paths relative to
    *source* left out with everything below them.

    Raises:
        ConfigError: *source* is not a directory or holds a special file (a
            socket, a FIFO, a device).
    """
    if not source.is_dir():
        raise ConfigError(f"{source}: not a directory")
    entries = [directory(target)]
    skipped = {PurePosixPath(s) for s in skip}
    for dirpath, dirnames, filenames in os.walk(source):
        here = Path(dirpath)
        rel_dir = PurePosixPath(here.relative_to(source).as_posix())
        dirnames[:] = sorted(d for d in dirnames if (rel_dir / d) not in skipped)
        for name in [*dirnames, *sorted(filenames)]:
            rel = rel_dir / name
            if rel in skipped:
                continue
            path = here / name
            image_path = str(PurePosixPath(target) / rel)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                entries.append(Entry(image_path, "symlink", 0o777, link=os.readlink(path)))
            elif stat.S_ISDIR(info.st_mode):
                entries.append(directory(image_path))
            elif stat.S_ISREG(info.st_mode):
                mode = 0o755 if info.st_mode & stat.S_IXUSR else 0o644
                entries.append(Entry(image_path, "file", mode, source=path))
            else:
                raise ConfigError(f"{path}: a special file cannot go into an image")
    return entries


class HashingWriter(io.RawIOBase):
    """A write-only stream that hashes what passes through and optionally keeps it."""

    def __init__(self, keep: IO[bytes] | None = None) -> None:
        super().__init__()
        self._hash = hashlib.sha256()
        self._keep = keep
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        view = bytes(data)
        self._hash.update(view)
        self.size += len(view)
        if self._keep is not None:
            self._keep.write(view)
        return len(view)

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of everything written so far."""
        return "sha256:" + self._hash.hexdigest()


def _sort_key(entry: Entry) -> tuple[str, ...]:
    # Component-wise, so that a directory's entries follow it directly.
    return PurePosixPath(entry.path).parts


def _header(entry: Entry) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.path.lstrip("/"))
    info.mode = entry.mode
    info.uid, info.gid = entry.uid, entry.gid
    info.uname = info.gname = ""
    info.mtime = entry.mtime
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
    elif entry.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = entry.link
    else:
        info.type = tarfile.REGTYPE
    return info


def write_layer(entries: Iterable[Entry], out: Sink, *, parents: Iterable[str] = ()) -> None:
    """Write *entries* to *out* as one deterministic layer tar.

    Args:
        entries: The layer's content; every path once.
        out: Where the tar goes (a :class:`HashingWriter` gives its diff_id).
        parents: Directories that exist below the layer (in the image it is
            applied to); any other parent of an entry must be an entry itself.

    Raises:
        ConfigError: A path is given twice, or a parent directory is neither
            an entry nor in *parents*.
    """
    ordered = sorted(entries, key=_sort_key)
    seen: dict[str, Entry] = {}
    for entry in ordered:
        if entry.path in seen:
            raise ConfigError(f"layer entry {entry.path} is given twice")
        seen[entry.path] = entry
    below = set(parents) | {"/"}
    for entry in ordered:
        parent = str(PurePosixPath(entry.path).parent)
        if parent not in below and (parent not in seen or seen[parent].kind != "dir"):
            raise ConfigError(
                f"layer entry {entry.path}: its directory {parent} is not in the image"
            )
    with tarfile.open(fileobj=cast(IO[bytes], out), mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for entry in ordered:
            info = _header(entry)
            if entry.kind != "file":
                tar.addfile(info)
            elif entry.data is not None:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            else:
                assert entry.source is not None
                with open(entry.source, "rb") as handle:
                    info.size = os.fstat(handle.fileno()).st_size
                    tar.addfile(info, handle)
