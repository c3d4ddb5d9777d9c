"""Every wire and evidence format, as pydantic models."""

from agent_eval.models.analysis import Analysis, Diagnostic, DiagnosticCategory, IntegrationResult
from agent_eval.models.archives import (
    ArchiveEntry,
    ArchivesManifest,
    ImageRecord,
    SourceIdentity,
    Toolchain,
)
from agent_eval.models.behaviour import (
    BehaviourError,
    BehaviourResult,
    VerifierIsolation,
    VerifierJob,
    VerifierLimits,
)
from agent_eval.models.catalog import ApiCatalog, CatalogDistribution, CatalogEntry, CatalogKind
from agent_eval.models.chain import ChainBatch
from agent_eval.models.cluster import NodeAssignment, NodeReady, NodeRunResult, ShippedFile
from agent_eval.models.compare import (
    ApiChanges,
    Comparison,
    IdentityDifference,
    RateComparison,
    SharedSummary,
    SharedTask,
    SideSummary,
    SymbolChange,
    TaskComparison,
)
from agent_eval.models.consumer_lock import ConsumerLock, LockedDistribution
from agent_eval.models.fixture import CorrectCase, FixtureCaseRow, FixtureReport, NegativeCase
from agent_eval.models.gateway import (
    GatewayRecord,
    GatewaySettings,
    GatewayUse,
    RecordedUpstream,
)
from agent_eval.models.identity import ModelIdentity, RunnerIdentity
from agent_eval.models.image_recipe import ImageRecipe
from agent_eval.models.install_recipe import InstallRecipe, PayloadFile, RunnerImage, SourcePin
from agent_eval.models.lease import Lease
from agent_eval.models.qualification import QualificationResult
from agent_eval.models.receipt import (
    MAX_TRIES_PER_ATTEMPT,
    RETRYABLE_KINDS,
    TRY_FOLDER,
    AssertionOutcome,
    AttemptRecord,
    BatchStatus,
    FailureCategory,
    InfrastructureKind,
    InfrastructureTry,
    NodeIdentity,
    Predecessor,
    ProtectedInputs,
    Receipt,
    Redaction,
    RefusedPath,
    ReviewDecision,
    RunnerResources,
    RunRecord,
    SolutionFile,
)
from agent_eval.models.registry import RegistryEntry, RunnerRegistry
from agent_eval.models.runner_config import GatewayOptions, ModelUpstream, RunnerConfig
from agent_eval.models.runner_protocol import (
    RepairFeedback,
    ReportedUsage,
    RunnerRequest,
    RunnerResponse,
)
from agent_eval.models.suite import TASK_ID_PATTERN, SuiteSpec
from agent_eval.models.task import IntegrationRequirement, TaskSpec
from agent_eval.models.verifier_attempt import (
    AnalysisErrorDetail,
    AnalysisFailure,
    AttemptAnalysis,
    VerifierAttempt,
)

__all__ = [
    "MAX_TRIES_PER_ATTEMPT",
    "RETRYABLE_KINDS",
    "TASK_ID_PATTERN",
    "TRY_FOLDER",
    "Analysis",
    "AnalysisErrorDetail",
    "AnalysisFailure",
    "ApiCatalog",
    "ApiChanges",
    "ArchiveEntry",
    "ArchivesManifest",
    "AssertionOutcome",
    "AttemptAnalysis",
    "AttemptRecord",
    "BatchStatus",
    "BehaviourError",
    "BehaviourResult",
    "CatalogDistribution",
    "CatalogEntry",
    "CatalogKind",
    "ChainBatch",
    "Comparison",
    "ConsumerLock",
    "CorrectCase",
    "Diagnostic",
    "DiagnosticCategory",
    "FailureCategory",
    "FixtureCaseRow",
    "FixtureReport",
    "GatewayOptions",
    "GatewayRecord",
    "GatewaySettings",
    "GatewayUse",
    "IdentityDifference",
    "ImageRecipe",
    "ImageRecord",
    "InfrastructureKind",
    "InfrastructureTry",
    "InstallRecipe",
    "IntegrationRequirement",
    "IntegrationResult",
    "Lease",
    "LockedDistribution",
    "ModelIdentity",
    "ModelUpstream",
    "NegativeCase",
    "NodeAssignment",
    "NodeIdentity",
    "NodeReady",
    "NodeRunResult",
    "PayloadFile",
    "Predecessor",
    "ProtectedInputs",
    "QualificationResult",
    "RateComparison",
    "Receipt",
    "RecordedUpstream",
    "Redaction",
    "RefusedPath",
    "RegistryEntry",
    "RepairFeedback",
    "ReportedUsage",
    "ReviewDecision",
    "RunRecord",
    "RunnerConfig",
    "RunnerIdentity",
    "RunnerImage",
    "RunnerRegistry",
    "RunnerRequest",
    "RunnerResources",
    "RunnerResponse",
    "SharedSummary",
    "SharedTask",
    "ShippedFile",
    "SideSummary",
    "SolutionFile",
    "SourceIdentity",
    "SourcePin",
    "SuiteSpec",
    "SymbolChange",
    "TaskComparison",
    "TaskSpec",
    "Toolchain",
    "VerifierAttempt",
    "VerifierIsolation",
    "VerifierJob",
    "VerifierLimits",
]
