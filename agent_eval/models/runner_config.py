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

# The credential policy. A runner needs its model's credentials and nothing
# else: names a model provider documents are allowed (even where a prefix rule
# below would refuse them, e.g. AZURE_ and AWS_); registry, source-hosting,
# cloud, database, vault and generic secret names are refused. Each rule has a
# test; a name that is refused wrongly is added to MODEL_CREDENTIALS.
MODEL_CREDENTIALS = frozenset(
    {
        # Anthropic, OpenAI and OpenAI-compatible endpoints
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        # Azure OpenAI
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT",
        "AZURE_OPENAI_API_VERSION",
        "AZURE_API_KEY",
        "AZURE_API_BASE",
        "AZURE_API_VERSION",
        # Amazon Bedrock
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "ANTHROPIC_BEDROCK_BASE_URL",
        # Google Vertex AI and Gemini
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "VERTEXAI_PROJECT",
        "VERTEXAI_LOCATION",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        # Other model APIs
        "MISTRAL_API_KEY",
        "GROQ_API_KEY",
        "DEEPSEEK_API_KEY",
        "OPENROUTER_API_KEY",
        "TOGETHER_API_KEY",
        "FIREWORKS_API_KEY",
        "XAI_API_KEY",
        "COHERE_API_KEY",
    }
)
"""Model-provider credential and endpoint names a runner may receive."""

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
        "PYPI_API_TOKEN",
        "TWINE_PASSWORD",
        "TWINE_USERNAME",
        "UV_PUBLISH_TOKEN",
        "POETRY_PYPI_TOKEN_PYPI",
        "CARGO_REGISTRY_TOKEN",
        "GEM_HOST_API_KEY",
        "NUGET_API_KEY",
        "HEX_API_KEY",
        "DOCKER_AUTH_CONFIG",
        "DOCKER_HOST",
        "DOCKER_CONFIG",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "DATABASE_URL",
        "REDIS_URL",
        "MONGODB_URI",
        "MONGO_URL",
        "MYSQL_PWD",
        "SSH_AUTH_SOCK",
        "KUBECONFIG",
        "VAULT_TOKEN",
        "VAULT_ADDR",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HUGGINGFACE_TOKEN",
        "SENTRY_AUTH_TOKEN",
        "SLACK_TOKEN",
        "SLACK_BOT_TOKEN",
        "STRIPE_API_KEY",
        "STRIPE_SECRET_KEY",
        "NETRC",
        "GPG_PASSPHRASE",
        "SNYK_TOKEN",
        "CODECOV_TOKEN",
        "CLOUDFLARE_API_TOKEN",
        "HEROKU_API_KEY",
        "TF_TOKEN_APP_TERRAFORM_IO",
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
    "POSTGRES_",
    "MONGO_",
    "REDIS_",
    "NPM_CONFIG_",
    "GITHUB_",
    "GH_",
    "GITLAB_",
    "DIGITALOCEAN_",
    "DOCKER_",
    "VAULT_",
    "CI_",
    "TWINE_",
    "CARGO_",
    "KUBE",
    "SSH_",
)
# Generic secrets: a password, a private key, a secret, a registry or vault token.
_REFUSED_ENV_SUFFIXES = (
    "_PASSWORD",
    "_PASSWD",
    "_PASS",
    "_PRIVATE_KEY",
    "_SECRET",
    "_SECRET_KEY",
    "_CLIENT_SECRET",
    "_SESSION_TOKEN",
    "_REFRESH_TOKEN",
    "_REGISTRY_TOKEN",
    "_DEPLOY_KEY",
)

# Shapes of literal secrets that must never be written into the config itself.
_SECRET_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|sk-ant-[A-Za-z0-9_\-]{8,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----|npm_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,}"
    r"|[sr]k_(?:live|test)_[0-9A-Za-z]{16,}|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+"
    r"|pypi-AgE[A-Za-z0-9_\-]{20,}|dop_v1_[0-9a-f]{40,}|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,})"
)
_SECRET_SETTING_KEYS = re.compile(r"(api[_-]?key|secret|token|password|credential)", re.I)


def _check_env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError(f"{value!r} is not an environment variable name")
    upper = value.upper()
    if upper in MODEL_CREDENTIALS:
        return value
    if upper in _REFUSED_ENV_EXACT or upper.startswith(_REFUSED_ENV_PREFIXES):
        raise ValueError(
            f"{value!r} is a registry, source-hosting, cloud, database or vault credential; "
            "a runner may receive model credentials only"
        )
    if upper.endswith(_REFUSED_ENV_SUFFIXES):
        raise ValueError(
            f"{value!r} names a generic secret (a password, private key, secret or token of "
            "something other than a model provider); a runner may receive model credentials only"
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
