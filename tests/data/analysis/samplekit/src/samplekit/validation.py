"""Validate mappings against a rule of required keys and types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_RULES", "Rule", "ValidationResult", "Validator", "create_validator"]

MAX_RULES = 10
"""Most keys a rule may name."""

Rule = dict[str, type]
"""A mapping of required key to the type its value must have."""


@dataclass(frozen=True)
class ValidationResult:
    """Outcome of one validation: ``ok`` and the problems found."""

    ok: bool
    errors: tuple[str, ...] = ()


class Validator:
    """Checks mappings against a rule; build one with :func:`create_validator`."""

    kind: str = "mapping"

    def __init__(self, rule: Rule, *, strict: bool = False) -> None:
        """Create a validator for ``rule``."""
        self.rule = rule
        self.strict = strict
        self._seen = 0

    @property
    def size(self) -> int:
        """Number of keys the rule names."""
        return len(self.rule)

    def validate(self, data: dict[str, Any]) -> ValidationResult:
        """Check ``data`` and return every problem found."""
        self._seen += 1
        errors = tuple(
            f"{key}: expected {kind.__name__}"
            for key, kind in self.rule.items()
            if not isinstance(data.get(key), kind)
        )
        if self.strict:
            errors += tuple(f"{key}: unknown" for key in data if key not in self.rule)
        return ValidationResult(not errors, errors)

    @classmethod
    def empty(cls) -> Validator:
        """A validator that accepts every mapping."""
        return cls({})

    @staticmethod
    def describe(rule: Rule) -> str:
        """Describe ``rule`` in one line."""
        return ", ".join(f"{key}: {kind.__name__}" for key, kind in rule.items())

    def _internal(self) -> int:
        return self._seen


def create_validator(rule: Rule, *, strict: bool = False) -> Validator:
    """Build a :class:`Validator` for ``rule``."""
    return Validator(rule, strict=strict)
