"""The batch's lease: who owns a run directory, and whether that owner is still alive.

A batch takes its lease before anything else and refreshes it every few
seconds from a background thread; it gives the lease up only once its
containers and work directory are confirmed gone. A lease whose owner is no
longer alive (another boot, no such process, or a process that started at
another time: the pid was reused) marks a batch the reaper may close. Only
SIGKILL or power loss can leave a lease behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent_eval.anchored import make_dirs, open_dir, remove_tree
from agent_eval.errors import AgentEvalError, CleanupError
from agent_eval.evidence_io import read_model, write_model_atomic
from agent_eval.layout import RunDirectory
from agent_eval.models import Lease
from agent_eval.models.lease import LeaseKind

if TYPE_CHECKING:
    from agent_eval.engine import ContainerRuntime

__all__ = [
    "HEARTBEAT_S",
    "HeldLease",
    "held",
    "owner_alive",
    "read_lease",
    "this_process",
    "verification_lease",
]

HEARTBEAT_S = 5.0
"""How often a running batch refreshes its lease."""
_MAX_LEASE_BYTES = 16 * 1024


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return "unknown"


def _process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces.
    fields = stat.rpartition(")")[2].split()
    return int(fields[19]) if len(fields) > 19 else None


def this_process(
    batch_id: str, now: datetime, token: str | None = None, kind: LeaseKind = "batch"
) -> Lease:
    """A lease naming this process, with *token* (a new random one unless given)."""
    pid = os.getpid()
    return Lease(
        schemaVersion=1,
        batchId=batch_id,
        pid=pid,
        processStart=_process_start(pid) or 0,
        bootId=_boot_id(),
        host=socket.gethostname() or "unknown",
        startedAt=now,
        heartbeatAt=now,
        token=token or secrets.token_hex(16),
        kind=kind,
    )


def owner_alive(lease: Lease) -> bool:
    """Whether the lease's owner is a process running now on this machine."""
    if lease.bootId != _boot_id():
        return False
    return _process_start(lease.pid) == lease.processStart


def read_lease(run_dir: Path) -> Lease | None:
    """The lease of *run_dir*, or None when it has none.

    Raises:
        EvidenceError: The lease exists but is not a lease.
    """
    path = RunDirectory(run_dir).lease
    if not path.exists() and not path.is_symlink():
        return None
    return read_model(path, Lease, what="lease", max_bytes=_MAX_LEASE_BYTES, follow_symlinks=False)


class HeldLease:
    """A lease this process holds: refreshed in the background until given up."""

    def __init__(self, path: Path, lease: Lease, clock: Callable[[], datetime]) -> None:
        self._path = path
        self._lease = lease
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        write_model_atomic(path, lease)
        self._keeper = threading.Thread(target=self._beat, name="lease", daemon=True)
        self._keeper.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self._lock, contextlib.suppress(OSError):  # a full disk must not stop the batch
                self._lease = self._lease.model_copy(update={"heartbeatAt": self._clock()})
                write_model_atomic(self._path, self._lease)

    def bind_engine(self, engine: ContainerRuntime) -> None:
        """Record the engine the batch is about to start containers on (before the first),
        and have every container it creates there carry the lease's token.

        Raises:
            OSError: The lease could not be written.
        """
        with self._lock:
            self._lease = self._lease.model_copy(update={"engine": engine.address})
            write_model_atomic(self._path, self._lease)
            engine.lease_token = self._lease.token

    @property
    def batch_id(self) -> str:
        """The batch held: every container of it carries this batch label."""
        return self._lease.batchId

    @property
    def token(self) -> str | None:
        """The lease's token, which every container of the batch carries as its lease label."""
        return self._lease.token

    def release(self) -> None:
        """Give the lease up: the batch's containers and work directory are confirmed gone.

        Raises:
            OSError: It could not be removed, or its directory is now a link (the lease
                behind it is left as it is).
        """
        self.stop()
        try:
            # From the directory its run directory is in (the evidence directory, a node's
            # root): a run directory swapped for a link loses no lease.json behind it.
            remove_tree(self._path.parent.parent, self._path)
        except CleanupError as exc:
            raise OSError(errno.ELOOP, str(exc)) from None

    def stop(self) -> None:
        """Stop refreshing it (the process is ending); the file stays for the reaper."""
        self._stop.set()
        if self._keeper is not threading.current_thread():
            self._keeper.join(timeout=HEARTBEAT_S)


@contextlib.contextmanager
def held(
    run_dir: Path,
    batch_id: str,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    *,
    token: str | None = None,
    kind: LeaseKind = "batch",
) -> Iterator[HeldLease]:
    """Hold the lease of *run_dir* while the block runs.

    The lease is refreshed every :data:`HEARTBEAT_S` seconds. It is not given up
    when the block ends: only the caller knows when the batch's containers and
    work directory are gone, and calls :meth:`HeldLease.release` then. A batch
    whose cleanup was not confirmed keeps its lease, so the reaper finishes
    the cleanup once the owner has exited.
    """
    lease = HeldLease(
        RunDirectory(run_dir).lease, this_process(batch_id, clock(), token, kind), clock
    )
    try:
        yield lease
    finally:
        lease.stop()


@contextlib.contextmanager
def verification_lease(
    evidence_dir: Path,
    engine: ContainerRuntime,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    *,
    kind: Literal["tasks-verify", "reverify"] = "tasks-verify",
) -> Iterator[HeldLease]:
    """Hold a lease for verifications outside a batch on *engine* while the block runs:
    an ``agent-eval tasks verify`` run, or a ``check-agent-eval --reverify`` (*kind*).

    Its containers would otherwise carry a batch label alone, a name: the lease, in
    ``<evidence>/<kind>-<id>/``, gives them a token of their own (the engine is bound
    to it), so the reaper removes them after a kill and nothing else does. It is given
    up, with its directory, once no container carrying its token is left.

    Raises:
        CleanupError: A link was planted where its directory is made.
        OSError: Its directory or the lease could not be written.
    """
    batch_id = f"{kind}-{uuid.uuid4().hex[:12]}"
    evidence_dir.mkdir(parents=True, exist_ok=True)
    run_dir = make_dirs(evidence_dir, evidence_dir / batch_id, exist_ok=False)
    bound = engine.lease_token
    with held(run_dir, batch_id, clock, kind=kind) as lease:
        lease.bind_engine(engine)
        try:
            yield lease
        finally:
            engine.lease_token = bound  # the connection outlives the run (its caller's)
            try:
                containers = engine.list_containers(batch_id)
                done = not any(c.lease_token == lease.token for c in containers)
            except AgentEvalError:
                done = False  # not known: the lease stays for the reaper
            if done:
                lease.release()
                with (
                    contextlib.suppress(OSError),
                    open_dir(str(evidence_dir), evidence_dir, None) as top,
                ):
                    os.rmdir(batch_id, dir_fd=top)
