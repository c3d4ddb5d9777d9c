"""A library laid out as large real ones are: classes defined in private modules and
re-exported, an Enum, a named tuple, classic attrs fields, a stdlib base's
attributes, a public module bound under a second name, a class hierarchy code narrows
with isinstance, a class defined under a version check, and one whose ``__module__``
names where it is documented."""

from shapekit._client import Client as Client
from shapekit._errors import StatusError as StatusError
from shapekit._moved import Gauge as Gauge
from shapekit._params import Argument as Argument
from shapekit._params import Notice as Notice
from shapekit._params import Option as Option
from shapekit._params import Param as Param
from shapekit._types import CmdError as CmdError
from shapekit._types import Color as Color
from shapekit._types import Legacy as Legacy
from shapekit._types import Point as Point
from shapekit.lib import scimath as emath

__version__ = "1.0"

__all__ = [
    "Argument",
    "Client",
    "CmdError",
    "Color",
    "Gauge",
    "Legacy",
    "Notice",
    "Option",
    "Param",
    "Point",
    "StatusError",
    "emath",
]
