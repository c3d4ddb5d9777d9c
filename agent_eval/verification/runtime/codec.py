"""How values and exceptions of the submitted code become JSON, and effect errors become exceptions.

Used in the child (and by in-process grading, for unit tests of graders), so
a grader sees the same observations whether the solution ran in a separate
process or was called directly.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "EXCEPTION_ATTRIBUTES",
    "MAX_DEPTH",
    "EffectCallError",
    "EffectRevokedError",
    "NonJsonValue",
    "bounded",
    "describe_exception",
    "make_exception",
    "replace_effect_refs",
    "to_json_value",
]

EFFECT_KEY = "$effect"
"""An argument ``{"$effect": name}`` stands for the grader's effect adapter *name*."""
MAX_DEPTH = 64
MAX_MESSAGE_CHARS = 2000
EXCEPTION_ATTRIBUTES = ("code", "field", "path", "errors", "status", "retryable", "attempts")
"""Attributes of a raised exception copied into the observation when JSON-safe."""
_MAX_ATTRIBUTE_CHARS = 8000


class NonJsonValue(TypeError):
    """A value has no JSON form (not JSON-native, no ``to_dict()``, not a dataclass)."""

    def __init__(self, type_name: str, where: str) -> None:
        super().__init__(f"a non-JSON value of type {type_name}{where}")
        self.type_name = type_name


class EffectCallError(RuntimeError):
    """Raised in the solution when a grader-scripted effect fails with no importable type."""


class EffectRevokedError(PermissionError):
    """Raised in the solution when it calls an effect adapter it may no longer use."""


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """*text* cut to *limit* characters, marking the cut."""
    if len(text) <= limit:
        return text
    marker = "... [truncated]"
    return text[: max(0, limit - len(marker))] + marker


def to_json_value(value: Any, *, _depth: int = 0, _where: str = "") -> Any:
    """Return a JSON-compatible copy of *value*.

    Tuples become lists; objects with a ``to_dict()`` method and dataclass
    instances become their dict form. Anything else, non-string dict keys,
    NaN/Infinity and nesting deeper than ``MAX_DEPTH`` raise NonJsonValue.
    """
    if _depth > MAX_DEPTH:
        raise NonJsonValue("nested deeper than 64 levels", _where)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NonJsonValue(f"float ({value})", _where)
        return float(value)
    if isinstance(value, list | tuple):
        return [
            to_json_value(item, _depth=_depth + 1, _where=f"{_where}[{i}]")
            for i, item in enumerate(value)
        ]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NonJsonValue(f"dict key {type(key).__name__}", _where)
            out[key] = to_json_value(item, _depth=_depth + 1, _where=f"{_where}.{key}")
        return out
    to_dict = getattr(type(value), "to_dict", None)
    if callable(to_dict):
        return to_json_value(value.to_dict(), _depth=_depth + 1, _where=_where)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return to_json_value(fields, _depth=_depth + 1, _where=_where)
    where = f" at {_where.lstrip('.')}" if _where else ""
    raise NonJsonValue(type(value).__qualname__, where)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _safe_str(exc: BaseException) -> str:
    try:
        return bounded(str(exc))
    except Exception:
        return "<the exception's message could not be turned into text>"


def describe_exception(exc: BaseException) -> dict[str, Any]:
    """The observation of a raised exception: type, MRO, bounded message, safe attributes.

    ``type`` is the class name, ``mro`` the qualified names (``module.qualname``)
    of every class in the method resolution order.
    """
    attributes: dict[str, Any] = {}
    for name in EXCEPTION_ATTRIBUTES:
        try:
            raw = getattr(exc, name)
        except Exception:
            continue
        if callable(raw):
            continue
        try:
            value = to_json_value(raw)
        except (NonJsonValue, RecursionError):
            continue
        if len(repr(value)) <= _MAX_ATTRIBUTE_CHARS:
            attributes[name] = value
    return {
        "type": type(exc).__name__,
        "mro": [_qualified(cls) for cls in type(exc).__mro__],
        "message": _safe_str(exc),
        "attributes": attributes,
    }


def make_exception(type_ref: str, args: list[Any], message: str) -> BaseException:
    """Build the exception a grader scripted for an effect, as the solution should see it.

    *type_ref* is ``module:QualName`` (for example ``appkit:TransientError`` or
    ``builtins:TimeoutError``); the class is constructed with *args*. When the
    class cannot be imported or constructed, an EffectCallError carrying
    *message* stands in, so the solution still sees a failure.
    """
    module_name, _, qualname = type_ref.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
        if isinstance(target, type) and issubclass(target, BaseException):
            built = target(*args)
            if isinstance(built, BaseException):
                return built
    except Exception:
        pass
    return EffectCallError(f"{type_ref}: {message}")


def replace_effect_refs(value: Any, make: Callable[[str], Any], *, _depth: int = 0) -> Any:
    """Replace every ``{"$effect": name}`` in a decoded argument with ``make(name)``."""
    if _depth > MAX_DEPTH:
        return value
    if isinstance(value, list):
        return [replace_effect_refs(item, make, _depth=_depth + 1) for item in value]
    if isinstance(value, dict):
        if set(value) == {EFFECT_KEY} and isinstance(value[EFFECT_KEY], str):
            return make(value[EFFECT_KEY])
        return {k: replace_effect_refs(v, make, _depth=_depth + 1) for k, v in value.items()}
    return value
