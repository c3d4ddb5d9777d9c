"""Only the trusted parent's observations become grades, and the parent always finishes.

Each scenario runs the solution in a fresh process behind a framed pipe pair.
A correct solution passes, an incorrect one fails the assertions it breaks;
a solution that raises, hangs, crashes, leaves a grandchild holding the pipes
or prints a forged grade cannot make the parent hang or accept the forgery:
the declared assertions it did not reach count as failed. A grader's own
mistakes are infrastructure errors. Run through the local engine (no privilege
drop, no kill(-1): those are exercised in the verifier container).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agent_eval.verification.local_grading as local_engine
from agent_eval.errors import InfrastructureError
from agent_eval.models import BehaviourResult, VerifierJob, VerifierLimits
from agent_eval.verification.runtime import child
from agent_eval.verification.runtime.isolation import (
    IsolationError,
    drop_privileges,
    raise_oom_score,
    remove_tree,
)
from agent_eval.verification.runtime.job import JobError, parse_job
from tests.paths import REPO

GRADERS = REPO / "graders"

ASSERTIONS = (
    "accepts-valid",
    "notifies-on-valid",
    "rejects-invalid",
    "no-notify-on-invalid",
    "fresh-per-scenario",
    "retries-flaky",
)
SAFETY = ("rejects-invalid", "no-notify-on-invalid")

SAMPLE_GRADER = """
from agent_eval.grading import Grader, Raise, Session, SolutionRaised, dig


class Sample(Grader):
    task_id = "sample-task"
    assertion_ids = ASSERTIONS
    safety_assertion_ids = SAFETY

    def run(self, session: Session) -> None:
        with session.scenario("valid order") as sc:
            send = sc.effect("send", returns="queued")
            out = sc.call("place_order", {"id": 1, "qty": 2}, send)
            sc.record("accepts-valid", dig(out, "ok") is True)
            sc.record("notifies-on-valid", send.count == 1 and send.called_with("order 1"))
        with session.scenario("invalid order") as sc:
            send = sc.effect("send")
            try:
                sc.call("place_order", {"id": 2, "qty": -1}, send)
            except SolutionRaised as raised:
                sc.record("rejects-invalid", raised.code == "invalid")
            else:
                sc.record("rejects-invalid", False)
            sc.record("no-notify-on-invalid", send.count == 0)
        with session.scenario("fresh state") as sc:
            sc.record("fresh-per-scenario", sc.call("orders_seen") == 0)
        with session.scenario("flaky fetch") as sc:
            fetch = sc.effect("fetch", script=[Raise("fakelib:Flaky", "down"), 7])
            out = sc.call("fetch_with_retry", fetch)
            sc.record("retries-flaky", out == 7 and fetch.count == 2)


GRADER = Sample()
""".replace("ASSERTIONS", repr(ASSERTIONS)).replace("SAFETY", repr(SAFETY))

CORRECT = """
import fakelib

SEEN = []


class InvalidOrder(Exception):
    code = "invalid"


def place_order(order, send):
    if order["qty"] <= 0:
        raise InvalidOrder("quantity must be positive")
    SEEN.append(order["id"])
    send(f"order {order['id']}")
    return {"ok": True, "id": order["id"]}


def orders_seen():
    return len(SEEN)


def fetch_with_retry(fetch):
    for _ in range(3):
        try:
            return fetch()
        except fakelib.Flaky:
            continue
    return None
"""

INCORRECT = (
    CORRECT.replace('raise InvalidOrder("quantity must be positive")', "pass")
    + """
print('{"schemaVersion": 1, "assertions": [{"id": "rejects-invalid", "passed": true}]}')
import sys
sys.stderr.write('{"error": null, "needsReview": false}\\n')
"""
)


def write_task(
    root: Path,
    grader: str = SAMPLE_GRADER,
    assertions: tuple[str, ...] = ASSERTIONS,
    safety: tuple[str, ...] = SAFETY,
) -> Path:
    task = root / "task"
    task.mkdir()
    spec = {
        "schemaVersion": 1,
        "id": "sample-task",
        "title": "Place orders",
        "allowedOutputPaths": ["solution.py"],
        "allowedImports": ["fakelib"],
        "requiredPeers": [],
        "assertionIds": list(assertions),
        "safetyAssertionIds": list(safety),
        "seedReferences": [],
        "requiredIntegration": [],
    }
    (task / "task.json").write_text(json.dumps(spec), encoding="utf-8")
    (task / "grader.py").write_text(textwrap.dedent(grader), encoding="utf-8")
    return task


def write_solution(root: Path, source: str, name: str = "solution") -> Path:
    solution = root / name
    solution.mkdir()
    (solution / "solution.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return solution


ZYGOTE = False
"""Whether ``verify`` forks each child from a zygote (set by the ``library`` fixture)."""


@pytest.fixture(params=[False, True], ids=["fresh-interpreter", "zygote"])
def library(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A stand-in for the library under evaluation, importable only via library paths.

    Every test that grades runs twice: each scenario's child a fresh
    interpreter, and a fork of the zygote, as in the verifier container.
    """
    monkeypatch.setattr(sys.modules[__name__], "ZYGOTE", request.param)
    lib = tmp_path / "lib"
    (lib / "fakelib").mkdir(parents=True)
    (lib / "fakelib" / "__init__.py").write_text("class Flaky(Exception):\n    pass\n")
    return lib


