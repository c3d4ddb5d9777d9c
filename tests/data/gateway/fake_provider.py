"""A fake model provider for gateway tests: checks the key, knows one model, echoes.

    python3 -B fake_provider.py PORT KEY_SHA256 MODEL LOG

* ``GET /v1/models/<id>``: 401 unless the x-api-key or bearer key hashes to KEY_SHA256,
  404 unless <id> is MODEL, else the model object;
* ``POST /v1/messages``: the same key check, then a message "served" by MODEL with usage,
  echoing the request's headers (the key's hash, never the key) and body;
* ``GET /v1/models/echo``: what the provider saw, for the boundary tests; the key itself
  is echoed here on purpose, in the body and in response headers, so that the gateway
  must take it out of the answer;
* ``GET /v1/models/reflect-<form>``: the key handed back in one spelling (JSON-escaped
  whole or in part, split over two server-sent events or two JSON lines, as a header
  name, as the status line's reason, under ``x-gzip`` or ``gzip, gzip``, in base64 or
  percent-encoded); ``reflect-none``: an answer without it;
* ``GET /v1/models/huge``: an answer past the gateway's body limit; ``/trailers``: a
  chunked answer with HTTP trailers;
* ``GET /v1/models/switch``: an unasked ``101 Switching Protocols``, then a tunnel;
* ``GET /v1/models/binary``: a successful answer in a type nobody can read usage from;
* any other path: answered as if it were an account endpoint (the gateway must never
  forward one).

Every request is appended to LOG as one JSON line.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PORT, KEY_SHA256, MODEL, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _key(self) -> str:
        return self.headers.get("x-api-key") or (
            self.headers.get("authorization") or ""
        ).removeprefix("Bearer ")

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _log(self, body: Any = None) -> None:
        entry = {
            "method": self.command,
            "path": self.path,
            "host": self.headers.get("host"),
            "keySha256": hashlib.sha256(self._key().encode()).hexdigest(),
            "headers": sorted(h.lower() for h in self.headers),
            "body": body,
        }
        with open(LOG, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    def _authorised(self) -> bool:
        if hashlib.sha256(self._key().encode()).hexdigest() == KEY_SHA256:
            return True
        self._send(
            401,
            {
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            },
        )
        return False

    def do_GET(self) -> None:
        self._log()
        if self.path == "/v1/models/binary":
            data = b"\x00\x01 no usage in here"
            self.send_response(200)
            self.send_header("content-type", "application/octet-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.path.startswith("/v1/models/reflect-"):
            self._reflect(self.path.removeprefix("/v1/models/reflect-"), self._key() or "")
            return
        if self.path == "/v1/models/huge":  # past the gateway's body limit
            chunk = b"x" * (1 << 20)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(33 * len(chunk)))
            self.end_headers()
            for _ in range(33):
                self.wfile.write(chunk)
            return
        if self.path == "/v1/models/trailers":  # a chunked answer with HTTP trailers
            body = json.dumps({"model": MODEL}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("trailer", "x-after")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\nx-after: 1\r\n\r\n" % (len(body), body))
            return
        if self.path == "/v1/models/switch":
            # An unasked protocol switch, then whatever comes through the tunnel is logged.
            self.send_response(101)
            self.send_header("upgrade", "websocket")
            self.send_header("connection", "upgrade")
            self.end_headers()
            self.wfile.flush()
            self.rfile.readline()  # a request the client sends inside the tunnel, if any
            self.close_connection = True
            return
        if self.path == "/v1/models/echo":
            key = self._key() or ""
            self._send(
                200,
                {"model": MODEL, "sawKey": key, "host": self.headers.get("host")},
                # An upstream that reflects request headers hands the credential back.
                {"x-echo-key": key, "x-echo-auth": f"Bearer {key}", "set-cookie": f"k={key}"},
            )
            return
        if not self._authorised():
            return
        if self.path.startswith("/v1/models/"):
            name = self.path.removeprefix("/v1/models/")
            if name != MODEL:
                self._send(
                    404,
                    {
                        "type": "error",
                        "error": {"type": "not_found_error", "message": f"model: {name}"},
                    },
                )
                return
            self._send(200, {"type": "model", "id": MODEL})
            return
        self._send(404, {"error": {"message": "no such path"}})

    def _reflect(self, form: str, key: str) -> None:
        """Hand the credential back in one of the spellings a hostile upstream could use."""
        escaped = "".join(f"\\u{ord(c):04x}" for c in key)
        half = len(key) // 2
        headers = {"content-type": "application/json"}
        reason = None
        if form == "u-escaped":
            body = ('{"model": "' + MODEL + '", "text": "' + escaped + '"}').encode()
        elif form == "partly-escaped":
            text = escaped[:18] + key[3:]  # the first three characters escaped, the rest not
            body = ('{"model": "' + MODEL + '", "text": "' + text + '"}').encode()
        elif form == "split-sse":
            headers["content-type"] = "text/event-stream"
            events = [{"model": MODEL, "delta": {"text": key[:half]}},
                      {"type": "delta", "delta": {"text": key[half:]}}]  # fmt: skip
            body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
        elif form == "split-lines":
            headers["content-type"] = "application/x-ndjson"
            lines = [{"model": MODEL, "t": key[:half]}, {"t": key[half:]}]
            body = "".join(json.dumps(line) + "\n" for line in lines).encode()
        elif form == "header-name":
            headers[key] = "1"
            body = json.dumps({"model": MODEL}).encode()
        elif form == "reason":
            reason = key
            body = json.dumps({"model": MODEL}).encode()
        elif form in ("x-gzip", "gzip-gzip"):
            inner = json.dumps({"model": MODEL, "text": key}).encode()
            body = gzip.compress(inner, mtime=0)
            if form == "gzip-gzip":
                body = gzip.compress(body, mtime=0)
            headers["content-encoding"] = "x-gzip" if form == "x-gzip" else "gzip, gzip"
        elif form == "base64":
            encoded = base64.b64encode(b"k=" + key.encode()).decode()
            body = json.dumps({"model": MODEL, "text": encoded}).encode()
        elif form == "percent":
            encoded = "".join(f"%{b:02X}" for b in key.encode())
            body = json.dumps({"model": MODEL, "text": encoded}).encode()
        elif form == "two-models":  # an unreviewed model first, the reviewed one last
            headers["content-type"] = "text/event-stream"
            events = [
                {"type": "message_start", "message": {"model": "unreviewed-model"}},
                {"type": "message_delta", "model": MODEL, "usage": {"output_tokens": 3}},
            ]
            body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
        elif form == "deep":  # usage out of the reader's reach
            body = ('{"model": "' + MODEL + '", "x": ' + "[" * 80 + "]" * 80 + "}").encode()
        else:
            body = json.dumps({"model": MODEL, "text": "nothing to hide"}).encode()
        self.send_response(200, reason)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self._log(body)
        if not self._authorised():
            return
        self._send(
            200,
            {
                "type": "message",
                "model": MODEL,
                "content": [],
                "usage": {"input_tokens": 21, "output_tokens": 8},
            },
        )


if __name__ == "__main__":
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
    server.daemon_threads = True
    server.serve_forever()
