"""A consumer made from the library's source tree: ``tasks verify`` and tests, never evidence.

The same layout the batch's consumer has (:class:`agent_eval.layout.ConsumerLayout`),
but from ``packages/*/src`` and this interpreter's installed dependencies
rather than the candidate archives.
"""

from __future__ import annotations

import compileall
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.layout import HARNESS_ROOT, ConsumerLayout
from agent_eval.packing import SourceDistribution, find_distributions, normalise_name
from agent_eval.processes import run_group

__all__ = ["generate_catalog", "prepare_source_consumer", "write_dist_info"]

_CATALOG_TIMEOUT_S = 120.0


def write_dist_info(site: Path, dist: SourceDistribution) -> None:
    """A minimal ``.dist-info`` for *dist* under *site*, so the catalog generator finds it."""
    info = site / dist.dist_info_name
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {dist.source_version}\n",
        encoding="utf-8",
    )
    (info / "top_level.txt").write_text("\n".join(dist.packages) + "\n", encoding="utf-8")


def generate_catalog(
    import_paths: Sequence[Path], output_dir: Path, distributions: Sequence[str]
) -> None:
    """Generate the API catalog of *distributions* in a subprocess that imports them.

    The subprocess sees only the harness and *import_paths* on its path, so the
    catalog describes the library as installed there, never the host's.

    Raises:
        InfrastructureError: The generator could not run or failed.
    """
    harness_root = HARNESS_ROOT.parent
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join(str(p) for p in [harness_root, *import_paths]),
    }
    command = [sys.executable, "-B", "-m", "agent_eval.consumer.catalog"]
    command += ["--output-dir", str(output_dir)]
    for name in distributions:
        command += ["--distribution", name]
    try:
        done = run_group(command, text=True, env=env, timeout=_CATALOG_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfrastructureError(f"cannot generate the API catalog: {exc}") from exc
    if done.returncode != 0:
        raise InfrastructureError(
            f"generating the API catalog failed (exit {done.returncode}): "
            f"{done.stderr.strip()[-1000:]}"
        )


def _requirement_name(requirement: str) -> str | None:
    if ";" in requirement and "extra" in requirement.split(";", 1)[1]:
        return None  # an optional extra is never installed
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return match.group(1) if match else None


def _dependency_closure(names: Sequence[str], skip: set[str]) -> list[metadata.Distribution]:
    """The host's installed distributions *names* need, transitively."""
    canonical = {normalise_name(n) for n in skip}
    found: dict[str, metadata.Distribution] = {}
    pending = list(names)
    while pending:
        name = normalise_name(pending.pop())
        if name in canonical or name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ConfigError(
                f"the library depends on {name!r}, which is not installed for {sys.executable}; "
                "install the project's dependencies (scripts/setup does)"
            ) from None
        found[name] = dist
        pending += [n for r in dist.requires or () if (n := _requirement_name(r))]
    return [found[name] for name in sorted(found)]


def _copy_distribution(dist: metadata.Distribution, site: Path) -> None:
    for file in dist.files or ():
        parts = file.parts
        if not parts or parts[0] in {"..", "__pycache__"} or "__pycache__" in parts:
            continue
        source = Path(str(dist.locate_file(file)))
        if source.is_file() and not source.is_symlink():
            target = site.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target, follow_symlinks=False)


def prepare_source_consumer(packages_dir: Path, consumer_dir: Path) -> Path:
    """A consumer made from the library's source tree, for ``tasks verify`` and tests.

    The same layout the batch prepares from the archives: ``site/`` holds the
    library's packages (copied from ``packages/*/src`` with a minimal
    ``.dist-info``, as the local verifier sees them) and their third-party
    dependencies (copied from this interpreter's installed distributions);
    ``docs/api-catalog.json`` is generated from ``site/`` by
    ``python -m agent_eval.consumer.catalog``. Everything is readable by every user.

    Args:
        packages_dir: ``packages/`` with one ``*/pyproject.toml`` per distribution.
        consumer_dir: Created; must not exist.

    Returns:
        *consumer_dir*.

    Raises:
        ConfigError: A distribution or a dependency cannot be found.
        InfrastructureError: The catalog could not be generated.
    """
    distributions = find_distributions(packages_dir)
    layout = ConsumerLayout(consumer_dir)
    site = layout.site
    site.mkdir(parents=True)
    names: list[str] = []
    for dist in distributions:
        for package in dist.packages:
            shutil.copytree(
                dist.src / package,
                site / package,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        write_dist_info(site, dist)
        names += _declared_dependencies(dist.directory / "pyproject.toml")
    library = {d.name for d in distributions}
    for dependency in _dependency_closure(names, library):
        _copy_distribution(dependency, site)
    generate_catalog([site.resolve()], layout.docs, [d.name for d in distributions])
    # As the batch's consumer has it: bytecode checked against each source's hash,
    # taken by an interpreter of this version (any other compiles the source).
    compileall.compile_dir(
        site, quiet=2, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
    )
    for path in [consumer_dir, *consumer_dir.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return consumer_dir


def _declared_dependencies(pyproject: Path) -> list[str]:
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise ConfigError(f"{pyproject}: cannot read [project]: {exc}") from exc
    return [n for r in project.get("dependencies", []) if (n := _requirement_name(str(r)))]
