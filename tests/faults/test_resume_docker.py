"""A batch killed mid-way is resumed: the runs it finished are reused, the others run, and the
checker decides on the chain as on one whole batch.

The oracle runner on the real engine: eval-agent is SIGKILLed once about 9
of its 18 runs are recorded (runs in flight die with it, unrecorded). The
resumed batch reaps it (its receipt becomes ``abandoned``, its containers
go), names it as predecessor by batch id and receipt digest, runs only the
runs without a valid final verdict, and leaves the predecessor's evidence
where it is. check-agent-eval on the resumed batch rejects it only as a
self-test, as it does a whole oracle batch.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from agent_eval.digests import file_sha256
from agent_eval.engine import ContainerEngine
from agent_eval.engine.policy import LABEL_BATCH
from agent_eval.models import Receipt
from tests.batches import check, eval_agent_process, receipt_of
from tests.faults.engines import containers_of
from tests.faults.test_faults_docker import Batch, slow_oracle

pytestmark = pytest.mark.docker


def test_a_batch_killed_after_nine_runs_and_resumed_decides_as_one_batch(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    batch = Batch(tmp_path, engine, args=slow_oracle(1))
    batch.when(lambda: batch.runs_recorded() >= 9, timeout_s=900)
    batch.process.send_signal(signal.SIGKILL)
    batch.process.communicate(timeout=60)
    killed = batch.run_dir
    finished = [r.runId for r in batch.receipt().runs]
    assert batch.receipt().status == "running" and 9 <= len(finished) < 18

    done = eval_agent_process(batch.project, batch.config, None, "--resume", str(killed))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"reaped batch {killed.name}: marked its receipt abandoned" in done.stderr

    resumed_path = receipt_of(batch.project, json.loads(done.stdout))
    resumed = Receipt.model_validate_json(resumed_path.read_bytes())
    before = Receipt.model_validate_json((killed / "receipt.json").read_bytes())
    assert before.status == "abandoned"
    assert resumed.predecessor is not None
    assert resumed.predecessor.batchId == killed.name
    assert resumed.predecessor.receiptDigest == file_sha256(killed / "receipt.json")
    assert resumed.predecessor.reusedRuns == sorted(finished)
    ran = [r.runId for r in resumed.runs]
    assert sorted(ran + finished) == sorted(before.suite.run_ids() if before.suite else [])
    assert len(ran) + len(finished) == 18 and not set(ran) & set(finished)
    assert all(r.finalSuccess for r in resumed.runs)

    code, decision = check(resumed_path)
    assert code == 1 and [r.split(":")[0] for r in decision["reasons"]] == ["not-self-test"], (
        decision
    )
    assert [(c["batchId"], len(c["runs"])) for c in decision["chain"]] == [
        (killed.name, len(finished)),
        (resumed.batchId, len(ran)),
    ]
    for batch_id in (killed.name, resumed.batchId):
        assert containers_of(batch.socket, f"{LABEL_BATCH}={batch_id}") == []
