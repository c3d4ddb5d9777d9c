"""Every set of harness files staged into a container imports with the standard library alone.

``agent_eval.layout.STAGED_HARNESS`` names what of the harness each container
or image gets (the verifier, the consumer installer, a runner image). Each set
is copied alone into an empty directory and every one of its modules is
imported by an interpreter without site-packages: a module that needs
pydantic, click, docker or jinja2, or a harness module outside the set, fails
here rather than inside a container. The evidence layout is spelled once,
in ``RunDirectory``, and so are the harness's own root and the paths of the
repository more than one module reads.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import agent_eval
from agent_eval.layout import (
    HARNESS_ROOT,
    IN_CONTAINER_CONSUMER,
    STAGED_HARNESS,
    ConsumerLayout,
    RunDirectory,
    staged_files,
)

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "agent_eval"
THIRD_PARTY = {"pydantic", "click", "docker", "jinja2", "tomli_w", "requests", "appkit"}


def _modules(files: list[str]) -> list[str]:
    names = []
    for rel in files:
        parts = ["agent_eval", *Path(rel).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


@pytest.mark.parametrize("kind", sorted(STAGED_HARNESS))
def test_each_staged_set_imports_with_the_standard_library_alone(kind: str, tmp_path: Path) -> None:
    files = staged_files(HARNESS, kind)
    assert files, kind
    for rel in files:
        target = tmp_path / "agent_eval" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HARNESS / rel, target)
    extra = []
    if kind == "verifier":
        # The repository's own grading helpers are staged beside the kit.
        shutil.copytree(REPO / "graders", tmp_path / "graders")
        extra = ["graders", "graders.results"]
    modules = _modules(files) + extra
    probe = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & " + repr(THIRD_PARTY) + "))\n"
        "print(sorted(m for m in sys.modules if m.startswith('agent_eval')))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-I",
            "-B",
            "-c",
            f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" + probe,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    third_party, ours = done.stdout.splitlines()
    assert third_party == "[]"
    assert set(ast.literal_eval(ours)) == set(_modules(files))


def test_no_staged_set_reaches_the_host_only_parts_of_the_harness() -> None:
    for kind in STAGED_HARNESS:
        for rel in staged_files(HARNESS, kind):
            assert not rel.startswith(("cli/", "engine/", "batch/", "verdict/", "images/")), rel
            assert rel != "verification/in_process.py"


def test_the_evidence_layout_is_one_class_for_writer_checker_and_review(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path)
    assert run.receipt == tmp_path / "receipt.json"
    assert run.archives_manifest == tmp_path / "archives.json"
    assert run.consumer_lock == tmp_path / "consumer-lock.json"
    attempt = run.attempt("forms-2", 1)
    assert attempt.solution == tmp_path / "runs" / "forms-2" / "attempt-1" / "solution"
    assert attempt.analysis == tmp_path / "runs" / "forms-2" / "attempt-1" / "analysis.json"


def test_the_consumer_layout_is_the_same_on_the_host_and_in_a_container(tmp_path: Path) -> None:
    host = ConsumerLayout(tmp_path)
    assert host.site == tmp_path / "site" and host.catalog == tmp_path / "docs" / "api-catalog.json"
    assert str(IN_CONTAINER_CONSUMER.site) == "/consumer/site"
    assert str(IN_CONTAINER_CONSUMER.docs) == "/consumer/docs"


def test_the_harness_root_is_the_running_package() -> None:
    assert Path(agent_eval.__file__).resolve().parent == HARNESS_ROOT
    assert (HARNESS_ROOT / "layout.py").is_file()


# Spellings that belong to layout alone (string constants in code, docstrings aside).
SPELLED_IN_LAYOUT = ("agent_eval.__file__", '"requirements.lock"', '"images/runners', '"runners/')


@pytest.mark.parametrize("spelling", SPELLED_IN_LAYOUT)
def test_a_path_layout_claims_is_spelled_nowhere_else(spelling: str) -> None:
    spelled = sorted(
        path.relative_to(REPO).as_posix()
        for path in HARNESS.rglob("*.py")
        if path.name != "layout.py" and spelling in path.read_text(encoding="utf-8")
    )
    assert spelled == []
