"""``images/runners/<agent>/install.json``: how an agent's CLI is installed on the host."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_eval.models.base import SchemaVersion, WireModel

__all__ = ["InstallRecipe"]


class InstallRecipe(WireModel):
    """``images/runners/<agent>/install.json``."""

    schemaVersion: SchemaVersion
    """Format version."""
    kind: Literal["pip", "npm"]
    """pip: ``pip install --target``; npm: ``npm install --prefix``."""
    packages: list[str] = Field(min_length=1)
    """Pinned requirements (``name==version`` for pip, ``name@version`` for npm)."""
    options: list[str] = Field(default_factory=list)
    """Extra installer options (e.g. ``--no-deps`` for a hash-pinned requirements file)."""
