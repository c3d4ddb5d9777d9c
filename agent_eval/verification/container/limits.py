"""The limits of one container verification: the solution's, the container's, the deadlines."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_eval.engine import ResourceLimits
from agent_eval.errors import ConfigError
from agent_eval.models.behaviour import VerifierLimits
from agent_eval.verification.runtime.attempt import ANALYSIS_GRACE_S
from agent_eval.verification.runtime.clock import backstop_s

__all__ = ["CHILD_UID_BASE", "MAX_SLOTS", "VerificationLimits"]

CHILD_UID_BASE = 61000
"""The child of slot *n* runs as UID and GID ``CHILD_UID_BASE + n``."""
MAX_SLOTS = 1000
"""Concurrent verifications one verifier runs at most (each slot has its own child UID)."""


def _default_container_limits() -> ResourceLimits:
    return ResourceLimits(
        pids=256, memory_bytes=1024 * 1024 * 1024, nano_cpus=1_000_000_000, tmp_bytes=256 << 20
    )


@dataclass(frozen=True)
class VerificationLimits:
    """Limits of one verification: the solution's, the container's, and the deadlines."""

    behaviour: VerifierLimits = field(default_factory=VerifierLimits)
    """Call, scenario and total deadlines and the solution process's resource limits."""
    container: ResourceLimits = field(default_factory=_default_container_limits)
    """The verifier container's pids, memory (= memory+swap), CPU and /tmp size."""
    analysis_timeout_s: float = 300.0
    """mypy's time limit inside the container."""
    grace_s: float = 30.0
    """Start-up and clean-up time allowed beyond the analysis and grading limits."""
    max_result_bytes: int = 8 * 1024 * 1024
    """Largest analysis.json or result.json accepted."""

    def __post_init__(self) -> None:
        if not 1 <= self.analysis_timeout_s <= 3600:
            raise ConfigError(f"analysis timeout {self.analysis_timeout_s} s is not in [1, 3600]")
        if not 0 < self.grace_s <= 600:
            raise ConfigError(f"grace period {self.grace_s} s is not in (0, 600]")

    @property
    def deadline_s(self) -> float:
        """When the container is killed from outside, counted from its start.

        A wall-clock backstop only: the grading inside is limited on the
        solution's own clock, which a crowded machine slows down, so the
        grading gets the backstop of its total limit (a container killed here
        was starved, and its verification is repeated).
        """
        return (
            self.analysis_timeout_s
            + ANALYSIS_GRACE_S
            + backstop_s(self.behaviour.totalTimeoutMs / 1000)
            + self.grace_s
        )