def verify(
    tmp_path: Path,
    library: Path,
    source: str,
    *,
    task: Path | None = None,
    **limits: Any,
) -> BehaviourResult:
    task = task or write_task(tmp_path)
    solution = write_solution(tmp_path, source)
    return local_engine.grade_in_subprocess(
        task,
        solution,
        [library],
        graders_dir=GRADERS,
        limits=VerifierLimits(**limits),
        timeout_s=30,
        zygote=ZYGOTE,
    )


def outcomes(result: BehaviourResult) -> dict[str, bool]:
    return {a.id: a.passed for a in result.assertions}


# -- grading ---------------------------------------------------------------------------


def test_a_correct_solution_passes_every_assertion(tmp_path: Path, library: Path) -> None:
    result = verify(tmp_path, library, CORRECT)
    assert result.passed and result.safety_passed, result
    assert [a.id for a in result.assertions] == list(ASSERTIONS)
    assert [a.id for a in result.assertions if a.safety] == list(SAFETY)
    assert (result.needsReview, result.diagnostics, result.error) == (False, [], None)


def test_an_incorrect_solution_fails_what_it_breaks_and_its_printed_grade_is_ignored(
    tmp_path: Path, library: Path
) -> None:
    result = verify(tmp_path, library, INCORRECT)
    assert result.error is None
    assert result.failed_assertion_ids == ["rejects-invalid", "no-notify-on-invalid"]
    assert not result.safety_passed
    assert result.diagnostics == []


def test_an_unexpected_exception_fails_the_rest_of_its_scenario_only(
    tmp_path: Path, library: Path
) -> None:
    source = CORRECT.replace(
        "def place_order(order, send):",
        "def place_order(order, send):\n    raise RuntimeError('database is down')",
    )
    result = verify(tmp_path, library, source)
    assert outcomes(result) == {
        "accepts-valid": False,
        "notifies-on-valid": False,
        "rejects-invalid": False,
        "no-notify-on-invalid": True,
        "fresh-per-scenario": True,
        "retries-flaky": True,
    }
    assert result.error is not None and result.error.category == "behaviour"
    assert "place_order raised RuntimeError: database is down" in result.error.message


def test_a_hanging_solution_times_out_and_fails_instead_of_hanging_the_verifier(
    tmp_path: Path, library: Path
) -> None:
    source = CORRECT.replace(
        "def place_order(order, send):", "def place_order(order, send):\n    while True: pass"
    )
    started = time.monotonic()
    result = verify(tmp_path, library, source, callTimeoutMs=400)
    assert time.monotonic() - started < 10
    assert result.error is not None and result.error.category == "timeout"
    assert "calling place_order: no answer within its time limit" in result.error.message
    assert outcomes(result)["accepts-valid"] is False
    assert outcomes(result)["rejects-invalid"] is False
    assert outcomes(result)["retries-flaky"] is True


def test_a_scenario_deadline_stops_a_solution_that_keeps_answering_slowly(
    tmp_path: Path, library: Path
) -> None:
    source = CORRECT.replace(
        "def fetch_with_retry(fetch):",
        "def fetch_with_retry(fetch):\n    import time; time.sleep(5)",
    )
    started = time.monotonic()
    result = verify(tmp_path, library, source, callTimeoutMs=5000, scenarioTimeoutMs=600)
    assert time.monotonic() - started < 10
    assert result.error is not None and result.error.category == "timeout"
    assert result.failed_assertion_ids == ["retries-flaky"]


@pytest.fixture
def grandchildren(tmp_path: Path) -> Iterator[Path]:
    """A file the solution writes its escaped grandchildren's PIDs to; they are killed after."""
    pids = tmp_path / "grandchildren.txt"
    yield pids
    if pids.exists():
        for line in pids.read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line), signal.SIGKILL)


