"""Build the images of a checkout, reproducibly, and find them again by their recipe.

Invariants:

* **Content-addressed.** Each image is tagged ``agent-eval/<image>:<recipe
  digest prefix>`` and labelled with its recipe, the recipe's digest and the
  source commit (:mod:`.recipes`). A build whose tag is already present with
  that recipe digest reuses the image as it is; nothing else is ever tagged,
  so checkouts sharing an engine never move each other's images.
* **Reproducible.** Layers and config are written by :mod:`.layers` and
  :mod:`.archive` from what :mod:`.definitions` prepares on the host, and
  loaded with ``docker load``: the same checkout gives the same image id,
  with every cache cleared. Only the downloads are cached (content-keyed,
  hash-checked on every use).
* **Offline and pinned.** Nothing is pulled; the only container that runs is
  the bytecode compiler, with no network, FROM the base image's id. The base
  is made offline by debootstrap + import when absent (:mod:`.base`). What is
  printed is pinned: image ids, or, with a loopback registry,
  ``name@sha256:<manifest digest>`` read back from RepoDigests.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_eval.digests import canonical_json
from agent_eval.engine import ContainerEngine
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.images.archive import ImageConfig, LayerFile, history_entry, write_docker_archive
from agent_eval.images.base import BASE_REFERENCE, BaseImage, ensure_base_image, read_base_image
from agent_eval.images.definitions import Plan, Workspace, check_runner_lock, plan_image
from agent_eval.images.layers import HashingWriter, write_layer
from agent_eval.images.recipes import (
    LABEL_IMAGE,
    LABEL_RECIPE,
    LABEL_RECIPE_DIGEST,
    LABEL_SOURCE_DIRTY,
    Sources,
    architecture_of,
    image_names,
    image_tag,
    make_recipe,
    parent_of,
    recipe_digest,
    source_labels,
)
from agent_eval.models import ImageRecipe

__all__ = [
    "BASE_REFERENCE",
    "Builder",
    "BuiltImages",
    "build_images",
    "build_runner_image",
    "check_loopback_registry",
    "default_cache_root",
    "ensure_base_image",
    "image_for_checkout",
]

Log = Callable[[str], None]
Runner = Callable[..., subprocess.CompletedProcess[str]]


def _quiet(_: str) -> None:
    pass


def default_cache_root() -> Path:
    """Where downloads are cached, for every checkout of this user: content-keyed."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "agent-eval" / "images"


@dataclass(frozen=True)
class BuiltImages:
    """Pinned references of the images built, and their recipe digests."""

    base: str
    """The base image (an id, or a registry digest reference)."""
    verifier: str
    """The verifier image."""
    runner_base: str
    """The runner base image, the FROM of every runner image."""
    reference_runner: str
    """The built-in reference runners (self-test only), FROM the runner base."""
    gateway: str = ""
    """The model gateway (mitmproxy and its addon), FROM the runner base."""
    runners: dict[str, str] = field(default_factory=dict)
    """Agent runner images, by agent."""
    recipes: dict[str, str] = field(default_factory=dict)
    """Every image's recipe digest, by image name."""

    def to_json(self) -> str:
        """``{"base", "verifier", "runnerBase", "referenceRunner", "gateway", "recipes"
        [, "runners"]}``."""
        printed: dict[str, object] = {
            "base": self.base,
            "verifier": self.verifier,
            "runnerBase": self.runner_base,
            "referenceRunner": self.reference_runner,
            "gateway": self.gateway,
            "recipes": dict(sorted(self.recipes.items())),
        }
        if self.runners:
            printed["runners"] = dict(sorted(self.runners.items()))
        return json.dumps(printed, sort_keys=True)


# --- Registry -----------------------------------------------------------------------


