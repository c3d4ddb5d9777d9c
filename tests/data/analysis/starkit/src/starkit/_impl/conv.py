import json as json
from os import path
from typing import Any as Any


def to_bool(value: object) -> bool:
    """Convert *value* to a bool."""
    return bool(value) and path.sep != "" and json is not None


def _private() -> None: ...