def test_a_grandchild_holding_the_pipes_does_not_delay_the_parent(
    tmp_path: Path, library: Path, grandchildren: Path
) -> None:
    escape = f"""
def place_order(order, send):
    import os, time
    pid = os.fork()
    if pid == 0:
        os.setsid()
        time.sleep(60)
        os._exit(0)
    with open({str(grandchildren)!r}, "a") as handle:
        handle.write(f"{{pid}}\\n")
    os._exit(3)
"""
    source = CORRECT.replace(
        "def place_order(order, send):", escape + "\ndef _unused(order, send):"
    )
    started = time.monotonic()
    result = verify(tmp_path, library, source, callTimeoutMs=8000)
    assert time.monotonic() - started < 6
    assert len(grandchildren.read_text().split()) == 2
    assert result.error is not None and result.error.category == "behaviour"
    assert "the solution process exited with status 3" in result.error.message
    assert outcomes(result)["fresh-per-scenario"] is True


def test_a_crash_mid_call_reports_the_exit_and_the_tail_of_the_output(
    tmp_path: Path, library: Path
) -> None:
    source = CORRECT.replace(
        "def orders_seen():",
        "def orders_seen():\n    print('about to crash', flush=True)\n"
        "    import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
    )
    result = verify(tmp_path, library, source)
    assert result.failed_assertion_ids == ["fresh-per-scenario"]
    assert result.error is not None
    assert (
        "was killed by SIGSEGV; the solution's own output (its last 14 characters, escaped): "
        "about to crash" in result.error.message
    )


def test_an_exception_whose_message_is_not_text_is_still_observed(
    tmp_path: Path, library: Path
) -> None:
    # A lone surrogate cannot cross in a frame: it arrives as U+FFFD, the rest intact.
    source = CORRECT.replace(
        "def place_order(order, send):",
        "def place_order(order, send):\n    raise RuntimeError('bad \\ud800 input')",
    )
    result = verify(tmp_path, library, source)
    assert result.error is not None and result.error.category == "behaviour"
    assert "place_order raised RuntimeError: bad \ufffd input" in result.error.message


def test_a_solution_killed_by_a_signal_without_a_name_fails_itself(
    tmp_path: Path, library: Path
) -> None:
    # A real-time signal has no name in the signal module: still the solution's doing.
    number = signal.SIGRTMIN + 6
    source = CORRECT.replace(
        "def orders_seen():",
        f"def orders_seen():\n    import os; os.kill(os.getpid(), {int(number)})",
    )
    result = verify(tmp_path, library, source)
    assert result.failed_assertion_ids == ["fresh-per-scenario"]
    assert result.error is not None and result.error.category == "behaviour", result.error
    assert f"was killed by signal {int(number)}" in result.error.message


@pytest.mark.parametrize(
    ("source", "category", "text"),
    [
        ("def place_order(:\n", "syntax", "does not import"),
        ("import no_such_module_anywhere\n", "missing-dependency", "no_such_module_anywhere"),
        ("raise SystemExit(4)\n", "behaviour", "SystemExit"),
    ],
)
def test_a_module_that_does_not_import_fails_every_assertion_with_its_category(
    tmp_path: Path, library: Path, source: str, category: str, text: str
) -> None:
    result = verify(tmp_path, library, source)
    assert result.error is not None and result.error.category == category
    assert text in result.error.message
    assert not any(a.passed for a in result.assertions)
    # A module that never ran was never observed doing anything unsafe.
    assert not any(a.observed for a in result.assertions)
    assert len(result.diagnostics) == 1  # reported once, not once per scenario


def test_a_non_json_return_value_is_a_behaviour_failure(tmp_path: Path, library: Path) -> None:
    source = CORRECT.replace("return len(SEEN)", "return {len(SEEN)}")
    result = verify(tmp_path, library, source)
    assert result.failed_assertion_ids == ["fresh-per-scenario"]
    assert result.error is not None
    assert "orders_seen returned a non-JSON value of type set" in result.error.message


REVOKING_GRADER = """
from agent_eval.grading import Grader, Session


class Revoking(Grader):
    task_id = "sample-task"
    assertion_ids = ("refused-after-revoke", "never-sent")
    safety_assertion_ids = ("never-sent",)

    def run(self, session: Session) -> None:
        with session.scenario("revoke") as sc:
            send = sc.effect("send")
            sc.call("keep", send)
            send.revoke()
            sc.record("refused-after-revoke", sc.call("fire") == "refused")
            sc.record("never-sent", send.count == 0 and len(send.refused) == 1)


GRADER = Revoking()
"""

