"""The project's exception tree.

    AgentEvalError                  every error the harness raises on purpose
    ├── ConfigError                 a user-supplied config or task file is invalid
    │   └── ProjectNotFoundError    no pyproject.toml here or above (project.py)
    ├── EvidenceError               an evidence file is missing, unreadable or inconsistent
    ├── ReviewError                 a review decision was refused
    ├── SuiteError                  the task suite is inconsistent
    ├── CatalogError                the API catalog cannot be generated (consumer/catalog.py)
    ├── ContractError               a task's contract.pyi is unusable (suite/contract.py)
    ├── AnalysisInputError          static analysis was given unusable inputs
    │                               (verification/analysis/rules.py)
    └── InfrastructureError         the engine, an image or cleanup failed (never an agent failure)
        ├── NotStartedError         a container did not get going, so a fresh one may replace it
        ├── EngineUnavailableError  no local engine answers, or it is not local
        ├── CleanupError            a container's removal could not be confirmed
        └── MypyError               the type checker could not run
                                    (verification/analysis/typecheck.py)

The four defined elsewhere in ``consumer/``, ``suite/`` and ``verification/`` live
beside the stdlib-only code that raises them, which runs inside containers without
the rest of the harness; ProjectNotFoundError lives beside ``find_project``.

Each message says what failed, where (file, field, task or run id) and, when it
is not obvious, how to fix it.
"""

from __future__ import annotations

__all__ = [
    "AgentEvalError",
    "CleanupError",
    "ConfigError",
    "EngineUnavailableError",
    "EvidenceError",
    "InfrastructureError",
    "NotStartedError",
    "ReviewError",
    "SuiteError",
]


class AgentEvalError(Exception):
    """Base of every error the harness raises on purpose."""


class ConfigError(AgentEvalError):
    """A user-supplied configuration or task file is invalid."""


class EvidenceError(AgentEvalError):
    """An evidence file is missing, unreadable, malformed or inconsistent."""


class ReviewError(AgentEvalError):
    """A review decision was refused."""


class SuiteError(AgentEvalError):
    """The task suite is inconsistent (ids, assertions, prompts, fixtures)."""


class InfrastructureError(AgentEvalError):
    """The engine, an image, or cleanup failed; never scored as an agent failure."""


class NotStartedError(InfrastructureError):
    """A container did not get going as asked (not started, or its stdin never reached it).

    Nothing ran with its input, so a fresh container may be run in its place.
    """


class EngineUnavailableError(InfrastructureError):
    """No local container engine answers, or the configured one is not local."""


class CleanupError(InfrastructureError):
    """A container's removal could not be confirmed."""
