"""Redaction by value of every evidence file written from what the runner produced.

The runner is handed the gateway token and the allowlisted values; whatever it writes may
carry them in any spelling the gateway itself refuses in an answer (the one list,
:func:`agent_eval.gateway.policy.spellings`). None of them reaches a stored file, its
digest, the receipt or the report; a solution that carried one is stored redacted, never
verified, and fails as safety with the files and names on record.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_eval.batch.ports import RunnerOutcome
from agent_eval.digests import sha256_bytes
from agent_eval.gateway.policy import reflected, spellings
from agent_eval.models import RunnerRequest
from agent_eval.redaction import redact_bytes
from agent_eval.report.render import write_report
from tests.batch.test_schedule import Script, reply
from tests.batch.test_schedule_gateway import FIRST, FakeGateway, schedule
from tests.report.test_report import CURRENT, NOW

SETTING = "setting-value-1234"
secrets = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=8, max_size=40)
filler = st.text(st.sampled_from(' \n{}":,abcxyz0123'), max_size=60)


def every_spelling(secret: str) -> list[str]:
    """The gateway's spellings, and base64 of a longer text the secret sits inside."""
    inside = base64.b64encode(b"<<" + secret.encode() + b">>").decode()
    return [*spellings(secret), inside]


def carries(data: bytes, secret: str) -> bool:
    text = data.decode("utf-8", errors="replace")
    return any(form in text for form in spellings(secret)) or bool(reflected(secret, {}, text))


@given(secret=secrets, parts=st.lists(st.tuples(filler, st.integers(0, 100)), max_size=6))
def test_every_spelling_of_a_value_anywhere_is_redacted(
    secret: str, parts: list[tuple[str, int]]
) -> None:
    forms = every_spelling(secret)
    planted = "".join(text + forms[k % len(forms)] for text, k in parts).encode()
    kept, found = redact_bytes(planted, {"AIDER_SETTING": secret})
    assert not carries(kept, secret)
    assert found == ({"AIDER_SETTING"} if parts else set())


@given(secret=secrets, text=filler)
def test_text_without_a_value_is_left_as_it_is(secret: str, text: str) -> None:
    if not carries(text.encode(), secret):
        assert redact_bytes(text.encode(), {"X": secret}) == (text.encode(), set())


def _planting(spelling: str, into_solution: bool = True) -> Script:
    def script(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        token = f"ae-{request.runId}-{request.attempt}"
        body = f"GOOD = '{spelling}'\n" if into_solution else "GOOD\n"
        (workspace / "solution.py").write_text(body + f"# {token}\n")
        stderr = f"the setting was {spelling} and {token}\n".encode()
        # Spelled into the JSON as it is, so a \\u spelling stays one a reader decodes.
        said = '{"said": "' + spelling + '", "token": "' + token + '"}\n'
        done = reply(request, message=f"done with {spelling}")
        return RunnerOutcome(done.stdout, False, False, 0, stderr=stderr, transcript=said.encode())

    return script


def noted(line: bytes, value: str) -> bytes:
    """A gateway record whose message carries *value* as it is."""
    return line.replace(b'"message": null', b'"message": "' + value.encode() + b'"')


def _stored(batch: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(batch.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("spelling", every_spelling(SETTING))
def test_a_solution_carrying_a_value_fails_as_safety_and_no_file_keeps_it(
    tmp_path: Path, spelling: str
) -> None:
    gateway = FakeGateway()
    gateway.default = gateway.default.replace(
        b'"message": null', f'"message": "{SETTING}"'.encode()
    )
    receipt = schedule(
        tmp_path, gateway, _planting(spelling), redactions={SETTING: "AIDER_SETTING"}
    )
    first = receipt.runs[0].attempts[0]
    assert not first.success and first.failureCategory == "safety"
    assert not first.submitted and first.analysisDigest is None  # never verified
    assert first.unsafe and receipt.runs[0].unsafe  # counted as every unsafe attempt is
    assert first.secrets_in_solution == ["AGENT_EVAL_GATEWAY_TOKEN", "AIDER_SETTING"]
    assert any(
        d.category == "safety" and "AIDER_SETTING" in d.message for d in first.diagnostics
    ), first.diagnostics
    redacted = {r.file: r.names for r in first.redactions}
    assert redacted["solution/solution.py"] == ["AGENT_EVAL_GATEWAY_TOKEN", "AIDER_SETTING"]
    assert redacted["runner.log"] == ["AGENT_EVAL_GATEWAY_TOKEN", "AIDER_SETTING"]
    assert redacted["transcript.jsonl"] == ["AGENT_EVAL_GATEWAY_TOKEN", "AIDER_SETTING"]
    assert redacted["gateway.jsonl"] == ["AIDER_SETTING"]
    attempt = tmp_path / "batch" / "runs" / FIRST / "attempt-1"
    # The record's digests are of the redacted bytes stored.
    for name, digest in first.evidence_files().items():
        assert sha256_bytes((attempt / name).read_bytes()) == digest, name
    for path, data in _stored(tmp_path / "batch").items():
        assert not carries(data, SETTING), path
        for run in receipt.runs:
            for a in run.attempts:
                assert f"ae-{run.runId}-{a.attempt}".encode() not in data, path


@pytest.mark.parametrize("spelling", every_spelling(SETTING)[:4])
def test_the_report_and_summary_never_show_a_value_planted_in_every_evidence_file(
    tmp_path: Path, spelling: str
) -> None:
    gateway = FakeGateway()
    gateway.default = gateway.default.replace(
        b'"message": null', f'"message": "{spelling}"'.encode()
    )
    schedule(
        tmp_path,
        gateway,
        _planting(spelling, into_solution=False),
        redactions={SETTING: "AIDER_SETTING"},
    )
    html = write_report(tmp_path / "batch", current=CURRENT, now=NOW).read_bytes()
    assert b"[redacted:AIDER_SETTING]" in html or b"redacted" in html
    assert not carries(html, SETTING)
    for path, data in _stored(tmp_path / "batch").items():
        assert not carries(data, SETTING), path


@pytest.mark.parametrize("spelling", every_spelling(SETTING)[:4])
def test_a_failed_runners_message_reaches_the_receipt_redacted(
    tmp_path: Path, spelling: str
) -> None:
    def failed(request: RunnerRequest, workspace: Path) -> RunnerOutcome:
        return reply(request, "failed", message=f"could not use {spelling}", failureKind="error")

    receipt = schedule(tmp_path, FakeGateway(), failed, redactions={SETTING: "AIDER_SETTING"})
    said = receipt.runs[0].attempts[0].diagnostics[0].message
    assert "[redacted:AIDER_SETTING]" in said
    for path, data in _stored(tmp_path / "batch").items():
        assert not carries(data, SETTING), path
