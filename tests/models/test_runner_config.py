"""runner.json is refused, naming the field, when it breaks a bound or could leak a credential."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_eval.models import RunnerConfig

PIN = "sha256:" + "a" * 64


def config(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schemaVersion": 1,
        "executable": "/opt/runner/bin/run",
        "args": ["--fast"],
        "envAllowlist": [],
        "expectedRunner": {"name": "claude-code", "version": "2.1.197"},
        "expectedModel": {"id": "model-x", "settings": {"temperature": 0}},
        "submissionTimeoutMs": 300_000,
        "batchTimeoutMs": 3_600_000,
        "runtimePath": "/var/run/docker.sock",
        "runnerImage": "agent-eval/runner@" + PIN,
        "verifierImage": PIN,
        "gatewayImage": PIN,
        "models": [upstream()],
    }
    data.update(changes)
    return data


def upstream(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "anthropic",
        "upstream": "https://api.anthropic.com",
        "credentialEnv": "ANTHROPIC_API_KEY",
        "credentialHeader": "x-api-key",
        "servedModels": ["model-x-2026"],
    }
    data.update(changes)
    return data


PRICE = {"currency": "USD", "inputPerMillionTokens": 3, "outputPerMillionTokens": 15}


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        RunnerConfig.model_validate(data)
    return str(info.value)


def test_a_complete_config_is_accepted_with_defaults() -> None:
    parsed = RunnerConfig.model_validate(config())
    assert parsed.concurrency is None and parsed.models[0].probePath == "/v1/models/{model}"
    assert parsed.gateway.network == "default" and not parsed.gateway.privateUpstreams
    assert parsed.gateway.tokenBudget is None


def test_a_config_without_models_reaches_nothing_and_needs_no_gateway_image() -> None:
    parsed = RunnerConfig.model_validate(config(models=[], gatewayImage=None))
    assert parsed.models == []


def test_the_network_field_is_refused_saying_what_replaced_it() -> None:
    message = refused(config(network="default"))
    assert "network" in message and "models[]" in message and "gateway" in message


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"gatewayImage": None}, "gatewayImage: required"),
        ({"models": [upstream(), upstream()]}, "names an upstream twice"),
        ({"models": [upstream(upstream="http://api.anthropic.com")]}, "plain http"),
        ({"models": [upstream(upstream="https://api.anthropic.com/v1")]}, "an origin"),
        ({"models": [upstream(upstream="https://user:pw@api.anthropic.com")]}, "no user"),
        ({"models": [upstream(upstream="ftp://api.anthropic.com")]}, "https:// origin"),
        ({"models": [upstream(servedModels=[])]}, "servedModels"),
        ({"models": [upstream(credentialHeader="x api key")]}, "credentialHeader"),
        ({"models": [upstream(credentialEnv="GITHUB_TOKEN")]}, "credentialEnv"),
        ({"models": [upstream(name="Upper")]}, "name"),
        ({"models": [upstream()] * 9}, "models"),
        ({"gateway": {"hosts": {"model.test": "10.0.0.2"}}}, "privateUpstreams"),
        ({"gateway": {"privateUpstreams": True, "hosts": {"m": "not-an-ip"}}}, "IP address"),
        ({"gateway": {"tokenBudget": 0}}, "tokenBudget"),
        ({"gateway": {"network": "bad name"}}, "network"),
        ({"models": [upstream(price={**PRICE, "currency": "usd"})]}, "models.0.price.currency"),
        (
            {"models": [upstream(price={**PRICE, "inputPerMillionTokens": -1})]},
            "models.0.price.inputPerMillionTokens",
        ),
        (
            {"models": [upstream(price={**PRICE, "outputPerMillionTokens": float("nan")})]},
            "models.0.price.outputPerMillionTokens",
        ),
        ({"models": [upstream(price={**PRICE, "per": "token"})]}, "models.0.price.per"),
        ({"models": [upstream(price={"currency": "USD"})]}, "inputPerMillionTokens"),
    ],
)
def test_the_gateway_settings_are_checked_and_named(change: dict[str, Any], words: str) -> None:
    assert words in refused(config(**change))


def test_a_price_is_recorded_in_the_gateway_settings_by_upstream_name() -> None:
    from agent_eval.gateway.host import gateway_settings

    parsed = RunnerConfig.model_validate(
        config(models=[upstream(price=PRICE), upstream(name="plain", servedModels=["m"])])
    )
    settings = gateway_settings(parsed, "sha256:" + "1" * 64)
    assert settings.prices["anthropic"].cost(1_000_000, 1_000_000) == 18
    assert set(settings.prices) == {"anthropic"}  # an upstream without a price has none
    # Never part of what a review holds a batch to.
    assert all("price" not in u.model_dump() for u in settings.upstreams)


def test_a_test_set_up_may_use_a_private_plain_http_fake_provider() -> None:
    parsed = RunnerConfig.model_validate(
        config(
            models=[upstream(upstream="http://model.test:8080")],
            gateway={"privateUpstreams": True, "hosts": {"model.test": "10.213.0.2"}},
        )
    )
    assert parsed.gateway.hosts == {"model.test": "10.213.0.2"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("submissionTimeoutMs", 0),
        ("submissionTimeoutMs", 600_001),
        ("batchTimeoutMs", 0),
        ("batchTimeoutMs", 7_200_001),
        ("concurrency", 0),
        ("concurrency", 129),
    ],
)
def test_every_bound_is_enforced_and_named(field: str, value: int) -> None:
    assert field in refused(config(**{field: value}))


@pytest.mark.parametrize(
    ("field", "value"),
    [("submissionTimeoutMs", 600_000), ("batchTimeoutMs", 7_200_000), ("submissionTimeoutMs", 1)],
)
def test_the_bounds_themselves_are_allowed(field: str, value: int) -> None:
    RunnerConfig.model_validate(config(**{field: value}))


@pytest.mark.parametrize(
    "name",
    [
        "NPM_TOKEN",
        "NODE_AUTH_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "AZURE_CLIENT_SECRET",
        "DATABASE_URL",
        "PGPASSWORD",
        "PGHOST",
        "DOCKER_HOST",
        "aws_secret_access_key",
    ],
)
def test_registry_cloud_and_database_credentials_are_refused(name: str) -> None:
    message = refused(config(envAllowlist=["AIDER_SETTING", name]))
    assert "envAllowlist" in message and name in message
    assert "credentialEnv" in refused(config(models=[upstream(credentialEnv=name)]))


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"])
def test_a_model_credential_never_goes_to_the_runner(name: str) -> None:
    message = refused(config(envAllowlist=[name]))
    assert "envAllowlist" in message and "models[].credentialEnv" in message


def test_a_name_listed_twice_is_refused() -> None:
    message = refused(config(envAllowlist=["A_SETTING", "A_SETTING"]))
    assert "envAllowlist" in message and "twice" in message


@pytest.mark.parametrize(
    "image",
    [
        "agent-eval/runner:latest",
        "agent-eval/runner",
        "runner@sha256:abc",
        "sha256:" + "A" * 64,
        "",
        # Pinned, but outside the engine's reference grammar.
        "runner;rm -rf /@" + PIN,
        "../../runner@" + PIN,
        "Runner@" + PIN,
        "runner\u202e@" + PIN,
        "runner\n@" + PIN,
        " runner@" + PIN,
        "runner:" + "t" * 200 + "@" + PIN,
    ],
)
def test_an_unpinned_image_is_refused(image: str) -> None:
    assert "runnerImage" in refused(config(runnerImage=image))
    assert "verifierImage" in refused(config(verifierImage=image))


@pytest.mark.parametrize(
    "image",
    ["runner@" + PIN, "ghcr.io/org/agent-eval/runner:2.1@" + PIN, "localhost:5000/a_b/c@" + PIN],
)
def test_a_pinned_reference_in_the_grammar_is_accepted(image: str) -> None:
    RunnerConfig.model_validate(config(runnerImage=image))


def test_a_literal_key_in_args_is_refused() -> None:
    message = refused(config(args=["--api-key", "sk-ant-abcdefghijklmnopqrstuvwxyz"]))
    assert "args.1" in message and "literal credential" in message


def test_a_credential_in_model_settings_is_refused() -> None:
    message = refused(config(expectedModel={"id": "m", "settings": {"apiKey": "x"}}))
    assert "expectedModel" in message and "apiKey" in message


@pytest.mark.parametrize("field", ["executable", "runtimePath"])
def test_relative_paths_are_refused(field: str) -> None:
    assert field in refused(config(**{field: "bin/run"}))


def test_unknown_keys_are_refused() -> None:
    assert "score" in refused(config(score=1.0))


def test_a_missing_field_is_named() -> None:
    data = config()
    del data["expectedModel"]
    assert "expectedModel" in refused(data)


def test_an_unknown_schema_version_is_refused() -> None:
    assert "schemaVersion" in refused(config(schemaVersion=2))


@pytest.mark.parametrize(
    "name",
    [
        "POSTGRES_PASSWORD",
        "DOCKER_PASSWORD",
        "HF_TOKEN",
        "CARGO_REGISTRY_TOKEN",
        "VAULT_TOKEN",
        "SSH_PRIVATE_KEY",
        "GITLAB_PRIVATE_TOKEN",
        "MY_APP_SECRET",
        "DEPLOY_PRIVATE_KEY",
        "SMTP_PASSWORD",
        "JWT_SECRET_KEY",
        "OAUTH_CLIENT_SECRET",
        "GOOGLE_CLOUD_KEYFILE_JSON",
        "KUBE_TOKEN",
        "REDIS_PASSWORD",
        "MONGO_INITDB_ROOT_PASSWORD",
        "PYPI_API_TOKEN",
        "SENTRY_AUTH_TOKEN",
        "CI_REGISTRY_PASSWORD",
        "TWINE_API_KEY",
    ],
)
def test_generic_secret_names_are_refused(name: str) -> None:
    assert "envAllowlist" in refused(config(envAllowlist=[name]))


@pytest.mark.parametrize(
    "name",
    [
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
        "GOOGLE_CLOUD_PROJECT",
        "VERTEXAI_PROJECT",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "GEMINI_API_KEY",
        "MISTRAL_API_KEY",
    ],
)
def test_model_provider_names_are_allowed_even_where_a_prefix_rule_would_refuse(name: str) -> None:
    parsed = RunnerConfig.model_validate(config(models=[upstream(credentialEnv=name)]))
    assert parsed.models[0].credentialEnv == name


@pytest.mark.parametrize(
    "secret",
    [
        "hf_" + "a1B2" * 9,
        "glpat-" + "x" * 20,
        "AIza" + "B" * 35,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
        "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "ya29." + "a0AfH6SMB" * 3,
        "ASIA" + "Q" * 16,
        "pypi-AgEIcHlwaS5vcmc" + "x" * 20,
    ],
)
def test_more_literal_secret_shapes_in_args_are_refused(secret: str) -> None:
    assert "args" in refused(config(args=["--key", f"prefix{secret}suffix"]))


@pytest.mark.parametrize(
    "value",
    [
        "q7Xz2LwP9vKd4RtY8mNb3HcJ6fGs1AeQ",  # random base64url
        "--header=x-trace: Zk3pQ9wL2xV7bN4mR8tY1cH6jF5gD0sAeU",
        "Tm9uZSBvZiB5b3VyIGJ1c2luZXNzLCByZWFsbHk9PQ7x",
    ],
)
def test_an_argument_holding_a_random_looking_key_is_refused(value: str) -> None:
    message = refused(config(args=["-m", "agent_eval.adapters.claude_code", value]))
    assert "args" in message and "random-looking" in message


@pytest.mark.parametrize(
    "value",
    [
        "sha256:" + "0123456789abcdef" * 4,  # a digest: hex is never random enough
        "3f2c6a1e-9b7d-4c2e-8f1a-6d5b4c3a2e1f",
        "/opt/agent-eval/reference_runner.py",
        "--model=claude-sonnet-4-5-20250929",
    ],
)
def test_ordinary_arguments_are_not_taken_for_keys(value: str) -> None:
    RunnerConfig.model_validate(config(args=["-m", "agent_eval.adapters.claude_code", value]))


@pytest.mark.parametrize(
    "name",
    [
        "DOCKERHUB_TOKEN",
        "CR_PAT",
        "GITEA_TOKEN",
        "HCLOUD_TOKEN",
        "ARTIFACTORY_API_KEY",
        "SUPABASE_SERVICE_ROLE_KEY",
        "NETLIFY_AUTH_TOKEN",
        "SOME_VENDOR_CREDENTIALS",
        "apiKey",
        "LINEAR_APIKEY",
        "SIGNING_PASSPHRASE",
    ],
)
def test_any_credential_looking_name_is_refused_for_the_runner(name: str) -> None:
    """The class, not a list: a name with a credential's word is refused whatever its service."""
    message = refused(config(envAllowlist=["AIDER_SETTING", name]))
    assert "envAllowlist" in message and "names a credential" in message, message


