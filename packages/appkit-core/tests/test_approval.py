"""Tests for appkit.approval: effects never run without a matching approval."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from appkit import (
    Approval,
    ApprovalDeniedError,
    ApprovalError,
    ApprovalExpiredError,
    ApprovalGate,
    ApprovalMismatchError,
    ApprovalRequest,
    ApprovalUsedError,
    PermanentError,
    content_digest,
)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Effect:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, arguments: dict[str, Any]) -> str:
        self.calls.append(arguments)
        return "done"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def gate(clock: FakeClock) -> ApprovalGate:
    return ApprovalGate(clock=clock, ttl=60)


REQUEST = ApprovalRequest("transfer", {"amount": 100, "to": "acct-1"})


def test_request_digest_binds_action_and_arguments() -> None:
    assert REQUEST.digest == content_digest(
        {"action": "transfer", "arguments": {"amount": 100, "to": "acct-1"}}
    )
    same = ApprovalRequest("transfer", {"to": "acct-1", "amount": 100})
    assert same.digest == REQUEST.digest
    assert ApprovalRequest("transfer", {"amount": 101, "to": "acct-1"}).digest != REQUEST.digest
    assert ApprovalRequest("refund", {"amount": 100, "to": "acct-1"}).digest != REQUEST.digest


def test_request_copies_its_arguments() -> None:
    arguments: dict[str, Any] = {"amount": 1, "tags": ["a"]}
    request = ApprovalRequest("pay", arguments)
    before = request.digest
    arguments["amount"] = 2
    arguments["tags"].append("b")
    assert request.digest == before
    assert dict(request.arguments) == {"amount": 1, "tags": ["a"]}
    with pytest.raises(TypeError):
        request.arguments["amount"] = 3  # type: ignore[index]


def test_bad_requests_are_refused() -> None:
    with pytest.raises(ValueError):
        ApprovalRequest("", {})
    with pytest.raises(TypeError):
        ApprovalRequest("x", {"when": object()})
    with pytest.raises(TypeError):
        ApprovalRequest("x", ["not", "a", "mapping"])  # type: ignore[arg-type]


def test_approved_request_runs_effect_with_exact_arguments(gate: ApprovalGate) -> None:
    effect = Effect()
    approval = gate.approve(REQUEST, approver="alice")
    assert approval.granted
    assert approval.request_digest == REQUEST.digest
    assert approval.approver == "alice"
    assert approval.expires_at == approval.issued_at + 60
    assert gate.run(REQUEST, approval, effect) == "done"
    assert effect.calls == [{"amount": 100, "to": "acct-1"}]


def test_missing_approval_never_runs_effect(gate: ApprovalGate) -> None:
    effect = Effect()
    with pytest.raises(ApprovalDeniedError):
        gate.run(REQUEST, None, effect)
    assert effect.calls == []


def test_denied_approval_never_runs_effect(gate: ApprovalGate) -> None:
    effect = Effect()
    denial = gate.deny(REQUEST, approver="bob", reason="too large")
    assert not denial.granted
    assert denial.reason == "too large"
    with pytest.raises(ApprovalDeniedError) as caught:
        gate.run(REQUEST, denial, effect)
    assert caught.value.code == "approval_denied"
    assert effect.calls == []


def test_approval_for_other_arguments_never_runs_effect(gate: ApprovalGate) -> None:
    effect = Effect()
    approval = gate.approve(
        ApprovalRequest("transfer", {"amount": 1, "to": "acct-1"}), approver="alice"
    )
    with pytest.raises(ApprovalMismatchError) as caught:
        gate.run(REQUEST, approval, effect)
    assert caught.value.code == "approval_mismatch"
    assert effect.calls == []


def test_approval_for_other_action_never_runs_effect(gate: ApprovalGate) -> None:
    effect = Effect()
    approval = gate.approve(ApprovalRequest("refund", dict(REQUEST.arguments)), approver="a")
    with pytest.raises(ApprovalMismatchError):
        gate.run(REQUEST, approval, effect)
    assert effect.calls == []


def test_request_mutated_after_approval_never_runs_effect(gate: ApprovalGate) -> None:
    effect = Effect()
    request = ApprovalRequest("send", {"to": ["ann"]})
    approval = gate.approve(request, approver="alice")
    request.arguments["to"].append("mallory")
    with pytest.raises(ApprovalMismatchError):
        gate.run(request, approval, effect)
    assert effect.calls == []


def test_expired_approval_never_runs_effect(gate: ApprovalGate, clock: FakeClock) -> None:
    effect = Effect()
    approval = gate.approve(REQUEST, approver="alice", ttl=10)
    clock.now += 10
    with pytest.raises(ApprovalExpiredError) as caught:
        gate.run(REQUEST, approval, effect)
    assert caught.value.code == "approval_expired"
    assert effect.calls == []


def test_approval_just_before_expiry_runs(gate: ApprovalGate, clock: FakeClock) -> None:
    effect = Effect()
    approval = gate.approve(REQUEST, approver="alice", ttl=10)
    clock.now += 9.999
    gate.run(REQUEST, approval, effect)
    assert len(effect.calls) == 1


def test_approval_is_single_use(gate: ApprovalGate) -> None:
    effect = Effect()
    approval = gate.approve(REQUEST, approver="alice")
    gate.run(REQUEST, approval, effect)
    with pytest.raises(ApprovalUsedError) as caught:
        gate.run(REQUEST, approval, effect)
    assert caught.value.code == "approval_used"
    assert len(effect.calls) == 1


def test_approval_is_used_up_even_when_effect_fails(gate: ApprovalGate) -> None:
    approval = gate.approve(REQUEST, approver="alice")

    def failing(arguments: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        gate.run(REQUEST, approval, failing)
    with pytest.raises(ApprovalUsedError):
        gate.check(REQUEST, approval)


def test_forged_or_altered_approvals_are_refused(gate: ApprovalGate, clock: FakeClock) -> None:
    effect = Effect()
    forged = Approval(
        id="0" * 32,
        request_digest=REQUEST.digest,
        granted=True,
        approver="mallory",
        issued_at=clock.now,
        expires_at=clock.now + 60,
    )
    with pytest.raises(ApprovalMismatchError):
        gate.run(REQUEST, forged, effect)
    denial = gate.deny(REQUEST, approver="bob")
    flipped = dataclasses.replace(denial, granted=True)
    with pytest.raises(ApprovalMismatchError):
        gate.run(REQUEST, flipped, effect)
    approval = gate.approve(REQUEST, approver="alice", ttl=1)
    extended = dataclasses.replace(approval, expires_at=approval.expires_at + 1000)
    clock.now += 5
    with pytest.raises(ApprovalMismatchError):
        gate.run(REQUEST, extended, effect)
    assert effect.calls == []


def test_approval_from_another_gate_is_refused(gate: ApprovalGate) -> None:
    effect = Effect()
    other = ApprovalGate()
    approval = other.approve(REQUEST, approver="alice")
    with pytest.raises(ApprovalMismatchError):
        gate.run(REQUEST, approval, effect)
    assert effect.calls == []


def test_check_does_not_use_up_the_approval(gate: ApprovalGate) -> None:
    effect = Effect()
    approval = gate.approve(REQUEST, approver="alice")
    gate.check(REQUEST, approval)
    gate.check(REQUEST, approval)
    gate.run(REQUEST, approval, effect)
    assert len(effect.calls) == 1


def test_effect_gets_a_private_copy(gate: ApprovalGate) -> None:
    request = ApprovalRequest("send", {"to": ["ann"]})
    approval = gate.approve(request, approver="alice")

    def greedy(arguments: dict[str, Any]) -> None:
        arguments["to"].append("mallory")

    gate.run(request, approval, greedy)
    assert request.arguments["to"] == ["ann"]


def test_approval_errors_are_permanent() -> None:
    for error_type in (
        ApprovalDeniedError,
        ApprovalExpiredError,
        ApprovalMismatchError,
        ApprovalUsedError,
    ):
        assert issubclass(error_type, ApprovalError)
        assert issubclass(error_type, PermanentError)


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan")])
def test_bad_ttl_is_refused(ttl: float) -> None:
    with pytest.raises(ValueError):
        ApprovalGate(ttl=ttl)
    with pytest.raises(ValueError):
        ApprovalGate().approve(REQUEST, approver="alice", ttl=ttl)


def test_approver_is_required(gate: ApprovalGate) -> None:
    with pytest.raises(ValueError):
        gate.approve(REQUEST, approver="")
