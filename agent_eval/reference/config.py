"""Runner configs for the built-in reference runners, from the images built here.

The reference runners prove the harness end to end without a model; their
receipts are self-test and never qualify. Their configs pin the locally
built images by image id, so they are written after ``agent-eval images
build`` rather than kept in the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_eval.engine import ContainerEngine, local_socket_path
from agent_eval.errors import ConfigError
from agent_eval.evidence_io import write_model_atomic
from agent_eval.images.build import REFERENCE_RUNNER_TAG, VERIFIER_TAG
from agent_eval.models import ModelIdentity, RunnerConfig, RunnerIdentity
from agent_eval.reference.runner import MODEL, NAMES, identity

__all__ = ["reference_config", "write_reference_config"]


def reference_config(
    engine: ContainerEngine,
    mode: str,
    *,
    runtime_path: str,
    submission_timeout_ms: int = 120_000,
    batch_timeout_ms: int = 3_600_000,
) -> RunnerConfig:
    """A runner config for reference runner *mode*, pinned to the local images.

    Raises:
        ConfigError: unknown mode, or the images are not built.
    """
    if mode.split(":", 1)[0] not in NAMES:
        raise ConfigError(f"unknown reference runner {mode!r}; one of {', '.join(NAMES)}")
    images = {}
    for field, tag in (("runnerImage", REFERENCE_RUNNER_TAG), ("verifierImage", VERIFIER_TAG)):
        image_id = engine.image_id(tag)
        if image_id is None:
            raise ConfigError(f"{field}: {tag} is not built; run 'agent-eval images build'")
        images[field] = image_id
    return RunnerConfig(
        schemaVersion=1,
        executable="/usr/bin/python3",
        args=["-B", "/opt/agent-eval/reference_runner.py", mode],
        envAllowlist=[],
        expectedRunner=RunnerIdentity.model_validate(identity(mode)),
        expectedModel=ModelIdentity.model_validate(MODEL),
        submissionTimeoutMs=submission_timeout_ms,
        batchTimeoutMs=batch_timeout_ms,
        runtimePath=runtime_path,
        runnerImage=images["runnerImage"],
        verifierImage=images["verifierImage"],
        concurrency=None,
        network="none",
    )


def write_reference_config(engine: ContainerEngine, mode: str, output: Path) -> RunnerConfig:
    """Write the reference config for *mode* to *output* atomically."""
    config = reference_config(engine, mode, runtime_path=local_socket_path(None, os.environ))
    write_model_atomic(output, config)
    return config
