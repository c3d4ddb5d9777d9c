"""runner.json: how to start the agent under evaluation, and what it must be."""

from __future__ import annotations

import ipaddress
import itertools
import math
import re
import unicodedata
from collections import Counter
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, JsonValue, field_validator, model_validator

from agent_eval.models.base import NonEmptyStr, SchemaVersion, WireModel
from agent_eval.models.gateway import ApiKind, TokenPrice
from agent_eval.models.identity import ModelIdentity, RunnerIdentity

__all__ = [
    "GatewayOptions",
    "ModelUpstream",
    "RunnerConfig",
    "check_no_literal_secret",
    "check_pinned_image",
    "check_printable",
]

MAX_SUBMISSION_TIMEOUT_MS = 600_000
MAX_BATCH_TIMEOUT_MS = 7_200_000
MAX_CONCURRENCY = 128
"""Runs in flight at once on one engine at most (a config's concurrency, a cluster node's
share): a bound on typing errors; what a machine admits is its memory's (``batch.admission``)."""

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
_SECRET_SETTING_KEYS = re.compile(r"(api[_-]?key|secret|password|credential)", re.I)


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


_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PINNED_REFERENCE = re.compile(
    rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]{{1,5}})?/)?"  # registry[:port]/
    rf"{_PATH_PART}(?:/{_PATH_PART})*"  # repository path
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"  # :tag
    r"@sha256:[0-9a-f]{64}"
)
"""The engine's image reference grammar, pinned by digest: nothing else gets through."""
_IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")


def check_pinned_image(value: str) -> str:
    """Accept ``name[:tag]@sha256:<64 hex>`` in the reference grammar, or an image id."""
    if len(value) <= 512 and (_IMAGE_ID.fullmatch(value) or _PINNED_REFERENCE.fullmatch(value)):
        return value
    raise ValueError(
        f"{value!r} is not pinned: use name@sha256:<64 hex> (a name in the engine's "
        "reference grammar: lowercase path parts, an optional registry and tag) or an image "
        "id sha256:<64 hex>"
    )


def check_no_literal_secret(value: str) -> str:
    """Refuse *value* when it holds something shaped like a literal credential.

    Raises:
        ValueError: It does.
    """
    return _check_no_secret(value)


_RANDOM_RUN = re.compile(r"[A-Za-z0-9+_=\-]{32,}")
_RANDOM_BITS = 4.3
"""Bits per character above which a long run of letters and digits is taken for a key:
hex (a digest, a uuid) stays below 4, random base64 is near 6."""


def _looks_random(text: str) -> bool:
    """A run of at least 32 letters and digits, mixing both, as varied as a random key."""
    for run in _RANDOM_RUN.findall(text):
        if not (any(c.isdigit() for c in run) and any(c.isalpha() for c in run)):
            continue
        counts = Counter(run)
        bits = -sum(n / len(run) * math.log2(n / len(run)) for n in counts.values())
        if bits >= _RANDOM_BITS:
            return True
    return False


