"""runner.json refuses credentials by class, not by a list of services: every name and
argument shape a secret scanner's public generic rules recognise (names with TOKEN, KEY,
SECRET, PASS/PW, SK, PRIVATE, CREDENTIAL, AUTH, DSN, WEBHOOK, PROXY, an index or database
URL; ``scheme://user:secret@``; a header split across two arguments; long hex and base64
runs; look-alike dashes and full-width letters folded) is refused, naming the field,
while the ordinary names and arguments a runner needs still pass.

And the runner's and model's identity is printable text on one line.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_eval.models import RunnerConfig
from tests.models.test_runner_config import config

REFUSED_NAMES = [
    # the service-specific names that got through before
    "SENTRY_DSN",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "UV_INDEX_URL",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "SLACK_WEBHOOK_URL",
    "DISCORD_WEBHOOK",
    "TEAMS_WEBHOOKS",
    "SSHPASS",
    "LDAP_BIND_PW",
    "SMTP_PW",
    "OPENAIKEY",
    "APITOKEN",
    "AUTHTOKEN",
    "DBPASSWORD",
    "MYSECRET",
    "ADMINPASS",
    "HTTPSPROXY",
    "OPENAI_SK",
    "STRIPE_SK",
    "SIGNING_PRIVATE",
    "JWT_SIGNING_KEY",
    "ENCRYPTION_KEY",
    "MASTER_KEY",
    "LICENSE_KEY",
    "SESSION_COOKIE",
    "COOKIE_SECRET",
    "OAUTH_CLIENT",
    "GOOGLE_OAUTH",
    "CELERY_BROKER_URL",
    "SQLALCHEMY_DATABASE_URI",
    "MONGODB_URI",
    "DB_CONNECTION_STRING",
    "REDIS_URL",
    "SMTP_URL",
    "REGISTRY_URL",
    "DATADOG_API_KEY",
    "NEW_RELIC_LICENSE_KEY",
    "TWILIO_AUTH_TOKEN",
    "SENDGRID_APIKEY",
    "MAILGUN_KEY",
    "PAGERDUTY_TOKEN",
    "OKTA_CLIENTSECRET",
    "AUTH0_CLIENT_SECRET",
    "FIREBASE_TOKEN",
    "ALGOLIA_ADMIN_KEY",
    "MAPBOX_ACCESS_TOKEN",
    "BASIC_AUTH",
    "HTPASSWD",
    "KEYSTORE_PASS",
    "SSH_PASSPHRASE",
    "DEPLOY_CREDS",
    "APP_SALT",
    "TOTP_OTP",
    "WEBHOOK_SIGNATURE",
    "apiToken",
    "clientSecret",
    "dbPw",
    "ldapPasscode",
]
ACCEPTED_NAMES = [
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "TZ",
    "USER",
    "SHELL",
    "NO_COLOR",
    "COLUMNS",
    "EDITOR",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "NODE_OPTIONS",
    "XDG_CONFIG_HOME",
    "AIDER_SETTING",
    "MONKEY_MODE",
    "HOTKEY_MODE",
    "TOKENIZERS_PARALLELISM",
    "MAX_TOKENS",
    "KEYBOARD_LAYOUT",
    "COMPASS_MODE",
]
HEX = "0123456789abcdef" * 2
REFUSED_ARGS: list[list[str]] = [
    # a header name and its value in two arguments
    ["-H", "Authorization", "Bearer abc"],
    ["--header", "x-api-key", "abc"],
    ["--header", "X-Auth-Token", "abc"],
    ["--header", "Cookie", "session=abc"],
    ["--header", "Proxy-Authorization", "Basic dXNlcjpwYXNz"],
    ["-H", "Authorization:", "Bearer abc"],
    ["--header", "Bearer abc"],
    ["--header", "basic dXNlcjpwYXNz"],
    ["--header", "Token abc"],
    ["--set", "api_key", "abc"],
    ["--env", "OPENAI_API_KEY", "abc"],
    ["--env", "SENTRY_DSN"],
    # hex keys (no digest's algorithm before them)
    ["--seed", HEX],
    [HEX],
    ["--id=" + HEX + HEX],
    ["--commit", "a" * 40],
    ["--x=" + "DEADBEEF" * 5],
    # a key in a URL's userinfo
    ["--base-url", "https://user:hunter2@example.org/v1"],
    ["--base-url=https://sk-abc@example.org"],
    ["https://:secret@example.org"],
    ["--index", "https://__token__:abc@pkg.example.org/simple"],
    ["redis://default:pw@cache:6379/0"],
    ["--db", "postgres://app:pw@db/app"],
    ["--proxy", "http://u:p@proxy:3128"],
    # look-alike dashes and full-width letters
    ["--api\u2010key", "abc"],
    ["--api\u2011key=abc"],
    ["\u2014api-key", "abc"],
    ["--api\u2212key", "abc"],
    ["--api\uff0dkey", "abc"],
    ["--\uff41\uff50\uff49-key", "abc"],
    ["--to\u200bken", "abc"],
    ["--token\u202e", "abc"],
    # the glued and scanner words
    ["--apikey", "abc"],
    ["--openaikey=abc"],
    ["--pw", "abc"],
    ["--pass", "abc"],
    ["--sk", "abc"],
    ["--private", "abc"],
    ["--dsn", "abc"],
    ["--webhook", "abc"],
    ["--proxy", "abc"],
    ["--sshpass=abc"],
    ["--index-url", "https://pkg.example.org/simple"],
    ['{"api_key": "abc"}'],
    ["{'apiKey': 'abc'}"],
    ["--config", "auth.token=abc"],
    ["--set=openai.apiToken=abc"],
    ["-o", "credentials=abc"],
    ["--header=Authorization: Bearer abc"],
]
ACCEPTED_ARGS: list[list[str]] = [
    ["--model", "claude-sonnet-4-5-20250929"],
    ["--model=gpt-5.1-codex"],
    ["-m", "agent_eval.adapters.claude_code"],
    ["/opt/agent-eval/reference_runner.py", "oracle"],
    ["--max-tokens=4096"],
    ["--setting=max_tokens=100"],
    ["--keep"],
    ["--upstream", "anthropic"],
    ["https://example.org:8443/v1"],
    ["--image", "runner@sha256:" + "0123456789abcdef" * 4],
    ["sha256:" + "0123456789abcdef" * 4],
    ["3f2c6a1e-9b7d-4c2e-8f1a-6d5b4c3a2e1f"],
    ["--passes", "2"],
    ["--bypass-cache"],
    ["--monkey-patch"],
    ["--reasoning-effort", "high"],
    ["git@example.org:repo.git"],
]


def _refusal(data: dict[str, Any]) -> str | None:
    try:
        RunnerConfig.model_validate(data)
    except ValidationError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("name", REFUSED_NAMES)
def test_a_credential_bearing_name_is_refused_for_the_runner(name: str) -> None:
    message = _refusal(config(envAllowlist=[name]))
    assert message is not None and "envAllowlist" in message, name


@pytest.mark.parametrize("name", ACCEPTED_NAMES)
def test_an_ordinary_name_still_reaches_the_runner(name: str) -> None:
    assert _refusal(config(envAllowlist=[name])) is None


@pytest.mark.parametrize("args", REFUSED_ARGS, ids=repr)
def test_a_credential_bearing_argument_list_is_refused(args: list[str]) -> None:
    message = _refusal(config(args=["-m", "agent_eval.adapters.codex", *args]))
    assert message is not None and "args." in message, args


@pytest.mark.parametrize("args", ACCEPTED_ARGS, ids=repr)
def test_an_ordinary_argument_list_is_accepted(args: list[str]) -> None:
    assert _refusal(config(args=args)) is None


def test_the_cases_are_as_many_as_said() -> None:
    """The figures quoted for this suite: names and argument lists tried."""
    assert (len(REFUSED_NAMES), len(REFUSED_ARGS)) == (62, 49)


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("expectedRunner", {"name": "claude-code\n## Decision: QUALIFIED", "version": "1"}, "name"),
        ("expectedRunner", {"name": "x<!--", "version": "1\r"}, "version"),
        ("expectedRunner", {"name": "abc\u202edoc.exe", "version": "1"}, "name"),
        ("expectedRunner", {"name": "a\u2028b", "version": "1"}, "name"),
        ("expectedRunner", {"name": "a\x1b[31m", "version": "1"}, "name"),
        ("expectedRunner", {"name": "a\u200bb", "version": "1"}, "name"),
        ("expectedModel", {"id": "m\u0000", "settings": {}}, "id"),
        ("expectedModel", {"id": "m\u2066x\u2069", "settings": {}}, "id"),
        ("expectedModel", {"id": "m\ue000", "settings": {}}, "id"),
    ],
)
def test_an_identity_that_does_not_print_as_itself_is_refused_naming_the_field(
    field: str, value: dict[str, Any], where: str
) -> None:
    message = _refusal(config(**{field: value}))
    assert message is not None
    assert f"{field}\n" in message and f"{where}: holds" in message, message


def test_an_identity_in_any_script_is_accepted() -> None:
    parsed = RunnerConfig.model_validate(
        config(
            expectedRunner={"name": "агент-кода é 代理", "version": "2.1.0 (build 7)"},
            expectedModel={"id": "model/x:latest", "settings": {}},
        )
    )
    assert parsed.expectedRunner.name == "агент-кода é 代理"


_SERVICE = st.from_regex(r"[A-Z][A-Z0-9]{1,9}", fullmatch=True)
_WORD = st.sampled_from(
    ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASS", "PW", "SK", "PRIVATE", "CREDENTIALS",
     "AUTH", "DSN", "WEBHOOK", "PROXY", "APIKEY"]
)  # fmt: skip
_DASH = st.sampled_from(["-", "\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2212", "\uff0d"])


@settings(max_examples=300, deadline=None)
@given(service=_SERVICE, word=_WORD, glue=st.sampled_from(["_", "", "camel"]))
def test_property_a_service_name_with_a_credential_word_is_refused(
    service: str, word: str, glue: str
) -> None:
    if glue == "" and word in ("PW", "SK", "PRIVATE"):
        glue = "_"  # short words glued are ordinary ones too (TASK, DESK): a word apart only
    name = f"{service.lower()}{word.capitalize()}" if glue == "camel" else f"{service}{glue}{word}"
    assert _refusal(config(envAllowlist=[name])) is not None, name


@settings(max_examples=300, deadline=None)
@given(word=_WORD, dashes=st.lists(_DASH, min_size=3, max_size=3), value=st.text(max_size=8))
def test_property_an_option_naming_a_credential_is_refused_whatever_its_dashes(
    word: str, dashes: list[str], value: str
) -> None:
    option = f"{dashes[0]}{dashes[1]}x{dashes[2]}{word.lower()}"
    message = _refusal(config(args=[option, value]))
    assert message is not None and "args.0" in message, option
