"""The gateway's host side keeps the model credential out of everything the batch writes."""

from __future__ import annotations

from pathlib import Path

from agent_eval.engine import ImageIdentity
from agent_eval.engine.fake import FakeRuntime
from agent_eval.gateway.host import BatchGateway
from agent_eval.models import RunnerConfig
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
