"""The gateway's decisions as pure functions: which addresses it connects to, what it reads
from a provider's answer, what a failure is, and that a secret never goes back."""

from __future__ import annotations

import base64
import ipaddress
import json
import urllib.parse
from typing import get_args

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from agent_eval.gateway.policy import (
    API_KINDS,
    Unreadable,
    UpstreamRefused,
    observe,
    provider_failure,
    reflected,
    refusal,
    request_refusal,
    response_refusal,
    route_name,
    scrub,
    vet_upstream,
    with_usage_requested,
)
from agent_eval.models.gateway import ApiKind


def resolver(*addresses: str):  # type: ignore[no-untyped-def]
    def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("169.254.169.254", "cloud metadata"),
        ("169.254.170.2", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("::ffff:169.254.169.254", "cloud metadata"),
        ("2002:a9fe:a9fe::1", "cloud metadata"),
        ("64:ff9b::a9fe:a9fe", "cloud metadata"),
        ("::10.1.2.3", "private"),
        ("64:ff9b:1::a00:1", "private"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("10.1.2.3", "private"),
        ("172.17.0.2", "private"),
        ("192.168.1.1", "private"),
        ("fd12::1", "private"),
        ("100.64.0.1", "private or reserved"),
        ("192.0.2.1", "private or reserved"),
        ("240.0.0.1", "private or reserved"),
    ],
)
def test_every_non_public_address_is_refused_before_any_connection(address: str, why: str) -> None:
    with pytest.raises(UpstreamRefused, match=why):
        vet_upstream("api.example", 443, resolve=resolver(address))


def test_one_bad_address_among_good_ones_refuses_the_name() -> None:
    with pytest.raises(UpstreamRefused, match=r"169\.254\.169\.254"):
        vet_upstream("api.example", 443, resolve=resolver("8.8.8.8", "169.254.169.254"))


def test_a_public_name_is_pinned_to_its_vetted_address() -> None:
    assert vet_upstream("api.example", 443, resolve=resolver("8.8.4.4", "1.1.1.1")) == "8.8.4.4"


def test_a_literal_address_is_vetted_without_resolving() -> None:
    def never(host: str, port: int) -> list[str]:
        raise AssertionError("resolved")

    assert vet_upstream("8.8.8.8", 443, resolve=never) == "8.8.8.8"
    with pytest.raises(UpstreamRefused, match="loopback"):
        vet_upstream("127.0.0.1", 443, resolve=never)


def test_a_test_set_up_may_reach_private_addresses_but_never_the_others() -> None:
    assert vet_upstream("model.test", 80, allow_private=True, resolve=resolver("10.1.2.3"))
    for address in ("127.0.0.1", "169.254.169.254", "fd00:ec2::254", "0.0.0.0", "224.0.0.1"):
        with pytest.raises(UpstreamRefused):
            vet_upstream("model.test", 80, allow_private=True, resolve=resolver(address))


def test_a_name_that_does_not_resolve_is_refused() -> None:
    def fails(host: str, port: int) -> list[str]:
        raise OSError("no such name")

    with pytest.raises(UpstreamRefused, match="does not resolve"):
        vet_upstream("nowhere.example", 443, resolve=fails)


def sse(*events: dict[str, object]) -> bytes:
    return b"".join(b"event: x\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        (
            "application/json",
            json.dumps({"model": "claude-x-2026",
                        "usage": {"input_tokens": 7, "output_tokens": 3}}),
            ("claude-x-2026", 7, 3),
        ),
        (
            "application/json",
            json.dumps({"model": "gpt-x", "usage": {"prompt_tokens": 5, "completion_tokens": 9}}),
            ("gpt-x", 5, 9),
        ),
        (
            "text/event-stream",
            sse(
                {"type": "message_start", "message": {"model": "claude-x", "usage":
                                                      {"input_tokens": 11, "output_tokens": 1}}},
                {"type": "message_delta", "usage": {"output_tokens": 42}},
            ).decode(),
            ("claude-x", 11, 42),
        ),
        (
            "text/event-stream",
            sse(
                {"type": "response.created", "response": {"model": "gpt-y"}},
                {"type": "response.completed",
                 "response": {"model": "gpt-y",
                              "usage": {"input_tokens": 4, "output_tokens": 6}}},
            ).decode() + "data: [DONE]\n\n",
            ("gpt-y", 4, 6),
        ),
        ("application/json", "not json", (None, None, None)),
    ],
)  # fmt: skip
def test_the_served_model_and_usage_are_read_from_json_and_streams(
    content_type: str, body: str, expected: tuple[str | None, int | None, int | None]
) -> None:
    seen = observe(content_type, body.encode())
    assert (seen.served_model, seen.input_tokens, seen.output_tokens) == expected


