"""api-catalog.json: every public symbol of the installed library under evaluation.

Generated inside the consumer environment by ``python3 -m agent_eval.consumer.catalog``
(standard library only) and validated here on the host. Its digest (canonical
JSON) is recorded in archives.json as ``apiCatalogDigest``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agent_eval.digests import sha256_json
from agent_eval.models.base import NonEmptyStr, SchemaVersion, WireModel

__all__ = [
    "ApiCatalog",
    "CatalogDistribution",
    "CatalogEntry",
    "CatalogKind",
    "CatalogShadowed",
    "CatalogUnresolved",
]

_DOTTED = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
CatalogKind = Literal[
    "module",
    "class",
    "function",
    "method",
    "classmethod",
    "staticmethod",
    "property",
    "attribute",
    "constant",
    "type",
    "lazy",
]
"""What a symbol is; ``type`` is a type alias, TypeVar or NewType; ``lazy`` a value
(not a module, class or function) that the module's ``__getattr__`` serves (PEP 562)."""


class CatalogDistribution(WireModel):
    """One installed distribution the catalog was generated from."""

    name: NonEmptyStr
    """Distribution name as in its metadata."""
    version: NonEmptyStr
    """Installed version."""
    packages: list[str] = Field(min_length=1)
    """Top-level import packages it provides, sorted."""

    @model_validator(mode="after")
    def _packages(self) -> CatalogDistribution:
        for package in self.packages:
            if not package.isidentifier():
                raise ValueError(f"package {package!r} is not an importable name")
        if self.packages != sorted(set(self.packages)):
            raise ValueError("packages must be sorted and unique")
        return self


class CatalogEntry(WireModel):
    """One supported symbol."""

    name: str = Field(pattern=_DOTTED, max_length=300)
    """Fully qualified public spelling, e.g. ``appkit.validation.Validator.validate``."""
    kind: CatalogKind
    """What the symbol is."""
    module: str = Field(pattern=_DOTTED, max_length=300)
    """Module that defines the object (for members: that defines the member)."""
    signature: str | None
    """Call signature of a class (its constructor), function or method; None otherwise."""
    type: str | None
    """Declared type of an attribute, property or constant, or a type alias's definition."""
    doc: str
    """First line of the docstring; empty when there is none."""
    reexportOf: str | None
    """For a re-export, the spelling where the object is defined (or an outside name)."""
    returns: str | None
    """Catalogued class a call or attribute access yields, when statically known."""
    inherited: bool
    """A class member found on a base class rather than on the class itself."""
    bases: list[str]
    """Base classes of a class entry; empty for other kinds."""


class CatalogUnresolved(WireModel):
    """A public name the generator could not resolve, so it is not a supported symbol."""

    name: str = Field(pattern=_DOTTED, max_length=300)
    """The spelling, e.g. ``appkit.__author__`` or a submodule that fails to import."""
    reason: NonEmptyStr
    """Why: nothing serves the name, or the error raised while resolving it."""


class CatalogShadowed(WireModel):
    """A submodule its package's namespace binds to another value of the same name.

    ``filelock/__init__.py`` runs ``from filelock.version import version``: the
    submodule ``filelock.version`` imports by its path (``import filelock.version``,
    ``from filelock.version import version``), but the package's attribute
    ``version``, reached by ``filelock.version`` or ``from filelock import version``,
    is the str, for the runtime and for mypy alike.
    """

    name: str = Field(pattern=_DOTTED, max_length=300)
    """The submodule's dotted name, a module entry of the catalog."""
    exported: bool
    """Whether the package exports the attribute (``__all__`` or an explicit re-export)."""
    type: NonEmptyStr
    """Type of the value the attribute holds, e.g. ``str``."""


class ApiCatalog(WireModel):
    """The contents of ``api-catalog.json``."""

    schemaVersion: SchemaVersion
    """Format version of the catalog."""
    distributions: list[CatalogDistribution] = Field(min_length=1)
    """Distributions the catalog was generated from, sorted by name."""
    symbols: list[CatalogEntry]
    """Every supported symbol, sorted by name, each name once."""
    unresolved: list[CatalogUnresolved] = Field(default_factory=list)
    """Public names that could not be resolved, sorted by name; absent when none."""
    shadowed: list[CatalogShadowed] = Field(default_factory=list)
    """Submodules whose package attribute is another value, sorted by name; absent when none."""

    @model_validator(mode="after")
    def _consistent(self) -> ApiCatalog:
        unresolved = [item.name for item in self.unresolved]
        if unresolved != sorted(set(unresolved)):
            raise ValueError("unresolved names must be sorted and unique")
        shadowed = [item.name for item in self.shadowed]
        if shadowed != sorted(set(shadowed)):
            raise ValueError("shadowed names must be sorted and unique")
        names = [entry.name for entry in self.symbols]
        if names != sorted(names):
            raise ValueError("symbols must be sorted by name")
        if len(set(names)) != len(names):
            raise ValueError("a symbol name appears twice")
        packages = {p for dist in self.distributions for p in dist.packages}
        known = set(names)
        for entry in self.symbols:
            if entry.name.split(".", 1)[0] not in packages:
                raise ValueError(f"{entry.name!r} is outside the catalogued packages")
            parent = entry.name.rsplit(".", 1)[0]
            if "." in entry.name and parent not in known:
                raise ValueError(f"{entry.name!r} has no catalogued parent {parent!r}")
            target = entry.reexportOf
            if target is not None and target.split(".", 1)[0] in packages and target not in known:
                raise ValueError(f"{entry.name!r} re-exports {target!r}, which is not catalogued")
        kinds = {entry.name: entry.kind for entry in self.symbols}
        for name in shadowed:
            if kinds.get(name) != "module":
                raise ValueError(f"shadowed {name!r} is not a catalogued module")
        return self

    def digest(self) -> str:
        """Digest of the catalog's canonical JSON (equal to the generator's)."""
        data = self.model_dump(mode="json")
        for key in ("unresolved", "shadowed"):
            if not data[key]:
                del data[key]  # the generator writes the key only when it has names
        return sha256_json(data)

    def supported(self, symbol: str) -> bool:
        """Whether *symbol* is a catalogued name."""
        return any(entry.name == symbol for entry in self.symbols)
