"""Admission: a machine admits the runs in flight its available memory holds (a margin and
one verifier per core taken out first, then 256 MiB per runner), never more than it can;
verifications at once are bounded by cores, not by runs in flight; a refusal names
concurrency, the figure asked, the figure allowed and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.batch.admission import (
    RUNNER_RESERVE_BYTES,
    UNMEASURED_BOUND,
    VERIFIER_RESERVE_BYTES,
    Machine,
    admitted_runs,
    check_admission,
    read_machine,
    verification_slots,
)
from agent_eval.batch.runner_container import RUNNER_LIMITS
from agent_eval.errors import ConfigError
from agent_eval.verification.container.limits import VerificationLimits

GIB = 1 << 30


def test_verifications_at_once_are_one_per_core_at_most_and_never_more_than_the_runs() -> None:
    assert [verification_slots(s, 2) for s in (1, 2, 8, 64)] == [1, 2, 2, 2]
    assert verification_slots(3, 16) == 3


@pytest.mark.parametrize(
    ("available_gib", "cores", "slots", "admitted"),
    [
        (24, 2, 64, 84),  # 24 - 1 margin - 2 verifiers = 21 GiB: 84 runners
        (24, 2, 1, 88),  # one run brings one verification: 22 GiB
        (12, 8, 64, 12),  # eight cores: eight verifiers at once
        (2, 2, 2, 0),  # the margin and the verifiers take it all
    ],
)
def test_the_runs_admitted_are_what_memory_holds_after_the_margin_and_the_verifiers(
    available_gib: int, cores: int, slots: int, admitted: int
) -> None:
    assert admitted_runs(Machine(cores, available_gib * GIB), slots) == admitted


def test_a_machine_that_holds_the_runs_admits_them() -> None:
    check_admission(64, Machine(2, 20 * GIB))
    check_admission(UNMEASURED_BOUND, Machine(2, None))


def test_a_refusal_names_concurrency_both_figures_and_the_memory_that_decided() -> None:
    with pytest.raises(ConfigError) as refused:
        check_admission(64, Machine(2, 12 * GIB))
    assert str(refused.value) == (
        "concurrency 64: this machine holds 36 runs in flight, not 64 (12.0 GiB available, "
        "less a 1.0 GiB margin and 2 verification(s) at once (one per core) at 1.0 GiB each, "
        "holds 36 runner(s) at 256 MiB each); lower concurrency to 36 or free memory"
    )


def test_a_machine_that_cannot_hold_one_run_says_so() -> None:
    with pytest.raises(ConfigError, match=r"holds 0 runs in flight, not 1 .*cannot hold one run"):
        check_admission(1, Machine(2, 1 * GIB))


def test_unreadable_memory_admits_only_the_unmeasured_bound_and_says_why() -> None:
    with pytest.raises(ConfigError, match=r"concurrency 17: .*memory cannot be read.*at most 16"):
        check_admission(UNMEASURED_BOUND + 1, Machine(2, None))


def test_memory_is_read_from_mem_available_and_is_unknown_when_it_is_not_there(
    tmp_path: Path,
) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683772 kB\nMemAvailable:   1024 kB\n", encoding="ascii")
    assert read_machine(meminfo).available_bytes == 1024 * 1024
    meminfo.write_text("MemTotal:       24683772 kB\n", encoding="ascii")
    assert read_machine(meminfo).available_bytes is None
    assert read_machine(tmp_path / "absent").available_bytes is None
    assert read_machine(meminfo).cores >= 1


def test_the_reserves_are_the_verifier_limit_and_below_the_runner_limit() -> None:
    # batch/ may not import the verifier's limits: the figure is pinned here instead.
    assert VerificationLimits().container.memory_bytes == VERIFIER_RESERVE_BYTES
    assert RUNNER_LIMITS.memory_bytes > RUNNER_RESERVE_BYTES
