"""No input a user or an agent controls makes a reader crash, hang or coerce silently.

Every reader of user- or agent-controlled input is fed generated input:
arbitrary bytes, arbitrary JSON, documents nested far too deep, valid
documents with one value replaced by a value of another type (a boolean for a
number, a number in a string), repeated keys, and templates built from
jinja2's syntax. Each must either accept the input or refuse it with the
harness's own error (one line naming the file); anything else — a traceback,
a RecursionError, a hang past the per-example deadline — fails the property.
The exit codes of the commands are checked on a few of the same inputs.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_eval.batch.response import judge_response
from agent_eval.errors import AgentEvalError, EvidenceError, ReviewError, SuiteError
from agent_eval.evidence_io import parse_json, read_model
from agent_eval.models import (
    ArchivesManifest,
    ConsumerLock,
    ModelIdentity,
    Receipt,
    RunnerConfig,
    RunnerIdentity,
    RunnerRequest,
    TaskSpec,
)
from agent_eval.suite.tasks import _render
from agent_eval.verdict.qualification import qualify_files
from agent_eval.verdict.review import record_review
from tests.evidence_builders import CURRENT, archives_manifest, attempt, receipt, run, write_batch
from tests.paths import REPO, SHIPPED

FUZZ = settings(
    max_examples=int(os.environ.get("AGENT_EVAL_FUZZ_EXAMPLES", "300")),
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
"""Every example must finish within 5 s: a reader that hangs fails the property."""

# --- Generators ---------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=25,
)


def deep(depth: int, kind: str) -> bytes:
    opener, closer = ("[", "]") if kind == "array" else ('{"a":', "}")
    return (opener * depth + "1" + closer * depth).encode()


depths = st.sampled_from([65, 500, 990, 1000, 3000, 100_000]) | st.integers(60, 120_000)
deep_documents = st.builds(deep, depths, st.sampled_from(["array", "object"]))


def mutated(document: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """*document* with one value somewhere replaced, removed, or its key repeated."""
    paths: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value[:3]):
                walk(item, (*path, index))

    walk(document, ())
    confusing = st.sampled_from([True, False, "1000", "2", 1.5, -1, 10**20, "", [], {}, None])

    def apply(path: tuple[Any, ...], replacement: Any, how: str) -> bytes:
        copy = json.loads(json.dumps(document))
        if not path:
            return json.dumps(replacement).encode()
        target = copy
        for step in path[:-1]:
            target = target[step]
        if how == "drop" and isinstance(target, dict):
            del target[path[-1]]
        elif how == "repeat" and isinstance(target, dict):
            text = json.dumps(copy)
            key = json.dumps(str(path[-1]))
            return text.replace(key + ":", f"{key}: {json.dumps(replacement)}, {key}:", 1).encode()
        else:
            target[path[-1]] = replacement
        return json.dumps(copy).encode()

    return st.builds(
        apply,
        st.sampled_from(paths),
        confusing | json_values,
        st.sampled_from(["replace", "drop", "repeat"]),
    )


def inputs_for(document: dict[str, Any]) -> st.SearchStrategy[bytes]:
    return (
        st.binary(max_size=400)
        | json_values.map(lambda v: json.dumps(v).encode())
        | deep_documents
        | mutated(document)
    )


def runner_config() -> dict[str, Any]:
    return json.loads((SHIPPED / "examples" / "runners" / "claude-code.json").read_text())


def task_json() -> dict[str, Any]:
    return json.loads((REPO / "tasks" / "forms" / "task.json").read_text())


# --- Properties ---------------------------------------------------------------------------


def only_our_errors(path: Path, data: bytes, model: type[Any], what: str) -> None:
    path.write_bytes(data)
    try:
        read_model(path, model, what=what)
    except EvidenceError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
        assert len(message) < 2500


@FUZZ
@given(data=inputs_for(runner_config()))
def test_any_runner_config_is_read_or_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    only_our_errors(tmp_path / "runner.json", data, RunnerConfig, "runner config")


@FUZZ
@given(data=inputs_for(task_json()))
def test_any_task_json_is_read_or_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    only_our_errors(tmp_path / "task.json", data, TaskSpec, "task")


@FUZZ
@given(data=inputs_for(receipt()))
def test_any_receipt_is_read_or_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    only_our_errors(tmp_path / "receipt.json", data, Receipt, "receipt")


@FUZZ
@given(data=inputs_for(archives_manifest(b"wheel")))
def test_any_archives_json_is_read_or_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    only_our_errors(tmp_path / "archives.json", data, ArchivesManifest, "archives")


LOCK = {
    "schemaVersion": 1,
    "archivesDigest": "sha256:" + "a" * 64,
    "python": "3.11.2",
    "distributions": [
        {"name": "x", "version": "1", "recordDigest": "sha256:" + "b" * 64, "candidate": False,
         "archiveSha256": None}
    ],
}  # fmt: skip


@FUZZ
@given(data=inputs_for(LOCK))
def test_any_consumer_lock_is_read_or_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    only_our_errors(tmp_path / "consumer-lock.json", data, ConsumerLock, "consumer lock")


@FUZZ
@given(data=inputs_for(receipt()))
def test_the_checker_decides_any_receipt_without_raising(tmp_path: Path, data: bytes) -> None:
    batch = write_batch(tmp_path / uuid.uuid4().hex)
    batch.receipt.write_bytes(data)
    result = qualify_files(batch.receipt, batch.archives, CURRENT)
    assert result.qualified == (not result.reasons)
    if data != json.dumps(receipt()).encode():
        assert not result.qualified


REQUEST = RunnerRequest(
    schemaVersion=1, runId="forms-1", taskId="forms", taskText="t", consumerDir="/consumer",
    outputDir="/solution", allowedOutputPaths=["solution.py"], attempt=1, timeBudgetMs=1000,
)  # fmt: skip
RESPONSE = {
    "schemaVersion": 1, "runId": "forms-1", "taskId": "forms", "status": "completed",
    "runner": {"name": "r", "version": "1"}, "model": {"id": "m", "settings": {}},
}  # fmt: skip


@FUZZ
@given(data=inputs_for(RESPONSE))
def test_any_runner_stdout_is_judged_without_raising(data: bytes) -> None:
    verdict = judge_response(
        data,
        truncated=False,
        request=REQUEST,
        runner=RunnerIdentity(name="r", version="1"),
        model=ModelIdentity(id="m", settings={}),
    )
    assert (verdict.response is None) == (verdict.problem is not None)
    if verdict.response is None:
        assert verdict.message and "\n" not in verdict.message


jinja_pieces = st.sampled_from(
    [
        "{{ title }}", "{{ contract }}", "{{ 1/0 }}", "{{ title + 1 }}", "{% for x in range(3) %}",
        "{% endfor %}", "{% if title %}", "{% endif %}", "{% macro m() %}{{ m() }}{% endmacro %}",
        "{{ m() }}", "{% include 'x.md' %}", "{{ contract.decode('x') }}", "{{ nope }}",
        "{{ ''.__class__ }}", "{{ 'x' * 10**7 }}", "{{ 9 ** 9999 }}", "{%", "}}", "{#", "#}",
        "{{ title|upper }}", "{{ allowed_output_paths[0] }}", "{% set x = 1 %}", "text\n",
        "{% raw %}", "{% endraw %}", "{{ range(10**9)|list }}", "{% include 'part.md' %}",
        "{% include 'loop.md' %}", "{% include '../task.json' %}",
    ]
)  # fmt: skip
templates = st.lists(jinja_pieces | st.text(max_size=10), max_size=12).map("".join)
SHARED = {"part.md": "{{ title }} part\n", "loop.md": "{% include 'loop.md' %}"}


@FUZZ
@given(template=templates)
def test_any_prompt_template_renders_or_is_a_suite_error(template: str) -> None:
    variables = {"title": "T", "contract": "c", "allowed_output_paths": ["solution.py"]}
    try:
        _render("forms", template, variables, SHARED)
    except SuiteError as exc:
        assert "prompt.md" in str(exc)


reviewers = st.text(max_size=300) | st.sampled_from(["a\u202eb", "x\x1b[2J", "ok", "a" * 201])


@FUZZ
@given(
    reviewer=reviewers,
    run_id=st.sampled_from(["forms-1", "forms-2", "nope-9", "", "forms-1\n"]),
    attempt_number=st.integers(min_value=-3, max_value=5),
)
def test_any_review_arguments_record_a_decision_or_are_refused(
    tmp_path: Path, reviewer: str, run_id: str, attempt_number: int
) -> None:
    root = tmp_path / uuid.uuid4().hex
    runs = [run(r, [attempt(r, needs_review=True)]) for r in ["forms-1", "forms-2"]]
    batch = write_batch(root, receipt(runs))
    before = batch.receipt.read_bytes()
    try:
        record_review(
            batch.receipt,
            run_id=run_id,
            attempt=attempt_number,
            reviewer=reviewer,
            decision="accept",
            now=datetime(2026, 12, 1, tzinfo=UTC),
        )
    except (ReviewError, EvidenceError) as exc:
        assert "\n" not in str(exc)
        assert batch.receipt.read_bytes() == before


@pytest.mark.parametrize("name", ["runner.json", "receipt.json", "task.json"])
def test_a_fifo_is_refused_at_once_never_waited_on(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(EvidenceError, match="FIFO"):
        read_model(fifo, RunnerConfig, what="file")


@pytest.mark.parametrize("depth", [100, 5_000, 100_000])
def test_deep_nesting_is_refused_before_the_parser_recurses(depth: int) -> None:
    with pytest.raises(EvidenceError, match="nested deeper"):
        parse_json(deep(depth, "array"), where="x")


def test_booleans_and_strings_never_pass_for_numbers(tmp_path: Path) -> None:
    for field, value in [
        ("schemaVersion", True),
        ("submissionTimeoutMs", True),
        ("submissionTimeoutMs", "1000"),
        ("concurrency", "2"),
    ]:
        data = {**runner_config(), field: value}
        path = tmp_path / "runner.json"
        path.write_text(json.dumps(data))
        with pytest.raises(AgentEvalError, match=field):
            read_model(path, RunnerConfig, what="runner config")


# --- The lease, the registry, the report's readers -----------------------------------------


def lease_json() -> dict[str, Any]:
    from agent_eval.batch.lease import this_process

    return json.loads(this_process("batch-1", datetime(2026, 12, 1, tzinfo=UTC)).model_dump_json())


@FUZZ
@given(data=inputs_for(lease_json()))
def test_any_lease_is_read_or_refused_in_one_line(tmp_path: Path, data: bytes) -> None:
    from agent_eval.batch.lease import read_lease

    run_dir = tmp_path / uuid.uuid4().hex
    run_dir.mkdir()
    (run_dir / "lease.json").write_bytes(data)
    try:
        lease = read_lease(run_dir)
    except EvidenceError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 2500
    else:
        # Whatever is read is an identifier, never a path.
        assert lease is not None and "/" not in lease.batchId and lease.batchId not in {".", ".."}


def toml_documents() -> st.SearchStrategy[bytes]:
    import tomli_w

    from tests.evidence_builders import REGISTRY

    tables = st.dictionaries(st.text(max_size=10), json_values, max_size=5)

    def dumped(value: dict[str, Any]) -> bytes:
        try:
            return tomli_w.dumps(value).encode()
        except (TypeError, ValueError):
            return b""

    nested = st.integers(60, 50_000).map(lambda n: b"x = " + b"[" * n + b"]" * n + b"\n")
    return (
        st.binary(max_size=400)
        | tables.map(dumped)
        | nested
        | st.builds(lambda cut: REGISTRY[:cut], st.integers(0, len(REGISTRY)))
        | st.builds(
            lambda old, new: REGISTRY.replace(old, new, 1),
            st.sampled_from([b"claude-code", b"schemaVersion = 1", b"Reviewer One", b"["]),
            st.binary(max_size=20),
        )
    )


@FUZZ
@given(data=toml_documents())
def test_any_registry_is_read_or_refused_in_one_line(data: bytes) -> None:
    from agent_eval.verdict.registry import parse_registry

    try:
        parse_registry(data, "reviewed-runners.toml at abc")
    except EvidenceError as exc:
        message = str(exc)
        assert message.startswith("reviewed-runners.toml at abc") and "\n" not in message
        assert len(message) < 2500


@settings(FUZZ, max_examples=min(FUZZ.max_examples, 60))
@given(
    gateway=st.binary(max_size=300) | deep_documents,
    analysis=inputs_for(json.loads(json.dumps({"schemaVersion": 1, "taskId": "forms"}))),
    log=st.binary(max_size=300),
)
def test_the_report_is_written_whatever_an_attempts_files_hold(
    tmp_path: Path, gateway: bytes, analysis: bytes, log: bytes
) -> None:
    from agent_eval.report.render import write_report

    batch = write_batch(tmp_path / uuid.uuid4().hex)
    folder = batch.attempt_dir("forms-1", 1)
    (folder / "gateway.jsonl").write_bytes(gateway + b"\n" + gateway)
    (folder / "analysis.json").write_bytes(analysis)
    (folder / "runner.log").write_bytes(log)
    page = write_report(batch.root, current=CURRENT, now=datetime(2026, 12, 1, tzinfo=UTC))
    assert page.stat().st_size > 0