_CREDENTIAL_WORDS = frozenset(
    {
        "KEY",
        "KEYS",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "PWD",
        "PAT",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "AUTH",
        "AUTHORIZATION",
        "BEARER",
        "COOKIE",
        "JWT",
        "PRIVATE",
        # What a secret scanner's generic rules take for one too: a DSN or webhook URL
        # carries its key, PASS and PW are passwords, SK a secret key, a proxy URL its
        # user and password, OAUTH and the rest speak for themselves.
        "PASS",
        "PW",
        "SK",
        "DSN",
        "WEBHOOK",
        "WEBHOOKS",
        "PROXY",
        "OAUTH",
        "SESSION",
        "SIGNATURE",
        "SALT",
        "OTP",
        "NETRC",
        "PASSCODE",
    }
)
"""Words that make a name a credential's, whatever service it belongs to
(``DOCKERHUB_TOKEN``, ``CR_PAT``, ``SUPABASE_SERVICE_ROLE_KEY``, ``--api-key``)."""
_GLUED_ENDINGS = (
    "TOKEN",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "APIKEY",
    "KEY",
    "PASS",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "DSN",
    "WEBHOOK",
    "PROXY",
    "AUTH",
)
"""Endings that make a word a credential's even glued to another (``APITOKEN``,
``OPENAIKEY``, ``SSHPASS``, ``HTTPSPROXY``)."""
_ORDINARY_GLUED = frozenset(
    {
        "MONKEY",
        "DONKEY",
        "TURKEY",
        "HOCKEY",
        "JOCKEY",
        "WHISKEY",
        "TURNKEY",
        "HOTKEY",
        "HOTKEYS",
        "BYPASS",
        "COMPASS",
        "SURPASS",
        "TRESPASS",
        "MULTIPASS",
        "SINGLEPASS",
    }
)
"""Ordinary words with such an ending (a wrongly refused one is added here)."""
_URL_WORDS = frozenset({"URL", "URI", "DSN", "STRING", "STR"})
_URL_OWNERS = frozenset(
    {
        "INDEX",
        "DATABASE",
        "DB",
        "BROKER",
        "REGISTRY",
        "REPOSITORY",
        "REPO",
        "CONNECTION",
        "CONN",
        "MONGODB",
        "MONGO",
        "REDIS",
        "AMQP",
        "RABBITMQ",
        "POSTGRES",
        "POSTGRESQL",
        "MYSQL",
        "SQLALCHEMY",
        "CELERY",
        "CACHE",
        "SMTP",
        "LDAP",
    }
)
"""A URL of one of these (``PIP_INDEX_URL``, ``DATABASE_URL``, ``CELERY_BROKER_URL``)
carries its user and password in the URL itself."""
_WORD_SPLIT = re.compile(r"[-_.\s]+")
_DASHES = re.compile("[\u2010-\u2015\u2212\u2043\ufe58\ufe63\uff0d\u02d7\u2796\u058a\u05be]")


def folded(text: str) -> str:
    """*text* as a reader sees it: NFKC (full-width and compatibility forms) with every
    look-alike dash made ``-`` (``--api\u2010key`` is ``--api-key``)."""
    return _DASHES.sub("-", unicodedata.normalize("NFKC", text))


def _credential_word(name: str) -> str | None:
    """The word of *name* (split at ``-``, ``_``, ``.`` and case changes) that makes it a
    credential's, or the pair of words (``INDEX_URL``)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", folded(name))  # apiKey -> api_Key
    words = [w for w in _WORD_SPLIT.split(spaced.upper()) if w]
    for word in words:
        if word in _CREDENTIAL_WORDS:
            return word
        if word not in _ORDINARY_GLUED:
            for ending in _GLUED_ENDINGS:
                if word.endswith(ending) and len(word) > len(ending):
                    return word
    for owner, kind in itertools.pairwise(words):
        if owner in _URL_OWNERS and kind in _URL_WORDS:
            return f"{owner}_{kind}"
    return None


def _named_credential(argument: str) -> str | None:
    """The option, setting or header name in *argument* that names a credential:
    ``--api-key``, ``--token=…``, ``api_key=…``, ``"api_key": …``, ``Authorization: …``,
    or the header name alone (its value in the next argument)."""
    names = []
    option = re.match(r"-{1,2}([A-Za-z][A-Za-z0-9_.-]*)", argument)
    if option:
        names.append(option.group(1))
    names += re.findall(r"([A-Za-z][A-Za-z0-9_.-]*)[\"']?\s*[=:]", argument)
    if _BARE_NAME.fullmatch(argument):
        names.append(argument)
    for name in names:
        if _credential_word(name) is not None:
            return name
    return None


_BARE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*:?")
"""An argument that is a name alone: a header's or a setting's, its value in the next."""
_AUTH_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest|apikey|negotiate)\s+\S")
"""A header value with its scheme (``Bearer abc``), split from its header name."""
_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@?#]*@")
"""A URL with a user (and password) before its host: ``https://user:key@host``."""
_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{32,}(?![0-9A-Fa-f])")
_DIGEST_PREFIX = re.compile(r"(?:sha1|sha224|sha256|sha384|sha512|md5|blake2b)[:=]$", re.I)
"""A hex run after an algorithm's name is a digest, not a key."""