@pytest.mark.parametrize(
    "name", ["AIDER_SETTING", "NO_COLOR", "TERM", "MONKEY_MODE", "TOKENIZERS_PARALLELISM"]
)
def test_ordinary_names_still_reach_the_runner(name: str) -> None:
    assert RunnerConfig.model_validate(config(envAllowlist=[name])).envAllowlist == [name]


@pytest.mark.parametrize(
    "args",
    [
        ["--api-key=" + "0123456789abcdef" * 4],  # hex: below the entropy rule
        ["--api-key", "short"],
        ["--auth-token=abc"],
        ["--setting", "api_key=abc"],
        ["--setting=openai.apiKey=abc"],
        ["--header", "Authorization: Bearer abc"],
        ["--header=x-api-key: abc"],
        ["-p", "--password"],
    ],
)
def test_an_argument_naming_a_credential_is_refused(args: list[str]) -> None:
    message = refused(config(args=["-m", "agent_eval.adapters.codex", *args]))
    assert "args" in message and "names a credential" in message, message


@pytest.mark.parametrize(
    "arg",
    ["--max-tokens=4096", "--setting=max_tokens=100", "https://example.org:8443/v1", "--keep"],
)
def test_arguments_near_credential_words_are_not_refused(arg: str) -> None:
    RunnerConfig.model_validate(config(args=["-m", "agent_eval.adapters.codex", arg]))


@pytest.mark.parametrize("key", ["access_token", "apiKey", "client_secret", "authToken"])
def test_credential_setting_keys_are_refused_by_their_words(key: str) -> None:
    message = refused(config(expectedModel={"id": "m", "settings": {key: "x"}}))
    assert "credentials do not belong" in message, message


def test_a_token_limit_setting_is_not_a_credential() -> None:
    settings = {"max_tokens": 100, "maxOutputTokens": 10}
    parsed = RunnerConfig.model_validate(config(expectedModel={"id": "m", "settings": settings}))
    assert parsed.expectedModel.settings == settings
