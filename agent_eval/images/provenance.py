"""``agent-eval images verify``: rebuild the recipe an image names and compare the ids.

An image built here carries its recipe, the recipe's digest and the source
commit as labels. :func:`verify_image` extracts that commit's tree from the
repository (``git archive``, into a temporary directory), recomputes the
recipe there, rebuilds the image's layers and config without loading
anything, and compares:

* the recipe read from the commit with the one in the label (naming every
  input file, the base, the parent or the architecture that differs), then
* the rebuilt image id with the image's (naming each layer that differs, or
  the config when the layers agree).

The rebuild uses this checkout's builder; when the commit's builder source
differs, the image cannot be judged here and the answer says which commit
to verify from. The base image is not rebuilt (it cannot be reproduced):
the one the recipe names must be present.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from agent_eval.digests import file_sha256
from agent_eval.engine import ContainerEngine
from agent_eval.errors import ConfigError
from agent_eval.images.archive import image_id
from agent_eval.images.build import Builder, default_cache_root
from agent_eval.images.recipes import (
    LABEL_IMAGE,
    LABEL_RECIPE,
    LABEL_RECIPE_DIGEST,
    LABEL_SOURCE_COMMIT,
    LABEL_SOURCE_DIRTY,
    Sources,
    builder_files,
    recipe_digest,
)
from agent_eval.layout import HARNESS_ROOT
from agent_eval.models import ImageRecipe
from agent_eval.processes import run_group

__all__ = ["Verification", "verify_image"]

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Verification:
    """The outcome of rebuilding an image's recipe."""

    image: str
    """The image's id."""
    name: str
    """Its name (verifier, runner-base, …)."""
    recipe_digest: str
    """The recipe digest it is labelled with."""
    source_commit: str
    """The commit its recipe was read from."""
    dirty: bool
    """Whether it was built from a tree whose recipe inputs differed from that commit."""
    rebuilt: str | None
    """The rebuilt image's id (None when the recipes already differ)."""
    differences: list[str] = field(default_factory=list)
    """What differs, one line each; empty when the rebuild is the same image."""

    @property
    def same(self) -> bool:
        """The rebuild has the image's id."""
        return self.rebuilt == self.image and not self.differences

    def to_json(self) -> dict[str, object]:
        """The printed report."""
        return {
            "image": self.image,
            "name": self.name,
            "recipeDigest": self.recipe_digest,
            "sourceCommit": self.source_commit,
            "sourceDirty": self.dirty,
            "rebuilt": self.rebuilt,
            "same": self.same,
            "differences": self.differences,
        }


def _recipe_differences(image: ImageRecipe, rebuilt: ImageRecipe) -> list[str]:
    found = [
        f"{what}: {getattr(image, what)} in the image, {getattr(rebuilt, what)} at the commit"
        for what in ("image", "base", "parent", "architecture")
        if getattr(image, what) != getattr(rebuilt, what)
    ]
    for path in sorted(set(image.files) | set(rebuilt.files)):
        had, has = image.files.get(path), rebuilt.files.get(path)
        if had != has:
            found.append(f"{path}: {had or 'absent'} in the image, {has or 'absent'} at the commit")
    return found


def _extract(project_root: Path, commit: str, destination: Path) -> None:
    done = run_group(
        ["git", "-C", str(project_root), "archive", "--format=tar", "--end-of-options", commit],
        timeout=300,
    )
    if done.returncode != 0:
        raise ConfigError(
            f"commit {commit} is not in the repository at {project_root} "
            f"({done.stderr.decode('utf-8', 'replace').strip()}); verify from a clone that has it"
        )
    with tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r:") as tar:
        tar.extractall(destination, filter="data")


def _same_builder(sources: Sources, commit: str) -> None:
    running = HARNESS_ROOT
    for path in builder_files(sources.harness):
        rel = path.relative_to(sources.harness)
        mine = running / rel
        if not mine.is_file() or file_sha256(mine) != file_sha256(path):
            raise ConfigError(
                f"the image builder at commit {commit[:12]} differs from this checkout's "
                f"(agent_eval/{rel.as_posix()}); run `agent-eval images verify` from a "
                f"checkout of {commit[:12]}"
            )
    theirs = {p.relative_to(sources.harness) for p in builder_files(sources.harness)}
    extra = [p for p in builder_files(running) if p.relative_to(running) not in theirs]
    if extra:
        raise ConfigError(
            f"the image builder at commit {commit[:12]} lacks {extra[0].name}; run "
            f"`agent-eval images verify` from a checkout of {commit[:12]}"
        )


