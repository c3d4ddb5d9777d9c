"""The runner port: how the schedule runs one attempt of the agent, as an interface it is given.

The schedule never constructs a container itself: the container-backed
runner is :class:`agent_eval.batch.runner_container.ContainerRunner`, and
tests pass in-memory ones. Verification comes through
:class:`agent_eval.verification.protocol.Verifier`, the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from agent_eval.models import RunnerRequest, RunnerResources

__all__ = ["GatewayPort", "GatewayRoute", "RunnerOutcome", "RunnerPort"]


@dataclass(frozen=True)
class RunnerOutcome:
    """What one runner container did, observed from outside."""

    stdout: bytes
    stdout_truncated: bool
    timed_out: bool
    exit_code: int | None
    infrastructure_error: str | None = None
    stderr: bytes = b""
    """The end of the runner's stderr (bounded by the engine), for runner.log."""
    resources: RunnerResources | None = None
    """The container's limits, its sampled peak memory and whether it was OOM-killed."""
    transcript: bytes | None = None
    """What the runner left as its transcript (bounded just past the limit the
    schedule cuts at, ``layout.MAX_TRANSCRIPT_BYTES``), or None."""


class RunnerPort(Protocol):
    """Runs one attempt of the agent under evaluation."""

    def run_attempt(
        self,
        request: RunnerRequest,
        workspace: Path,
        timeout_s: float,
        environment: Mapping[str, str] | None = None,
    ) -> RunnerOutcome:
        """Run the runner with *request* on stdin and *workspace* as its only writable dir.

        Args:
            request: the protocol request, written to the runner's stdin.
            workspace: host directory the runner sees as its output directory.
            timeout_s: wall-clock limit, enforced from outside (the runner is killed).
            environment: this attempt's own variables (its gateway token).

        Returns:
            The outcome; infrastructure problems are reported in it, not raised.
        """
        ...

    def cancel_all(self) -> None:
        """Kill every runner still running (used on interruption)."""
        ...


class GatewayRoute(Protocol):
    """One attempt's way through the model gateway."""

    @property
    def environment(self) -> dict[str, str]:
        """What the attempt's runner container gets (its placeholder token)."""
        ...


R = TypeVar("R", bound=GatewayRoute)


class GatewayPort(Protocol[R]):
    """The batch's model gateway, as the schedule uses it."""

    def open_route(self, run_id: str, attempt: int) -> R:
        """A fresh token for one attempt."""
        ...

    def close_route(self, route: R) -> bytes:
        """Revoke the token; the attempt's records (gateway.jsonl) as written."""
        ...

    def problem(self) -> str | None:
        """Why the gateway is not serving, or None while it runs."""
        ...

    def accepted_models(self) -> dict[str, frozenset[str]]:
        """The served model names each upstream may report."""
        ...
