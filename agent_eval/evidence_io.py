"""Reading and atomically writing evidence files.

Evidence is written to a temporary file in the same directory, flushed and
fsynced, then renamed over the target, so a reader (or a crash) never sees a
half-written receipt.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from agent_eval.errors import EvidenceError

__all__ = ["format_validation_error", "read_model", "write_bytes_atomic", "write_model_atomic"]

M = TypeVar("M", bound=BaseModel)

# Evidence files are small; anything larger is refused rather than parsed.
MAX_EVIDENCE_BYTES = 64 * 1024 * 1024


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace *path* with *data* atomically (same-directory temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_model_atomic(path: Path, model: BaseModel) -> None:
    """Write *model* as indented JSON (by alias) atomically."""
    text = model.model_dump_json(by_alias=True, indent=2) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))


def read_model(path: Path, model_type: type[M], *, what: str) -> M:
    """Read and validate an evidence file, naming the file and the broken field on error."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_EVIDENCE_BYTES + 1)
    except OSError as exc:
        raise EvidenceError(f"{what} {path}: cannot read: {exc.strerror}") from exc
    if len(data) > MAX_EVIDENCE_BYTES:
        raise EvidenceError(f"{what} {path}: larger than {MAX_EVIDENCE_BYTES} bytes")
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvidenceError(f"{what} {path}: not valid JSON: {exc}") from exc
    try:
        return model_type.model_validate(raw)
    except ValidationError as exc:
        raise EvidenceError(f"{what} {path}: {format_validation_error(exc)}") from exc


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: the dotted field path, then pydantic's message."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)
