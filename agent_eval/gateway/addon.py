"""The gateway's mitmproxy addon: attribute, authorise, vet, observe, record.

Added to mitmproxy's master by :mod:`.serve` inside the gateway container.
For every request it

* finds the attempt from the placeholder token the runner sent (a route file
  the harness wrote; a request with no route is answered 403 and recorded as
  unattributed), removes every credential header the runner sent and adds
  the real credential from the gateway's own environment;
* refuses once the batch's token budget is spent (429, recorded);
* before any upstream connection, resolves the upstream host and refuses it
  unless every address is public (:func:`~agent_eval.gateway.policy.vet_upstream`),
  then connects to the vetted address (the name stays the TLS server name);
* records status, bytes, duration, the served model and token usage read
  from the response, and any provider failure, in the attempt's record;
* refuses (never passes on) an answer that carries a credential in any spelling it
  can be turned back into, one in an encoding it cannot decode, and a protocol switch;
  the refusal is recorded (``credential-reflected`` stops the batch).

It also serves one Unix socket per upstream (in ``running``), relayed to that
upstream's mitmproxy listener on loopback: the runner's only door.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval.gateway.policy import (
    Unreadable,
    UpstreamRefused,
    observe,
    provider_failure,
    reflected,
    request_refusal,
    response_refusal,
    route_name,
    scrub,
    vet_upstream,
    with_usage_requested,
)

_TOKEN_HEADERS = ("x-api-key", "authorization", "api-key", "x-goog-api-key")
_MAX_MESSAGE = 500
MAX_BODY_BYTES = 32 * 1024 * 1024
"""A request or response body larger than this is refused (a model request is far smaller);
mitmproxy's own ``body_size_limit`` is set to it as well, for bodies without a length."""


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _json_response(status: int, message: str) -> Any:
    from mitmproxy import http  # only in the gateway container

    body = json.dumps(
        {"type": "error", "error": {"type": "agent_eval_gateway", "message": message}}
    )
    return http.Response.make(status, body.encode(), {"content-type": "application/json"})


