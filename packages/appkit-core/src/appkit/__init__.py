"""appkit: validation, content-hashed storage, validated tools, approval gates and retry.

Everything public is importable from the top-level package, for example
``from appkit import Field, create_validator, ContentStore, RetryPolicy``.
"""

from appkit.approval import Approval, ApprovalGate, ApprovalRequest
from appkit.errors import (
    AppkitError,
    ApprovalDeniedError,
    ApprovalError,
    ApprovalExpiredError,
    ApprovalMismatchError,
    ApprovalUsedError,
    FieldError,
    IntegrityError,
    NotFoundError,
    PermanentError,
    TransientError,
    ValidationError,
)
from appkit.retry import RetryPolicy
from appkit.storage import (
    ContentStore,
    MemoryBackend,
    StorageBackend,
    canonical_json,
    content_digest,
)
from appkit.tools import Tool, ToolRegistry, define_tool
from appkit.validation import Field, Schema, ValidationResult, Validator, create_validator

__version__ = "0.1.0"

__all__ = [
    "AppkitError",
    "Approval",
    "ApprovalDeniedError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalGate",
    "ApprovalMismatchError",
    "ApprovalRequest",
    "ApprovalUsedError",
    "ContentStore",
    "Field",
    "FieldError",
    "IntegrityError",
    "MemoryBackend",
    "NotFoundError",
    "PermanentError",
    "RetryPolicy",
    "Schema",
    "StorageBackend",
    "Tool",
    "ToolRegistry",
    "TransientError",
    "ValidationError",
    "ValidationResult",
    "Validator",
    "__version__",
    "canonical_json",
    "content_digest",
    "create_validator",
    "define_tool",
]
