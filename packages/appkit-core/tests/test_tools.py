"""Tests for appkit.tools."""

from __future__ import annotations

from typing import Any

import pytest
from appkit import Field, NotFoundError, Tool, ToolRegistry, ValidationError, define_tool


def make_tool(calls: list[dict[str, Any]]) -> Tool[str]:
    def handler(args: dict[str, Any]) -> str:
        calls.append(args)
        return f"sent {args['count']} to {args['to']}"

    return define_tool(
        "send_message",
        {"to": Field(str, min_length=1), "count": Field(int, minimum=1, maximum=5)},
        handler,
        description="Send messages.",
    )


def test_valid_call_runs_handler_with_validated_args() -> None:
    calls: list[dict[str, Any]] = []
    tool = make_tool(calls)
    assert tool.call({"to": "ann", "count": 2}) == "sent 2 to ann"
    assert calls == [{"to": "ann", "count": 2}]
    assert tool.name == "send_message"
    assert tool.description == "Send messages."
    assert set(tool.schema) == {"to", "count"}


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"to": "ann"},
        {"to": "", "count": 1},
        {"to": "ann", "count": 0},
        {"to": "ann", "count": "2"},
        {"to": "ann", "count": True},
        {"to": "ann", "count": 1, "cc": "bob"},
        None,
        ["ann", 1],
        "to=ann",
    ],
)
def test_handler_never_runs_on_invalid_input(args: object) -> None:
    calls: list[dict[str, Any]] = []
    tool = make_tool(calls)
    with pytest.raises(ValidationError) as caught:
        tool.call(args)
    assert calls == []
    assert caught.value.errors
    assert caught.value.code == "validation"


def test_validation_error_lists_every_field() -> None:
    tool = make_tool([])
    with pytest.raises(ValidationError) as caught:
        tool.call({"to": "", "count": 9, "x": 1})
    assert [(e.path, e.code) for e in caught.value.errors] == [
        ("to", "min_length"),
        ("count", "maximum"),
        ("x", "unknown"),
    ]


def test_validate_does_not_call_handler() -> None:
    calls: list[dict[str, Any]] = []
    tool = make_tool(calls)
    assert tool.validate({"to": "ann", "count": 1}).ok
    assert not tool.validate({"to": "ann"}).ok
    assert calls == []


def test_handler_gets_a_copy_not_the_callers_dict() -> None:
    seen: list[dict[str, Any]] = []
    tool = define_tool("t", {"xs": Field(list, items=Field(int))}, lambda a: seen.append(a))
    args = {"xs": [1]}
    tool.call(args)
    assert seen[0] == args
    assert seen[0] is not args
    assert seen[0]["xs"] is not args["xs"]


def test_handler_errors_propagate() -> None:
    def boom(args: dict[str, Any]) -> None:
        raise RuntimeError("handler failed")

    tool = define_tool("boom", {}, boom)
    with pytest.raises(RuntimeError, match="handler failed"):
        tool.call({})


@pytest.mark.parametrize("name", ["", "1abc", "has space", "a" * 65, "semi;colon"])
def test_bad_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        define_tool(name, {}, lambda a: None)


def test_registry_dispatches_by_name() -> None:
    calls: list[dict[str, Any]] = []
    echo = define_tool("echo", {"text": Field(str)}, lambda a: a["text"])
    registry = ToolRegistry([make_tool(calls), echo])
    assert registry.names() == ["echo", "send_message"]
    assert registry.get("echo") is echo
    assert registry.call("echo", {"text": "hi"}) == "hi"
    with pytest.raises(ValidationError):
        registry.call("send_message", {"to": "ann"})
    assert calls == []


def test_registry_unknown_and_duplicate_names() -> None:
    registry = ToolRegistry()
    with pytest.raises(NotFoundError) as caught:
        registry.call("missing", {})
    assert caught.value.code == "not_found"
    registry.register(define_tool("echo", {}, lambda a: None))
    with pytest.raises(ValueError):
        registry.register(define_tool("echo", {}, lambda a: None))
