"""A second batch of one commit packs from the wheel cache, while the checker's rebuild never
takes a wheel from it: it builds each wheel itself, agrees with the cached ones, and rejects a
changed wheel.

The second batch is given nothing to build with (an empty wheelhouse and no build
environment): whatever it packs can only have come from the cache, held to the digests
recorded when the first batch built it. The checker is then given the wheelhouse back, since
it builds.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_eval.engine import ContainerEngine
from agent_eval.packing import BUILD_LOCK, BuildCache, fetch_build_wheels
from tests.batches import BIN, eval_agent, project_copy, receipt_of, write_config
from tests.evidence_builders import Batch, rebind
from tests.paths import REPO

pytestmark = pytest.mark.docker


def check(receipt: Path, project: Path, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [str(BIN / "check-agent-eval"), "--receipt", str(receipt),
         "--archives", str(receipt.parent / "archives.json"), "--project", str(project)],
        capture_output=True, text=True, timeout=300, check=False, env={**os.environ, **env},
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def test_a_second_batch_packs_from_the_cache_and_the_checker_still_rejects_a_changed_wheel(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    user = BuildCache.default()
    fetch_build_wheels(REPO / "packages" / BUILD_LOCK, user.wheelhouse)
    home = tmp_path / "cache"
    packing = home / "agent-eval" / "packing"
    packing.mkdir(parents=True)
    (packing / "wheels").symlink_to(user.wheelhouse)
    (packing / "envs").symlink_to(user.environments)
    env = {"XDG_CACHE_HOME": str(home)}
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "oracle.json", "oracle")

    code, line = eval_agent(project, config, env, "--only", "core-validation-1")
    assert code == 0 and line["status"] == "completed", line
    first = json.loads(receipt_of(project, line).with_name("archives.json").read_text())
    assert len(list((packing / "built").iterdir())) == len(first["archives"]) == 2

    for name in ("wheels", "envs"):
        (packing / name).unlink()
        (packing / name).mkdir()
    code, line = eval_agent(project, config, env, "--only", "core-validation-1")
    assert code == 0 and line["status"] == "completed", line
    receipt = receipt_of(project, line)
    second = json.loads(receipt.with_name("archives.json").read_text())
    assert second["archives"] == first["archives"]
    assert second["source"] == first["source"] and not second["source"]["dirty"]
    assert list((packing / "envs").iterdir()) == []

    (packing / "wheels").rmdir()
    (packing / "wheels").symlink_to(user.wheelhouse)
    # Whoever can write the cache rewrites each wheel there together with its record: the
    # checker, which builds its own, must not follow them.
    entries = sorted((packing / "built").glob("*/entry.json"))
    assert len(entries) == len(first["archives"])
    for entry in entries:
        cached = next(entry.parent.glob("*.whl"))
        data = bytearray(cached.read_bytes())
        data[len(data) // 2] ^= 0x01
        cached.write_bytes(bytes(data))
        record = json.loads(entry.read_text())
        record["archive"]["sha256"] = "sha256:" + hashlib.sha256(data).hexdigest()
        entry.write_text(json.dumps(record))
    code, decision = check(receipt, project, env)
    assert code == 1
    rules = {r.split(":")[0] for r in decision["reasons"]}
    # Rejected as a partial self-test batch (its schedule and successes with it), never for
    # its archives.
    assert {"not-self-test", "partial"} <= rules
    assert not any(rule.startswith("archive") for rule in rules), decision

    wheel = sorted((receipt.parent / "archives").glob("*.whl"))[0]
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0x01
    wheel.write_bytes(bytes(data))
    rebind(Batch(receipt.parent))
    code, decision = check(receipt, project, env)
    assert code == 1
    rebuilt = [r for r in decision["reasons"] if r.startswith("archives-")]
    recorded = next(a for a in first["archives"] if a["filename"] == wheel.name)
    assert len(rebuilt) == 1, decision
    assert rebuilt[0].startswith(f"archives-rebuild: {wheel.name} rebuilt from commit")
    assert recorded["sha256"] in rebuilt[0]
