"""The gateway's decisions, as pure functions: where it may connect, what a response says.

Standard library only: the gateway container imports this module beside
mitmproxy, and the harness and its tests import it on the host.

* :func:`vet_upstream` resolves an upstream's host once, before any
  connection, and refuses it unless every address is a public unicast one
  (loopback, private, shared, link-local, cloud metadata, multicast,
  reserved and unspecified addresses are refused; a configuration made for
  tests may allow private ones, never the others). The connection then goes
  to the vetted address, so a second resolution cannot move it elsewhere.
* :func:`observe` reads a provider's response (JSON, or server-sent events,
  whose last usage wins) for the model it says it served and the tokens it
  reports.
* :func:`request_refusal` says why a request is not one of a model API's: a path
  outside its kind's allowlist (account, file, key and billing endpoints never
  get the credential), or a body that is not JSON.
* :func:`provider_failure` names what kind of provider failure a response is.
* :func:`scrub` takes a secret out of bytes going back to the agent.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import re
import socket
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "API_KINDS",
    "Observation",
    "Unreadable",
    "UpstreamRefused",
    "observe",
    "provider_failure",
    "reflected",
    "refusal",
    "request_refusal",
    "response_refusal",
    "route_name",
    "scrub",
    "spellings",
    "vet_upstream",
    "with_usage_requested",
]

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
"""Cloud instance-metadata services (AWS, ECS, AWS over IPv6, Alibaba): never an upstream."""

Resolver = Callable[[str, int], Sequence[str]]


_SEGMENT = r"[A-Za-z0-9._~:@%-]+"
_PREFIX = (
    rf"(?:/(?:openai|api|inference|models))?(?:/v\d+(?:beta\d*|alpha\d*)?)?"
    rf"(?:/deployments/{_SEGMENT})?"
)
"""Where an OpenAI-compatible API is mounted: /v1, /openai/v1, /api/v1, /inference/v1,
/openai/deployments/<d> (Azure); never a segment of the provider's own (its organisation,
usage, keys or admin endpoints), whatever ends the path."""
_ENCODED_SEPARATORS = re.compile(r"%(?:2[fFeE5]|3[fF]|23|5[cC]|00)")
"""Percent-escapes an upstream could decode into a separator (slash, dot, percent,
query, fragment, backslash, NUL): the path it routes would not be the path checked."""
_API_PATHS: dict[str, tuple[str, ...]] = {
    "anthropic": (r"/v1/messages", r"/v1/messages/count_tokens", rf"/v1/models(?:/{_SEGMENT})?"),
    "openai": (
        rf"{_PREFIX}/chat/completions",
        rf"{_PREFIX}/completions",
        rf"{_PREFIX}/responses(?:/{_SEGMENT})?",
        rf"{_PREFIX}/models(?:/{_SEGMENT})?",
        rf"{_PREFIX}/chat",
    ),
    "gemini": (
        r"/v1(?:beta|alpha)?/models(?:/[A-Za-z0-9._~@%-]+"
        r"(?::(?:generateContent|streamGenerateContent|countTokens))?)?",
    ),
    "bedrock": (
        rf"/model/{_SEGMENT}/(?:invoke|invoke-with-response-stream|converse|converse-stream)",
    ),
    "vertex": (
        rf"/v1(?:beta1)?/projects/{_SEGMENT}/locations/{_SEGMENT}/publishers/{_SEGMENT}"
        r"/models/[A-Za-z0-9._~@%-]+:(?:rawPredict|streamRawPredict|generateContent"
        r"|streamGenerateContent|countTokens)",
    ),
}
_API_PATHS["model-apis"] = tuple(p for paths in _API_PATHS.values() for p in paths)
API_KINDS = tuple(_API_PATHS)
"""The kinds of model API an upstream may be (``models[].api``); ``model-apis`` is any
of them, for a provider that serves more than one shape."""
_API_PATTERNS = {
    kind: re.compile("|".join(f"(?:{p})" for p in ps)) for kind, ps in _API_PATHS.items()
}
_REQUEST_TYPES = ("application/json",)
_RESPONSE_TYPES = (
    "application/json",
    "text/event-stream",
    "application/x-ndjson",
    "application/jsonl",
    "application/json-seq",
)
"""What a successful model answer may be: JSON, server-sent events or JSON lines;
anything else could not be read for its model and usage."""


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def request_refusal(
    kind: str, method: str, path: str, content_type: str, length: int
) -> str | None:
    """Why a request is not one a model API of *kind* is asked (None: it is).

    *path* is the request target as sent, query included: the path part must be one
    of the kind's endpoints exactly, with no dot segment, empty segment or encoded
    dot or slash an upstream could resolve elsewhere; a body must be JSON.
    """
    target = path.split("?", 1)[0]
    pattern = _API_PATTERNS.get(kind)
    if pattern is None:
        return f"the upstream's API kind {kind!r} is not one of {', '.join(API_KINDS)}"
    decoded = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), target)
    segments = target.split("/")[1:]
    if (
        not target.startswith("/")
        or _ENCODED_SEPARATORS.search(target)
        or any(s in ("", ".", "..") for s in segments)
        or "/../" in f"{decoded}/"
        or "/./" in f"{decoded}/"
        or "\\" in decoded
        or not pattern.fullmatch(target)
    ):
        return (
            f"{target[:200]!r} is not an endpoint of the {kind} model API this upstream is "
            "(account, file, key and other endpoints never get the credential)"
        )
    if method not in ("GET", "POST"):
        return f"method {method[:16]!r} is not one a model API is asked with"
    if length > 0 and _media_type(content_type) not in _REQUEST_TYPES:
        return f"a request body must be JSON, not {content_type[:100]!r}"
    return None


_STREAMED_COMPLETIONS = re.compile(r"(?:/[^?]*)?/(?:chat/)?completions")
"""OpenAI-style completion endpoints, whose streamed answers carry no usage unless asked."""


def with_usage_requested(path: str, body: bytes) -> bytes | None:
    """*body* asking for the token usage of a streamed completion (None: leave it as it is).

    An OpenAI-style ``stream: true`` completion sends its usage only when
    ``stream_options.include_usage`` is set; without it the gateway would count no
    tokens for the attempt and the batch's budget could not hold. Other APIs
    (Anthropic, Gemini, the Responses API) stream their usage unasked.
    """
    if not _STREAMED_COMPLETIONS.fullmatch(path.split("?", 1)[0]):
        return None
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None  # not ours to mend: the upstream answers it as it is
    if not isinstance(request, dict) or request.get("stream") is not True:
        return None
    options = request.get("stream_options")
    if options is None:
        options = {}
    if not isinstance(options, dict) or options.get("include_usage") is True:
        return None
    request["stream_options"] = {**options, "include_usage": True}
    return json.dumps(request, separators=(",", ":")).encode()


def response_refusal(status: int, content_type: str, length: int) -> str | None:
    """Why a successful answer cannot be passed on (None: it can): a body of a type the
    gateway cannot read for the model and usage it reports."""
    if not 200 <= status < 300 or length == 0 or _media_type(content_type) in _RESPONSE_TYPES:
        return None
    return f"a model answer of type {content_type[:100]!r} cannot be measured"


class UpstreamRefused(Exception):
    """The gateway will not connect to this upstream (the message says why)."""


def _system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


_NAT64 = (
    ipaddress.ip_network("64:ff9b::/96"),
    ipaddress.ip_network("64:ff9b:1::/48"),
    ipaddress.ip_network("::ffff:0:0:0/96"),
)
"""Prefixes whose last 32 bits are the IPv4 address reached: NAT64 (well-known and
local-use) and SIIT's IPv4-translated addresses (``::ffff:0:a.b.c.d``)."""
_ISATAP_IDS = (0x00005EFE, 0x02005EFE)
"""An ISATAP interface identifier's upper half: its lower 32 bits are an IPv4 address."""


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form leads to (mapped, compatible, 6to4, NAT64, SIIT,
    ISATAP), or None."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    number = int(address)
    if any(address in network for network in _NAT64) or (number >> 32 == 0 and number > 1):
        return ipaddress.IPv4Address(number & 0xFFFFFFFF)
    if (number >> 32) & 0xFFFFFFFF in _ISATAP_IDS:
        return ipaddress.IPv4Address(number & 0xFFFFFFFF)
    return None


