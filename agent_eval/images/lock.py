"""``agent-eval images lock --runner NAME``: regenerate a runner recipe's lock, deliberately.

A build never locks: it refuses a missing or stale lock and names this
command. Locking resolves install.json's pinned roots against the registry
(PyPI by pip's resolver, or npm's), so it is the one step that may change
what a recipe's closure is; the lock file is then reviewed and committed
like any other recipe file, and its digest enters the recipe digest.

A lock is written where the recipe is read from. A recipe shipped in an
installed harness is first copied into the repository's ``images/`` (the
copy is then the repository's override, committed with its new lock): the
installed package is never written.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from agent_eval.errors import ConfigError
from agent_eval.evidence_io import format_validation_error
from agent_eval.images.definitions import GATEWAY, lock_command
from agent_eval.images.npm import lock_packages
from agent_eval.images.recipes import Sources
from agent_eval.images.wheels import lock_requirements
from agent_eval.layout import GATEWAY_RECIPE, RECIPE_LOCK, RUNNER_RECIPES
from agent_eval.models import InstallRecipe

__all__ = ["lock_runner"]

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def lock_runner(
    project_root: Path,
    agent: str,
    *,
    python: str = sys.executable,
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
    log: Log = _quiet,
) -> list[Path]:
    """Write *agent*'s lock (or the gateway's) from its install.json; return the files written.

    Raises:
        ConfigError: No such recipe, or its install.json is invalid, or the closure
            differs between architectures.
        InfrastructureError: pip or npm failed.
    """
    sources = Sources.of(project_root)
    recipe_dir = (
        sources.shipped.gateway_recipe() if agent == GATEWAY else sources.check_runner(agent)
    )
    root = sources.project.root
    if not recipe_dir.resolve().is_relative_to(root.resolve()):
        own = root / (GATEWAY_RECIPE if agent == GATEWAY else f"{RUNNER_RECIPES}/{agent}")
        log(f"copying the shipped recipe {recipe_dir} to {own} (the repository's from now on)")
        shutil.copytree(recipe_dir, own, ignore=shutil.ignore_patterns("__pycache__"))
        recipe_dir = own
    path = recipe_dir / "install.json"
    try:
        install = InstallRecipe.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: {format_validation_error(exc)}") from None
    if install.kind == "npm":
        log(f"locking {' '.join(install.packages)} (npm, on the host)")
        lock_packages(recipe_dir, agent, install.packages, lock_command(agent))
        return [recipe_dir / "package.json", recipe_dir / "package-lock.json"]
    text = lock_requirements(
        install.packages,
        command=lock_command(agent),
        source_only=list(install.sourceOnly),
        python=python,
        run=run,
        log=log,
    )
    target = recipe_dir / RECIPE_LOCK
    target.write_text(text, encoding="utf-8")
    return [target]
