"""Tools: named handlers whose arguments are validated before the handler runs.

:func:`define_tool` builds a :class:`Tool` from a name, an argument schema
(see :mod:`appkit.validation`) and a handler. :meth:`Tool.call` validates the
arguments and raises :class:`ValidationError` without running the handler when
they are invalid. :class:`ToolRegistry` looks tools up and calls them by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from appkit.errors import NotFoundError, ValidationError
from appkit.validation import Schema, ValidationResult, Validator

__all__ = [
    "Tool",
    "ToolRegistry",
    "ValidationError",
    "define_tool",
]

R = TypeVar("R")

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


class Tool(Generic[R]):
    """A named handler plus the schema its arguments must satisfy."""

    def __init__(
        self,
        name: str,
        schema: Schema,
        handler: Callable[[dict[str, Any]], R],
        *,
        description: str = "",
    ) -> None:
        """Create a tool; prefer :func:`define_tool`. Raises ``ValueError`` for a bad name."""
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise ValueError(
                "a tool name starts with a letter and has at most 64 letters, digits, '_', '.', '-'"
            )
        self.name = name
        self.description = description
        self._validator = Validator(schema)
        self._handler = handler

    @property
    def schema(self) -> Schema:
        """The schema the tool's arguments must satisfy."""
        return self._validator.schema

    def validate(self, args: object) -> ValidationResult:
        """Check ``args`` against the schema without calling the handler."""
        return self._validator.validate(args)

    def call(self, args: object) -> R:
        """Validate ``args`` and, only if valid, return ``handler(validated_args)``.

        Raises :class:`ValidationError` (with every field error) before the
        handler runs when ``args`` are invalid. The handler receives a new dict
        holding only declared keys. Exceptions from the handler propagate.
        """
        result = self._validator.validate(args)
        if not result.ok:
            raise ValidationError(result.errors, f"invalid arguments for tool {self.name!r}")
        validated: dict[str, Any] = result.value
        return self._handler(validated)


def define_tool(
    name: str,
    schema: Schema,
    handler: Callable[[dict[str, Any]], R],
    *,
    description: str = "",
) -> Tool[R]:
    """Define a :class:`Tool` called ``name`` whose ``handler`` gets validated arguments."""
    return Tool(name, schema, handler, description=description)


class ToolRegistry:
    """A set of tools with unique names, called by name."""

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        """Create a registry holding ``tools``."""
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool[Any]) -> None:
        """Add ``tool``; raises ``ValueError`` when its name is already taken."""
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool[Any]:
        """Return the tool called ``name``; raises :class:`NotFoundError` when there is none."""
        try:
            return self._tools[name]
        except KeyError:
            raise NotFoundError(f"no tool named {name!r}") from None

    def names(self) -> list[str]:
        """Return the registered tool names, sorted."""
        return sorted(self._tools)

    def call(self, name: str, args: object) -> Any:
        """Look up the tool called ``name`` and :meth:`Tool.call` it with ``args``."""
        return self.get(name).call(args)