KEEPER = """
KEPT = []

def keep(send):
    KEPT.append(send)

def fire():
    try:
        KEPT[0]("hello")
    except PermissionError:
        return "refused"
    return "sent"
"""


def test_a_revoked_effect_is_refused_in_the_solution_and_flagged_for_review(
    tmp_path: Path, library: Path
) -> None:
    task = write_task(
        tmp_path, REVOKING_GRADER, ("refused-after-revoke", "never-sent"), ("never-sent",)
    )
    result = verify(tmp_path, library, KEEPER, task=task)
    assert result.passed and result.needsReview
    assert [d.category for d in result.diagnostics] == ["safety"]
    assert "called effect 'send' after it was revoked" in result.diagnostics[0].message


# -- grader mistakes are infrastructure ----------------------------------------------


def test_recording_an_undeclared_assertion_is_a_grader_error(tmp_path: Path, library: Path) -> None:
    grader = SAMPLE_GRADER.replace('sc.record("retries-flaky"', 'sc.record("retries-flakey"')
    result = verify(tmp_path, library, CORRECT, task=write_task(tmp_path, grader))
    assert result.infrastructure_failed and not result.safety_passed
    assert result.error is not None
    assert "grader error: assertion 'retries-flakey' is not declared" in result.error.message


def test_a_declared_assertion_never_recorded_is_a_grader_error(
    tmp_path: Path, library: Path
) -> None:
    grader = SAMPLE_GRADER.replace(
        'sc.record("retries-flaky", out == 7 and fetch.count == 2)', "pass"
    )
    result = verify(tmp_path, library, CORRECT, task=write_task(tmp_path, grader))
    assert result.infrastructure_failed
    assert result.error is not None
    assert "never recorded declared assertions ['retries-flaky']" in result.error.message


def test_a_grader_that_disagrees_with_task_json_is_refused_before_running(
    tmp_path: Path, library: Path
) -> None:
    task = write_task(tmp_path, assertions=(*ASSERTIONS, "extra-check"))
    result = verify(tmp_path, library, CORRECT, task=task)
    assert result.infrastructure_failed and result.assertions == []
    assert result.error is not None
    assert "only in task.json ['extra-check']" in result.error.message


# -- formats and entry points --------------------------------------------------------------


def job_data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schemaVersion": 1,
        "taskId": "sample-task",
        "graderPath": "/t/grader.py",
        "taskPath": "/t/task.json",
        "solutionDir": "/solution",
        "scratchDir": "/tmp/scratch",
        "resultPath": "/run/result/result.json",
    }
    data.update(changes)
    return data


