import sys


class Param:
    """A command's parameter; options and arguments narrow it."""

    def __init__(self, name: str) -> None:
        self.name = name


class Option(Param):
    def __init__(self, name: str, is_flag: bool = False) -> None:
        super().__init__(name)
        self.is_flag = is_flag


class Argument(Param):
    def __init__(self, name: str, nargs: int = 1) -> None:
        super().__init__(name)
        self.nargs = nargs


if sys.version_info >= (3, 8):  # noqa: UP036 - the shape of a library that supports older ones

    class Notice:
        """Defined under a version check, with a positional-only ``self``."""

        def __init__(self, message: str, /, *, level: int = 1) -> None:
            self.message = message
            self.level = level

else:  # pragma: no cover - never taken on a supported interpreter
    Notice = None
