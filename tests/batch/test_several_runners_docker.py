"""Several runners in one eval-agent command against the real engine.

The oracle and the null reference runners run in one command: each has a batch of
its own that check-agent-eval judges on its own (the oracle rejected only as a
self-test, the null one for its successes too, neither for its evidence), both bound
to the same archives, and the matrix record the command writes names both and ranks
the oracle first.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.models import ArchivesManifest, Matrix, Receipt
from tests.batches import BIN, check, project_copy, write_config

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DECISION_RULES = {"not-self-test", "first-successes", "final-successes", "unsupported-api"}
"""The rules a reference batch of sound evidence can fail: none about its evidence (the
null runner leaves error-recovery's starter, whose seeded import is unsupported)."""


def test_oracle_and_null_in_one_command_each_have_a_batch_and_the_matrix_ranks_oracle_first(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    project = project_copy(tmp_path)
    oracle = write_config(engine, tmp_path / "oracle.json", "oracle")
    null = write_config(engine, tmp_path / "null.json", "null")
    done = subprocess.run(
        [str(BIN / "eval-agent"), "--runner-config", str(oracle), "--runner-config", str(null),
         "--project", str(project), "--progress", "lines"],
        capture_output=True, text=True, timeout=3600, env=dict(os.environ), check=False,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("\n") == 1, done.stdout
    line = json.loads(done.stdout)
    assert line["status"] == "completed"
    first, second = line["batches"]
    assert (first["finalSuccesses"], second["finalSuccesses"]) == (18, 0)

    receipts = [tmp_path / b["receipt"] for b in line["batches"]]
    manifests = []
    for path, rules in zip(
        receipts, ({"not-self-test"}, {"not-self-test", "first-successes"}), strict=True
    ):
        receipt = Receipt.model_validate_json(path.read_bytes())
        assert receipt.status == "completed" and len(receipt.runs) == 18
        code, decision = check(path)
        assert code == 1
        found = {reason.split(":")[0] for reason in decision["reasons"]}
        assert rules <= found <= DECISION_RULES, decision["reasons"]
        assert list_leftovers(engine, receipt.batchId) == []
        manifests.append(
            ArchivesManifest.model_validate_json((path.parent / "archives.json").read_bytes())
        )
    assert manifests[0].archives == manifests[1].archives
    assert not (project / "evidence" / ".work").exists()

    matrix = Matrix.model_validate_json((tmp_path / line["matrix"]).read_bytes())
    assert [row.runner.name if row.runner else None for row in matrix.rows] == [
        manifests[0].runner.name,
        manifests[1].runner.name,
    ]
    assert [row.batchIds for row in matrix.rows] == [
        [receipts[0].parent.name],
        [receipts[1].parent.name],
    ]
    assert matrix.rows[0].final.successes == 18 and matrix.rows[1].final.successes == 0
