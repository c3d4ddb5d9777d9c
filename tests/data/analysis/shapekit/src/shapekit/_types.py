import enum
import subprocess
from typing import NamedTuple

import attr


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"

    def describe(self) -> str:
        return f"the colour {self.value}"

    @classmethod
    def parse(cls, text: str) -> "Color":
        return cls(text.lower())

    @property
    def label(self) -> str:
        return self.name.title()


class Point(NamedTuple):
    x: int
    y: int = 0


@attr.s(auto_attribs=False)
class Legacy:
    size = attr.ib(type=int)
    name = attr.ib(type=str, default="")


class CmdError(subprocess.CalledProcessError):
    """A command of the library failed."""
