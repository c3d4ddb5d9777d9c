"""A submodule the package shadows and exports: ``starkit.stamp`` is the str in __all__."""

__all__ = ["stamp"]

stamp = "2026-12"
