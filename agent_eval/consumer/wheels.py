"""The API catalog of a batch's saved wheels, generated again on this machine.

A run directory keeps the candidate wheels and the digest of the catalog its consumer
generated from them, not the catalog itself. A pure-Python wheel unpacked is its
installed form, so the wheels unpacked side by side and catalogued by the same
generator, in a subprocess, give that catalog again. Whoever uses the result holds it
against the recorded digest: this interpreter or the library's dependencies here may
differ from the verifier image's, and then the signatures may too.
"""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from agent_eval.consumer.source import generate_catalog
from agent_eval.errors import EvidenceError
from agent_eval.evidence_io import read_model
from agent_eval.layout import CATALOG_FILE
from agent_eval.models.catalog import ApiCatalog

__all__ = ["MAX_UNPACKED_BYTES", "catalog_of_wheels"]

MAX_UNPACKED_BYTES = 256 * 1024 * 1024
"""What the wheels may hold unpacked, together (a library, not a data set)."""


def _unpack(wheel: Path, site: Path, budget: int) -> int:
    """Unpack *wheel* into *site*; return what is left of *budget* bytes."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                if member.is_dir():
                    continue
                path = PurePosixPath(member.filename)
                if path.is_absolute() or ".." in path.parts or "\\" in member.filename:
                    raise EvidenceError(f"{wheel}: member {member.filename!r} leaves the wheel")
                if path.parts[0].endswith(".data"):
                    continue  # scripts and headers: nothing the catalog imports
                budget -= member.file_size
                if budget < 0:
                    raise EvidenceError(
                        f"{wheel}: the wheels unpack to more than {MAX_UNPACKED_BYTES} bytes"
                    )
                target = site.joinpath(*path.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
    except (OSError, zipfile.BadZipFile) as exc:
        raise EvidenceError(f"{wheel}: cannot unpack the wheel: {exc}") from exc
    return budget


def catalog_of_wheels(wheels: Sequence[Path], distributions: Sequence[str]) -> ApiCatalog:
    """The API catalog of *distributions*, installed from *wheels* alone.

    Nothing but the harness, the unpacked wheels and this interpreter's own installed
    packages (the library's dependencies) is on the generator's path.

    Raises:
        EvidenceError: A wheel cannot be unpacked, or the catalog is not a valid one.
        InfrastructureError: The generator could not run or failed.
    """
    with tempfile.TemporaryDirectory(prefix="agent-eval-catalog-") as work:
        site, out = Path(work) / "site", Path(work) / "docs"
        site.mkdir()
        budget = MAX_UNPACKED_BYTES
        for wheel in wheels:
            budget = _unpack(wheel, site, budget)
        generate_catalog([site], out, list(distributions))
        return read_model(out / CATALOG_FILE, ApiCatalog, what="generated API catalog")
