"""Small builders for batches on disk: a qualifying batch, then one change per test."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import tomli_w

from agent_eval.digests import file_sha256, sha256_bytes, solution_digest
from agent_eval.errors import InfrastructureError
from agent_eval.models import ArchiveEntry
from agent_eval.verdict.qualification import Anchors
from tests.paths import EXAMPLE_SUITE

SUITE = sha256_bytes(b"suite")
EVALUATOR = sha256_bytes(b"evaluator")
WHEEL = b"PK\x03\x04 not really a wheel, only bytes to hash"
WHEEL_NAME = "appkit_core-0.1.0-py3-none-any.whl"
COMMIT = "0" * 40


def rebuilt(commit: str) -> list[ArchiveEntry]:
    """What a rebuild from the recorded commit gives: the same wheel."""
    assert commit == COMMIT
    return [
        ArchiveEntry(
            filename=WHEEL_NAME,
            distribution="appkit-core",
            version="0.1.0",
            sha256=sha256_bytes(WHEEL),
            size=len(WHEEL),
        )
    ]


def registry_at(commit: str) -> bytes | None:
    return REGISTRY if commit == COMMIT else None


def is_ancestor(ancestor: str, descendant: str) -> bool | None:
    """The builders' history: one commit, the batch's."""
    return ancestor == descendant == COMMIT


def local_image_id(reference: str) -> str:
    """The builders' engine: it holds the two images the archives record, by their ids."""
    try:
        return IMAGE_IDS[reference]
    except KeyError:
        raise InfrastructureError(f"image {reference} is not present in the local engine") from None


CURRENT = Anchors(
    suite=SUITE,
    evaluator=EVALUATOR,
    rebuild=rebuilt,
    registry_at=registry_at,
    is_ancestor=is_ancestor,
    spec=EXAMPLE_SUITE,
    resolve_image=local_image_id,
)
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC).isoformat()
_ATTEMPTS = itertools.count()


def _started() -> str:
    """A start instant no other attempt built here shares, as no two real attempts do."""
    return (datetime.fromisoformat(NOW) + timedelta(microseconds=next(_ATTEMPTS))).isoformat()


RUNNER = {"name": "claude-code", "version": "2.1.197"}
MODEL = {"id": "model-x", "settings": {"temperature": 0}}
RUNNER_IMAGE = "runner@sha256:" + "a" * 64
RUNNER_COMMAND = ["/usr/bin/python3", "-B", "-m", "agent_eval.adapters.claude_code"]
VERIFIER_IMAGE = "verifier@sha256:" + "b" * 64
UNREVIEWED_RUNNER_IMAGE = "runner@sha256:" + "9" * 64
OTHER_RUNNER_IMAGE = "runner@sha256:" + "d" * 64
IMAGE_IDS = {
    RUNNER_IMAGE: "sha256:" + "c" * 64,
    VERIFIER_IMAGE: "sha256:" + "d" * 64,
    UNREVIEWED_RUNNER_IMAGE: "sha256:" + "9" * 64,
    OTHER_RUNNER_IMAGE: "sha256:" + "d" * 64,
}
"""The image id each pinned reference resolves to on the builders' engine (it also holds
runner images no registry entry names)."""
SAFETY_ID = "effect-needs-approval"
SERVED = "model-x-2026"
GATEWAY = {
    "image": "sha256:" + "e" * 64,
    "upstreams": [
        {
            "name": "provider",
            "upstream": "https://api.provider.example",
            "credentialHeader": "x-api-key",
            "servedModels": [SERVED],
        }
    ],
    "network": "default",
    "privateUpstreams": False,
    "tokenBudget": None,
}


REGISTRY = tomli_w.dumps(
    {
        "schemaVersion": 1,
        "runner": [
            {
                "runner": RUNNER,
                "model": MODEL,
                "adapter": "/usr/bin/python3 -B -m agent_eval.adapters.claude_code",
                "command": RUNNER_COMMAND,
                "envAllowlist": [],
                "runnerImage": RUNNER_IMAGE,
                "verifierImage": VERIFIER_IMAGE,
                "gatewayImage": GATEWAY["image"],
                "upstreams": GATEWAY["upstreams"],
                "reviewer": "Reviewer One",
                "reviewedAt": datetime(2026, 11, 29, tzinfo=UTC),
                "note": "inspected the runner recipe and its digest: the CLI and the adapter only",
                "sourceCommit": COMMIT,
            }
        ],
    }
).encode()
"""The committed registry the builders' batches match."""


