"""The model gateway's formats: what archives.json records of it, its records, their summary."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from agent_eval.models.base import MAX_COUNT, Digest, NonEmptyStr, SchemaVersion, WireModel

__all__ = [
    "GatewayRecord",
    "GatewaySettings",
    "GatewayUse",
    "RecordedUpstream",
    "TokenPrice",
]

ApiKind = Literal["anthropic", "openai", "gemini", "bedrock", "vertex", "model-apis"]
"""The model APIs the gateway knows the endpoints of (``model-apis``: any of them); the
gateway's own table is ``agent_eval.gateway.policy.API_KINDS`` (a test keeps them equal)."""

GatewayFailure = Literal[
    "authentication",
    "unknown-model",
    "rate-limit",
    "server-error",
    "unreachable",
    "refused-upstream",
    "budget",
    "unattributed",
    "cancelled",
    "gateway",
    "refused-request",
    "refused-response",
    "credential-reflected",
]
"""Why a request through the gateway failed: the provider's answer (authentication,
unknown-model, rate-limit, server-error), no answer (unreachable), the gateway's own refusal
(refused-upstream: a non-public address; budget: the batch's tokens are spent;
unattributed: no such attempt; refused-request: a path outside the upstream's model API,
a body that is not JSON, a protocol upgrade or an oversized body, never forwarded;
refused-response: a successful answer of a type whose model and usage cannot be read, in
an encoding the gateway cannot decode, or a protocol switch, never passed on;
credential-reflected: an answer carrying the credential in any spelling, never passed on,
which stops the batch), the runner leaving before the answer (cancelled), or the gateway itself
failing."""

PROVIDER_FAILURES: frozenset[str] = frozenset(
    {"authentication", "unknown-model", "rate-limit", "server-error", "unreachable",
     "refused-upstream", "refused-response", "credential-reflected", "gateway"}
)  # fmt: skip
"""Failures that are the provider's or the gateway's, never the agent's."""


class TokenPrice(WireModel):
    """What an upstream charges per token, as the operator's config says: the matrix's cost.

    The harness never learns a price from a provider; a figure here is the operator's
    own, recorded so that a cost shown beside a batch says what it was computed from."""

    currency: str = Field(pattern=r"^[A-Z]{3}$")
    """ISO 4217 code of the prices (``USD``)."""
    inputPerMillionTokens: float = Field(ge=0, le=1_000_000, allow_inf_nan=False)
    """Price of a million input tokens (cache reads included, as the provider counts them)."""
    outputPerMillionTokens: float = Field(ge=0, le=1_000_000, allow_inf_nan=False)
    """Price of a million output tokens."""

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (
            input_tokens * self.inputPerMillionTokens + output_tokens * self.outputPerMillionTokens
        ) / 1_000_000


class RecordedUpstream(WireModel):
    """One upstream as archives.json and the registry record it (never its credential)."""

    name: NonEmptyStr
    """The name runners use for it."""
    upstream: NonEmptyStr
    """Its origin URL."""
    credentialHeader: NonEmptyStr
    """The header the gateway puts the credential in."""
    api: ApiKind = "model-apis"
    """The kind of model API it is: the gateway forwards only that API's endpoints."""
    servedModels: list[NonEmptyStr]
    """The model names the provider may say it served."""


class GatewaySettings(WireModel):
    """The gateway a batch ran behind, as archives.json records it."""

    image: NonEmptyStr
    """The gateway image as the config pinned it (the engine resolved it to exactly that)."""
    upstreams: list[RecordedUpstream] = Field(min_length=1, max_length=8)
    """Every upstream the runner could reach."""
    network: NonEmptyStr
    """The engine network the gateway (never the runner) was on."""
    privateUpstreams: bool
    """True when upstreams on private addresses were allowed (a test set-up: self-test)."""
    tokenBudget: int | None
    """The batch's token budget, if any."""
    prices: dict[str, TokenPrice] = Field(default_factory=dict, max_length=8)
    """The price per token of each upstream the config priced, by its name (none: no cost
    is shown); never part of what a review or a comparison holds batches to."""


class GatewayRecord(WireModel):
    """One request through the gateway: a line of an attempt's gateway.jsonl."""

    schemaVersion: SchemaVersion
    """Format version of a record."""
    at: AwareDatetime
    """When the gateway recorded it."""
    upstream: str | None
    """The upstream's name (None: the request reached no known listener)."""
    method: str = Field(max_length=16)
    """HTTP method."""
    path: str = Field(max_length=300)
    """Request path (with its query)."""
    status: int | None = Field(ge=100, le=599)
    """The status returned to the runner; None when no response came."""
    requestBytes: int = Field(ge=0, le=MAX_COUNT)
    """Request body size."""
    responseBytes: int = Field(ge=0, le=MAX_COUNT)
    """Response body size (decoded)."""
    durationMs: int = Field(ge=0, le=MAX_COUNT)
    """From the request reaching the gateway to its response."""
    servedModel: str | None = Field(max_length=200)
    """The model the provider says it served."""
    inputTokens: int | None = Field(ge=0, le=MAX_COUNT)
    """Input tokens the provider reports."""
    outputTokens: int | None = Field(ge=0, le=MAX_COUNT)
    """Output tokens the provider reports."""
    failure: GatewayFailure | None
    """Why it failed, when it did."""
    message: str | None = Field(max_length=500)
    """The provider's or the gateway's error message (credentials taken out)."""


class GatewayUse(WireModel):
    """What the gateway saw of one attempt, summarised in the receipt."""

    requests: int = Field(ge=0, le=MAX_COUNT)
    """Requests attributed to the attempt."""
    answered: int = Field(ge=0, le=MAX_COUNT)
    """Of those, the ones the upstream answered with a success (2xx)."""
    servedModels: list[str]
    """Every model name the provider said it served, sorted."""
    inputTokens: int = Field(ge=0, le=MAX_COUNT)
    """Input tokens reported in all."""
    outputTokens: int = Field(ge=0, le=MAX_COUNT)
    """Output tokens reported in all."""
    failures: list[GatewayFailure]
    """Every kind of failure seen, sorted."""
    recordDigest: Digest
    """sha256 of the attempt's gateway.jsonl as saved."""
