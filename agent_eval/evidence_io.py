"""Reading user- and agent-controlled files safely, and writing evidence atomically.

Every file a user, an operator or an agent can put in front of the harness
(runner.json, task.json, prompt.md, receipts, archives.json,
consumer-lock.json, expect.json, the verifier's results) is read through
:func:`read_bounded`: opened without blocking (a FIFO or device is refused,
never waited on), checked to be a regular file, cut at a size limit before
anything parses it. JSON is then parsed by :func:`parse_json`, which bounds
the nesting depth and refuses duplicate keys before the standard parser
sees the text, and models are validated in strict mode (no boolean for an
integer, no string for a number). Every error is one line naming the file,
the field (shortened) and the rule.

Evidence is written to a temporary file in the same directory, flushed and
fsynced, then renamed over the target, so a reader (or a crash) never sees a
half-written receipt.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import tempfile
import unicodedata
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agent_eval.errors import EvidenceError

__all__ = [
    "MAX_EVIDENCE_BYTES",
    "MAX_JSON_DEPTH",
    "format_validation_error",
    "model_bytes",
    "nesting_exceeds",
    "parse_json",
    "parse_model",
    "read_bounded",
    "read_model",
    "refuse_duplicates",
    "remove_atomic_temp_files",
    "write_bytes_atomic",
    "write_model_atomic",
]

M = TypeVar("M", bound=BaseModel)

MAX_EVIDENCE_BYTES = 64 * 1024 * 1024
"""Evidence files are small; anything larger is refused rather than parsed."""
MAX_JSON_DEPTH = 64
"""No format nests deeper than a dozen levels; deeper input is refused unparsed."""
_MAX_LOCATION_PARTS = 6
_MAX_MESSAGE_CHARS = 300
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_EMPTY_PAIR = re.compile(rb"\[\]|\{\}")
_ATOMIC_TEMP = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp", re.DOTALL)
"""The name :func:`write_bytes_atomic` gives its temp file (``mkstemp``'s eight characters)."""


def read_bounded(path: Path, *, what: str, max_bytes: int, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file, at most *max_bytes* of them, without ever blocking.

    Args:
        path: The file.
        what: What it is, for messages ("runner config", "receipt", ...).
        max_bytes: Larger files are refused.
        follow_symlinks: False refuses a symbolic link as the file itself.

    Raises:
        EvidenceError: It cannot be opened, is not a regular file (a FIFO, a
            device, a directory, a refused link) or is too large.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise EvidenceError(
                f"{what} {path}: is a symbolic link; give the file itself"
            ) from None
        raise EvidenceError(f"{what} {path}: cannot read: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
            raise EvidenceError(f"{what} {path}: is {kind}, not a regular file")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise EvidenceError(f"{what} {path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise EvidenceError(f"{what} {path}: larger than {max_bytes} bytes")
    return b"".join(chunks)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the key {key[:80]!r} appears twice in one object")
        result[key] = value
    return result


def nesting_exceeds(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text nests arrays and objects deeper than *limit* levels.

    Strings are blanked out first; what is left of the brackets loses one level
    of empty pairs per pass, so *limit* passes clear any text within the limit.
    """
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    for _ in range(limit):
        brackets, removed = _EMPTY_PAIR.subn(b"", brackets)
        if not brackets:
            return False
        if not removed:
            # Unbalanced (the parser will say where), unless it opens too deep first.
            return re.search(rb"[\[{]{%d}" % (limit + 1), brackets) is not None
    return bool(brackets)


def _at(where: str, message: str) -> EvidenceError:
    return EvidenceError(f"{where}: {message}" if where else message)


def parse_json(data: bytes, *, where: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode UTF-8 JSON, bounded in depth, with duplicate keys refused.

    Args:
        data: The bytes.
        where: What messages start with (the file); empty when the caller says it.
        max_depth: Deeper nesting is refused before parsing.

    Raises:
        EvidenceError: It is not UTF-8 or not JSON, nests too deep or repeats a key.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _at(where, f"not UTF-8 (byte {exc.start})") from None
    if nesting_exceeds(data, max_depth):
        raise _at(where, f"nested deeper than {max_depth} levels")
    try:
        return json.loads(
            text, object_pairs_hook=refuse_duplicates, parse_constant=_refuse_constant
        )
    except json.JSONDecodeError as exc:
        raise _at(where, f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except ValueError as exc:
        raise _at(where, f"{exc}") from None
    except RecursionError:
        raise _at(where, "nested too deeply to parse") from None


def parse_model(data: bytes, model_type: type[M], *, where: str) -> M:
    """Validate JSON bytes as *model_type* in strict mode, after :func:`parse_json`'s checks.

    Raises:
        EvidenceError: One line naming *where*, the field and the rule.
    """
    parse_json(data, where=where)
    try:
        return model_type.model_validate_json(data, strict=True)
    except ValidationError as exc:
        raise _at(where, f"{format_validation_error(exc)}") from None
    except RecursionError:
        raise _at(where, "nested too deeply to validate") from None


def read_model(
    path: Path,
    model_type: type[M],
    *,
    what: str,
    max_bytes: int = MAX_EVIDENCE_BYTES,
    follow_symlinks: bool = True,
) -> M:
    """Read and validate an evidence or configuration file.

    Raises:
        EvidenceError: The file is unreadable, not a regular file, too large,
            not JSON, too deep, or invalid (the message names file and field).
    """
    data = read_bounded(path, what=what, max_bytes=max_bytes, follow_symlinks=follow_symlinks)
    return parse_model(data, model_type, where=f"{what} {path}")


def one_line(text: str) -> str:
    """*text* with every control and formatting character escaped: one line, shown as it is."""
    return "".join(
        char if unicodedata.category(char)[0] != "C" else json.dumps(char)[1:-1] for char in text
    )


def _location(parts: tuple[int | str, ...]) -> str:
    shown = [one_line(str(p)[:40]) for p in parts]
    if len(shown) > _MAX_LOCATION_PARTS:
        shown = [*shown[:3], f"…({len(shown) - 5} more)…", *shown[-2:]]
    return ".".join(shown) or "<root>"


def format_validation_error(exc: ValidationError) -> str:
    """One clause per problem (at most five): the shortened field path, then the rule."""
    errors = exc.errors()
    parts = [
        f"{_location(tuple(err['loc']))}: {one_line(str(err['msg'])[:_MAX_MESSAGE_CHARS])}"
        for err in errors[:5]
    ]
    if len(errors) > 5:
        parts.append(f"and {len(errors) - 5} more problem(s)")
    return "; ".join(parts)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace *path* with *data* atomically (same-directory temp file + rename).

    Only a regular file (or a link, which is replaced, never followed) is ever
    replaced: a device node, a FIFO or a directory at *path* is an error, since
    renaming over it would remove it (``/dev/full`` as an output, say).

    Raises:
        OSError: It could not be written, or *path* is none of those.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            raise OSError(errno.EEXIST, "exists and is not a regular file; it is never replaced")
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


def model_bytes(model: BaseModel) -> bytes:
    """The bytes :func:`write_model_atomic` writes for *model* (what its digest is of)."""
    return (model.model_dump_json(by_alias=True, indent=2) + "\n").encode("utf-8")


def write_model_atomic(path: Path, model: BaseModel) -> None:
    """Write *model* as indented JSON (by alias) atomically."""
    write_bytes_atomic(path, model_bytes(model))


def remove_atomic_temp_files(directory: Path) -> list[Path]:
    """Remove the temp files :func:`write_bytes_atomic` left anywhere under *directory*.

    A writer killed between creating its temp file and renaming it (SIGKILL, a
    lost machine) leaves one behind. Only the caller knows that no writer is
    alive: a batch's directory is swept once its lease's owner is gone. Links are
    never followed, not even one swapped in mid-sweep (the walk goes through
    directory descriptors, and each file is removed relative to its directory's),
    and only regular files with that exact name are removed.

    Returns:
        The files removed.
    """
    removed: list[Path] = []
    for root, _dirs, files, root_fd in os.fwalk(directory, follow_symlinks=False):
        for name in files:
            if not _ATOMIC_TEMP.fullmatch(name):
                continue
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISREG(os.lstat(name, dir_fd=root_fd).st_mode):
                    os.unlink(name, dir_fd=root_fd)
                    removed.append(Path(root) / name)
    return removed
