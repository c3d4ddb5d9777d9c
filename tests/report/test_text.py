"""Saved files are read without trusting them, and text is cut by what it costs in the page.

A read never follows a link below the run directory, never blocks on a FIFO,
reads a bounded number of bytes and says what it could not do; a missing file
is None (optional files are then left out). Lines are numbered as Python
numbers them, characters that would hide or reorder text become marked
segments, and an excerpt never costs more page bytes than its budget.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from markupsafe import escape

from agent_eval.report import text
from agent_eval.report.text import (
    Segment,
    head,
    html_cost,
    read_bounded,
    segments,
    split_lines,
    tail,
)


def test_a_missing_file_is_none_and_a_present_one_is_its_text(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("hello\n")
    assert read_bounded(tmp_path, "a/missing.txt") is None
    assert read_bounded(tmp_path, "nowhere/f.txt") is None
    loaded = read_bounded(tmp_path, "a/f.txt")
    assert loaded is not None
    assert (loaded.text, loaded.size, loaded.partial, loaded.problem) == ("hello\n", 6, False, None)


def test_a_link_anywhere_below_the_root_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("do not show")
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "f").symlink_to(secret)
    (root / "dir").symlink_to(tmp_path)
    for relative in ("real/f", "dir/secret"):
        loaded = read_bounded(root, relative)
        assert loaded is not None and loaded.text is None
        assert loaded.problem is not None and "symbolic link" in loaded.problem


def test_special_files_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name in ("fifo", "dir"):
        loaded = read_bounded(tmp_path, name)
        assert loaded is not None and loaded.text is None
        assert loaded.problem == "not a regular file; not read"


def test_bytes_that_are_not_utf8_are_replaced_and_said(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"ok \xff\xfe end\n")
    loaded = read_bounded(tmp_path, "f")
    assert loaded is not None and loaded.text == "ok \ufffd\ufffd end\n"
    assert loaded.problem is not None and "not valid UTF-8" in loaded.problem


def test_a_large_file_is_read_in_part_from_its_start_or_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text, "MAX_READ_BYTES", 10)
    (tmp_path / "f").write_bytes(b"0123456789abcdefghij")
    start = read_bounded(tmp_path, "f")
    end = read_bounded(tmp_path, "f", from_end=True)
    assert start is not None and (start.text, start.partial, start.size) == ("0123456789", True, 20)
    assert end is not None and end.text == "abcdefghij"


def test_lines_are_split_as_python_numbers_them() -> None:
    assert split_lines("") == []
    assert split_lines("a\r\nb\n") == ["a", "b"]
    assert split_lines("a\x0cb\u2028c\nd") == ["a\x0cb\u2028c", "d"]
    assert split_lines("a\n\n") == ["a", ""]


def test_hiding_and_reordering_characters_become_marked_segments() -> None:
    assert segments("plain") == (Segment("plain"),)
    assert segments("a\u202eb") == (Segment("a"), Segment("\u202e", "U+202E"), Segment("b"))
    # A character HTML would not keep is shown by its code point alone.
    assert segments("\x00x\x1b") == (Segment("", "U+0000"), Segment("x"), Segment("", "U+001B"))
    assert segments("tab\tstays") == (Segment("tab\tstays"),)
    assert segments("\u200b") == (Segment("\u200b", "U+200B"),)


def test_the_cost_of_text_is_its_escaped_bytes() -> None:
    assert html_cost("abc") == 3
    assert html_cost("<&>") == len("&lt;&amp;&gt;")
    assert html_cost("é") == 2


@pytest.mark.parametrize(
    "text",
    ["", "plain", "<script>&amp;</script>", "\"quoted\" 'single'", "é\u202e\x00\t<>&", "&" * 50],
)
def test_the_cost_is_counted_exactly_as_markupsafe_escapes(text: str) -> None:
    assert html_cost(text) == len(str(escape(text)).encode("utf-8"))


def test_an_excerpt_stays_within_its_budget_and_counts_what_it_hid() -> None:
    source = "\n".join(f"line {i} <&>" for i in range(1, 1001))
    first = head(source, 2000)
    last = tail(source, 2000)
    assert 0 < first.cost <= 2000 and 0 < last.cost <= 2000
    assert first.lines[0].number == 1 and first.hidden_after == 1000 - len(first.lines)
    assert last.lines[-1].number == 1000 and last.hidden_before == 1000 - len(last.lines)
    assert first.cut and last.cut
    whole = head(source, 10**7)
    assert not whole.cut and len(whole.lines) == whole.total_lines == 1000


def test_a_very_long_line_is_shortened_and_says_so() -> None:
    excerpt = head("x" * 10_000, 10**6)
    (line,) = excerpt.lines
    assert line.cut and len(line.segments[0].text) == text.MAX_LINE_CHARS
    assert excerpt.cut


def test_a_budget_too_small_for_one_line_shows_none() -> None:
    excerpt = head("a line\nanother\n", 5)
    assert excerpt.lines == () and excerpt.hidden_after == 2