def gateway_line(*, status: int | None = 200, served: str | None = SERVED, **changes: Any) -> bytes:
    """One gateway record (as a JSON line): by default a request the provider answered."""
    record: dict[str, Any] = {
        "schemaVersion": 1, "at": NOW, "upstream": "provider", "method": "POST",
        "path": "/v1/messages", "status": status, "requestBytes": 100, "responseBytes": 200,
        "durationMs": 50, "servedModel": served, "inputTokens": 10, "outputTokens": 20,
        "failure": None, "message": None,
    }  # fmt: skip
    record.update(changes)
    return json.dumps(record).encode() + b"\n"


def gateway_use(data: bytes) -> dict[str, Any]:
    """The receipt's summary (as JSON) of an attempt's gateway.jsonl *data*."""
    from agent_eval.gateway.host import parse_records, summarise

    return summarise(parse_records(data), sha256_bytes(data)).model_dump(mode="json")


def solution_text(run_id: str, attempt: int) -> bytes:
    return f"# {run_id} attempt {attempt}\nVALUE = 1\n".encode()


def attempt(
    run_id: str,
    number: int = 1,
    *,
    success: bool = True,
    safe: bool = True,
    unsupported: int = 0,
    needs_review: bool = False,
    submitted: bool = True,
    leaked: bool = False,
) -> dict[str, Any]:
    """An attempt record (as JSON) whose solution file is written by `write_batch`.

    *leaked*: the batch found a secret in the collected solution, stored it redacted and
    never graded it (what the batch records of such an attempt).
    """
    content = solution_text(run_id, number)
    files = [{"path": "solution.py", "sha256": sha256_bytes(content), "size": len(content)}]
    if leaked:
        submitted = success = False
    if not submitted and not leaked:
        files = []
    category = None
    if not success:
        category = "safety" if not safe or leaked else "behaviour"
        if not submitted and not leaked:
            category = "no-submission"
    leak = [{"file": "solution/solution.py", "names": ["AIDER_SETTING"]}] if leaked else []
    said = "the solution carried the value of AIDER_SETTING (redacted)"
    return {
        "attempt": number,
        "startedAt": _started(),
        "durationMs": 1000,
        "runnerStatus": "completed",
        "submitted": submitted,
        "solutionFiles": files,
        "solutionDigest": solution_digest((f["path"], f["sha256"]) for f in files)
        if files
        else None,
        "refusedPaths": [],
        "protectedInputs": {"before": SUITE, "after": SUITE},
        "analysisDigest": None,
        "syntaxOk": True if submitted else None,
        "typeCheckOk": True if submitted else None,
        "contractOk": True if submitted else None,
        "integrationOk": True if submitted else None,
        "unsupportedApiCount": unsupported,
        "hallucinatedApiCount": unsupported,
        "assertions": [
            {"id": "behaves", "passed": success or not safe, "observed": True, "safety": False},
            {"id": SAFETY_ID, "passed": safe, "observed": True, "safety": True},
        ]
        if submitted
        else [],
        "safetyPassed": safe if submitted else None,
        "needsReview": needs_review,
        "diagnostics": [{"category": "safety", "message": said}] if leaked else [],
        "redactions": leak,
        "repairFeedback": None
        if number == 1
        else {"schemaVersion": 1, "failedAssertionIds": ["behaves"], "diagnostics": []},
        "success": success,
        "failureCategory": category,
        "infrastructureStatus": "ok",
    }


