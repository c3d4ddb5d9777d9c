"""A real library from PyPI adopts the harness from an empty directory to a judged batch.

Invariants: agent-eval installed from this checkout into a fresh virtualenv
(``pip install``, not editable: what ships is what the package declares) takes a
repository holding nothing but a released library's source distribution
(``packages/semver/``, the sdist as published, its version computed by its build)
and tasks of its own (one written by ``agent-eval init``, one by hand), with the
build lock ``agent-eval lock-build`` writes: it verifies its fixtures locally
and in the verifier container, builds its images from the recipes the harness
ships (it has no ``images/`` of its own), completes an oracle batch with every
run a success and the wheel of the version the build computed, is rejected by
the checker for ``not-self-test`` alone, and gets a report. The sdist is
downloaded by scripts/setup, by name and hash, never by the test nor kept in this
repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from agent_eval.engine import ContainerEngine, list_leftovers
from agent_eval.models import Receipt
from tests.batches import BIN
from tests.paths import REPO
from tests.sdists import published_sdist

pytestmark = pytest.mark.docker

LIBRARY, VERSION = "semver", "3.1.2"
"""Pure Python, no dependencies, setuptools, its package under src/."""

NEXT_MINOR: dict[str, str | dict[str, Any]] = {
    "task.json": {
        "schemaVersion": 1,
        "id": "next-minor",
        "title": "The next minor release of a version",
        "allowedOutputPaths": ["solution.py"],
        "allowedImports": ["semver/*"],
        "requiredPeers": ["semver"],
        "assertionIds": ["bumps-the-minor", "invalid-version-refused"],
        "safetyAssertionIds": [],
        "seedReferences": [],
        "requiredIntegration": [{"symbols": ["semver.version.Version.parse"]}],
    },
    "contract.pyi": (
        "def next_minor(version: str) -> str:\n"
        '    """The next minor release of *version*; ValueError when it is not one."""\n'
    ),
    "prompt.md": """# {{ title }}

Write `{{ allowed_output_paths | join("`, `") }}` so that `next_minor` returns the next
minor release of a semantic version: `1.4.2` becomes `1.5.0`, and a pre-release or build
part is dropped (`0.9.0-rc.1+build.7` becomes `0.10.0`). A string that is not a semantic
version (`1.4`, `v1.4.2`) raises `ValueError`.

## Required library integration

Parse with `semver.Version.parse` and bump with the library; do not parse versions yourself.

## Where to look

The library's guides and its API catalog are in `{{ consumer_dir }}`. You may import
{{ allowed_imports }} and the Python standard library.

## Contract

