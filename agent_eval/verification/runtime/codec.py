"""How values and exceptions of the submitted code become JSON, and effect errors become exceptions.

Used in the child (and by in-process grading, for unit tests of graders), so
a grader sees the same observations whether the solution ran in a separate
process or was called directly.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from typing import Any

from .values import MAX_DEPTH, NonJsonValue, encode

__all__ = [
    "EXCEPTION_ATTRIBUTES",
    "MAX_DEPTH",
    "EffectCallError",
    "EffectRevokedError",
    "NonJsonValue",
    "as_text",
    "bounded",
    "describe_exception",
    "make_exception",
    "replace_effect_refs",
    "to_json_value",
]

EFFECT_KEY = "$effect"
"""An argument ``{"$effect": name}`` stands for the grader's effect adapter *name*."""
MAX_MESSAGE_CHARS = 2000
EXCEPTION_ATTRIBUTES = ("code", "field", "path", "errors", "status", "retryable", "attempts")
"""Attributes of a raised exception copied into the observation when JSON-safe."""
_MAX_ATTRIBUTE_CHARS = 8000
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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


def to_json_value(value: Any) -> Any:
    """Return a JSON-compatible copy of *value* (no declared types: see ``values.encode``)."""
    return encode(value)


def as_text(value: str) -> str:
    """*value* with each lone surrogate (which no frame can carry) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", value)


def _qualified(cls: type) -> str:
    return as_text(f"{cls.__module__}.{cls.__qualname__}")


def _safe_str(exc: BaseException) -> str:
    try:
        return bounded(as_text(str(exc)))
    except Exception:
        return "<the exception's message could not be turned into text>"


def _sendable(value: Any) -> bool:
    """Whether *value* (JSON) is small and all text, so that a frame can carry it."""
    try:
        return len(json.dumps(value, ensure_ascii=False).encode("utf-8")) <= _MAX_ATTRIBUTE_CHARS
    except (ValueError, RecursionError):
        return False


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
        if len(repr(value)) <= _MAX_ATTRIBUTE_CHARS and _sendable(value):
            attributes[name] = value
    return {
        "type": as_text(type(exc).__name__),
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
