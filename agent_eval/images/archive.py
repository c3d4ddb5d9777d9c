"""Image configs and docker-archive tarballs, written deterministically.

An image's id is the sha256 of its config JSON: this module writes that JSON
canonically (sorted keys, no whitespace) with a fixed ``created`` time and
fixed history, so the id is a function of the layers' diff_ids, the runtime
config (Env, Cmd, WorkingDir, User, Labels) and the parent's history alone.

:func:`write_docker_archive` wraps a config and the new layers into the
tarball ``docker load`` reads (``manifest.json``, ``<id>.json``,
``<diff_id>/layer.tar``). Layers of the parent are named in the manifest but
not included: the engine already holds them (the parent is loaded first) and
``docker load`` reuses a layer it has instead of reading the file.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval.images.layers import EPOCH

__all__ = [
    "DEFAULT_PATH",
    "ImageConfig",
    "LayerFile",
    "config_bytes",
    "history_entry",
    "image_id",
    "write_docker_archive",
]

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH the engine gives a container whose image sets none."""


def _timestamp(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


@dataclass(frozen=True)
class LayerFile:
    """A layer written to disk, with its digest."""

    diff_id: str
    """sha256 of the uncompressed tar."""
    path: Path
    """The tar on the host."""
    comment: str
    """What the layer holds (its history entry)."""


@dataclass(frozen=True)
class ImageConfig:
    """What an image is besides its layers."""

    architecture: str
    """``amd64``, ``arm64`` (the base image's)."""
    os: str
    """``linux``."""
    diff_ids: tuple[str, ...]
    """Every layer, the parent's first."""
    history: tuple[Mapping[str, Any], ...]
    """One entry per layer, the parent's first (copied as they are)."""
    env: tuple[str, ...] = ()
    """``NAME=value`` pairs, in order."""
    cmd: tuple[str, ...] | None = None
    """The default command."""
    working_dir: str = ""
    """The working directory."""
    user: str = ""
    """``uid:gid``."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels (the recipe digest and the source, among others)."""

    def to_json(self) -> dict[str, Any]:
        """The config as the engine stores it."""
        runtime: dict[str, Any] = {"Env": list(self.env), "Labels": dict(self.labels)}
        if self.cmd is not None:
            runtime["Cmd"] = list(self.cmd)
        if self.working_dir:
            runtime["WorkingDir"] = self.working_dir
        if self.user:
            runtime["User"] = self.user
        return {
            "architecture": self.architecture,
            "os": self.os,
            "created": _timestamp(EPOCH),
            "config": runtime,
            "history": [dict(h) for h in self.history],
            "rootfs": {"type": "layers", "diff_ids": list(self.diff_ids)},
        }


def history_entry(comment: str) -> dict[str, Any]:
    """The history entry of a layer written here."""
    return {"created": _timestamp(EPOCH), "created_by": f"agent-eval: {comment}"}


def config_bytes(config: ImageConfig) -> bytes:
    """The config's canonical JSON: what the image id hashes."""
    return json.dumps(config.to_json(), sort_keys=True, separators=(",", ":")).encode("utf-8")


def image_id(config: ImageConfig) -> str:
    """The id the engine gives an image with this config."""
    return "sha256:" + hashlib.sha256(config_bytes(config)).hexdigest()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, EPOCH
    tar.addfile(info, io.BytesIO(data))


def write_docker_archive(
    destination: Path, config: ImageConfig, layers: Sequence[LayerFile], *, tag: str | None
) -> str:
    """Write a ``docker load`` tarball of *config*; only *layers* (the new ones) are included.

    Args:
        destination: The tarball to write.
        config: The image config; its last ``len(layers)`` diff_ids are *layers*.
        layers: The image's own layers, in order.
        tag: ``name:tag`` the engine gives the image on load, or None.

    Returns:
        The image id.
    """
    raw = config_bytes(config)
    identity = image_id(config)
    hexid = identity.removeprefix("sha256:")
    own = {layer.diff_id: layer for layer in layers}
    manifest = [
        {
            "Config": f"{hexid}.json",
            "RepoTags": [tag] if tag else None,
            "Layers": [f"{d.removeprefix('sha256:')}/layer.tar" for d in config.diff_ids],
        }
    ]
    with tarfile.open(destination, "w", format=tarfile.PAX_FORMAT) as tar:
        for diff_id, layer in own.items():
            info = tar.gettarinfo(
                str(layer.path), arcname=f"{diff_id.removeprefix('sha256:')}/layer.tar"
            )
            info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = (
                EPOCH,
                0o644,
                0,
                0,
                "",
                "",
            )
            with open(layer.path, "rb") as handle:
                tar.addfile(info, handle)
        _add(tar, f"{hexid}.json", raw)
        _add(tar, "manifest.json", json.dumps(manifest).encode("utf-8"))
    return identity
