"""Tests for the shape of the appkit_forms public API."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import appkit_forms
import pytest

MODULES = ["appkit_forms", "appkit_forms.fields", "appkit_forms.form"]


@pytest.mark.parametrize("name", MODULES)
def test_every_public_module_documents_everything(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ and module.__doc__.strip()
    assert isinstance(module.__all__, list)
    for symbol in module.__all__:
        value = getattr(module, symbol)
        if symbol == "__version__":
            continue
        assert inspect.getdoc(value), f"{name}.{symbol} has no docstring"
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                owned = getattr(member, "__qualname__", f"{value.__qualname__}.{attr}")
                if not owned.startswith(f"{value.__qualname__}."):
                    continue
                if callable(member) or isinstance(member, property):
                    assert inspect.getdoc(member), f"{name}.{symbol}.{attr} has no docstring"


def test_package_is_typed() -> None:
    assert (Path(appkit_forms.__file__).parent / "py.typed").is_file()
    assert appkit_forms.__version__ == "0.1.0"
