"""A class whose ``__doc__`` slot holds a descriptor, not text, as compiled classes may."""


class Described:
    @property
    def __doc__(self) -> str:  # type: ignore[override]
        return "served per instance"


def describe() -> str:
    """The description of a new Described."""
    return Described().__doc__
