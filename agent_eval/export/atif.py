"""``agent-eval export RUN --format atif``: each attempt's trajectory in ATIF v1.4.

The steps come from the agent CLI's own events, as its adapter kept them in the
attempt's ``transcript.jsonl`` (Claude Code's stream JSON, Codex's JSON events,
mini-swe-agent's messages, aider's chat history; each read by the shape of its lines,
never trusted to be well formed), after the task's prompt as the user's first step.
The totals are what the harness itself measured: the model gateway's count of
requests and tokens, kept in the receipt beside the attempt, with the CLI's own counts
per step where it reported them.

What leaves the machine in a trajectory is the agent's conversation, so the export is
a second wall for secrets: a gateway token of any attempt and every string shaped like
a provider's key are replaced by ``[redacted]`` wherever they appear, before the
trajectory is validated and written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_eval.digests import sha256_bytes
from agent_eval.errors import ConfigError, EvidenceError
from agent_eval.evidence_io import read_bounded, read_model, write_bytes_atomic
from agent_eval.layout import (
    MAX_TRANSCRIPT_BYTES,
    TRANSCRIPT_FILE,
    RunDirectory,
    evidence_holding,
)
from agent_eval.models import AttemptRecord, Receipt, RunRecord
from agent_eval.models.atif import (
    ATIF_VERSION,
    AtifFinalMetrics,
    AtifMetrics,
    AtifObservationResult,
    AtifToolCall,
    Trajectory,
)

__all__ = ["REDACTED", "export_atif", "steps_of", "trajectory"]

REDACTED = "[redacted]"
_SECRETS = re.compile(
    r"ae-[A-Za-z0-9_-]{20,}"  # a gateway token of an attempt
    r"|sk-(?:ant-)?[A-Za-z0-9_-]{16,}"  # Anthropic and OpenAI keys
    r"|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{30,}"  # Google API keys
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{20,}"
)
MESSAGE_CHARS = 100_000
"""One step's text is cut here (the transcript itself is bounded by the adapter)."""


def _clean(value: Any) -> Any:
    """*value* with every secret-shaped string replaced, and text cut to its bound."""
    if isinstance(value, str):
        return _SECRETS.sub(REDACTED, value[:MESSAGE_CHARS])
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(str(k)): _clean(v) for k, v in value.items()}
    return value


