"""The gateway boundary on a real engine: the runner's only way out, and where it may lead.

On a network this test creates, a fake provider answers as ``model.test`` and a second
service stands for everything else (``other.test``). A runner container (no network)
reaches the provider through the gateway's socket only, with its attempt's token, and
the credential only the gateway holds is what the provider sees; an answer that hands the
credential back, in any spelling (escaped, split over events or lines, in a header name,
the reason phrase, base64, percent-encoded, under an encoding the gateway cannot read), is
refused whole, and an unasked protocol switch is refused rather than tunnelled. The
runner has only a loopback interface: it cannot reach the other service, the provider
directly, a listener on any of the host's addresses, or the gateway's own listener, and
it resolves no name.

The gateway's refusals are proven in a gateway container with network none (a namespace
with only loopback: nothing it decides can leave the machine): names pinned to metadata,
link-local, loopback, multicast, unspecified and private addresses are refused before
any connection, from the gateway's own record of its decision; a test set-up's private
allowance lets a private address through and still refuses the others.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from agent_eval.engine import ContainerEngine, ContainerSpec, list_leftovers, run_container
from agent_eval.gateway.host import TOKEN_ENV, BatchGateway
from agent_eval.images.build import image_for_checkout
from agent_eval.models import GatewayOptions, ModelUpstream, RunnerConfig
from agent_eval.reference.config import reference_config
from tests.agent_scripted_model import Provider, engine, network, start_provider
from tests.paths import DATA, REPO

pytestmark = pytest.mark.docker

__all__ = ["engine", "network"]

PORT = 8080
MODEL = "fake-model-1"
CANARY = "sk-canary-" + hashlib.sha256(b"gateway boundary").hexdigest()[:32]
SERVER = DATA / "gateway" / "fake_provider.py"
REFLECTIONS = [
    "u-escaped", "partly-escaped", "split-sse", "split-lines", "header-name", "reason",
    "x-gzip", "gzip-gzip", "base64", "percent",
]  # fmt: skip
"""The spellings a hostile upstream hands the credential back in (fake_provider.py)."""


def provider(client: docker.DockerClient, network: str, image: str, work: Path) -> Provider:
    key = hashlib.sha256(CANARY.encode()).hexdigest()
    return start_provider(
        client, network, image, SERVER, [str(PORT), key, MODEL, "/log/requests.jsonl"], work,
        port=PORT,
    )  # fmt: skip


def config(
    engine: ContainerEngine, upstreams: dict[str, str], options: GatewayOptions
) -> RunnerConfig:
    base = reference_config(
        engine, "oracle", project_root=REPO, runtime_path="/var/run/docker.sock"
    )
    return base.model_copy(
        update={
            "models": [
                ModelUpstream(
                    name=name,
                    upstream=url,
                    credentialEnv="FAKE_PROVIDER_KEY",
                    credentialHeader="x-api-key",
                    servedModels=[MODEL],
                )
                for name, url in upstreams.items()
            ],
            "gateway": options,
            "gatewayImage": image_for_checkout(engine, REPO, "gateway"),
        }
    )


@pytest.fixture
def gateway_image(engine: ContainerEngine) -> str:
    return image_for_checkout(engine, REPO, "gateway")


def started(
    engine: ContainerEngine, runner_config: RunnerConfig, work: Path, batch: str, **options: Any
) -> BatchGateway:
    assert runner_config.gatewayImage is not None
    gateway = BatchGateway(
        engine,
        runner_config,
        engine.resolve_image(runner_config.gatewayImage),
        work_dir=work,
        batch_id=batch,
        environ={"FAKE_PROVIDER_KEY": CANARY},
        **options,
    )
    gateway.start()
    return gateway


PROBE = r"""
import http.client, json, os, socket, sys
args = json.loads(sys.argv[1])
out = {"interfaces": [name for _, name in socket.if_nameindex()]}

def tcp(host, port):
    try:
        socket.create_connection((host, port), 2).close()
        return "connected"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"

out["other"] = tcp(args["other"], args["port"])
out["provider"] = tcp(args["provider"], args["port"])
out["hosts"] = {ip: tcp(ip, args["host_port"]) for ip in args["host_ips"]}
out["gateway_listener"] = tcp("127.0.0.1", 18001)
out["dns"] = {}
for name in ("model.test", "other.test", "example.com"):
    try:
        socket.getaddrinfo(name, 80)
        out["dns"][name] = "resolved"
    except OSError as exc:
        out["dns"][name] = str(exc)

