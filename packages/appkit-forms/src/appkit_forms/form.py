"""Declarative forms: parse submitted strings into typed values, render escaped HTML.

A :class:`Form` is an ordered list of fields. :meth:`Form.parse` turns a
mapping of submitted strings into an :class:`appkit.ValidationResult` whose
errors are :class:`appkit.FieldError` objects with the field name as ``path``.
:meth:`Form.render` produces HTML with jinja2 (autoescaping on), so labels,
values, help texts and error messages are always escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from appkit import FieldError, ValidationResult, create_validator
from jinja2 import Environment, StrictUndefined

from appkit_forms.fields import FormField, _Invalid

__all__ = ["Form"]

_TEMPLATE = """\
<form method="{{ method }}"{% if action %} action="{{ action }}"{% endif %}>
{% if form_errors %}
<ul class="form-errors" role="alert">
{% for message in form_errors %}
<li>{{ message }}</li>
{% endfor %}
</ul>
{% endif %}
{% for f in fields %}
<div class="field field-{{ f.kind }}{% if f.errors %} has-error{% endif %}">
{% if f.widget == "checkbox" %}
<input type="checkbox" id="{{ f.id }}" name="{{ f.name }}" value="on"\
{% if f.value %} checked{% endif %}{{ caller_attrs(f) }}>
<label for="{{ f.id }}">{{ f.label }}</label>
{% else %}
<label for="{{ f.id }}">{{ f.label }}</label>
{% if f.widget == "select" %}
<select id="{{ f.id }}" name="{{ f.name }}"{{ caller_attrs(f) }}>
<option value=""{% if not f.value %} selected{% endif %}></option>
{% for value, text in f.options %}
<option value="{{ value }}"{% if value == f.value %} selected{% endif %}>{{ text }}</option>
{% endfor %}
</select>
{% else %}
<input type="{{ f.input_type }}" id="{{ f.id }}" name="{{ f.name }}" value="{{ f.value }}"\
{{ caller_attrs(f) }}>
{% endif %}
{% endif %}
{% if f.help_text %}
<p class="field-help" id="{{ f.id }}-help">{{ f.help_text }}</p>
{% endif %}
{% for message in f.errors %}
<p class="field-error" id="{{ f.id }}-error-{{ loop.index }}">{{ message }}</p>
{% endfor %}
</div>
{% endfor %}
<button type="submit">{{ submit_label }}</button>
</form>
"""

_ATTRS = """\
{% macro caller_attrs(f) %}\
{% if f.required %} required{% endif %}\
{% for key, value in f.attrs %} {{ key }}="{{ value }}"{% endfor %}\
{% if f.errors %} aria-invalid="true"{% endif %}\
{% if f.described_by %} aria-describedby="{{ f.described_by }}"{% endif %}\
{% endmacro %}\
"""

_ENV = Environment(
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=StrictUndefined,
    keep_trailing_newline=True,
)
_RENDER = _ENV.from_string(_ATTRS + _TEMPLATE)


class Form:
    """An ordered set of form fields with parsing and HTML rendering."""

    def __init__(
        self,
        fields: Iterable[FormField],
        *,
        action: str = "",
        method: str = "post",
        submit_label: str = "Submit",
        id_prefix: str = "field-",
    ) -> None:
        """Create a form; raises ``ValueError`` for duplicate names or a bad ``method``."""
        self.fields: tuple[FormField, ...] = tuple(fields)
        names = [field.name for field in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("form field names must be unique")
        if method.lower() not in ("get", "post"):
            raise ValueError("method must be 'get' or 'post'")
        self.action = action
        self.method = method.lower()
        self.submit_label = submit_label
        self.id_prefix = id_prefix
        self._validator = create_validator({field.name: field._spec() for field in self.fields})

    def field(self, name: str) -> FormField:
        """Return the field called ``name``; raises ``KeyError`` when there is none."""
        for field in self.fields:
            if field.name == name:
                return field
        raise KeyError(name)

    def parse(self, data: Mapping[str, object]) -> ValidationResult:
        """Convert submitted strings into typed values, or report field errors.

        ``data`` maps field names to submitted strings (missing means empty).
        On success ``value`` has one entry per field: ``str``, ``int`` or
        ``bool`` values, ``None`` for empty optional fields, ``False`` for an
        unchecked box. Keys that are not fields are ignored. Each error's
        ``path`` is the field name. Raises ``TypeError`` if ``data`` is not a mapping.
        """
        if not isinstance(data, Mapping):
            raise TypeError("submitted form data must be a mapping of field name to string")
        values: dict[str, Any] = {}
        errors: dict[str, list[FieldError]] = {field.name: [] for field in self.fields}
        for field in self.fields:
            raw = data.get(field.name, "")
            if raw is None:
                raw = ""
            if not isinstance(raw, str):
                errors[field.name].append(FieldError(field.name, "type", "Expected text."))
                continue
            text = raw.strip()
            if not text:
                if field.required:
                    errors[field.name].append(
                        FieldError(field.name, "required", "This field is required.")
                    )
                else:
                    values[field.name] = field._empty_value()
                continue
            try:
                values[field.name] = field._convert(text)
            except _Invalid as problem:
                errors[field.name].append(FieldError(field.name, problem.code, problem.message))
        for error in self._validator.validate(values).errors:
            errors[error.path].append(error)
        found = tuple(error for field in self.fields for error in errors[field.name])
        if found:
            return ValidationResult(None, found)
        return ValidationResult(values, ())

    def render(
        self,
        values: Mapping[str, object] | None = None,
        errors: Iterable[FieldError] = (),
    ) -> str:
        """Render the form as HTML, showing ``values`` and ``errors``; everything is escaped.

        ``values`` may hold submitted strings or typed values (as returned by
        :meth:`parse`). Errors whose ``path`` is not a field name are shown in
        a list above the fields.
        """
        current = values or {}
        by_field: dict[str, list[str]] = {field.name: [] for field in self.fields}
        form_errors: list[str] = []
        for error in errors:
            target = by_field.get(error.path)
            (target if target is not None else form_errors).append(str(error.message))
        views = [
            self._view(field, current.get(field.name), by_field[field.name])
            for field in self.fields
        ]
        html = _RENDER.render(
            method=self.method,
            action=str(self.action),
            submit_label=str(self.submit_label),
            form_errors=form_errors,
            fields=views,
        )
        return str(html)

    def _view(self, field: FormField, value: object, messages: list[str]) -> dict[str, Any]:
        field_id = f"{self.id_prefix}{field.name}"
        described = []
        if field.help_text:
            described.append(f"{field_id}-help")
        described += [f"{field_id}-error-{index}" for index in range(1, len(messages) + 1)]
        return {
            "id": field_id,
            "name": field.name,
            "label": str(field.label),
            "help_text": str(field.help_text),
            "required": field.required,
            "widget": field._widget,
            "kind": field._input_type if field._widget == "input" else field._widget,
            "input_type": field._input_type,
            "value": field._display(value),
            "options": field._options(),
            "attrs": sorted(field._attributes().items()),
            "errors": messages,
            "described_by": " ".join(described),
        }
