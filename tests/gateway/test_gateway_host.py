"""The gateway's host side keeps the model credential out of everything the batch writes."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_eval.engine import ImageIdentity
from agent_eval.engine.fake import FakeRuntime
from agent_eval.errors import InfrastructureError
from agent_eval.gateway.host import BatchGateway, unmeasured
from agent_eval.models import GatewayRecord, RunnerConfig
from tests.models.test_runner_config import config


def gateway_in(work_dir: Path) -> BatchGateway:
    runner = RunnerConfig.model_validate(config())
    image = ImageIdentity(reference="gateway", image_id="sha256:" + "e" * 64, repo_digests=())
    return BatchGateway(
        FakeRuntime(),
        runner,
        image,
        work_dir=work_dir,
        batch_id="b",
        environ={"ANTHROPIC_API_KEY": "sk-real-credential-value"},
    )


def test_every_model_credential_is_redacted_by_the_name_of_its_variable(tmp_path: Path) -> None:
    gateway = gateway_in(tmp_path)
    assert gateway.credential_redactions() == {"sk-real-credential-value": "ANTHROPIC_API_KEY"}


def test_an_attempts_records_are_read_as_the_gateway_wrote_them(tmp_path: Path) -> None:
    gateway = gateway_in(tmp_path / "gateway")
    gateway.routes.mkdir(parents=True)
    gateway.records.mkdir()
    route = gateway.open_route("forms-1", 1)
    assert gateway.close_route(route) == b""  # no request was made
    route = gateway.open_route("forms-1", 2)
    route.record.write_bytes(b'{"line": 1}\n')
    assert gateway.close_route(route) == b'{"line": 1}\n'
    assert not route.route_file.exists()


@pytest.mark.parametrize("kind", ["file", "directory", "dangling", "fifo"])
def test_a_record_the_gateway_left_as_a_link_or_a_fifo_is_refused_never_followed(
    tmp_path: Path, kind: str
) -> None:
    """The gateway's container writes the records directory: a link there to a host file
    (a key, say) must not be read into the attempt's evidence."""
    host_secret = tmp_path / "host-secret"
    host_secret.write_text("root's own file\n")
    gateway = gateway_in(tmp_path / "gateway")
    gateway.routes.mkdir(parents=True)
    gateway.records.mkdir()
    route = gateway.open_route("forms-1", 1)
    if kind == "fifo":
        os.mkfifo(route.record)
    else:
        target = {"file": host_secret, "directory": tmp_path, "dangling": tmp_path / "none"}
        route.record.symlink_to(target[kind])
    with pytest.raises(InfrastructureError, match="the gateway's record") as caught:
        gateway.close_route(route)
    assert "root's own file" not in str(caught.value)


@pytest.mark.parametrize(
    "path",
    [
        "/model/anthropic.claude-x/invoke",
        "/model/anthropic.claude-x/converse",
        "/model/m/converse-stream",
        "/model/m/invoke-with-response-stream",
        "/v1/projects/p/locations/l/publishers/anthropic/models/claude:rawPredict",
        "/v1/projects/p/locations/l/publishers/anthropic/models/claude:streamRawPredict",
        "/api/chat",
    ],
)
def test_a_model_call_of_any_api_kind_answered_without_a_model_is_unmeasured(path: str) -> None:
    record = GatewayRecord(
        schemaVersion=1, at=datetime(2026, 12, 5, tzinfo=UTC), upstream="p", method="POST",
        path=path, status=200, requestBytes=2, responseBytes=2, durationMs=1,
        servedModel=None, inputTokens=None, outputTokens=None, failure=None, message=None,
    )  # fmt: skip
    assert unmeasured([record]) is not None
