"""The ``agent-eval.recipe`` label: every input an image is a function of."""

from __future__ import annotations

from pydantic import Field

from agent_eval.models.base import Digest, SchemaVersion, WireModel

__all__ = ["ImageRecipe"]


class ImageRecipe(WireModel):
    """What one image is built from; its canonical JSON's digest tags and labels the image."""

    schemaVersion: SchemaVersion
    """Format version."""
    image: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    """The image's name: ``verifier``, ``runner-base``, ``reference-runner``, ``runner-<agent>``."""
    base: Digest
    """The base image's id: not reproducible itself, so pinned and recorded here."""
    parent: Digest | None
    """The recipe digest of the image this one is built FROM, when it is not the base."""
    architecture: str = Field(pattern=r"^[a-z0-9_]+$")
    """The machine of the payloads (``x86_64``, ``aarch64``)."""
    files: dict[str, Digest]
    """Every input file by its path (``images/…``, ``fixtures/…``, ``agent_eval/…`` for the
    builder's own source and the staged harness), with its sha256."""