def nested(levels: int, inner: dict[str, object]) -> dict[str, object]:
    value: dict[str, object] = inner
    for _ in range(levels):
        value = {"wrapped": value}
    return value


def test_a_gemini_answer_names_its_model_and_usage_in_its_own_keys() -> None:
    answer = {
        "candidates": [{"content": {"parts": [{"text": "hi"}]}}],
        "modelVersion": "gemini-x-001",
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3},
    }
    seen = observe("application/json", json.dumps(answer).encode())
    assert (seen.served_model, seen.input_tokens, seen.output_tokens) == ("gemini-x-001", 12, 3)


def test_every_response_shape_is_measured_json_lines_and_deep_nesting_included() -> None:
    lines = "\n".join(
        json.dumps(event)
        for event in (
            {"type": "start", "model": "claude-x", "usage": {"input_tokens": 7}},
            {"type": "delta", "usage": {"output_tokens": 30}},
        )
    )
    seen = observe("application/x-ndjson", lines.encode())
    assert (seen.served_model, seen.input_tokens, seen.output_tokens) == ("claude-x", 7, 30)
    deep = nested(40, {"model": "gpt-deep", "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
    seen = observe("application/json", json.dumps(deep).encode())
    assert (seen.served_model, seen.input_tokens, seen.output_tokens) == ("gpt-deep", 3, 4)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # past any parser's depth
        json.dumps([[list(range(64))] * 64] * 64).encode(),  # wide: bounded in count
        b"data: " + b"[" * 100_000 + b"\n\n",
    ],
    ids=["deep", "wide", "deep-stream"],
)
def test_a_pathological_body_is_read_as_unmeasured_without_failing(body: bytes) -> None:
    seen = observe("application/json", body)
    assert (seen.served_model, seen.input_tokens, seen.output_tokens) == (None, None, None)


def test_an_error_message_is_read_from_either_shape() -> None:
    anthropic = {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
    assert observe("application/json", json.dumps(anthropic).encode()).error_message == "bad key"
    assert observe("application/json", b'{"error": "quota"}').error_message == "quota"


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (200, None, None),
        (401, "invalid x-api-key", "authentication"),
        (403, "forbidden", "authentication"),
        (404, "model not found", "unknown-model"),
        (400, "The model `gpt-9` does not exist", "unknown-model"),
        (400, "messages: field required", None),
        (429, "rate limited", "rate-limit"),
        (500, "boom", "server-error"),
        (529, "overloaded", "server-error"),
        (413, "too large", None),
    ],
)
def test_provider_failures_are_named_and_the_agents_own_bad_requests_are_not(
    status: int, message: str | None, kind: str | None
) -> None:
    assert provider_failure(status, message) == kind


def test_a_secret_is_taken_out_and_short_strings_are_left_alone() -> None:
    assert scrub(b"key=sk-secret-123 again sk-secret-123", ["sk-secret-123"]) == (
        b"key=[credential] again [credential]"
    )
    assert scrub(b"abc", ["abc"]) == b"abc"


def test_a_route_is_named_by_the_tokens_digest_not_the_token() -> None:
    name = route_name("ae-token")
    assert "ae-token" not in name and len(name) == 64 and name == route_name("ae-token")


def ipv6_forms(v4: str) -> dict[str, str]:
    """Every IPv6 spelling that leads to the IPv4 address *v4*."""
    number = int(ipaddress.IPv4Address(v4))
    return {
        "mapped": f"::ffff:{v4}",
        "compatible": str(ipaddress.IPv6Address(number)),
        "6to4": str(ipaddress.IPv6Address((0x2002 << 112) | (number << 80) | 1)),
        "nat64": str(ipaddress.IPv6Address((0x64FF9B << 96) | number)),
        "nat64-local": str(ipaddress.IPv6Address((0x64FF9B0001 << 80) | number)),
        "siit": str(ipaddress.IPv6Address((0xFFFF0000 << 32) | number)),
        "isatap": str(ipaddress.IPv6Address((0x20010DB8 << 96) | (0x5EFE << 32) | number)),
        "isatap-global": str(
            ipaddress.IPv6Address((0x2A000001 << 96) | (0x02005EFE << 32) | number)
        ),
    }


