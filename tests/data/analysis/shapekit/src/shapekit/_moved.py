from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def set_module(module: str) -> Callable[[T], T]:
    """Name *module* as where the object lives, as numpy's ``set_module`` does."""

    def decorate(obj: T) -> T:
        obj.__module__ = module  # type: ignore[attr-defined]
        return obj

    return decorate


@set_module("shapekit")
class Gauge:
    """Defined here, documented (and its ``__module__``) as ``shapekit``'s."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