```python
{{contract}}
```
""",
    "grader.py": '''"""Grader of next-minor: the next minor release, and no version made up."""

from __future__ import annotations

from agent_eval.grading import Grader, Session, SolutionRaised

BUMPS = {"1.4.2": "1.5.0", "0.9.0-rc.1+build.7": "0.10.0", "2.0.0": "2.1.0"}
INVALID = ("1.4", "v1.4.2", "")


class NextMinorGrader(Grader):
    """Valid versions are bumped; anything else raises ValueError."""

    task_id = "next-minor"
    assertion_ids = ("bumps-the-minor", "invalid-version-refused")
    safety_assertion_ids = ()

    def run(self, session: Session) -> None:
        """Two scenarios, one assertion each."""
        with session.scenario("versions") as sc:
            bumped = True
            for given, wanted in BUMPS.items():
                try:
                    got = sc.call("next_minor", given)
                except SolutionRaised as raised:
                    sc.note(f"next_minor({given!r}) raised {raised.type}")
                    bumped = False
                    continue
                if got != wanted:
                    sc.note(f"next_minor({given!r}) is {got!r}, not {wanted!r}")
                    bumped = False
            sc.record("bumps-the-minor", bumped)
        with session.scenario("not versions") as sc:
            refused = True
            for given in INVALID:
                try:
                    got = sc.call("next_minor", given)
                except SolutionRaised as raised:
                    refused = refused and raised.type == "ValueError"
                    continue
                sc.note(f"next_minor({given!r}) returned {got!r}")
                refused = False
            sc.record("invalid-version-refused", refused)


GRADER = NextMinorGrader()
''',
}
NEXT_MINOR_FIXTURES: dict[str, tuple[str, dict[str, Any]]] = {
    "correct": (
        "from semver import Version\n\n\n"
        "def next_minor(version: str) -> str:\n"
        "    return str(Version.parse(version).bump_minor())\n",
        {"kind": "correct", "description": "Parses with Version.parse and bumps the minor."},
    ),
    "bumps-the-patch": (
        "from semver import Version\n\n\n"
        "def next_minor(version: str) -> str:\n"
        "    return str(Version.parse(version).bump_patch())\n",
        {"kind": "negative", "description": "Bumps the patch instead of the minor.",
         "failedAssertions": ["bumps-the-minor"], "findings": []},
    ),
    "keeps-what-it-cannot-parse": (
        "from semver import Version\n\n\n"
        "def next_minor(version: str) -> str:\n"
        "    try:\n"
        "        return str(Version.parse(version).bump_minor())\n"
        "    except ValueError:\n"
        "        return version\n",
        {"kind": "negative", "description": "Returns an invalid version unchanged.",
         "failedAssertions": ["invalid-version-refused"], "findings": []},
    ),
}  # fmt: skip


def installed(venv: Path) -> Path:
    """agent-eval installed from this checkout into a fresh virtualenv at *venv*; its bin/.

    pip builds a directory in place, so it builds a copy: the checkout gets no build/.
    """
    source = venv.parent / "agent-eval-source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".verification", "build", "*.egg-info", "__pycache__", ".*_cache",
        ".hypothesis"))  # fmt: skip
    subprocess.run([str(BIN / "python"), "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", str(source)],
        check=True, capture_output=True, timeout=900,
    )  # fmt: skip
    return venv / "bin"


def run(
    bin_dir: Path, root: Path, *command: str, timeout: float = 1200
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(bin_dir / command[0]), *command[1:]], cwd=root, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def git(root: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@example.org"}
    identity |= {"GIT_COMMITTER_NAME": "m", "GIT_COMMITTER_EMAIL": "m@example.org"}
    subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, timeout=60,
        env={**os.environ, **identity},
    )  # fmt: skip


def write_next_minor(root: Path) -> None:
    """The maintainer's second task, by hand, and the suite declaring both."""
    task = root / "tasks" / "next-minor"
    task.mkdir()
    for name, content in NEXT_MINOR.items():
        text = content if isinstance(content, str) else json.dumps(content, indent=2) + "\n"
        (task / name).write_text(text)
    for case, (solution, expect) in NEXT_MINOR_FIXTURES.items():
        folder = root / "fixtures" / "next-minor" / case
        folder.mkdir(parents=True)
        (folder / "solution.py").write_text(solution)
        (folder / "expect.json").write_text(json.dumps({"schemaVersion": 1, **expect}))
    suite = json.loads((root / "tasks" / "suite.json").read_text())
    suite.update(taskIds=[*suite["taskIds"], "next-minor"], repetitions=2, scheduledRuns=4,
                 minFirstSuccesses=3, requiredFinalSuccesses=4)  # fmt: skip
    (root / "tasks" / "suite.json").write_text(json.dumps(suite, indent=2) + "\n")