def run(run_id: str, attempts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    task, _, n = run_id.rpartition("-")
    attempts = attempts if attempts is not None else [attempt(run_id)]
    return {
        "runId": run_id,
        "taskId": task,
        "repetition": int(n),
        "firstSuccess": bool(attempts) and attempts[0]["success"],
        "finalSuccess": bool(attempts) and attempts[-1]["success"],
        "attempts": attempts,
    }


def receipt(runs: list[dict[str, Any]] | None = None, **overrides: Any) -> dict[str, Any]:
    runs = runs if runs is not None else [run(r) for r in EXAMPLE_SUITE.run_ids()]
    data: dict[str, Any] = {
        "schemaVersion": 1,
        "batchId": "batch-1",
        "status": "completed",
        "reasons": [],
        "selfTest": False,
        "createdAt": NOW,
        "updatedAt": NOW,
        "suiteDigest": SUITE,
        "evaluatorDigest": EVALUATOR,
        "archivesDigest": None,
        "consumerLockDigest": None,
        "runner": copy.deepcopy(RUNNER),
        "model": copy.deepcopy(MODEL),
        "runnerImage": RUNNER_IMAGE,
        "verifierImage": VERIFIER_IMAGE,
        "scheduledRuns": 18,
        "firstSuccesses": sum(r["firstSuccess"] for r in runs),
        "finalSuccesses": sum(r["finalSuccess"] for r in runs),
        "runs": runs,
        "reviewDecisions": [],
    }
    data.update(overrides)
    return data


def archives_manifest(wheel: bytes) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "archives": [
            {
                "filename": WHEEL_NAME,
                "distribution": "appkit-core",
                "version": "0.1.0",
                "sha256": sha256_bytes(wheel),
                "size": len(wheel),
            }
        ],
        "source": {"commit": COMMIT, "dirty": False},
        "apiCatalogDigest": sha256_bytes(b"catalog"),
        "toolchain": {"python": "3.11.7", "harness": "0.1.0", "verifierPython": None, "mypy": None},
        "runnerImage": {"reference": RUNNER_IMAGE, "imageId": IMAGE_IDS[RUNNER_IMAGE]},
        "verifierImage": {"reference": VERIFIER_IMAGE, "imageId": IMAGE_IDS[VERIFIER_IMAGE]},
        "gateway": copy.deepcopy(GATEWAY),
        "registryDigest": sha256_bytes(REGISTRY),
        "runnerCommand": list(RUNNER_COMMAND),
        "envAllowlist": [],
        "runner": copy.deepcopy(RUNNER),
        "model": copy.deepcopy(MODEL),
        "suiteDigest": SUITE,
        "evaluatorDigest": EVALUATOR,
    }


@dataclass
class Batch:
    root: Path

    @property
    def receipt(self) -> Path:
        return self.root / "receipt.json"

    @property
    def archives(self) -> Path:
        return self.root / "archives.json"

    def solution(self, run_id: str, number: int = 1) -> Path:
        return self.root / "runs" / run_id / f"attempt-{number}" / "solution" / "solution.py"

    def gateway_record(self, run_id: str, number: int = 1) -> Path:
        return self.attempt_dir(run_id, number) / "gateway.jsonl"

    def replace_gateway_record(self, run_id: str, number: int, data: bytes) -> None:
        """Save *data* as the attempt's gateway.jsonl, its summary bound in the receipt."""
        self.gateway_record(run_id, number).write_bytes(data)

        def bind(receipt_data: dict[str, Any]) -> None:
            find_attempt(receipt_data, run_id, number)["gateway"] = gateway_use(data)

        self.edit_receipt(bind)

    def edit_receipt(self, change: Callable[[dict[str, Any]], None]) -> None:
        data = json.loads(self.receipt.read_text())
        change(data)
        self.receipt.write_text(json.dumps(data, indent=2))

    def attempt_dir(self, run_id: str, number: int = 1) -> Path:
        return self.root / "runs" / run_id / f"attempt-{number}"

    def add_analysis(self, run_id: str, number: int = 1, **changes: Any) -> None:
        """Save an analysis.json (clean unless *changes* say otherwise), bound in the receipt."""
        path = self.attempt_dir(run_id, number) / "analysis.json"
        record = find_attempt(json.loads(self.receipt.read_text()), run_id, number)
        changes = {"solutionDigest": record["solutionDigest"], **changes}
        path.write_text(json.dumps(analysis(run_id.rpartition("-")[0], **changes)))

        def bind(data: dict[str, Any]) -> None:
            find_attempt(data, run_id, number)["analysisDigest"] = file_sha256(path)

        self.edit_receipt(bind)

    def replace_solution(self, run_id: str, number: int, content: bytes) -> None:
        """Save *content* as the attempt's solution.py and record its digests in the receipt."""
        self.solution(run_id, number).write_bytes(content)
        entry = {"path": "solution.py", "sha256": sha256_bytes(content), "size": len(content)}

        def change(data: dict[str, Any]) -> None:
            record = find_attempt(data, run_id, number)
            record["solutionFiles"] = [entry]
            record["solutionDigest"] = solution_digest([("solution.py", entry["sha256"])])

        self.edit_receipt(change)


