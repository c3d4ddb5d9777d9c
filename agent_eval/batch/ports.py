"""The batch's ports: what the schedule is given rather than constructs.

* :class:`RunnerPort` runs one attempt of the agent (the container-backed one
  is :class:`agent_eval.batch.runner_container.ContainerRunner`; tests pass
  in-memory ones);
* :class:`GatewayPort` and :class:`GatewayRoute` are the batch's model gateway
  and one attempt's way through it;
* :class:`RunExecutor` is where whole scheduled runs execute (this machine's
  threads, or a cluster's nodes), made by the batch's :class:`Placement`.

Verification comes through :class:`agent_eval.verification.protocol.Verifier`,
the same way."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from agent_eval.batch.progress import Phase, ProgressEvent
from agent_eval.models import (
    ArchiveEntry,
    NodeIdentity,
    Receipt,
    RunnerConfig,
    RunnerRequest,
    RunnerResources,
    RunRecord,
)
from agent_eval.project import Project

if TYPE_CHECKING:
    from agent_eval.batch.schedule import ExecutorFactory
    from agent_eval.batch.station import Site, StationImages
    from agent_eval.consumer.archives import PreparedConsumer
    from agent_eval.gateway.host import BatchGateway

Notice = Callable[[str], None]
"""Hears what the operator should know (a reaped batch, a cluster's message)."""

__all__ = [
    "GatewayPort",
    "GatewayRoute",
    "Notice",
    "Placement",
    "RemoteContext",
    "RunExecutor",
    "RunnerOutcome",
    "RunnerPort",
    "StartPhase",
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
        environment: Mapping[str, str] | None = None,
    ) -> RunnerOutcome:
        """Run the runner with *request* on stdin and *workspace* as its only writable dir.

        Args:
            request: the protocol request, written to the runner's stdin; its
                ``timeBudgetMs`` is the wall-clock limit, enforced from outside
                (the runner is killed).
            workspace: host directory the runner sees as its output directory.
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

    def lost(self) -> str | None:
        """Why it can run and reach nothing more (a cluster whose head is gone), if so."""
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

    def settle(self, runs: Collection[Future[RunRecord]], timeout_s: float) -> bool:
        """Wait at most *timeout_s* for *runs*, cut short, to leave this machine's work
        directory and engine alone (their threads ended); whether they all did."""
        ...


@dataclass(frozen=True)
class RemoteContext:
    """What a placement is told once the receipt is opened: all a cluster needs to run a
    batch's runs on its nodes (the driver's preflight, archives and consumer are done)."""

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
    consumer_cache_entry: str | None
    """The cache entry the driver's consumer came from (its lock's ``cacheEntry``)."""
    catalog_digest: str
    receipt: Receipt
    """The receipt as opened."""
    notice: Callable[[str], None]
    progress: Callable[[ProgressEvent], None]
    nodes: Callable[[list[NodeIdentity]], None] = lambda _nodes: None
    """Hears the nodes the runs will execute on, as each proved itself (the receipt
    records them)."""
    lease_token: str | None = None
    """The token of the driver's lease: every node's containers of the batch carry it too, so
    the driver's reaper can remove them on the nodes' engines."""


StartPhase = Callable[[Phase, str], None]
"""Starts one of the batch's preparing phases (ending the one before), with its words."""


class Placement(Protocol):
    """Where a batch's runs execute: this machine's engine
    (:class:`agent_eval.batch.station.LocalPlacement`), or a cluster's nodes, each of which
    builds a station of its own. The driver calls its steps in this order."""

    def join(self, site: Site, images: StationImages, phase: StartPhase, notice: Notice) -> None:
        """Before the batch packs anything, refuse what can be refused early.

        Raises:
            NotReady: The runs cannot execute there (the reasons say why).
        """
        ...

    def equip(
        self,
        site: Site,
        images: StationImages,
        consumer: PreparedConsumer,
        environment: Mapping[str, str],
        phase: StartPhase,
    ) -> None:
        """Once the driver's consumer is ready, before the receipt is opened.

        Raises:
            NotReady: What runs the runs could not be made.
        """
        ...

    def executor(self, context: RemoteContext, phase: StartPhase) -> ExecutorFactory:
        """Once the receipt is opened: the executor the runs execute on.

        Raises:
            NotReady: No place for the runs could be prepared, or one was found wrong.
        """
        ...

    @property
    def gateway(self) -> BatchGateway | None:
        """The model gateway the driver's schedule watches (a cluster's nodes watch theirs)."""
        ...

    def close(self) -> list[str]:
        """Remove what it made for the batch; what could not be done, as reasons."""
        ...
