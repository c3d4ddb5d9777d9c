"""Tests for appkit.validation."""

from __future__ import annotations

import pytest
from appkit import Field, FieldError, ValidationError, create_validator

PERSON = {
    "name": Field(str, min_length=1, max_length=20),
    "age": Field(int, minimum=0, maximum=150, required=False),
    "email": Field(str, pattern=r"[^@]+@[^@]+", required=False),
    "role": Field(str, choices=["admin", "user"], required=False),
    "score": Field(float, required=False),
    "active": Field(bool, required=False),
    "nickname": Field(str, required=False, nullable=True),
    "address": Field(
        dict,
        required=False,
        fields={"city": Field(str, min_length=1), "zip": Field(str, required=False)},
    ),
    "tags": Field(list, items=Field(str, min_length=1), max_length=3, required=False),
    "items": Field(
        list,
        required=False,
        items=Field(dict, fields={"sku": Field(str), "qty": Field(int, minimum=1)}),
    ),
}


def codes(result: object) -> list[tuple[str, str]]:
    errors: tuple[FieldError, ...] = result.errors  # type: ignore[attr-defined]
    return [(error.path, error.code) for error in errors]


def test_valid_input_returns_clean_copy() -> None:
    data = {
        "name": "Ann",
        "age": 30,
        "score": 3,
        "active": True,
        "nickname": None,
        "address": {"city": "Oslo"},
        "tags": ["a", "b"],
        "items": [{"sku": "x", "qty": 2}],
    }
    result = create_validator(PERSON).validate(data)
    assert result.ok
    assert result.errors == ()
    assert result.value == {**data, "score": 3.0}
    assert isinstance(result.value["score"], float)
    assert result.value is not data
    assert result.value["tags"] is not data["tags"]
    assert result.unwrap() == result.value


def test_optional_absent_keys_stay_absent() -> None:
    result = create_validator(PERSON).validate({"name": "Ann"})
    assert result.ok
    assert result.value == {"name": "Ann"}


def test_missing_required_field() -> None:
    result = create_validator(PERSON).validate({})
    assert not result.ok
    assert result.value is None
    assert codes(result) == [("name", "required")]
    assert result.errors[0].message == "This field is required."


def test_nested_paths_use_dots_and_brackets() -> None:
    result = create_validator(PERSON).validate(
        {
            "name": "Ann",
            "address": {"city": ""},
            "tags": ["ok", "", 3],
            "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 0}, {"qty": 1}],
        }
    )
    assert codes(result) == [
        ("address.city", "min_length"),
        ("tags[1]", "min_length"),
        ("tags[2]", "type"),
        ("items[1].qty", "minimum"),
        ("items[2].sku", "required"),
    ]


def test_all_errors_are_collected() -> None:
    result = create_validator(PERSON).validate(
        {
            "name": "x" * 21,
            "age": -1,
            "email": "nope",
            "role": "root",
            "tags": ["a", "b", "c", "d"],
        }
    )
    assert codes(result) == [
        ("name", "max_length"),
        ("age", "minimum"),
        ("email", "pattern"),
        ("role", "choices"),
        ("tags", "max_length"),
    ]


def test_unknown_keys_are_reported_at_every_level() -> None:
    result = create_validator(PERSON).validate(
        {"name": "Ann", "admin": True, "address": {"city": "Oslo", "planet": "Earth"}}
    )
    assert codes(result) == [("address.planet", "unknown"), ("admin", "unknown")]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("name", 5),
        ("age", "5"),
        ("age", True),
        ("age", 1.5),
        ("score", "1.0"),
        ("score", False),
        ("score", float("nan")),
        ("score", 10**400),
        ("active", 1),
        ("address", "Oslo"),
        ("tags", "abc"),
        ("name", None),
    ],
)
def test_wrong_types_are_refused(key: str, value: object) -> None:
    data = {"name": "Ann", key: value}
    result = create_validator(PERSON).validate(data)
    assert codes(result) == [(key, "type")]


def test_nullable_allows_none() -> None:
    result = create_validator(PERSON).validate({"name": "Ann", "nickname": None})
    assert result.ok
    assert result.value == {"name": "Ann", "nickname": None}


def test_root_must_be_an_object() -> None:
    result = create_validator(PERSON).validate(["name"])
    assert codes(result) == [("", "type")]
    assert str(result.errors[0]) == "Expected an object."


def test_tuples_are_accepted_as_lists() -> None:
    result = create_validator(PERSON).validate({"name": "Ann", "tags": ("a",)})
    assert result.value == {"name": "Ann", "tags": ["a"]}


def test_unwrap_raises_validation_error() -> None:
    result = create_validator(PERSON).validate({"name": ""})
    with pytest.raises(ValidationError) as caught:
        result.unwrap()
    assert caught.value.errors == result.errors
    assert caught.value.code == "validation"
    assert "name" in str(caught.value)
    assert caught.value.to_dict()["errors"] == [
        {"path": "name", "code": "min_length", "message": "Must be at least 1 character long."}
    ]


def test_validator_exposes_schema() -> None:
    validator = create_validator({"a": Field(int)})
    assert list(validator.schema) == ["a"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: Field(set),
        lambda: Field(dict),
        lambda: Field(list),
        lambda: Field(str, items=Field(str)),
        lambda: Field(int, min_length=1),
        lambda: Field(str, minimum=1),
        lambda: Field(int, pattern="x"),
        lambda: Field(str, pattern="("),
        lambda: Field(dict, fields={"a": "not a field"}),  # type: ignore[dict-item]
        lambda: Field(list, items=Field(str), choices=[1]),
    ],
)
def test_inconsistent_specs_are_rejected(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]