_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")


def refusal(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, *, allow_private: bool
) -> str | None:
    """Why the gateway may not connect to *address*, or None when it may.

    An IPv6 form that leads to an IPv4 address is judged as that address, so no
    refused IPv4 range can be reached by writing it as IPv6.
    """
    if isinstance(address, ipaddress.IPv6Address):
        if address.teredo is not None:
            return "a Teredo tunnel address (where it leads cannot be vetted)"
        if address.is_site_local:
            return "a site-local address"
        inner = embedded_ipv4(address)
        if inner is not None:
            why = refusal(inner, allow_private=allow_private)
            return f"{why} written as IPv6 ({inner})" if why else None
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    for test, name in (
        ("is_unspecified", "the unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
    ):
        if getattr(address, test):
            return name
    if address.is_global:
        return None
    if address in _THIS_NETWORK:  # "this host on this network": never a model API, private or not
        return "an address of this network (0.0.0.0/8)"
    if allow_private and address.is_private and not address.is_reserved:
        return None
    return "a private or reserved address"


def vet_upstream(
    host: str, port: int, *, allow_private: bool = False, resolve: Resolver | None = None
) -> str:
    """Resolve *host* and return the one address the gateway connects to.

    Every address the name resolves to must be acceptable: a name with one bad
    address among good ones is refused too (the client could be steered to it).

    Raises:
        UpstreamRefused: It does not resolve, or resolves to a refused address.
    """
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    try:
        found = (
            [str(literal)]
            if literal is not None
            else list((resolve or _system_resolver)(host, port))
        )
    except OSError as exc:
        raise UpstreamRefused(f"{host} does not resolve ({exc})") from None
    if not found:
        raise UpstreamRefused(f"{host} does not resolve")
    for text in found:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        why = refusal(address, allow_private=allow_private)
        if why is not None:
            raise UpstreamRefused(
                f"{host} resolves to {address}, {why}; the gateway never connects there"
            )
    return found[0]


def route_name(token: str) -> str:
    """The file name of a token's route: its digest, so a listing shows no token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --- What a response says -------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """What one response body reports about the model call."""

    served_model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    error_message: str | None = None
    models: tuple[str, ...] = ()
    """Every model the answer names, in order, each once (an answer may name several)."""


_MODEL_KEYS = ("model", "modelVersion")
"""Where a response names the model that served it (Anthropic and OpenAI; Gemini)."""
_INPUT_KEYS = ("input_tokens", "prompt_tokens", "promptTokenCount")
_OUTPUT_KEYS = ("output_tokens", "completion_tokens", "candidatesTokenCount")


def _events(content_type: str, body: bytes, strict: bool = False) -> Iterator[Any]:
    """The JSON objects of a JSON body, or of each ``data:`` line of a server-sent stream,
    or of each line of JSON lines. *strict* (a successful answer): a piece that is not
    JSON, or too deep to parse, makes the body :class:`Unreadable` instead of being left
    out, so nothing it holds goes uncounted."""
    text = body.decode("utf-8", errors="replace")

    def parsed(payload: str) -> Iterator[Any]:
        try:
            yield json.loads(payload)
        except RecursionError:
            if strict:
                raise Unreadable("the answer nests deeper than the gateway reads") from None
        except ValueError:
            if strict:
                raise Unreadable("a piece of the answer is not JSON") from None

    if "text/event-stream" in content_type or text.lstrip().startswith(("event:", "data:")):
        for line in text.splitlines():
            if line.startswith("data:"):
                payload = line[5:].strip()
                if payload and payload != "[DONE]":
                    yield from parsed(payload)
        return
    try:
        yield json.loads(text)
        return
    except RecursionError:
        if strict:
            raise Unreadable("the answer nests deeper than the gateway reads") from None
        return
    except ValueError:
        pass
    # JSON lines: one object per line.
    for line in text.splitlines():
        if line.strip():
            yield from parsed(line)


class _ignored:
    """Suppress a malformed piece: what cannot be read is not observed."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return isinstance(exc, ValueError | RecursionError)


_MAX_DEPTH = 64
"""How deep the gateway looks for a model and usage (JSON parsers stop near 1000)."""
_MAX_NODES = 50_000
"""How many values of one event it looks at, however the event is shaped."""


def _objects(value: Any, strict: bool = False) -> Iterator[dict[str, Any]]:
    """*value* and every object nested in it, outermost first, bounded in depth and count
    (*strict*: past a bound the answer is :class:`Unreadable`, never read in part)."""
    pending: deque[tuple[Any, int]] = deque([(value, 0)])
    seen = 0
    while pending:
        item, depth = pending.popleft()
        seen += 1
        if seen > _MAX_NODES or depth > _MAX_DEPTH:
            if strict:
                raise Unreadable(
                    f"the answer holds an event of more than {_MAX_NODES} values or deeper "
                    f"than {_MAX_DEPTH} levels, more than the gateway reads"
                )
            return
        if isinstance(item, dict):
            yield item
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)


