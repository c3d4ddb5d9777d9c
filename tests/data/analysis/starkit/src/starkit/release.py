"""A submodule the package shadows: ``starkit.release`` is the str imported from it."""

__all__ = ["release"]

release = "1.0"
