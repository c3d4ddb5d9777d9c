"""Runner configs for the built-in reference runners, from the images built here.

The reference runners prove the harness end to end without a model; their
receipts are self-test and never qualify. Their configs pin this checkout's
images by image id (found by their recipe digests, so another checkout's
build never changes them), so they are written after ``agent-eval images
build`` rather than kept in the repository.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_eval.engine import ContainerEngine, local_socket_path
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.evidence_io import write_model_atomic
from agent_eval.images.build import image_for_checkout
from agent_eval.models import ModelIdentity, RunnerConfig, RunnerIdentity
from agent_eval.reference.runner import MISBEHAVIOURS, MODEL, NAMES, identity

__all__ = ["reference_config", "write_reference_config"]


def reference_config(
    engine: ContainerEngine,
    mode: str,
    *,
    project_root: Path,
    runtime_path: str,
    submission_timeout_ms: int = 120_000,
    batch_timeout_ms: int = 3_600_000,
) -> RunnerConfig:
    """A runner config for reference runner *mode*, pinned to the checkout's images.

    Raises:
        ConfigError: unknown mode, or the images are not built.
    """
    runner, _, how = mode.partition(":")
    if runner not in NAMES or (runner == "misbehave") != bool(how):
        plain = ", ".join(n for n in NAMES if n != "misbehave")
        raise ConfigError(f"unknown reference runner {mode!r}; one of {plain}, or misbehave:<how>")
    if runner == "misbehave" and how not in MISBEHAVIOURS:
        raise ConfigError(
            f"unknown misbehaviour {how!r} in {mode!r}; one of {', '.join(MISBEHAVIOURS)}"
        )
    images = {}
    for field, name in (("runnerImage", "reference-runner"), ("verifierImage", "verifier")):
        try:
            images[field] = image_for_checkout(engine, project_root, name)
        except InfrastructureError as exc:
            raise ConfigError(f"{field}: {exc}") from None
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
    )


def write_reference_config(
    engine: ContainerEngine, mode: str, output: Path, *, project_root: Path
) -> RunnerConfig:
    """Write the reference config for *mode* (the images of *project_root*) to *output*."""
    config = reference_config(
        engine, mode, project_root=project_root, runtime_path=local_socket_path(None, os.environ)
    )
    write_model_atomic(output, config)
    return config
