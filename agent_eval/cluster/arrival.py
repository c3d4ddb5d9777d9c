"""A run sent back by a node becomes evidence only once every file matches its record.

The node's schedule recorded a digest for each file it wrote (solution,
analysis, runner.log, transcript, gateway records); the driver recomputes
each on arrival and refuses a run with a file missing, changed or not
accounted for, before anything is written. The checker recomputes them all
again from the run directory.
"""

from __future__ import annotations

from pathlib import Path

from agent_eval.cluster.node import write_shipped
from agent_eval.digests import sha256_bytes, solution_digest
from agent_eval.errors import EvidenceError
from agent_eval.layout import RunDirectory
from agent_eval.models import AttemptRecord, NodeRunResult, RunRecord

__all__ = ["accept_run", "expected_files"]


def expected_files(record: RunRecord) -> dict[str, str]:
    """Every file the record accounts for, relative to the run's directory, with its digest."""
    return {
        f"attempt-{attempt.attempt}/{name}": digest
        for attempt in record.attempts
        for name, digest in attempt.evidence_files().items()
    }


def accept_run(result: NodeRunResult, run_id: str, batch_dir: Path) -> RunRecord:
    """Check *result* against its own record, write its files into the batch's evidence,
    and return its record with the node named on every attempt.

    Raises:
        EvidenceError: It is another run, or a file is missing, changed or unaccounted for.
    """
    record = result.record
    if record.runId != run_id:
        raise EvidenceError(f"node {result.node} sent run {record.runId} for {run_id}")
    shipped = {f.path: sha256_bytes(f.data) for f in result.files}
    if len(shipped) != len(result.files):
        raise EvidenceError(f"node {result.node} sent a file of run {run_id} twice")
    expected = expected_files(record)
    problems = [f"{p} is missing" for p in sorted(set(expected) - set(shipped))]
    problems += [f"{p} is not in the record" for p in sorted(set(shipped) - set(expected))]
    problems += [
        f"{p} has digest {shipped[p]}, the record says {digest}"
        for p, digest in sorted(expected.items())
        if p in shipped and shipped[p] != digest
    ]
    problems += [
        f"attempt {a.attempt}'s solution digest does not match its files"
        for a in record.attempts
        if a.solutionDigest is not None
        and a.solutionDigest != solution_digest((f.path, f.sha256) for f in a.solutionFiles)
    ]
    if problems:
        raise EvidenceError(
            f"node {result.node} sent run {run_id} with evidence that does not match its "
            "record: " + "; ".join(problems[:10])
        )
    evidence = RunDirectory(batch_dir)
    run_dir = evidence.attempt(run_id, 1).root.parent
    for attempt in record.attempts:
        evidence.attempt(run_id, attempt.attempt).root.mkdir(parents=True, exist_ok=True)
    write_shipped(run_dir, result.files)
    attempts: list[AttemptRecord] = [
        a.model_copy(update={"node": result.node}) for a in record.attempts
    ]
    return record.model_copy(update={"attempts": attempts})
