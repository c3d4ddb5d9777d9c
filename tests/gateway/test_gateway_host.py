"""The gateway's host side keeps the model credential out of everything the batch writes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_eval.engine import ImageIdentity
from agent_eval.engine.fake import FakeRuntime
from agent_eval.gateway.host import BatchGateway, unmeasured
from agent_eval.models import GatewayRecord, RunnerConfig
from tests.models.test_runner_config import config


def test_every_model_credential_is_redacted_by_the_name_of_its_variable(tmp_path: Path) -> None:
    runner = RunnerConfig.model_validate(config())
    image = ImageIdentity(reference="gateway", image_id="sha256:" + "e" * 64, repo_digests=())
    gateway = BatchGateway(
        FakeRuntime(),
        runner,
        image,
        work_dir=tmp_path,
        batch_id="b",
        environ={"ANTHROPIC_API_KEY": "sk-real-credential-value"},
    )
    assert gateway.credential_redactions() == {"sk-real-credential-value": "ANTHROPIC_API_KEY"}


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
