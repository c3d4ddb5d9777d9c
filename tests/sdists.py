"""The published sdists the real-library tests build repositories from.

scripts/setup downloads them by name, checked against the hashes of
``tests/data/real-library-sdists.txt``, into ``$XDG_CACHE_HOME/agent-eval/sdists``;
the tests only read them from there (they never reach an index).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from agent_eval.digests import file_sha256
from tests.paths import DATA

PINS = DATA / "real-library-sdists.txt"


def published_sdist(name: str, version: str) -> Path:
    """The sdist of *name* *version*, held to its pinned hash."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = cache / "agent-eval" / "sdists" / f"{name}-{version}.tar.gz"
    assert path.is_file(), f"{path} is missing: run scripts/setup (it downloads {PINS.name})"
    pinned = re.search(rf"^{name}=={version} --hash=(sha256:\w+)$", PINS.read_text(), re.M)
    assert pinned is not None, f"{PINS} pins no {name}=={version}"
    assert file_sha256(path) == pinned.group(1), f"{path} is not the pinned sdist"
    return path
