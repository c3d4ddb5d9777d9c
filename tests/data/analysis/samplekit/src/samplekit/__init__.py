"""samplekit: a tiny typed library that the catalog and analysis tests run against."""

from samplekit.retry import RetryError, retry
from samplekit.validation import ValidationResult, Validator, create_validator

__version__ = "1.2.3"

__all__ = [
    "RetryError",
    "ValidationResult",
    "Validator",
    "__version__",
    "create_validator",
    "retry",
]