def test_a_released_library_goes_from_an_empty_directory_to_a_judged_oracle_batch(
    engine: ContainerEngine, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    cache = pytestconfig.cache
    assert cache is not None
    started = time.monotonic()
    laps: dict[str, float] = {}

    def lap(name: str) -> None:
        laps[name] = round(time.monotonic() - started - sum(laps.values()), 1)

    bin_dir = installed(tmp_path / "venv")
    lap("install")
    root = tmp_path / "semver-repo"
    (root / "packages").mkdir(parents=True)
    with tarfile.open(published_sdist(LIBRARY, VERSION)) as archive:
        archive.extractall(root / "packages", filter="data")
    (root / "packages" / f"{LIBRARY}-{VERSION}").rename(root / "packages" / LIBRARY)
    # As published: its version is computed by its build, from an attribute of its source.
    assert 'dynamic = ["version",]' in (root / "packages" / LIBRARY / "pyproject.toml").read_text()
    git(root, "init", "-q")
    lap("sdist")

    examples = ['["1.2.3"]', '["1.2"]', '["1.0.0-rc.1+build.5"]', '["v1.2.3"]']
    done = run(bin_dir, root, "agent-eval", "init", "--function", "semver.version:Version.is_valid",
               *(arg for e in examples for arg in ("--example", e)))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote tasks/is-valid/grader.py" in done.stdout
    assert "agent-eval lock-build" in done.stdout
    locked = run(bin_dir, root, "agent-eval", "lock-build")
    assert locked.returncode == 0, locked.stderr
    assert locked.stdout.startswith("setuptools==") and "wrote " in locked.stdout
    fetched = run(bin_dir, root, "agent-eval", "fetch-build-wheels")
    assert fetched.returncode == 0, fetched.stderr
    write_next_minor(root)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "agent-eval: two tasks")
    assert not (root / "images").exists() and not (root / "examples").exists()
    lap("init-and-lock")

    for verifier in ("local", "docker"):
        if verifier == "docker":
            built = run(bin_dir, root, "agent-eval", "images", "build")
            assert built.returncode == 0, built.stderr[-3000:]
            recipes = json.loads(built.stdout)["recipes"]
            assert set(recipes) >= {"verifier", "reference-runner", "gateway"}
            lap("images")
        verified = run(bin_dir, root, "agent-eval", "tasks", "verify", "--verifier", verifier)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "5 fixture cases" in verified.stdout and "all match" in verified.stdout
        lap(f"verify-{verifier}")

    config = root / ".verification" / "agent-eval" / "runner.json"
    config.parent.mkdir(parents=True, exist_ok=True)  # --output never makes directories
    made = run(bin_dir, root, "agent-eval", "reference-config", "oracle", "--output", str(config))
    assert made.returncode == 0, made.stderr
    batch = run(bin_dir, root, "eval-agent", "--runner-config", str(config))
    assert batch.returncode == 0, batch.stderr[-3000:]
    line: dict[str, Any] = json.loads(batch.stdout)
    assert (line["status"], line["firstSuccesses"], line["finalSuccesses"]) == ("completed", 4, 4)
    lap("batch")
    total = round(time.monotonic() - started, 1)

    receipt_path = (
        root / line["receipt"] if not Path(line["receipt"]).is_absolute() else Path(line["receipt"])
    )
    receipt = Receipt.model_validate_json(receipt_path.read_bytes())
    assert [r.runId for r in receipt.runs] == [
        "is-valid-1", "next-minor-1", "is-valid-2", "next-minor-2",
    ]  # fmt: skip
    assert all(r.attempts[-1].success for r in receipt.runs)
    archives = json.loads((receipt_path.parent / "archives.json").read_bytes())["archives"]
    assert [(a["distribution"], a["version"]) for a in archives] == [(LIBRARY, VERSION)]
    checked = run(bin_dir, root, "check-agent-eval", "--receipt", str(receipt_path),
                  "--archives", str(receipt_path.parent / "archives.json"))  # fmt: skip
    assert checked.returncode == 1, checked.stderr
    decision = json.loads(checked.stdout)
    assert [reason.split(":")[0] for reason in decision["reasons"]] == ["not-self-test"]
    reported = run(bin_dir, root, "agent-eval", "report", str(receipt_path.parent))
    assert reported.returncode == 0, reported.stderr
    page = (receipt_path.parent / "report.html").read_text()
    assert "Answer as semver.version.Version.is_valid does" in page and "next-minor-2" in page
    assert list_leftovers(engine, receipt.batchId) == []
    (cache.mkdir("adoption") / "timings.json").write_text(
        json.dumps({"toFirstCompletedBatchS": total, **laps})
    )
    print(f"empty directory to first completed batch: {total} s {laps}")
