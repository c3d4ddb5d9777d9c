"""What the child does to itself before any submitted code runs.

Order matters: the OOM score is raised while the child may still write its
own ``/proc`` entry (it cannot after the drop), resource limits are set
while they can still be set at any value, and only then are groups, GID and
UID dropped, in that order, and the drop verified by failing to regain root.
Last, the child makes its private working directory as its own UID: the
parent keeps no CAP_CHOWN, so it could not hand over a directory it made.
"""

from __future__ import annotations

import errno
import os
import resource
import stat
import time
from collections.abc import Callable

__all__ = [
    "IsolationError",
    "apply_limits",
    "drop_privileges",
    "make_workdir",
    "raise_oom_score",
    "remove_tree",
    "sweep_own_state",
]


class IsolationError(RuntimeError):
    """The child could not isolate itself; nothing of the solution may run."""


def raise_oom_score(path: str = "/proc/self/oom_score_adj") -> None:
    """Make this process the OOM killer's first choice (not the parent)."""
    try:
        with open(path, "w", encoding="ascii") as handle:
            handle.write("1000")
    except OSError as exc:
        raise IsolationError(f"cannot write {path}: {exc.strerror}") from exc


def _set(limit: int, soft: int, hard: int, name: str) -> None:
    try:
        resource.setrlimit(limit, (soft, hard))
    except (OSError, ValueError) as exc:
        raise IsolationError(f"cannot set {name} to {soft}/{hard}: {exc}") from exc


def apply_limits(
    *,
    memory_bytes: int,
    cpu_seconds: int,
    file_size_bytes: int,
    open_files: int,
    max_processes: int | None,
) -> None:
    """Set the resource limits every solution process runs under (inherited by its children).

    CPU time gets one second of grace between SIGXCPU and SIGKILL. Core dumps
    are disabled. Process counting is per UID across the host, so it is left
    to the container's pids limit unless the job sets it (with a distinct UID
    per concurrent slot).
    """
    _set(resource.RLIMIT_CORE, 0, 0, "RLIMIT_CORE")
    _set(resource.RLIMIT_AS, memory_bytes, memory_bytes, "RLIMIT_AS")
    _set(resource.RLIMIT_DATA, memory_bytes, memory_bytes, "RLIMIT_DATA")
    _set(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1, "RLIMIT_CPU")
    _set(resource.RLIMIT_FSIZE, file_size_bytes, file_size_bytes, "RLIMIT_FSIZE")
    _set(resource.RLIMIT_NOFILE, open_files, open_files, "RLIMIT_NOFILE")
    if max_processes is not None:
        _set(resource.RLIMIT_NPROC, max_processes, max_processes, "RLIMIT_NPROC")