def _check_argument(value: str) -> str:
    if any(unicodedata.category(c).startswith("C") for c in value):
        raise ValueError(
            f"{value[:80]!a} holds a control or invisible character; an argument is printable text"
        )
    seen = folded(value)
    if _SECRET_SHAPES.search(seen):  # a known key's shape first: the most telling reason
        _check_no_secret(seen)
    named = _named_credential(seen)
    if named is not None:
        raise ValueError(
            f"{named!r} names a credential: the runner never receives one (the gateway adds "
            "the model's to each request); name it in models[].credentialEnv instead"
        )
    if _AUTH_SCHEME.match(seen):
        raise ValueError(
            "is an authorization header's value; the runner never receives a credential "
            "(the gateway adds the model's to each request)"
        )
    if _USERINFO.search(seen):
        raise ValueError(
            "holds a URL with a user or password before its host (scheme://user:secret@); "
            "the runner never receives a credential"
        )
    for run in _HEX_RUN.finditer(seen):
        if not _DIGEST_PREFIX.search(seen[: run.start()]):
            raise ValueError(
                f"holds a run of {len(run.group())} hex digits, as a literal key would (a "
                "digest is written algorithm:hex); name the credential in "
                "models[].credentialEnv instead"
            )
    _check_no_secret(seen)
    return value


def _check_no_secret(value: str) -> str:
    if _SECRET_SHAPES.search(value):
        raise ValueError(
            "looks like a literal credential; name it in models[].credentialEnv instead"
        )
    if _looks_random(value):
        raise ValueError(
            "holds a long random-looking string, as a literal credential would; name the "
            "credential in models[].credentialEnv instead"
        )
    return value


def _check_runner_env_name(value: str) -> str:
    _check_env_name(value)
    if value.upper() in MODEL_CREDENTIALS:
        raise ValueError(
            f"{value!r} is a model credential or endpoint: the runner never receives one; "
            "name it in models[].credentialEnv, and the gateway adds it to each request"
        )
    word = _credential_word(value)
    if word is not None:
        raise ValueError(
            f"{value!r} names a credential (the word {word}): a runner may receive no "
            "credential of any service, and its model's reaches the model only through the gateway"
        )
    return value


EnvName = Annotated[str, AfterValidator(_check_env_name)]
RunnerEnvName = Annotated[str, AfterValidator(_check_runner_env_name)]
PinnedImage = Annotated[str, AfterValidator(check_pinned_image)]
Argument = Annotated[str, Field(max_length=4096), AfterValidator(_check_argument)]


def _check_upstream(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{value!r} is not an https:// origin of a model API")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{value!r}: an upstream is an origin: no user, query or fragment")
    if parts.path not in ("", "/"):
        raise ValueError(
            f"{value!r}: an upstream is an origin (scheme, host, port); the CLI sends the path"
        )
    try:
        parts.port  # noqa: B018 -- raises for a port out of range
    except ValueError as exc:
        raise ValueError(f"{value!r}: {exc}") from None
    return value.rstrip("/")


class ModelUpstream(WireModel):
    """One model API the runner may reach, only through the batch's gateway."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")
    """What runners call it (``--upstream NAME`` of the adapters)."""
    upstream: Annotated[str, AfterValidator(_check_upstream)]
    """The provider's origin, ``https://host[:port]``."""
    credentialEnv: EnvName
    """Host environment variable holding the credential; only the gateway receives it."""
    credentialHeader: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9-]{0,63}$")
    """Header the gateway puts it in: ``x-api-key`` (as is) or ``Authorization`` (Bearer)."""
    servedModels: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=16
    )
    """Model names the provider may say it served; any other is an identity mismatch."""
    api: ApiKind = "model-apis"
    """Which model API the upstream is (anthropic, openai, gemini, bedrock, vertex): the
    gateway forwards only that API's endpoints (messages, chat completions, responses,
    models, ...), never account, file or key endpoints; ``model-apis`` allows the endpoints
    of any of them."""
    probePath: str = Field(
        default="/v1/models/{model}", pattern=r"^/[A-Za-z0-9._~/{}:@-]*$", max_length=200
    )
    """What the preflight asks through the gateway; ``{model}`` is the first served model."""
    price: TokenPrice | None = None
    """What the upstream charges per token, for the cost the matrix and report show
    (none: no cost is shown for its tokens)."""


