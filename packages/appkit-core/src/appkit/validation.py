"""Validate untrusted data against a declared schema of :class:`Field` specs.

A schema is a mapping of key to :class:`Field`. :func:`create_validator` turns
it into a :class:`Validator`, whose :meth:`Validator.validate` returns a
:class:`ValidationResult` with ``ok``, the cleaned ``value`` and every
:class:`FieldError` found. Unknown keys are always reported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from appkit.errors import FieldError, ValidationError

__all__ = [
    "Field",
    "FieldError",
    "Schema",
    "ValidationResult",
    "Validator",
    "create_validator",
]

_SCALARS: tuple[type[Any], ...] = (str, int, float, bool)
_KINDS: tuple[type[Any], ...] = (*_SCALARS, dict, list)
_EXPECTED = {
    str: "Expected a string.",
    int: "Expected an integer.",
    float: "Expected a number.",
    bool: "Expected true or false.",
    dict: "Expected an object.",
    list: "Expected a list.",
}


@dataclass(frozen=True)
class Field:
    """Specification of one value: its type, whether it is required, and constraints.

    ``kind`` is one of ``str``, ``int``, ``float``, ``bool``, ``dict`` or ``list``.
    ``dict`` needs ``fields`` (a nested schema); ``list`` needs ``items`` (the
    spec of every element). ``min_length``/``max_length`` apply to ``str`` and
    ``list``; ``minimum``/``maximum`` to ``int`` and ``float``; ``pattern`` (a
    regular expression that must match the whole string) to ``str``; ``choices``
    to scalars. Options are keyword-only. Fields are required unless
    ``required=False``; ``None`` is refused unless ``nullable=True``. Invalid
    specs raise ``ValueError``.
    """

    kind: type[Any]
    _: KW_ONLY
    required: bool = True
    nullable: bool = False
    min_length: int | None = None
    max_length: int | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    pattern: str | None = None
    choices: Sequence[Any] | None = None
    fields: Mapping[str, Field] | None = None
    items: Field | None = None

    def __post_init__(self) -> None:
        """Check that the spec is consistent and freeze its containers."""
        kind = self.kind
        if kind not in _KINDS:
            raise ValueError(f"unsupported field kind {kind!r}")
        if (kind is dict) != (self.fields is not None):
            raise ValueError("'fields' is required for dict fields and only allowed there")
        if (kind is list) != (self.items is not None):
            raise ValueError("'items' is required for list fields and only allowed there")
        if self.fields is not None:
            for key, spec in self.fields.items():
                if not isinstance(key, str) or not isinstance(spec, Field):
                    raise ValueError("'fields' must map str keys to Field specs")
            object.__setattr__(self, "fields", dict(self.fields))
        if kind not in (str, list) and (self.min_length, self.max_length) != (None, None):
            raise ValueError("'min_length'/'max_length' only apply to str and list fields")
        if kind not in (int, float) and (self.minimum, self.maximum) != (None, None):
            raise ValueError("'minimum'/'maximum' only apply to int and float fields")
        if self.pattern is not None:
            if kind is not str:
                raise ValueError("'pattern' only applies to str fields")
            try:
                re.compile(self.pattern)
            except re.error as problem:
                raise ValueError(f"invalid pattern {self.pattern!r}: {problem}") from None
        if self.choices is not None:
            if kind not in _SCALARS:
                raise ValueError("'choices' only apply to scalar fields")
            object.__setattr__(self, "choices", tuple(self.choices))


Schema = Mapping[str, Field]
"""A mapping of key to :class:`Field`: the shape of a JSON-like object."""


@dataclass(frozen=True)
class ValidationResult:
    """Outcome of a validation: ``ok``, the cleaned ``value`` (or ``None``) and ``errors``."""

    value: Any
    errors: tuple[FieldError, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no errors were found."""
        return not self.errors

    def unwrap(self) -> Any:
        """Return ``value`` when valid; otherwise raise :class:`ValidationError` with the errors."""
        if self.errors:
            raise ValidationError(self.errors)
        return self.value


