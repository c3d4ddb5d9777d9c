"""Collecting a runner's output: only regular, bounded, allowlisted files.

The output directory is hostile input. It is walked without following links;
symbolic links, hard links, FIFOs, sockets and devices are refused and make the
collection hostile (the attempt fails); regular files outside the allowlist
are refused and recorded but do not fail the attempt. Allowed files are
re-opened without following links and copied with a size bound, so a file
swapped after the walk cannot redirect the copy.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval.digests import DIGEST_PREFIX
from agent_eval.models import RefusedPath, SolutionFile

__all__ = ["MAX_FILE_BYTES", "Collection", "collect_solution"]

MAX_FILE_BYTES = 512 * 1024
MAX_ENTRIES = 2000
MAX_DEPTH = 16
MAX_RECORDED_REFUSALS = 50


@dataclass
class Collection:
    """What was collected and what was refused.

    The refusals that make the collection hostile (links, special files, too
    many entries) come first in :attr:`refused` and are never cut for the
    sake of the ordinary ones (files outside the allowlist, oversized files):
    the reason an attempt failed is always on record.
    """

    files: list[SolutionFile] = field(default_factory=list)
    hostile: bool = False
    refused_total: int = 0
    _hostile: list[RefusedPath] = field(default_factory=list)
    _ordinary: list[RefusedPath] = field(default_factory=list)

    def refuse(self, path: str, reason: str, *, hostile: bool) -> None:
        self.refused_total += 1
        self.hostile = self.hostile or hostile
        kept = self._hostile if hostile else self._ordinary
        if len(kept) < MAX_RECORDED_REFUSALS:
            kept.append(RefusedPath(path=path[:1024], reason=reason[:200]))

    @property
    def refused(self) -> list[RefusedPath]:
        """Hostile refusals first, then ordinary ones, then a count of what was not listed."""
        listed = [*self._hostile, *self._ordinary]
        if self.refused_total > len(listed):
            listed.append(
                RefusedPath(path="…", reason=f"{self.refused_total - len(listed)} more not listed")
            )
        return listed


def collect_solution(source: Path, dest: Path, allowed: list[str]) -> Collection:
    """Copy allowlisted regular files from *source* into *dest* (created fresh)."""
    result = Collection()
    dest.mkdir(parents=True, exist_ok=False)
    wanted = set(allowed)
    seen = 0
    pending: list[tuple[Path, str, int]] = [(source, "", 0)]
    while pending:
        folder, prefix, depth = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            result.refuse(prefix or ".", f"unreadable directory: {exc.strerror}", hostile=True)
            continue
        for entry in entries:
            seen += 1
            rel = f"{prefix}{entry.name}"
            if seen > MAX_ENTRIES:
                result.refuse(
                    rel, f"more than {MAX_ENTRIES} entries; collection stopped", hostile=True
                )
                return result
            info = entry.stat(follow_symlinks=False)
            mode = info.st_mode
            if stat.S_ISLNK(mode):
                result.refuse(rel, "symbolic link", hostile=True)
            elif stat.S_ISDIR(mode):
                if depth >= MAX_DEPTH:
                    result.refuse(rel, "directory nesting too deep", hostile=True)
                else:
                    pending.append((Path(entry.path), rel + "/", depth + 1))
            elif not stat.S_ISREG(mode):
                result.refuse(rel, "special file (FIFO, socket or device)", hostile=True)
            elif info.st_nlink > 1:
                result.refuse(rel, "hard link", hostile=True)
            elif rel not in wanted:
                result.refuse(rel, "not in allowedOutputPaths", hostile=False)
            elif info.st_size > MAX_FILE_BYTES:
                result.refuse(rel, f"larger than {MAX_FILE_BYTES} bytes", hostile=False)
            else:
                _copy(Path(entry.path), rel, dest, result)
    result.files.sort(key=lambda f: f.path)
    return result


def _copy(path: Path, rel: str, dest: Path, result: Collection) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        result.refuse(rel, f"cannot open: {exc.strerror}", hostile=True)
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            result.refuse(rel, "changed into a link or special file while collecting", hostile=True)
            return
        data = os.read(fd, MAX_FILE_BYTES + 1)
        while len(data) <= MAX_FILE_BYTES and (chunk := os.read(fd, MAX_FILE_BYTES + 1)):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        result.refuse(rel, f"larger than {MAX_FILE_BYTES} bytes", hostile=False)
        return
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as handle:
        handle.write(data)
    digest = DIGEST_PREFIX + hashlib.sha256(data).hexdigest()
    result.files.append(SolutionFile(path=rel, sha256=digest, size=len(data)))
