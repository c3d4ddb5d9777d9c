"""``agent-eval init --ci github|gitlab``: a CI job that gates on a batch.

The job installs agent-eval, builds the images, runs a batch of the repository's
runner config (or, until one is committed, the built-in oracle's, which checks the
set-up and is always rejected as self-test), checks it with JUnit XML for the CI's
test page, writes the report and the shareable summary, keeps all three as
artifacts whatever happened, and fails when the batch does not qualify.

Like the rest of ``init``, it never overwrites: a file that exists with other
content is named and nothing is written; the same answers twice write nothing.
Third-party actions are pinned by commit, as the harness pins its images by digest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import agent_eval
from agent_eval.errors import ConfigError

__all__ = ["CI_KINDS", "RUNNER_CONFIG", "CiFiles", "ci_files", "write_ci"]

CiKind = Literal["github", "gitlab"]
CI_KINDS: tuple[CiKind, ...] = ("github", "gitlab")

RUNNER_CONFIG = "agent-eval/runner.json"
"""Where the job looks for the committed runner config of the agent to gate on."""

JUNIT = "agent-eval-junit.xml"
REPORT = "agent-eval-report.html"
SUMMARY = "agent-eval-summary.md"

# One script per step, shared by both CI systems so they cannot drift; each is what a
# maintainer would type, and the tests run them as written.
INSTALL = f'python -m pip install "agent-eval=={agent_eval.__version__}"'
IMAGES = "agent-eval images build"
BATCH = f"""\
config="${{AGENT_EVAL_RUNNER_CONFIG:-{RUNNER_CONFIG}}}"
if [ ! -f "$config" ]; then
  echo "no $config yet: running the built-in oracle, which is always rejected as self-test"
  mkdir -p .verification/agent-eval
  config=.verification/agent-eval/runner.json
  agent-eval reference-config oracle --output "$config"
fi
eval-agent --runner-config "$config" --progress lines"""
CHECK = f"check-agent-eval latest --junit {JUNIT} --format text"
REPORTS = f"""\
agent-eval report latest --output {REPORT}
agent-eval summary latest > {SUMMARY}"""

STEPS: tuple[tuple[str, str], ...] = (
    ("Install agent-eval", INSTALL),
    ("Build the images", IMAGES),
    ("Run a batch", BATCH),
    ("Check the batch", CHECK),
)
"""The job's steps in order (the report step follows, whatever happened)."""

_CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683  # v4.2.2"
_PYTHON = "actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065  # v5.6.0"
_UPLOAD = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02  # v4.6.2"


def _block(script: str, indent: int) -> str:
    pad = " " * indent
    return "\n".join(pad + line if line else "" for line in script.splitlines())


def _github() -> str:
    steps = "".join(
        f"      - name: {name}\n        run: |\n{_block(script, 10)}\n" for name, script in STEPS
    )
    return f"""\
# Gate on whether coding agents can use this library (agent-eval).
# Commit the runner config of the agent to gate on as {RUNNER_CONFIG} and give its
# model credential as a repository secret in the env below; until then the job runs
# the built-in oracle, whose batch is always rejected as self-test.
name: agent-eval
on:
  workflow_dispatch:
  pull_request:
permissions:
  contents: read
jobs:
  agent-eval:
    runs-on: ubuntu-latest
    timeout-minutes: 120
    env:
      AGENT_EVAL_RUNNER_CONFIG: {RUNNER_CONFIG}
      # ANTHROPIC_API_KEY: ${{{{ secrets.ANTHROPIC_API_KEY }}}}
    steps:
      - uses: {_CHECKOUT}
        with:
          fetch-depth: 0  # the checker rebuilds the wheels from the recorded commit
      - uses: {_PYTHON}
        with:
          python-version: "3.11"
{steps}      - name: Report
        if: always()
        run: |
{_block(REPORTS, 10)}
      - uses: {_UPLOAD}
        if: always()
        with:
          name: agent-eval
          path: |
            {JUNIT}
            {REPORT}
            {SUMMARY}
          if-no-files-found: warn
"""


def _gitlab() -> str:
    script = "".join(
        f"    # {name}\n{_block(text, 4).replace('    ', '    - ', 1)}\n"
        if "\n" not in text
        else f"    # {name}\n    - |\n{_block(text, 6)}\n"
        for name, text in STEPS
    )
    return f"""\
# Gate on whether coding agents can use this library (agent-eval).
# Include it from .gitlab-ci.yml (include: - local: .gitlab/agent-eval.yml). Commit the
# runner config of the agent to gate on as {RUNNER_CONFIG} and give its model credential
# as a masked CI/CD variable; until then the job runs the built-in oracle, whose batch
# is always rejected as self-test. The runner needs a Docker engine on a local socket.
agent-eval:
  image: python:3.11
  timeout: 2h
  variables:
    AGENT_EVAL_RUNNER_CONFIG: {RUNNER_CONFIG}
    GIT_DEPTH: "0"  # the checker rebuilds the wheels from the recorded commit
  script:
{script}  after_script:
    - |
{_block(REPORTS, 6)}
  artifacts:
    when: always
    paths:
      - {JUNIT}
      - {REPORT}
      - {SUMMARY}
    reports:
      junit: {JUNIT}
"""


@dataclass(frozen=True)
class CiFiles:
    """What ``init --ci`` wrote, and what it found already there."""

    written: tuple[Path, ...]
    unchanged: tuple[Path, ...]
    note: str | None
    """One thing left for the maintainer to do, when there is one."""


def ci_files(kind: CiKind) -> dict[str, str]:
    """The files of *kind*'s job, by their path in the repository."""
    if kind == "github":
        return {".github/workflows/agent-eval.yml": _github()}
    return {".gitlab/agent-eval.yml": _gitlab()}


def write_ci(root: Path, kind: CiKind) -> CiFiles:
    """Write *kind*'s job into the repository at *root*.

    Raises:
        ConfigError: a file exists with other content, or is not a regular file
            (it is named, and nothing is written).
    """
    wanted = {root / rel: text for rel, text in ci_files(kind).items()}
    for path in wanted:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise ConfigError(f"{path.relative_to(root)} is not a regular file; nothing written")
        if path.exists() and path.read_bytes() != wanted[path].encode("utf-8"):
            raise ConfigError(
                f"init would overwrite {path.relative_to(root)}, which holds something else; "
                "move it first"
            )
    written, unchanged = [], []
    for path, text in wanted.items():
        if path.exists():
            unchanged.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    note = None
    if kind == "gitlab":
        note = "include it from .gitlab-ci.yml:  include: [{local: .gitlab/agent-eval.yml}]"
    return CiFiles(written=tuple(written), unchanged=tuple(unchanged), note=note)
