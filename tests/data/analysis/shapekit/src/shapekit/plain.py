"""No __all__: what the module binds itself is public."""

import contextlib
import functools
from typing import Any


class Command:
    def __init__(self, func: Any) -> None:
        self.func = func

    def invoke(self) -> Any:
        return self.func()


def command(func: Any) -> Command:
    return Command(func)


@command
def hello() -> str:
    return "hello"


def _scale(factor: int, value: int) -> int:
    return factor * value


double = functools.partial(_scale, 2)

with contextlib.suppress(ImportError):
    RETRIES = 3
