"""The batch's gateway from the host: its container, its routes, its records, its preflight.

One gateway container per batch with models. Its work directory (in the
batch's ``.work``) holds four directories, each mounted into it: ``config``
(read-only: gateway.json), ``routes`` (read-only: one file per open attempt,
named by the digest of the attempt's token), ``records`` (its per-attempt
JSON lines) and ``sockets`` (one Unix socket per upstream). Runner containers
get ``sockets`` only, read-only, at ``/gateway``, and the attempt's token.

The real credentials are passed to the gateway's environment alone; no file
the harness writes holds one.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from agent_eval.engine import (
    RUNNER_USER,
    ContainerRuntime,
    ContainerSpec,
    ImageIdentity,
    Mount,
    ResourceLimits,
)
from agent_eval.engine.pressure import CrowdedDeadline
from agent_eval.errors import ConfigError, EvidenceError, InfrastructureError
from agent_eval.evidence_io import format_validation_error, read_bounded, write_bytes_atomic
from agent_eval.gateway.policy import route_name
from agent_eval.layout import GATEWAY_MODELS_ENV as MODELS_ENV
from agent_eval.layout import GATEWAY_MOUNT as GATEWAY_DIR_IN_RUNNER
from agent_eval.layout import GATEWAY_TOKEN_ENV as TOKEN_ENV
from agent_eval.models import (
    GatewayRecord,
    GatewaySettings,
    GatewayUse,
    ModelUpstream,
    RecordedUpstream,
    RunnerConfig,
)
from agent_eval.models.gateway import PROVIDER_FAILURES

__all__ = [
    "GATEWAY_DIR_IN_RUNNER",
    "MODELS_ENV",
    "TOKEN_ENV",
    "BatchGateway",
    "Route",
    "gateway_settings",
    "parse_records",
    "recorded_upstreams",
    "summarise",
    "unmeasured",
]

_FIRST_PORT = 18001
_READY_TIMEOUT_S = 300.0
"""How long the gateway may take to open its sockets, in time the machine let it run
(:class:`~agent_eval.engine.pressure.CrowdedDeadline`). A gateway that exits is noticed at
once (its container's state is asked every tenth of a second); only one that hangs waits
this long, and on a crowded machine mitmproxy's start alone took over a minute."""
_READY_BACKSTOP_S = 1800.0
"""The wall-clock backstop of the gateway's start, whatever the machine's load."""
_PROBE_TIMEOUT_S = 60.0
_ALIVE_TIMEOUT_S = 30.0
"""How long a health check waits for the gateway's own answer (it never goes upstream);
generous, since a crowded machine delays it."""
MAX_RECORD_BYTES = 4 * 1024 * 1024
"""An attempt's gateway.jsonl is refused beyond this (about ten thousand requests)."""
_UID, _GID = (int(part) for part in RUNNER_USER.split(":"))


@dataclass(frozen=True)
class Route:
    """One attempt's way through the gateway."""

    token: str
    """The placeholder credential the runner sends."""
    record: Path
    """The host path of the attempt's records."""
    route_file: Path
    """The route's file (its removal revokes the token)."""

    @property
    def environment(self) -> dict[str, str]:
        """What the runner container gets besides the config's allowlist."""
        return {TOKEN_ENV: self.token}


def _writable_by_gateway(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.chown(path, _UID, _GID)
        path.chmod(0o755)
    except PermissionError:  # not root: the container's user still needs to write here
        path.chmod(0o777)


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket; a long path is reached through its directory's descriptor."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("gateway", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        directory = os.open(self._path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            target = str(self._path)
            if len(target.encode()) > 100:
                target = f"/proc/self/fd/{directory}/{self._path.name}"
            sock.connect(target)
        except OSError:
            sock.close()
            raise
        finally:
            os.close(directory)
        self.sock = sock


class BatchGateway:
    """The gateway container of one batch."""

    def __init__(
        self,
        engine: ContainerRuntime,
        config: RunnerConfig,
        image: ImageIdentity,
        *,
        work_dir: Path,
        batch_id: str,
        environ: Mapping[str, str],
        monotonic: Callable[[], float] = time.monotonic,
        alive_timeout_s: float = _ALIVE_TIMEOUT_S,
    ) -> None:
        """Prepare (not start) the gateway of *config*'s models in *work_dir*.

        Raises:
            ConfigError: A credential variable named in models[] is not set.
        """
        missing = [m.credentialEnv for m in config.models if not environ.get(m.credentialEnv)]
        if missing:
            raise ConfigError(
                f"models: {', '.join(sorted(set(missing)))} not set in the environment "
                "(the gateway needs each credential named in models[].credentialEnv)"
            )
        self.engine, self.config, self.image = engine, config, image
        self.batch_id, self.work_dir = batch_id, work_dir
        self._credentials = {m.credentialEnv: environ[m.credentialEnv] for m in config.models}
        self._monotonic = monotonic
        self._alive_timeout_s = alive_timeout_s
        self.container_id: str | None = None
        self.config_dir = work_dir / "config"
        self.routes = work_dir / "routes"
        self.records = work_dir / "records"
        self.sockets = work_dir / "sockets"

    @property
    def models(self) -> list[ModelUpstream]:
        return list(self.config.models)

    def settings(self) -> GatewaySettings:
        """What archives.json records of this gateway (never a credential)."""
        return gateway_settings(self.config, self.image.image_id)

    def _gateway_json(self) -> dict[str, object]:
        return {
            "schemaVersion": 1,
            "upstreams": [
                {
                    "name": m.name,
                    "upstream": m.upstream,
                    "listenPort": _FIRST_PORT + index,
                    "credentialEnv": m.credentialEnv,
                    "credentialHeader": m.credentialHeader,
                    "api": m.api,
                    "servedModels": list(m.servedModels),
                }
                for index, m in enumerate(self.config.models)
            ],
            "privateUpstreams": self.config.gateway.privateUpstreams,
            "tokenBudget": self.config.gateway.tokenBudget,
            "routes": "/gateway/routes",
            "records": "/gateway/records",
            "sockets": "/gateway/sockets",
        }

    def start(self) -> None:
        """Start the gateway and wait until every upstream's socket answers.

        Raises:
            InfrastructureError: It could not start, or exited, or its sockets never came.
        """
        for directory in (self.config_dir, self.routes):
            directory.mkdir(parents=True, exist_ok=True)
        for directory in (self.records, self.sockets):
            _writable_by_gateway(directory)
        text = json.dumps(self._gateway_json(), indent=2, sort_keys=True) + "\n"
        write_bytes_atomic(self.config_dir / "gateway.json", text.encode("utf-8"))
        (self.config_dir / "gateway.json").chmod(0o644)
        options = self.config.gateway
        spec = ContainerSpec(
            image=self.image.image_id,
            command=(
                "/usr/bin/python3",
                "-B",
                "-m",
                "agent_eval.gateway.serve",
                "/gateway/config/gateway.json",
            ),
            role="gateway",
            batch_id=self.batch_id,
            run_id="gateway",
            mounts=(
                Mount(self.config_dir, "/gateway/config"),
                Mount(self.routes, "/gateway/routes"),
                Mount(self.records, "/gateway/records", read_only=False),
                Mount(self.sockets, "/gateway/sockets", read_only=False),
            ),
            environment={**self._credentials, "PYTHONUNBUFFERED": "1", "HOME": "/tmp"},
            limits=ResourceLimits(pids=256, memory_bytes=1 << 30, tmp_bytes=64 << 20),
            network=options.network,
            hosts=dict(options.hosts),
        )
        self.container_id = self.engine.create(spec)
        self.engine.start(self.container_id)
        # Its own start, not the neighbours' load: time the machine kept it waiting
        # for a CPU is not counted, within a wall backstop.
        deadline = CrowdedDeadline(_READY_TIMEOUT_S, _READY_BACKSTOP_S, self._monotonic)
        while not deadline.expired():
            if (self.sockets / "ready").exists():
                return
            problem = self.problem()
            if problem is not None:
                raise InfrastructureError(f"the model gateway did not start: {problem}")
            time.sleep(0.1)
        raise InfrastructureError(
            f"the model gateway did not open its sockets: {deadline.describe()}{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        if self.container_id is None:
            return ""
        try:
            output = self.engine.logs(self.container_id, 4096)
        except InfrastructureError:
            return ""
        text = (output.stdout + output.stderr).decode("utf-8", errors="replace").strip()
        return f"; it said: {text[-1500:]}" if text else ""

    def problem(self, *, probe: bool = False) -> str | None:
        """Why the gateway is not serving, or None while it serves.

        Without *probe* only its container's state is asked; with it, each
        upstream's socket must also answer a request without a token, which the
        gateway refuses itself (403) without going upstream: a gateway whose
        process died or froze inside a running container is caught too.
        """
        if self.container_id is None:
            return "it was never started"
        for item in self.engine.list_containers(self.batch_id):
            if item.container_id == self.container_id:
                if item.state != "running":
                    return f"its container is {item.state}{self._log_tail()}"
                return self._unanswered() if probe else None
        return "its container is gone"

    def _unanswered(self) -> str | None:
        """The first upstream socket that gave no HTTP answer, said plainly; or None."""
        for model in self.config.models:
            socket_path = self.sockets / f"{model.name}.sock"
            connection = _UnixHTTPConnection(socket_path, self._alive_timeout_s)
            try:
                connection.request("GET", "/agent-eval-health")
                connection.getresponse().read(4096)
            except (OSError, http.client.HTTPException) as exc:
                return (
                    f"its socket for {model.name} gave no answer within "
                    f"{self._alive_timeout_s:g} s ({type(exc).__name__}: {exc})"
                )
            finally:
                connection.close()
        return None

    def open_route(self, run_id: str, attempt: int) -> Route:
        """A fresh token for one attempt, and where its records go."""
        token = "ae-" + secrets.token_urlsafe(24)
        record = self.records / f"{run_id}.attempt-{attempt}.jsonl"
        route_file = self.routes / f"{route_name(token)}.json"
        write_bytes_atomic(route_file, json.dumps({"record": record.name}).encode() + b"\n")
        route_file.chmod(0o644)
        return Route(token, record, route_file)

    def close_route(self, route: Route) -> bytes:
        """Revoke the token and return the attempt's records as the gateway wrote them.

        Raises:
            InfrastructureError: The records are larger than :data:`MAX_RECORD_BYTES`, or are
                not a regular file (a link the gateway left among them).
        """
        route.route_file.unlink(missing_ok=True)
        if not os.path.lexists(route.record):
            return b""
        # The gateway's container writes this directory: a link it left is refused, never
        # followed to a file of the host's.
        try:
            return read_bounded(
                route.record,
                what="the gateway's record",
                max_bytes=MAX_RECORD_BYTES,
                follow_symlinks=False,
            )
        except EvidenceError as exc:
            raise InfrastructureError(str(exc)) from exc

    def probe(self, model: ModelUpstream) -> tuple[int | None, str, list[GatewayRecord]]:
        """One request through the gateway to *model*'s probe path.

        Returns the status (None: no answer), the body's start and the gateway's records.
        """
        route = self.open_route("preflight", 1 + self.config.models.index(model))
        path = model.probePath.replace("{model}", model.servedModels[0])
        connection = _UnixHTTPConnection(self.sockets / f"{model.name}.sock", _PROBE_TIMEOUT_S)
        header = model.credentialHeader
        value = f"Bearer {route.token}" if header.lower() == "authorization" else route.token
        status: int | None = None
        try:
            connection.request(
                "GET", path, headers={header: value, "anthropic-version": "2023-06-01"}
            )
            answer = connection.getresponse()
            status, body = answer.status, answer.read(65536).decode("utf-8", errors="replace")
        except (OSError, http.client.HTTPException) as exc:
            body = f"the gateway did not answer: {exc}"
        finally:
            connection.close()
        return status, body, parse_records(self.close_route(route))

    def preflight(self) -> list[str]:
        """One probe per upstream; every failure as a reason naming the upstream."""
        reasons = []
        for model in self.config.models:
            status, body, records = self.probe(model)
            if status is not None and 200 <= status < 300:
                continue
            failure = next((r for r in records if r.failure), None)
            said = failure.message if failure and failure.message else body.strip()[:300]
            kind = failure.failure if failure else "no answer"
            reasons.append(
                f"gateway: {model.name} ({model.upstream}) failed its preflight "
                f"({kind}, status {status}): {said}"
            )
        return reasons

    def runner_mounts(self) -> tuple[Mount, ...]:
        """The sockets, read-only, for a runner container."""
        return (Mount(self.sockets, GATEWAY_DIR_IN_RUNNER),)

    def credential_redactions(self) -> dict[str, str]:
        """Each model credential's value, by the name of its variable: never written anywhere.

        The runner never gets one, but an upstream that reflects it (or an agent that
        found it) could put it into what the runner prints; the schedule replaces every
        value here by its name in runner.log and transcript.jsonl.
        """
        return {value: name for name, value in self._credentials.items() if value}

    def runner_environment(self) -> dict[str, str]:
        """What every runner container gets (the token comes per attempt)."""
        return {MODELS_ENV: ",".join(m.name for m in self.config.models)}

    def accepted_models(self) -> dict[str, frozenset[str]]:
        """The served model names each upstream may report."""
        return {m.name: frozenset(m.servedModels) for m in self.config.models}

    def stop(self) -> None:
        """Remove the gateway's container (the batch's cleanup would too)."""
        if self.container_id is not None:
            self.engine.remove(self.container_id)
            self.container_id = None


def gateway_settings(config: RunnerConfig, image_id: str) -> GatewaySettings:
    """What archives.json records of *config*'s gateway (never a credential)."""
    options = config.gateway
    return GatewaySettings(
        image=config.gatewayImage or image_id,
        upstreams=recorded_upstreams(config.models),
        network=options.network,
        privateUpstreams=options.privateUpstreams,
        tokenBudget=options.tokenBudget,
        prices={m.name: m.price for m in config.models if m.price is not None},
    )


def recorded_upstreams(models: Sequence[ModelUpstream]) -> list[RecordedUpstream]:
    """What evidence and the registry keep of each upstream: never its credential's name."""
    return [
        RecordedUpstream(
            name=m.name,
            upstream=m.upstream,
            credentialHeader=m.credentialHeader,
            api=m.api,
            servedModels=list(m.servedModels),
        )
        for m in models
    ]


def parse_records(data: bytes) -> list[GatewayRecord]:
    """The records of one attempt's gateway.jsonl.

    Raises:
        InfrastructureError: A line is not a record (the gateway wrote something else).
    """
    records = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(GatewayRecord.model_validate_json(line))
        except ValidationError as exc:
            raise InfrastructureError(
                f"gateway.jsonl line {number} is not a gateway record: "
                f"{format_validation_error(exc)}"
            ) from None
    return records


MODEL_CALL_PATHS = (
    "/messages",
    "/chat/completions",
    "/completions",
    "/responses",
    "/chat",
    ":generateContent",
    ":streamGenerateContent",
    ":rawPredict",
    ":streamRawPredict",
    "/invoke",
    "/invoke-with-response-stream",
    "/converse",
    "/converse-stream",
)
"""Path endings of the calls that make a model answer, of every API kind (Anthropic,
OpenAI and its compatibles, Gemini, Vertex, Bedrock)."""


def unmeasured(records: Sequence[GatewayRecord]) -> str | None:
    """The first model call answered without a model the gateway could read, said plainly.

    An answer the gateway cannot attribute to a model could come from any model (a
    fallback, a cheaper one): it is never passed as if it had been measured.
    """
    for record in records:
        path = record.path.split("?", 1)[0]
        answered = record.status is not None and 200 <= record.status < 300
        if (
            record.method == "POST"
            and answered
            and record.failure is None
            and path.endswith(MODEL_CALL_PATHS)
            and not record.servedModel
        ):
            return (
                f"{record.upstream} answered {path} without naming a model the gateway could "
                "read: an answer it cannot attribute to a reviewed model is never passed"
            )
    return None


def summarise(records: list[GatewayRecord], digest: str) -> GatewayUse:
    """The receipt's summary of an attempt's records."""
    return GatewayUse(
        requests=len(records),
        answered=sum(1 for r in records if r.status is not None and 200 <= r.status < 300),
        servedModels=sorted({r.servedModel for r in records if r.servedModel}),
        inputTokens=sum(r.inputTokens or 0 for r in records),
        outputTokens=sum(r.outputTokens or 0 for r in records),
        failures=sorted({r.failure for r in records if r.failure}),
        recordDigest=digest,
    )


def provider_problem(records: list[GatewayRecord]) -> str | None:
    """The first provider or gateway failure among *records*, as a sentence, if any."""
    for record in records:
        if record.failure in PROVIDER_FAILURES:
            return (
                f"the model provider failed ({record.failure}, status {record.status}) on "
                f"{record.method} {record.path} via {record.upstream}: {record.message or ''}"
            ).rstrip(": ")
    return None
