"""Redaction by value: every evidence file the batch writes from what a runner produced.

The runner saw the gateway token and the allowlisted environment values; whatever it
wrote (its log, transcript, solution) may carry them in any spelling the gateway knows
(:func:`agent_eval.gateway.policy.spellings`). Each spelling is replaced by
``[redacted:NAME]`` before the file is written, so digests are of the stored bytes.

A file is read as the gateway reads an answer (:func:`agent_eval.gateway.policy.reflected`):
besides its literal bytes, with JSON ``\\u`` escapes and percent-encoding undone, and with
the string values of its JSON (a document, server-sent events, JSON lines) joined in
order, under each key and all together, as a client joins a stream's deltas. A value
found in a decoded view is replaced where its escaped characters stand; a value split
over strings is replaced in the first and cut from the others, and only the JSON values
(lines) that held it are written again. A file the gateway's reading still finds a value
in afterwards is never stored: a note naming the values stands in its place, and the
file is *withheld* (fail closed; the batch fails the attempt as ``safety``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_eval.gateway.policy import Unreadable, reflected, spellings

__all__ = [
    "MIN_VALUE_CHARS",
    "Redacted",
    "marker",
    "redact_bytes",
    "redact_evidence",
    "redact_text",
]

MIN_VALUE_CHARS = 4
"""Shorter values are too common (a "1", a "true") to replace as a secret."""

_ROUNDS = 1000
"""How many replacements one file may take before it is withheld instead."""
_MAX_STRINGS = 200_000
"""How many JSON strings of one file are joined (beyond: withheld, never stored unread)."""


def marker(name: str) -> str:
    return f"[redacted:{name}]"


@dataclass(frozen=True)
class Redacted:
    """A file's bytes as they may be stored, and what redaction found in them."""

    data: bytes
    """The bytes to store: redacted, or the note that stands in for a withheld file."""
    found: frozenset[str]
    """The names whose values were found."""
    withheld: bool
    """The file could not be redacted in place: *data* is the note, not the file."""


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


def redact_evidence(data: bytes, secrets: Mapping[str, str]) -> Redacted:
    """*data*, to be stored as evidence, with every value of *secrets* (name to value)
    replaced wherever the gateway's reading of a text would find it (see the module's
    docstring); or, when that cannot be done in place, the note that stands for it."""
    forms = _forms(secrets)
    left = _left(data, secrets, forms)
    if not left:
        return Redacted(data, frozenset(), withheld=False)
    found: set[str] = set()
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        # What is not UTF-8 cannot be rewritten as text without changing other bytes.
        text = None
        kept, found = redact_bytes(data, secrets)
        left = _left(kept, secrets, forms)
        if not left:
            return Redacted(kept, frozenset(found), withheld=False)
    for _ in range(3):  # rewriting a JSON value may spell again what an escape hid
        if text is None:
            break
        # Escaped spellings first, so a literal one never cuts into an escape.
        text = _in_decoded_text(text, forms, found)
        if text is None:
            break
        text, literal = redact_text(text, secrets)
        found |= literal
        text = _in_joined_strings(text, forms, found)
        if text is not None:
            left = _left(text.encode("utf-8"), secrets, forms)
            if not left:
                return Redacted(text.encode("utf-8"), frozenset(found), withheld=False)
    names = sorted(found | left)
    note = (
        "".join(marker(n) for n in names)
        + " a secret stood here in a form that could not be redacted in place, "
        f"so these {len(data)} bytes were not stored\n"
    )
    return Redacted(note.encode("utf-8"), frozenset(names), withheld=True)


def _left(data: bytes, secrets: Mapping[str, str], forms: list[tuple[str, str]]) -> set[str]:
    """The names whose values *data* still spells literally or the gateway's reading
    finds in it (every name, when the text holds more values than that reading reads)."""
    left = {name for form, name in forms if form.encode("utf-8") in data}
    text = data.decode("utf-8", errors="replace")
    for name, value in secrets.items():
        if len(value) < MIN_VALUE_CHARS or name in left:
            continue
        try:
            if reflected(value, {}, text) is not None:
                left.add(name)
        except Unreadable:
            left.add(name)
    return left


# --- Values in a decoded view of the text, replaced where their characters stand --------

