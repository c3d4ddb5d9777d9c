"""Whatever the solution writes to its child's pipe, the parent writes a result that blames it.

The solution runs in the child's process and can write its own bytes to the
pipe the parent reads. Any bytes at all — lone surrogates, invalid UTF-8,
huge or deep values, unknown ops, frames out of order, truncated, or after
the end — must end as the solution's own failure (never ``infrastructure``,
which would be retried and stop the batch), the parent must not raise, its
result must be written and be one the host accepts, and a later scenario
must still work.

Here the parent's own code (``ChildProcess``, the session, ``write_result``)
runs in process against a scripted child: after the ``isolated`` frame the
harness's child would send, the test writes the script to the parent's pipe
and closes it. The verifier container runs a fixed corpus of the same scripts
(``tests/verification/container/test_hostile_frames_docker.py``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_eval.grading import Grader, Session, SolutionRaised
from agent_eval.grading.results import GradeReport
from agent_eval.models import BehaviourResult
from agent_eval.verification.runtime import parent
from agent_eval.verification.runtime.framing import FrameReader, encode_frame
from agent_eval.verification.runtime.job import Job, Limits
from agent_eval.verification.runtime.parent import ChildOpener, ChildProcess, write_result
from agent_eval.verification.runtime.values import decode
from tests.verification.runtime.hostile_frames import frame, scripts

READY = frame(b'{"op":"ready"}')


def message(value: dict[str, Any]) -> bytes:
    return frame(json.dumps(value, separators=(",", ":")).encode())


ECHO = READY + message({"op": "return", "id": 1, "value": "hello"})


class Probe(Grader):
    task_id = "frames"
    assertion_ids = ("answered", "echoed")
    safety_assertion_ids = ()

    def run(self, session: Session) -> None:
        # A curious grader: it shows whatever it was given (a repr, a note).
        with session.scenario("hostile") as sc:
            send = sc.effect("send", returns="sent")
            try:
                first = sc.call("probe", send)
                second = sc.call("probe", send)
            except SolutionRaised as raised:
                sc.note(f"raised {raised.type}: {raised.message} {raised.attributes!r}")
                sc.record("answered", False, observed_value=raised.attributes)
            else:
                sc.record("answered", first == second == "ok", observed_value=[first, second])
        with session.scenario("echo") as sc:
            sc.record("echoed", sc.call("echo", "hello") == "hello")


class ScriptedChild(ChildProcess):
    """The parent's side of a scenario whose child is this test: it writes *script* and closes."""

    def __init__(self, job: Job, workdir: Path, opener: ChildOpener, script: bytes) -> None:
        super().__init__(job, "solution", workdir, opener.clock)
        self.script = script
        self.threads: list[threading.Thread] = []

    def _spawn(self) -> None:
        to_child_r, to_child_w = os.pipe2(os.O_CLOEXEC)
        to_parent_r, to_parent_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        os.close(out_w)
        self._write_fd, self._out_fd = to_child_w, out_r
        self._reader = FrameReader(
            to_parent_r,
            max_bytes=self.job.limits.max_message_bytes,
            on_idle=self._on_idle,
            clock=self.clock,
        )
        os.set_blocking(to_child_w, False)
        os.set_blocking(out_r, False)
        data = encode_frame({"op": "isolated"}) + self.script

        def write() -> None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(to_parent_w, view) :]
            except OSError:  # the parent stopped reading: it is done with this child
                pass
            finally:
                os.close(to_parent_w)

        def drain() -> None:
            try:
                while os.read(to_child_r, 1 << 16):
                    pass
            finally:
                os.close(to_child_r)

        self.threads = [threading.Thread(target=write), threading.Thread(target=drain)]
        for thread in self.threads:
            thread.start()