_MAX_COUNT = 2**53 - 1
"""The largest token count a record holds (``agent_eval.models.base.MAX_COUNT``; this
module imports nothing of the harness): a provider's larger figure is no count."""


def _count(usage: dict[str, Any], keys: Iterable[str]) -> int | None:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT:
            return value
    return None


def observe(content_type: str, body: bytes, *, strict: bool = False) -> Observation:
    """The served model, token counts and error message a response body reports.

    Anthropic's and OpenAI's shapes are both read: ``model`` at the top or
    under ``message``/``response``, ``usage`` with input/prompt and
    output/completion tokens. In a stream the last value of each wins, except
    input tokens, which the first event that has them states. *strict* (a successful
    answer): a body that cannot be read whole within the bounds (every piece JSON, no event
    of more than 50,000 values or deeper than 64 levels; the body itself is bounded by the
    gateway's body limit) raises :class:`Unreadable`, so it is refused, never under-counted.
    """
    model: str | None = None
    models: dict[str, None] = {}
    inputs: int | None = None
    outputs: int | None = None
    error: str | None = None
    for event in _events(content_type, body, strict):
        for obj in _objects(event, strict):
            for key in _MODEL_KEYS:
                if isinstance(obj.get(key), str) and obj[key]:
                    model = obj[key][:200]
                    models[model] = None
                    break
            usage = obj.get("usage", obj.get("usageMetadata"))
            if isinstance(usage, dict):
                found_in = _count(usage, _INPUT_KEYS)
                found_out = _count(usage, _OUTPUT_KEYS)
                if found_in is not None and (inputs is None or found_in > inputs):
                    inputs = found_in
                if found_out is not None:
                    outputs = found_out
            failure = obj.get("error")
            if isinstance(failure, dict) and isinstance(failure.get("message"), str):
                error = failure["message"][:500]
            elif isinstance(failure, str) and failure:
                error = failure[:500]
    return Observation(model, inputs, outputs, error, tuple(models))


