"""Only regular, bounded, allowlisted files leave the runner's output directory; links,
hard links and special files are refused and make the collection hostile."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from agent_eval.batch.collection import MAX_FILE_BYTES, collect_solution
from agent_eval.digests import sha256_bytes


def collect(src: Path, tmp_path: Path, allowed: list[str] | None = None):  # type: ignore[no-untyped-def]
    return collect_solution(src, tmp_path / "dest", allowed or ["solution.py", "pkg/extra.py"])


def out(tmp_path: Path) -> Path:
    src = tmp_path / "out"
    src.mkdir()
    return src


def test_allowlisted_files_are_copied_with_their_digests(tmp_path: Path) -> None:
    src = out(tmp_path)
    (src / "solution.py").write_bytes(b"x = 1\n")
    (src / "pkg").mkdir()
    (src / "pkg" / "extra.py").write_bytes(b"y = 2\n")
    result = collect(src, tmp_path)
    assert not result.hostile and result.refused == []
    assert [(f.path, f.sha256) for f in result.files] == [
        ("pkg/extra.py", sha256_bytes(b"y = 2\n")),
        ("solution.py", sha256_bytes(b"x = 1\n")),
    ]
    assert (tmp_path / "dest" / "pkg" / "extra.py").read_bytes() == b"y = 2\n"


def test_files_outside_the_allowlist_are_recorded_but_not_hostile(tmp_path: Path) -> None:
    src = out(tmp_path)
    (src / "solution.py").write_bytes(b"x = 1\n")
    (src / "notes.txt").write_text("hello")
    result = collect(src, tmp_path)
    assert not result.hostile
    assert [(r.path, r.reason) for r in result.refused] == [
        ("notes.txt", "not in allowedOutputPaths")
    ]
    assert not (tmp_path / "dest" / "notes.txt").exists()


def test_a_symlink_even_at_an_allowed_path_is_refused_as_hostile(tmp_path: Path) -> None:
    src = out(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("host secret")
    (src / "solution.py").symlink_to(secret)
    result = collect(src, tmp_path)
    assert result.hostile and result.files == []
    assert result.refused[0].reason == "symbolic link"


def test_a_symlinked_directory_is_not_followed(tmp_path: Path) -> None:
    src = out(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "extra.py").write_text("z = 3\n")
    (src / "pkg").symlink_to(tmp_path / "elsewhere")
    result = collect(src, tmp_path)
    assert result.hostile and result.files == []


def test_a_hard_link_is_refused_as_hostile(tmp_path: Path) -> None:
    src = out(tmp_path)
    target = tmp_path / "protected.py"
    target.write_text("protected\n")
    os.link(target, src / "solution.py")
    result = collect(src, tmp_path)
    assert result.hostile and result.refused[0].reason == "hard link"


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    src = out(tmp_path)
    os.mkfifo(src / "solution.py")
    result = collect(src, tmp_path)
    assert result.hostile and "special file" in result.refused[0].reason


def test_a_socket_is_refused(tmp_path: Path) -> None:
    src = out(tmp_path)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(src / "solution.py"))
        result = collect(src, tmp_path)
    assert result.hostile


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    src = out(tmp_path)
    (src / "solution.py").write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    result = collect(src, tmp_path)
    assert result.files == [] and "larger than" in result.refused[0].reason


def test_a_traversal_name_cannot_reach_outside_the_destination(tmp_path: Path) -> None:
    src = out(tmp_path)
    (src / "..solution.py").write_text("x\n")
    result = collect(src, tmp_path, ["solution.py"])
    assert result.files == [] and not any(p.name == "..solution.py" for p in tmp_path.iterdir())


def test_a_hostile_refusal_is_recorded_first_even_past_thousands_of_ordinary_ones(
    tmp_path: Path,
) -> None:
    src = out(tmp_path)
    for n in range(2100):
        (src / f"extra-{n:05d}.py").write_text("x")
    result = collect(src, tmp_path)
    assert result.hostile
    assert "more than 2000 entries" in result.refused[0].reason
    assert result.refused[-1].reason.endswith("more not listed")
    assert len(result.refused) <= 2 * 50 + 1


def test_an_oversized_file_is_refused_as_such_and_the_attempt_says_so(tmp_path: Path) -> None:
    src = out(tmp_path)
    with open(src / "solution.py", "wb") as handle:
        handle.truncate(4 << 30)  # sparse: 4 GiB on paper, nothing on disk
    result = collect(src, tmp_path)
    assert result.files == [] and not result.hostile
    assert [(r.path, r.reason) for r in result.refused] == [
        ("solution.py", f"larger than {MAX_FILE_BYTES} bytes")
    ]
