"""A private module: its objects are public only through :mod:`samplekit.extras`."""

from __future__ import annotations


class Engine:
    """Runs things."""

    def start(self) -> bool:
        """Start the engine."""
        return True
