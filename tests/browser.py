"""Headless Chromium that can reach nothing: a namespace with only loopback, and a net log.

Each launch gets a fresh profile directory, a minimal environment and the
flags that switch the browser's own traffic off, and runs inside a new
network namespace (``unshare --net`` as root, a user namespace otherwise)
whose only interface is ``lo``: whatever the page or the browser tries, no
packet can leave the machine. Chromium's net log (``--log-net-log``) records
every URL request, host lookup and socket connect it attempts, so a test can
assert there was none, and a control page that does make one shows that the
check would see it.

Debian's ``/usr/bin/chromium`` is a wrapper that sources ``/etc/chromium.d``
(which turns remote extensions on and exports service keys), so the binary
is run directly. Chromium is launched in its own process group, which is
killed (by its id) when the run ends, so no browser process outlives a test.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from tests.conftest import in_ci

CHROMIUM_BINARY = Path("/usr/lib/chromium/chromium")
"""Debian's Chromium itself (``/usr/bin/chromium`` is its shell wrapper)."""

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--no-pings",
    "--metrics-recording-only",
    # The network-time fetch is not covered by --disable-background-networking.
    "--disable-features=NetworkTimeServiceQuerying",
)
# The on-device model manifest is fetched by an on-demand component update that
# --disable-component-update does not stop; a local (empty) manifest override
# replaces that component altogether.
MANIFEST_OVERRIDE_FLAG = "--optimization-guide-manifest-override"

# Net log events that mean the browser tried to reach something.
REQUEST_EVENTS = {
    "URL_REQUEST_START_JOB": "url",
    "HOST_RESOLVER_MANAGER_REQUEST": "host",
    "TCP_CONNECT": "address",
    "UDP_CONNECT": "address",
    "SOCKET_CONNECT": "address",
}


def browser_unavailable(reason: str) -> NoReturn:
    """Skip on a developer machine, fail in CI, saying how to fix it."""
    message = f"{reason}; run scripts/setup as root to install Debian's chromium"
    if in_ci():
        pytest.fail(f"browser tests may not be skipped in CI: {message}", pytrace=False)
    pytest.skip(message)


def find_chromium() -> Path | None:
    """The Chromium binary to run, or None."""
    if CHROMIUM_BINARY.is_file() and os.access(CHROMIUM_BINARY, os.X_OK):
        return CHROMIUM_BINARY
    found = shutil.which("chromium")
    return Path(found) if found else None


def isolation() -> list[str]:
    """The command prefix that runs a command in a new, loopback-only network namespace."""
    if os.geteuid() == 0:
        return ["unshare", "--net", "--"]
    return ["unshare", "--user", "--map-root-user", "--net", "--"]


_SHORT_TMP = "/tmp" if Path("/tmp").is_dir() else None

# Inside the namespace: bring lo up, record the interfaces, then become Chromium.
_LAUNCH = 'ip link set lo up; ip -o link show >"$1"; shift; exec "$@"'


@dataclass(frozen=True)
class BrowserRun:
    """What one headless Chromium run left."""

    returncode: int
    stdout: str
    stderr: str
    net_log: Path
    interfaces: tuple[str, ...]
    """Network interfaces of the namespace Chromium ran in."""
    seconds: float


def _process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _end_group(process: subprocess.Popen[str]) -> None:
    """Kill what is left of the process group Chromium ran in, and reap its leader."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while _process_group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def run_chromium(
    chromium: Path, url: str, work: Path, args: Sequence[str] = (), *, timeout: float = 90
) -> BrowserRun:
    """Run headless Chromium on *url* with *args* (``--dump-dom``, ``--screenshot=...``).

    *work* (created) holds the fresh profile, the net log and the interface
    list; the caller's tmp_path removes it.
    """
    work.mkdir(parents=True, exist_ok=True)
    profile = work / "profile"
    shutil.rmtree(profile, ignore_errors=True)
    profile.mkdir()
    manifest = work / "manifest-override.json"
    manifest.write_text("{}\n")
    net_log = work / "net-log.json"
    interfaces = work / "interfaces.txt"
    command = [
        *isolation(),
        "sh",
        "-ec",
        _LAUNCH,
        "sh",
        str(interfaces),
        str(chromium),
        *FLAGS,
        f"{MANIFEST_OVERRIDE_FLAG}={manifest}",
        f"--user-data-dir={profile}",
        f"--log-net-log={net_log}",
        *args,
        url,
    ]
    # Chromium puts a Unix socket in TMPDIR, whose path must stay short.
    with tempfile.TemporaryDirectory(prefix="chromium-", dir=_SHORT_TMP) as scratch:
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(profile),
            "TMPDIR": scratch,
            "LANG": "C.UTF-8",
        }
        started = time.monotonic()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            _end_group(process)
        seconds = time.monotonic() - started
    names = tuple(
        line.split(":")[1].strip().split("@")[0]
        for line in (interfaces.read_text().splitlines() if interfaces.exists() else [])
        if line.strip()
    )
    return BrowserRun(
        returncode=process.returncode,
        stdout=stdout,
        stderr=stderr,
        net_log=net_log,
        interfaces=names,
        seconds=seconds,
    )


def attempted_requests(net_log: Path) -> list[str]:
    """Every URL request, host lookup and socket connect in a Chromium net log."""
    log = json.loads(net_log.read_text(encoding="utf-8"))
    names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    found = []
    for event in log["events"]:
        name = names.get(event["type"])
        key = REQUEST_EVENTS.get(name or "")
        value = event.get("params", {}).get(key) if key else None
        if value is not None:
            found.append(f"{name} {value}")
    return found