def verify_image(
    engine: ContainerEngine,
    project_root: Path,
    reference: str,
    *,
    cache_root: Path | None = None,
    log: Log = _quiet,
) -> Verification:
    """Rebuild the recipe *reference* names from its source commit and compare.

    Args:
        engine: The engine holding the image and the base it names.
        project_root: A checkout of the repository holding the commit.
        reference: The image (id, tag or ``name@sha256:``).
        cache_root: Content-keyed downloads.
        log: Progress messages.

    Returns:
        The verification; :attr:`Verification.same` says whether it reproduced.

    Raises:
        ConfigError: The image is absent or carries no recipe, the commit is not in
            the repository, or its builder differs from this one.
        InfrastructureError: The base is absent, or a download or the compilation failed.
    """
    details = engine.inspect_image(reference)
    if details is None:
        raise ConfigError(f"image {reference} is not present in the local engine")
    labels = details.labels
    missing = [
        label
        for label in (LABEL_IMAGE, LABEL_RECIPE, LABEL_RECIPE_DIGEST, LABEL_SOURCE_COMMIT)
        if not labels.get(label)
    ]
    if missing:
        raise ConfigError(
            f"image {reference} has no {', '.join(missing)} label: it was not built by "
            "`agent-eval images build` from a git checkout"
        )
    try:
        recipe = ImageRecipe.model_validate_json(labels[LABEL_RECIPE])
    except ValidationError as exc:
        raise ConfigError(f"image {reference}: its recipe label is not a recipe ({exc})") from None
    commit = labels[LABEL_SOURCE_COMMIT]
    result = Verification(
        image=details.image_id,
        name=labels[LABEL_IMAGE],
        recipe_digest=labels[LABEL_RECIPE_DIGEST],
        source_commit=commit,
        dirty=labels.get(LABEL_SOURCE_DIRTY) == "true",
        rebuilt=None,
    )
    if recipe_digest(recipe) != result.recipe_digest:
        result.differences.append("the recipe label does not have the recipe digest label's digest")
        return result
    with tempfile.TemporaryDirectory(prefix="images-verify.") as scratch:
        tree = Path(scratch) / "source"
        tree.mkdir()
        _extract(project_root, commit, tree)
        sources = Sources.of(tree)
        _same_builder(sources, commit)
        work = Path(scratch) / "work"
        work.mkdir()
        builder = Builder(
            engine,
            sources,
            recipe.base,
            work_dir=work,
            cache_root=cache_root or default_cache_root(),
            labels=lambda _: {
                LABEL_SOURCE_COMMIT: commit,
                LABEL_SOURCE_DIRTY: labels.get(LABEL_SOURCE_DIRTY, ""),
            },
            log=log,
        )
        rebuilt_recipe = builder.recipe(result.name)
        differences = _recipe_differences(recipe, rebuilt_recipe)
        if differences:
            result.differences.extend(differences)
            return result
        assembled = builder.assemble(result.name, keep=False)
    rebuilt = image_id(assembled.config)
    ours = assembled.config.diff_ids
    comments = ["the parent's"] * (len(ours) - len(assembled.plan.layers))
    comments += [layer.comment for layer in assembled.plan.layers]
    for index, (had, has) in enumerate(zip(details.diff_ids, ours, strict=False)):
        if had != has:
            result.differences.append(f"layer {index + 1} ({comments[index]}): {had} != {has}")
    if len(details.diff_ids) != len(ours):
        result.differences.append(
            f"{len(details.diff_ids)} layers in the image, {len(ours)} rebuilt"
        )
    if rebuilt != result.image and not result.differences:
        result.differences.append("the config differs (env, command, user, labels or history)")
    return replace(result, rebuilt=rebuilt)