@given(st.ip_addresses(v=4))
@example(ipaddress.IPv4Address("0.0.0.1"))  # its "compatible" form is ::1, loopback
@example(ipaddress.IPv4Address("127.0.0.1"))  # ::ffff:0:7f00:1 (SIIT)
@example(ipaddress.IPv4Address("169.254.169.254"))  # ::ffff:0:a9fe:a9fe (SIIT)
def test_an_ipv4_address_written_as_ipv6_is_judged_as_itself(v4: ipaddress.IPv4Address) -> None:
    for allow_private in (False, True):
        direct = refusal(v4, allow_private=allow_private)
        for form, v6 in ipv6_forms(str(v4)).items():
            judged = refusal(ipaddress.ip_address(v6), allow_private=allow_private)
            if direct is None:
                assert judged is None, (form, v6)
            elif v6 in {"::", "::1"}:  # 0.0.0.0 and 0.0.0.1 "compatible": refused as such
                assert judged is not None, (form, v6)
            else:
                assert judged is not None and direct in judged and str(v4) in judged, (form, v6)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("fec0::1", "site-local"),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo"),
    ],
)
def test_ipv6_ranges_whose_destination_cannot_be_vetted_are_refused(address: str, why: str) -> None:
    for allow_private in (False, True):
        with pytest.raises(UpstreamRefused, match=why):
            vet_upstream("api.example", 443, allow_private=allow_private, resolve=resolver(address))


# --- Which requests reach an upstream -------------------------------------------------

MODEL_CALLS = {
    "anthropic": [
        ("POST", "/v1/messages?beta=true"),  # Claude Code
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/models/claude-sonnet-4-5"),
    ],
    "openai": [
        ("POST", "/v1/responses"),  # Codex
        ("POST", "/v1/chat/completions"),  # aider and mini-swe-agent (LiteLLM)
        ("POST", "/chat/completions"),  # an OpenAI-compatible base without /v1
        ("POST", "/openai/v1/chat/completions"),
        ("POST", "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"),
        ("POST", "/api/v1/chat/completions"),  # OpenRouter
        ("POST", "/inference/v1/chat/completions"),
        ("POST", "/api/chat"),  # Ollama
        ("GET", "/v1/models/gpt-5"),
    ],
    "gemini": [
        ("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"),
        ("GET", "/v1beta/models/gemini-2.5-pro"),
    ],
    "bedrock": [("POST", "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse")],
    "vertex": [
        (
            "POST",
            "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude:streamRawPredict",
        )
    ],
}


@pytest.mark.parametrize(
    ("kind", "method", "path"),
    [(kind, m, p) for kind, calls in MODEL_CALLS.items() for m, p in calls]
    + [("model-apis", m, p) for calls in MODEL_CALLS.values() for m, p in calls],
)
def test_each_cli_s_model_calls_are_forwarded(kind: str, method: str, path: str) -> None:
    length = 10 if method == "POST" else 0
    assert request_refusal(kind, method, path, "application/json", length) is None


@pytest.mark.parametrize(
    "path",
    [
        "/v1/files",
        "/v1/files/file-abc/content",
        "/v1/organization/admin_api_keys",
        "/v1/organizations/me/api_keys",
        "/v1/fine_tuning/jobs",
        "/v1/batches",
        "/v1/messages/batches",
        "/v1/messages/../files",
        "/v1/messages/./../files",
        "/v1/models/x%2F..%2F..%2Ffiles",
        "/v1/models/%2e%2e",
        "/v1//messages",
        "//v1/messages",
        "v1/messages",
        "/v1/messages\\..\\files",
        "/",
        "",
        "/echo",
        "/admin/chat/completions/x",
        "/v1/models/x%2F..%2Ffiles",
        "/v1/models/%252e%252e",
        "/v1/messages%3Fx=1",
        "/v1/models/a%5C..",
        "/v1/models/a%00",
        "/v1/organization/usage/completions",
        "/v1/organization/admin_api_keys/chat",
        "/v1/organizations/o/chat/completions",
        "/v1/projects/p/chat/completions",
        "/api/v1/admin/chat/completions",
    ],
)
def test_any_other_endpoint_never_gets_the_credential(path: str) -> None:
    for kind in API_KINDS:
        why = request_refusal(kind, "POST", path, "application/json", 10)
        assert why is not None and "not an endpoint" in why, (kind, path)