def test_the_runtime_and_the_host_model_agree_on_the_job_format() -> None:
    host = VerifierJob.model_validate(job_data()).model_dump(mode="json")
    job = parse_job(host)
    limits = VerifierLimits()
    assert job.limits.call_timeout_ms == limits.callTimeoutMs
    assert job.limits.memory_bytes == limits.memoryBytes
    assert job.limits.max_processes is None and job.isolation.drop_privileges is False
    assert job.isolation.kill_all_on_cleanup is False and job.isolation.child_uid == 65534
    assert set(VerifierJob.model_fields) == {
        "schemaVersion", "taskId", "graderPath", "taskPath", "solutionDir", "scratchDir",
        "resultPath", "parentImportPaths", "solutionImportPaths", "limits", "isolation",
    }  # fmt: skip
    assert (
        parse_job(
            VerifierJob.model_validate(job_data(limits={"cpuSeconds": 3})).model_dump(mode="json")
        ).limits.cpu_seconds
        == 3
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"score": 1}, r"unknown keys \['score'\]"),
        ({"solutionDir": "relative/dir"}, "must be an absolute path"),
        ({"schemaVersion": 2}, "schemaVersion must be 1"),
        ({"limits": {"callTimeoutMs": 0}}, r"callTimeoutMs must be an integer in \[1,"),
        ({"isolation": {"childUid": 0}}, "childUid must be an integer"),
        ({"isolation": {"killAllOnCleanup": True}}, "requires dropPrivileges"),
    ],
)
def test_the_runtime_refuses_a_malformed_job(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(JobError, match=message):
        parse_job(job_data(**changes))


def test_the_result_format_is_pinned_and_refuses_duplicates() -> None:
    assert set(BehaviourResult.model_fields) == {
        "schemaVersion", "taskId", "assertions", "needsReview", "diagnostics", "error",
    }  # fmt: skip
    outcome = {"id": "a", "passed": True, "observed": True, "safety": False}
    base = {"schemaVersion": 1, "taskId": "t", "needsReview": False, "diagnostics": []}
    with pytest.raises(ValueError, match="appears twice"):
        BehaviourResult.model_validate({**base, "assertions": [outcome, outcome], "error": None})
    with pytest.raises(ValueError, match="only after an infrastructure error"):
        BehaviourResult.model_validate({**base, "assertions": [], "error": None})


def test_the_local_engine_never_drops_privileges_or_kills_every_process(
    tmp_path: Path, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []

    def capture(
        python: str, runtime: Path, job_path: Path, timeout_s: float, *, zygote: bool
    ) -> None:
        assert zygote is ZYGOTE
        seen.append(json.loads(job_path.read_text()))
        assert (runtime / "agent_eval" / "verification" / "runtime" / "parent.py").is_file()
        assert (runtime / "graders" / "results.py").is_file()
        raise InfrastructureError("stop here")

    monkeypatch.setattr(local_engine, "_run_parent", capture)
    with pytest.raises(InfrastructureError, match="stop here"):
        verify(tmp_path, library, CORRECT)
    (job,) = seen
    assert job["isolation"]["dropPrivileges"] is False
    assert job["isolation"]["killAllOnCleanup"] is False
    assert job["solutionImportPaths"] == [str(library.resolve())]


def test_the_entry_point_refuses_a_bad_job_without_writing_anything(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps(job_data(score=100)))
    completed = subprocess.run(
        [sys.executable, "-m", "agent_eval.verification.runtime", str(job)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert completed.returncode == 2
    assert "unknown keys ['score']" in completed.stderr
    assert completed.stdout == ""


def test_the_child_refuses_to_drop_to_root_and_reports_an_unwritable_oom_score(
    tmp_path: Path,
) -> None:
    # Checked before any system call, so safe on the host.
    with pytest.raises(IsolationError, match="may not run as UID or GID 0"):
        drop_privileges(0, 65534)
    with pytest.raises(IsolationError, match="cannot write"):
        raise_oom_score(str(tmp_path / "missing" / "oom_score_adj"))


def _nest(root: Path, depth: int, outside: Path) -> None:
    # Relative steps: no path grows past PATH_MAX, and os.makedirs would recurse.
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o400, dir_fd=fd))
            os.symlink(outside, "outside", dir_fd=fd)  # removed, never followed
            fd, above = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(above)
        os.mkdir("locked", 0o500, dir_fd=fd)
        os.chmod(fd, 0o500)
    finally:
        os.close(fd)


@pytest.mark.parametrize("depth", [10, 300, 3000])
def test_a_tree_of_any_depth_is_removed_with_few_descriptors_and_no_recursion(
    tmp_path: Path, depth: int
) -> None:
    # In a process like the child: 16 descriptors, a recursion limit far below the depth.
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (outside / "kept").write_text("x")
    _nest(tree, depth, outside)
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))\n"
        "from agent_eval.verification.runtime.isolation import remove_tree\n"
        "sys.setrecursionlimit(100)\n"
        "remove_tree(sys.argv[1])\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tree)], check=True, cwd=REPO, timeout=120)
    assert not tree.exists()
    assert (outside / "kept").read_text() == "x"


def test_removing_a_tree_stops_when_its_cpu_time_is_used_up(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for n in range(50):
        (tree / f"f{n}").write_text("x")
    with pytest.raises(IsolationError, match="longer than its share"):
        remove_tree(str(tree), cpu_deadline=time.process_time() - 1)
    assert tree.exists()
    remove_tree(str(tree), cpu_deadline=time.process_time() + 60)
    assert not tree.exists()


def test_whatever_stops_the_sweep_is_answered_as_the_solutions_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def sweep(paths: list[str], *, keep: str | None, cpu_budget_s: float | None) -> int:
        assert (paths, keep, cpu_budget_s) == (["/tmp"], "/tmp/scenario-1", 0.5)
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(child, "sweep_own_state", sweep)
    start: dict[str, Any] = {
        "dropPrivileges": True,
        "sweep": ["/tmp"],
        "workDir": "/tmp/scenario-1",
        "sweepCpuS": 0.5,
    }
    assert child._sweep(start) == {
        "op": "sweep-error",
        "message": "RecursionError: maximum recursion depth exceeded",
    }
    # Without the privilege drop there is nothing of the solution's own to sweep.
    assert child._sweep({**start, "dropPrivileges": False}) is None
