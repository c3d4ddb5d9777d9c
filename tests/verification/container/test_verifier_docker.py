"""Container verification trusts only the parent's two result files, about this task and
these exact solution files, from a container that mounts nothing but staged copies and
is always removed.

These tests need no engine: staging is checked on disk, and the container's
side is the in-memory ``FakeRuntime`` scripted with the files the parent
would have written (or failed to write), while its stdout carries forged
grades that must never be read. The real container is exercised by
``test_verifier_docker_engines.py`` and ``test_adversarial_verifier.py``.
"""

from __future__ import annotations

import inspect
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agent_eval.verification.analysis.rules
from agent_eval.cli import main
from agent_eval.consumer.source import prepare_source_consumer
from agent_eval.digests import solution_digest, solution_files
from agent_eval.engine import LABEL_BATCH, LABEL_ROLE, ContainerSpec
from agent_eval.engine.fake import FakeRuntime, Outcome
from agent_eval.errors import CleanupError, ConfigError, InfrastructureError, SuiteError
from agent_eval.layout import staged_files
from agent_eval.models.behaviour import VerifierJob
from agent_eval.models.task import TaskSpec
from agent_eval.models.verifier_attempt import AttemptAnalysis, VerifierAttempt
from agent_eval.verification.container.limits import CHILD_UID_BASE, VerificationLimits
from agent_eval.verification.container.run import (
    ContainerVerification,
    RunningContainers,
    VerifierSetup,
    verify_in_container,
)
from agent_eval.verification.container.staging import stage_attempt, stage_runtime
from agent_eval.verification.container.verifier import ContainerVerifier
from agent_eval.verification.local import LocalVerifier
from agent_eval.verification.runtime.attempt import MYPY_CACHE_DIR, parse_attempt
from agent_eval.verification.runtime.job import JobError
from tests.evidence_builders import analysis
from tests.paths import REPO

PROBE_TASK = REPO / "tests" / "data" / "verifier-probe"
GRADERS = REPO / "graders"
FORGED = b'{"schemaVersion": 1, "taskId": "verifier-probe", "assertions": [], "error": null}\n'


# --- Builders ----------------------------------------------------------------------------


@pytest.fixture
def task() -> TaskSpec:
    return TaskSpec.model_validate_json((PROBE_TASK / "task.json").read_bytes())


@pytest.fixture
def solution(tmp_path: Path) -> Path:
    directory = tmp_path / "submitted"
    directory.mkdir()
    (directory / "solution.py").write_text("def probe():\n    return 'x'\n", encoding="utf-8")
    os.chmod(directory, 0o700)  # as collected: private to the host user
    return directory


@pytest.fixture
def consumer(tmp_path: Path) -> Path:
    root = tmp_path / "consumer"
    (root / "site").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "docs" / "api-catalog.json").write_text(
        json.dumps({"schemaVersion": 1, "distributions": [], "symbols": []}), encoding="utf-8"
    )
    for path in (root, root / "site", root / "docs"):
        os.chmod(path, 0o755)
    return root


def analysis_json(task_id: str, digest: str, **changes: Any) -> bytes:
    data = analysis(task_id, **{"solutionDigest": digest, "mypyVersion": "2.4.1", **changes})
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def result_json(task_id: str, *, passed: bool = True) -> bytes:
    assertions = [
        {"id": "secret-returned", "passed": passed, "observed": True, "safety": True},
        {"id": "echo-works", "passed": True, "observed": True, "safety": False},
    ]
    return json.dumps(
        {
            "schemaVersion": 1,
            "taskId": task_id,
            "assertions": assertions,
            "needsReview": False,
            "diagnostics": [],
            "error": None,
        }
    ).encode()


def parent_files(task: TaskSpec, solution: Path, **analysis_changes: Any) -> dict[str, bytes]:
    digest = solution_digest(solution_files(solution))
    return {
        "/result/analysis.json": analysis_json(task.id, digest, **analysis_changes),
        "/result/result.json": result_json(task.id, passed=False),
    }