def test_one_kind_s_endpoints_are_not_another_s() -> None:
    assert request_refusal("anthropic", "POST", "/v1/chat/completions", "application/json", 2)
    assert request_refusal("openai", "POST", "/v1/messages", "application/json", 2)
    assert request_refusal("gemini", "POST", "/v1/responses", "application/json", 2)


@pytest.mark.parametrize(
    ("method", "content_type", "length", "words"),
    [
        ("DELETE", "", 0, "method"),
        ("PUT", "application/json", 2, "method"),
        ("POST", "multipart/form-data; boundary=x", 10, "must be JSON"),
        ("POST", "text/plain", 10, "must be JSON"),
        ("POST", "", 10, "must be JSON"),
    ],
)
def test_only_json_model_requests_are_forwarded(
    method: str, content_type: str, length: int, words: str
) -> None:
    why = request_refusal("anthropic", method, "/v1/messages", content_type, length)
    assert why is not None and words in why


def test_an_unknown_kind_refuses_everything() -> None:
    why = request_refusal("", "POST", "/v1/messages", "application/json", 2)
    assert why is not None and "API kind" in why


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "text/event-stream",
     "application/x-ndjson", "Application/JSON"],
)  # fmt: skip
def test_a_readable_answer_is_passed_on(content_type: str) -> None:
    assert response_refusal(200, content_type, 100) is None


def test_an_answer_whose_usage_cannot_be_read_is_refused_only_when_successful() -> None:
    assert response_refusal(200, "application/octet-stream", 10) is not None
    assert response_refusal(200, "application/vnd.amazon.eventstream", 10) is not None
    assert response_refusal(500, "text/html", 10) is None  # a provider failure, recorded as one
    assert response_refusal(204, "", 0) is None


def test_the_gateway_knows_every_api_kind_a_config_may_name() -> None:
    assert set(API_KINDS) == set(get_args(ApiKind))


@given(st.text(alphabet="/.%2eEfF:abc-_?", max_size=40))
def test_no_path_with_a_dot_segment_is_forwarded_however_encoded(path: str) -> None:
    why = request_refusal("model-apis", "POST", path, "application/json", 2)
    target = path.split("?", 1)[0]
    decoded = urllib.parse.unquote(target)
    if "/../" in f"{decoded}/" or "/./" in f"{decoded}/":
        assert why is not None


# -- usage asked of streamed completions ---------------------------------------------


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/openai/v1/completions?x=1"])
def test_a_streamed_completion_is_asked_for_its_usage(path: str) -> None:
    body = json.dumps({"model": "m", "stream": True, "stream_options": {"other": 1}}).encode()
    asked = with_usage_requested(path, body)
    assert asked is not None
    assert json.loads(asked) == {
        "model": "m",
        "stream": True,
        "stream_options": {"other": 1, "include_usage": True},
    }
    # Asked once: a body that already asks is left byte for byte.
    assert with_usage_requested(path, asked) is None


@pytest.mark.parametrize(
    ("path", "asked"),
    [
        ("/v1/chat/completions", {"model": "m"}),  # not streamed: usage comes with the answer
        ("/v1/chat/completions", {"model": "m", "stream": "yes"}),
        ("/v1/chat/completions", {"model": "m", "stream": True, "stream_options": "all"}),
        ("/v1/messages", {"model": "m", "stream": True}),  # Anthropic streams its usage
        ("/v1/responses", {"model": "m", "stream": True}),  # so does the Responses API
        ("/v1/chat/completions", ["not", "an", "object"]),
    ],
)
def test_other_requests_are_left_as_they_are(path: str, asked: object) -> None:
    assert with_usage_requested(path, json.dumps(asked).encode()) is None


def test_a_body_that_is_not_json_is_left_to_the_upstream() -> None:
    assert with_usage_requested("/v1/chat/completions", b"\xff{") is None
    assert with_usage_requested("/v1/chat/completions", b"[" * 100_000) is None


@pytest.mark.parametrize("address", ["0.0.0.1", "0.1.2.3", "::ffff:0.0.0.1"])
def test_this_networks_addresses_are_refused_even_where_private_ones_are_allowed(
    address: str,
) -> None:
    for allow_private in (False, True):
        assert "0.0.0.0/8" in str(
            refusal(ipaddress.ip_address(address), allow_private=allow_private)
        )


# --- The credential handed back, in any spelling --------------------------------------------

keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_",
               min_size=20, max_size=60).map(lambda s: "sk-" + s)  # fmt: skip


def _escaped(text: str, mask: list[bool]) -> str:
    return "".join(f"\\u{ord(c):04x}" if m else c for c, m in zip(text, mask, strict=False))


@settings(max_examples=300, deadline=None)
@given(
    key=keys,
    cut=st.integers(min_value=1, max_value=19),
    mask=st.lists(st.booleans(), min_size=80, max_size=80),
    noise=st.text(max_size=30),
    prefix=st.binary(max_size=5),
)
def test_a_credential_is_found_in_every_spelling_it_can_be_turned_back_from(
    key: str, cut: int, mask: list[bool], noise: str, prefix: bytes
) -> None:
    head, tail = key[:cut], key[cut:]
    bodies = {
        "plain": json.dumps({"text": noise + key}),
        "escaped": '{"text": "' + _escaped(key, mask) + '"}',
        "split-sse": "".join(
            f"data: {json.dumps({'type': 'delta', 'delta': {'text': part}, 'i': n})}\n\n"
            for n, part in enumerate((noise, head, tail))
        ),
        "split-lines": "\n".join(json.dumps({"x": n, "t": p}) for n, p in enumerate((head, tail))),
        "base64": json.dumps({"t": base64.b64encode(prefix + key.encode()).decode()}),
        "base64url": base64.urlsafe_b64encode(prefix + key.encode()).decode(),
        "percent": "".join(f"%{b:02x}" for b in key.encode()),
        "hex": key.encode().hex().upper(),
    }
    for name, body in bodies.items():
        assert reflected(key, {}, body) is not None, name
    for part in ("the status line's reason", "a header's name (1)", "the x-echo header"):
        assert reflected(key, {part: f"pre {_escaped(key, mask)} post"}, "") == part


@settings(max_examples=200, deadline=None)
@given(key=keys, body=st.text(max_size=300))
def test_an_answer_without_the_credential_is_passed(key: str, body: str) -> None:
    assume(key not in body)
    assert reflected(key, {"the content-type header": "application/json"}, body) is None


def test_an_answer_too_many_values_to_read_whole_is_unreadable() -> None:
    body = json.dumps([""] * 250_000)
    with pytest.raises(Unreadable):
        reflected("sk-" + "a" * 30, {}, body)


# --- A successful answer is measured whole, or refused ---------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        json.dumps([[list(range(64))] * 64] * 64).encode(),
        b"data: " + b"[" * 100_000 + b"\n\n",
        b'data: {"model": "m"}\n\ndata: {not json\n\n',
        b'{"model": "m"}\n{"usage": \n',
        ("[" * 70 + "{}" + "]" * 70).encode(),  # past the depth read, inside the parser's
    ],
    ids=["deep", "wide", "deep-stream", "bad-event", "bad-line", "past-depth"],
)
def test_a_successful_answer_that_cannot_be_read_whole_is_unreadable(body: bytes) -> None:
    with pytest.raises(Unreadable):
        observe("application/json", body, strict=True)


def test_usage_hidden_far_into_a_long_answer_is_still_counted() -> None:
    lines = [json.dumps({"model": "good", "n": n}) for n in range(20_000)]
    lines.append(json.dumps({"usage": {"input_tokens": 5, "output_tokens": 900_000}}))
    seen = observe("application/x-ndjson", "\n".join(lines).encode(), strict=True)
    assert seen.output_tokens == 900_000
    stream = b"data: " + json.dumps({"pad": "x" * (9 << 20)}).encode() + b"\n\n"
    stream += b'data: {"model": "other", "usage": {"output_tokens": 7}}\n\n'
    seen = observe("text/event-stream", stream, strict=True)
    assert (seen.served_model, seen.output_tokens) == ("other", 7)


def test_every_model_an_answer_names_is_seen() -> None:
    stream = (
        b'data: {"type": "message_start", "message": {"model": "unreviewed"}}\n\n'
        b'data: {"type": "message_delta", "model": "reviewed"}\n\n'
    )
    assert observe("text/event-stream", stream, strict=True).models == ("unreviewed", "reviewed")


@pytest.mark.parametrize("method", ["HEAD", "PUT", "DELETE", "OPTIONS", "post", "get"])
def test_only_get_and_post_are_forwarded(method: str) -> None:
    why = request_refusal("anthropic", method, "/v1/messages", "application/json", 0)
    assert why is not None and "method" in why
