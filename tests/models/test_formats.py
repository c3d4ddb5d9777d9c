"""Every wire and evidence format is frozen, refuses unknown keys, has a literal schema
version where it is a top-level document, documents every field, and keeps its field set
(a change here is a format change and must be deliberate)."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap

import pytest
from pydantic import BaseModel, ValidationError

from agent_eval import models
from agent_eval.models import SuiteSpec, TaskSpec
from agent_eval.models.base import WireModel
from tests.paths import EXAMPLE_SUITE

ALL_MODELS: list[type[BaseModel]] = [
    getattr(models, name)
    for name in models.__all__
    if isinstance(getattr(models, name), type) and issubclass(getattr(models, name), BaseModel)
]

FIELD_SETS: dict[str, set[str]] = {
    "FixtureCaseRow": {
        "taskId",
        "case",
        "expected",
        "observed",
        "ok",
        "infrastructure",
        "detail",
        "explanations",
    },
    "FixtureReport": {"schemaVersion", "verifier", "seconds", "ok", "rows"},
    "Matrix": {
        "schemaVersion",
        "suiteDigest",
        "taskIds",
        "archives",
        "apiCatalogDigest",
        "sourceCommit",
        "verifierImage",
        "evaluatorDigest",
        "method",
        "rows",
        "pairs",
    },
    "MatrixComparison": {
        "schemaVersion",
        "baselineRecord",
        "candidateRecord",
        "suiteDigest",
        "taskIds",
        "api",
        "method",
        "agents",
        "baselineOnly",
        "candidateOnly",
    },
    "AgentChange": {"label", "comparison", "first", "final"},
    "MatrixRow": {
        "rank",
        "label",
        "runner",
        "model",
        "batchIds",
        "first",
        "final",
        "tasks",
        "unsafeAttempts",
        "unsafeRuns",
        "meanTokensPerRun",
        "meanSecondsPerRun",
        "modelCallsPerSuccess",
        "currency",
        "meanCostPerRun",
        "costPerSuccess",
    },
    "Comparison": {
        "schemaVersion",
        "baseline",
        "candidate",
        "differences",
        "unexpected",
        "api",
        "method",
        "tasks",
        "unsafeAttempts",
        "unsafeRuns",
        "first",
        "final",
    },
    "ApiChanges": {"status", "changes", "note"},
    "SymbolChange": {
        "name",
        "change",
        "baselineKind",
        "candidateKind",
        "baselineSignature",
        "candidateSignature",
    },
    "RateComparison": {
        "baselineSuccesses",
        "baselineRuns",
        "candidateSuccesses",
        "candidateRuns",
        "difference",
        "low",
        "high",
        "pValue",
        "detectable",
        "verdict",
        "sentence",
    },
    "TaskSpec": {
        "schemaVersion",
        "id",
        "title",
        "allowedOutputPaths",
        "allowedImports",
        "requiredPeers",
        "assertionIds",
        "safetyAssertionIds",
        "seedReferences",
        "requiredIntegration",
    },
    "SuiteSpec": {
        "schemaVersion",
        "taskIds",
        "repetitions",
        "scheduledRuns",
        "minFirstSuccesses",
        "requiredFinalSuccesses",
        "maxAttemptsPerRun",
    },
    "RunnerConfig": {
        "schemaVersion",
        "executable",
        "args",
        "envAllowlist",
        "expectedRunner",
        "expectedModel",
        "submissionTimeoutMs",
        "batchTimeoutMs",
        "runtimePath",
        "runnerImage",
        "verifierImage",
        "concurrency",
        "models",
        "gateway",
        "gatewayImage",
    },
    "RunnerRequest": {
        "schemaVersion",
        "runId",
        "taskId",
        "taskText",
        "consumerDir",
        "outputDir",
        "allowedOutputPaths",
        "attempt",
        "timeBudgetMs",
        "repairFeedback",
    },
    "RunnerResponse": {
        "schemaVersion",
        "runId",
        "taskId",
        "status",
        "runner",
        "model",
        "message",
        "usage",
        "failureKind",
    },
    "ReportedUsage": {"inputTokens", "outputTokens", "costUsd"},
    "RepairFeedback": {"schemaVersion", "failedAssertionIds", "diagnostics"},
    "Receipt": {
        "schemaVersion",
        "batchId",
        "status",
        "reasons",
        "selfTest",
        "createdAt",
        "updatedAt",
        "suiteDigest",
        "evaluatorDigest",
        "archivesDigest",
        "consumerLockDigest",
        "runner",
        "model",
        "runnerImage",
        "verifierImage",
        "scheduledRuns",
        "suite",
        "repetitions",
        "selection",
        "firstSuccesses",
        "finalSuccesses",
        "runs",
        "reviewDecisions",
        "runnerConfigDigest",
        "predecessor",
        "nodes",
    },
    "NodeIdentity": {
        "node",
        "engine",
        "address",
        "evaluatorDigest",
        "runnerImageId",
        "verifierImageId",
        "gatewayImageId",
    },
    "Predecessor": {"batchId", "receiptDigest", "reusedRuns"},
    "RunRecord": {"runId", "taskId", "repetition", "firstSuccess", "finalSuccess", "attempts"},
    "Redaction": {"file", "names", "withheld"},
    "AttemptRecord": {
        "infrastructureTries",
        "leftFiles",
        "redactions",
        "attempt",
        "startedAt",
        "durationMs",
        "runnerStatus",
        "submitted",
        "solutionFiles",
        "solutionDigest",
        "refusedPaths",
        "protectedInputs",
        "analysisDigest",
        "syntaxOk",
        "typeCheckOk",
        "contractOk",
        "integrationOk",
        "unsupportedApiCount",
        "hallucinatedApiCount",
        "assertions",
        "safetyPassed",
        "needsReview",
        "diagnostics",
        "repairFeedback",
        "success",
        "failureCategory",
        "infrastructureStatus",
        "infrastructureKind",
        "failureKind",
        "gateway",
        "runnerLogDigest",
        "transcriptDigest",
        "verificationRetries",
        "resources",
        "reportedUsage",
        "node",
    },
    "ReviewDecision": {"run", "attempt", "solutionDigest", "decision", "reviewer", "reviewedAt"},
    "ArchivesManifest": {
        "schemaVersion",
        "archives",
        "source",
        "apiCatalogDigest",
        "toolchain",
        "runnerImage",
        "verifierImage",
        "gateway",
        "registryDigest",
        "runnerCommand",
        "envAllowlist",
        "runner",
        "model",
        "suiteDigest",
        "evaluatorDigest",
    },
    "ArchiveEntry": {"filename", "distribution", "version", "sha256", "size"},
    "ConsumerLock": {
        "schemaVersion",
        "archivesDigest",
        "python",
        "distributions",
        "installedDigest",
        "cacheEntry",
    },
    "LockedDistribution": {"name", "version", "recordDigest", "candidate", "archiveSha256"},
    "QualificationResult": {"qualified", "reasons", "chain", "notes"},
    "ChainBatch": {"batchId", "runs", "tokens", "durationMs"},
    "Analysis": {
        "schemaVersion",
        "taskId",
        "solutionDigest",
        "syntaxOk",
        "typeCheckOk",
        "contractOk",
        "integrationOk",
        "unsupportedApi",
        "unsupportedApiCount",
        "hallucinatedApi",
        "hallucinatedApiCount",
        "missingDependencies",
        "integration",
        "diagnostics",
        "mypyVersion",
    },
    "Diagnostic": {"category", "message", "path", "line"},
    "AssertionOutcome": {"id", "passed", "observed", "safety", "message", "observedValue"},
    "RunnerResources": {
        "memoryLimitBytes",
        "cpus",
        "pidsLimit",
        "tmpBytes",
        "cpuSeconds",
        "wallSeconds",
        "hostCpuPressure",
        "starved",
        "starvedBasis",
        "runQueueWaitSeconds",
        "lastPartSeconds",
        "lastPartRunQueueWaitSeconds",
        "lastPartCpuSeconds",
        "peakMemoryBytes",
        "oomKilled",
    },
    "RunnerIdentity": {"name", "version"},
    "ModelIdentity": {"id", "settings"},
    "CorrectCase": {"schemaVersion", "kind", "description"},
    "NegativeCase": {"schemaVersion", "kind", "description", "failedAssertions", "findings"},
    "InstallRecipe": {"schemaVersion", "kind", "packages", "sourceOnly"},
    "SourcePin": {"sha256", "path"},
    "ModelUpstream": {
        "name",
        "upstream",
        "credentialEnv",
        "credentialHeader",
        "servedModels",
        "probePath",
        "api",
        "price",
    },
    "TokenPrice": {"currency", "inputPerMillionTokens", "outputPerMillionTokens"},
    "GatewayOptions": {"network", "hosts", "privateUpstreams", "tokenBudget"},
    "GatewaySettings": {
        "image",
        "upstreams",
        "network",
        "privateUpstreams",
        "tokenBudget",
        "prices",
    },
    "RecordedUpstream": {"name", "upstream", "credentialHeader", "servedModels", "api"},
    "GatewayRecord": {
        "schemaVersion",
        "at",
        "upstream",
        "method",
        "path",
        "status",
        "requestBytes",
        "responseBytes",
        "durationMs",
        "servedModel",
        "inputTokens",
        "outputTokens",
        "failure",
        "message",
    },
    "GatewayUse": {
        "requests",
        "answered",
        "servedModels",
        "inputTokens",
        "outputTokens",
        "failures",
        "recordDigest",
    },
    "RunnerImage": {
        "schemaVersion",
        "adapter",
        "files",
        "compile",
        "importCheck",
        "importEnvironment",
        "version",
        "adaptersPth",
        "pathPrefix",
        "environment",
    },
    "PayloadFile": {"source", "target"},
    "ImageRecipe": {"schemaVersion", "image", "base", "parent", "architecture", "files"},
    "VerifierAttempt": {"schemaVersion", "analysis", "behaviour", "timingsPath"},
    "AnalysisFailure": {"analysisError"},
    "AnalysisErrorDetail": {"kind", "message"},
    "ShippedFile": {"path", "data"},
    "NodeReady": {
        "node",
        "engine",
        "address",
        "slots",
        "evaluatorDigest",
        "runnerImageId",
        "verifierImageId",
        "gatewayImageId",
        "notices",
    },
    "NodeRunResult": {"node", "record", "files", "ruleStop", "headLost"},
    "NodeAssignment": {
        "batchId",
        "leaseToken",
        "config",
        "environment",
        "runnerImageId",
        "verifierImageId",
        "gatewayImageId",
        "tokenBudget",
        "archives",
        "archiveFiles",
        "archivesDigest",
        "consumerLockDigest",
        "consumerCacheEntry",
        "apiCatalogDigest",
        "suiteDigest",
        "evaluatorDigest",
        "projectFiles",
        "receipt",
        "remainingS",
    },
}

DOCUMENTS = {
    "FixtureReport",
    "Comparison",
    "Matrix",
    "MatrixComparison",
    "SharedSummary",
    "TaskSpec",
    "SuiteSpec",
    "RunnerConfig",
    "RunnerRequest",
    "RunnerResponse",
    "RepairFeedback",
    "Receipt",
    "ArchivesManifest",
    "ConsumerLock",
    "Analysis",
    "InstallRecipe",
    "RunnerImage",
    "ImageRecipe",
}


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_every_format_is_frozen_strict_and_documented(model: type[BaseModel]) -> None:
    assert model.model_config.get("frozen") is True
    assert model.model_config.get("extra") == "forbid"
    documented = field_docstrings(model)
    undocumented = [n for n in model.model_fields if not documented.get(n, "").strip()]
    assert undocumented == [], f"{model.__name__} fields without a docstring: {undocumented}"


def field_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring (the string right below its annotation), the MRO's included."""
    found: dict[str, str] = {}
    for cls in reversed([c for c in model.__mro__ if issubclass(c, BaseModel)]):
        if cls is BaseModel or cls.__module__.startswith("pydantic"):
            continue
        (node,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
        assert isinstance(node, ast.ClassDef)
        for this, following in itertools.pairwise(node.body):
            if (
                isinstance(this, ast.AnnAssign)
                and isinstance(this.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                found[this.target.id] = following.value.value
    return found


def test_a_field_without_a_docstring_is_found() -> None:
    class Undocumented(WireModel):
        documented: int
        """Said."""
        silent: int

    assert field_docstrings(Undocumented) == {"documented": "Said."}


@pytest.mark.parametrize("name", sorted(FIELD_SETS))
def test_the_field_set_of_each_format_is_pinned(name: str) -> None:
    assert set(getattr(models, name).model_fields) == FIELD_SETS[name]


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_top_level_documents_carry_a_literal_schema_version(name: str) -> None:
    field = getattr(models, name).model_fields["schemaVersion"]
    assert field.is_required()
    assert repr(field.annotation) == "typing.Literal[1]"


def test_the_fixed_suite_is_six_tasks_three_times_with_its_thresholds() -> None:
    assert EXAMPLE_SUITE.taskIds == (
        "core-validation",
        "storage-hash",
        "forms",
        "tool-validation",
        "approval-boundary",
        "error-recovery",
    )
    assert (EXAMPLE_SUITE.repetitions, EXAMPLE_SUITE.scheduledRuns) == (3, 18)
    assert (EXAMPLE_SUITE.minFirstSuccesses, EXAMPLE_SUITE.requiredFinalSuccesses) == (15, 18)
    assert len(EXAMPLE_SUITE.run_ids()) == 18


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"repetitions": 4}, "scheduledRuns 18 != 6 tasks x 4 repetitions"),
        ({"scheduledRuns": 21}, "scheduledRuns 21"),
        ({"requiredFinalSuccesses": 17}, "requiredFinalSuccesses must equal scheduledRuns"),
        ({"minFirstSuccesses": 19}, "minFirstSuccesses"),
        ({"taskIds": ("a", "a", "b", "c", "d", "e")}, "duplicates"),
    ],
)
def test_schedule_and_thresholds_are_validated_together(
    change: dict[str, object], message: str
) -> None:
    data = EXAMPLE_SUITE.model_dump() | change
    with pytest.raises(ValidationError, match=message):
        SuiteSpec.model_validate(data)


