"""Reading the library's result objects as graders observe them."""

from __future__ import annotations

from typing import Any

from agent_eval.grading import dig

__all__ = ["Pairs", "error_pairs"]

Pairs = frozenset[tuple[str, str]]
"""(path, code) pairs of a result's field errors."""


def error_pairs(out: Any, *, error: str | None = None) -> Pairs | None:
    """The (path, code) pairs of an ``{"ok": false, "errors": [...]}`` result.

    Args:
        out: What the solution returned.
        error: The ``error`` value the result must carry too, when given.

    Returns:
        The pairs, or None when *out* is not shaped as such a result.
    """
    if dig(out, "ok") is not False:
        return None
    if error is not None and dig(out, "error") != error:
        return None
    errors = dig(out, "errors")
    if not isinstance(errors, list):
        return None
    pairs = set()
    for item in errors:
        path, code = dig(item, "path"), dig(item, "code")
        if not isinstance(path, str) or not isinstance(code, str):
            return None
        pairs.add((path, code))
    return frozenset(pairs)
