"""The receipt under construction: every run added, every update written atomically.

A run is added to the book before the receipt is written, so a write that
fails (a full disk) loses nothing: the final write has every run. When the
disk is full, the space reserved at the start is given back for the final
write; a final receipt that still cannot be written raises
:class:`ReceiptNotWritten`, carrying the last one written.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from agent_eval.errors import AgentEvalError
from agent_eval.evidence_io import write_model_atomic
from agent_eval.layout import RunDirectory
from agent_eval.models import BatchStatus, Receipt, RunRecord

__all__ = ["ReceiptBook", "ReceiptNotWritten", "describe_failure"]


class ReceiptNotWritten(Exception):
    """The final receipt could not be written (the last one written stands)."""

    def __init__(self, receipt: Receipt, cause: OSError) -> None:
        super().__init__(f"the final receipt could not be written: {describe_failure(cause)}")
        self.receipt = receipt
        self.cause = cause


def describe_failure(exc: BaseException, where: Path | None = None) -> str:
    """What failed, in words an operator acts on (a full disk says so, and where)."""
    place = f" ({where})" if where is not None else ""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"the disk is full where the evidence is written{place}: {exc.strerror}"
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return f"the evidence directory became read-only{place}: {exc.strerror}"
    if isinstance(exc, AgentEvalError):
        return str(exc)
    return f"the harness failed: {type(exc).__name__}: {exc}"


class ReceiptBook:
    """The receipt of the batch in *batch_dir*, opened as *opened*, its runs in *run_ids*' order."""

    def __init__(
        self,
        batch_dir: Path,
        opened: Receipt,
        run_ids: Sequence[str],
        clock: Callable[[], datetime],
    ) -> None:
        self._evidence = RunDirectory(batch_dir)
        self._opened = opened
        self._run_ids = list(run_ids)
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: dict[str, RunRecord] = {}
        self.receipt = opened

    def add_run(self, record: RunRecord) -> None:
        with self._lock:
            self._runs[record.runId] = record

    def finish_run(self, record: RunRecord) -> None:
        with self._lock:
            self._runs[record.runId] = record
            self._write("running", [])

    def close(self, status: BatchStatus, reasons: list[str]) -> Receipt:
        """Write the final receipt.

        Raises:
            ReceiptNotWritten: Even with the reserved space given back.
        """
        with self._lock:
            try:
                return self._write(status, reasons)
            except OSError as exc:
                reserve = self._evidence.reserve
                if exc.errno != errno.ENOSPC or not reserve.exists():
                    raise ReceiptNotWritten(self.receipt, exc) from exc
                reserve.unlink()
            try:
                return self._write(status, reasons)
            except OSError as exc:
                raise ReceiptNotWritten(self.receipt, exc) from exc

    def _write(self, status: BatchStatus, reasons: list[str]) -> Receipt:
        runs = [self._runs[r] for r in self._run_ids if r in self._runs]
        receipt = self.receipt.model_copy(
            update={
                "status": status,
                "reasons": [*self._opened.reasons, *reasons],
                "updatedAt": self._clock(),
                "runs": runs,
                "firstSuccesses": sum(r.firstSuccess for r in runs),
                "finalSuccesses": sum(r.finalSuccess for r in runs),
            }
        )
        Receipt.model_validate(receipt.model_dump())
        write_model_atomic(self._evidence.receipt, receipt)
        self.receipt = receipt
        return receipt