class ScriptedOpener(ChildOpener):
    def __init__(self, job: Job, scripts: list[bytes]) -> None:
        super().__init__(job, "solution")
        self.scripts = list(scripts)
        self.children: list[ScriptedChild] = []

    def _new_process(self, workdir: Path) -> ChildProcess:
        child = ScriptedChild(self.job, workdir, self, self.scripts.pop(0))
        self.children.append(child)
        return child


@pytest.fixture(autouse=True, scope="module")
def no_exit_grace() -> Iterator[None]:
    # A scripted child has no process whose exit status could be waited for.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parent, "_EXIT_GRACE_S", 0.0)
        yield


def grade(root: Path, hostile: bytes, *, max_message_bytes: int = 1 << 16) -> GradeReport:
    """Grade Probe with *hostile* written in its first scenario; the result is written too."""
    root.mkdir(parents=True, exist_ok=True)
    job = Job(
        task_id="frames",
        grader_path=root / "grader.py",
        task_path=root / "task.json",
        solution_dir=root,
        scratch_dir=root,
        result_path=root / "result.json",
        limits=Limits(max_message_bytes=max_message_bytes),
    )
    opener = ScriptedOpener(job, [hostile, ECHO])
    session = Session(
        Probe(), opener, call_timeout=5, scenario_timeout=10, total_timeout=30, clock=opener.clock
    )
    report = session.grade()
    for child in opener.children:
        for thread in child.threads:
            thread.join(timeout=10)
            assert not thread.is_alive()
    write_result(job.result_path, report.to_json())
    return report


def written(root: Path) -> BehaviourResult:
    """The result file as the host reads it."""
    return BehaviourResult.model_validate_json((root / "result.json").read_bytes())


def assert_the_solutions_own_failure(root: Path, report: GradeReport) -> BehaviourResult:
    result = written(root)
    assert not result.infrastructure_failed, result.error
    assert all(d.category != "infrastructure" for d in result.diagnostics), result.diagnostics
    assert report.passed("echoed"), report
    return result


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(script=scripts, ready_first=st.booleans())
def test_any_bytes_from_the_child_end_as_the_solutions_failure_with_a_result_written(
    tmp_path_factory: pytest.TempPathFactory, script: bytes, ready_first: bool
) -> None:
    root = tmp_path_factory.mktemp("case")
    hostile = (READY if ready_first else b"") + script
    report = grade(root, hostile)
    result = written(root)
    assert not result.infrastructure_failed, result.error
    assert all(d.category != "infrastructure" for d in result.diagnostics), result.diagnostics
    if ready_first:
        # The solution imported: whatever it did, the next scenario's child works.
        assert report.passed("echoed"), report


def test_a_fail_frame_with_a_lone_surrogate_is_the_solutions_failure(tmp_path: Path) -> None:
    forged = frame(b'{"op":"fail","id":1,"message":"bad \\ud800"}')
    report = grade(tmp_path, READY + forged)
    result = assert_the_solutions_own_failure(tmp_path, report)
    assert result.error is not None and result.error.category == "behaviour"
    assert "broke the protocol" in result.error.message
    assert "surrogate" in result.error.message


def test_a_raise_frame_with_lone_surrogates_everywhere_is_the_solutions_failure(
    tmp_path: Path,
) -> None:
    raised = {
        "op": "raise",
        "id": 1,
        "type": "E\ud800",
        "message": "m\udfff",
        "mro": ["x.E\udc00"],
        "attributes": {"code": "\ud83d"},
    }
    body = json.dumps(raised).encode()  # ensure_ascii: the surrogates as escapes
    report = grade(tmp_path, READY + frame(body))
    result = assert_the_solutions_own_failure(tmp_path, report)
    assert result.error is not None and result.error.category == "behaviour"


def test_an_exception_attribute_nested_past_the_bound_breaks_the_protocol(
    tmp_path: Path,
) -> None:
    # Left as it came, a grader's repr of it would exhaust the parent's stack.
    deep = b"[" * 700 + b"]" * 700
    raised = b'{"op":"raise","id":1,"type":"E","message":"m","mro":[],"attributes":{"code":'
    report = grade(tmp_path, READY + frame(raised + deep + b"}}"))
    result = assert_the_solutions_own_failure(tmp_path, report)
    assert result.error is not None and "an exception attribute is refused" in result.error.message


