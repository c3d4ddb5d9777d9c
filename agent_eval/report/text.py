"""Reading saved files without trusting them, and cutting text to what a page can hold.

A run directory can be edited by anyone who holds it: a saved file may be
missing, a link, a FIFO, huge or not UTF-8. A read here never follows a link
(anywhere below the run directory), never blocks, reads a bounded number of
bytes and turns every problem into a sentence the report prints instead.

Text is cut by what it costs in the page, its escaped UTF-8 bytes plus the
markup of each line, so a file full of ``<`` cannot push a report past its
bound. Characters that would hide or reorder what a reviewer reads
(bidirectional controls, zero-width characters, other control characters)
become their own segments, which the template shows with their code point.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_READ_BYTES",
    "Excerpt",
    "Line",
    "Loaded",
    "Segment",
    "head",
    "html_cost",
    "markdown_text",
    "one_line",
    "read_bounded",
    "segments",
    "split_lines",
    "tail",
]

MAX_READ_BYTES = 4 * 1024 * 1024
"""No more of a file than this is ever read; the rest is reported as not shown."""
MAX_LINE_CHARS = 2000
"""A longer line (minified code, a one-line log) is cut, and says so."""
LINE_MARKUP_BYTES = 40
"""What the markup around one shown line costs (its element and number)."""
SEGMENT_MARKUP_BYTES = 48
"""What the markup around one marked character costs."""

# Characters that change how the text around them is displayed, or are not
# displayed at all: each is shown as a marked segment with its code point.
_FORMAT = frozenset(
    "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2066\u2067\u2068\u2069\ufeff"
)
# Characters HTML would drop, replace or treat as a line break: shown by their
# code point only.
_REPLACED = frozenset(
    [chr(c) for c in range(0x20) if c != 0x09]
    + [chr(0x7F)]
    + [chr(c) for c in range(0x80, 0xA0)]
    + ["\u2028", "\u2029"]
)


_MARKED = re.compile("[" + re.escape("".join(sorted(_FORMAT | _REPLACED))) + "]")


@dataclass(frozen=True)
class Segment:
    """A run of ordinary text, or one marked character."""

    text: str
    """What goes into the page (empty for a character HTML would not keep)."""
    codepoint: str | None = None
    """``U+XXXX`` when this segment is one marked character."""


@dataclass(frozen=True)
class Line:
    """One shown line: its number in the file, its segments, and what it is."""

    number: int
    segments: tuple[Segment, ...]
    cut: bool = False
    """The line was longer than :data:`MAX_LINE_CHARS` and only its start is shown."""
    kind: str = ""
    """A class for the template (diff lines: ``add``, ``del``, ``hunk``, ``file``)."""
    anchor: str | None = None
    """An id for links to this line (set for lines a finding points at)."""
    notes: tuple[str, ...] = ()
    """Findings shown under the line."""


@dataclass(frozen=True)
class Excerpt:
    """The lines of a text that fit its budget, and how many did not."""

    lines: tuple[Line, ...]
    total_lines: int
    hidden_before: int = 0
    """Lines not shown before the first shown one (a tail)."""
    hidden_after: int = 0
    """Lines not shown after the last shown one (a head)."""
    cost: int = 0
    """Page bytes the shown lines take (what they spent of the budget)."""

    @property
    def cut(self) -> bool:
        """Whether anything of the text is not shown."""
        return bool(self.hidden_before or self.hidden_after or any(ln.cut for ln in self.lines))


@dataclass(frozen=True)
class Loaded:
    """What a bounded read found."""

    text: str | None
    """The text read; None when nothing could be read."""
    size: int
    """The file's size in bytes (0 when it could not be read)."""
    partial: bool = False
    """Only the first (or last) :data:`MAX_READ_BYTES` were read."""
    problem: str | None = None
    """Why the text is missing or not exactly the file's (shown as a note)."""


def link_on_the_way(root: Path, path: Path) -> str | None:
    """The first component of *path* below *root* that is a symbolic link, relative to
    *root* (None: none is, or the path ends early). The report reads nothing through a
    link at any level of the run directory, not only as the file itself."""
    here = root
    for part in path.relative_to(root).parts:
        here = here / part
        try:
            info = os.lstat(here)
        except OSError:
            return None
        if stat.S_ISLNK(info.st_mode):
            return here.relative_to(root).as_posix()
    return None


