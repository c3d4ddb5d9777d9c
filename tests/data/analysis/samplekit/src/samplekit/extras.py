"""Extras re-exported from a private module."""

from samplekit._engine import Engine

__all__ = ["Engine"]