def check_loopback_registry(registry: str) -> str:
    """Accept ``host:port`` of a registry on this machine's loopback only.

    Args:
        registry: ``127.0.0.1:5000``, ``localhost:5000`` or ``[::1]:5000``.

    Returns:
        The registry as given.

    Raises:
        ConfigError: It is not loopback ``host:port`` (a scheme, a path, another host).
    """
    match = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})", registry)
    if match is None or not 0 < int(match.group(2)) < 65536:
        raise ConfigError(
            f"registry {registry!r} is not host:port; use a loopback registry such as "
            "127.0.0.1:5000"
        )
    host = match.group(1).strip("[]")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ConfigError(
                f"registry {registry!r} is not on the loopback interface; only a registry on "
                "this machine (127.0.0.0/8, localhost, [::1]) is accepted"
            )
    return registry


# --- Assembling ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assembled:
    """An image as written: its config (whose digest is its id) and its own layers."""

    config: ImageConfig
    """The full config, the parent's layers and history first."""
    layers: tuple[LayerFile, ...]
    """The layers this image adds (on disk only when they were kept)."""
    plan: Plan
    """What was prepared."""


class Builder:
    """Recipes, plans and assembled images of one checkout, each computed once."""

    def __init__(
        self,
        engine: ContainerEngine,
        sources: Sources,
        base_id: str,
        *,
        work_dir: Path,
        cache_root: Path,
        labels: Callable[[ImageRecipe], dict[str, str]] | None = None,
        python: str = sys.executable,
        run: Runner = subprocess.run,
        log: Log = _quiet,
    ) -> None:
        """Build from *sources* FROM *base_id*; staged trees and layers go under *work_dir*.

        *labels* gives an image's source labels; by default the checkout's commit and
        whether the recipe's inputs differ from it.
        """
        details = engine.inspect_image(base_id)
        if details is None:
            raise InfrastructureError(f"the base image {base_id} is not present")
        self.engine, self.sources, self.base_id = engine, sources, details.image_id
        self.architecture = architecture_of(details.architecture)
        self.work_dir, self.cache_root = work_dir, cache_root
        self._labels = labels or (lambda recipe: source_labels(sources, recipe))
        self._python, self._run, self._log = python, run, log
        self._base: BaseImage | None = None
        self._recipes: dict[str, ImageRecipe] = {}
        self._assembled: dict[str, Assembled] = {}
        self._built: dict[str, str] = {}

    def recipe(self, name: str) -> ImageRecipe:
        """The recipe of image *name*."""
        if name not in self._recipes:
            parent = parent_of(name)
            self._recipes[name] = make_recipe(
                self.sources,
                name,
                base=self.base_id,
                architecture=self.architecture,
                parent=None if parent is None else recipe_digest(self.recipe(parent)),
            )
        return self._recipes[name]

    def labels(self, name: str) -> dict[str, str]:
        """Every label of image *name*: its name, recipe, recipe digest and source."""
        recipe = self.recipe(name)
        return {
            LABEL_IMAGE: name,
            LABEL_RECIPE: canonical_json(recipe.model_dump(mode="json")).decode("utf-8"),
            LABEL_RECIPE_DIGEST: recipe_digest(recipe),
            **self._labels(recipe),
        }

    def base(self) -> BaseImage:
        """The base image, read once."""
        if self._base is None:
            self._base = read_base_image(self.engine, self.base_id, self.work_dir)
        return self._base

    def assemble(self, name: str, *, keep: bool) -> Assembled:
        """Prepare and write image *name* (its parent first); *keep* its layers on disk."""
        if name in self._assembled and (self._assembled[name].layers or not keep):
            return self._assembled[name]
        parent_name = parent_of(name)
        parent = None if parent_name is None else self.assemble(parent_name, keep=False)
        base = self.base()
        started = time.monotonic()
        workspace = Workspace(
            engine=self.engine,
            base=base,
            sources=self.sources,
            architecture=self.architecture,
            cache_root=self.cache_root,
            work_dir=Path(tempfile.mkdtemp(prefix=f"{name}.", dir=self.work_dir)),
            python=self._python,
            run=self._run,
            log=self._log,
        )
        plan = plan_image(name, workspace, None if parent is None else parent.plan)
        layers: list[LayerFile] = []
        for index, layer in enumerate(plan.layers):
            path = workspace.work_dir / f"layer-{index}.tar"
            with open(path, "wb") if keep else open(os.devnull, "wb") as out:
                sink = HashingWriter(out)
                write_layer(layer.entries, sink, parents=base.directories)
            layers.append(LayerFile(sink.digest, path, layer.comment))
        below = base.diff_ids if parent is None else parent.config.diff_ids
        history = base.history if parent is None else parent.config.history
        config = ImageConfig(
            architecture=base.architecture,
            os=base.os,
            diff_ids=(*below, *(layer.diff_id for layer in layers)),
            history=(*history, *(history_entry(layer.comment) for layer in layers)),
            env=plan.env,
            cmd=plan.cmd,
            working_dir=plan.working_dir,
            user=plan.user,
            labels=self.labels(name),
        )
        self._log(f"assembled {name} in {time.monotonic() - started:.1f} s")
        self._assembled[name] = Assembled(config, tuple(layers) if keep else (), plan)
        return self._assembled[name]

    def present(self, name: str) -> str | None:
        """The id of image *name* when its tag is present with this recipe (and reusable)."""
        return self._presence(name)[0]

    def absence(self, name: str) -> str:
        """Why image *name* is not :meth:`present`: which recipe is expected, what is there."""
        return self._presence(name)[1]

    def _presence(self, name: str) -> tuple[str | None, str]:
        recipe = self.recipe(name)
        tag, digest = image_tag(recipe), recipe_digest(recipe)
        details = self.engine.inspect_image(tag)
        if details is None:
            return None, (
                f"no image is tagged {tag}: none was built from this tree's {name} recipe "
                f"{digest} ({len(recipe.files)} input files; an edit to any of them, or a "
                "build from another tree, gives another recipe)"
            )
        found = details.labels.get(LABEL_RECIPE_DIGEST)
        if found != digest:
            return None, f"the image tagged {tag} has recipe {found}, not this tree's {digest}"
        # A dirty build is replaced once its recipe is committed.
        if details.labels.get(LABEL_SOURCE_DIRTY) == "true" and (
            self._labels(recipe).get(LABEL_SOURCE_DIRTY) == "false"
        ):
            return None, (
                f"the image tagged {tag} has this tree's recipe {digest} but was built while "
                "its input files differed from the commit; they are committed now, so it is "
                "rebuilt to carry the commit's source labels"
            )
        return details.image_id, f"{tag} is present"

    def build(self, name: str, *, rebuild: bool = False) -> str:
        """Image *name*'s id: the present one, or (with *rebuild*, always) a new one loaded."""
        if name in self._built:
            return self._built[name]
        parent = parent_of(name)
        if parent is not None:
            self.build(parent, rebuild=rebuild)
        present = None if rebuild else self.present(name)
        if present is not None:
            self._built[name] = present
            return present
        tag = image_tag(self.recipe(name))
        started = time.monotonic()
        assembled = self.assemble(name, keep=True)
        archive = self.work_dir / f"{name}.tar"
        expected = write_docker_archive(archive, assembled.config, assembled.layers, tag=tag)
        self.engine.load_image(archive)
        archive.unlink()
        loaded = self.engine.image_id(tag)
        if loaded != expected:
            raise InfrastructureError(f"loading {tag} gave image {loaded}, not {expected}")
        self._log(f"built {tag} ({expected}) in {time.monotonic() - started:.1f} s")
        self._built[name] = expected
        return expected