def _capabilities_cleared(status_path: str = "/proc/self/status") -> bool:
    try:
        with open(status_path, encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return True  # no /proc: the UID checks below still hold
    for line in lines:
        name, _, value = line.partition(":")
        if name in {"CapInh", "CapPrm", "CapEff", "CapAmb"} and int(value.strip(), 16) != 0:
            return False
    return True


def drop_privileges(uid: int, gid: int) -> None:
    """Become *uid*/*gid* for good: no supplementary groups, no saved IDs, no capabilities.

    Raises:
        IsolationError: A step failed, or root could be regained afterwards.
    """
    if uid == 0 or gid == 0:
        raise IsolationError("the solution may not run as UID or GID 0")
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        raise IsolationError(f"cannot drop to {uid}:{gid}: {exc.strerror}") from exc
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise IsolationError(f"the drop to {uid}:{gid} did not take effect")
    if os.getgroups() not in ([], [gid]):
        raise IsolationError("supplementary groups survived the drop")
    regains: list[Callable[[], None]] = [
        lambda: os.setuid(0),
        lambda: os.setresuid(0, 0, 0),
        lambda: os.setgid(0),
    ]
    for regain in regains:
        try:
            regain()
        except PermissionError:
            continue
        raise IsolationError("root could be regained after the drop")
    if not _capabilities_cleared():
        raise IsolationError("capabilities survived the drop")


def make_workdir(path: str) -> None:
    """Create *path* (mode 0700, owned by whoever runs this) and make it the working directory.

    It must not exist yet: a directory that is already there may have been
    planted by an earlier process of the solution.
    """
    try:
        os.mkdir(path, 0o700)
        os.chdir(path)
    except OSError as exc:
        raise IsolationError(f"cannot make the working directory {path}: {exc.strerror}") from exc


_IPC_KINDS = {"shm": "shmid", "msg": "msqid", "sem": "semid"}
_IPC_RMID = 0


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _check_time(cpu_deadline: float | None) -> None:
    if cpu_deadline is not None and time.process_time() > cpu_deadline:
        raise IsolationError("removing it took longer than its share of the start's time")


def _clear_files(fd: int, cpu_deadline: float | None) -> list[str]:
    """Unlink every entry of the directory *fd* but its subdirectories; their names."""
    subdirectories = []
    with os.scandir(fd) as entries:
        for entry in entries:
            _check_time(cpu_deadline)
            if entry.is_dir(follow_symlinks=False):
                subdirectories.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return subdirectories


def _enter(name: str, dir_fd: int | None = None) -> tuple[int, int, int]:
    """Open the directory *name* (never through a symbolic link), made 0700; (fd, dev, inode).

    Its owner may, and must to list and empty it: the solution may have made
    it unreadable or unwritable.
    """
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=dir_fd)
    except PermissionError:
        try:
            os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
        except (NotImplementedError, ValueError):  # how Python refuses a symbolic link
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        fd = os.open(name, _DIRECTORY, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_dev, info.st_ino


def remove_tree(path: str, cpu_deadline: float | None = None) -> None:
    """Remove the directory *path* and everything in it, however deep or wide.

    No recursion and a fixed handful of descriptors whatever the depth (the
    child runs under a small RLIMIT_NOFILE, and a tree is as deep as the
    solution made it): one directory is open at a time, and the way back up
    is "..", checked to lead back to the directory it came from (a tree moved
    meanwhile is not followed out of itself). No symbolic link is followed,
    *path* included. Every directory is made 0700 as it is entered: its owner
    may, and must to empty it.

    Raises:
        OSError: Something could not be removed.
        IsolationError: The process's CPU time passed *cpu_deadline*.
    """
    fd, device, inode = _enter(path)
    here = (device, inode)
    try:
        pending = [_clear_files(fd, cpu_deadline)]
        # Per directory entered below *path*: its name, and where its parent is.
        entered: list[tuple[str, tuple[int, int]]] = []
        while True:
            _check_time(cpu_deadline)
            if pending[-1]:
                name = pending[-1].pop()
                inner, device, inode = _enter(name, fd)
                fd, above = inner, fd
                os.close(above)
                entered.append((name, here))
                here = (device, inode)
                pending.append(_clear_files(fd, cpu_deadline))
                continue
            pending.pop()
            if not entered:
                break
            name, here = entered.pop()
            fd, below = os.open("..", _DIRECTORY, dir_fd=fd), fd
            os.close(below)
            back = os.fstat(fd)
            if (back.st_dev, back.st_ino) != here:
                raise OSError(errno.ESTALE, "the tree was moved while it was removed", path)
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


def _remove_owned(path: str, uid: int, cpu_deadline: float | None) -> int:
    """Remove *path* when *uid* owns it (a tree with all it holds); 1 if removed."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0
    if info.st_uid != uid:
        return 0
    if stat.S_ISDIR(info.st_mode):
        remove_tree(path, cpu_deadline)
    else:
        os.unlink(path)
    return 1


def _remove_owned_ipc(uid: int) -> int:
    """Remove every System V IPC object *uid* owns or created (it may, as either).

    Its creator can hand an object to another owner (IPC_SET, even to root)
    and still use it: the creator column counts as much as the owner's.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    removed = 0
    for kind, id_column in _IPC_KINDS.items():
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="ascii") as handle:
                header, *rows = handle.read().splitlines()
        except OSError:
            continue  # no System V IPC here: nothing to remove
        names = header.split()
        for row in rows:
            fields = dict(zip(names, row.split(), strict=False))
            if str(uid) not in (fields.get("uid"), fields.get("cuid")):
                continue
            ident = int(fields[id_column])
            if kind == "shm":
                result = libc.shmctl(ident, _IPC_RMID, None)
            elif kind == "msg":
                result = libc.msgctl(ident, _IPC_RMID, None)
            else:
                result = libc.semctl(ident, 0, _IPC_RMID)
            if result != 0:
                raise IsolationError(
                    f"cannot remove {kind} {ident}: {os.strerror(ctypes.get_errno())}"
                )
            removed += 1
    return removed


def sweep_own_state(
    paths: list[str], *, keep: str | None = None, cpu_budget_s: float | None = None
) -> int:
    """Remove what this (unprivileged) UID owns in *paths*, and its System V IPC objects.

    Runs in the child after the privilege drop and before the solution is
    imported. Every process of the solution ran as this UID and was killed
    when its scenario ended, so what it owns in a shared writable place (a
    file planted in ``/tmp``, ``/dev/shm`` or ``/dev/mqueue``, a shared memory
    segment) can only be state an earlier scenario left for a later one; only
    *keep* (this scenario's working directory) is spared. The sweep gives up
    once it has used *cpu_budget_s* of this process's CPU time: how much there
    is to remove is the solution's doing.

    Returns:
        How many entries and objects were removed.

    Raises:
        IsolationError: Something of this UID's could not be removed (in time).
    """
    uid = os.getuid()
    if not paths:
        return 0
    if uid == 0:
        raise IsolationError("the sweep runs only after the privilege drop")
    cpu_deadline = None if cpu_budget_s is None else time.process_time() + cpu_budget_s
    removed = 0
    try:
        for root in paths:
            try:
                entries = os.scandir(root)
            except FileNotFoundError:
                continue
            with entries:
                for entry in entries:
                    _check_time(cpu_deadline)
                    if entry.path != keep:
                        removed += _remove_owned(entry.path, uid, cpu_deadline)
        removed += _remove_owned_ipc(uid)
    except (OSError, IsolationError) as exc:
        raise IsolationError(f"cannot remove state left by an earlier scenario: {exc}") from exc
    return removed
