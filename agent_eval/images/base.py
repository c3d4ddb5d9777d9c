"""The base image every image here is built FROM, and what the builder reads of it.

The base is Debian bookworm minbase with python3, made offline by debootstrap
and imported (:func:`ensure_base_image`). That cannot be reproducible (the
mirror's packages and debootstrap's own files change from day to day), so it
is pinned by its image id instead, and that id is an input of every recipe
digest: a reviewer approves images FROM one base id, never the base itself.

:func:`read_base_image` reads what the builder needs from a present base, by
saving it and walking its layers: its layers and history (every image's
config starts from them), its directories (the parents a layer may assume),
its setuid and setgid files (re-added without those bits), and the user and
group databases (the runner base appends its user to them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from agent_eval.engine import ContainerEngine
from agent_eval.errors import InfrastructureError

__all__ = ["BASE_REFERENCE", "BaseImage", "ensure_base_image", "read_base_image"]

BASE_REFERENCE = "agent-eval/base:bookworm"
"""The offline base image; scripts/setup and tests/conftest.py name the same reference."""
BASE_SUITE = "bookworm"

Log = Callable[[str], None]

_TAIL_LINES = 20
_KEPT_FILES = ("/etc/passwd", "/etc/group")


def _quiet(_: str) -> None:
    pass


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-_TAIL_LINES:])


# --- Making the base --------------------------------------------------------------------


def _apt_mirrors(suite: str) -> list[str]:
    """Mirrors of this machine's apt sources that serve *suite* (deb822 and one-line)."""
    mirrors: list[str] = []
    sources = Path("/etc/apt")
    for path in sorted(sources.glob("sources.list.d/*.sources")):
        try:
            stanzas = path.read_text(encoding="utf-8").split("\n\n")
        except OSError:
            continue
        for stanza in stanzas:
            fields: dict[str, list[str]] = {}
            for line in stanza.splitlines():
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.split()
            if "deb" in fields.get("types", []) and suite in fields.get("suites", []):
                mirrors.extend(fields.get("uris", [])[:1])
    for path in [sources / "sources.list", *sorted(sources.glob("sources.list.d/*.list"))]:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            words = re.sub(r"\[[^]]*\]", "", line).split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                mirrors.append(words[1])
    return list(dict.fromkeys(mirrors))


def _remove_rootfs(rootfs: Path) -> None:
    # debootstrap mounts /proc and /sys in the target; an interrupted run can
    # leave them mounted, and rmtree must never walk into them.
    prefix = str(rootfs) + "/"
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    except OSError:
        points = []
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    shutil.rmtree(rootfs, ignore_errors=True)


def ensure_base_image(
    engine: ContainerEngine,
    work_root: Path,
    *,
    reference: str = BASE_REFERENCE,
    mirror: str | None = None,
    log: Log = _quiet,
) -> str:
    """The base image's id, made offline (debootstrap + import) when it is absent.

    Args:
        engine: The engine.
        work_root: Where the temporary root filesystem is made (under .verification/).
        reference: name:tag of the base image.
        mirror: Debian mirror for debootstrap; by default its own, then this
            machine's apt mirror for the suite.
        log: Progress messages.

    Returns:
        The base image's id.

    Raises:
        InfrastructureError: It is absent and cannot be made here (not root,
            no debootstrap, debootstrap or the import failed).
    """
    present = engine.image_id(reference)
    if present is not None:
        return present
    how = "run scripts/setup as root, or make it as images/base/README.md describes"
    if os.geteuid() != 0:
        raise InfrastructureError(
            f"the base image {reference} is absent, and making it needs root (debootstrap); {how}"
        )
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise InfrastructureError(
            f"the base image {reference} is absent and debootstrap is not installed "
            f"(apt-get install debootstrap); {how}"
        )
    mirrors: Sequence[str | None] = [mirror] if mirror else [None, *_apt_mirrors(BASE_SUITE)[:1]]
    work_root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rootfs = Path(tempfile.mkdtemp(prefix="base-rootfs.", dir=work_root))
    try:
        failure = ""
        for candidate in mirrors:
            log(f"making {reference}: debootstrap {BASE_SUITE} from {candidate or 'its default'}")
            command = [debootstrap, "--variant=minbase", "--include=python3", BASE_SUITE]
            command += [str(rootfs), *([candidate] if candidate else [])]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode == 0:
                break
            failure = _tail(done.stdout + done.stderr)
            _remove_rootfs(rootfs)
            rootfs.mkdir()
        else:
            raise InfrastructureError(f"debootstrap failed for {reference}:\n{failure}")
        for leftovers in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (rootfs / leftovers).glob("*"):
                if item.is_file():
                    item.unlink()
        log(f"debootstrap done in {time.monotonic() - started:.0f} s; importing")
        name, _, tag = reference.rpartition(":")
        with subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as tar:
            assert tar.stdout is not None
            image_id = engine.import_image(tar.stdout, repository=name, tag=tag)
            _, tar_errors = tar.communicate()
        if tar.returncode != 0:
            raise InfrastructureError(f"tar of the base root filesystem failed: {tar_errors!r}")
    finally:
        _remove_rootfs(rootfs)
    log(f"made {reference} ({image_id}) in {time.monotonic() - started:.0f} s")
    return image_id