# --- Commands --------------------------------------------------------------------------------


def _work_dir(project_root: Path) -> Path:
    root = project_root / ".verification" / "images"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="build.", dir=root))


def build_images(
    engine: ContainerEngine,
    project_root: Path,
    *,
    runners: Sequence[str] = (),
    registry: str | None = None,
    mirror: str | None = None,
    cache_root: Path | None = None,
    rebuild: bool = False,
    python: str = sys.executable,
    run: Runner = subprocess.run,
    log: Log = _quiet,
) -> BuiltImages:
    """Build (or find) the checkout's verifier, runner-base, reference-runner and *runners*.

    Args:
        engine: The engine.
        project_root: The repository holding ``images/``.
        runners: Agents whose runner images are built too.
        registry: A loopback registry ``host:port`` to push to, or None.
        mirror: Debian mirror for the base, when it has to be made.
        cache_root: Content-keyed downloads (default: :func:`default_cache_root`).
        rebuild: Assemble and load every image even when its tag is present (the
            same recipe gives the same id, so the tags stay where they are).
        python: Interpreter whose pip downloads.
        run: ``subprocess.run`` for pip (replaceable in tests).
        log: Progress messages.

    Returns:
        Image ids (or registry digest references when pushed) and recipe digests.

    Raises:
        ConfigError: A recipe or lock is missing, stale or invalid, or the registry
            is not loopback.
        InfrastructureError: The base, a download, the compilation, a load or a push failed.
    """
    if registry is not None:
        check_loopback_registry(registry)
    sources = Sources.of(project_root)
    for agent in runners:
        sources.check_runner(agent)
        check_runner_lock(sources, agent)
    check_runner_lock(sources, "gateway")
    work_root = sources.project.root / ".verification" / "images"
    base = ensure_base_image(engine, work_root, mirror=mirror, log=log)
    work = _work_dir(sources.project.root)
    try:
        builder = Builder(
            engine,
            sources,
            base,
            work_dir=work,
            cache_root=cache_root or default_cache_root(),
            python=python,
            run=run,
            log=log,
        )
        names = image_names(runners)
        ids = {"base": base} | {name: builder.build(name, rebuild=rebuild) for name in names}
        recipes = {name: recipe_digest(builder.recipe(name)) for name in names}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if registry is not None:
        for name in ["base", *names]:
            started = time.monotonic()
            tag = "bookworm" if name == "base" else recipes[name].removeprefix("sha256:")[:16]
            ids[name] = engine.push_image(
                ids[name], repository=f"{registry}/agent-eval/{name}", tag=tag
            )
            log(f"pushed {ids[name]} in {time.monotonic() - started:.1f} s")
    return BuiltImages(
        base=ids["base"],
        verifier=ids["verifier"],
        runner_base=ids["runner-base"],
        reference_runner=ids["reference-runner"],
        gateway=ids["gateway"],
        runners={a: ids[f"runner-{a}"] for a in runners},
        recipes=recipes,
    )


def build_runner_image(
    engine: ContainerEngine,
    project_root: Path,
    agent: str,
    *,
    cache_root: Path | None = None,
    log: Log = _quiet,
) -> str:
    """Build (or find) the checkout's runner image of *agent* and return its id."""
    built = build_images(engine, project_root, runners=[agent], cache_root=cache_root, log=log)
    return built.runners[agent]


def image_for_checkout(engine: ContainerEngine, project_root: Path, name: str) -> str:
    """The id of this checkout's image *name*, found by its recipe digest (never built here).

    Raises:
        ConfigError: No such image recipe.
        InfrastructureError: The base or the image is not present: it needs
            ``agent-eval images build``.
    """
    base = engine.image_id(BASE_REFERENCE)
    if base is None:
        raise InfrastructureError(
            f"the base image {BASE_REFERENCE} is not present; run `agent-eval images build`"
        )
    sources = Sources.of(project_root)
    builder = Builder(engine, sources, base, work_dir=project_root, cache_root=default_cache_root())
    present = builder.present(name)
    if present is None:
        raise InfrastructureError(
            f"the {name} image of this checkout is not built: {builder.absence(name)}; "
            "run `agent-eval images build`"
        )
    return present
