"""What crosses the boundary from submitted code is plain, bounded JSON.

Return values become JSON (tuples as lists, ``to_dict()`` objects and
dataclasses as dicts) or are refused by type; exceptions become a bounded
description with only a few JSON-safe attributes; a scripted effect error
becomes the named exception, or a stand-in when it cannot be built. The
verifier packages import with the standard library alone.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any

import pytest

from agent_eval.verification.runtime.codec import (
    EffectCallError,
    NonJsonValue,
    describe_exception,
    make_exception,
    replace_effect_refs,
    to_json_value,
)


class Colour(enum.StrEnum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Item:
    name: str
    tags: tuple[str, ...]


class Report:
    def to_dict(self) -> dict[str, Any]:
        return {"items": [Item("a", ("x",))], "colour": Colour.RED}


def test_json_values_tuples_dataclasses_and_to_dict_objects_become_plain_json() -> None:
    value = to_json_value({"report": Report(), "pair": (1, 2.5), "none": None, "flag": True})
    assert value == {
        "report": {"items": [{"name": "a", "tags": ["x"]}], "colour": "red"},
        "pair": [1, 2.5],
        "none": None,
        "flag": True,
    }
    assert type(value["report"]["colour"]) is str


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1, 2}, "non-JSON value of type set"),
        ({"a": [object()]}, "type object at a[0]"),
        ({1: "x"}, "dict key int"),
        (float("inf"), "float (inf)"),
        (b"bytes", "type bytes"),
    ],
)
def test_values_without_a_json_form_are_refused_by_type(value: Any, message: str) -> None:
    with pytest.raises(NonJsonValue, match=re.escape(message)):
        to_json_value(value)


def test_deep_nesting_is_refused_instead_of_exhausting_the_stack() -> None:
    value: list[Any] = []
    for _ in range(200):
        value = [value]
    with pytest.raises(NonJsonValue, match="nested deeper"):
        to_json_value(value)


def test_an_exception_is_described_by_type_qualified_mro_bounded_message_and_safe_attributes() -> (
    None
):
    class FieldProblem(ValueError):
        code = "required"

        def __init__(self) -> None:
            super().__init__("x" * 5000)
            self.field = "email"
            self.path = object()  # not JSON: dropped
            self.secret = "kept out"

    description = describe_exception(FieldProblem())
    assert description["type"] == "FieldProblem"
    assert description["mro"][1:3] == ["builtins.ValueError", "builtins.Exception"]
    assert len(description["message"]) == 2000
    assert description["attributes"] == {"code": "required", "field": "email"}


def test_a_scripted_effect_error_is_built_from_its_type_or_replaced_by_a_stand_in() -> None:
    built = make_exception("builtins:TimeoutError", ["slow"], "slow")
    assert type(built) is TimeoutError and str(built) == "slow"
    missing = make_exception("no_such_module:Nope", [], "down")
    assert isinstance(missing, EffectCallError) and "down" in str(missing)
    not_an_exception = make_exception("builtins:dict", [], "x")
    assert isinstance(not_an_exception, EffectCallError)


def test_only_exact_effect_references_become_callables() -> None:
    made: list[str] = []

    def make(name: str) -> str:
        made.append(name)
        return f"<{name}>"

    value = replace_effect_refs(
        [{"$effect": "send"}, {"$effect": "x", "other": 1}, {"nested": [{"$effect": "log"}]}],
        make,
    )
    assert value == ["<send>", {"$effect": "x", "other": 1}, {"nested": ["<log>"]}]
    assert made == ["send", "log"]
