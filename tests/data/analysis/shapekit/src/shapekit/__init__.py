"""A library laid out as large real ones are: classes defined in private modules and
re-exported, an Enum, a named tuple, classic attrs fields, a stdlib base's
attributes, and a public module bound under a second name."""

from shapekit._client import Client as Client
from shapekit._errors import StatusError as StatusError
from shapekit._types import CmdError as CmdError
from shapekit._types import Color as Color
from shapekit._types import Legacy as Legacy
from shapekit._types import Point as Point
from shapekit.lib import scimath as emath

__all__ = ["Client", "CmdError", "Color", "Legacy", "Point", "StatusError", "emath"]