def _text(value: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and isinstance(block.get("content"), str | list):
                parts.append(_text(block["content"]))
        return "\n".join(p for p in parts if p)
    return "" if value is None else json.dumps(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass
class _Step:
    """A step under construction (ids are given once every step is known)."""

    source: str
    message: str = ""
    model_name: str | None = None
    reasoning: list[str] = field(default_factory=list)
    calls: list[AtifToolCall] = field(default_factory=list)
    results: list[AtifObservationResult] = field(default_factory=list)
    metrics: AtifMetrics | None = None
    key: str | None = None
    """What merges events into one step (a model message's id)."""

    def answer(self, call_id: str | None, content: str) -> None:
        known = call_id if any(c.tool_call_id == call_id for c in self.calls) else None
        self.results.append(AtifObservationResult(source_call_id=known, content=content))


def _claude_code(events: list[dict[str, Any]]) -> list[_Step]:
    steps: list[_Step] = []
    for event in events:
        kind, message = event.get("type"), event.get("message")
        if kind == "assistant" and isinstance(message, dict):
            key = message.get("id") if isinstance(message.get("id"), str) else None
            step = steps[-1] if steps and key and steps[-1].key == key else None
            if step is None:
                step = _Step("agent", key=key)
                steps.append(step)
            model = message.get("model")
            step.model_name = model if isinstance(model, str) else step.model_name
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    parts = (step.message, _text(block.get("text")))
                    step.message = "\n".join(p for p in parts if p)
                elif block.get("type") == "thinking":
                    step.reasoning.append(_text(block.get("thinking")))
                elif block.get("type") == "tool_use":
                    arguments = block.get("input")
                    step.calls.append(
                        AtifToolCall(
                            tool_call_id=str(block.get("id") or f"call-{len(step.calls) + 1}"),
                            function_name=str(block.get("name") or "tool"),
                            arguments=arguments if isinstance(arguments, dict) else {},
                        )
                    )
            usage = message.get("usage")
            if isinstance(usage, dict):
                read = _count(usage.get("cache_read_input_tokens")) or 0
                created = _count(usage.get("cache_creation_input_tokens")) or 0
                fresh = _count(usage.get("input_tokens")) or 0
                step.metrics = AtifMetrics(
                    prompt_tokens=fresh + read + created,
                    completion_tokens=_count(usage.get("output_tokens")),
                    cached_tokens=read,
                    extra={"cache_creation_input_tokens": created} if created else None,
                )
        elif kind == "user" and isinstance(message, dict):
            content = message.get("content")
            blocks = content if isinstance(content, list) else [content]
            texts = []
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    target = next((s for s in reversed(steps) if s.source == "agent"), None)
                    result = _text(block.get("content"))
                    if target is None:
                        steps.append(_Step("user", message=result))
                    else:
                        target.answer(str(block.get("tool_use_id")), result)
                        target.key = None  # what the model says after its results is a new turn
                else:
                    texts.append(_text(block))
            if any(texts):
                steps.append(_Step("user", message="\n".join(t for t in texts if t)))
    return steps


def _codex(events: list[dict[str, Any]]) -> list[_Step]:
    steps: list[_Step] = []
    reasoning: list[str] = []
    turn_start = 0
    for event in events:
        kind, item = event.get("type"), event.get("item")
        if kind == "turn.started":
            turn_start = len(steps)
        elif kind == "item.completed" and isinstance(item, dict):
            what = item.get("type")
            if what == "reasoning":
                reasoning.append(_text(item.get("text")))
                continue
            step = _Step("agent")
            step.reasoning, reasoning = reasoning, []
            call_id = str(item.get("id") or f"call-{len(steps) + 1}")
            if what == "agent_message":
                step.message = _text(item.get("text"))
            elif what == "error":
                steps.append(_Step("system", message=f"error: {_text(item.get('message'))}"))
                reasoning = step.reasoning + reasoning
                continue
            elif what == "command_execution":
                step.calls.append(
                    AtifToolCall(
                        tool_call_id=call_id,
                        function_name="shell",
                        arguments={"command": _text(item.get("command"))},
                    )
                )
                output = _text(item.get("aggregated_output"))
                code = item.get("exit_code")
                step.answer(call_id, output + (f"\n[exit code {code}]" if code is not None else ""))
            elif what in ("file_change", "mcp_tool_call", "web_search"):
                arguments = {k: v for k, v in item.items() if k not in ("id", "type", "status")}
                name = str(item.get("tool") or what) if what == "mcp_tool_call" else str(what)
                step.calls.append(
                    AtifToolCall(tool_call_id=call_id, function_name=name, arguments=arguments)
                )
                step.answer(call_id, _text(item.get("status")))
            else:
                step.message = json.dumps(item)
            steps.append(step)
        elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
            usage = event["usage"]
            agents = [s for s in steps[turn_start:] if s.source == "agent"]
            if agents:
                agents[-1].metrics = AtifMetrics(
                    prompt_tokens=_count(usage.get("input_tokens")),
                    completion_tokens=_count(usage.get("output_tokens")),
                    cached_tokens=_count(usage.get("cached_input_tokens")),
                    extra={"per": "turn"},
                )
        elif kind in ("turn.failed", "error"):
            error = event.get("error")
            text = _text(error.get("message") if isinstance(error, dict) else event.get("message"))
            steps.append(_Step("system", message=f"{kind}: {text}"))
    return steps


_BASH_BLOCK = re.compile(r"```(?:bash|sh)?\s*\n(.*?)```", re.DOTALL)


def _mini_swe_agent(events: list[dict[str, Any]]) -> list[_Step]:
    steps: list[_Step] = []
    users = 0
    for event in events:
        role, content = event.get("role"), _text(event.get("content"))
        if role == "system":
            steps.append(_Step("system", message=content))
        elif role == "assistant":
            step = _Step("agent", message=content)
            command = _BASH_BLOCK.search(content)
            if command:
                call_id = f"call-{sum(s.source == 'agent' for s in steps) + 1}"
                step.calls.append(
                    AtifToolCall(
                        tool_call_id=call_id,
                        function_name="bash",
                        arguments={"command": command.group(1).strip()},
                    )
                )
            steps.append(step)
        elif role in ("user", "tool"):
            users += 1
            last = steps[-1] if steps and steps[-1].source == "agent" else None
            if users > 1 and last is not None:
                last.answer(last.calls[0].tool_call_id if last.calls else None, content)
            else:
                steps.append(_Step("user", message=content))
    return steps


def _aider(events: list[dict[str, Any]]) -> list[_Step]:
    steps: list[_Step] = []
    for event in events:
        line = event.get("chat")
        if not isinstance(line, str) or line.startswith("# aider chat started"):
            continue
        if line.startswith("#### "):
            if steps and steps[-1].source == "user":
                steps[-1].message += "\n" + line[5:]
            else:
                steps.append(_Step("user", message=line[5:]))
        elif line.startswith("> "):
            target = next((s for s in reversed(steps) if s.source == "agent"), None)
            if target is None:
                steps.append(_Step("system", message=line[2:]))
            elif target.results:
                last = target.results[-1]
                target.results[-1] = AtifObservationResult(content=f"{last.content}\n{line[2:]}")
            else:
                target.answer(None, line[2:])
        else:
            if not steps or steps[-1].source != "agent" or steps[-1].results:
                if not line.strip():
                    continue
                steps.append(_Step("agent"))
            steps[-1].message = f"{steps[-1].message}\n{line}" if steps[-1].message else line
    return steps


def _shape(events: list[dict[str, Any]]) -> str:
    """Which CLI wrote the events, by the shape of their lines."""
    kinds = {e.get("type") for e in events if isinstance(e.get("type"), str)}
    if kinds & {"assistant", "result"} and any("message" in e for e in events):
        return "claude-code"
    if any(isinstance(k, str) and k.startswith(("thread.", "turn.", "item.")) for k in kinds):
        return "codex"
    if any("chat" in e for e in events):
        return "aider"
    if any("role" in e for e in events):
        return "mini-swe-agent"
    return "unknown"


_READERS = {
    "claude-code": _claude_code,
    "codex": _codex,
    "aider": _aider,
    "mini-swe-agent": _mini_swe_agent,
}


def steps_of(lines: Iterable[str]) -> tuple[str, list[_Step]]:
    """The transcript's events as steps, and which CLI's shape they had."""
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a cut line, or a line the CLI did not write as JSON
        if isinstance(event, dict):
            events.append(event)
    shape = _shape(events)
    reader = _READERS.get(shape)
    return shape, reader(events) if reader else []


def trajectory(
    receipt: Receipt,
    run: RunRecord,
    attempt: AttemptRecord,
    transcript: bytes | None,
    prompt: str | None,
) -> Trajectory:
    """The attempt's trajectory, redacted and validated.

    Raises:
        EvidenceError: the steps read from the transcript do not make a valid trajectory.
    """
    user: list[_Step] = []
    if prompt is not None:
        user.append(_Step("user", message=prompt))
    if attempt.repairFeedback is not None:
        feedback = attempt.repairFeedback.model_dump(mode="json")
        user.append(_Step("user", message="repair feedback: " + json.dumps(feedback)))
    shape, read = "none", list[_Step]()
    if transcript is not None:
        shape, read = steps_of(transcript.decode("utf-8", errors="replace").splitlines())
    built = [*user, *read]
    notes = [f"steps from the agent CLI's own events ({shape} shape)"]
    if prompt is None:
        notes.append("the task's prompt is left out (the checkout's suite is not the batch's)")
    if transcript is None:
        notes.append("the agent left no transcript: only the prompt is known")
    steps = []
    for number, step in enumerate(built, start=1):
        steps.append(
            _clean(
                {
                    "step_id": number,
                    "source": step.source,
                    "message": step.message,
                    **({"model_name": step.model_name} if step.model_name else {}),
                    **({"reasoning_content": "\n".join(step.reasoning)} if step.reasoning else {}),
                    **(
                        {"tool_calls": [c.model_dump(mode="json") for c in step.calls]}
                        if step.calls
                        else {}
                    ),
                    **(
                        {
                            "observation": {
                                "results": [r.model_dump(mode="json") for r in step.results]
                            }
                        }
                        if step.results
                        else {}
                    ),
                    **(
                        {"metrics": step.metrics.model_dump(mode="json", exclude_none=True)}
                        if step.metrics
                        else {}
                    ),
                }
            )
        )
    gateway = attempt.gateway
    per_step = [s.metrics for s in built if s.metrics is not None]
    final = AtifFinalMetrics(
        total_prompt_tokens=gateway.inputTokens if gateway else _sum(per_step, "prompt_tokens"),
        total_completion_tokens=(
            gateway.outputTokens if gateway else _sum(per_step, "completion_tokens")
        ),
        total_cached_tokens=_sum(per_step, "cached_tokens"),
        total_cost_usd=attempt.reportedUsage.costUsd
        if attempt.reportedUsage is not None and attempt.reportedUsage.costUsd is not None
        else None,
        total_steps=len(steps),
        extra={"measuredBy": "model gateway" if gateway else "agent CLI"}
        | (
            {
                "gatewayRequests": gateway.requests,
                "gatewayAnswered": gateway.answered,
                "servedModels": list(gateway.servedModels),
            }
            if gateway
            else {}
        ),
    )
    runner = receipt.runner
    data = {
        "schema_version": ATIF_VERSION,
        "session_id": f"{receipt.batchId}/{run.runId}/attempt-{attempt.attempt}",
        "agent": {
            "name": runner.name if runner else "unknown",
            "version": runner.version if runner else "unknown",
            **({"model_name": receipt.model.id} if receipt.model else {}),
            "extra": {
                "batch": receipt.batchId,
                "run": run.runId,
                "task": run.taskId,
                "attempt": attempt.attempt,
            },
        },
        "steps": steps,
        "notes": "; ".join(notes),
        "final_metrics": final.model_dump(mode="json", exclude_none=True),
        "extra": {
            key: value
            for key, value in (
                ("success", attempt.success),
                ("failureCategory", attempt.failureCategory),
                ("infrastructure", attempt.infrastructureStatus),
                ("solutionDigest", attempt.solutionDigest),
            )
            if value is not None
        },
    }
    try:
        return Trajectory.model_validate(_clean(data))
    except ValidationError as exc:
        raise EvidenceError(
            f"{run.runId} attempt {attempt.attempt}: its transcript does not make a valid "
            f"ATIF trajectory: {exc.errors()[0]['msg']}"
        ) from None


def _sum(metrics: list[AtifMetrics], name: str) -> int | None:
    values = [getattr(m, name) for m in metrics if getattr(m, name) is not None]
    return sum(values) if values else None


def _attempts(receipt: Receipt) -> Iterator[tuple[RunRecord, AttemptRecord]]:
    for run in receipt.runs:
        for attempt in run.attempts:
            yield run, attempt


def _refuse_evidence_target(output: Path, target: Path | None = None) -> None:
    """Files written in a batch's evidence (its ``runs/``, receipt, archives) would replace
    or add files its records do not account for: the checker then rejects that batch
    (this one, or any other). *target*, a file below *output*: reached through a link in
    an earlier export's folders, it may lie in another batch's evidence."""
    held = evidence_holding(target or output)
    if held is not None:
        raise ConfigError(
            f"--output {output}: {target or output} lies in the evidence of the batch in "
            f"{held}; a file written there is one no attempt's record accounts for, and "
            "that batch would fail check-agent-eval's evidence-integrity rule; write "
            "outside its runs/, receipt and archives (default: RUN/atif)"
        )


def export_atif(run_dir: Path, output: Path, prompts: dict[str, str] | None = None) -> list[Path]:
    """Write one ``trajectory.json`` per attempt of the batch in *run_dir* under *output*
    (``<run id>/attempt-<k>/trajectory.json``); *prompts* gives each task's prompt (the
    checkout's, when its suite is the batch's). Returns the files written.

    Raises:
        EvidenceError: the receipt or a transcript cannot be read, or a trajectory is
            not valid (the message names the attempt).
        ConfigError: *output* is inside a batch's ``runs/`` (its evidence).
    """
    _refuse_evidence_target(output)
    run = RunDirectory(run_dir)
    receipt = read_model(run.receipt, Receipt, what="receipt", follow_symlinks=False)
    written: list[Path] = []
    for record, attempt in _attempts(receipt):
        where = run.root / "runs" / record.runId / f"attempt-{attempt.attempt}" / TRANSCRIPT_FILE
        transcript = None
        if attempt.transcriptDigest is not None:
            transcript = read_bounded(
                where,
                what="transcript",
                max_bytes=MAX_TRANSCRIPT_BYTES + 4096,
                follow_symlinks=False,
            )
            if sha256_bytes(transcript) != attempt.transcriptDigest:
                raise EvidenceError(
                    f"{where}: not the transcript the receipt records (its digest differs)"
                )
        made = trajectory(receipt, record, attempt, transcript, (prompts or {}).get(record.taskId))
        target = output / record.runId / f"attempt-{attempt.attempt}" / "trajectory.json"
        _refuse_evidence_target(output, target)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            # Absent, not null: the format's optional fields are left out when unknown.
            write_bytes_atomic(target, made.model_dump_json(exclude_none=True, indent=2).encode())
        except OSError as exc:
            raise EvidenceError(
                f"{target}: cannot be written ({exc.strerror or exc}); "
                f"{len(written)} trajectories were written before it"
            ) from exc
        written.append(target)
    return written