def provider_failure(status: int, message: str | None) -> str | None:
    """The kind of provider failure an upstream status is, or None for a success.

    authentication (401, 403), unknown-model (404, or 400 naming a model that
    does not exist), rate-limit (429), server-error (5xx and 529); any other
    4xx is the agent's own request, not the provider's failure.
    """
    text = (message or "").lower()
    if status < 400:
        return None
    if status in (401, 403):
        return "authentication"
    if status == 404 or (
        status == 400
        and "model" in text
        and any(
            w in text for w in ("not found", "does not exist", "invalid model", "unknown model")
        )
    ):
        return "unknown-model"
    if status == 429:
        return "rate-limit"
    if status >= 500:
        return "server-error"
    return None


def scrub(data: bytes, secrets: Iterable[str], placeholder: bytes = b"[credential]") -> bytes:
    """*data* with every secret (at least 8 characters) replaced by *placeholder*."""
    for secret in secrets:
        if len(secret) >= 8:
            data = data.replace(secret.encode("utf-8"), placeholder)
    return data


# --- The credential, in whatever spelling an answer carries it ------------------------------

_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_MAX_STRINGS = 200_000
"""How many string values of an answer the reflection check joins (an answer is bounded by
the body limit, so a larger count is refused as unreadable, never passed unchecked)."""


class Unreadable(Exception):
    """An answer the gateway cannot read whole for the credential (refused, never passed)."""


