"""A released library built with a build plugin, star re-exports and PEP 562 adopts the harness
with no edit to its source.

Invariants: a repository holding nothing but attrs' published sdist (hatchling with
hatch-vcs and hatch-fancy-pypi-readme; ``attrs.converters`` re-exports
``attr.converters`` with ``from ... import *``; ``attrs.__getattr__`` serves
``__version__`` and the other names its ``__all__`` lists) adopts the harness:
``init`` on the star-re-exported ``attrs.converters:to_bool``, its own build lock,
``tasks verify`` green locally and in the verifier container with a second correct
case in the spelling attrs documents (zero analysis findings), and an oracle batch
that completes with the wheel of the version packing computed from git (not the
sdist's PKG-INFO version). The library's files are never changed.

The sdist is downloaded by scripts/setup, by name and hash
(``tests/data/real-library-sdists.txt``); this test never reaches an index.
It uses this checkout's own virtualenv (the packaging of agent-eval itself is the
semver test's) and one repetition, to stay cheap.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from agent_eval.digests import file_sha256
from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.models import FixtureReport, Receipt
from tests.batches import BIN
from tests.sdists import published_sdist

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
]

LIBRARY, VERSION = "attrs", "26.1.0"

RE_EXPORTED_SPELLING = (
    '"""Correct, as attrs documents it: the converter through the attrs namespace."""\n\n'
    "from typing import Any\n\n"
    "import attrs\n\n\n"
    "def to_bool(val: Any) -> bool:\n"
    "    return attrs.converters.to_bool(val)\n"
)


def files_of(directory: Path) -> dict[str, str]:
    return {
        p.relative_to(directory).as_posix(): file_sha256(p)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def run(root: Path, *command: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(BIN / command[0]), *command[1:]], cwd=root, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def git(root: Path, *args: str) -> str:
    identity = {"GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@example.org"}
    identity |= {"GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@example.org"}
    done = subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
        timeout=60, env={**os.environ, **identity},
    )  # fmt: skip
    return done.stdout.strip()


def test_attrs_adopts_the_harness_with_no_edit_to_its_source(
    engine: ContainerEngine, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    started = time.monotonic()
    laps: dict[str, float] = {}

    def lap(name: str) -> None:
        laps[name] = round(time.monotonic() - started - sum(laps.values()), 1)

    root = tmp_path / "attrs-repo"
    (root / "packages").mkdir(parents=True)
    with tarfile.open(published_sdist(LIBRARY, VERSION)) as archive:
        archive.extractall(root / "packages", filter="data")
    library = root / "packages" / LIBRARY
    (root / "packages" / f"{LIBRARY}-{VERSION}").rename(library)
    assert (library / "PKG-INFO").is_file()
    assert "from attr.converters import *" in (library / "src/attrs/converters.py").read_text()
    as_published = files_of(library)
    git(root, "init", "-q")
    lap("sdist")

    examples = ['["yes"]', '["off"]', "[true]", '["maybe"]']
    done = run(root, "agent-eval", "init", "--function", "attrs.converters:to_bool",
               *(arg for e in examples for arg in ("--example", e)))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote tasks/to-bool/grader.py" in done.stdout
    locked = run(root, "agent-eval", "lock-build")
    assert locked.returncode == 0, locked.stderr
    assert {"hatchling", "hatch-vcs", "hatch-fancy-pypi-readme"} <= {
        line.split("==")[0] for line in locked.stdout.splitlines() if "==" in line
    }
    fetched = run(root, "agent-eval", "fetch-build-wheels")
    assert fetched.returncode == 0, fetched.stderr
    case = root / "fixtures" / "to-bool" / "re-exported-spelling"
    case.mkdir()
    (case / "solution.py").write_text(RE_EXPORTED_SPELLING)
    (case / "expect.json").write_text(json.dumps(
        {"schemaVersion": 1, "kind": "correct", "description": "attrs.converters.to_bool."}
    ))  # fmt: skip
    suite_path = root / "tasks" / "suite.json"
    suite = json.loads(suite_path.read_text())
    suite.update(repetitions=1, scheduledRuns=1, minFirstSuccesses=1, requiredFinalSuccesses=1)
    suite_path.write_text(json.dumps(suite, indent=2) + "\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "agent-eval: a task")
    lap("init-and-lock")

    for verifier in ("local", "docker"):
        if verifier == "docker":
            built = run(root, "agent-eval", "images", "build")
            assert built.returncode == 0, built.stderr[-3000:]
            lap("images")
        verified = run(root, "agent-eval", "tasks", "verify", "--verifier", verifier, "--json")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        report = FixtureReport.model_validate_json(verified.stdout)
        rows = {row.case: row for row in report.rows}
        assert rows["re-exported-spelling"].observed == "pass"
        assert rows["correct"].observed == "pass" and report.ok
        lap(f"verify-{verifier}")

    config = root / ".verification" / "agent-eval" / "runner.json"
    config.parent.mkdir(parents=True, exist_ok=True)  # --output never makes directories
    made = run(root, "agent-eval", "reference-config", "oracle", "--output", str(config))
    assert made.returncode == 0, made.stderr
    batch = run(root, "eval-agent", "--runner-config", str(config))
    assert batch.returncode == 0, batch.stderr[-3000:]
    line: dict[str, Any] = json.loads(batch.stdout)
    assert (line["status"], line["firstSuccesses"], line["finalSuccesses"]) == ("completed", 1, 1)
    lap("batch")
    total = round(time.monotonic() - started, 1)

    receipt_path = Path(line["receipt"])
    receipt_path = receipt_path if receipt_path.is_absolute() else root / receipt_path
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    assert all(r.attempts[-1].success for r in receipt.runs)
    archives = json.loads((receipt_path.parent / "archives.json").read_bytes())["archives"]
    head = git(root, "rev-parse", "HEAD")
    # The version packing computed from git, not the sdist's PKG-INFO (26.1.0).
    # (No tag in this repository: a dev version counted from its commits, at its head.)
    ((name, version),) = [(a["distribution"], a["version"]) for a in archives]
    assert name == LIBRARY and re.fullmatch(rf"0\.1\.dev\d+\+g{head[:12]}", version), version
    assert files_of(library) == as_published
    assert list_leftovers(engine, receipt.batchId) == []
    cache = pytestconfig.cache
    assert cache is not None
    (cache.mkdir("adoption") / "attrs-timings.json").write_text(
        json.dumps({"toFirstCompletedBatchS": total, **laps})
    )
    print(f"empty directory to first completed batch: {total} s {laps}")
