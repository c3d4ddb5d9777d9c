"""A decision as a person reads it: the verdict, one reason a line, and whether a
rejection is the one every built-in reference runner's batch gets."""

from __future__ import annotations

import unicodedata

from agent_eval.models import QualificationResult, Receipt

__all__ = ["decision_lines", "expected_self_test", "plain"]

SELF_TEST_RULE = "not-self-test:"
"""The rule a batch of a built-in reference runner (or of no real model) always fails."""

_KEEP = frozenset(" ")


def plain(text: str, limit: int = 200) -> str:
    """*text* as one line of inert text: every control, format (bidi overrides
    included), separator other than a space, or unpaired surrogate shown as its
    ``\\uXXXX`` escape, so a name from the evidence cannot move the cursor, start a
    line or reorder what a terminal shows; cut at *limit* characters with an ellipsis."""
    shown = "".join(
        ch
        if ch in _KEEP or unicodedata.category(ch)[0] not in "CZ"
        else (f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
        for ch in text[:limit]
    )
    return shown + ("…" if len(text) > limit else "")


def expected_self_test(result: QualificationResult) -> bool:
    """Rejected for being self-test alone: what a reference runner's batch always gets
    (the oracle's batch that completes 18/18 included), not a finding about the library."""
    return bool(result.reasons) and all(r.startswith(SELF_TEST_RULE) for r in result.reasons)


def decision_lines(result: QualificationResult, receipt: Receipt | None = None) -> list[str]:
    """The decision for a terminal: the verdict, what the batch was, one reason a line."""
    if result.qualified:
        head = "QUALIFIED"
    elif expected_self_test(result):
        head = "REJECTED (expected: a self-test batch never qualifies)"
    else:
        count = len(result.reasons)
        head = f"REJECTED ({count} reason{'s' if count != 1 else ''})"
    lines = [head]
    if receipt is not None:
        who = "unknown runner"
        if receipt.runner is not None:
            who = f"{plain(receipt.runner.name)} {plain(receipt.runner.version)}"
        model = plain(receipt.model.id) if receipt.model is not None else "unknown model"
        lines.append(
            f"  batch {plain(receipt.batchId)}: {receipt.status}, {who}, {model}; "
            f"first {receipt.firstSuccesses}/{receipt.scheduledRuns}, "
            f"final {receipt.finalSuccesses}/{receipt.scheduledRuns}"
            + (" (partial)" if receipt.selection is not None else "")
        )
    lines += [f"  - {plain(reason, 2000)}" for reason in result.reasons]
    lines += [f"  note: {plain(note, 2000)}" for note in result.notes or []]
    if expected_self_test(result):
        lines.append(
            "  A built-in reference runner (oracle, mutant, null) checks the harness, not an "
            "agent: run a real agent's runner config to get a decision that can qualify."
        )
    return lines
