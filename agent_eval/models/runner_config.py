"""runner.json: how to start the agent under evaluation, and what it must be."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, JsonValue, field_validator

from agent_eval.models.base import NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.identity import ModelIdentity, RunnerIdentity

__all__ = ["RunnerConfig", "check_pinned_image"]

MAX_SUBMISSION_TIMEOUT_MS = 600_000
MAX_BATCH_TIMEOUT_MS = 7_200_000

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Credentials the runner never needs: package registries, source hosting,
# clouds and databases. A runner needs model credentials only.
_REFUSED_ENV_EXACT = frozenset(
    {
        "NPM_TOKEN",
        "NODE_AUTH_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GH_ENTERPRISE_TOKEN",
        "GITLAB_TOKEN",
        "CI_JOB_TOKEN",
        "PYPI_TOKEN",
        "TWINE_PASSWORD",
        "TWINE_USERNAME",
        "DOCKER_AUTH_CONFIG",
        "DOCKER_HOST",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "DATABASE_URL",
        "REDIS_URL",
        "MONGODB_URI",
        "MONGO_URL",
        "MYSQL_PWD",
        "SSH_AUTH_SOCK",
        "KUBECONFIG",
    }
)
_REFUSED_ENV_PREFIXES = (
    "AWS_",
    "AZURE_",
    "ARM_",
    "GCP_",
    "GCLOUD_",
    "GOOGLE_CLOUD_",
    "CLOUDSDK_",
    "PG",
    "MYSQL_",
    "NPM_CONFIG_",
    "GITHUB_",
    "GH_",
    "DIGITALOCEAN_",
)

# Shapes of literal secrets that must never be written into the config itself.
_SECRET_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{8,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----|npm_[A-Za-z0-9]{30,})"
)
_SECRET_SETTING_KEYS = re.compile(r"(api[_-]?key|secret|token|password|credential)", re.I)


def _check_env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(f"{value!r} is not an environment variable name")
    upper = value.upper()
    if upper in _REFUSED_ENV_EXACT or upper.startswith(_REFUSED_ENV_PREFIXES):
        raise ValueError(
            f"{value!r} is a registry, source-hosting, cloud or database credential; "
            "a runner may receive model credentials only"
        )
    return value


def check_pinned_image(value: str) -> str:
    """Accept ``name@sha256:<64 hex>`` or an image id ``sha256:<64 hex>`` only."""
    hex64 = re.compile(r"^[0-9a-f]{64}$")
    if value.startswith("sha256:"):
        if hex64.match(value[7:]):
            return value
    elif "@sha256:" in value:
        name, _, digest = value.partition("@sha256:")
        if name and hex64.match(digest) and not any(c.isspace() for c in name):
            return value
    raise ValueError(
        f"{value!r} is not pinned: use name@sha256:<64 hex> or an image id sha256:<64 hex>"
    )


def _check_no_secret(value: str) -> str:
    if _SECRET_SHAPES.search(value):
        raise ValueError(
            "looks like a literal credential; pass credentials by name in envAllowlist"
        )
    return value


EnvName = Annotated[str, AfterValidator(_check_env_name)]
PinnedImage = Annotated[str, AfterValidator(check_pinned_image)]
Argument = Annotated[str, Field(max_length=4096), AfterValidator(_check_no_secret)]


class RunnerConfig(WireModel):
    """The operator's runner configuration (``runner.json``)."""

    schemaVersion: SchemaVersion
    """Format version of runner.json."""
    executable: NonEmptyStr
    """Absolute path of the runner executable inside the runner image (no shell)."""
    args: list[Argument] = Field(max_length=64)
    """Argument array passed to the executable as is (no shell expansion)."""
    envAllowlist: list[EnvName] = Field(max_length=32)
    """Names of host environment variables passed to the runner (model credentials only)."""
    expectedRunner: RunnerIdentity
    """Runner identity every response must report exactly."""
    expectedModel: ModelIdentity
    """Model identity every response must report exactly."""
    submissionTimeoutMs: int = Field(ge=1, le=MAX_SUBMISSION_TIMEOUT_MS)
    """Wall-clock limit for one runner attempt, enforced from outside the container."""
    batchTimeoutMs: int = Field(ge=1, le=MAX_BATCH_TIMEOUT_MS)
    """Wall-clock limit for the whole schedule; remaining runs fail when it is spent."""
    runtimePath: NonEmptyStr
    """Local container engine socket (absolute path of a Unix socket)."""
    runnerImage: PinnedImage
    """Runner image pinned by digest or image id; never pulled."""
    verifierImage: PinnedImage
    """Verifier image pinned by digest or image id; never pulled."""
    concurrency: int | None = Field(default=None, ge=1, le=16)
    """Runs in flight at once; default is sized for the machine."""
    network: Literal["none", "default"] = "none"
    """Runner network: none (model endpoint inside the container) or the engine default."""

    @field_validator("executable", "runtimePath")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or "\x00" in value:
            raise ValueError(f"{value!r} must be an absolute path")
        return value

    @field_validator("envAllowlist")
    @classmethod
    def _unique_env(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("lists a name twice")
        return value

    @field_validator("expectedModel")
    @classmethod
    def _no_secret_settings(cls, value: ModelIdentity) -> ModelIdentity:
        _scan_settings(value.settings, "settings")
        return value


def _scan_settings(value: JsonValue, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if _SECRET_SETTING_KEYS.search(key):
                raise ValueError(
                    f"{where}.{key}: credentials do not belong in model settings; "
                    "pass them by name in envAllowlist"
                )
            _scan_settings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _scan_settings(item, f"{where}[{index}]")
    elif isinstance(value, str):
        _check_no_secret(value)
