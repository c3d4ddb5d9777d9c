"""A hardened container from the base image holds its boundary.

Invariant: a container started from the offline base image with the hardening
flags (no network, read-only root, every capability dropped, UID/GID 65534,
no-new-privileges, pid and memory limits) runs Python as nobody, with every
capability set empty and NoNewPrivs set, cannot write to its root filesystem,
sees no network interface but ``lo`` and no route, and is gone once removed.

The probe runs once per module; each test checks one part of what it saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import pytest

pytestmark = pytest.mark.docker

NOBODY = 65534
WAIT_SECONDS = 60

# Runs inside the container as the only process; prints one JSON object.
PROBE = r"""
import errno, json, os

def write_error(path):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    os.close(fd)
    os.unlink(path)
    return None

with open("/proc/self/status") as f:
    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
with open("/proc/net/dev") as f:
    interfaces = sorted(line.split(":", 1)[0].strip() for line in f.readlines()[2:])
with open("/proc/net/route") as f:
    routes = f.readlines()[1:]

print(json.dumps({
    "uid": os.getuid(),
    "euid": os.geteuid(),
    "gid": os.getgid(),
    "capabilities": {
        k: int(status[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
    },
    "no_new_privs": int(status["NoNewPrivs"]),
    "write_root": write_error("/probe"),
    "write_tmp": write_error("/tmp/probe"),
    "interfaces": interfaces,
    "routes": len(routes),
}))
"""


@dataclass(frozen=True)
class ProbeRun:
    exit_code: int
    observed: dict[str, Any]
    stderr: str
    removal_confirmed: bool


def _run_probe(client: docker.DockerClient, image: str) -> ProbeRun:
    container = client.containers.create(
        image,
        command=["/usr/bin/python3", "-c", PROBE],
        network_mode="none",
        read_only=True,
        cap_drop=["ALL"],
        user=f"{NOBODY}:{NOBODY}",
        security_opt=["no-new-privileges"],
        pids_limit=32,
        mem_limit="128m",
        memswap_limit="128m",
        labels={"agent-eval.test": "docker-smoke"},
    )
    try:
        container.start()
        exit_code = int(container.wait(timeout=WAIT_SECONDS)["StatusCode"])
        stdout = container.logs(stdout=True, stderr=False).decode()
        stderr = container.logs(stdout=False, stderr=True).decode()
    finally:
        # Removed by hand, not auto_remove: logs() after wait() needs the container,
        # and a wait() timeout leaves it running.
        container.remove(force=True)
    assert container.id is not None
    try:
        client.containers.get(container.id)
    except docker.errors.NotFound:
        removal_confirmed = True
    else:
        removal_confirmed = False
    observed = json.loads(stdout) if exit_code == 0 else {}
    return ProbeRun(exit_code, observed, stderr, removal_confirmed)


@pytest.fixture(scope="module")
def probe(docker_client: docker.DockerClient, base_image: str) -> Iterator[ProbeRun]:
    run = _run_probe(docker_client, base_image)
    assert run.exit_code == 0, f"probe exited {run.exit_code}: {run.stderr}"
    yield run


def test_the_probe_runs_as_nobody(probe: ProbeRun) -> None:
    assert (probe.observed["uid"], probe.observed["euid"]) == (NOBODY, NOBODY)
    assert probe.observed["gid"] == NOBODY


def test_every_capability_set_is_empty(probe: ProbeRun) -> None:
    assert probe.observed["capabilities"] == {
        "CapInh": 0,
        "CapPrm": 0,
        "CapEff": 0,
        "CapBnd": 0,
        "CapAmb": 0,
    }


def test_no_new_privileges_can_be_gained(probe: ProbeRun) -> None:
    assert probe.observed["no_new_privs"] == 1


def test_writes_to_the_root_filesystem_fail_as_read_only(probe: ProbeRun) -> None:
    assert probe.observed["write_root"] == "EROFS"
    # /tmp is world-writable in the image, so only the read-only mount stops this.
    assert probe.observed["write_tmp"] == "EROFS"


def test_the_only_network_interface_is_loopback_and_nothing_is_routed(probe: ProbeRun) -> None:
    assert probe.observed["interfaces"] == ["lo"]
    assert probe.observed["routes"] == 0


def test_the_container_is_gone_after_removal(probe: ProbeRun) -> None:
    assert probe.removal_confirmed
