"""Small builders for image tests: a fake base, tiny wheels, a pip stand-in, a project copy."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from agent_eval.engine.fake import FakeEngine
from agent_eval.images.archive import ImageConfig, LayerFile, write_docker_archive
from agent_eval.images.base import BASE_REFERENCE
from agent_eval.images.layers import Entry, HashingWriter, directory, regular, write_layer
from tests.paths import SHIPPED

BASE_DIRS = (
    "/etc",
    "/opt",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/lib/python3",
    "/usr/lib/python3/dist-packages",
    "/usr/local",
    "/usr/local/lib",
    "/usr/local/lib/python3.11",
    "/usr/local/lib/python3.11/dist-packages",
)


def load_fake_base(engine: FakeEngine, work: Path) -> str:
    """A base with a setuid su, the user databases and python3's directories; returns its id."""
    entries = [directory(d) for d in BASE_DIRS] + [
        regular("/etc/passwd", b"root:x:0:0:root:/root:/bin/bash\n"),
        regular("/etc/group", b"root:x:0:\nshadow:x:42:\n"),
        Entry("/usr/bin/su", "file", 0o4755, data=b"\x7fELF su", mtime=1_600_000_000),
    ]
    work.mkdir(parents=True, exist_ok=True)
    layer = work / "base-layer.tar"
    with open(layer, "wb") as out:
        sink = HashingWriter(out)
        write_layer(entries, sink)
    config = ImageConfig(
        architecture="amd64",
        os="linux",
        diff_ids=(sink.digest,),
        history=({"created": "2026-01-01T00:00:00Z", "comment": "Imported from -"},),
    )
    archive = work / "base.tar"
    image = write_docker_archive(
        archive, config, [LayerFile(sink.digest, layer, "base")], tag=BASE_REFERENCE
    )
    engine.load_image(archive)
    return image


def make_wheel(directory: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal wheel of *files* (plus its dist-info); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    members = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/RECORD": b"",
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, data in sorted(members.items()):
            archive.writestr(zipfile.ZipInfo(member, (2020, 1, 1, 0, 0, 0)), data)
    path.write_bytes(buffer.getvalue())
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pin(wheel: Path, name: str, version: str) -> str:
    return f"{name}=={version} \\\n    --hash=sha256:{sha256(wheel)}\n"


class FakePip:
    """Stands in for ``subprocess.run`` of pip: "downloads" prepared wheels, writes reports."""

    def __init__(
        self, wheels: list[Path], *, reports: dict[str, list[dict[str, Any]]] | None = None
    ) -> None:
        self.wheels = wheels
        self.reports = reports or {}
        self.calls: list[list[str]] = []
        self.environments: list[dict[str, str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(command)
        self.environments.append(dict(kwargs.get("env") or {}))
        if "download" in command:
            target = Path(command[command.index("-d") + 1])
            wanted = Path(command[command.index("-r") + 1]).read_text()
            for wheel in self.wheels:
                if sha256(wheel) in wanted:
                    shutil.copyfile(wheel, target / wheel.name)
        if "--report" in command:
            tag = command[command.index("--platform") + 1]
            architecture = "aarch64" if tag.endswith("aarch64") else "x86_64"
            installs = self.reports[architecture]
            Path(command[command.index("--report") + 1]).write_text(
                json.dumps({"install": installs})
            )
        return subprocess.CompletedProcess(command, 0, "", "")


def report_item(name: str, version: str, digest: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "version": version},
        "download_info": {"archive_info": {"hashes": {"sha256": digest}}},
    }


def make_project(root: Path, verifier_wheels: list[Path]) -> Path:
    """A repository with this one's images/ and fixtures/; the verifier pins *verifier_wheels*."""
    shutil.copytree(SHIPPED / "images", root / "images")
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (root / "fixtures" / "forms" / "correct").mkdir(parents=True)
    (root / "fixtures" / "forms" / "correct" / "solution.py").write_text("x = 1\n")
    (root / "packages").mkdir()
    lines = [pin(w, *w.name.split("-")[:2]) for w in verifier_wheels]
    (root / "images" / "verifier" / "requirements.txt").write_text("".join(lines))
    # The gateway's recipe, shrunk to the same wheels (its real lock pins PyPI's).
    gateway = root / "images" / "gateway"
    shutil.rmtree(gateway)
    gateway.mkdir()
    roots = [f"{w.name.split('-')[0]}=={w.name.split('-')[1]}" for w in verifier_wheels]
    (gateway / "install.json").write_text(
        json.dumps({"schemaVersion": 1, "kind": "pip", "packages": roots})
    )
    header = (
        f"# roots: {' '.join(sorted(roots))}\n# target: cp311 manylinux_2_17-2_36 x86_64 aarch64\n"
    )
    (gateway / "requirements.lock").write_text(header + "".join(lines))
    return root
