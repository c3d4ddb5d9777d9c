"""Recipes: every input an image is a function of, their digest, and the image's tag.

An image's recipe (:class:`~agent_eval.models.ImageRecipe`) names the base
image's id, the recipe digest of its parent (runner images are built FROM
the runner base), the architecture, and every input file with its sha256:

* verifier: ``images/verifier/requirements.txt`` and the library's
  ``requirements.lock``;
* runner-base: none of its own;
* reference-runner: ``agent_eval/reference/runner.py`` and every file under
  ``fixtures/``;
* runner-<agent>: every file of ``images/runners/<agent>/`` (install.json,
  image.json, the lock) and the staged adapters;

where ``images/…`` is the repository's own file or directory when it has one,
else the one shipped in ``agent_eval/shipped/`` (:class:`~agent_eval.layout.ShippedFiles`);
an input's key is its path in the repository or in the package, so the recipe
names which was used and an override is another recipe;

plus, for every image, the builder's own source (:data:`BUILDER_SOURCES`):
what decides the bytes is part of what is approved. The recipe digest is the
sha256 of the recipe's canonical JSON; the image is tagged
``agent-eval/<image>:<first 16 hex digits>`` and labelled with the whole
recipe, its digest and the source commit, so "the image of this checkout" is
found by computing the recipe, never by a tag another checkout can move.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent_eval.digests import DigestError, file_sha256, sha256_json
from agent_eval.errors import ConfigError
from agent_eval.layout import DEPENDENCY_LOCK, HARNESS_ROOT, ShippedFiles, staged_files
from agent_eval.models import ImageRecipe
from agent_eval.project import Project, find_project

__all__ = [
    "LABEL_IMAGE",
    "LABEL_RECIPE",
    "LABEL_RECIPE_DIGEST",
    "LABEL_SOURCE_COMMIT",
    "LABEL_SOURCE_DIRTY",
    "Sources",
    "architecture_of",
    "image_names",
    "image_tag",
    "listing",
    "make_recipe",
    "parent_of",
    "recipe_digest",
    "runner_agents",
    "source_labels",
]

LABEL_IMAGE = "agent-eval.image"
"""The image's name (verifier, runner-base, …)."""
LABEL_RECIPE = "agent-eval.recipe"
"""The recipe's canonical JSON."""
LABEL_RECIPE_DIGEST = "agent-eval.recipe-digest"
"""The recipe's digest."""
LABEL_SOURCE_COMMIT = "agent-eval.source-commit"
"""The commit the recipe was read from (empty outside git)."""
LABEL_SOURCE_DIRTY = "agent-eval.source-dirty"
"""``true`` when an input file differed from that commit."""

BUILDER_SOURCES = ("images/*.py", "models/install_recipe.py", "models/image_recipe.py")
"""The builder's own source, relative to the ``agent_eval`` package: an input of every recipe."""

_TAG_HEX = 16
_ARCHITECTURES = {"amd64": "x86_64", "arm64": "aarch64"}
_SKIP_DIRS = {"__pycache__"}


@dataclass(frozen=True)
class Sources:
    """Where a build reads its inputs: a checkout (or an archive of one) and its harness."""

    project: Project
    """The repository holding ``images/`` and ``fixtures/``."""
    harness: Path
    """The ``agent_eval`` package whose files are staged and whose builder is named."""

    @classmethod
    def of(cls, root: Path) -> Sources:
        """The checkout at *root*: its own ``agent_eval/`` when it has one, else the installed."""
        project = find_project(root)
        own = project.root / "agent_eval"
        return cls(project, own if (own / "__init__.py").is_file() else HARNESS_ROOT)

    @property
    def shipped(self) -> ShippedFiles:
        """The recipes this build reads: the repository's overrides, else the harness's."""
        return ShippedFiles(self.project.root, self.harness)

    def check_runner(self, agent: str) -> Path:
        """The recipe directory of *agent*.

        Raises:
            ConfigError: There is no ``images/runners/<agent>/image.json``, in the
                repository or shipped with the harness.
        """
        recipe_dir = self.shipped.runner_recipe(agent)
        if not (recipe_dir / "image.json").is_file():
            known = ", ".join(self.shipped.runner_agents()) or "none"
            raise ConfigError(f"no runner recipe {recipe_dir / 'image.json'}; known: {known}")
        return recipe_dir

    def relative(self, path: Path) -> str:
        """The recipe key of an input file."""
        if path.is_relative_to(self.harness):
            return "agent_eval/" + path.relative_to(self.harness).as_posix()
        if path.is_relative_to(self.project.root):
            return path.relative_to(self.project.root).as_posix()
        raise ConfigError(f"{path}: an input outside the repository and the harness")


