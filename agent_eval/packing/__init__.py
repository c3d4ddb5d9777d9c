"""Packing: the library under evaluation becomes exact wheels, byte-reproducible from a commit.

Each distribution is found as a source tree (:mod:`~agent_eval.packing.sources`),
its build requirements are pinned by the build lock and installed offline into
an isolated build environment (:mod:`~agent_eval.packing.lock`,
:mod:`~agent_eval.packing.environment`), and its wheel is built by its own
backend there (:mod:`~agent_eval.packing.build`). The lock itself is written by
resolving the distributions' build requirements (:mod:`~agent_eval.packing.locking`).
"""

from agent_eval.packing.build import BuildCache, build_archives, git_version, rebuild_archives
from agent_eval.packing.lock import BUILD_LOCK, fetch_build_wheels
from agent_eval.packing.locking import lock_build_requirements
from agent_eval.packing.sources import SourceDistribution, find_distributions, normalise_name

__all__ = [
    "BUILD_LOCK",
    "BuildCache",
    "SourceDistribution",
    "build_archives",
    "fetch_build_wheels",
    "find_distributions",
    "git_version",
    "lock_build_requirements",
    "normalise_name",
    "rebuild_archives",
]
