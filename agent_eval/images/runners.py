"""Agent runner images: the agent's CLI, installed on the host, copied into an image.

Each agent has a recipe under ``images/runners/<agent>/``:

* ``install.json`` — how to install the CLI on the host, at a pinned version
  (:class:`InstallRecipe`): ``pip`` installs into a ``--target`` directory for
  the image's Python (CPython 3.11, binary wheels only), ``npm`` into a
  ``--prefix`` directory. The result is cached under
  ``.verification/images/runners/<agent>/`` keyed by the recipe's bytes and
  this machine's architecture: nothing is installed at run time, and nothing
  is downloaded inside the build.
* ``Dockerfile`` — ``FROM ${BASE}`` (the runner base image's id); it copies
  ``payload/`` (the installed CLI) and ``agent_eval/`` (the stdlib-only
  adapters), disables every update check, telemetry and price-list fetch, and
  records the CLI's real version in /opt/agent-eval/runner-version.

``agent-eval images build --runner <agent>`` builds one and prints its pinned
reference.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

import agent_eval
from agent_eval.engine import ContainerEngine
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.evidence_io import format_validation_error
from agent_eval.layout import staged_files
from agent_eval.models.install_recipe import InstallRecipe

__all__ = ["build_runner_image", "runner_tag"]

TARGET_PYTHON = "3.11"
Log = Callable[[str], None]


def runner_agents(project_root: Path) -> list[str]:
    """The agents that have a recipe."""
    root = project_root / "images" / "runners"
    return (
        sorted(p.name for p in root.iterdir() if (p / "Dockerfile").is_file())
        if root.is_dir()
        else []
    )


def runner_tag(agent: str) -> str:
    """The local tag of an agent's runner image."""
    return f"agent-eval/runner-{agent}:local"


def _recipe(recipe_dir: Path) -> InstallRecipe:
    path = recipe_dir / "install.json"
    try:
        return InstallRecipe.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: {format_validation_error(exc)}") from None


def _install(recipe: InstallRecipe, recipe_dir: Path, target: Path, log: Log | None) -> None:
    if recipe.kind == "pip":
        command = [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-input", "--no-compile", "--only-binary=:all:", "--implementation", "cp",
            "--python-version", TARGET_PYTHON, "--target", str(target), *recipe.options,
            *recipe.packages,
        ]  # fmt: skip
    else:
        npm = shutil.which("npm")
        if npm is None:
            raise InfrastructureError("npm is needed on the host to install this runner's CLI")
        command = [
            npm, "install", "--no-audit", "--no-fund", "--no-update-notifier",
            "--prefix", str(target), *recipe.options, *recipe.packages,
        ]  # fmt: skip
    done = subprocess.run(
        command, cwd=recipe_dir, capture_output=True, text=True, timeout=1800, check=False
    )
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-20:])
        raise InfrastructureError(f"installing {recipe.packages} failed:\n{tail}")


def prepare_payload(recipe_dir: Path, cache_root: Path, log: Log | None = None) -> Path:
    """Install the recipe's CLI on the host once (cached) and return the payload directory."""
    recipe = _recipe(recipe_dir)
    key = hashlib.sha256(
        (recipe_dir / "install.json").read_bytes() + platform.machine().encode()
    ).hexdigest()[:16]
    payload = cache_root / f"payload-{key}"
    if payload.is_dir():
        return payload
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="payload.", dir=cache_root))
    try:
        _install(recipe, recipe_dir, staging / "payload", log)
        (staging / "payload").rename(payload)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return payload


def build_runner_image(
    engine: ContainerEngine,
    project_root: Path,
    agent: str,
    runner_base: str,
    log: Log | None = None,
) -> str:
    """Build ``images/runners/<agent>`` FROM *runner_base* and return the image id.

    Raises:
        ConfigError: no such recipe, or the recipe is invalid.
        InfrastructureError: the host install or the build failed.
    """
    recipe_dir = project_root / "images" / "runners" / agent
    if not (recipe_dir / "Dockerfile").is_file():
        known = ", ".join(runner_agents(project_root)) or "none"
        raise ConfigError(f"no runner recipe images/runners/{agent}/Dockerfile; known: {known}")
    cache = project_root / ".verification" / "images" / "runners" / agent
    payload = prepare_payload(recipe_dir, cache, log)
    context = cache / "context"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    for item in recipe_dir.iterdir():
        if item.is_file():
            shutil.copyfile(item, context / item.name)
    # Hard links keep a large payload cheap to stage; the builder reads the bytes.
    shutil.copytree(payload, context / "payload", symlinks=True, copy_function=_link_or_copy)
    package = Path(agent_eval.__file__).resolve().parent
    # What of the harness goes into a runner image: the adapters, nothing else.
    for rel in staged_files(package, "runner"):
        target = context / "agent_eval" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package / rel, target)
    started = time.monotonic()
    image = engine.build_image(
        context,
        tag=runner_tag(agent),
        buildargs={"BASE": runner_base},
        labels={"agent-eval.image": f"runner-{agent}"},
    )
    if log is not None:
        log(f"built {runner_tag(agent)} ({image}) in {time.monotonic() - started:.1f} s")
    return image


def _link_or_copy(source: str, target: str) -> None:
    try:
        Path(target).hardlink_to(source)
    except OSError:
        shutil.copy2(source, target)