class GatewayOptions(WireModel):
    """How the batch's gateway runs."""

    network: str = Field(default="default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    """The engine network the gateway joins to reach the upstreams (the runner has none)."""
    hosts: dict[str, str] = Field(default_factory=dict, max_length=8)
    """Names the gateway resolves to fixed addresses (only with privateUpstreams)."""
    privateUpstreams: bool = False
    """Allow upstreams on private addresses and plain http (a fake provider in a test
    network); such a batch is self-test. Loopback, link-local and metadata stay refused."""
    tokenBudget: int | None = Field(default=None, ge=1)
    """Tokens (input plus output, as the provider reports them) the whole batch may spend;
    the batch stops when they are."""

    @field_validator("hosts")
    @classmethod
    def _addresses(cls, value: dict[str, str]) -> dict[str, str]:
        for name, address in value.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}", name):
                raise ValueError(f"{name!r} is not a host name")
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise ValueError(f"{name}: {address!r} is not an IP address") from None
        return value


class RunnerConfig(WireModel):
    """The operator's runner configuration (``runner.json``)."""

    schemaVersion: SchemaVersion
    """Format version of runner.json."""
    executable: NonEmptyStr
    """Absolute path of the runner executable inside the runner image (no shell)."""
    args: list[Argument] = Field(max_length=64)
    """Argument array passed to the executable as is (no shell expansion)."""
    envAllowlist: list[RunnerEnvName] = Field(max_length=32)
    """Names of host environment variables passed to the runner (never a credential: model
    credentials go to the gateway through models[].credentialEnv)."""
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
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    """Runs in flight at once (at most 128, and only as many as the machine's memory holds);
    default is sized for the machine."""
    models: list[ModelUpstream] = Field(default_factory=list, max_length=8)
    """The model APIs the runner may reach, only through the batch's gateway; none: the
    runner reaches nothing, so its model could only be a scripted one (self-test)."""
    gateway: GatewayOptions = Field(default_factory=GatewayOptions)
    """How the gateway runs."""
    gatewayImage: PinnedImage | None = None
    """The gateway image, pinned; required with models."""

    @model_validator(mode="before")
    @classmethod
    def _no_network(cls, data: Any) -> Any:
        if isinstance(data, dict) and "network" in data:
            raise ValueError(
                "network: the runner has no network any more; list the model APIs it may "
                "reach in models[] (the batch's gateway is its only way out)"
            )
        return data

    @model_validator(mode="after")
    def _gateway_consistent(self) -> RunnerConfig:
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError("models: names an upstream twice")
        if self.models and self.gatewayImage is None:
            raise ValueError(
                "gatewayImage: required with models (agent-eval images build prints it)"
            )
        if not self.gateway.privateUpstreams:
            for model in self.models:
                if model.upstream.startswith("http://"):
                    raise ValueError(
                        f"models: {model.name}: plain http is for a fake provider in a test "
                        "network only (gateway.privateUpstreams); a model API is https"
                    )
            if self.gateway.hosts:
                raise ValueError("gateway.hosts: fixed addresses need gateway.privateUpstreams")
        return self

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

    @field_validator("expectedRunner", "expectedModel")
    @classmethod
    def _identity_is_text(
        cls, value: RunnerIdentity | ModelIdentity
    ) -> RunnerIdentity | ModelIdentity:
        # Every report, summary and terminal line prints these: text, never markup or a
        # line of its own (a newline could forge a heading, a bidi override reorder it).
        fields = ("name", "version") if isinstance(value, RunnerIdentity) else ("id",)
        for name in fields:
            check_printable(getattr(value, name), name)
        return value

    @field_validator("expectedModel")
    @classmethod
    def _no_secret_settings(cls, value: ModelIdentity) -> ModelIdentity:
        _scan_settings(value.settings, "settings")
        return value


def check_printable(value: str, where: str) -> str:
    """Refuse *value* when it holds a character that does not print as itself: a control
    character (newlines included), a line or paragraph separator, a bidi override or
    other format character, a surrogate, a private-use or unassigned code point.

    Raises:
        ValueError: It does (the message names *where* and the character).
    """
    for index, char in enumerate(value):
        category = unicodedata.category(char)
        if category.startswith("C") or category in ("Zl", "Zp"):
            raise ValueError(
                f"{where}: holds {char!a} ({unicodedata.name(char, category)}) at {index}; "
                "an identity is printable text on one line"
            )
    return value


def _scan_settings(value: JsonValue, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if _SECRET_SETTING_KEYS.search(key) or _credential_word(key) is not None:
                raise ValueError(
                    f"{where}.{key}: credentials do not belong in model settings; "
                    "name them in models[].credentialEnv"
                )
            _scan_settings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _scan_settings(item, f"{where}[{index}]")
    elif isinstance(value, str):
        _check_no_secret(value)
