"""Form field declarations: text, email, integer, select and checkbox.

Every field has a ``name`` (the submitted key), a ``label`` (defaults to the
name, humanised), ``required`` (default ``False``, as in HTML) and optional
``help_text``. Submitted strings are stripped of surrounding whitespace; an
empty optional field parses to ``None`` (a checkbox to ``False``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar

from appkit import Field

__all__ = [
    "CheckboxField",
    "EmailField",
    "FormField",
    "IntegerField",
    "SelectField",
    "TextField",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_INTEGER = re.compile(r"[+-]?[0-9]{1,30}")
_TRUE = frozenset({"on", "true", "1", "yes"})
_FALSE = frozenset({"off", "false", "0", "no"})


class _Invalid(ValueError):
    """Raised when a submitted string cannot be converted to a field's value."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class FormField:
    """Base class of all form fields; use one of its subclasses."""

    name: str
    _: KW_ONLY
    label: str = ""
    required: bool = False
    help_text: str = ""

    _widget: ClassVar[str] = "input"
    _input_type: ClassVar[str] = "text"

    def __post_init__(self) -> None:
        """Check the name and derive a default label from it."""
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:
            raise ValueError(f"invalid field name {self.name!r}: use letters, digits, '_' and '-'")
        if not self.label:
            object.__setattr__(self, "label", self.name.replace("_", " ").capitalize())

    def _convert(self, text: str) -> Any:
        """Convert a stripped, non-empty submitted string to this field's value type.

        Raises ``_Invalid`` when the string cannot be converted.
        """
        return text

    def _empty_value(self) -> Any:
        """Return the value of this field when nothing was submitted."""
        return None

    def _spec(self) -> Field:
        """Return the appkit :class:`~appkit.Field` that checks the converted value."""
        return Field(str, required=False, nullable=True)

    def _display(self, value: object) -> str:
        """Return ``value`` as the string shown in the rendered control."""
        return "" if value is None else str(value)

    def _attributes(self) -> dict[str, str]:
        """Return extra HTML attributes (such as ``maxlength``) for the control."""
        return {}

    def _options(self) -> list[tuple[str, str]]:
        """Return the (value, label) options of a choice field; empty for others."""
        return []


@dataclass(frozen=True, kw_only=True)
class TextField(FormField):
    """A single-line text input; optional length limits and a full-match ``pattern``."""

    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None

    def _spec(self) -> Field:
        """Return the appkit :class:`~appkit.Field` that checks the converted value."""
        return Field(
            str,
            required=False,
            nullable=True,
            min_length=self.min_length,
            max_length=self.max_length,
            pattern=self.pattern,
        )

    def _attributes(self) -> dict[str, str]:
        """Return ``minlength``/``maxlength`` attributes for the configured limits."""
        attrs: dict[str, str] = {}
        if self.min_length is not None:
            attrs["minlength"] = str(self.min_length)
        if self.max_length is not None:
            attrs["maxlength"] = str(self.max_length)
        return attrs


@dataclass(frozen=True, kw_only=True)
class EmailField(FormField):
    """An email address input (``name@domain.tld``, at most ``max_length`` characters)."""

    max_length: int = 254

    _input_type: ClassVar[str] = "email"

    def _convert(self, text: str) -> Any:
        """Return ``text`` when it looks like an email address; raise otherwise."""
        if _EMAIL.fullmatch(text) is None:
            raise _Invalid("invalid", "Enter a valid email address.")
        return text

    def _spec(self) -> Field:
        """Return the appkit :class:`~appkit.Field` that checks the converted value."""
        return Field(str, required=False, nullable=True, max_length=self.max_length)

    def _attributes(self) -> dict[str, str]:
        """Return the ``maxlength`` attribute."""
        return {"maxlength": str(self.max_length)}


@dataclass(frozen=True, kw_only=True)
class IntegerField(FormField):
    """A whole-number input parsed to ``int``, with optional ``minimum``/``maximum``."""

    minimum: int | None = None
    maximum: int | None = None

    _input_type: ClassVar[str] = "number"

    def _convert(self, text: str) -> Any:
        """Parse ``text`` as a decimal integer; raise otherwise."""
        if _INTEGER.fullmatch(text) is None:
            raise _Invalid("invalid", "Enter a whole number.")
        return int(text)

    def _spec(self) -> Field:
        """Return the appkit :class:`~appkit.Field` that checks the converted value."""
        return Field(int, required=False, nullable=True, minimum=self.minimum, maximum=self.maximum)

    def _attributes(self) -> dict[str, str]:
        """Return ``min``/``max`` attributes for the configured bounds."""
        attrs: dict[str, str] = {}
        if self.minimum is not None:
            attrs["min"] = str(self.minimum)
        if self.maximum is not None:
            attrs["max"] = str(self.maximum)
        return attrs


@dataclass(frozen=True, kw_only=True)
class SelectField(FormField):
    """A drop-down whose value must be one of ``choices`` (values, or (value, label) pairs)."""

    choices: Sequence[str | tuple[str, str]] = ()

    _widget: ClassVar[str] = "select"

    def __post_init__(self) -> None:
        """Normalise ``choices`` to (value, label) pairs; at least one is required."""
        super().__post_init__()
        pairs = tuple(_pairs(self.choices))
        if not pairs:
            raise ValueError(f"select field {self.name!r} needs at least one choice")
        object.__setattr__(self, "choices", pairs)

    def _options(self) -> list[tuple[str, str]]:
        """Return the choices as (value, label) pairs."""
        return _pairs(self.choices)

    def _spec(self) -> Field:
        """Return the appkit :class:`~appkit.Field` that checks the converted value."""
        values = [value for value, _label in self._options()]
        return Field(str, required=False, nullable=True, choices=values)


@dataclass(frozen=True, kw_only=True)
class CheckboxField(FormField):
    """A checkbox parsed to ``bool``; when ``required`` it must be checked."""

    _widget: ClassVar[str] = "checkbox"

    def _convert(self, text: str) -> Any:
        """Parse ``on``/``true``/``1``/``yes`` as True, ``off``/``false``/``0``/``no`` as False."""
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            if self.required:
                raise _Invalid("required", "This field is required.")
            return False
        raise _Invalid("invalid", "Invalid checkbox value.")

    def _empty_value(self) -> Any:
        """Return False: an unchecked box is not submitted at all."""
        return False

    def _spec(self) -> Field:
        """Return the appkit :class:`~appkit.Field` that checks the converted value."""
        return Field(bool, required=False, nullable=True)

    def _display(self, value: object) -> str:
        """Return ``"on"`` when ``value`` means checked, else ``""``."""
        if value is True:
            return "on"
        if isinstance(value, str) and value.strip().lower() in _TRUE:
            return "on"
        return ""


def _pairs(choices: Sequence[str | tuple[str, str]]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for choice in choices:
        if isinstance(choice, str):
            pairs.append((choice, choice))
        else:
            value, label = choice
            pairs.append((str(value), str(label)))
    return pairs