_Spans = list[tuple[int, int]]
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def _decoded(
    text: str, spans: _Spans, pattern: re.Pattern[str], one: Callable[[re.Match[str]], str]
) -> tuple[str, _Spans]:
    """*text* with each match of *pattern* replaced by one character, and for each
    character of the result the span of the original text it came from."""
    chars: list[str] = []
    kept: _Spans = []
    at = 0
    for match in pattern.finditer(text):
        chars.extend(text[at : match.start()])
        kept.extend(spans[at : match.start()])
        chars.append(one(match))
        kept.append((spans[match.start()][0], spans[match.end() - 1][1]))
        at = match.end()
    chars.extend(text[at:])
    kept.extend(spans[at:])
    return "".join(chars), kept


def _json_char(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return chr(int(match.group(1), 16))
    return _SIMPLE_ESCAPES.get(match.group(2), match.group(2))


def _joined_surrogates(text: str, spans: _Spans) -> tuple[str, _Spans]:
    """Surrogate pairs as one character, a lone surrogate as U+FFFD (as the gateway reads)."""
    chars: list[str] = []
    kept: _Spans = []
    i = 0
    while i < len(text):
        c = text[i]
        if "\ud800" <= c <= "\udbff" and i + 1 < len(text) and "\udc00" <= text[i + 1] <= "\udfff":
            pair = (c + text[i + 1]).encode("utf-16", "surrogatepass").decode("utf-16")
            chars.append(pair)
            kept.append((spans[i][0], spans[i + 1][1]))
            i += 2
            continue
        chars.append("\ufffd" if "\ud800" <= c <= "\udfff" else c)
        kept.append(spans[i])
        i += 1
    return "".join(chars), kept


def _views(text: str) -> list[tuple[str, _Spans]]:
    """The gateway's decoded views of *text*, each character with its span in *text*."""
    spans = [(i, i + 1) for i in range(len(text))]
    unescaped = _joined_surrogates(*_decoded(text, spans, _JSON_ESCAPE, _json_char))
    percent = lambda m: chr(int(m.group(1), 16))  # noqa: E731
    return [
        unescaped,
        _decoded(*unescaped, _PERCENT, percent),
        _decoded(text, spans, _PERCENT, percent),
    ]


def _occurrences(text: str, forms: list[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """Where spellings stand in *text*, not overlapping, longer spellings first."""
    taken: list[tuple[int, int, str]] = []
    for form, name in forms:
        start = text.find(form)
        while start >= 0:
            end = start + len(form)
            if all(end <= s or start >= e for s, e, _ in taken):
                taken.append((start, end, name))
            start = text.find(form, start + 1)
    return sorted(taken)


def _in_decoded_text(text: str, forms: list[tuple[str, str]], found: set[str]) -> str | None:
    """*text* with each value a decoded view shows replaced where its (escaped) characters
    stand; None when it takes more rounds than a file may.

    An escape never spans a line, so each line is read alone (a value with a line break
    in it is left to the final check); a line without a backslash or a percent sign
    decodes to itself, and the literal pass has been over it already.
    """
    lines = text.splitlines(keepends=True)
    for k, line in enumerate(lines):
        if "\\" not in line and "%" not in line:
            continue
        for _ in range(_ROUNDS):
            seen = ((spans, _occurrences(view, forms)) for view, spans in _views(line))
            spans, hits = next(((s, h) for s, h in seen if h), ([], []))
            if not hits:
                break
            # Spans of hits that do not overlap in a view do not overlap in the line.
            for start, end, name in reversed(hits):
                line = line[: spans[start][0]] + marker(name) + line[spans[end - 1][1] :]
                found.add(name)
        else:
            return None
        lines[k] = line
    return "".join(lines)


# --- Values split over the strings of the text's JSON values ---------------------------


@dataclass
class _Unit:
    """One JSON value of the text: where it stands and what it holds."""

    start: int
    end: int
    value: Any
    changed: bool = False


@dataclass(frozen=True)
class _Slot:
    """One string of a unit, at its path; a key's name when *is_key*."""

    unit: int
    path: tuple[str | int, ...]
    text: str
    is_key: bool


def _units(text: str) -> list[_Unit]:
    """The JSON values the gateway reads in *text*: itself, or its ``data:`` lines, or
    its lines (as :func:`agent_eval.gateway.policy.reflected` reads a body)."""
    try:
        return [_Unit(0, len(text), json.loads(text))]
    except (ValueError, RecursionError):
        pass
    units = []
    at = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        skip = 5 if body.startswith("data:") else 0
        payload = body[skip:].strip()
        if payload and payload != "[DONE]":
            start = at + skip + (len(body[skip:]) - len(body[skip:].lstrip()))
            with contextlib.suppress(ValueError, RecursionError):
                units.append(_Unit(start, start + len(payload), json.loads(payload)))
        at += len(line)
    return units


def _slots(units: list[_Unit]) -> dict[str, list[_Slot]] | None:
    """Every string of *units* in the gateway's order, under the key it was found at and
    all together under "*" (key names too); None past the bound on strings."""
    groups: dict[str, list[_Slot]] = {}
    budget = _MAX_STRINGS
    for index, unit in enumerate(units):
        pending: list[tuple[Any, str, tuple[str | int, ...]]] = [(unit.value, "", ())]
        while pending:
            item, key, path = pending.pop()
            budget -= 1
            if budget < 0 or len(path) > 1000:
                return None
            if isinstance(item, str):
                slot = _Slot(index, path, item, is_key=False)
                groups.setdefault(key, []).append(slot)
                groups.setdefault("*", []).append(slot)
            elif isinstance(item, dict):
                for name, child in reversed(list(item.items())):
                    groups.setdefault("*", []).append(_Slot(index, path, str(name), is_key=True))
                    pending.append((child, str(name), (*path, name)))
            elif isinstance(item, list):
                pending.extend(
                    (child, key, (*path, i)) for i, child in reversed(list(enumerate(item)))
                )
    return groups


def _joined(slots: list[_Slot]) -> str:
    return "".join(s.text for s in slots)


def _set(unit: _Unit, path: tuple[str | int, ...], text: str) -> None:
    if not path:
        unit.value = text
    else:
        parent = unit.value
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = text
    unit.changed = True


def _cut(units: list[_Unit], slots: list[_Slot], start: int, end: int, name: str) -> bool:
    """Replace [start, end) of the joined *slots* by the marker in the first slot it
    touches and remove it from the others; False when a key's name would change."""
    edits = []
    at = 0
    for slot in slots:
        s, e = max(start, at), min(end, at + len(slot.text))
        if s < e:
            if slot.is_key:
                return False
            edits.append((slot, s - at, e - at))
        at += len(slot.text)
    for k, (slot, s, e) in enumerate(edits):
        put = marker(name) if k == 0 else ""
        _set(units[slot.unit], slot.path, slot.text[:s] + put + slot.text[e:])
    return True


def _in_joined_strings(text: str, forms: list[tuple[str, str]], found: set[str]) -> str | None:
    """*text* with each value its JSON strings spell when joined (under one key or all
    together) cut out, its units rewritten; None when it cannot be done in place."""
    units = _units(text)
    for _ in range(_ROUNDS):
        groups = _slots(units)
        if groups is None:
            return None
        # Each key's own strings first: what all of them joined finds across a key's
        # name is often a value of one key, which is cut without touching the name.
        ordered = sorted(groups.items(), key=lambda kv: kv[0] == "*")
        hits = [(slots, hit) for _, slots in ordered for hit in _occurrences(_joined(slots), forms)]
        cut = next((h for s, h in hits if _cut(units, s, *h)), None)
        if cut is None:
            if hits:
                return None  # every one runs into a key's name: not in place
            break
        found.add(cut[2])
    else:
        return None
    whole = len(units) == 1 and (units[0].start, units[0].end) == (0, len(text))
    for unit in sorted((u for u in units if u.changed), key=lambda u: -u.start):
        if whole:
            body = text.strip()
            spelled = json.dumps(unit.value, indent=2 if "\n" in body else None)
            lead = text[: len(text) - len(text.lstrip())]
            return lead + spelled + text[len(text.rstrip()) :]
        text = text[: unit.start] + json.dumps(unit.value) + text[unit.end :]
    return text
