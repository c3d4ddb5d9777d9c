"""Verify solutions on this machine against the library's source tree: fast, never evidence.

Static analysis runs in this process (mypy as a subprocess), behaviour in a
local verifier subprocess (``agent_eval.verification.local_grading``), both against the
library as it is in ``packages/*/src`` rather than installed archives. The API
catalog is generated from those sources the same way the verifier image
generates it from the installed distributions: a minimal ``.dist-info`` for
each distribution, then ``python -m agent_eval.consumer.catalog`` in a subprocess.

There is no isolation beyond a subprocess: use it for trusted fixtures
(``agent-eval tasks verify --verifier local``), never for agent submissions.
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_eval.consumer.source import generate_catalog, write_dist_info
from agent_eval.errors import InfrastructureError, SuiteError
from agent_eval.layout import CATALOG_FILE
from agent_eval.models.analysis import Analysis
from agent_eval.models.task import TaskSpec
from agent_eval.packing import SourceDistribution, find_distributions
from agent_eval.suite.tasks import CONTRACT_FILE, STARTER_DIR
from agent_eval.verification.analysis import AnalysisInputError, MypyError, analyse_solution
from agent_eval.verification.local_grading import grade_in_subprocess
from agent_eval.verification.protocol import Verification

__all__ = ["LocalVerifier"]


def _catalog_from_sources(
    distributions: list[SourceDistribution], work_dir: Path
) -> dict[str, Any]:
    site = work_dir / "site"
    for dist in distributions:
        write_dist_info(site, dist)
    out = work_dir / "catalog"
    generate_catalog(
        [site, *(d.src.resolve() for d in distributions)], out, [d.name for d in distributions]
    )
    catalog: dict[str, Any] = json.loads((out / CATALOG_FILE).read_text(encoding="utf-8"))
    return catalog


class LocalVerifier:
    """Analyses and grades solutions of the suite's tasks on this machine.

    Safe to call from several threads at once, up to *slots* verifications in
    parallel (each slot has its own mypy scratch directory and cache).
    """

    name = "local"

    def __init__(
        self,
        *,
        tasks_dir: Path,
        graders_dir: Path,
        distributions: list[SourceDistribution],
        catalog: Mapping[str, Any],
        work_dir: Path,
        slots: int = 1,
    ) -> None:
        self._tasks_dir = tasks_dir
        self._graders_dir = graders_dir
        self._library_paths = [d.src.resolve() for d in distributions]
        self._catalog = catalog
        self._scratch: queue.Queue[Path] = queue.Queue()
        for slot in range(max(1, slots)):
            path = work_dir / f"scratch-{slot}"
            path.mkdir(parents=True, exist_ok=True)
            self._scratch.put(path)

    @classmethod
    def prepare(
        cls,
        *,
        packages_dir: Path,
        tasks_dir: Path,
        graders_dir: Path,
        work_dir: Path,
        slots: int = 1,
    ) -> LocalVerifier:
        """Find the library's distributions, generate their API catalog, and set up *slots*.

        Raises:
            ConfigError: ``packages_dir`` holds no usable distribution.
            InfrastructureError: The catalog could not be generated.
        """
        distributions = find_distributions(packages_dir)
        catalog = _catalog_from_sources(distributions, work_dir)
        return cls(
            tasks_dir=tasks_dir,
            graders_dir=graders_dir,
            distributions=distributions,
            catalog=catalog,
            work_dir=work_dir,
            slots=slots,
        )

    def api_catalog(self) -> Mapping[str, Any]:
        """The catalog of the library under evaluation (what static analysis supports)."""
        return self._catalog

    def verify(self, task: TaskSpec, solution_dir: Path, run_id: str) -> Verification:
        """Analyse and grade *solution_dir* for *task*.

        Raises:
            SuiteError: The task's files are unusable for the analysis.
            InfrastructureError: mypy or the local verifier could not produce a result.
        """
        task_dir = self._tasks_dir / task.id
        starter = task_dir / STARTER_DIR
        with self._slot() as scratch:
            try:
                raw = analyse_solution(
                    task.model_dump(mode="json"),
                    solution_dir,
                    self._catalog,
                    scratch_dir=scratch,
                    contract_path=task_dir / CONTRACT_FILE,
                    starter_dir=starter if starter.is_dir() else None,
                    search_path=self._library_paths,
                )
            except AnalysisInputError as exc:
                raise SuiteError(
                    f"task {task.id!r}: the analysis refused its inputs: {exc}"
                ) from exc
            except MypyError as exc:
                raise InfrastructureError(f"{run_id}: {exc}") from exc
        analysis = Analysis.model_validate(raw)
        behaviour = grade_in_subprocess(
            task_dir, solution_dir, self._library_paths, graders_dir=self._graders_dir
        )
        analysis_json = json.dumps(raw, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        return Verification(
            analysis=analysis, analysis_json=analysis_json.encode("utf-8"), behaviour=behaviour
        )

    def cancel_all(self) -> None:
        """Nothing to cancel: every verification runs to its own deadline."""

    @contextmanager
    def _slot(self) -> Iterator[Path]:
        scratch = self._scratch.get()
        try:
            yield scratch
        finally:
            self._scratch.put(scratch)
