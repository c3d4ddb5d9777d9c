"""Verify solutions on this machine against the library's source tree: fast, never evidence.

Static analysis runs in this process (mypy as a subprocess), behaviour in a
local verifier subprocess (``agent_eval.local_engine``), both against the
library as it is in ``packages/*/src`` rather than installed archives. The API
catalog is generated from those sources the same way the verifier image
generates it from the installed distributions: a minimal ``.dist-info`` for
each distribution, then ``python -m agent_eval.catalog`` in a subprocess.

There is no isolation beyond a subprocess: use it for trusted fixtures
(``agent-eval tasks verify --engine local``), never for agent submissions.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agent_eval
from agent_eval.analysis import AnalysisInputError, MypyError, analyse_solution
from agent_eval.batch.ports import Verification
from agent_eval.catalog import CATALOG_FILE
from agent_eval.errors import ConfigError, InfrastructureError, SuiteError
from agent_eval.local_engine import verify_locally
from agent_eval.models.analysis import Analysis
from agent_eval.models.task import TaskSpec
from agent_eval.suite import CONTRACT_FILE, STARTER_DIR

__all__ = ["LocalVerifier", "SourceDistribution", "find_source_distributions", "generate_catalog"]

_CATALOG_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SourceDistribution:
    """One distribution of the library under evaluation, as a source tree."""

    name: str
    version: str
    packages: tuple[str, ...]
    src: Path


def find_source_distributions(packages_dir: Path) -> list[SourceDistribution]:
    """Every ``packages/<dir>/pyproject.toml`` with its importable packages under ``src/``.

    Raises:
        ConfigError: A pyproject is unreadable or lacks a name and version, or
            no distribution is found.
    """
    found = []
    for pyproject in sorted(packages_dir.glob("*/pyproject.toml")):
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
            name, version = str(project["name"]), str(project["version"])
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError) as exc:
            raise ConfigError(
                f"{pyproject}: cannot read [project] name and version: {exc}"
            ) from exc
        src = pyproject.parent / "src"
        packages = tuple(sorted(p.parent.name for p in src.glob("*/__init__.py")))
        if not packages:
            raise ConfigError(f"{pyproject}: no package found under {src}")
        found.append(SourceDistribution(name=name, version=version, packages=packages, src=src))
    if not found:
        raise ConfigError(f"{packages_dir}: no distribution (no */pyproject.toml) found")
    return found


def _dist_info_name(name: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"


def generate_catalog(
    import_paths: Sequence[Path], output_dir: Path, distributions: Sequence[str]
) -> None:
    """Generate the API catalog of *distributions* in a subprocess that imports them.

    The subprocess sees only the harness and *import_paths* on its path, so the
    catalog describes the library as installed there, never the host's.

    Raises:
        InfrastructureError: The generator could not run or failed.
    """
    harness_root = Path(agent_eval.__file__).resolve().parent.parent
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join(str(p) for p in [harness_root, *import_paths]),
    }
    command = [sys.executable, "-B", "-m", "agent_eval.catalog", "--output-dir", str(output_dir)]
    for name in distributions:
        command += ["--distribution", name]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            timeout=_CATALOG_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfrastructureError(f"cannot generate the API catalog: {exc}") from exc
    if done.returncode != 0:
        raise InfrastructureError(
            f"generating the API catalog failed (exit {done.returncode}): "
            f"{done.stderr.strip()[-1000:]}"
        )


def _catalog_from_sources(
    distributions: list[SourceDistribution], work_dir: Path
) -> dict[str, Any]:
    site = work_dir / "site"
    for dist in distributions:
        info = site / _dist_info_name(dist.name, dist.version)
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {dist.version}\n",
            encoding="utf-8",
        )
        (info / "top_level.txt").write_text("\n".join(dist.packages) + "\n", encoding="utf-8")
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
        distributions = find_source_distributions(packages_dir)
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
        behaviour = verify_locally(
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
