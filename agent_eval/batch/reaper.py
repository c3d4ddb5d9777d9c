"""The reaper: batches whose owner died are closed, and nothing they started is left.

A batch killed with SIGKILL (or lost with its machine) leaves its lease, its
receipt saying ``running``, perhaps containers and a work directory. The next
``eval-agent``, and ``agent-eval cleanup``, find every lease whose owner is
no longer alive, mark such a receipt ``abandoned`` with the reason (every
finished run stays as recorded), remove the batch's containers by label and
its work directory and the temp files a killed atomic write left in its run
directory, and give the lease up once all of that is confirmed. Containers are
removed only when they carry both the batch label and the lease's token (a
label is only a name); the work directory, the lease and the reserved space
are removed from the evidence directory down without following a link. A
``tasks verify`` lease's directory holds no run: no receipt is written there,
and the directory goes with the lease once nothing else is in it. A batch
whose owner is alive is never touched.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from agent_eval.anchored import open_dir, remove_tree, replace_file
from agent_eval.batch.lease import owner_alive, read_lease
from agent_eval.batch.workdir import remove_work_dir
from agent_eval.engine import ContainerRuntime, remove_leftovers
from agent_eval.errors import AgentEvalError, CleanupError
from agent_eval.evidence_io import (
    MAX_EVIDENCE_BYTES,
    model_bytes,
    read_model,
    remove_atomic_temp_files,
)
from agent_eval.layout import RunDirectory
from agent_eval.models import Lease, Receipt

__all__ = ["NodeEngines", "Reaped", "reap"]

NodeEngines = Callable[[str], AbstractContextManager[ContainerRuntime]]
"""Connects to a cluster node's engine by its address, as the receipt's ``nodes`` records it
(and closes it on exit)."""


@dataclass(frozen=True)
class Reaped:
    """What the reaper did for one batch whose owner was gone."""

    batch_id: str
    run_dir: Path
    abandoned: bool
    """Its receipt said running and now says abandoned."""
    containers: list[str] = field(default_factory=list)
    """Containers of the batch it removed."""
    work_dir_removed: bool = False
    temp_files: list[str] = field(default_factory=list)
    """Half-written evidence files it removed (their writer was killed before renaming them)."""
    problems: list[str] = field(default_factory=list)
    """What could not be done (the lease is kept, so a later run tries again)."""
    unreached: list[str] = field(default_factory=list)
    """Cluster nodes whose engines could not be reached from here: their own reapers remove
    the batch's containers there when they next prepare for a batch."""

    def describe(self) -> str:
        """One line for the operator."""
        done = []
        if self.abandoned:
            done.append("marked its receipt abandoned")
        if self.containers:
            done.append(f"removed {len(self.containers)} container(s)")
        if self.work_dir_removed:
            done.append("removed its work directory")
        if self.temp_files:
            done.append(f"removed {len(self.temp_files)} half-written temp file(s)")
        text = f"reaped batch {self.batch_id}: " + (", ".join(done) or "nothing was left")
        if self.problems:
            text += "; not done: " + "; ".join(self.problems)
        if self.unreached:
            text += "; not reached: " + "; ".join(self.unreached)
        return text


def reap(
    evidence_dir: Path,
    engine: ContainerRuntime,
    *,
    clock: Callable[[], datetime],
    nodes: NodeEngines | None = None,
) -> list[Reaped]:
    """Close every batch under *evidence_dir* whose lease's owner is no longer alive.

    A cluster batch's containers are on its nodes' engines too (the receipt's
    ``nodes``): each is swept through *nodes* where it can be reached from here,
    and listed in ``unreached`` where it cannot (or without *nodes*)."""
    reaped: list[Reaped] = []
    if not evidence_dir.is_dir():
        return reaped
    for run_dir in sorted(p for p in evidence_dir.iterdir() if not p.name.startswith(".")):
        if not run_dir.is_dir() or run_dir.is_symlink():
            continue
        try:
            lease = read_lease(run_dir)
        except AgentEvalError as exc:
            reaped.append(Reaped(run_dir.name, run_dir, False, problems=[str(exc)]))
            continue
        if lease is None or owner_alive(lease):
            continue
        if lease.batchId != run_dir.name:
            # Its id would pick containers by label and a work directory: only the
            # batch this directory is may be acted on, so nothing is.
            problem = (
                f"its lease names batch {lease.batchId!r}, not {run_dir.name!r} whose "
                "directory holds it; nothing was done (remove the lease by hand once you "
                "know whose it is)"
            )
            reaped.append(Reaped(run_dir.name, run_dir, False, problems=[problem]))
            continue
        reaped.append(_reap_one(evidence_dir, run_dir, lease, engine, clock(), nodes))
    return reaped


