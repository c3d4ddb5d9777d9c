"""A module two levels down."""


def deep_function(value: int, /, scale: float = 1.0) -> float:
    """Scale ``value``."""
    return value * scale
