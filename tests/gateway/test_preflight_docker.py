"""A batch that cannot reach its model does not run 18 attempts to find out.

eval-agent asks each upstream once through the gateway before the first run: a wrong key,
an unknown model and an unreachable upstream each end the batch as not-run, with the
provider's (or the gateway's) own words on stderr and in the receipt. The same failure
during a run (the provider starts refusing the key) is an infrastructure failure of kind
provider, with runner.log saying what the CLI saw, never a refusal by the agent.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import docker
import pytest

from agent_eval.consumer.archives import PreparedConsumer
from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.images.build import build_runner_image, image_for_checkout
from agent_eval.layout import SOLUTION_MOUNT
from agent_eval.models import ModelIdentity, Receipt
from tests.agent_scripted_model import (
    AGENTS_DATA,
    PORT,
    ScriptedAgent,
    engine,
    network,
    prepared_consumer,
    run_one,
    solutions,
    start_provider,
)
from tests.batches import BIN, project_copy, write_config
from tests.paths import DATA, REPO

pytestmark = pytest.mark.docker

__all__ = ["engine", "network"]

MODEL = "fake-model-1"
KEY = "sk-canary-preflight-0123456789abcdef"


def unused_address(client: docker.DockerClient, network: str) -> str:
    """The test network's last address, which no container holds: a connection to it
    stays on the network's bridge (it is never routed anywhere else) and fails there."""
    subnet = client.networks.get(network).attrs["IPAM"]["Config"][0]["Subnet"]
    return str(ipaddress.ip_network(subnet)[-2])


def batch(
    engine: ContainerEngine,
    client: docker.DockerClient,
    network: str,
    tmp_path: Path,
    *,
    key: str = KEY,
    served: str = MODEL,
    address: str | None = None,
) -> tuple[int, dict[str, Any], str]:
    gateway_image = image_for_checkout(engine, REPO, "gateway")
    if address == "unused":
        address = unused_address(client, network)
    provider = start_provider(
        client, network, gateway_image, DATA / "gateway" / "fake_provider.py",
        [str(PORT), hashlib.sha256(KEY.encode()).hexdigest(), MODEL, "/log/requests.jsonl"],
        tmp_path / "provider",
    )  # fmt: skip
    try:
        project = project_copy(tmp_path)
        config = write_config(
            engine,
            tmp_path / "runner.json",
            "oracle",
            models=[
                {
                    "name": "fake",
                    "upstream": f"http://model.test:{PORT}",
                    "credentialEnv": "FAKE_PROVIDER_KEY",
                    "credentialHeader": "x-api-key",
                    "servedModels": [served],
                }
            ],
            gateway={
                "network": network,
                "hosts": {"model.test": address or provider.address},
                "privateUpstreams": True,
            },
            gatewayImage=gateway_image,
        )
        done = subprocess.run(
            [str(BIN / "eval-agent"), "--runner-config", str(config), "--project", str(project)],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "FAKE_PROVIDER_KEY": key},
            check=False,
        )
    finally:
        provider.stop()
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            {"key": "sk-wrong-key-0000000000000000"},
            "authentication, status 401): invalid x-api-key",
        ),
        ({"served": "no-such-model"}, "unknown-model, status 404): model: no-such-model"),
        ({"address": "unused"}, "(unreachable, status 502)"),
    ],
    ids=["wrong-key", "unknown-model", "unreachable"],
)
def test_a_batch_whose_upstream_fails_its_preflight_is_not_run_with_the_providers_words(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    tmp_path: Path,
    change: dict[str, str],
    said: str,
) -> None:
    code, line, stderr = batch(engine, docker_client, network, tmp_path, **change)
    assert (code, line["status"]) == (2, "not-run"), stderr
    receipt = Receipt.model_validate_json(Path(line["receipt"]).read_bytes())
    (reason,) = receipt.reasons
    assert reason.startswith("gateway: fake (http://model.test:8765) failed its preflight")
    assert said in reason, reason
    assert f"eval-agent: not-run: {reason}" in stderr
    assert KEY not in stderr and KEY not in json.dumps(receipt.model_dump(mode="json"))
    assert list_leftovers(engine, receipt.batchId) == []


def test_a_provider_refusing_the_key_during_a_run_is_the_infrastructures_failure(
    engine: ContainerEngine,
    docker_client: docker.DockerClient,
    network: str,
    tmp_path: Path,
) -> None:
    consumer: PreparedConsumer = prepared_consumer(engine, tmp_path / "consumer")
    known = solutions()
    script = {
        "port": PORT, "log": "/log/requests.jsonl", "marker": "/log/attempt",
        "file": f"{SOLUTION_MOUNT}/solution.py", "first": known["correct"],
        "repair": known["correct"],
    }  # fmt: skip
    agent = ScriptedAgent(
        name="claude-code",
        image=build_runner_image(engine, REPO, "claude-code"),
        adapter="agent_eval.adapters.claude_code",
        model=ModelIdentity(id="claude-scripted-1", settings={"max_turns": 4}),
        version="2.1.197",
        server=AGENTS_DATA / "claude-code" / "model_server.py",
        server_args=("/srv/script.json",),
        credential_env="ANTHROPIC_API_KEY",
        credential_header="x-api-key",
        served="claude-scripted-1",
        files={"script.json": json.dumps(script).encode()},
    )
    # The CLI keeps asking a provider that refuses its key until its time is up: a short
    # limit is enough for the gateway to have recorded the refusal.
    result = run_one(
        engine, docker_client, network, consumer, agent, "unauthorized", tmp_path / "run",
        timeout_s=30.0,
    )  # fmt: skip
    (run,) = result.receipt.runs
    (attempt,) = run.attempts
    assert (attempt.failureCategory, attempt.infrastructureKind) == ("infrastructure", "provider")
    assert attempt.gateway is not None and "authentication" in attempt.gateway.failures
    assert result.receipt.status == "infrastructure-failure"
    log = (result.batch_dir / "runs" / "forms-1" / "attempt-1" / "runner.log").read_text()
    assert "401" in log or "invalid x-api-key" in log, log[-2000:]
    assert result.canary not in log
