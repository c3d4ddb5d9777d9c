"""The composition root connects to the engine only when asked, and what it gives a cluster's
nodes travels to them by name.

Invariants: a local engine that is not there is an ``EngineUnavailableError``
naming the socket, raised when the connection is asked for (never at import);
the parts each node is composed from pickle, as Ray sends an actor's
arguments, to references of the module-level functions they are (nothing is
captured by value) and come back as those very functions.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from agent_eval.cli.compose import _reverify_lease, cluster_node_parts, local_engine
from agent_eval.engine.docker_engine import connect_local_engine
from agent_eval.engine.fake import FakeRuntime
from agent_eval.errors import EngineUnavailableError, InfrastructureError
from agent_eval.evidence_io import read_model
from agent_eval.models import Lease
from agent_eval.project import Project
from agent_eval.verification.container.verifier import batch_verifier_factory


def test_a_local_engine_that_is_not_there_is_named_when_it_is_asked_for(tmp_path: Path) -> None:
    missing = tmp_path / "engine.sock"
    opened = local_engine(str(missing))
    with pytest.raises(EngineUnavailableError, match=f"no engine socket at {missing}"), opened:
        pass


def test_the_parts_of_a_node_travel_by_name_and_arrive_as_the_same_functions() -> None:
    parts = cluster_node_parts()
    sent = pickle.dumps(parts)
    assert len(sent) < 1024
    arrived = pickle.loads(sent)
    assert arrived.connect is connect_local_engine
    assert arrived.verifiers is batch_verifier_factory


def _project(tmp_path: Path, evidence: Path) -> Project:
    return Project(
        root=tmp_path,
        packages=tmp_path / "packages",
        tasks=tmp_path / "tasks",
        graders=tmp_path / "graders",
        fixtures=tmp_path / "fixtures",
        evidence=evidence,
    )


def test_a_reverification_holds_a_lease_its_containers_carry_and_gives_it_up(
    tmp_path: Path,
) -> None:
    engine = FakeRuntime()
    evidence = tmp_path / "evidence"
    with _reverify_lease(_project(tmp_path, evidence), engine) as lease:  # type: ignore[arg-type]
        assert lease.batch_id.startswith("reverify-") and engine.lease_token == lease.token
        written = read_model(evidence / lease.batch_id / "lease.json", Lease, what="lease")
        assert written.kind == "reverify"
    assert list(evidence.iterdir()) == []


def test_a_reverification_lease_that_cannot_be_written_is_an_infrastructure_error(
    tmp_path: Path,
) -> None:
    evidence = tmp_path / "evidence"
    evidence.write_text("a file where the evidence directory should be")
    with (
        pytest.raises(InfrastructureError, match="cannot hold a lease for the re-verification"),
        _reverify_lease(_project(tmp_path, evidence), FakeRuntime()),  # type: ignore[arg-type]
    ):
        pass
