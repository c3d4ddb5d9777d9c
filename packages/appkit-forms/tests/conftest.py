"""Shared fixtures for appkit_forms tests."""

from __future__ import annotations

import pytest
from appkit_forms import CheckboxField, EmailField, Form, IntegerField, SelectField, TextField


@pytest.fixture
def signup() -> Form:
    return Form(
        [
            TextField("name", label="Full name", required=True, min_length=2, max_length=40),
            EmailField("email", required=True, help_text="We never share it."),
            IntegerField("age", minimum=13, maximum=120),
            SelectField("plan", choices=[("free", "Free"), ("pro", "Pro")], required=True),
            CheckboxField("terms", label="I accept the terms", required=True),
            CheckboxField("newsletter"),
        ],
        action="/signup",
    )
