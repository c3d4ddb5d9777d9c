"""Tests for Form.parse: submitted strings become typed values or field errors."""

from __future__ import annotations

import pytest
from appkit import FieldError, ValidationError, ValidationResult
from appkit_forms import CheckboxField, Form, IntegerField, SelectField, TextField

GOOD = {
    "name": "  Ann Lee ",
    "email": "ann@example.com",
    "age": "42",
    "plan": "pro",
    "terms": "on",
}


def pairs(result: ValidationResult) -> list[tuple[str, str]]:
    return [(e.path, e.code) for e in result.errors]


def test_valid_submission_is_typed(signup: Form) -> None:
    result = signup.parse(GOOD)
    assert result.ok
    assert result.value == {
        "name": "Ann Lee",
        "email": "ann@example.com",
        "age": 42,
        "plan": "pro",
        "terms": True,
        "newsletter": False,
    }


def test_empty_optional_fields(signup: Form) -> None:
    result = signup.parse({**GOOD, "age": "   "})
    assert result.value["age"] is None
    result = signup.parse({k: v for k, v in GOOD.items() if k != "age"})
    assert result.value["age"] is None


def test_missing_required_fields(signup: Form) -> None:
    result = signup.parse({})
    assert not result.ok
    assert result.value is None
    assert pairs(result) == [
        ("name", "required"),
        ("email", "required"),
        ("plan", "required"),
        ("terms", "required"),
    ]
    assert all(e.message == "This field is required." for e in result.errors)


@pytest.mark.parametrize(
    ("key", "raw", "code"),
    [
        ("name", "A", "min_length"),
        ("name", "x" * 41, "max_length"),
        ("email", "not-an-email", "invalid"),
        ("email", "a@b", "invalid"),
        ("email", "a b@c.de", "invalid"),
        ("age", "twelve", "invalid"),
        ("age", "4.5", "invalid"),
        ("age", "1e3", "invalid"),
        ("age", "1_000", "invalid"),
        ("age", "١٢", "invalid"),
        ("age", "12", "minimum"),
        ("age", "121", "maximum"),
        ("plan", "enterprise", "choices"),
        ("plan", "Free", "choices"),
        ("terms", "off", "required"),
        ("terms", "maybe", "invalid"),
        ("name", 5, "type"),
        ("name", ["Ann"], "type"),
    ],
)
def test_field_errors(signup: Form, key: str, raw: object, code: str) -> None:
    result = signup.parse({**GOOD, key: raw})
    assert pairs(result) == [(key, code)]


def test_errors_follow_field_order(signup: Form) -> None:
    result = signup.parse({"terms": "nope", "age": "x", "name": "A", "plan": "x"})
    assert [e.path for e in result.errors] == ["name", "email", "age", "plan", "terms"]


def test_integer_signs_and_bounds() -> None:
    form = Form([IntegerField("n")])
    assert form.parse({"n": "-7"}).value == {"n": -7}
    assert form.parse({"n": "+7"}).value == {"n": 7}
    assert form.parse({"n": "9" * 31}).errors[0].code == "invalid"


@pytest.mark.parametrize(
    ("raw", "checked"),
    [
        ("on", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("off", False),
        ("0", False),
        ("", False),
        (None, False),
    ],
)
def test_checkbox_values(raw: str | None, checked: bool) -> None:
    form = Form([CheckboxField("c")])
    assert form.parse({"c": raw} if raw is not None else {}).value == {"c": checked}


def test_unknown_keys_are_ignored_and_never_returned(signup: Form) -> None:
    result = signup.parse({**GOOD, "is_admin": "on", "csrf": "x"})
    assert result.ok
    assert "is_admin" not in result.value


def test_text_pattern() -> None:
    form = Form([TextField("code", pattern=r"[A-Z]{3}")])
    assert form.parse({"code": "ABC"}).ok
    assert pairs(form.parse({"code": "ABCD"})) == [("code", "pattern")]


def test_select_accepts_plain_strings() -> None:
    form = Form([SelectField("color", choices=["red", "blue"])])
    assert form.parse({"color": "blue"}).value == {"color": "blue"}
    field = form.field("color")
    assert isinstance(field, SelectField)
    assert field.choices == (("red", "red"), ("blue", "blue"))


def test_unwrap_raises_validation_error(signup: Form) -> None:
    with pytest.raises(ValidationError) as caught:
        signup.parse({}).unwrap()
    assert all(isinstance(e, FieldError) for e in caught.value.errors)


def test_form_definition_errors() -> None:
    with pytest.raises(ValueError):
        Form([TextField("a"), TextField("a")])
    with pytest.raises(ValueError):
        Form([], method="delete")
    with pytest.raises(ValueError):
        TextField("bad name")
    with pytest.raises(ValueError):
        TextField('x" onclick="y')
    with pytest.raises(ValueError):
        SelectField("s", choices=[])
    with pytest.raises(KeyError):
        Form([]).field("missing")


def test_default_label_comes_from_name() -> None:
    assert TextField("first_name").label == "First name"
    assert TextField("x", label="Given name").label == "Given name"


def test_data_must_be_a_mapping(signup: Form) -> None:
    with pytest.raises(TypeError):
        signup.parse([("name", "Ann")])  # type: ignore[arg-type]