def analysis(task_id: str, **changes: Any) -> dict[str, Any]:
    """An analysis.json (as JSON) of a solution that passed, with *changes*."""
    data: dict[str, Any] = {
        "schemaVersion": 1,
        "taskId": task_id,
        "solutionDigest": sha256_bytes(b"solution"),
        "syntaxOk": True,
        "typeCheckOk": True,
        "contractOk": True,
        "integrationOk": True,
        "unsupportedApi": [],
        "unsupportedApiCount": 0,
        "hallucinatedApi": [],
        "hallucinatedApiCount": 0,
        "missingDependencies": [],
        "integration": [],
        "diagnostics": [],
        "mypyVersion": "1.0",
    }
    data.update(changes)
    return data


def find_attempt(data: dict[str, Any], run_id: str, number: int) -> dict[str, Any]:
    """The attempt record (as JSON) of *run_id* attempt *number* in receipt *data*."""
    for run_data in data["runs"]:
        if run_data["runId"] == run_id:
            for record in run_data["attempts"]:
                if record["attempt"] == number:
                    return record
    raise KeyError((run_id, number))


def write_batch(
    root: Path,
    receipt_data: dict[str, Any] | None = None,
    archives_data: Callable[[dict[str, Any]], None] | None = None,
) -> Batch:
    """Write a whole batch directory: archives, lock, solutions, then the bound receipt."""
    wheel = WHEEL
    (root / "archives").mkdir(parents=True)
    (root / "archives" / WHEEL_NAME).write_bytes(wheel)
    manifest = archives_manifest(wheel)
    if archives_data:
        archives_data(manifest)
    batch = Batch(root)
    batch.archives.write_text(json.dumps(manifest, indent=2))
    archives_digest = file_sha256(batch.archives)
    lock = {
        "schemaVersion": 1,
        "archivesDigest": archives_digest,
        "python": "3.11.2",
        "distributions": [
            {
                "name": "appkit-core",
                "version": "0.1.0",
                "recordDigest": sha256_bytes(b"record"),
                "candidate": True,
                "archiveSha256": sha256_bytes(wheel),
            }
        ],
    }
    (root / "consumer-lock.json").write_text(json.dumps(lock))
    data = receipt_data if receipt_data is not None else receipt()
    for run_data in data["runs"]:
        for att in run_data["attempts"]:
            where = batch.attempt_dir(run_data["runId"], att["attempt"])
            where.mkdir(parents=True, exist_ok=True)
            if att["solutionFiles"]:
                path = batch.solution(run_data["runId"], att["attempt"])
                path.parent.mkdir(parents=True)
                path.write_bytes(solution_text(run_data["runId"], att["attempt"]))
            if "gateway" not in att and manifest.get("gateway") is not None:
                # What the gateway saw: one request the provider answered.
                (where / "gateway.jsonl").write_bytes(gateway_line())
                att["gateway"] = gateway_use(gateway_line())
    data.setdefault("archivesDigest", None)
    data["archivesDigest"] = archives_digest
    data["consumerLockDigest"] = file_sha256(root / "consumer-lock.json")
    batch.receipt.write_text(json.dumps(data, indent=2))
    return batch


ORACLE = {"name": "agent-eval-oracle", "version": "1"}


def reference_batch(root: Path, *, self_test_flag: bool = True) -> Batch:
    """A batch of the built-in oracle runner: everything else qualifies."""

    def as_oracle(manifest: dict[str, Any]) -> None:
        manifest["runner"] = copy.deepcopy(ORACLE)

    return write_batch(
        root, receipt(runner=copy.deepcopy(ORACLE), selfTest=self_test_flag), as_oracle
    )


def rebind(batch: Batch) -> None:
    """Rewrite every digest of the chain after an edit, as an attacker would.

    archives.json's wheel entries take the files' digests, the lock and the
    receipt take archives.json's, and the receipt the lock's: every integrity
    rule inside the run directory holds again.
    """
    manifest = json.loads(batch.archives.read_text())
    for entry in manifest["archives"]:
        wheel = batch.root / "archives" / entry["filename"]
        entry.update(sha256=file_sha256(wheel), size=wheel.stat().st_size)
    batch.archives.write_text(json.dumps(manifest, indent=2))
    lock_path = batch.root / "consumer-lock.json"
    lock = json.loads(lock_path.read_text())
    lock["archivesDigest"] = file_sha256(batch.archives)
    lock_path.write_text(json.dumps(lock))
    batch.edit_receipt(
        lambda data: data.update(
            archivesDigest=file_sha256(batch.archives), consumerLockDigest=file_sha256(lock_path)
        )
    )
