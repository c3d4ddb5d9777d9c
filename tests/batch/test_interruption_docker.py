"""A Ctrl-C while attempts verify: acknowledged at once, nothing started after it, and
evidence that verifies as an interrupted batch (incomplete, never tampered with)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.engine.policy import LABEL_BATCH
from agent_eval.models import Receipt
from tests.batches import BIN, check, project_copy, write_config

pytestmark = pytest.mark.docker


IN_FLIGHT_S = 3.0
"""How long an engine request sent just before the signal was handled may take to land."""


def test_a_ctrl_c_while_verifying_is_acknowledged_at_once_and_starts_nothing(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "r.json", "oracle")
    process = subprocess.Popen(
        [str(BIN / "eval-agent"), "--runner-config", str(config), "--project", str(project),
         "--progress", "lines"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[tuple[float, str]] = []
    verifying = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append((time.monotonic(), line))
            if ": verifying" in line and "runs done" in "".join(text for _, text in lines):
                verifying.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert verifying.wait(600), "no attempt verified after a finished run:\n" + "".join(
        text for _, text in lines
    )
    time.sleep(1.0)  # its verifier container is under way: the signal finds it running
    signalled_wall = time.time()
    signalled = time.monotonic()
    process.send_signal(signal.SIGINT)
    process.wait(timeout=300)
    reader.join(10)
    assert process.stdout is not None and process.stderr is not None
    out = process.stdout.read()
    process.stdout.close()
    process.stderr.close()
    acknowledged = [at for at, text in lines if "SIGINT received" in text]
    assert acknowledged and acknowledged[0] - signalled < 1.0, lines[-5:]

    receipt_path = Path(next(iter((project / "evidence").glob("*/receipt.json"))))
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    assert receipt.status == "interrupted"
    cut = [a for r in receipt.runs for a in r.attempts if a.infrastructureKind == "stopped"]
    assert cut and all(a.startedAt.timestamp() < signalled_wall for a in cut)
    # A create or a start a slot had sent before the signal was handled lands after it
    # (24 ms and 208 ms seen): nothing may start once the request in flight could have
    # landed, a start's time on a crowded engine after the acknowledgement.
    in_flight_until = signalled_wall + (acknowledged[0] - signalled) + IN_FLIGHT_S
    started = subprocess.run(
        ["docker", "events", "--since", f"{signalled_wall:.3f}", "--until", f"{time.time():.3f}",
         "--filter", "type=container", "--filter", "event=start",
         "--filter", f"label={LABEL_BATCH}={receipt.batchId}",
         "--format", "{{.TimeNano}} {{json .Actor.Attributes}}"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    after = [
        line for line in started.stdout.splitlines() if int(line.split()[0]) > in_flight_until * 1e9
    ]
    assert after == [], f"containers started after the signal was handled: {after}"
    assert list_leftovers(engine, receipt.batchId) == []
    code, decision = check(receipt_path)
    assert code == 1 and json.loads(out.strip().splitlines()[-1])["status"] == "interrupted"
    rules = {reason.split(":")[0] for reason in decision["reasons"]}
    assert "batch-completed" in rules
    assert not {"evidence-integrity", "solution-integrity", "log-integrity"} & rules, decision
    assert (receipt_path.parent / "report.html").is_file()
