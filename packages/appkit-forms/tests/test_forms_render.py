"""Tests for Form.render: structure, values, errors and escaping of every value."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

from appkit import FieldError
from appkit_forms import CheckboxField, EmailField, Form, SelectField, TextField
from markupsafe import Markup


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> list[Element]:
        found: list[Element] = [self]
        for child in self.children:
            if isinstance(child, Element):
                found.extend(child.iter())
        return found

    def find_all(self, tag: str, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.iter()
            if e.tag == tag and all(e.attrs.get(k) == v for k, v in attrs.items())
        ]

    def find(self, tag: str, **attrs: str) -> Element:
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, found)
        return found[0]


VOID = {"input", "br", "img", "meta", "link", "hr"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"unbalanced </{tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_html(html: str) -> Element:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    return builder.root


XSS = "\"><script>alert(1)</script>&<b onmouseover=x>'"


def test_blank_form_structure(signup: Form) -> None:
    dom = parse_html(signup.render())
    form = dom.find("form")
    assert form.attrs["method"] == "post"
    assert form.attrs["action"] == "/signup"
    name = dom.find("input", name="name")
    assert name.attrs["type"] == "text"
    assert name.attrs["id"] == "field-name"
    assert name.attrs["value"] == ""
    assert "required" in name.attrs
    assert name.attrs["maxlength"] == "40"
    assert name.attrs["minlength"] == "2"
    assert dom.find("label", **{"for": "field-name"}).text() == "Full name"
    assert dom.find("input", name="email").attrs["type"] == "email"
    age = dom.find("input", name="age")
    assert (age.attrs["type"], age.attrs["min"], age.attrs["max"]) == ("number", "13", "120")
    assert "required" not in age.attrs
    options = dom.find("select", name="plan").find_all("option")
    assert [(o.attrs["value"], o.text()) for o in options] == [
        ("", ""),
        ("free", "Free"),
        ("pro", "Pro"),
    ]
    terms = dom.find("input", name="terms")
    assert terms.attrs["type"] == "checkbox"
    assert "checked" not in terms.attrs
    assert dom.find("p", id="field-email-help").text() == "We never share it."
    assert dom.find_all("p", **{"class": "field-error"}) == []
    assert dom.find("button").text() == "Submit"


def test_values_and_errors_are_shown(signup: Form) -> None:
    submitted = {"name": "A", "email": "ann@example.com", "plan": "pro", "terms": "on"}
    result = signup.parse(submitted)
    dom = parse_html(signup.render(submitted, result.errors))
    name = dom.find("input", name="name")
    assert name.attrs["value"] == "A"
    assert name.attrs["aria-invalid"] == "true"
    assert name.attrs["aria-describedby"] == "field-name-error-1"
    error = dom.find("p", id="field-name-error-1")
    assert error.text() == "Must be at least 2 characters long."
    assert "aria-invalid" not in dom.find("input", name="email").attrs
    assert dom.find("option", value="pro").attrs.get("selected", "missing") is None
    assert "checked" in dom.find("input", name="terms").attrs


def test_typed_values_render(signup: Form) -> None:
    dom = parse_html(signup.render({"age": 42, "terms": True, "newsletter": False}))
    assert dom.find("input", name="age").attrs["value"] == "42"
    assert "checked" in dom.find("input", name="terms").attrs
    assert "checked" not in dom.find("input", name="newsletter").attrs


def test_every_user_value_is_escaped() -> None:
    form = Form(
        [
            TextField("name", label=XSS, help_text=XSS),
            EmailField("email"),
            SelectField("plan", label=XSS, choices=[(XSS, XSS), ("a", "A")]),
            CheckboxField("ok", label=XSS),
        ],
        action=XSS,
        submit_label=XSS,
        id_prefix=XSS,
    )
    errors = [
        FieldError("name", "custom", XSS),
        FieldError("", "form", XSS),
        FieldError("nonexistent", "x", XSS),
    ]
    html = form.render({"name": XSS, "email": Markup(XSS), "plan": XSS, "ok": XSS}, errors)
    assert "<script>" not in html
    assert "<b " not in html
    dom = parse_html(html)
    assert dom.find_all("script") == []
    assert dom.find_all("b") == []
    assert dom.find("form").attrs["action"] == XSS
    assert dom.find("input", name="name").attrs["value"] == XSS
    assert dom.find("input", name="email").attrs["value"] == XSS
    assert dom.find("label", **{"for": XSS + "name"}).text() == XSS
    assert dom.find("p", id=XSS + "name-help").text() == XSS
    assert dom.find("p", id=XSS + "name-error-1").text() == XSS
    assert [li.text() for li in dom.find("ul").find_all("li")] == [XSS, XSS]
    option = dom.find("option", value=XSS)
    assert option.text() == XSS
    assert "selected" in option.attrs
    assert dom.find("button").text() == XSS
    for element in dom.iter():
        assert not any(attr.startswith("on") for attr in element.attrs), element


def test_submitted_script_is_escaped_after_parse(signup: Form) -> None:
    submitted = {"name": "<script>x</script>", "email": "<img src=x onerror=y>@a.b"}
    result = signup.parse(submitted)
    html = signup.render(submitted, result.errors)
    assert "<script>" not in html and "<img" not in html
    dom = parse_html(html)
    assert dom.find("input", name="name").attrs["value"] == "<script>x</script>"


def test_get_method_and_no_action() -> None:
    dom = parse_html(Form([TextField("q")], method="GET").render())
    form = dom.find("form")
    assert form.attrs["method"] == "get"
    assert "action" not in form.attrs


def test_wrapper_classes_name_the_field_kind(signup: Form) -> None:
    dom = parse_html(signup.render({}, [FieldError("age", "x", "bad")]))
    classes = [div.attrs["class"] for div in dom.find_all("div")]
    assert classes == [
        "field field-text",
        "field field-email",
        "field field-number has-error",
        "field field-select",
        "field field-checkbox",
        "field field-checkbox",
    ]
