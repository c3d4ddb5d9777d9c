"""Redaction by value: every evidence file the batch writes from what a runner produced.

The runner saw the gateway token and the allowlisted environment values; whatever it
wrote (its log, transcript, solution) may carry them in any spelling the gateway knows
(:func:`agent_eval.gateway.policy.spellings`). Each spelling is replaced by
``[redacted:NAME]`` before the file is written, so digests are of the stored bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_eval.gateway.policy import spellings

__all__ = ["MIN_VALUE_CHARS", "marker", "redact_bytes", "redact_text"]

MIN_VALUE_CHARS = 4
"""Shorter values are too common (a "1", a "true") to replace as a secret."""


def marker(name: str) -> str:
    return f"[redacted:{name}]"


def _forms(secrets: Mapping[str, str]) -> list[tuple[str, str]]:
    """(spelling, name) pairs, longest first, so no shorter form cuts into a longer one."""
    forms: dict[str, str] = {}
    for name, value in secrets.items():
        if len(value) < MIN_VALUE_CHARS:
            continue
        for form in {value, *spellings(value)}:
            forms.setdefault(form, name)
    return sorted(forms.items(), key=lambda kv: (-len(kv[0]), kv[0]))


def redact_text(text: str, secrets: Mapping[str, str]) -> tuple[str, set[str]]:
    """*text* with every spelling of each value of *secrets* (name to value) replaced by
    its marker; and the names that were found."""
    found: set[str] = set()
    for form, name in _forms(secrets):
        if form in text:
            text = text.replace(form, marker(name))
            found.add(name)
    return text, found


def redact_bytes(data: bytes, secrets: Mapping[str, str]) -> tuple[bytes, set[str]]:
    """:func:`redact_text` over bytes; bytes that are not UTF-8 are matched as they are."""
    found: set[str] = set()
    for form, name in _forms(secrets):
        raw = form.encode("utf-8")
        if raw in data:
            data = data.replace(raw, marker(name).encode("utf-8"))
            found.add(name)
    return data, found
