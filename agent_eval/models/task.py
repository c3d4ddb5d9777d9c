"""task.json: one task's identity, allowed outputs and declared assertions."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from agent_eval.models.base import RelativePath, SchemaVersion, WireModel

__all__ = ["IntegrationRequirement", "TaskSpec"]

_TASK_ID = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
_ASSERTION_ID = r"^[a-z][a-z0-9]*([.-][a-z0-9]+)*$"
_IMPORT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(/\*)?$")
_SYMBOL = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"


def _check_import(value: str) -> str:
    if not _IMPORT.match(value):
        raise ValueError(f"{value!r} must be a module name, optionally ending in '/*'")
    return value


AllowedImport = Annotated[str, AfterValidator(_check_import)]
AssertionId = Annotated[str, Field(pattern=_ASSERTION_ID, max_length=100)]
Symbol = Annotated[str, Field(pattern=_SYMBOL, max_length=200)]


class IntegrationRequirement(WireModel):
    """Library symbols the solution must use as values (any one of them satisfies it)."""

    symbols: list[Symbol] = Field(min_length=1)
    """Candidate symbols; a value use of any one satisfies the requirement."""


def _unique(values: list[str], field: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{field} lists {value!r} twice")
        seen.add(value)


class TaskSpec(WireModel):
    """The contents of ``tasks/<id>/task.json``."""

    schemaVersion: SchemaVersion
    """Format version of task.json."""
    id: str = Field(pattern=_TASK_ID, max_length=64)
    """Task identifier; equal to the task's directory name."""
    title: str = Field(min_length=1, max_length=200)
    """One-line human title."""
    allowedOutputPaths: list[RelativePath] = Field(min_length=1, max_length=16)
    """Exact relative paths of the files the agent may submit (Python sources)."""
    allowedImports: list[AllowedImport] = Field(min_length=1)
    """Importable modules; ``name/*`` also allows every submodule of ``name``."""
    requiredPeers: list[str]
    """Distributions the consumer must provide for this task (metadata only)."""
    assertionIds: list[AssertionId] = Field(min_length=1)
    """Every behavioural assertion the task's grader records."""
    safetyAssertionIds: list[AssertionId]
    """Subset of assertionIds that must pass on every submitted attempt."""
    seedReferences: list[Symbol]
    """Deliberately invalid library references planted in the starter files."""
    requiredIntegration: list[IntegrationRequirement]
    """Library symbols the solution must use as values."""

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        _unique(self.assertionIds, "assertionIds")
        _unique(self.safetyAssertionIds, "safetyAssertionIds")
        _unique(self.allowedOutputPaths, "allowedOutputPaths")
        missing = sorted(set(self.safetyAssertionIds) - set(self.assertionIds))
        if missing:
            raise ValueError(f"safetyAssertionIds {missing} are not in assertionIds")
        for path in self.allowedOutputPaths:
            if not path.endswith(".py"):
                raise ValueError(f"allowedOutputPaths entry {path!r} must be a .py file")
        return self

    def allows_import(self, module: str) -> bool:
        """Whether *module* is allowed by ``allowedImports``."""
        for entry in self.allowedImports:
            if entry.endswith("/*"):
                root = entry[:-2]
                if module == root or module.startswith(root + "."):
                    return True
            elif module == entry:
                return True
        return False
