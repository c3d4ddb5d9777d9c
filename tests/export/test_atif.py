"""ATIF export: each attempt's trajectory from the agent CLI's own events, valid against
the format's models, with tool results tied to their calls, the gateway's totals, and
no secret-shaped string left, whatever the transcript holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_eval.digests import sha256_bytes
from agent_eval.errors import ConfigError, EvidenceError
from agent_eval.export.atif import REDACTED, export_atif, steps_of, trajectory
from agent_eval.models import Receipt
from agent_eval.models.atif import Trajectory
from tests.evidence_builders import find_attempt, receipt, write_batch

CANARY = "sk-ant-canary0123456789abcdefABCDEF"
TOKEN = "ae-" + "x" * 32

CLAUDE = [
    {"type": "system", "subtype": "init", "model": "claude-x", "tools": ["Write"]},
    {"type": "assistant", "message": {"id": "m1", "model": "claude-x", "content": [
        {"type": "thinking", "thinking": "I will write the file."},
        {"type": "text", "text": "Writing solution.py"}],
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5}}},
    {"type": "assistant", "message": {"id": "m1", "model": "claude-x", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Write",
         "input": {"file_path": "solution.py", "content": f"KEY = '{CANARY}'"}}]}},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": f"written {TOKEN}"}]}},
    {"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.01},
]  # fmt: skip
CODEX = [
    {"type": "thread.started", "thread_id": "t"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "plan"}},
    {"type": "item.completed", "item": {"id": "i1", "type": "command_execution",
     "command": "bash -lc 'cat > solution.py'", "aggregated_output": "", "exit_code": 0}},
    {"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": "done"}},
    {"type": "turn.completed",
     "usage": {"input_tokens": 50, "cached_input_tokens": 20, "output_tokens": 7}},
]  # fmt: skip
MINI = [
    {"info": {"model_stats": {"instance_cost": 0.0}}},
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Solve the task."},
    {"role": "assistant", "content": "THOUGHT: write it\n```bash\necho hi > solution.py\n```"},
    {"role": "user", "content": "<returncode>0</returncode>"},
]
AIDER = [
    {"chat": "# aider chat started at 2026-12-05"},
    {"chat": "#### Solve the task."},
    {"chat": "I will edit solution.py."},
    {"chat": "> Applied edit to solution.py"},
]


def lines(events: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(e) for e in events]


@pytest.mark.parametrize(
    ("events", "shape"),
    [(CLAUDE, "claude-code"), (CODEX, "codex"), (MINI, "mini-swe-agent"), (AIDER, "aider")],
)
def test_each_clis_events_are_read_by_their_shape(events: list[dict[str, Any]], shape: str) -> None:
    found, steps = steps_of(lines(events))
    assert found == shape
    assert any(s.source == "agent" for s in steps)


def made(events: list[dict[str, Any]] | None, **changes: Any) -> Trajectory:
    data = receipt()
    run = data["runs"][0]
    attempt = run["attempts"][0]
    attempt.update(changes)
    transcript = "\n".join(lines(events)).encode() if events is not None else None
    parsed = Receipt.model_validate(data)
    return trajectory(parsed, parsed.runs[0], parsed.runs[0].attempts[0], transcript, "Do it.")


def test_a_claude_code_attempt_ties_each_tool_result_to_its_call_and_redacts_secrets() -> None:
    made_ = made(CLAUDE)
    user, agent = made_.steps
    assert (user.source, user.message) == ("user", "Do it.")
    assert agent.model_name == "claude-x" and agent.reasoning_content == "I will write the file."
    assert agent.tool_calls is not None and agent.tool_calls[0].tool_call_id == "toolu_1"
    assert agent.observation is not None
    assert agent.observation.results[0].source_call_id == "toolu_1"
    assert agent.metrics is not None and (
        agent.metrics.prompt_tokens,
        agent.metrics.cached_tokens,
    ) == (100, 90)
    text = made_.model_dump_json()
    assert CANARY not in text and TOKEN not in text and REDACTED in text


def test_a_codex_turns_usage_lands_on_its_last_agent_step() -> None:
    steps = made(CODEX).steps
    shell = steps[1]
    assert shell.tool_calls is not None and shell.tool_calls[0].function_name == "shell"
    assert shell.reasoning_content == "plan"
    assert steps[-1].metrics is not None and steps[-1].metrics.prompt_tokens == 50


def test_the_gateways_totals_are_the_trajectorys_totals() -> None:
    gateway = {"requests": 3, "answered": 3, "servedModels": ["served-x"], "inputTokens": 321,
               "outputTokens": 12, "failures": [], "recordDigest": sha256_bytes(b"r")}  # fmt: skip
    final = made(CLAUDE, gateway=gateway).final_metrics
    assert final is not None
    assert (final.total_prompt_tokens, final.total_completion_tokens) == (321, 12)
    assert final.extra is not None and final.extra["measuredBy"] == "model gateway"


def test_without_a_transcript_the_prompt_alone_is_the_trajectory() -> None:
    only = made(None)
    assert [s.source for s in only.steps] == ["user"]
    assert only.notes is not None and "no transcript" in only.notes


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
event_keys = st.sampled_from(
    ["type", "message", "item", "role", "content", "chat", "usage", "id", "error"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(event_keys, json_values, max_size=5), max_size=8))
def test_any_events_give_a_valid_trajectory_or_a_clear_refusal(
    events: list[dict[str, Any]],
) -> None:
    shapes = (
        events,
        [{"type": "assistant"} | e for e in events],
        [{"type": "user"} | e for e in events],
        [{"type": "item.completed"} | e for e in events],
        [{"type": "turn.completed"} | e for e in events],
        [{"role": "assistant"} | e for e in events],
        [{"chat": "#### x"}, *events],
    )
    for shaped in shapes:
        try:
            result = made(shaped)
        except EvidenceError as exc:
            assert "ATIF" in str(exc)
        else:
            Trajectory.model_validate_json(result.model_dump_json())


def test_export_writes_one_file_per_attempt_and_refuses_an_edited_transcript(
    tmp_path: Path,
) -> None:
    data = receipt()
    batch = write_batch(tmp_path / "b", data)
    transcript = "\n".join(lines(CLAUDE)).encode()
    where = batch.attempt_dir("forms-1") / "transcript.jsonl"
    where.write_bytes(transcript)

    def bind(receipt_data: dict[str, Any]) -> None:
        find_attempt(receipt_data, "forms-1", 1)["transcriptDigest"] = sha256_bytes(transcript)

    batch.edit_receipt(bind)
    written = export_atif(batch.root, tmp_path / "out")
    assert len(written) == 18
    forms = tmp_path / "out" / "forms-1" / "attempt-1" / "trajectory.json"
    loaded = Trajectory.model_validate_json(forms.read_bytes())
    assert loaded.agent.name == data["runner"]["name"] and len(loaded.steps) == 1  # no prompt
    assert b"null" not in forms.read_bytes()
    where.write_bytes(transcript + b"\n{}")
    with pytest.raises(EvidenceError, match="digest differs"):
        export_atif(batch.root, tmp_path / "again")


def test_export_into_a_batchs_runs_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", receipt())
    other = write_batch(tmp_path / "other", receipt(batchId="other"))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for target in (
        batch.root / "runs",
        batch.root / "runs" / "forms-1",
        other.root / "runs",
        other.root / "archives",
    ):
        with pytest.raises(ConfigError, match="lies in the evidence of the batch in"):
            export_atif(batch.root, target)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    # Beside the evidence, in the run directory itself, is where the default goes.
    assert len(export_atif(batch.root, batch.root / "atif")) == 18


def test_export_through_a_link_into_another_batchs_evidence_is_refused(tmp_path: Path) -> None:
    """A folder of an earlier export replaced by a link into another batch's runs/: the
    files are checked where they land, not only the output folder named."""
    batch = write_batch(tmp_path / "b", receipt())
    other = write_batch(tmp_path / "other", receipt(batchId="other"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "forms-1").symlink_to(other.root / "runs" / "forms-1")
    before = sorted(p.relative_to(tmp_path) for p in other.root.rglob("*"))
    with pytest.raises(
        ConfigError, match=r"forms-1/attempt-1/trajectory.json lies in the evidence"
    ):
        export_atif(batch.root, out)
    assert sorted(p.relative_to(tmp_path) for p in other.root.rglob("*")) == before


def test_an_export_that_cannot_write_says_where_and_how_many_it_wrote(tmp_path: Path) -> None:
    batch = write_batch(tmp_path / "b", receipt())
    out = tmp_path / "out"
    out.mkdir()
    (out / "forms-1").write_text("a file where a folder goes")
    with pytest.raises(
        EvidenceError, match=r"forms-1/attempt-1/trajectory.json: cannot be written"
    ):
        export_atif(batch.root, out)