class Gateway:
    """The addon (one instance for the whole gateway process)."""

    def __init__(self, config_path: str) -> None:
        path = Path(config_path)
        self.config = json.loads(path.read_text(encoding="utf-8"))
        self.routes = Path(self.config["routes"])
        self.records = Path(self.config["records"])
        self.sockets = Path(self.config["sockets"])
        self.allow_private = bool(self.config.get("privateUpstreams"))
        self.budget: int | None = self.config.get("tokenBudget")
        self.by_port = {int(u["listenPort"]): u for u in self.config["upstreams"]}
        self.secrets: dict[str, str] = {}
        for upstream in self.config["upstreams"]:
            value = os.environ.get(upstream["credentialEnv"], "")
            self.secrets[upstream["name"]] = value
        self.spent = 0
        self.lock = threading.Lock()
        self.servers: list[asyncio.AbstractServer] = []

    # --- The runner's door ---------------------------------------------------------------

    async def running(self) -> None:
        """Open one Unix socket per upstream once mitmproxy's listeners are up."""
        for upstream in self.config["upstreams"]:
            path = self.sockets / f"{upstream['name']}.sock"
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            server = await asyncio.start_unix_server(
                functools.partial(self._relay, port=int(upstream["listenPort"])), path=str(path)
            )
            os.chmod(path, 0o666)  # the runner's user connects; its mount is read-only
            self.servers.append(server)
        (self.sockets / "ready").write_text(_now() + "\n")

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int
    ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(OSError, RuntimeError):
                    sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    # --- Requests ------------------------------------------------------------------------

    def _upstream(self, flow: Any) -> dict[str, Any] | None:
        sockname = getattr(flow.client_conn, "sockname", None) or ("", 0)
        return self.by_port.get(int(sockname[1]))

    def _route(self, flow: Any) -> dict[str, Any] | None:
        for header in _TOKEN_HEADERS:
            value = flow.request.headers.get(header)
            if not value:
                continue
            token = value.split(" ", 1)[1] if value.lower().startswith("bearer ") else value
            try:
                return dict(
                    json.loads((self.routes / f"{route_name(token.strip())}.json").read_text())
                )
            except (OSError, ValueError):
                return None
        return None

    def requestheaders(self, flow: Any) -> None:
        """Refuse, before any body is read, what the gateway never forwards.

        A protocol upgrade (a websocket) would carry answers the gateway cannot read, so
        their model and usage would go unmeasured; a body over :data:`MAX_BODY_BYTES`
        would only exhaust the gateway's memory; a path outside the upstream's model API
        (its account, file or key endpoints) never gets the credential.
        """
        flow.metadata["agent_eval_started"] = time.monotonic()
        headers = flow.request.headers
        connection = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        why = None
        if "upgrade" in headers or "upgrade" in connection:
            why = "protocol upgrades (websockets) are not forwarded"
        else:
            try:
                length = int(headers.get("content-length", "0") or "0")
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                why = f"a request body must have a length of at most {MAX_BODY_BYTES} bytes"
            else:
                upstream = self._upstream(flow) or {}
                body = length if length else int("transfer-encoding" in headers)
                why = request_refusal(
                    str(upstream.get("api", "")),
                    str(flow.request.method),
                    str(flow.request.path),
                    headers.get("content-type", ""),
                    body,
                )
        if why is not None:
            flow.metadata["agent_eval_upstream"] = self._upstream(flow)
            flow.metadata["agent_eval_route"] = self._route(flow)
            flow.metadata["agent_eval_failure"] = "refused-request"
            flow.response = _json_response(400, f"agent-eval gateway: {why}")

    def request(self, flow: Any) -> None:
        """Attribute and authorise the request, or answer it here; fail closed."""
        if flow.response is not None:  # refused on its headers
            return
        flow.metadata.setdefault("agent_eval_started", time.monotonic())
        try:
            self._authorise(flow)
        except Exception as exc:  # mitmproxy would forward a request whose hook raised
            flow.response = _json_response(500, f"agent-eval gateway failed: {type(exc).__name__}")
            flow.metadata["agent_eval_failure"] = "gateway"

    def _authorise(self, flow: Any) -> None:
        upstream = self._upstream(flow)
        route = self._route(flow)
        flow.metadata["agent_eval_upstream"] = upstream
        flow.metadata["agent_eval_route"] = route
        if upstream is None or route is None:
            flow.response = _json_response(
                403, "agent-eval gateway: no such attempt (unknown or revoked token)"
            )
            flow.metadata["agent_eval_failure"] = "unattributed"
            return
        with self.lock:
            spent = self.budget is not None and self.spent >= self.budget
        if spent:
            flow.response = _json_response(
                429, f"agent-eval gateway: the batch's token budget of {self.budget} is spent"
            )
            flow.metadata["agent_eval_failure"] = "budget"
            return
        for header in _TOKEN_HEADERS:
            flow.request.headers.pop(header, None)
        secret = self.secrets.get(upstream["name"], "")
        name = upstream["credentialHeader"]
        flow.request.headers[name] = (
            f"Bearer {secret}" if name.lower() == "authorization" else secret
        )
        asked = with_usage_requested(
            flow.request.path, flow.request.get_content(strict=False) or b""
        )
        if asked is not None:
            flow.request.set_content(asked)  # sets the length to the new body's

    def server_connect(self, data: Any) -> None:
        """Vet the upstream's addresses before any connection, and pin the vetted one."""
        host, port = data.server.address
        try:
            address = vet_upstream(str(host), int(port), allow_private=self.allow_private)
        except UpstreamRefused as exc:
            data.server.error = f"agent-eval gateway refused the upstream: {exc}"
            return
        if data.server.sni is None:
            data.server.sni = str(host)  # the certificate is checked against the name
        data.server.address = (address, int(port))

    def response(self, flow: Any) -> None:
        """Observe and record the answer; take the credential out of it; fail closed."""
        try:
            self._observe(flow)
        except Exception as exc:  # nothing unscrubbed or unrecorded goes back
            flow.response = _json_response(500, f"agent-eval gateway failed: {type(exc).__name__}")

    def _refuse(self, flow: Any, failure: str, why: str) -> Any:
        flow.metadata["agent_eval_failure"] = failure
        flow.response = _json_response(502, f"agent-eval gateway: {why}")
        return flow.response

    def _readable(self, flow: Any) -> bytes:
        """The answer's body, decoded; an answer the gateway cannot read whole, or that
        carries a credential in any spelling, is replaced by a refusal (never passed)."""
        response = flow.response
        status = int(response.status_code)
        if status == 101 or "upgrade" in response.headers:
            # What follows a protocol switch is a tunnel the gateway cannot read.
            why = "an upstream's protocol switch is never passed on; nothing is tunnelled"
            return bytes(self._refuse(flow, "refused-response", why).content)
        try:
            content = bytes(response.get_content(strict=True) or b"")
        except ValueError:
            encoding = response.headers.get("content-encoding", "")[:60]
            why = f"the answer's content encoding {encoding!r} is not one the gateway can read"
            return bytes(self._refuse(flow, "refused-response", why).content)
        parts = {"the status line's reason": str(response.reason or "")}
        for name, value in response.headers.items(multi=True):
            parts[f"a header's name ({len(parts)})"] = str(name)
            parts[f"the {str(name)[:40]} header"] = str(value)
        body = content.decode("utf-8", errors="surrogateescape")
        for secret in self.secrets.values():
            try:
                where = reflected(secret, parts, body)
            except Unreadable as exc:
                return bytes(self._refuse(flow, "refused-response", str(exc)).content)
            if where is not None:
                why = f"the upstream's answer carries the credential ({where}); refused"
                return bytes(self._refuse(flow, "credential-reflected", why).content)
        return content

    def _observe(self, flow: Any) -> None:
        content = self._readable(flow)
        response = flow.response
        refused = response_refusal(
            int(response.status_code), response.headers.get("content-type", ""), len(content)
        )
        if refused is not None and not flow.metadata.get("agent_eval_failure"):
            response = self._refuse(flow, "refused-response", refused)
            content = response.get_content(strict=False) or b""
        status = int(response.status_code)
        answered = 200 <= status < 300 and not flow.metadata.get("agent_eval_failure")
        try:
            seen = observe(response.headers.get("content-type", ""), content, strict=answered)
        except Unreadable as exc:
            response = self._refuse(flow, "refused-response", str(exc))
            content = response.get_content(strict=False) or b""
            seen = observe("application/json", content)
        upstream = flow.metadata.get("agent_eval_upstream") or {}
        reviewed = set(upstream.get("servedModels") or ())
        unreviewed = [m for m in seen.models if m not in reviewed]
        if answered and unreviewed and not flow.metadata.get("agent_eval_failure"):
            # An answer naming a model no review covers, beside the reviewed one or not,
            # never reaches the runner; the record names it, so the batch stops on it.
            why = f"the answer names {unreviewed[0]!r}, a model no review covers"
            self._refuse(flow, "refused-response", why)
            seen = replace(seen, served_model=unreviewed[0])
        failure = flow.metadata.get("agent_eval_failure") or provider_failure(
            status, seen.error_message
        )
        tokens = (seen.input_tokens or 0) + (seen.output_tokens or 0)
        if tokens and failure is None:
            with self.lock:
                self.spent += tokens
        self._record(
            flow,
            status=int(flow.response.status_code),
            response_bytes=len(content),
            served_model=seen.served_model,
            input_tokens=seen.input_tokens,
            output_tokens=seen.output_tokens,
            failure=failure,
            message=seen.error_message if failure else None,
        )

    def error(self, flow: Any) -> None:
        """A request that ended without an answer passed on: the upstream is unreachable or
        was refused, or its answer broke off or could not be read (past the body limit,
        trailers); every request gets its record, whatever became of it."""
        if flow.metadata.get("agent_eval_recorded"):
            return
        message = str(getattr(flow.error, "msg", "") or "no response")
        status = int(flow.response.status_code) if flow.response is not None else None
        if "refused the upstream" in message:
            failure = "refused-upstream"
        elif message.lower().startswith("client disconnected"):
            failure = "cancelled"  # the runner went away (killed at its deadline): not the provider
        elif flow.response is not None:
            failure = "refused-response"  # an answer begun, never read whole nor passed on
        else:
            failure = "unreachable"
        self._record(flow, status=status, response_bytes=0, failure=failure, message=message)

    def _record(
        self,
        flow: Any,
        *,
        status: int | None,
        response_bytes: int,
        served_model: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        failure: str | None = None,
        message: str | None = None,
    ) -> None:
        flow.metadata["agent_eval_recorded"] = True
        upstream = flow.metadata.get("agent_eval_upstream") or {}
        route = flow.metadata.get("agent_eval_route")
        started = flow.metadata.get("agent_eval_started", time.monotonic())
        secrets = list(self.secrets.values())
        line = {
            "schemaVersion": 1,
            "at": _now(),
            "upstream": upstream.get("name"),
            "method": str(flow.request.method)[:16],
            "path": scrub(str(flow.request.path).encode(), secrets).decode()[:300],
            "status": status,
            "requestBytes": len(flow.request.raw_content or b""),
            "responseBytes": response_bytes,
            "durationMs": max(0, int((time.monotonic() - started) * 1000)),
            "servedModel": served_model,
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "failure": failure,
            "message": scrub((message or "").encode(), secrets).decode()[:_MAX_MESSAGE] or None,
        }
        name = str(route["record"]) if route else "unattributed.jsonl"
        with self.lock, open(self.records / Path(name).name, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, sort_keys=True) + "\n")
