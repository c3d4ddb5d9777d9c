"""Batches of the same commit share one consumer, checked at each use; re-verification runs
several verifications at once and leaves no container when interrupted.

Against the real engine, through eval-agent and check-agent-eval: a first
batch prepares the consumer and keeps it; a batch after it whose entry was
tampered with says so and prepares it again; the next one uses the entry as
it is and still completes 18/18 with the same consumer-lock.json, and
re-verification (one verification per core) gives every recorded verdict.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path

import pytest

from agent_eval.consumer.cache import CacheEntry, files_digest
from agent_eval.digests import file_sha256
from agent_eval.engine import ContainerSpec, list_leftovers
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.layout import ConsumerLayout, RunDirectory
from agent_eval.models import Receipt
from agent_eval.project import find_project
from agent_eval.verdict.reverify import reverify_files
from agent_eval.verification.container.verifier import evidence_verifiers
from tests.batches import (
    check,
    eval_agent,
    eval_agent_process,
    project_copy,
    receipt_of,
    write_config,
)

pytestmark = pytest.mark.docker


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if not p.name.startswith("."))


def test_a_second_batch_of_the_same_commit_reuses_the_consumer_and_completes(
    engine: DockerEngine, tmp_path: Path, consumer_cache: Path
) -> None:
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "r.json", "oracle")

    code, first = eval_agent(project, config, None, "--only", "forms-1")
    assert code == 0 and first["status"] == "completed", first
    [entry] = _entries(consumer_cache)
    first_lock = RunDirectory(receipt_of(project, first).parent).consumer_lock

    # An entry tampered with is discarded, said, and prepared again.
    planted = ConsumerLayout(entry / "consumer").site / "sitecustomize.py"
    planted.write_text("print('not the consumer that was locked')\n")
    done = eval_agent_process(project, config, None, "--only", "forms-1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "consumer cache: the entry" in done.stderr and "discarded" in done.stderr
    assert not planted.exists()
    [entry] = _entries(consumer_cache)
    kept = (os.stat(entry).st_ino, (entry / "entry.json").read_bytes())

    done = eval_agent_process(project, config)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "consumer cache" not in done.stderr
    line = json.loads(done.stdout)
    assert (line["status"], line["firstSuccesses"], line["finalSuccesses"]) == ("completed", 18, 18)
    assert _entries(consumer_cache) == [entry]
    assert (os.stat(entry).st_ino, (entry / "entry.json").read_bytes()) == kept
    CacheEntry.model_validate_json(kept[1])
    receipt_path = receipt_of(project, line)
    lock = RunDirectory(receipt_path.parent).consumer_lock
    assert lock.read_bytes() == first_lock.read_bytes()
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    assert receipt.consumerLockDigest == file_sha256(lock)
    assert list_leftovers(engine, receipt.batchId) == []

    # Verified again, several at once, every run gets its recorded verdict (and the
    # consumer installed again holds the cached one's files byte for byte).
    code, decision = check(receipt_path, "--reverify")
    assert code == 1
    assert [reason.split(":")[0] for reason in decision["reasons"]] == ["not-self-test"]
    assert any(entry.name in note for note in decision["notes"])
    # Its containers carried a lease of its own, given up with its directory afterwards.
    evidence = receipt_path.parent.parent
    assert not [p.name for p in evidence.iterdir() if p.name.startswith("reverify-")]

    # Rewritten with its record, the entry is used as it is: only --reverify tells.
    planted.write_text("# planted, the record rewritten to agree\n")
    record = CacheEntry.model_validate_json((entry / "entry.json").read_bytes())
    forged = record.model_copy(update={"filesDigest": files_digest(entry / "consumer")})
    (entry / "entry.json").write_text(forged.model_dump_json())
    done = eval_agent_process(project, config, None, "--only", "forms-1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "consumer cache" not in done.stderr
    receipt_path = receipt_of(project, json.loads(done.stdout))
    code, plain = check(receipt_path)
    assert not any(r.startswith("consumer") for r in plain["reasons"])
    assert any(record.key in note for note in plain["notes"])
    code, decision = check(receipt_path, "--reverify")
    assert any(r.startswith("consumer-integrity: ") for r in decision["reasons"]), decision


def test_an_interrupted_reverify_leaves_no_container_of_its_own(
    engine: DockerEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project_dir = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "r.json", "oracle")
    code, line = eval_agent(project_dir, config, None, "--only", "forms")
    assert code == 0 and line["status"] == "completed", line
    receipt_path = receipt_of(project_dir, line)
    run_ids = {r.runId for r in Receipt.model_validate_json(receipt_path.read_bytes()).runs}
    project = find_project(project_dir)

    batches: set[str] = set()
    verifications: list[str] = []
    seen: list[str] = []  # the handler and where the main thread was, when interrupted
    create = engine.create
    # As a terminal's Ctrl-C finds it: a test process started in the background (a CI job
    # launched with &) inherits SIGINT ignored, and Python then never installs its handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def create_then_interrupt(spec: ContainerSpec) -> str:
        batches.add(spec.batch_id)
        container_id = create(spec)
        if spec.role == "verifier" and spec.run_id in run_ids:
            verifications.append(spec.run_id)
            if len(verifications) == 2:  # two under way: Ctrl-C
                main = sys._current_frames().get(threading.main_thread().ident or 0)
                where = traceback.format_stack(main)[-2:] if main is not None else []
                seen.append(f"handler {signal.getsignal(signal.SIGINT)!r} at {where}")
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        return container_id

    monkeypatch.setattr(engine, "create", create_then_interrupt)
    archives_path = receipt_path.parent / "archives.json"
    try:
        returned = reverify_files(
            receipt_path,
            archives_path,
            project,
            lambda manifest, run_dir: evidence_verifiers(engine, project, manifest, run_dir),
            workers=2,
        )
    except KeyboardInterrupt:
        pass
    else:
        pytest.fail(
            f"not interrupted ({len(verifications)} verifications); it said {returned}; {seen}"
        )
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    assert len(verifications) >= 2
    # Nothing of it is still running that could start a container after its clean-up.
    assert not [t for t in threading.enumerate() if t.name.startswith("reverify")]
    [batch_id] = batches
    assert batch_id.startswith("reverify-")
    assert list_leftovers(engine, batch_id) == []