def task(**changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "schemaVersion": 1,
        "id": "core-validation",
        "title": "Validate orders",
        "allowedOutputPaths": ["solution.py"],
        "allowedImports": ["appkit", "appkit/*"],
        "requiredPeers": [],
        "assertionIds": ["accepts-valid", "rejects-invalid"],
        "safetyAssertionIds": ["rejects-invalid"],
        "seedReferences": [],
        "requiredIntegration": [{"symbols": ["create_validator"]}],
    }
    data.update(changes)
    return data


def test_safety_assertions_must_be_declared_assertions() -> None:
    with pytest.raises(ValidationError, match=r"safetyAssertionIds \['nope'\]"):
        TaskSpec.model_validate(task(safetyAssertionIds=["nope"]))


@pytest.mark.parametrize("path", ["../x.py", "/abs.py", "a/../b.py", "solution.txt", "./a.py", ""])
def test_output_paths_must_be_plain_relative_python_files(path: str) -> None:
    with pytest.raises(ValidationError, match="allowedOutputPaths"):
        TaskSpec.model_validate(task(allowedOutputPaths=[path]))


def test_wildcard_imports_allow_subpackages_only_of_that_package() -> None:
    spec = TaskSpec.model_validate(task(allowedImports=["appkit/*", "appkit_forms"]))
    assert spec.allows_import("appkit") and spec.allows_import("appkit.validation")
    assert spec.allows_import("appkit_forms") and not spec.allows_import("appkit_forms.render")
    assert not spec.allows_import("appkitx")


