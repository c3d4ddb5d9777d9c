"""Shared base and field types for every wire and evidence format."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from agent_eval.digests import is_sha256_digest

__all__ = [
    "MAX_COUNT",
    "BatchId",
    "Digest",
    "NonEmptyStr",
    "RelativePath",
    "SchemaVersion",
    "WireModel",
]

MAX_COUNT = 2**53 - 1
"""The largest count, size or duration a record holds: every JSON reader (a browser's
too) reads it exactly, and sums and means of such numbers stay finite floats. A
larger one (a provider's reported token count among them) is refused, never summed."""


class WireModel(BaseModel):
    """Frozen, strict about unknown keys, documented field by field.

    A test checks that every field of every format has a docstring. They are not
    copied into the fields' descriptions: nothing here writes a JSON schema, and
    reading them means parsing each class's source whenever a command starts.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        str_strip_whitespace=False,
        validate_default=True,
    )


def _check_digest(value: str) -> str:
    if not is_sha256_digest(value):
        raise ValueError("must be 'sha256:' followed by 64 lowercase hex digits")
    return value


Digest = Annotated[str, AfterValidator(_check_digest)]
"""A ``sha256:<64 hex>`` digest."""

NonEmptyStr = Annotated[str, Field(min_length=1, max_length=1000, pattern=r"\S")]
"""A string with at least one non-space character."""

BatchId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")]
"""A batch's id: a single directory name and a container label value, never a path
(no separator, not ``.`` or ``..``, nothing but letters, digits, ``_``, ``.``, ``-``)."""

_PATH_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def check_relative_path(value: str) -> str:
    """Refuse absolute paths, traversal, empty parts and unusual characters."""
    if not value or len(value) > 255:
        raise ValueError("must be a non-empty relative path of at most 255 characters")
    if value.startswith("/") or "\\" in value:
        raise ValueError(f"{value!r} must be a relative POSIX path")
    parts = PurePosixPath(value).parts
    if str(PurePosixPath(*parts)) != value:
        raise ValueError(f"{value!r} is not in normal form")
    for part in parts:
        if part in {".", ".."} or not _PATH_PART.match(part):
            raise ValueError(f"{value!r} has a disallowed path component {part!r}")
    return value


RelativePath = Annotated[str, AfterValidator(check_relative_path)]
"""A normalised relative POSIX path with no traversal."""


def _not_a_boolean(value: Any) -> Any:
    # Literal[1] would accept True (True == 1): a version is a number, never a flag.
    if isinstance(value, bool):
        raise ValueError("must be the number 1, not a boolean")
    return value


SchemaVersion = Annotated[Literal[1], BeforeValidator(_not_a_boolean)]
"""The literal format version 1 (``true`` refused)."""
