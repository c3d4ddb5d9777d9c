"""Layers and image configs are written deterministically.

Invariants: the same entries give the same layer bytes whatever their order,
the host files' mtimes, owners or modes; a host tree becomes root-owned
0755/0644 entries with no setuid, setgid or sticky bit; an entry whose parent
directory is neither an entry nor present below the layer is refused, and so
is a path given twice; an image's id is the digest of its config, which has a
fixed creation time; a docker-archive of it loads as that id, reusing the
parent's layers.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from agent_eval.engine.fake import FakeEngine
from agent_eval.errors import ConfigError
from agent_eval.images.archive import (
    ImageConfig,
    LayerFile,
    config_bytes,
    image_id,
    write_docker_archive,
)
from agent_eval.images.layers import Entry, HashingWriter, directory, regular, tree, write_layer
from tests.images.builders import load_fake_base


def layer_bytes(entries: list[Entry], parents: tuple[str, ...] = ()) -> bytes:
    out = io.BytesIO()
    write_layer(entries, out, parents=parents)
    return out.getvalue()


def host_tree(root: Path, mtime: int, mode: int) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("x = 1\n")
    (root / "pkg" / "sub" / "tool").write_text("#!/bin/sh\n")
    (root / "pkg" / "sub" / "tool").chmod(0o4755 if mode else 0o700)
    (root / "pkg" / "__init__.py").chmod(mode or 0o600)
    for path in [root, *root.rglob("*")]:
        os.utime(path, (mtime, mtime))
    return root


def test_the_same_trees_give_the_same_bytes_whatever_the_host_metadata(tmp_path: Path) -> None:
    first = tree(host_tree(tmp_path / "a", 1_000, 0o666), "/opt/x")
    second = tree(host_tree(tmp_path / "b", 2_000_000, 0), "/opt/x")
    assert layer_bytes(first, ("/opt",)) == layer_bytes(list(reversed(second)), ("/opt",))


def test_a_host_tree_becomes_root_owned_entries_without_special_bits(tmp_path: Path) -> None:
    entries = {e.path: e for e in tree(host_tree(tmp_path, 5, 0o666), "/opt/x")}
    assert entries["/opt/x/pkg/sub/tool"].mode == 0o755
    assert entries["/opt/x/pkg/__init__.py"].mode == 0o644
    with tarfile.open(fileobj=io.BytesIO(layer_bytes(list(entries.values()), ("/opt",)))) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    assert all((m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 0) for m in members)
    assert all(not m.mode & 0o7000 for m in members)


def test_an_entry_without_its_directory_is_refused() -> None:
    with pytest.raises(ConfigError, match="is not in the image"):
        layer_bytes([regular("/opt/x/file", b"")], ("/opt",))
    with pytest.raises(ConfigError, match="given twice"):
        layer_bytes([directory("/opt"), directory("/opt")])


def test_an_entry_path_must_be_normalised_and_absolute() -> None:
    for path in ("relative", "/a/../b", "/a//b", "/"):
        with pytest.raises(ConfigError):
            regular(path, b"")


def test_the_hashing_writer_gives_the_layer_digest(tmp_path: Path) -> None:
    entries = [directory("/opt/x"), regular("/opt/x/f", b"data")]
    sink = HashingWriter()
    write_layer(entries, sink, parents=("/opt",))
    data = layer_bytes(entries, ("/opt",))
    assert sink.digest == "sha256:" + hashlib.sha256(data).hexdigest() and sink.size == len(data)


def test_an_image_id_is_the_digest_of_its_config_and_loads_as_that_id(tmp_path: Path) -> None:
    engine = FakeEngine()
    base = load_fake_base(engine, tmp_path / "base")
    path = tmp_path / "layer.tar"
    with open(path, "wb") as out:
        sink = HashingWriter(out)
        write_layer([directory("/opt/x"), regular("/opt/x/f", b"data")], sink, parents=("/opt",))
    config = ImageConfig(
        architecture="amd64",
        os="linux",
        diff_ids=(*engine.images[base].diff_ids, sink.digest),
        history=({"comment": "base"}, {"comment": "x"}),
        env=("PATH=/bin",),
        cmd=("/bin/true",),
        user="0:0",
        labels={"k": "v"},
    )
    assert image_id(config) == "sha256:" + hashlib.sha256(config_bytes(config)).hexdigest()
    assert b'"created":"1970-01-01T00:00:00Z"' in config_bytes(config)
    archive = tmp_path / "image.tar"
    expected = write_docker_archive(archive, config, [LayerFile(sink.digest, path, "x")], tag="t:1")
    with tarfile.open(archive) as tar:  # the parent's layer is named, not included
        assert len([n for n in tar.getnames() if n.endswith("layer.tar")]) == 1
    engine.load_image(archive)
    assert engine.image_id("t:1") == expected == image_id(config)