def _int_fields() -> list[tuple[str, str, object]]:
    found = []
    for model in ALL_MODELS:
        for name, info in model.model_fields.items():
            kinds = {info.annotation} | set(getattr(info.annotation, "__args__", ()))
            if int in kinds and bool not in kinds:
                lowest = [m.ge for m in info.metadata if getattr(m, "ge", None) is not None]
                if lowest == [0]:
                    found.append((model.__name__, name, info))
    return found


@pytest.mark.parametrize(("model", "name", "info"), _int_fields(), ids=lambda v: str(v))
def test_every_count_is_bounded_so_sums_and_means_stay_finite(
    model: str, name: str, info: object
) -> None:
    """A count (tokens, bytes, milliseconds) above 2**53 - 1 is refused: a provider's
    10**400 input tokens passed the checker and then crashed compare and matrix."""
    from agent_eval.models.base import MAX_COUNT

    highest = [m.le for m in getattr(info, "metadata", []) if getattr(m, "le", None) is not None]
    assert highest and highest[0] <= MAX_COUNT, (model, name)


def test_a_provider_s_absurd_token_count_is_no_count_and_the_bound_is_the_models() -> None:
    import json

    from agent_eval.gateway import policy
    from agent_eval.models.base import MAX_COUNT

    assert policy._MAX_COUNT == MAX_COUNT
    body = {"model": "m", "usage": {"input_tokens": 10**400, "output_tokens": MAX_COUNT}}
    seen = policy.observe("application/json", json.dumps(body).encode())
    assert (seen.input_tokens, seen.output_tokens) == (None, MAX_COUNT)
