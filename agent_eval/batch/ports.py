"""The batch's ports: what the schedule is given rather than constructs.

* :class:`RunnerPort` runs one attempt of the agent (the container-backed one
  is :class:`agent_eval.batch.runner_container.ContainerRunner`; tests pass
  in-memory ones);
* :class:`GatewayPort` and :class:`GatewayRoute` are the batch's model gateway
  and one attempt's way through it;
* :class:`RunExecutor` is where whole scheduled runs execute (this machine's
  threads, or a cluster's nodes through :class:`RemoteRuns`).

Verification comes through :class:`agent_eval.verification.protocol.Verifier`,
the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from agent_eval.batch.progress import ProgressEvent
from agent_eval.models import (
    ArchiveEntry,
    Receipt,
    RunnerConfig,
    RunnerRequest,
    RunnerResources,
    RunRecord,
)
from agent_eval.project import Project

if TYPE_CHECKING:
    from agent_eval.batch.schedule import ExecutorFactory

__all__ = [
    "GatewayPort",
    "GatewayRoute",
    "RemoteContext",
    "RemoteRuns",
    "RunExecutor",
    "RunnerOutcome",
    "RunnerPort",
]


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
    engine_lost: bool = False
    """The engine could not be reached at some point while the runner ran (it may have
    restarted): what it collected of the runner's output may be incomplete."""


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

    def problem(self, *, probe: bool = False) -> str | None:
        """Why the gateway is not serving, or None while it runs.

        *probe*: also ask it for an answer (its own, never the upstream's), not
        only whether its container runs.
        """
        ...

    def accepted_models(self) -> dict[str, frozenset[str]]:
        """The served model names each upstream may report."""
        ...


class RunExecutor(Protocol):
    """Where whole scheduled runs execute: this machine's threads, or the nodes of a cluster.

    An executor runs a run (its attempts, collection, verification, judging and
    the repair) and gives back its record, the attempt directories' files
    already in the batch's evidence; it decides nothing about the batch.
    """

    def slots(self) -> int:
        """How many runs it can hold at once now (0: it can take no more)."""
        ...

    def submit(self, run_id: str) -> Future[RunRecord]:
        """Start one run; its future never raises for what happened in the run."""
        ...

    def rule_stop(self) -> str | None:
        """Why a rule stops the batch after the attempt that broke it, if one does."""
        ...

    def stop_everything(self, reason: str) -> list[str]:
        """Stop every attempt in flight; what could not be stopped, as reasons."""
        ...

    def unfinished(self, run_id: str, reason: str) -> RunRecord:
        """The record of a run the batch stopped before it came back."""
        ...

    def shutdown(self, *, wait: bool) -> None:
        """Take no more runs; with *wait*, wait for those in flight."""
        ...


@dataclass(frozen=True)
class RemoteContext:
    """What a cluster needs to run a batch's runs on its nodes, once the driver's
    preflight, archives and consumer are done."""

    project: Project
    config: RunnerConfig
    environment: dict[str, str]
    """The allowlisted variables every runner container gets."""
    runner_image_id: str
    verifier_image_id: str
    gateway_image_id: str | None
    """The gateway image's id when the runner has models (each node starts a gateway)."""
    archives_dir: Path
    archives: list[ArchiveEntry]
    archives_digest: str
    lock_digest: str
    """sha256 of the driver's consumer-lock.json: every node's must be the same."""
    catalog_digest: str
    receipt: Receipt
    """The receipt as opened."""
    notice: Callable[[str], None]
    progress: Callable[[ProgressEvent], None]


class RemoteRuns(Protocol):
    """A cluster a batch's runs execute on instead of this machine."""

    def connect(self, batch_id: str, notice: Callable[[str], None]) -> None:
        """Join the cluster and find its nodes, before the batch packs anything.

        Raises:
            AgentEvalError: The cluster cannot be joined, or has no node for runs.
        """
        ...

    def prepare(self, context: RemoteContext) -> ExecutorFactory:
        """Prepare every node (checked against the driver's identities) before the first run.

        Raises:
            AgentEvalError: No node could be prepared, or one was found wrong.
        """
        ...

    def close(self) -> list[str]:
        """Remove what the nodes made for the batch; what could not be done, as reasons."""
        ...
