"""Admission: how many runs one machine may hold in flight, by its memory, not a constant.

A run in flight is mostly an agent waiting on its model: its runner container
holds the agent CLI's memory and little CPU. Its verification is CPU work. So
the two are bounded apart:

* verifications at once: at most one per core (:func:`verification_slots`),
  however many runners are in flight, each reserved its container's memory
  limit (mypy and the scenarios can reach it);
* runs in flight: what the machine's available memory holds once the
  verifications and a margin are taken out, at :data:`RUNNER_RESERVE_BYTES`
  per runner.

The runner's container limit (2 GiB) is what one attempt may reach, enforced
per container (an attempt above it is killed and recorded as such), not what a
waiting agent CLI holds: reserving the limit for every run would refuse 16 runs
on a 24 GiB machine whose runners use a tenth of it. The reservation is
above the largest runner peak ``benchmarks/in_flight.py`` measured (Claude
Code waiting on its model: 129 to 187 MiB, page cache included, as
``resources.peakMemoryBytes`` records it). It is a measured figure, not a
bound: a batch whose agents hold more than it on average takes from the
margin, then from the machine, so an agent known to hold more wants a lower
``concurrency``. The check is made once, before any container starts: a batch
too big for the machine is refused up front with the figures, not started to
run out of memory halfway. Where the machine's memory cannot be read (no
``/proc/meminfo``) only :data:`UNMEASURED_BOUND` runs are admitted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agent_eval.errors import ConfigError

__all__ = [
    "MARGIN_BYTES",
    "RUNNER_RESERVE_BYTES",
    "UNMEASURED_BOUND",
    "VERIFIER_RESERVE_BYTES",
    "Machine",
    "admitted_runs",
    "check_admission",
    "read_machine",
    "verification_slots",
]

GIB = 1 << 30
MIB = 1 << 20
RUNNER_RESERVE_BYTES = 256 * MIB
"""Memory reserved for each runner in flight: above a waiting agent CLI's measured peak."""
VERIFIER_RESERVE_BYTES = GIB
"""Memory reserved for each verification at once: the verifier container's limit."""
MARGIN_BYTES = GIB
"""Available memory left to the engine, the harness and the gateway."""
UNMEASURED_BOUND = 16
"""Runs in flight admitted where the machine's memory cannot be read."""


@dataclass(frozen=True)
class Machine:
    """What the machine the runs execute on can hold."""

    cores: int
    available_bytes: int | None
    """``MemAvailable``: what can be given to new processes without swapping; None: unknown."""


def read_machine(meminfo: Path = Path("/proc/meminfo")) -> Machine:
    """This machine's cores and available memory (None when *meminfo* cannot be read)."""
    cores = os.cpu_count() or 1
    try:
        text = meminfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return Machine(cores, None)
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "MemAvailable":
            figures = value.split()
            if len(figures) == 2 and figures[0].isdigit() and figures[1] == "kB":
                return Machine(cores, int(figures[0]) * 1024)
    return Machine(cores, None)


def verification_slots(slots: int, cores: int) -> int:
    """Verifications at once for *slots* runs in flight: CPU work, so at most one per core."""
    return max(1, min(slots, cores))


def admitted_runs(machine: Machine, slots: int) -> int:
    """The runs in flight *machine* holds beside the verifications *slots* runs bring."""
    if machine.available_bytes is None:
        return UNMEASURED_BOUND
    verifications = verification_slots(slots, machine.cores) * VERIFIER_RESERVE_BYTES
    left = machine.available_bytes - MARGIN_BYTES - verifications
    return max(0, left // RUNNER_RESERVE_BYTES)


def check_admission(slots: int, machine: Machine) -> None:
    """Refuse *slots* runs in flight when *machine* cannot hold them.

    Raises:
        ConfigError: Said with the figure asked, the figure allowed and why.
    """
    allowed = admitted_runs(machine, slots)
    if slots <= allowed:
        return
    if machine.available_bytes is None:
        why = (
            f"this machine's available memory cannot be read (no MemAvailable in /proc/meminfo), "
            f"so at most {UNMEASURED_BOUND} runs are admitted"
        )
    else:
        verifications = verification_slots(slots, machine.cores)
        why = (
            f"{_gib(machine.available_bytes)} available, less a {_gib(MARGIN_BYTES)} margin and "
            f"{verifications} verification(s) at once (one per core) at "
            f"{_gib(VERIFIER_RESERVE_BYTES)} each, holds {allowed} runner(s) at "
            f"{RUNNER_RESERVE_BYTES // MIB} MiB each"
        )
    raise ConfigError(
        f"concurrency {slots}: this machine holds {allowed} runs in flight, not {slots} "
        f"({why}); lower concurrency to {max(allowed, 1)} or free memory"
        + ("" if allowed else " (it cannot hold one run now)")
    )


def _gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"
