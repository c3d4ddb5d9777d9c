"""The driver's side of a cluster run: what a node's failure is recorded as.

A fake Ray stands in for the cluster (the real one is the ``docker`` tests'):
only the future a node's ``run`` call hands back matters here.
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent_eval.batch.schedule import Schedule
from agent_eval.cluster.ray_cluster import _Node, _RayExecutor
from tests.batch.test_schedule import plan


class _Died(Exception):
    pass


class _Call:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def future(self) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_exception(self.error)
        return done


class _Actor:
    def __init__(self, error: BaseException) -> None:
        self.run = SimpleNamespace(remote=lambda run_id, remaining: _Call(error))


def executor(tmp_path: Path, error: BaseException) -> tuple[_RayExecutor, Schedule]:
    batch_plan = plan(tmp_path)
    schedule = Schedule(
        batch_plan, clock=lambda: batch_plan.receipt.createdAt, monotonic=lambda: 0.0,
        deadline=3600.0,
    )  # fmt: skip
    ray = SimpleNamespace(exceptions=SimpleNamespace(RayActorError=_Died, NodeDiedError=_Died))
    nodes = [_Node(actor=_Actor(error), name="worker-1", slots=1)]
    context: Any = SimpleNamespace(progress=lambda event: None)
    return _RayExecutor(ray, nodes, schedule, context, head_lost=lambda: None), schedule


@pytest.mark.parametrize("stopped", [False, True])
def test_a_nodes_failure_after_the_stop_is_the_stops_and_before_it_the_nodes(
    tmp_path: Path, stopped: bool
) -> None:
    # What a node's run raises when the stop removed its container under it.
    runs, schedule = executor(tmp_path, RuntimeError("NotFound: no such container"))
    if stopped:
        schedule.stop_now("interrupted by the operator (Ctrl-C)")

    record = runs.submit("forms-1").result(timeout=30)

    (attempt,) = record.attempts
    assert attempt.node == "worker-1" and attempt.infrastructureStatus == "failed"
    message = attempt.diagnostics[0].message
    if stopped:
        assert message == (
            "the batch stopped during this attempt: interrupted by the operator (Ctrl-C)"
        )
    else:
        assert message.startswith("node worker-1 failed: RuntimeError")
    runs.shutdown(wait=True)
