"""A stored file is redacted as the gateway reads an answer, not only where a value stands
spelled whole.

A value split over two JSON string deltas (server-sent ``content_block_delta`` events,
JSON lines) or partly ``\\uXXXX``-escaped inside a JSON string is found in the decoded
text: no decoding of the stored bytes (raw, JSON-unescaped, deltas joined) holds it.
Where it can, redaction keeps the file's structure (each event still parses, the
value's place holds ``[redacted:NAME]``); where it cannot, the file is withheld: a note
naming the values is stored instead, the record says so and the attempt is unsafe.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agent_eval.batch.ports import RunnerOutcome
from agent_eval.gateway.policy import reflected
from agent_eval.models import RunnerRequest
from agent_eval.redaction import marker, redact_evidence
from agent_eval.report.render import write_report
from tests.batch.test_schedule import reply
from tests.batch.test_schedule_gateway import FakeGateway, schedule
from tests.report.test_report import CURRENT, NOW

NAME = "AIDER_SETTING"
TOKEN_CHARS = st.characters(
    whitelist_categories=("Lu", "Ll", "Nd"), whitelist_characters="-_.", max_codepoint=0x7E
)
PRINTABLE = st.characters(min_codepoint=0x21, max_codepoint=0x7E)


def escaped(text: str, mask: list[bool]) -> str:
    """*text* as the inside of a JSON string, the characters *mask* marks as ``\\u`` escapes."""
    out = []
    for char, escape in zip(text, mask + [False] * len(text), strict=False):
        out.append(f"\\u{ord(char):04x}" if escape else json.dumps(char)[1:-1])
    return "".join(out)


def delta(inside: str, stream: bool) -> str:
    """One delta whose text is *inside* (already spelled as a JSON string's inside)."""
    if stream:
        event = (
            '{"type": "content_block_delta", "index": 0, '
            '"delta": {"type": "text_delta", "text": "' + inside + '"}}'
        )
        return f"event: content_block_delta\ndata: {event}\n\n"
    return '{"type": "assistant", "text": "' + inside + '"}\n'


@st.composite
def planted(draw: st.DrawFn, chars: st.SearchStrategy[str]) -> tuple[str, bytes, int]:
    """A secret, a stream of deltas that spells it split and partly escaped, the deltas."""
    secret = draw(st.text(chars, min_size=8, max_size=32))
    cuts = sorted(draw(st.sets(st.integers(1, len(secret) - 1), max_size=3)))
    pieces = [secret[a:b] for a, b in zip([0, *cuts], [*cuts, len(secret)], strict=True)]
    stream = draw(st.booleans())
    filler = st.text(st.sampled_from("abc xyz.,"), max_size=12)
    parts = [delta(escaped(draw(filler), []), stream) for _ in range(draw(st.integers(0, 2)))]
    for k, piece in enumerate(pieces):
        mask = draw(st.lists(st.booleans(), min_size=len(piece), max_size=len(piece)))
        before = draw(filler) if k == 0 else ""
        after = draw(filler) if k == len(pieces) - 1 else ""
        parts.append(delta(escaped(before, []) + escaped(piece, mask) + escaped(after, []), stream))
    parts += [delta(escaped(draw(filler), []), stream) for _ in range(draw(st.integers(0, 2)))]
    return secret, "".join(parts).encode(), len(parts)


_U = re.compile(r"\\u([0-9a-fA-F]{4})")


def decodings(data: bytes) -> list[str]:
    """The stored bytes read every way a reader could: as they are, with JSON ``\\u``
    escapes undone, and each JSON line's (or event's) strings joined in order."""
    text = data.decode("utf-8", errors="replace")
    views = [text, _U.sub(lambda m: chr(int(m.group(1), 16)), text)]
    texts = []
    for line in text.splitlines():
        payload = line[5:].strip() if line.startswith("data:") else line.strip()
        try:
            value = json.loads(payload)
        except ValueError:
            continue
        texts.append(value.get("delta", value).get("text", "") if isinstance(value, dict) else "")
    views.append("".join(texts))
    return views


def assert_nowhere(secret: str, data: bytes) -> None:
    for view in decodings(data):
        assert secret not in view
    assert reflected(secret, {}, data.decode("utf-8", errors="replace")) is None


@given(planted(TOKEN_CHARS))
def test_a_token_split_over_deltas_and_partly_escaped_is_redacted_in_place(
    case: tuple[str, bytes, int],
) -> None:
    secret, data, events = case
    kept = redact_evidence(data, {NAME: secret})
    assert not kept.withheld and kept.found == {NAME}
    assert_nowhere(secret, kept.data)
    # The structure holds: as many events, each still JSON, the marker in the joined text.
    lines = [x for x in kept.data.decode().splitlines() if x and not x.startswith("event:")]
    assert len(lines) == events
    for line in lines:
        json.loads(line.removeprefix("data:"))
    assert marker(NAME) in decodings(kept.data)[-1]


@given(planted(PRINTABLE))
def test_no_decoding_of_a_stored_file_holds_any_split_or_escaped_value(
    case: tuple[str, bytes, int],
) -> None:
    secret, data, _ = case
    kept = redact_evidence(data, {NAME: secret})
    assert kept.found == {NAME}
    if secret in marker(NAME):
        return  # a value the marker itself spells cannot be told from the marker
    assert_nowhere(secret, kept.data)


def test_a_value_that_cannot_be_redacted_in_place_withholds_the_file() -> None:
    # Split between a key's name and a value: no string can be cut without changing
    # the object's keys, so the file is not stored.
    secret = "sk-live-0123456789"
    data = (json.dumps({"sk-live-01234": "56789"}) + "\n").encode()
    kept = redact_evidence(data, {NAME: secret})
    assert kept.withheld and kept.found == {NAME}
    assert kept.data.startswith(marker(NAME).encode()) and b"not stored" in kept.data
    assert_nowhere(secret, kept.data)


def test_a_file_without_a_value_is_stored_as_it_is() -> None:
    data = delta("hello", True).encode() + delta("world", True).encode()
    assert redact_evidence(data, {NAME: "sk-live-0123456789"}).data == data


SETTING = "setting-value-1234"


def _transcript(lines: bytes, solution: str = "GOOD = 1\n"):  # type: ignore[no-untyped-def]
    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        (workspace / "solution.py").write_text(solution)
        done = reply(request)
        return RunnerOutcome(done.stdout, False, False, 0, stderr=b"", transcript=lines)

    return script


def test_a_transcript_with_a_value_split_over_its_deltas_is_stored_redacted(
    tmp_path: Path,
) -> None:
    lines = (delta("the setting is sett", False) + delta("ing-value-1234.", False)).encode()
    receipt = schedule(
        tmp_path, FakeGateway(), _transcript(lines), redactions={SETTING: "AIDER_SETTING"}
    )
    first = receipt.runs[0].attempts[0]
    redacted = {r.file: r for r in first.redactions}
    assert redacted["transcript.jsonl"].names == ["AIDER_SETTING"]
    assert not redacted["transcript.jsonl"].withheld and not first.unsafe
    stored = (tmp_path / "batch" / "runs" / receipt.runs[0].runId / "attempt-1").joinpath(
        "transcript.jsonl"
    )
    assert_nowhere(SETTING, stored.read_bytes())
    assert [json.loads(x)["text"] for x in stored.read_text().splitlines()] == [
        "the setting is [redacted:AIDER_SETTING]",
        ".",
    ]


def test_a_transcript_that_cannot_be_redacted_is_withheld_and_the_attempt_is_unsafe(
    tmp_path: Path,
) -> None:
    lines = (json.dumps({"setting-val": "ue-1234"}) + "\n").encode()
    receipt = schedule(
        tmp_path, FakeGateway(), _transcript(lines), redactions={SETTING: "AIDER_SETTING"}
    )
    first = receipt.runs[0].attempts[0]
    assert first.withheld_files == ["transcript.jsonl"] and first.unsafe
    assert first.failureCategory == "safety" and not first.success
    assert "could not be redacted in place" in first.diagnostics[0].message
    stored = tmp_path / "batch" / "runs" / receipt.runs[0].runId / "attempt-1"
    assert b"not stored" in (stored / "transcript.jsonl").read_bytes()
    html = write_report(tmp_path / "batch", current=CURRENT, now=NOW).read_text()
    cell = f'href="#att-{receipt.runs[0].runId}-1"'
    at = html.index(cell)
    assert 'data-outcome="unsafe"' in html[html.rindex("<a", 0, at) : html.index(">", at)]
    for path in (tmp_path / "batch").rglob("*"):
        if path.is_file():
            assert_nowhere(SETTING, path.read_bytes())


def test_a_runners_message_with_a_partly_escaped_value_reaches_the_receipt_redacted(
    tmp_path: Path,
) -> None:
    spelled = "setting-" + escaped("value", [True, False, True]) + "-1234"

    def failed(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return reply(request, "failed", message=f"could not use {spelled}", failureKind="error")

    receipt = schedule(tmp_path, FakeGateway(), failed, redactions={SETTING: "AIDER_SETTING"})
    said = receipt.runs[0].attempts[0].diagnostics[0].message
    assert said.endswith("could not use [redacted:AIDER_SETTING]"), said
    for path in (tmp_path / "batch").rglob("*"):
        if path.is_file():
            assert_nowhere(SETTING, path.read_bytes())