def _unescape_json(text: str) -> str:
    """*text* with every JSON string escape turned back into its character, whether the
    escapes cover the whole text or only part of it (surrogate pairs joined)."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return chr(int(match.group(1), 16))
        char = match.group(2)
        return _SIMPLE_ESCAPES.get(char, char)

    joined = _JSON_ESCAPE.sub(one, text)
    return joined.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _unpercent(text: str) -> str:
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text)


def _strings_by_key(value: Any, into: dict[str, list[str]], budget: list[int]) -> None:
    """Every string of *value*, in order, under the key it was found at ("" at the top or
    in a list of a list), and once more under "*" for all of them."""
    pending: list[tuple[Any, str, int]] = [(value, "", 0)]
    while pending:
        item, key, depth = pending.pop()
        budget[0] -= 1
        if budget[0] < 0 or depth > 1000:
            raise Unreadable("the answer holds more values than the gateway reads")
        if isinstance(item, str):
            into.setdefault(key, []).append(item)
            into.setdefault("*", []).append(item)
        elif isinstance(item, dict):
            for name, child in reversed(list(item.items())):
                into.setdefault("*", []).append(str(name))
                pending.append((child, str(name), depth + 1))
        elif isinstance(item, list):
            pending.extend((child, key, depth + 1) for child in reversed(item))


def _documents(text: str) -> list[Any]:
    """The JSON values *text* holds: itself, or its ``data:`` lines, or its lines."""
    with _ignored():
        return [json.loads(text)]
    found = []
    for line in text.splitlines():
        payload = line[5:].strip() if line.startswith("data:") else line.strip()
        if payload and payload != "[DONE]":
            with _ignored():
                found.append(json.loads(payload))
    return found


def spellings(secret: str) -> list[str]:
    """*secret* as a text could spell it and be turned back: itself, percent-encoded (either
    case), JSON ``\\u`` escapes (either case), hex in either case, and base64 (standard and
    URL-safe) at each of the three offsets it can start at inside a longer base64 text.

    The one list both walls use: the gateway looks for these in an answer, and the batch
    replaces them in every evidence file it writes (:mod:`agent_eval.redaction`).
    """
    raw = secret.encode("utf-8")
    forms = {secret, raw.hex(), raw.hex().upper()}
    forms.update({"".join(f"%{b:02X}" for b in raw), "".join(f"%{b:02x}" for b in raw)})
    units = secret.encode("utf-16-be")
    pairs = [units[i : i + 2].hex() for i in range(0, len(units), 2)]
    forms.update({"".join(f"\\u{u}" for u in pairs), "".join(f"\\u{u.upper()}" for u in pairs)})
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        # Only the characters whose six bits all come from the secret: the ones before
        # and after also carry whatever surrounds it in a longer text.
        start, end = -(-8 * offset // 6), 8 * (offset + len(raw)) // 6
        stable = encoded[start:end]
        forms.update({stable, stable.replace("+", "-").replace("/", "_")})
    return sorted(form for form in forms if len(form) >= 8)  # one order for every test worker


def _views(text: str) -> list[str]:
    """*text* and what it turns back into: JSON escapes undone, percent-encoding undone."""
    unescaped = _unescape_json(text)
    return [text, unescaped, _unpercent(unescaped), _unpercent(text)]


def reflected(secret: str, parts: dict[str, str], body: str) -> str | None:
    """Where the answer carries *secret* in a spelling it can be turned back into (None:
    nowhere): *parts* are the status line's reason and every header name and value, by
    what they are; *body* is the decoded body as text.

    Besides the text itself, with JSON escapes (whole or partial) and percent-encoding
    undone, every JSON string value of the body (a JSON document, server-sent events or
    JSON lines) is joined in order under its key and all together, so a credential split
    over two deltas or two lines is found as the client would join it; base64 and hex
    spellings are looked for in each of these.

    Raises:
        Unreadable: the body holds more values than the check reads.
    """
    if len(secret) < 8:
        return None
    forms = spellings(secret)

    def found(text: str) -> bool:
        return any(form in view for view in _views(text) for form in forms)

    for where, text in parts.items():
        if found(text):
            return where
    if found(body):
        return "the body"
    by_key: dict[str, list[str]] = {}
    budget = [_MAX_STRINGS]
    for document in _documents(body):
        _strings_by_key(document, by_key, budget)
    for key, strings in by_key.items():
        if found("".join(strings)):
            return f"the body's {key!r} values joined" if key != "*" else "the body's values joined"
    return None
