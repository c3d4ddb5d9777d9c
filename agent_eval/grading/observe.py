"""Small, total helpers for looking at JSON the solution returned.

A grader that crashes on an unexpected shape reports an infrastructure
failure, which says nothing about the agent. These helpers turn a wrong shape
into either a default (``dig``) or the solution's own failure (``expect``).
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from agent_eval.grading.errors import SolutionFailed

__all__ = ["dig", "expect", "json_type"]

T = TypeVar("T")


def json_type(value: Any) -> str:
    """The JSON name of *value*'s type (``object``, ``array``, ``string``, ``number``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def dig(value: Any, *path: str | int, default: Any = None) -> Any:
    """Follow object keys and array indexes; *default* as soon as one step does not fit.

    ``dig(out, "errors", 0, "path")`` is ``out["errors"][0]["path"]`` or None.
    """
    current = value
    for step in path:
        if isinstance(step, str):
            fits = isinstance(current, dict) and step in current
        else:
            fits = (
                not isinstance(step, bool)
                and isinstance(current, list)
                and -len(current) <= step < len(current)
            )
        if not fits:
            return default
        current = current[step]
    return current


@overload
def expect(value: Any, kind: type[T], what: str) -> T: ...
@overload
def expect(value: Any, kind: tuple[type[Any], ...], what: str) -> Any: ...
def expect(value: Any, kind: type[Any] | tuple[type[Any], ...], what: str) -> Any:
    """*value* if it is an instance of *kind*; otherwise the solution failed the scenario.

    Raises SolutionFailed (category behaviour), which ends the scenario
    quietly; assertions not yet recorded then count as failed. A bool never
    passes for ``int``.
    """
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return value
    names = " or ".join(k.__name__ for k in kinds)
    raise SolutionFailed("behaviour", f"{what} is a JSON {json_type(value)}, expected {names}")
