"""``images/runners/<agent>/install.json`` and ``image.json``: an agent's CLI and its image."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent_eval.models.base import SchemaVersion, WireModel

__all__ = ["InstallRecipe", "PayloadFile", "RunnerImage", "SourcePin"]


class SourcePin(WireModel):
    """A pure-Python dependency published as a source archive only, taken from that archive."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The source archive's sha256 (checked before anything is read from it)."""
    path: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")
    """The package directory inside the archive (below its top directory), e.g. ``src/name``;
    copied as is, nothing is built or run."""


class InstallRecipe(WireModel):
    """``images/runners/<agent>/install.json``: what the lock beside it is the closure of."""

    schemaVersion: SchemaVersion
    """Format version."""
    kind: Literal["pip", "npm"]
    """pip: a hash-pinned ``requirements.lock``; npm: ``package.json`` and ``package-lock.json``."""
    packages: list[str] = Field(min_length=1)
    """Pinned roots (``name==version`` for pip, ``name@version`` for npm)."""
    sourceOnly: dict[str, SourcePin] = Field(default_factory=dict)
    """pip only: dependencies of the roots (``name==version``) that have no wheel; the lock
    leaves them out and the build copies each one's package from its hash-checked source
    archive."""


class PayloadFile(WireModel):
    """A file or directory of the installed payload, and where it goes in the image."""

    source: str = Field(min_length=1)
    """Path under the payload (pip: ``site``, the unpacked wheels; npm: ``node_modules/…``);
    ``{arch}`` and ``{npmCpu}`` stand for the architecture (``x86_64``) and npm's name of it
    (``x64``)."""
    target: str = Field(pattern=r"^/[A-Za-z0-9._/+@-]+$")
    """Absolute path in the image."""


class RunnerImage(WireModel):
    """``images/runners/<agent>/image.json``: how the runner image is laid out."""

    schemaVersion: SchemaVersion
    """Format version."""
    adapter: str = Field(pattern=r"^[a-z_]+$")
    """The adapter module under ``agent_eval.adapters`` the image's command runs."""
    files: list[PayloadFile] = Field(min_length=1)
    """What of the payload goes into the image (its first layer), root-owned, 0644/0755."""
    compile: list[str] = Field(default_factory=list)
    """Targets whose ``.py`` files are compiled (checked-hash pycs) by the image's python3."""
    importCheck: str | None = None
    """A module imported at build time with :attr:`compile`'s targets first on sys.path."""
    importEnvironment: dict[str, str] = Field(default_factory=dict)
    """Environment of that import (a config directory under /tmp, say)."""
    version: str = Field(min_length=1)
    """The file the CLI's version is read from, under the payload: a dist-info ``METADATA``
    (a glob) or a ``package.json``; it must equal install.json's pin."""
    adaptersPth: str = Field(pattern=r"^/[A-Za-z0-9._/-]+\.pth$")
    """The ``.pth`` file that puts /opt/agent-eval on python3's path (runner containers set
    their own PYTHONPATH)."""
    pathPrefix: list[str] = Field(default_factory=list)
    """Directories put before the runner base's PATH."""
    environment: dict[str, str] = Field(default_factory=dict)
    """Environment beyond the runner base's (update checks and telemetry off, among others)."""