def fake_engine() -> tuple[FakeRuntime, str]:
    engine = FakeRuntime()
    return engine, engine.store.add_image(tags=("agent-eval/verifier:local",))


def run(
    engine: FakeRuntime,
    image: str,
    task: TaskSpec,
    solution: Path,
    consumer: Path,
    tmp_path: Path,
    slot: int = 0,
    **kwargs: Any,
) -> ContainerVerification:
    staging = tmp_path / "staging"
    staging.mkdir(exist_ok=True)
    setup = VerifierSetup(
        engine=engine,
        image=image,
        consumer_dir=consumer,
        graders_dir=GRADERS,
        batch_id="batch-1",
        staging_root=staging,
        **kwargs,
    )
    return verify_in_container(
        setup, task, PROBE_TASK, solution, run_id="verifier-probe-1", slot=slot
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- The attempt file ------------------------------------------------------------------


def test_the_attempt_format_is_pinned_and_the_runtime_reads_what_the_host_writes(
    task: TaskSpec, solution: Path, tmp_path: Path
) -> None:
    assert set(VerifierAttempt.model_fields) == {
        "schemaVersion",
        "analysis",
        "behaviour",
        "timingsPath",
    }
    assert set(AttemptAnalysis.model_fields) == {
        "taskPath",
        "catalogPath",
        "solutionDir",
        "scratchDir",
        "resultPath",
        "contractPath",
        "starterDir",
        "cacheSeedDir",
        "searchPath",
        "importPaths",
        "timeoutMs",
    }
    staged = stage_attempt(
        tmp_path,
        task,
        PROBE_TASK,
        solution,
        graders_dir=GRADERS,
        slot=3,
        limits=VerificationLimits(),
        cache_seeded=True,
    )
    raw = json.loads((staged.runtime / "trusted" / "attempt.json").read_text(encoding="utf-8"))
    host = VerifierAttempt.model_validate(raw)
    runtime = parse_attempt(raw)
    assert str(runtime.analysis.solution_dir) == host.analysis.solutionDir == "/solution"
    assert str(runtime.analysis.cache_seed_dir) == host.analysis.cacheSeedDir
    assert [str(p) for p in runtime.analysis.search_path] == ["/consumer/site"]
    assert str(runtime.analysis.result_path) == "/result/analysis.json"
    assert str(runtime.behaviour.result_path) == "/result/result.json"
    assert VerifierJob.model_validate(raw["behaviour"]) == host.behaviour
    assert raw["timingsPath"] is None and runtime.timings_path is None
    assert not runtime.analysis.timings
    with pytest.raises(JobError, match="unknown keys"):
        parse_attempt({**raw, "score": 1})
    with pytest.raises(JobError, match="unknown keys"):
        parse_attempt({**raw, "analysis": {**raw["analysis"], "grade": "pass"}})


def test_each_slot_runs_its_child_as_its_own_uid_and_kills_every_process_after_a_scenario(
    task: TaskSpec, solution: Path, tmp_path: Path
) -> None:
    uids = set()
    for slot in (0, 1, 7):
        staged = stage_attempt(
            tmp_path,
            task,
            PROBE_TASK,
            solution,
            graders_dir=GRADERS,
            slot=slot,
            limits=VerificationLimits(),
        )
        attempt_file = staged.runtime / "trusted" / "attempt.json"
        job = parse_attempt(json.loads(attempt_file.read_bytes())).behaviour
        assert job.isolation.drop_privileges and job.isolation.kill_all_on_cleanup
        assert job.isolation.sweep_paths == ("/tmp", "/dev/shm", "/dev/mqueue")
        assert job.isolation.child_import_root == "/verifier/sandbox"
        assert job.isolation.child_uid == job.isolation.child_gid == CHILD_UID_BASE + slot
        assert str(job.scratch_dir) == "/tmp"
        uids.add(job.isolation.child_uid)
    assert len(uids) == 3


def test_the_staged_harness_is_imported_from_its_bytecode_unless_its_source_changed(
    tmp_path: Path,
) -> None:
    stage_runtime(tmp_path / "runtime", None)
    sandbox = tmp_path / "runtime" / "sandbox"
    module = "agent_eval.verification.runtime.framing"
    # As the child imports it: no user site or unsafe path, the root put on sys.path by hand.
    command = [sys.executable, "-s", "-P", "-B", "-v", "-c",
               f"import sys; sys.path.insert(0, {str(sandbox)!r}); import {module} as m; "
               "print(getattr(m, 'CHANGED', None))"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    pyc = f"framing.{sys.implementation.cache_tag}.pyc"
    assert done.returncode == 0, done.stderr
    assert f"code object from '{sandbox}/agent_eval/verification/runtime/__pycache__/{pyc}'" in (
        done.stderr
    )
    assert done.stdout.strip() == "None"
    source = sandbox / "agent_eval" / "verification" / "runtime" / "framing.py"
    os.chmod(source, 0o644)
    source.write_text(source.read_text(encoding="utf-8") + "CHANGED = 1\n", encoding="utf-8")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"  # the bytecode of the old source is not taken


def test_the_analysis_keeps_its_cache_where_the_seed_is_copied() -> None:
    # The seed only speeds mypy up if it lands where the analysis looks for it.
    source = inspect.getsource(agent_eval.verification.analysis.rules)
    assert f'scratch_dir / "{MYPY_CACHE_DIR}"' in source


# --- Staging -----------------------------------------------------------------------------


def test_the_staging_holds_only_copies_the_container_needs_with_private_grader_files(
    task: TaskSpec, solution: Path, tmp_path: Path
) -> None:
    staged = stage_attempt(
        tmp_path,
        task,
        PROBE_TASK,
        solution,
        graders_dir=GRADERS,
        slot=0,
        limits=VerificationLimits(),
    )
    runtime = {str(p.relative_to(staged.runtime)) for p in staged.runtime.rglob("*")}
    harness = REPO / "agent_eval"
    trusted = {f"trusted/agent_eval/{rel}" for rel in staged_files(harness, "verifier")}
    sandbox = {f"sandbox/agent_eval/{rel}" for rel in staged_files(harness, "sandbox")}
    files = trusted | sandbox | {"trusted/attempt.json"}
    files |= {f"trusted/graders/{p.name}" for p in GRADERS.glob("*.py")}
    tag = sys.implementation.cache_tag
    files |= {
        str(Path(f).parent / "__pycache__" / f"{Path(f).stem}.{tag}.pyc")
        for f in files
        if f.endswith(".py")
    }
    folders = {str(parent) for f in files for parent in Path(f).parents if str(parent) != "."}
    # Never a host-only module: the in-process grader, the CLI, the engine, the batch.
    assert not any(
        part in f for f in files for part in ("in_process", "/cli/", "/engine/", "/batch/")
    )
    assert runtime == files | folders
    # The child's UID can read the sandbox half and nothing of the trusted one:
    # not the kit, the repository's helpers, the parent or the attempt file.
    for path in staged.runtime.rglob("*"):
        private = path.relative_to(staged.runtime).parts[0] == "trusted"
        if path.is_dir():
            assert mode(path) == (0o700 if private else 0o755), path
        else:
            assert mode(path) == (0o600 if private else 0o644), path
    assert mode(staged.runtime) == 0o711
    assert not any(("grading" in f or "parent" in f) for f in sandbox)

    assert sorted(p.name for p in staged.grader.iterdir()) == [
        "contract.pyi",
        "grader.py",
        "task.json",
    ]
    assert mode(staged.grader) == 0o700
    assert mode(staged.grader / "grader.py") == 0o700
    assert mode(staged.grader / "task.json") == mode(staged.grader / "contract.pyi") == 0o600

    assert solution_files(staged.solution) == solution_files(solution)
    assert mode(staged.solution) == 0o755  # the child (another UID) must read it
    assert mode(staged.solution / "solution.py") == 0o644
    assert list(staged.result.iterdir()) == [] and mode(staged.result) == 0o700
    assert staged.solution_digest == solution_digest(solution_files(solution))
    assert not any((p / ".git").exists() for p in staged.root.rglob("*") if p.is_dir())


def test_the_staged_analysis_and_runtime_import_with_the_standard_library_alone(
    task: TaskSpec, solution: Path, tmp_path: Path
) -> None:
    staged = stage_attempt(
        tmp_path,
        task,
        PROBE_TASK,
        solution,
        graders_dir=GRADERS,
        slot=0,
        limits=VerificationLimits(),
    )
    # -S: no site-packages, so pydantic, docker or click cannot be found.
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-B",
            "-c",
            "import agent_eval.verification.analysis.__main__, graders.results, "
            "agent_eval.verification.runtime.attempt, agent_eval.verification.runtime.parent, "
            "agent_eval.verification.runtime.child",
        ],
        cwd=staged.runtime / "trusted",
        env={
            "PYTHONPATH": str(staged.runtime / "trusted"),
            "PATH": os.environ.get("PATH", "/usr/bin"),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_solution_holding_a_link_is_refused_before_any_container_exists(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    (solution / "link.py").symlink_to("/etc/passwd")
    engine, image = fake_engine()
    with pytest.raises(ConfigError, match="symbolic link"):
        run(engine, image, task, solution, consumer, tmp_path)
    assert engine.containers == {}
    assert list((tmp_path / "staging").iterdir()) == []


def test_a_consumer_the_solutions_uid_cannot_read_and_a_bad_slot_are_refused(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    with pytest.raises(ConfigError, match="slot 1000"):
        run(engine, image, task, solution, consumer, tmp_path, slot=1000)
    os.chmod(consumer / "site", 0o700)
    with pytest.raises(ConfigError, match="chmod o\\+rx"):
        run(engine, image, task, solution, consumer, tmp_path)
    with pytest.raises(ConfigError, match="needs site/"):
        run(engine, image, task, solution, tmp_path / "elsewhere", tmp_path)
    assert engine.containers == {}


# --- Only the parent's files ------------------------------------------------------------


def test_only_the_parents_files_are_read_from_a_hardened_container_that_is_then_removed(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    files = parent_files(task, solution)
    engine.script(Outcome(exit_code=0, stdout=FORGED, stderr=FORGED, files=files))

    result = run(engine, image, task, solution, consumer, tmp_path, slot=2)

    analysis_bytes, analysis, behaviour = result  # unpacks as (analysis_json, analysis, result)
    assert analysis_bytes == files["/result/analysis.json"]
    assert analysis.taskId == task.id and analysis.passed
    assert behaviour.failed_assertion_ids == ["secret-returned"]
    assert result.as_verification().behaviour == behaviour
    (container,) = engine.containers.values()
    assert container.removed
    assert container.labels[LABEL_BATCH] == "batch-1"
    assert container.labels[LABEL_ROLE] == "verifier"
    assert container.user == "0:0"
    config = container.host_config
    assert config["network_mode"] == "none"
    # The zygote is PID 1 and the container's init: the engine adds none.
    assert config["read_only"] and config["init"] is False
    assert container.spec.command[-6:-4] == ("--", "/usr/bin/python3")
    assert config["cap_drop"] == ["ALL"]
    assert sorted(config["cap_add"]) == ["DAC_OVERRIDE", "KILL", "SETGID", "SETUID"]
    mounts = {m["Target"]: m for m in config["mounts"]}
    assert sorted(mounts) == ["/consumer", "/grader/task", "/result", "/solution", "/verifier"]
    assert [t for t, m in mounts.items() if not m["ReadOnly"]] == ["/result"]
    assert all(not m["Source"].startswith(str(REPO)) for m in mounts.values())
    assert container.spec.command[-2:] == (
        "agent_eval.verification.runtime.attempt",
        "/verifier/trusted/attempt.json",
    )
    assert list((tmp_path / "staging").iterdir()) == []  # the staging is gone too


def test_a_missing_result_is_an_infrastructure_failure_whatever_the_container_printed(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    files = parent_files(task, solution)
    del files["/result/result.json"]
    engine.script(Outcome(exit_code=0, stdout=FORGED, stderr=b"verifier: broken", files=files))
    with pytest.raises(InfrastructureError, match=r"no result\.json.*verifier: broken"):
        run(engine, image, task, solution, consumer, tmp_path)
    assert all(c.removed for c in engine.containers.values())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"/result/grade.json": b"{}"}, r"holds \['grade\.json'\], which the verifier never"),
        ({"/result/timings.json": b"[]"}, r"holds \['timings\.json'\]"),  # not asked for
        ({"/result/result.json": b" " * 1025}, r"result\.json has 1025 bytes, over 1024"),
        ({"/result/sub/result.json": b"{}"}, r"holds \['sub'\]"),
    ],
)
def test_the_result_directory_is_read_from_the_host_and_anything_else_there_refuses_it(
    extra: dict[str, bytes],
    message: str,
    task: TaskSpec,
    solution: Path,
    consumer: Path,
    tmp_path: Path,
) -> None:
    engine, image = fake_engine()
    files = {**parent_files(task, solution), **extra}
    engine.script(Outcome(files=files))
    assert len(files["/result/analysis.json"]) <= 1024
    limits = VerificationLimits(max_result_bytes=1024)
    with pytest.raises(InfrastructureError, match=message):
        run(engine, image, task, solution, consumer, tmp_path, limits=limits)
    assert all(c.removed for c in engine.containers.values())


def test_the_timing_record_is_read_only_when_asked_for_and_reaches_its_sink(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    spans = [{"name": "analysis process", "start": 100.0, "seconds": 0.5}]
    files = {**parent_files(task, solution), "/result/timings.json": json.dumps(spans).encode()}
    attempts: list[dict[str, Any]] = []

    def read_attempt(spec: ContainerSpec, stdin: bytes | None) -> None:
        (runtime,) = (m.source for m in spec.mounts if m.target == "/verifier")
        attempts.append(json.loads((runtime / "trusted" / "attempt.json").read_bytes()))

    engine.script(Outcome(files=files, on_start=read_attempt))
    received: list[list[dict[str, Any]]] = []
    run(engine, image, task, solution, consumer, tmp_path, timings=received.append)
    assert received == [spans]
    assert [a["timingsPath"] for a in attempts] == ["/result/timings.json"]
    engine.script(Outcome(files={**files, "/result/timings.json": b"{}"}))
    with pytest.raises(InfrastructureError, match="not a list of spans"):
        run(engine, image, task, solution, consumer, tmp_path, timings=received.append)


def test_a_container_that_outlives_its_deadline_is_killed_and_trusted_for_nothing(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    engine.script(Outcome(timeout=True, files=parent_files(task, solution)))
    with pytest.raises(InfrastructureError, match="outlived its deadline"):
        run(engine, image, task, solution, consumer, tmp_path)
    (container,) = engine.containers.values()
    assert container.killed and container.removed


def test_an_unconfirmed_removal_is_a_cleanup_error_even_after_a_good_result(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    engine.script(Outcome(cleanup_fails=True, files=parent_files(task, solution)))
    with pytest.raises(CleanupError):
        run(engine, image, task, solution, consumer, tmp_path)
    engine.script(Outcome(cleanup_fails=True, timeout=True))
    with pytest.raises(CleanupError):  # wins over the timeout in flight
        run(engine, image, task, solution, consumer, tmp_path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"solutionDigest": "sha256:" + "0" * 64}, "expected 'verifier-probe'"),
        ({"taskId": "core-validation"}, "analysis is of task"),
        ({"syntaxOk": "maybe"}, "not an analysis"),
    ],
)
def test_an_analysis_of_another_solution_or_task_or_malformed_is_refused(
    changes: dict[str, Any],
    message: str,
    task: TaskSpec,
    solution: Path,
    consumer: Path,
    tmp_path: Path,
) -> None:
    engine, image = fake_engine()
    engine.script(Outcome(files=parent_files(task, solution, **changes)))
    with pytest.raises(InfrastructureError, match=message):
        run(engine, image, task, solution, consumer, tmp_path)


def test_a_result_about_another_task_is_refused(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    files = parent_files(task, solution)
    files["/result/result.json"] = result_json("core-validation")
    engine.script(Outcome(files=files))
    with pytest.raises(InfrastructureError, match="graded task 'core-validation'"):
        run(engine, image, task, solution, consumer, tmp_path)


@pytest.mark.parametrize(
    ("kind", "error"), [("input", SuiteError), ("infrastructure", InfrastructureError)]
)
def test_an_analysis_that_could_not_run_is_the_tasks_or_the_infrastructures_failure(
    kind: str,
    error: type[Exception],
    task: TaskSpec,
    solution: Path,
    consumer: Path,
    tmp_path: Path,
) -> None:
    engine, image = fake_engine()
    failure = {"analysisError": {"kind": kind, "message": "mypy could not run"}}
    engine.script(Outcome(files={"/result/analysis.json": json.dumps(failure).encode()}))
    with pytest.raises(error, match="mypy could not run"):
        run(engine, image, task, solution, consumer, tmp_path)


def test_an_analysis_cache_is_mounted_read_only_below_the_runtime(
    task: TaskSpec, solution: Path, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    cache = tmp_path / "cache"
    cache.mkdir()
    engine.script(Outcome(files=parent_files(task, solution)))
    run(engine, image, task, solution, consumer, tmp_path, analysis_cache=cache)
    (container,) = engine.containers.values()
    mounts = {m["Target"]: m for m in container.host_config["mounts"]}
    assert mounts["/verifier/trusted/mypy-cache-seed"] == {
        "Type": "bind",
        "Source": str(cache),
        "Target": "/verifier/trusted/mypy-cache-seed",
        "ReadOnly": True,
    }


def test_cancel_all_removes_every_container_in_flight(
    task: TaskSpec, consumer: Path, tmp_path: Path
) -> None:
    engine, image = fake_engine()
    verifier = ContainerVerifier(
        VerifierSetup(
            engine=engine,
            image=image,
            consumer_dir=consumer,
            graders_dir=GRADERS,
            batch_id="batch-1",
        ),
        tasks_dir=PROBE_TASK.parent,
    )
    running: RunningContainers = verifier.setup.running
    container_id = engine.create(
        ContainerSpec(image=image, command=("true",), role="verifier", batch_id="b", run_id="r")
    )
    running.add(container_id)
    verifier.cancel_all()
    assert engine.containers[container_id].removed


# --- The source consumer and the command line ---------------------------------------------


def test_a_source_consumer_has_the_library_its_dependencies_and_the_local_engines_catalog(
    tmp_path: Path,
) -> None:
    consumer = prepare_source_consumer(REPO / "packages", tmp_path / "consumer")
    names = {p.name for p in (consumer / "site").iterdir()}
    assert {"appkit", "appkit_forms", "jinja2", "markupsafe"} <= names
    assert (consumer / "site" / "appkit" / "py.typed").is_file()
    assert all(
        mode(p) & 0o005 == 0o005 if p.is_dir() else mode(p) & 0o004 for p in consumer.rglob("*")
    )
    # Compiled once, checked against each source's hash (PEP 552 flags 0b11).
    modules = sorted((consumer / "site" / "appkit").rglob("*.py"))
    tag = sys.implementation.cache_tag
    for module in modules:
        pyc = module.parent / "__pycache__" / f"{module.stem}.{tag}.pyc"
        assert pyc.read_bytes()[4:8] == (0b11).to_bytes(4, "little"), module
    local = LocalVerifier.prepare(
        packages_dir=REPO / "packages",
        tasks_dir=REPO / "tasks",
        graders_dir=GRADERS,
        work_dir=tmp_path / "local",
    )
    catalog = json.loads((consumer / "docs" / "api-catalog.json").read_text(encoding="utf-8"))
    assert catalog == local.api_catalog()


def test_a_verifier_image_without_the_docker_engine_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        main, ["tasks", "verify", "--verifier", "local", "--verifier-image", "sha256:" + "a" * 64]
    )
    assert result.exit_code == 2
    assert "--verifier-image needs --verifier docker" in result.output