class Gateway(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect("/gateway/provider.sock")

def ask(path, key, extra=None, method="GET", body=None):
    connection = Gateway("gateway", timeout=30)
    headers = {"x-api-key": key} if key else {}
    connection.putrequest(method, path, skip_accept_encoding=True)
    for name, value in {**headers, **(extra or {})}.items():
        connection.putheader(name, value)
    if body is not None:
        connection.putheader("content-length", str(len(body)))
    connection.endheaders(body)  # with no body, none is sent, whatever content-length says
    answer = connection.getresponse()
    return answer.status, answer.read().decode(errors="replace"), dict(answer.getheaders())

token = os.environ["AGENT_EVAL_GATEWAY_TOKEN"]
out["echo"] = ask("/v1/models/echo", token)
out["no_token"] = ask("/v1/models/echo", None)
out["wrong_token"] = ask("/v1/models/echo", "ae-guessed")
out["upgrade"] = ask("/v1/models/echo", token, {"connection": "Upgrade", "upgrade": "websocket",
                                      "sec-websocket-version": "13",
                                      "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="})
out["huge"] = ask("/v1/models/echo", token, {"content-length": str(10**10)})
# Not a model API's endpoint: account, file and key endpoints, however spelled.
out["paths"] = {
    path: ask(path, token)[0]
    for path in ("/echo", "/v1/files", "/v1/organizations/me/api_keys", "/v1/messages/../files",
                 "/v1/models/x%2F..%2F..%2Ffiles", "/v1//messages", "/v1/messages/batches")
}
out["delete"] = ask("/v1/models/echo", token, method="DELETE")[0]
out["form"] = ask("/v1/messages", token, {"content-type": "multipart/form-data; boundary=x"},
                  method="POST", body=b"--x--")[0]
out["binary"] = ask("/v1/models/binary", token)[:2]
# An upstream handing the credential back, in every spelling it could be turned back from.
out["reflect"] = {form: ask(f"/v1/models/reflect-{form}", token)
                  for form in args["forms"] + ["none"]}
out["unmeasurable"] = {form: ask(f"/v1/models/reflect-{form}", token)[:2]
                       for form in ("two-models", "deep")}
out["switch"] = ask("/v1/models/switch", token)[:2]
def status_of(path):
    try:
        return ask(path, token)[0]
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__
out["huge_answer"] = status_of("/v1/models/huge")
out["trailers"] = status_of("/v1/models/trailers")
# A streamed chat completion goes out asking for its usage, so its tokens are counted.
out["streamed"] = ask("/v1/chat/completions", token, {"content-type": "application/json"},
                      method="POST", body=json.dumps({"model": "m", "stream": True}).encode())[0]
out["environ"] = open("/proc/self/environ", "rb").read().decode(errors="replace")
print(json.dumps(out))
"""


def host_addresses() -> list[str]:
    listing = subprocess.run(
        ["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    return sorted({line.split()[3].split("/")[0] for line in listing.splitlines()})


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A listener on every address of the host: a runner that reached one would connect."""
    listener = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    listener.bind(("::", 0))
    listener.listen(8)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


def test_a_runner_reaches_the_provider_through_the_gateway_and_nothing_else(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    gateway_image: str,
    host_listener: int,
    tmp_path: Path,
) -> None:
    model = provider(docker_client, network, gateway_image, tmp_path / "model")
    other = provider(docker_client, network, gateway_image, tmp_path / "other")
    options = GatewayOptions(
        network=network, hosts={"model.test": model.address}, privateUpstreams=True
    )
    batch = "gateway-boundary"
    runner_config = config(engine, {"provider": f"http://model.test:{PORT}"}, options)
    gateway = started(engine, runner_config, tmp_path / "gateway", batch)
    try:
        route = gateway.open_route("boundary-1", 1)
        args = {
            "other": other.address,
            "provider": model.address,
            "port": PORT,
            "host_ips": host_addresses(),
            "host_port": host_listener,
            "forms": REFLECTIONS,
        }
        spec = ContainerSpec(
            image=image_for_checkout(engine, REPO, "reference-runner"),
            command=("/usr/bin/python3", "-c", PROBE, json.dumps(args)),
            role="runner",
            batch_id=batch,
            run_id="boundary-1",
            mounts=gateway.runner_mounts(),
            environment={**gateway.runner_environment(), **route.environment},
        )
        done = run_container(engine, spec, timeout_s=120, log_limit_bytes=1 << 20)
        assert done.wait.exit_code == 0, done.output.stderr.decode()
        out: dict[str, Any] = json.loads(done.output.stdout)
        records = gateway.close_route(route)
    finally:
        gateway.stop()
        model.stop()
        other.stop()
    assert out["interfaces"] == ["lo"]
    for name in ("other", "provider", "gateway_listener"):
        assert out[name] != "connected", (name, out[name])
    assert out["hosts"] and all(v != "connected" for v in out["hosts"].values()), out["hosts"]
    assert all(v != "resolved" for v in out["dns"].values()), out["dns"]
    status, body, headers = out["echo"]
    assert CANARY not in json.dumps(headers), "the credential came back in a header"
    assert "x-echo-key" not in headers, headers
    assert status == 502 and "carries the credential" in body, out["echo"]
    assert CANARY not in body, "the credential came back to the runner"
    # Every spelling refused whole, never passed on: nothing of it reached the runner.
    for form, (status, body, headers) in out["reflect"].items():
        received = body + json.dumps(headers)
        assert CANARY not in received and CANARY.upper() not in received, form
        if form == "none":
            assert status == 200, (form, body)
        else:
            assert status == 502 and "agent-eval gateway" in body, (form, status, body)
    for form, (status, body) in out["unmeasurable"].items():
        assert status == 502 and "agent-eval gateway" in body, (form, status, body)
    status, body = out["switch"]
    assert status == 502 and "protocol switch" in body, out["switch"]
    assert out["no_token"][0] == out["wrong_token"][0] == 403
    # Refused on their headers, never forwarded: an upgrade and a body past the limit.
    assert out["upgrade"][0] == 400 and "upgrades" in out["upgrade"][1], out["upgrade"]
    # A body past the limit: refused by the addon on its length, or by mitmproxy's own
    # limit, which it sets, before any byte of it is read (413).
    assert out["huge"][0] in {400, 413}, out["huge"]
    assert all(status == 400 for status in out["paths"].values()), out["paths"]
    assert out["delete"] == 400 and out["form"] == 400, out
    status, body = out["binary"]
    assert status == 502 and "cannot be measured" in body, out["binary"]
    assert f"{TOKEN_ENV}={route.token}" in out["environ"] and CANARY not in out["environ"]
    seen = [json.loads(line) for line in model.log.read_text().splitlines()]
    assert [e["path"] for e in seen] == [
        "/v1/models/echo",
        "/v1/models/binary",
        *(f"/v1/models/reflect-{form}" for form in [*REFLECTIONS, "none"]),
        "/v1/models/reflect-two-models",
        "/v1/models/reflect-deep",
        "/v1/models/switch",
        "/v1/models/huge",
        "/v1/models/trailers",
        "/v1/chat/completions",
    ], "only the attributed requests to the model API went out, nothing through a tunnel"
    assert out["streamed"] == 200
    assert seen[-1]["body"] == {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert seen[0]["keySha256"] == hashlib.sha256(CANARY.encode()).hexdigest()
    assert other.requests() == [] and not other.log.exists()
    lines = [json.loads(line) for line in records.splitlines()]
    record, upgrade = lines[0], lines[1]
    assert (record["path"], record["status"]) == ("/v1/models/echo", 502)
    assert record["failure"] == "credential-reflected", record
    failures = {
        line["path"].removeprefix("/v1/models/reflect-"): line["failure"]
        for line in lines
        if line["path"].startswith("/v1/models/reflect-")
    }
    assert failures.pop("none") is None
    assert failures.pop("two-models") == failures.pop("deep") == "refused-response"
    (two,) = [line for line in lines if line["path"].endswith("reflect-two-models")]
    assert two["servedModel"] == "unreviewed-model", two  # the batch stops on it
    undecodable = {"x-gzip", "gzip-gzip"}  # refused as unreadable, or read and found
    assert all(
        failure == "credential-reflected" or (form in undecodable and failure == "refused-response")
        for form, failure in failures.items()
    ), failures
    # Every request has its record, whatever became of its answer.
    for path in ("/v1/models/huge", "/v1/models/trailers"):
        (line,) = [line for line in lines if line["path"] == path]
        assert line["failure"] is not None or line["status"] == 200, line
    assert out["huge_answer"] != 200, out["huge_answer"]
    (switch,) = [line for line in lines if line["path"] == "/v1/models/switch"]
    assert switch["failure"] == "refused-response", switch
    assert upgrade["failure"] == "refused-request"
    refused = {line["path"] for line in lines if line["failure"] == "refused-request"}
    assert set(out["paths"]) | {"/v1/messages"} <= refused, lines
    (binary,) = [line for line in lines if line["path"] == "/v1/models/binary"]
    assert binary["failure"] == "refused-response" and binary["status"] == 502, lines
    (streamed,) = [line for line in lines if line["path"] == "/v1/chat/completions"]
    assert (streamed["status"], streamed["failure"], streamed["outputTokens"]) == (200, None, 8)
    assert CANARY.encode() not in records
    assert list_leftovers(engine, batch) == []


REFUSED = {
    "metadata": ("169.254.169.254", "a cloud metadata address"),
    "ipv6metadata": ("fd00:ec2::254", "a cloud metadata address"),
    "linklocal": ("169.254.3.4", "a link-local address"),
    "loopback": ("127.0.0.1", "a loopback address"),
    "multicast": ("224.0.0.1", "a multicast address"),
    "unspecified": ("0.0.0.0", "the unspecified address"),
    "private": ("10.213.7.7", "a private or reserved address"),
}


@pytest.mark.parametrize("allow_private", [False, True], ids=["public-only", "private-allowed"])
def test_non_public_upstreams_are_refused_by_the_gateways_own_decision(
    engine: ContainerEngine, tmp_path: Path, allow_private: bool
) -> None:
    # network none: a loopback-only namespace, so no decision can send a packet away.
    options = GatewayOptions.model_construct(
        network="none",
        hosts={f"{name}.test": address for name, (address, _) in REFUSED.items()},
        privateUpstreams=allow_private,
        tokenBudget=None,
    )
    upstreams = {name: f"https://{name}.test" for name in REFUSED}
    batch = f"gateway-refusals-{'private' if allow_private else 'public'}"
    gateway = started(engine, config(engine, upstreams, options), tmp_path, batch)
    try:
        results = {m.name: gateway.probe(m) for m in gateway.models}
    finally:
        gateway.stop()
    for name, (address, why) in REFUSED.items():
        status, _, records = results[name]
        (record,) = records
        if allow_private and name == "private":
            # Let through, and then no route: the namespace has only loopback.
            assert record.failure == "unreachable", record
            continue
        assert record.failure == "refused-upstream", (name, record)
        assert address in (record.message or "") and why in (record.message or ""), record
        assert status == 502
    assert list_leftovers(engine, batch) == []


def _signal_gateway(client: docker.DockerClient, container_id: str, signum: int) -> None:
    """Send *signum* to every process of the gateway's container (host pids, by id)."""
    listing = client.api.top(container_id, ps_args="-o pid")
    for (pid,) in listing["Processes"]:
        # Killing the container's first process ends the others with its namespace: one
        # listed may be gone by its turn.
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signum)


def test_a_gateway_frozen_or_killed_inside_its_container_is_found_not_serving(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    """What the schedule asks before it judges an attempt the gateway answered nothing for."""
    options = GatewayOptions.model_construct(
        network="none", hosts={}, privateUpstreams=False, tokenBudget=None
    )
    runner_config = config(engine, {"provider": "https://model.test"}, options)
    gateway = started(engine, runner_config, tmp_path, "gateway-health", alive_timeout_s=5)
    client = docker.DockerClient(base_url="unix:///var/run/docker.sock")
    try:
        assert gateway.container_id is not None
        assert gateway.problem(probe=True) is None
        _signal_gateway(client, gateway.container_id, signal.SIGSTOP)
        try:
            # Its container still runs: only asking it shows it no longer serves.
            assert gateway.problem() is None
            frozen = gateway.problem(probe=True)
            assert frozen is not None and "provider gave no answer within 5 s" in frozen, frozen
        finally:
            _signal_gateway(client, gateway.container_id, signal.SIGCONT)
        assert gateway.problem(probe=True) is None
        _signal_gateway(client, gateway.container_id, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while (killed := gateway.problem()) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert killed is not None and killed.startswith("its container is exited"), killed
        assert gateway.problem(probe=True) is not None
    finally:
        client.close()
        gateway.stop()
    assert list_leftovers(engine, "gateway-health") == []
