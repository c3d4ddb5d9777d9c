"""Served lazily by a ModuleType subclass installed as the module, as large libraries do."""

import sys
import types
from typing import TYPE_CHECKING, Any

__all__ = ["Model"]

if TYPE_CHECKING:
    from shapekit.lazy._impl import Model as Model
else:

    class _LazyModule(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name == "Model":
                from shapekit.lazy._impl import Model

                return Model
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    _module = _LazyModule(__name__, __doc__)
    _module.__dict__.update(
        {k: v for k, v in globals().items() if k.startswith("__") and k != "__builtins__"}
    )
    sys.modules[__name__] = _module
