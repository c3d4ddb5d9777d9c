"""A kit whose public names come through star imports, aliases and a PEP 562 __getattr__."""

from typing import Any

import starkit.validators as validators
from starkit import converters as converters
from starkit.converters import to_bool as to_bool

# Each binds the package's attribute to a str, shadowing the submodule of that name.
from starkit.release import release  # noqa: F401
from starkit.stamp import stamp

__all__ = [
    "Engine",
    "__author__",
    "__version__",
    "broken",
    "converters",
    "missing",
    "stamp",
    "to_bool",
    "validators",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return "1.0"
    if name == "__author__":
        return "The starkit authors"
    if name == "Engine":
        from starkit._impl.engine import Engine

        return Engine
    if name == "broken":
        raise RuntimeError("no metadata")
    raise AttributeError(name)