def architecture_of(engine_architecture: str) -> str:
    """The machine name of an engine architecture (``amd64`` → ``x86_64``).

    Raises:
        ConfigError: An architecture no lock covers.
    """
    try:
        return _ARCHITECTURES[engine_architecture]
    except KeyError:
        raise ConfigError(
            f"the base image's architecture {engine_architecture!r} is not one of "
            f"{', '.join(_ARCHITECTURES)}"
        ) from None


def runner_agents(project: Project) -> list[str]:
    """The agents that have a runner recipe (``images/runners/<agent>/image.json``)."""
    return Sources.of(project.root).shipped.runner_agents()


def image_names(agents: Iterable[str] = ()) -> list[str]:
    """The images a build makes, each after its parent."""
    return [
        "verifier",
        "runner-base",
        "reference-runner",
        "gateway",
        *(f"runner-{a}" for a in agents),
    ]


def parent_of(name: str) -> str | None:
    """The image *name* is built FROM (None: the base)."""
    return None if name in ("verifier", "runner-base") else "runner-base"


def listing(root: Path) -> list[str]:
    """Every regular file under *root*, relative and sorted; bytecode left out.

    Raises:
        ConfigError: *root* is missing, or holds a link or a special file.
    """
    if not root.is_dir():
        raise ConfigError(f"{root}: directory not found")
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in filenames:
            path = Path(dirpath) / name
            if name.endswith((".pyc", ".pyo")):
                continue
            if path.is_symlink() or not path.is_file():
                raise ConfigError(f"{path}: links and special files cannot go into an image")
            found.append(path.relative_to(root).as_posix())
    return sorted(found)


def builder_files(harness: Path) -> list[Path]:
    """The builder's source files under *harness*."""
    files: list[Path] = []
    for pattern in BUILDER_SOURCES:
        files += sorted(harness.glob(pattern))
    return files


def _inputs(sources: Sources, name: str) -> list[Path]:
    project, harness = sources.project, sources.harness
    if name == "verifier":
        lock = project.packages / DEPENDENCY_LOCK
        own = [sources.shipped.verifier_requirements()]
        return own + ([lock] if lock.is_file() else [])
    if name == "runner-base":
        return []
    if name == "reference-runner":
        fixtures = [project.fixtures / rel for rel in listing(project.fixtures)]
        return [harness / "reference" / "runner.py", *fixtures]
    if name == "gateway":
        recipe_dir = sources.shipped.gateway_recipe()
        staged = [harness / rel for rel in staged_files(harness, "gateway")]
        return [recipe_dir / rel for rel in listing(recipe_dir)] + staged
    if not name.startswith("runner-"):
        raise ConfigError(
            f"no image {name!r}: verifier, runner-base, reference-runner, gateway, runner-<agent>"
        )
    recipe_dir = sources.check_runner(name.removeprefix("runner-"))
    staged = [harness / rel for rel in staged_files(harness, "runner")]
    return [recipe_dir / rel for rel in listing(recipe_dir)] + staged


def make_recipe(
    sources: Sources, name: str, *, base: str, architecture: str, parent: str | None
) -> ImageRecipe:
    """The recipe of image *name* in *sources*.

    Args:
        sources: The checkout.
        name: verifier, runner-base, reference-runner or runner-<agent>.
        base: The base image's id.
        architecture: ``x86_64`` or ``aarch64``.
        parent: The parent's recipe digest (see :func:`parent_of`).

    Raises:
        ConfigError: No such image, or an input cannot be read.
    """
    files: dict[str, str] = {}
    for path in [*_inputs(sources, name), *builder_files(sources.harness)]:
        try:
            files[sources.relative(path)] = file_sha256(path)
        except DigestError as exc:
            raise ConfigError(f"recipe of {name}: {exc}") from None
    return ImageRecipe(
        schemaVersion=1,
        image=name,
        base=base,
        parent=parent,
        architecture=architecture,
        files=files,
    )


def recipe_digest(recipe: ImageRecipe) -> str:
    """The digest that tags and labels the image."""
    return sha256_json(recipe.model_dump(mode="json"))


def image_tag(recipe: ImageRecipe) -> str:
    """``agent-eval/<image>:<recipe digest prefix>``."""
    return f"agent-eval/{recipe.image}:{recipe_digest(recipe).removeprefix('sha256:')[:_TAG_HEX]}"


def source_labels(sources: Sources, recipe: ImageRecipe) -> dict[str, str]:
    """The source commit, and whether any of the recipe's input files differ from it."""
    root = sources.project.root
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
        inside = [key for key in recipe.files if (root / key).exists()]
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all", "--",
             *inside],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout if inside else ""  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {LABEL_SOURCE_COMMIT: "", LABEL_SOURCE_DIRTY: "true"}
    return {LABEL_SOURCE_COMMIT: commit, LABEL_SOURCE_DIRTY: "true" if status.strip() else "false"}
