"""The public API is deliberate: exactly these names, each resolving to the harness's own object.

An embedding repository may use what ``agent_eval.__all__`` lists and nothing
else; adding or removing a name is an API change and must be made here too.
Importing the package itself loads nothing beyond the standard library, since
it is staged into every container.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import agent_eval

REPO = Path(__file__).resolve().parents[1]

PUBLIC = {
    "__version__",
    # run a batch
    "run_batch",
    "BatchOutcome",
    "batch_verifier_factory",
    # qualify, review
    "qualify_files",
    "Anchors",
    "current_anchors",
    "record_review",
    # the reviewer's report
    "write_report",
    # verify the tasks
    "verify_tasks",
    "VerifyReport",
    "LocalVerifier",
    "source_verifiers",
    "Verifier",
    # find the project and its evidence
    "find_project",
    "Project",
    "RunDirectory",
    # the error tree
    "AgentEvalError",
    "CleanupError",
    "ConfigError",
    "EngineUnavailableError",
    "EvidenceError",
    "InfrastructureError",
    "ReviewError",
    "SuiteError",
    # the evidence models
    "ArchivesManifest",
    "AttemptRecord",
    "ConsumerLock",
    "QualificationResult",
    "Receipt",
    "ReviewDecision",
    "RunRecord",
    "RunnerConfig",
    "RunnerRequest",
    "RunnerResponse",
}


def test_the_public_api_is_exactly_the_deliberate_set() -> None:
    assert set(agent_eval.__all__) == PUBLIC
    assert len(agent_eval.__all__) == len(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC - {"__version__"}))
def test_every_public_name_is_an_object_of_the_harness(name: str) -> None:
    value = getattr(agent_eval, name)
    assert value.__module__.startswith("agent_eval."), (name, value.__module__)
    assert name in dir(agent_eval)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'run_everything'"):
        agent_eval.run_everything  # noqa: B018


def test_the_version_is_the_distributions_version() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert agent_eval.__version__ == project["version"]


def test_the_error_tree_has_one_root() -> None:
    for name in PUBLIC:
        value = getattr(agent_eval, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, agent_eval.AgentEvalError), name


def test_importing_the_package_loads_nothing_beyond_the_standard_library() -> None:
    probe = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import agent_eval; "
        "print(sorted(m for m in sys.modules if m.startswith('agent_eval')))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-I", "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['agent_eval']"
