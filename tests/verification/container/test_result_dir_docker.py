"""The host reads the verifier's result directory itself: only the parent's regular files.

The container writes ``/result`` as its root; whatever it leaves there (a link
to a host file, a hard link, a FIFO, a directory, an oversized file) refuses
the result and is never followed, opened as a device or read past its bound.
The docker cases have a real verifier container write each entry.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from agent_eval.engine import ContainerSpec, Mount, ResourceLimits
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.images.build import BuiltImages, build_images
from agent_eval.project import find_project
from agent_eval.verification.container.run import ResultRefused, read_result_dir
from tests.paths import REPO

BOUNDS = {"analysis.json": 2000, "result.json": 2000}

WRITE = r"""
import os, sys
os.chdir("/result")
open("analysis.json", "w").write("a" * 100)
kind = sys.argv[1]
if kind == "symlink":
    os.symlink("/etc/passwd", "result.json")
elif kind == "hardlink":
    open("result.json", "w").write("r")
    os.link("result.json", "analysis.json.1")
    os.rename("analysis.json.1", "analysis.json")
elif kind == "fifo":
    os.mkfifo("result.json")
elif kind == "directory":
    os.mkdir("result.json")
elif kind == "oversize":
    open("result.json", "w").write("r" * 2001)
elif kind == "extra":
    open("result.json", "w").write("r")
    open("grade.json", "w").write("{}")
else:
    open("result.json", "w").write("r" * 100)
"""

REFUSALS = {
    "symlink": "result.json cannot be read|not a regular file",
    "hardlink": "not a regular file with one link",
    "fifo": "not a regular file",
    "directory": "not a regular file",
    "oversize": "2001 bytes, over 2000",
    "extra": r"holds \['grade\.json'\]",
}


def test_the_parents_files_are_read_within_their_bounds(tmp_path: Path) -> None:
    (tmp_path / "analysis.json").write_bytes(b"{}")
    (tmp_path / "result.json").write_bytes(b"[]")
    assert read_result_dir(tmp_path, BOUNDS) == {"analysis.json": b"{}", "result.json": b"[]"}
    assert read_result_dir(tmp_path, {**BOUNDS, "timings.json": 10}) == {
        "analysis.json": b"{}",
        "result.json": b"[]",
    }  # an optional file may be absent: the caller says which ones must be there


def test_a_result_directory_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ResultRefused, match="no result directory"):
        read_result_dir(tmp_path / "link", BOUNDS)


def test_a_file_over_its_bound_is_refused_even_when_it_grows_after_its_size_was_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "result.json").write_bytes(b"x" * 10)
    real_lstat = os.lstat

    def small_lstat(path: os.PathLike[str] | str) -> os.stat_result:
        seen = real_lstat(path)
        fields = list(seen)
        fields[6] = 1  # st_size: claims one byte
        return os.stat_result(fields)

    monkeypatch.setattr(os, "lstat", small_lstat)
    with pytest.raises(ResultRefused, match="larger than 5 bytes"):
        read_result_dir(tmp_path, {"result.json": 5})


@pytest.fixture(scope="module")
def images(engine: DockerEngine, base_image: str) -> BuiltImages:
    """The project's images, built (quick when cached) and pinned by id."""
    return build_images(engine, find_project(REPO).root)


@pytest.mark.docker
@pytest.mark.parametrize("kind", ["plain", *REFUSALS])
def test_what_a_verifier_container_leaves_in_result_is_refused_unless_plain_files(
    engine: DockerEngine, images: BuiltImages, tmp_path: Path, kind: str
) -> None:
    result = tmp_path / "result"
    result.mkdir(mode=0o700)
    container_id = engine.create(
        ContainerSpec(
            image=images.verifier,
            command=("python3", "-c", WRITE, kind),
            role="verifier",
            batch_id=f"test-{uuid.uuid4().hex[:12]}",
            run_id="result-dir",
            limits=ResourceLimits(pids=64, memory_bytes=256 * 2**20, nano_cpus=1_000_000_000),
            mounts=(Mount(result, "/result", read_only=False),),
        )
    )
    try:
        engine.start(container_id)
        assert engine.wait(container_id, 60).exit_code == 0
    finally:
        engine.remove(container_id)
    if kind == "plain":
        assert read_result_dir(result, BOUNDS) == {
            "analysis.json": b"a" * 100,
            "result.json": b"r" * 100,
        }
    else:
        with pytest.raises(ResultRefused, match=REFUSALS[kind]):
            read_result_dir(result, BOUNDS)