class Validator:
    """Checks data against a schema; build one with :func:`create_validator`."""

    def __init__(self, schema: Schema) -> None:
        """Create a validator for ``schema`` (a mapping of key to :class:`Field`)."""
        self._root = Field(dict, fields=schema)

    @property
    def schema(self) -> Schema:
        """The schema this validator checks against."""
        assert self._root.fields is not None
        return self._root.fields

    def validate(self, data: object) -> ValidationResult:
        """Validate ``data`` and return every error, never raising for bad input.

        On success ``value`` is a new ``dict`` holding only declared keys
        (optional keys that were absent stay absent); on failure it is ``None``.
        """
        errors: list[FieldError] = []
        value = _check(self._root, data, "", errors)
        if errors:
            return ValidationResult(None, tuple(errors))
        return ValidationResult(value, ())


def create_validator(schema: Schema) -> Validator:
    """Build a :class:`Validator` for ``schema``, e.g. ``{"name": Field(str, min_length=1)}``."""
    return Validator(schema)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _check(spec: Field, data: object, path: str, errors: list[FieldError]) -> Any:
    if data is None:
        if not spec.nullable:
            errors.append(FieldError(path, "type", "Must not be null."))
        return None
    kind = spec.kind
    if kind is dict:
        return _check_object(spec, data, path, errors)
    if kind is list:
        return _check_list(spec, data, path, errors)
    if not _is_instance(kind, data):
        errors.append(FieldError(path, "type", _EXPECTED[kind]))
        return None
    value: Any = data
    if kind is float:
        value = float(value)
    if spec.choices is not None and value not in spec.choices:
        listed = ", ".join(str(choice) for choice in spec.choices)
        errors.append(FieldError(path, "choices", f"Must be one of: {listed}."))
    if kind is str:
        _check_length(spec, len(value), "Must be at {} {} character{} long.", path, errors)
        if spec.pattern is not None and re.fullmatch(spec.pattern, value) is None:
            errors.append(FieldError(path, "pattern", "Has an invalid format."))
    if spec.minimum is not None and value < spec.minimum:
        errors.append(FieldError(path, "minimum", f"Must be at least {spec.minimum}."))
    if spec.maximum is not None and value > spec.maximum:
        errors.append(FieldError(path, "maximum", f"Must be at most {spec.maximum}."))
    return value


def _is_instance(kind: type[Any], data: object) -> bool:
    if isinstance(data, bool):
        return kind is bool
    if kind is float:
        if not isinstance(data, int | float):
            return False
        try:
            return math.isfinite(data)
        except OverflowError:  # an int too large for a float
            return False
    return isinstance(data, kind)


def _check_length(
    spec: Field, size: int, template: str, path: str, errors: list[FieldError]
) -> None:
    if spec.min_length is not None and size < spec.min_length:
        errors.append(FieldError(path, "min_length", _plural(template, "least", spec.min_length)))
    if spec.max_length is not None and size > spec.max_length:
        errors.append(FieldError(path, "max_length", _plural(template, "most", spec.max_length)))


def _plural(template: str, bound: str, count: int) -> str:
    return template.format(bound, count, "" if count == 1 else "s")


def _check_object(spec: Field, data: object, path: str, errors: list[FieldError]) -> Any:
    if not isinstance(data, Mapping):
        errors.append(FieldError(path, "type", _EXPECTED[dict]))
        return None
    assert spec.fields is not None
    result: dict[str, Any] = {}
    for key, child in spec.fields.items():
        if key not in data:
            if child.required:
                errors.append(FieldError(_join(path, key), "required", "This field is required."))
            continue
        result[key] = _check(child, data[key], _join(path, key), errors)
    unknown = sorted(str(key) for key in data if key not in spec.fields)
    for key in unknown:
        errors.append(FieldError(_join(path, key), "unknown", "Unknown field."))
    return result


def _check_list(spec: Field, data: object, path: str, errors: list[FieldError]) -> Any:
    if not isinstance(data, list | tuple):
        errors.append(FieldError(path, "type", _EXPECTED[list]))
        return None
    assert spec.items is not None
    _check_length(spec, len(data), "Must have at {} {} item{}.", path, errors)
    return [_check(spec.items, item, f"{path}[{index}]", errors) for index, item in enumerate(data)]