# --- Reading a present base -------------------------------------------------------------


@dataclass(frozen=True)
class BaseFile:
    """A regular file of the base, as its layer holds it."""

    path: str
    """Absolute path."""
    mode: int
    """Permission bits, setuid and setgid included."""
    uid: int
    """Numeric owner."""
    gid: int
    """Numeric group."""
    mtime: int
    """Modification time."""
    data: bytes
    """Content."""


@dataclass(frozen=True)
class BaseImage:
    """What the builder needs of the base image."""

    image_id: str
    """The base's id (an input of every recipe)."""
    architecture: str
    """Its architecture (``amd64``, ``arm64``)."""
    os: str
    """``linux``."""
    diff_ids: tuple[str, ...]
    """Its layers, bottom first."""
    history: tuple[Mapping[str, Any], ...]
    """Its config's history entries."""
    directories: frozenset[str]
    """Every directory of its filesystem."""
    setuid: tuple[BaseFile, ...]
    """Its regular files with a setuid or setgid bit, by path."""
    files: Mapping[str, BaseFile]
    """``/etc/passwd`` and ``/etc/group``."""


def _image_path(name: str) -> str:
    return str(PurePosixPath("/") / PurePosixPath(name.removeprefix("./")))


class _Filesystem:
    """The union of a base's layers, as far as the builder needs it."""

    def __init__(self) -> None:
        self.directories: set[str] = {"/"}
        self.files: dict[str, BaseFile] = {}

    def remove(self, path: str, *, children_only: bool = False) -> None:
        prefix = path.rstrip("/") + "/"
        if not children_only:
            self.directories.discard(path)
            self.files.pop(path, None)
        self.directories = {d for d in self.directories if not d.startswith(prefix)}
        self.files = {p: f for p, f in self.files.items() if not p.startswith(prefix)}

    def apply(self, layer: tarfile.TarFile) -> None:
        for member in layer:
            path = _image_path(member.name)
            parent, name = str(PurePosixPath(path).parent), PurePosixPath(path).name
            if name == ".wh..wh..opq":
                self.remove(parent, children_only=True)
                continue
            if name.startswith(".wh."):
                self.remove(str(PurePosixPath(parent) / name.removeprefix(".wh.")))
                continue
            self.remove(path)
            if member.isdir():
                self.directories.add(path)
            elif member.islnk() and _image_path(member.linkname) in self.files:
                linked = self.files[_image_path(member.linkname)]
                self.files[path] = replace(linked, path=path)
            elif member.isreg() and (member.mode & 0o6000 or path in _KEPT_FILES):
                handle = layer.extractfile(member)
                assert handle is not None
                self.files[path] = BaseFile(
                    path, member.mode, member.uid, member.gid, int(member.mtime), handle.read()
                )


def read_base_image(engine: ContainerEngine, image_id: str, work_dir: Path) -> BaseImage:
    """Read the base's layers, history, directories, setuid files and user databases.

    Args:
        engine: The engine holding the base.
        image_id: The base's id.
        work_dir: Where the saved base is written for a moment.

    Raises:
        InfrastructureError: It is absent, or its archive is not one the engine writes.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="base-save.", dir=work_dir) as scratch:
        saved = Path(scratch) / "base.tar"
        engine.save_image(image_id, saved)
        try:
            with tarfile.open(saved, "r:") as outer:
                (entry,) = json.loads(_member(outer, "manifest.json"))
                config = json.loads(_member(outer, entry["Config"]))
                filesystem = _Filesystem()
                for name in entry["Layers"]:
                    handle = outer.extractfile(name)
                    if handle is None:
                        raise KeyError(name)
                    with tarfile.open(fileobj=handle, mode="r|") as layer:
                        filesystem.apply(layer)
        except (KeyError, ValueError, tarfile.TarError) as exc:
            raise InfrastructureError(
                f"the saved base image {image_id} is unreadable: {exc}"
            ) from None
    missing = [p for p in _KEPT_FILES if p not in filesystem.files]
    if missing:
        raise InfrastructureError(f"the base image {image_id} has no {', '.join(missing)}")
    return BaseImage(
        image_id=image_id,
        architecture=str(config["architecture"]),
        os=str(config["os"]),
        diff_ids=tuple(str(d) for d in config["rootfs"]["diff_ids"]),
        history=tuple(config.get("history") or ()),
        directories=frozenset(filesystem.directories),
        setuid=tuple(
            sorted((f for f in filesystem.files.values() if f.mode & 0o6000), key=lambda f: f.path)
        ),
        files={p: filesystem.files[p] for p in _KEPT_FILES},
    )


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    handle = tar.extractfile(name)
    if handle is None:
        raise KeyError(name)
    return handle.read()