def read_bounded(
    root: Path, relative: str | PurePosixPath, *, from_end: bool = False
) -> Loaded | None:
    """Read *relative* below *root* as text, at most :data:`MAX_READ_BYTES` of it.

    Returns None when the file does not exist (optional files are then left
    out silently); a Loaded with a problem when it exists but is a link, a
    special file, unreadable or not UTF-8. *from_end* reads the last bytes of
    a file too large to read whole, as a log's tail.
    """
    path = root
    parts = PurePosixPath(relative).parts
    if not parts:
        return Loaded(None, 0, problem="an empty path; not read")
    for part in parts:
        path = path / part
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return Loaded(None, 0, problem=f"cannot be read: {exc.strerror}")
        if stat.S_ISLNK(info.st_mode):
            return Loaded(None, 0, problem=f"{path.relative_to(root)} is a symbolic link; not read")
    if not stat.S_ISREG(info.st_mode):
        return Loaded(None, 0, problem="not a regular file; not read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return Loaded(None, 0, problem=f"cannot be read: {exc.strerror}")
    try:
        size = os.fstat(fd).st_size
        partial = size > MAX_READ_BYTES
        if partial and from_end:
            os.lseek(fd, size - MAX_READ_BYTES, os.SEEK_SET)
        data = _read_at_most(fd, MAX_READ_BYTES)
    except OSError as exc:
        return Loaded(None, 0, problem=f"cannot be read: {exc.strerror}")
    finally:
        os.close(fd)
    try:
        text = data.decode("utf-8")
        problem = None
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        problem = "not valid UTF-8; undecodable bytes are shown as U+FFFD"
    if partial and text and not from_end:
        # A cut may split a multi-byte character; that replacement is not the file's.
        text = text.rstrip("\ufffd")
    return Loaded(text, size, partial=partial, problem=problem)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def split_lines(text: str) -> list[str]:
    """Lines as Python numbers them: split at ``\\n`` (a ``\\r`` before it dropped).

    ``str.splitlines`` would also split at form feeds and Unicode separators,
    which would shift every later line number against the analysis.
    """
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def segments(line: str) -> tuple[Segment, ...]:
    """*line* as ordinary runs and marked characters."""
    out: list[Segment] = []
    start = 0
    for found in _MARKED.finditer(line):
        i, char = found.start(), found.group()
        if i > start:
            out.append(Segment(line[start:i]))
        # A format character stays in the page (shown literally, in an isolate);
        # one HTML would not keep is shown by its code point alone.
        out.append(Segment(char if char in _FORMAT else "", f"U+{ord(char):04X}"))
        start = i + 1
    if start < len(line):
        out.append(Segment(line[start:]))
    return tuple(out)


def html_cost(text: str) -> int:
    """Bytes *text* takes in the page once escaped (as ``markupsafe.escape`` escapes it:
    ``&`` and the quotes take 4 more bytes, ``<`` and ``>`` 3 more), counted without
    building the escaped copy."""
    return (
        len(text.encode("utf-8"))
        + 4 * (text.count("&") + text.count('"') + text.count("'"))
        + 3 * (text.count("<") + text.count(">"))
    )


def _line_cost(segs: Sequence[Segment]) -> int:
    return LINE_MARKUP_BYTES + sum(
        html_cost(s.text) + (SEGMENT_MARKUP_BYTES if s.codepoint else 0) for s in segs
    )


def _make_line(number: int, text: str, kind: str, notes: tuple[str, ...]) -> tuple[Line, int]:
    cut = len(text) > MAX_LINE_CHARS
    segs = segments(text[:MAX_LINE_CHARS] if cut else text)
    cost = _line_cost(segs) + sum(LINE_MARKUP_BYTES + html_cost(n) for n in notes)
    return Line(number=number, segments=segs, cut=cut, kind=kind, notes=notes), cost


def _take(
    numbered: Iterable[tuple[int, str]],
    budget: int,
    kinds: Mapping[int, str] | None,
    notes: Mapping[int, tuple[str, ...]] | None,
) -> tuple[list[Line], int]:
    taken: list[Line] = []
    spent = 0
    for number, text in numbered:
        line, cost = _make_line(
            number, text, (kinds or {}).get(number, ""), (notes or {}).get(number, ())
        )
        if spent + cost > budget:
            break
        taken.append(line)
        spent += cost
    return taken, spent


def head(
    text: str,
    budget: int,
    kinds: Mapping[int, str] | None = None,
    notes: Mapping[int, tuple[str, ...]] | None = None,
) -> Excerpt:
    """The first lines of *text* that fit *budget* bytes of page.

    *kinds* gives a line a class, *notes* the findings shown under it (their
    cost counts against the budget too); both are keyed by line number.
    """
    lines = split_lines(text)
    taken, spent = _take(enumerate(lines, start=1), budget, kinds, notes)
    return Excerpt(
        lines=tuple(taken),
        total_lines=len(lines),
        hidden_after=len(lines) - len(taken),
        cost=spent,
    )


def tail(text: str, budget: int) -> Excerpt:
    """The last lines of *text* that fit *budget* bytes of page (a log's end)."""
    lines = split_lines(text)
    backwards, spent = _take(reversed(list(enumerate(lines, start=1))), budget, None, None)
    return Excerpt(
        lines=tuple(reversed(backwards)),
        total_lines=len(lines),
        hidden_before=len(lines) - len(backwards),
        cost=spent,
    )


_MARKDOWN_INLINE = re.compile(r"([\\`*_\[\]<!&|~])")
"""What can begin inline structure within a line (emphasis, a code span, a link or image, raw
HTML such as a comment, an entity, a table cell, strikethrough) or escape: a line the summary
writes starts with its own text, so no block (a heading, a list) can begin inside it."""


def one_line(value: str) -> str:
    """*value* as one line of plain text for a terminal or a document: every control,
    formatting (bidirectional overrides and isolates, zero-width characters), separator
    other than the space, private-use or unassigned character is written as its code
    point, so a name cannot break the line, reorder what follows or hide itself."""
    return "".join(
        f"U+{ord(char):04X}"
        if char in _FORMAT or (unicodedata.category(char)[0] in "CZ" and char != " ")
        else char
        for char in value
    )


def markdown_text(value: str) -> str:
    """*value* as literal text inside a line of Markdown: :func:`one_line` (so no newline
    can begin a heading), then each character that could begin inline structure
    backslash-escaped (CommonMark's escapes), so no link, table cell, emphasis, code span
    or HTML (a comment hiding the rest) can begin in it either."""
    return _MARKDOWN_INLINE.sub(r"\\\1", one_line(value))
