"""Error types shared by every appkit module, each with a stable ``code``.

The hierarchy has two branches that decide retry behaviour:

* :class:`TransientError` - the operation may succeed if tried again.
* :class:`PermanentError` - trying again cannot help; never retried.

:class:`ValidationError`, :class:`IntegrityError`, :class:`NotFoundError` and
every :class:`ApprovalError` are permanent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "AppkitError",
    "ApprovalDeniedError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalMismatchError",
    "ApprovalUsedError",
    "FieldError",
    "IntegrityError",
    "NotFoundError",
    "PermanentError",
    "TransientError",
    "ValidationError",
]


@dataclass(frozen=True)
class FieldError:
    """One problem with one input value, located by a field path.

    ``path`` uses dots for object keys and brackets for list indexes, for
    example ``"address.city"`` or ``"items[2].name"``; ``""`` is the whole input.
    ``code`` is a stable machine-readable identifier such as ``"required"``.
    """

    path: str
    code: str
    message: str

    def __str__(self) -> str:
        """Return ``"path: message"`` (or just the message for the root)."""
        return f"{self.path}: {self.message}" if self.path else self.message

    def to_dict(self) -> dict[str, str]:
        """Return the error as a JSON-ready ``{"path", "code", "message"}`` dict."""
        return {"path": self.path, "code": self.code, "message": self.message}


class AppkitError(Exception):
    """Base class of every error raised by appkit; ``code`` identifies the kind."""

    code: ClassVar[str] = "appkit_error"

    def __init__(self, message: str) -> None:
        """Create the error with a human-readable message."""
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, object]:
        """Return the error as a JSON-ready ``{"code", "message"}`` dict."""
        return {"code": self.code, "message": self.message}


class TransientError(AppkitError):
    """A failure that may go away on its own; :class:`RetryPolicy` retries it."""

    code: ClassVar[str] = "transient"


class PermanentError(AppkitError):
    """A failure that retrying cannot fix; :class:`RetryPolicy` never retries it."""

    code: ClassVar[str] = "permanent"


class ValidationError(PermanentError):
    """Input did not match a schema; ``errors`` lists every problem found."""

    code: ClassVar[str] = "validation"

    def __init__(self, errors: Iterable[FieldError], message: str | None = None) -> None:
        """Create the error from field errors; the message summarises them by default."""
        self.errors: tuple[FieldError, ...] = tuple(errors)
        if message is None:
            count = len(self.errors)
            summary = "; ".join(str(error) for error in self.errors[:5])
            message = f"{count} validation error{'s' if count != 1 else ''}: {summary}"
        super().__init__(message)

    def to_dict(self) -> dict[str, object]:
        """Return ``{"code", "message", "errors": [...]}`` ready for JSON."""
        return {
            "code": self.code,
            "message": self.message,
            "errors": [error.to_dict() for error in self.errors],
        }


class IntegrityError(PermanentError):
    """Stored bytes do not match the digest they are stored under."""

    code: ClassVar[str] = "integrity"


class NotFoundError(PermanentError):
    """A requested item (stored digest, registered tool) does not exist."""

    code: ClassVar[str] = "not_found"


class ApprovalError(PermanentError):
    """Base class of the reasons an approval gate refuses to run an effect."""

    code: ClassVar[str] = "approval"


class ApprovalDeniedError(ApprovalError):
    """The approval was denied, or no approval was given at all."""

    code: ClassVar[str] = "approval_denied"


class ApprovalExpiredError(ApprovalError):
    """The approval's time to live has passed."""

    code: ClassVar[str] = "approval_expired"


class ApprovalMismatchError(ApprovalError):
    """The approval is for another request, or was not issued by this gate."""

    code: ClassVar[str] = "approval_mismatch"


class ApprovalUsedError(ApprovalError):
    """The approval was already used once; approvals are single-use."""

    code: ClassVar[str] = "approval_used"