def test_the_result_file_holds_text_whatever_string_reaches_it(tmp_path: Path) -> None:
    result = {
        "schemaVersion": 1,
        "taskId": "frames",
        "assertions": [
            {
                "id": "a",
                "passed": False,
                "observed": True,
                "safety": False,
                "message": "said \ud800 and \udfff\ud83d",
            }
        ],
        "needsReview": False,
        "diagnostics": [{"category": "behaviour", "message": "x" * 1999 + "\udc80"}],
        "error": {"category": "behaviour", "message": "bad \ud800"},
    }
    write_result(tmp_path / "result.json", result)
    read = written(tmp_path)
    assert read.error is not None and read.error.message == "bad \ufffd"
    assert read.assertions[0].message == "said \ufffd and \ufffd\ufffd"
    # One character for one: the host's length bounds still hold.
    assert len(read.diagnostics[0].message) == 2000


def test_an_effect_never_given_is_refused_without_decoding_its_arguments(tmp_path: Path) -> None:
    # Arguments that would be refused if decoded: the name alone decides.
    call = {"op": "effect", "call": 1, "effect": "other", "args": [{"$type": "nope"}], "kwargs": {}}
    answered = message({"op": "return", "id": 1, "value": "ok"})
    report = grade(
        tmp_path, READY + message(call) + answered + answered.replace(b'"id":1', b'"id":2')
    )
    result = assert_the_solutions_own_failure(tmp_path, report)
    assert result.error is None and result.needsReview
    assert any(
        d.category == "safety" and "effect 'other' it was not given" in d.message
        for d in result.diagnostics
    ), result.diagnostics


def test_an_effect_name_that_is_no_name_breaks_the_protocol(tmp_path: Path) -> None:
    call = {"op": "effect", "call": 1, "effect": "n" * 60_000, "args": [], "kwargs": {}}
    report = grade(tmp_path, READY + message(call))
    result = assert_the_solutions_own_failure(tmp_path, report)
    assert result.error is not None and "a malformed effect call" in result.error.message


def test_a_solution_that_floods_its_pipe_fails_on_its_budget(tmp_path: Path) -> None:
    # Effect calls of the effect it was given, each near the message limit, never
    # waiting for an answer: the parent stops reading after a bounded amount.
    call = {"op": "effect", "call": 1, "effect": "send", "args": ["a" * 60_000], "kwargs": {}}
    report = grade(tmp_path, READY + message(call) * 40)
    result = assert_the_solutions_own_failure(tmp_path, report)
    assert result.error is not None and result.error.category == "behaviour"
    assert f"sent more than {4 * (1 << 16)} bytes of messages in one call" in result.error.message


def test_many_tiny_frames_count_against_the_budget_too(tmp_path: Path) -> None:
    tiny = message({"op": "effect", "call": 1, "effect": "x", "args": [], "kwargs": {}})
    report = grade(tmp_path, READY + tiny * 2000)
    result = assert_the_solutions_own_failure(tmp_path, report)
    assert result.error is not None and "bytes of messages in one call" in result.error.message


def test_an_unexpected_op_of_any_shape_is_named_briefly(tmp_path: Path) -> None:
    deep: Any = "x"
    for _ in range(900):
        deep = [deep]
    report = grade(tmp_path, READY + message({"op": deep, "id": 1}))
    result = assert_the_solutions_own_failure(tmp_path, report)
    assert result.error is not None
    assert "unexpected message a JSON list" in result.error.message


def test_a_refused_value_names_where_with_long_keys_cut() -> None:
    with pytest.raises(ValueError) as refused:
        decode({"k" * 100_000: [0, {"$type": "nope"}]})
    assert str(refused.value) == f"{'k' * 40}...[1]: unknown tag 'nope'"