def _reap_one(
    evidence_dir: Path,
    run_dir: Path,
    lease: Lease,
    engine: ContainerRuntime,
    now: datetime,
    nodes: NodeEngines | None,
) -> Reaped:
    problems: list[str] = []
    evidence = RunDirectory(run_dir)
    abandoned = False
    batch = lease.kind == "batch"  # a tasks-verify lease's directory holds nothing else
    # Its owner is gone, so no write of its is under way: what a kill left half-written goes.
    temp_files: list[str] = []
    try:
        if batch:
            temp_files = [
                p.relative_to(run_dir).as_posix() for p in remove_atomic_temp_files(run_dir)
            ]
    except OSError as exc:
        problems.append(f"cannot remove its half-written temp files: {exc.strerror or exc}")
    receipt: Receipt | None
    if not batch:
        receipt = None
    elif not evidence.receipt.exists() and not evidence.receipt.is_symlink():
        # Killed before its first receipt: it is closed with one that says just that.
        receipt = Receipt.opened(batch_id=run_dir.name, created_at=lease.startedAt)
    else:
        try:
            receipt = read_model(
                evidence.receipt, Receipt, what="receipt", max_bytes=MAX_EVIDENCE_BYTES
            )
        except AgentEvalError as exc:
            receipt = None
            problems.append(f"its receipt cannot be read ({exc}); left as it is")
    if receipt is not None and receipt.status == "running":
        reason = (
            f"abandoned: the process that ran it (pid {lease.pid} on {lease.host}, started "
            f"{lease.startedAt.isoformat()}, last alive {lease.heartbeatAt.isoformat()}) is "
            f"gone; closed by the reaper at {now.isoformat()}"
        )
        closed = receipt.model_copy(
            update={"status": "abandoned", "reasons": [*receipt.reasons, reason], "updatedAt": now}
        )
        try:
            # From the evidence directory down: a run directory swapped for a link since
            # it was listed gets nothing written behind it.
            replace_file(evidence_dir, evidence.receipt, model_bytes(closed))
            abandoned = True
        except CleanupError as exc:
            problems.append(f"cannot rewrite its receipt: {exc}")
        except OSError as exc:
            problems.append(f"cannot rewrite its receipt: {exc.strerror or exc}")
    containers: list[str] = []
    if lease.token is None:
        # Fail closed: without a token the batch label is all there is, and a directory
        # named like another batch's label would have its containers removed.
        problems.append(
            "its lease has no token (an older agent-eval wrote it), so its containers are not "
            f"removed by their batch label alone; remove those labelled "
            f"agent-eval.batch={lease.batchId} by hand once you know they are its own, then "
            "its lease.json"
        )
    elif lease.engine is not None and lease.engine != engine.address:
        # Finding none here would prove nothing: its containers are on another engine.
        problems.append(
            f"its containers are on the engine at {lease.engine}, not this one "
            f"({engine.address}); run agent-eval cleanup --runtime-path {lease.engine}"
        )
    else:
        try:
            containers = remove_leftovers(engine, lease.batchId, lease_token=lease.token)
        except AgentEvalError as exc:
            problems.append(str(exc))
    unreached: list[str] = []
    for node in (receipt.nodes or []) if receipt is not None and lease.token else []:
        if node.engine == engine.address:
            continue  # swept above
        try:
            if nodes is None:
                raise AgentEvalError("no way to reach a node's engine was given")
            with nodes(node.engine) as there:
                containers += remove_leftovers(there, lease.batchId, lease_token=lease.token)
        except AgentEvalError as exc:
            unreached.append(
                f"node {node.node}: its engine at {node.engine} could not be reached from "
                f"here ({exc}); its reaper removes the batch's containers when the node next "
                f"prepares for a batch, or run agent-eval cleanup --runtime-path {node.engine} "
                "on it"
            )
    had_work = False
    try:
        had_work = batch and remove_work_dir(evidence_dir, run_dir.name)
    except AgentEvalError as exc:
        problems.append(str(exc))
    if not problems:
        try:
            # The space set aside for its final receipt goes with it; from the evidence
            # directory down, so a run directory swapped for a link deletes nothing outside.
            remove_tree(evidence_dir, evidence.reserve)
            remove_tree(evidence_dir, evidence.lease)
            if not batch:
                _remove_if_empty(evidence_dir, run_dir.name)
        except AgentEvalError as exc:
            problems.append(str(exc))
    return Reaped(
        lease.batchId,
        run_dir,
        abandoned,
        containers=containers,
        work_dir_removed=had_work,
        temp_files=temp_files,
        problems=problems,
        unreached=unreached,
    )


def _remove_if_empty(evidence_dir: Path, name: str) -> None:
    """Remove the directory *name* of *evidence_dir* if nothing is left in it (a
    tasks-verify lease's directory: anything more there is not the reaper's to remove)."""
    with contextlib.suppress(OSError), open_dir(str(evidence_dir), evidence_dir, None) as top:
        os.rmdir(name, dir_fd=top)
