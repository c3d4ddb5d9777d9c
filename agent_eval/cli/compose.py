"""The composition root's choices: which engine the commands connect to, which verifier runs.

Everything below ``cli`` is given its engine (or a ``connect`` port, where the
connection depends on a config it reads) and its verifier (or a factory of
them); the real ones are picked here, once. The library is imported inside the
functions, so that ``--help`` costs nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from agent_eval.errors import InfrastructureError

if TYPE_CHECKING:
    from agent_eval.batch.lease import HeldLease
    from agent_eval.cluster.node import NodeParts
    from agent_eval.engine import ContainerEngine
    from agent_eval.models import ArchivesManifest, LockedDistribution
    from agent_eval.project import Project
    from agent_eval.verification.protocol import Verifier

__all__ = ["cluster_node_parts", "local_engine", "recorded_verifier"]


@contextlib.contextmanager
def local_engine(runtime_path: str | None = None) -> Iterator[ContainerEngine]:
    """Connect to the local engine (see ``connect_local_engine``) and close it on exit.

    Raises:
        EngineUnavailableError: No local engine answers.
    """
    from agent_eval.engine.docker_engine import connect_local_engine

    engine = connect_local_engine(runtime_path)
    try:
        yield engine
    finally:
        engine.close()


@contextlib.contextmanager
def recorded_verifier(
    project: Project, archives: ArchivesManifest, run_dir: Path
) -> Iterator[tuple[Verifier, list[LockedDistribution], str]]:
    """Re-verification's verifier: the recorded image on the local engine, connected only now
    (an engine that does not answer is a reason of the check, not a crash)."""
    from agent_eval.verdict.reverify import reverify_workers
    from agent_eval.verification.container.verifier import evidence_verifiers

    with (
        local_engine() as engine,
        _reverify_lease(project, engine) as lease,
        evidence_verifiers(
            engine, project, archives, run_dir, slots=reverify_workers(), batch_id=lease.batch_id
        ) as opened,
    ):
        yield opened


@contextlib.contextmanager
def _reverify_lease(project: Project, engine: ContainerEngine) -> Iterator[HeldLease]:
    """A lease for the re-verification's containers, so that the reaper removes them after a
    kill; one that cannot be written is the check's reason, never a traceback."""
    from agent_eval.batch.lease import verification_lease

    stack = contextlib.ExitStack()
    try:
        held = stack.enter_context(verification_lease(project.evidence, engine, kind="reverify"))
    except OSError as exc:
        raise InfrastructureError(
            f"cannot hold a lease for the re-verification in {project.evidence}: "
            f"{exc.strerror or exc}"
        ) from None
    with stack:
        yield held


def cluster_node_parts() -> NodeParts:
    """What each node of a cluster composes its side of a batch from: its own local engine
    and the container verifier (module-level functions, so that they travel to the node by
    name)."""
    from agent_eval.cluster.node import NodeParts
    from agent_eval.engine.docker_engine import connect_local_engine
    from agent_eval.verification.container.verifier import batch_verifier_factory

    return NodeParts(connect=connect_local_engine, verifiers=batch_verifier_factory)
