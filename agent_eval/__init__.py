"""agent-eval: measure whether coding agents can use this repository's library correctly.

The names below are what an embedding repository may call; everything else
is internal and may change. They resolve lazily, so importing ``agent_eval``
costs nothing and needs nothing beyond the standard library (this file is
staged into the verifier, consumer and runner containers).

    run a batch         run_batch, BatchOutcome, batch_verifier_factory
    qualify a batch     qualify_files, current_anchors, Anchors, QualificationResult
    record a review     record_review
    write the report    write_report
    verify the tasks    verify_tasks, VerifyReport, LocalVerifier, source_verifiers
    find the project    find_project, Project, RunDirectory
    the error tree      AgentEvalError and its subclasses
    the evidence        Receipt, ArchivesManifest, ConsumerLock, RunnerConfig, ...
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "run_batch": "agent_eval.batch.run",
    "BatchOutcome": "agent_eval.batch.run",
    "batch_verifier_factory": "agent_eval.verification.container.verifier",
    "source_verifiers": "agent_eval.verification.container.verifier",
    "LocalVerifier": "agent_eval.verification.local",
    "Verifier": "agent_eval.verification.protocol",
    "verify_tasks": "agent_eval.verification.fixture_check",
    "VerifyReport": "agent_eval.verification.fixture_check",
    "qualify_files": "agent_eval.verdict.qualification",
    "Anchors": "agent_eval.verdict.qualification",
    "current_anchors": "agent_eval.verdict.qualification",
    "record_review": "agent_eval.verdict.review",
    "write_report": "agent_eval.report.render",
    "find_project": "agent_eval.project",
    "Project": "agent_eval.project",
    "RunDirectory": "agent_eval.layout",
    "AgentEvalError": "agent_eval.errors",
    "CleanupError": "agent_eval.errors",
    "ConfigError": "agent_eval.errors",
    "EngineUnavailableError": "agent_eval.errors",
    "EvidenceError": "agent_eval.errors",
    "InfrastructureError": "agent_eval.errors",
    "ReviewError": "agent_eval.errors",
    "SuiteError": "agent_eval.errors",
    "ArchivesManifest": "agent_eval.models",
    "AttemptRecord": "agent_eval.models",
    "ConsumerLock": "agent_eval.models",
    "QualificationResult": "agent_eval.models",
    "Receipt": "agent_eval.models",
    "ReviewDecision": "agent_eval.models",
    "RunRecord": "agent_eval.models",
    "RunnerConfig": "agent_eval.models",
    "RunnerRequest": "agent_eval.models",
    "RunnerResponse": "agent_eval.models",
}

__all__ = [
    "AgentEvalError",
    "Anchors",
    "ArchivesManifest",
    "AttemptRecord",
    "BatchOutcome",
    "CleanupError",
    "ConfigError",
    "ConsumerLock",
    "EngineUnavailableError",
    "EvidenceError",
    "InfrastructureError",
    "LocalVerifier",
    "Project",
    "QualificationResult",
    "Receipt",
    "ReviewDecision",
    "ReviewError",
    "RunDirectory",
    "RunRecord",
    "RunnerConfig",
    "RunnerRequest",
    "RunnerResponse",
    "SuiteError",
    "Verifier",
    "VerifyReport",
    "__version__",
    "batch_verifier_factory",
    "current_anchors",
    "find_project",
    "qualify_files",
    "record_review",
    "run_batch",
    "source_verifiers",
    "verify_tasks",
    "write_report",
]
"""What an embedding repository may use; ``_EXPORTS`` says where each name lives."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_eval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:
    from agent_eval.batch.run import BatchOutcome, run_batch
    from agent_eval.errors import (
        AgentEvalError,
        CleanupError,
        ConfigError,
        EngineUnavailableError,
        EvidenceError,
        InfrastructureError,
        ReviewError,
        SuiteError,
    )
    from agent_eval.layout import RunDirectory
    from agent_eval.models import (
        ArchivesManifest,
        AttemptRecord,
        ConsumerLock,
        QualificationResult,
        Receipt,
        ReviewDecision,
        RunnerConfig,
        RunnerRequest,
        RunnerResponse,
        RunRecord,
    )
    from agent_eval.project import Project, find_project
    from agent_eval.report.render import write_report
    from agent_eval.verdict.qualification import Anchors, current_anchors, qualify_files
    from agent_eval.verdict.review import record_review
    from agent_eval.verification.container.verifier import (
        batch_verifier_factory,
        source_verifiers,
    )
    from agent_eval.verification.fixture_check import VerifyReport, verify_tasks
    from agent_eval.verification.local import LocalVerifier
    from agent_eval.verification.protocol import Verifier
