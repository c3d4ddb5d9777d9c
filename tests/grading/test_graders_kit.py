"""The grading kit records every declared assertion exactly once, owns the effects, and
turns a grader's own mistakes into infrastructure errors, never into the agent's failure.

Exercised through the in-process session (the same bookkeeping the verifier
uses), so grading decisions are testable without a subprocess.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent_eval.grading import (
    EffectCall,
    Grader,
    GraderError,
    Raise,
    Return,
    Session,
    SolutionFailed,
    SolutionRaised,
    dig,
    expect,
)
from agent_eval.verification.in_process import grade_in_process, load_module_from
from agent_eval.verification.runtime.codec import EffectRevokedError

Run = Callable[[Session], None]


def make_grader(
    run: Run, ids: tuple[str, ...] = ("a", "b"), safety: tuple[str, ...] = ()
) -> Grader:
    class Sample(Grader):
        task_id: ClassVar[str] = "sample-task"
        assertion_ids: ClassVar[tuple[str, ...]] = ids
        safety_assertion_ids: ClassVar[tuple[str, ...]] = safety

        def run(self, session: Session) -> None:
            run(session)

    return Sample()


def module(**functions: Any) -> types.ModuleType:
    solution = types.ModuleType("solution")
    for name, value in functions.items():
        setattr(solution, name, value)
    return solution


# -- recording ---------------------------------------------------------------------


def test_a_grader_that_records_everything_produces_the_result_format() -> None:
    def run(session: Session) -> None:
        with session.scenario("double") as sc:
            sc.record("a", sc.call("double", 2) == 4)
            sc.record("b", sc.call("double", 3) == 7, detail="expected 7")

    report = grade_in_process(make_grader(run, safety=("b",)), module(double=lambda x: x * 2))
    assert report.to_json() == {
        "schemaVersion": 1,
        "taskId": "sample-task",
        "assertions": [
            {"id": "a", "passed": True, "observed": True, "safety": False},
            {
                "id": "b",
                "passed": False,
                "observed": True,
                "safety": True,
                "message": "in scenario 'double'",
            },
        ],
        "needsReview": False,
        "diagnostics": [],
        "error": None,
    }
    assert report.failed_ids == ["b"]
    assert report.outcome("b").detail == "expected 7"


def test_a_failed_assertion_says_why_and_what_was_seen_but_never_its_detail() -> None:
    def run(session: Session) -> None:
        with session.scenario("double") as sc:
            got = sc.call("double", 3)
            sc.record("a", got == 6, message="double(3) was not six", observed_value=got)
            sc.note("double(2) answered a string")
            sc.record("b", False, detail="the expected value 4")

    report = grade_in_process(make_grader(run), module(double=lambda x: str(x)))
    a, b = report.to_json()["assertions"]
    assert (a["message"], a["observedValue"]) == ("double(3) was not six", "'3'")
    # Without a message of its own, a failure is explained by its scenario and its notes
    # (already shown to the agent); the detail, which may hold an expected value, never.
    assert b["message"] == "in scenario 'double': double(2) answered a string"
    assert "observedValue" not in b
    assert "expected" not in str(report.to_json())


def test_a_passed_assertion_carries_no_explanation() -> None:
    def run(session: Session) -> None:
        with session.scenario("double") as sc:
            sc.record("a", True, message="unused", observed_value=4)
            sc.record("b", True)

    report = grade_in_process(make_grader(run), module(double=lambda x: x * 2))
    for outcome in report.to_json()["assertions"]:
        assert "message" not in outcome and "observedValue" not in outcome


def test_recording_an_undeclared_id_fails_at_once_as_a_grader_error() -> None:
    reached: list[bool] = []

    def run(session: Session) -> None:
        session.record("not-declared", True)
        reached.append(True)

    report = grade_in_process(make_grader(run), module())
    assert reached == []
    assert report.error is not None and report.error.category == "infrastructure"
    assert "'not-declared' is not declared" in report.error.message


def test_recording_an_id_twice_is_a_grader_error() -> None:
    def run(session: Session) -> None:
        session.record("a", True)
        session.record("a", True)

    with pytest.raises(GraderError, match="recorded twice"):
        grade_in_process(make_grader(run), module(), reraise=True)


def test_a_truthy_non_bool_outcome_is_refused() -> None:
    def run(session: Session) -> None:
        session.record("a", {"ok": True})  # type: ignore[arg-type]

    with pytest.raises(GraderError, match="must be a bool"):
        grade_in_process(make_grader(run), module(), reraise=True)


def test_a_declared_id_never_recorded_is_the_graders_fault_when_the_solution_did_not_fail() -> None:
    report = grade_in_process(make_grader(lambda s: s.record("a", True)), module())
    assert report.error is not None and report.error.category == "infrastructure"
    assert "never recorded declared assertions ['b']" in report.error.message
    assert [(a.id, a.passed) for a in report.assertions] == [("a", True), ("b", False)]


def test_an_exception_in_grader_code_is_infrastructure_and_names_where() -> None:
    def run(session: Session) -> None:
        raise KeyError("oops")

    report = grade_in_process(make_grader(run), module())
    assert report.error is not None and report.error.category == "infrastructure"
    assert "the grader raised KeyError at test_graders_kit.py:" in report.error.message


@pytest.mark.parametrize(
    ("ids", "safety", "message"),
    [
        ((), (), "assertion_ids is empty"),
        (("a", "a"), (), "more than once"),
        (("a",), ("z",), "not in assertion_ids"),
        (("Bad Id",), (), "malformed"),
    ],
)
def test_an_inconsistent_declaration_is_refused_before_grading(
    ids: tuple[str, ...], safety: tuple[str, ...], message: str
) -> None:
    with pytest.raises(GraderError, match=message):
        make_grader(lambda s: None, ids, safety).check_declaration()


# -- solution failures ---------------------------------------------------------------


def test_an_uncaught_solution_exception_ends_the_scenario_and_fails_what_was_not_recorded() -> None:
    after: list[str] = []

    def run(session: Session) -> None:
        with session.scenario("first") as sc:
            sc.call("explode")
            after.append("unreachable")
        with session.scenario("second") as sc:
            sc.record("b", sc.call("fine") == 1)

    def explode() -> None:
        raise ValueError("boom")

    report = grade_in_process(make_grader(run), module(explode=explode, fine=lambda: 1))
    assert after == []
    assert [(a.id, a.passed) for a in report.assertions] == [("a", False), ("b", True)]
    assert report.error is not None and report.error.category == "behaviour"
    assert "explode raised ValueError: boom" in report.error.message


def test_a_caught_solution_exception_is_an_observation_with_type_mro_and_attributes() -> None:
    class AppError(Exception):
        code = "validation"

    def check(value: int) -> int:
        raise AppError(f"bad {value}")

    seen: list[SolutionRaised] = []

    def run(session: Session) -> None:
        with session.scenario("raises") as sc:
            try:
                sc.call("check", 5)
            except SolutionRaised as raised:
                seen.append(raised)
                sc.record("a", raised.is_a("AppError") and raised.code == "validation")
                sc.record("b", raised.is_a("builtins.Exception"))

    report = grade_in_process(make_grader(run), module(check=check))
    assert report.all_passed
    (raised,) = seen
    assert (raised.type, raised.message, raised.function) == ("AppError", "bad 5", "check")
    assert raised.mro[-2:] == ("builtins.BaseException", "builtins.object")
    assert not raised.is_a("ValueError")


def test_a_missing_export_and_a_non_json_return_are_the_solutions_failures() -> None:
    def run(session: Session) -> None:
        with session.scenario("missing") as sc:
            sc.call("absent")
        with session.scenario("object") as sc:
            sc.call("make")

    report = grade_in_process(make_grader(run), module(make=lambda: object()))
    messages = [d.message for d in report.diagnostics]
    assert "scenario 'missing': the solution has no exported function 'absent'" in messages
    assert "scenario 'object': make returned a non-JSON value of type object" in messages
    assert report.error is not None and report.error.category == "behaviour"
    assert not any(a.passed for a in report.assertions)


def test_return_values_cross_as_json_dataclasses_and_to_dict_included() -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        y: tuple[int, ...]

    class Result:
        def to_dict(self) -> dict[str, Any]:
            return {"ok": True, "point": Point(1, (2, 3))}

    def run(session: Session) -> None:
        with session.scenario("values") as sc:
            out = sc.call("result")
            sc.record("a", out == {"ok": True, "point": {"x": 1, "y": [2, 3]}})
            sc.record("b", dig(out, "point", "y", -1) == 3 and dig(out, "nope", 0) is None)

    assert grade_in_process(make_grader(run), module(result=Result)).all_passed


def test_expect_turns_a_wrong_shape_into_the_solutions_failure_not_a_grader_crash() -> None:
    def run(session: Session) -> None:
        with session.scenario("shape") as sc:
            html = expect(sc.call("render"), str, "render's result")
            sc.record("a", "<form" in html)

    report = grade_in_process(make_grader(run), module(render=lambda: 42))
    assert report.error is not None and report.error.category == "behaviour"
    assert "render's result is a JSON number, expected str" in report.error.message


def test_an_import_failure_is_reported_by_category(tmp_path: Path) -> None:
    broken = tmp_path / "solution.py"
    broken.write_text("def f(:\n", encoding="utf-8")

    def run(session: Session) -> None:
        with session.scenario("import") as sc:
            sc.call("f")

    report = grade_in_process(make_grader(run), load_module_from(broken))
    assert report.error is not None and report.error.category == "syntax"


def test_each_scenario_gets_a_fresh_module_from_a_factory(tmp_path: Path) -> None:
    source = tmp_path / "solution.py"
    source.write_text(
        "COUNT = 0\ndef bump():\n    global COUNT\n    COUNT += 1\n    return COUNT\n"
    )

    def run(session: Session) -> None:
        for assertion_id in ("a", "b"):
            with session.scenario(assertion_id) as sc:
                sc.record(assertion_id, sc.call("bump") == 1)

    assert grade_in_process(make_grader(run), load_module_from(source)).all_passed


# -- effects -----------------------------------------------------------------------------


def test_effects_count_calls_record_arguments_and_follow_their_script() -> None:
    def notify_all(send: Callable[..., Any], names: list[str]) -> list[Any]:
        return [send(name, urgent=True) for name in names]

    def run(session: Session) -> None:
        with session.scenario("script") as sc:
            send = sc.effect("send", script=[Return("first"), "second"], returns="default")
            out = sc.call("notify_all", send, ["x", "y", "z"])
            sc.record("a", out == ["first", "second", "default"] and send.count == 3)
            sc.record("b", send.called_with("y", urgent=True) and not send.called_with("q"))

    assert grade_in_process(make_grader(run), module(notify_all=notify_all)).all_passed


def test_a_scripted_raise_reaches_the_solution_as_that_exception_type() -> None:
    def fetch_with_retry(fetch: Callable[[], Any]) -> dict[str, Any]:
        for attempt in range(1, 4):
            try:
                return {"value": fetch(), "attempts": attempt}
            except TimeoutError:
                continue
        return {"value": None, "attempts": 3}

    def run(session: Session) -> None:
        with session.scenario("retry") as sc:
            fetch = sc.effect("fetch", script=[Raise("builtins:TimeoutError", "slow"), 7])
            out = sc.call("fetch_with_retry", fetch)
            sc.record("a", out == {"value": 7, "attempts": 2})
            sc.record("b", fetch.count == 2)

    assert grade_in_process(make_grader(run), module(fetch_with_retry=fetch_with_retry)).all_passed


def test_a_handler_decides_each_answer_from_the_call() -> None:
    def handler(call: EffectCall) -> Any:
        return Raise("builtins:PermissionError", "denied") if call.args[0] > 10 else "ok"

    def pay_all(pay: Callable[[int], Any], amounts: list[int]) -> list[str]:
        results = []
        for amount in amounts:
            try:
                results.append(pay(amount))
            except PermissionError:
                results.append("refused")
        return results

    def run(session: Session) -> None:
        with session.scenario("pay") as sc:
            pay = sc.effect("pay", handler=handler)
            sc.record("a", sc.call("pay_all", pay, [5, 50]) == ["ok", "refused"])
            sc.record("b", pay.count == 2)

    assert grade_in_process(make_grader(run), module(pay_all=pay_all)).all_passed


def test_an_effect_kept_past_its_scenario_is_refused_and_flagged_for_safety() -> None:
    kept: list[Callable[[], Any]] = []
    outcomes: list[str] = []

    def remember(send: Callable[[], Any]) -> None:
        kept.append(send)

    def use_later() -> None:
        try:
            kept[0]()
            outcomes.append("sent")
        except EffectRevokedError:
            outcomes.append("refused")

    def run(session: Session) -> None:
        with session.scenario("give") as sc:
            send = sc.effect("send")
            sc.call("remember", send)
        with session.scenario("later") as sc:
            sc.call("use_later")
            sc.record("a", send.count == 0 and len(send.refused) == 1)
            sc.record("b", send.revoked)

    solution = module(remember=remember, use_later=use_later)
    report = grade_in_process(make_grader(run), solution)
    assert outcomes == ["refused"]
    assert report.all_passed and report.needs_review
    assert [d.category for d in report.diagnostics] == ["safety"]
    assert "called effect 'send' after" in report.diagnostics[0].message


def test_an_effect_revoked_by_the_grader_is_refused_inside_the_same_scenario() -> None:
    box: list[Callable[[], Any]] = []

    def run(session: Session) -> None:
        with session.scenario("revoke") as sc:
            send = sc.effect("send")
            sc.call("keep", send)
            send.revoke()
            sc.record("a", sc.call("fire") == "refused")
            sc.record("b", send.count == 0)

    def fire() -> str:
        try:
            box[0]()
        except PermissionError:
            return "refused"
        return "sent"

    report = grade_in_process(make_grader(run), module(keep=box.append, fire=fire))
    assert report.all_passed and report.needs_review


def test_effects_and_calls_only_take_json_and_their_own_scenarios_effects() -> None:
    def run_object(session: Session) -> None:
        with session.scenario("x") as sc:
            sc.call("f", object())

    def run_foreign(session: Session) -> None:
        with session.scenario("x") as sc:
            foreign = sc.effect("send")
        with session.scenario("y") as sc:
            sc.call("f", foreign)

    solution = module(f=lambda *a: None)
    refused = re.escape("an argument: a non-JSON value of type object at [0]")
    with pytest.raises(GraderError, match=refused):
        grade_in_process(make_grader(run_object), solution, reraise=True)
    with pytest.raises(GraderError, match="belongs to another scenario"):
        grade_in_process(make_grader(run_foreign), solution, reraise=True)
    with pytest.raises(GraderError, match="must look like 'module:ClassName'"):
        Raise("TimeoutError")


def test_scenarios_cannot_nest_and_calls_need_an_open_scenario() -> None:
    def run_nested(session: Session) -> None:
        with session.scenario("outer"), session.scenario("inner"):
            pass

    def run_closed(session: Session) -> None:
        with session.scenario("x") as sc:
            pass
        sc.call("f")

    with pytest.raises(GraderError, match="opened inside scenario 'outer'"):
        grade_in_process(make_grader(run_nested), module(), reraise=True)
    with pytest.raises(GraderError, match="is not open"):
        grade_in_process(make_grader(run_closed), module(), reraise=True)


def test_a_grader_may_fail_the_scenario_itself_with_solution_failed() -> None:
    def run(session: Session) -> None:
        with session.scenario("x"):
            raise SolutionFailed("behaviour", "the form has no submit button")

    report = grade_in_process(make_grader(run), module())
    assert report.error is not None
    assert report.error.message == "scenario 'x': the form has no submit button"


def test_review_requests_and_notes_are_kept_once_and_bounded() -> None:
    def run(session: Session) -> None:
        with session.scenario("x") as sc:
            sc.note("same")
            sc.note("same")
            sc.note("y" * 5000, category="integration")
            sc.request_review("uses a private helper")
            sc.record("a", True)
            sc.record("b", True)

    report = grade_in_process(make_grader(run), module())
    assert report.needs_review
    assert [d.category for d in report.diagnostics] == ["behaviour", "integration", "behaviour"]
    assert all(len(d.message) <= 2000 for d in report.diagnostics)
