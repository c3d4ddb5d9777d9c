"""Headless Chromium that can reach nothing: a namespace with only loopback, and a net log.

Each launch gets a fresh profile directory, a minimal environment and the
flags that switch the browser's own traffic off, and runs inside a new
network namespace (``unshare --net`` as root, a user namespace otherwise)
whose only interface is ``lo``: whatever the page or the browser tries, no
packet can leave the machine. Chromium's net log (``--log-net-log``) records
every URL request, host lookup and socket connect it attempts, so a test can
assert there was none, and a control page that does make one shows that the
check would see it. :func:`devtools` keeps one such browser open over its
DevTools pipe, to open pages at a given width, evaluate expressions in them
and time their loads.

Debian's ``/usr/bin/chromium`` is a wrapper that sources ``/etc/chromium.d``
(which turns remote extensions on and exports service keys), so the binary
is run directly. Chromium is launched in its own process group, which is
killed (by its id) when the run ends, so no browser process outlives a test.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

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
    # --disable-background-networking covers none of these: the network-time
    # fetch, the omnibox's AI-mode eligibility request and the preconnects to
    # the default search engine (Chromium 150 makes both at start-up).
    "--disable-features=NetworkTimeServiceQuerying,AimEnabled,AimServerRequestOnStartupEnabled,"
    "PreconnectToSearch,SearchEnginePreconnect2",
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

# Inside the namespace: record which one it is and its interfaces (with lo up),
# then become Chromium.
_LAUNCH = (
    'readlink /proc/self/ns/net >"$1"; ip link set lo up; ip -o link show >"$2"; shift 2; exec "$@"'
)


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


def _running_in(namespace: str) -> list[int]:
    """Processes still running (not zombies) in the network namespace *namespace*.

    Every process of a launch lives in its own fresh namespace, including the
    ones Chromium starts in another process group (its crash handler), so this
    finds exactly what the launch started.
    """
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if os.readlink(proc / "ns" / "net") != namespace:
                continue
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.append(int(proc.name))
    return found


def end_run(process: subprocess.Popen[Any], started: Launch) -> None:
    """Kill, by id, every process the launch left, and reap the one it started."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    namespace = started.namespace.read_text().strip() if started.namespace.exists() else ""
    if not namespace:
        return
    # Only a namespace of the launch's own is swept, never the one this process is in.
    assert namespace != os.readlink("/proc/self/ns/net"), "Chromium did not get its own namespace"
    deadline = time.monotonic() + 10
    while (left := _running_in(namespace)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    assert not _running_in(namespace), "a Chromium process outlived its run"


@dataclass(frozen=True)
class Launch:
    """The command and environment of one isolated Chromium, and where it leaves things."""

    command: list[str]
    env: dict[str, str]
    net_log: Path
    interfaces: Path
    namespace: Path
    """Where the launch writes the id of its network namespace."""


def launch(chromium: Path, work: Path, scratch: str, args: Sequence[str]) -> Launch:
    """How to start Chromium with *args* in a loopback-only namespace.

    *work* (created) holds the fresh profile, the net log and the interface
    list; *scratch* is a short directory for Chromium's sockets (TMPDIR).
    """
    work.mkdir(parents=True, exist_ok=True)
    profile = work / "profile"
    shutil.rmtree(profile, ignore_errors=True)
    profile.mkdir()
    manifest = work / "manifest-override.json"
    manifest.write_text("{}\n")
    net_log = work / "net-log.json"
    interfaces = work / "interfaces.txt"
    namespace = work / "namespace.txt"
    command = [
        *isolation(),
        "sh",
        "-ec",
        _LAUNCH,
        "sh",
        str(namespace),
        str(interfaces),
        str(chromium),
        *FLAGS,
        f"{MANIFEST_OVERRIDE_FLAG}={manifest}",
        f"--user-data-dir={profile}",
        f"--log-net-log={net_log}",
        *args,
    ]
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(profile),
        "TMPDIR": scratch,
        "LANG": "C.UTF-8",
    }
    return Launch(
        command=command, env=env, net_log=net_log, interfaces=interfaces, namespace=namespace
    )


def short_scratch() -> tempfile.TemporaryDirectory[str]:
    """A temporary directory whose path is short enough for Chromium's Unix sockets."""
    return tempfile.TemporaryDirectory(prefix="chromium-", dir=_SHORT_TMP)


def namespace_interfaces(started: Launch) -> tuple[str, ...]:
    """The interfaces the namespace had, as ``ip -o link show`` listed them in it."""
    if not started.interfaces.exists():
        return ()
    return tuple(
        line.split(":")[1].strip().split("@")[0]
        for line in started.interfaces.read_text().splitlines()
        if line.strip()
    )


def run_chromium(
    chromium: Path, url: str, work: Path, args: Sequence[str] = (), *, timeout: float = 90
) -> BrowserRun:
    """Run headless Chromium on *url* with *args* (``--dump-dom``, ``--screenshot=...``)."""
    with short_scratch() as scratch:
        started = launch(chromium, work, scratch, [*args, url])
        began = time.monotonic()
        process = subprocess.Popen(
            started.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=started.env,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
            seconds = time.monotonic() - began
        finally:
            end_run(process, started)
    return BrowserRun(
        returncode=process.returncode,
        stdout=stdout,
        stderr=stderr,
        net_log=started.net_log,
        interfaces=namespace_interfaces(started),
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


class DevTools:
    """One headless Chromium driven over ``--remote-debugging-pipe`` (fds 3 and 4)."""

    def __init__(self, started: Launch) -> None:
        self.started = started
        self.net_log = started.net_log
        commands_r, self._commands_w = os.pipe()
        self._replies_r, replies_w = os.pipe()

        def wire() -> None:
            # Chromium reads commands on fd 3 and writes replies on fd 4.
            inbound = fcntl.fcntl(commands_r, fcntl.F_DUPFD, 10)
            outbound = fcntl.fcntl(replies_w, fcntl.F_DUPFD, 10)
            os.dup2(inbound, 3)
            os.dup2(outbound, 4)

        self.process = subprocess.Popen(
            [*started.command, "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=started.env,
            start_new_session=True,
            preexec_fn=wire,
            pass_fds=(3, 4),
        )
        os.close(commands_r)
        os.close(replies_w)
        self._buffer = b""
        self._next = 0

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> int:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands_w, json.dumps(message).encode() + b"\0")
        return self._next

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies_r], [], [], left)[0]:
                raise TimeoutError("no message from Chromium")
            chunk = os.read(self._replies_r, 1 << 16)
            if not chunk:
                raise EOFError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)  # type: ignore[no-any-return]

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        ident = self.send(method, params, session)
        while True:
            message = self.receive()
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]

    def wait_for(self, event: str, session: str) -> None:
        while True:
            message = self.receive()
            if message.get("method") == event and message.get("sessionId") == session:
                return

    def open_page(self, url: str, *, width: int | None = None, height: int = 1000) -> str:
        """A new tab on *url*, loaded (its load event fired); returns its session id.

        *width* sets the viewport's CSS width first (as a window that wide would).
        """
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Page.enable", session=session)
        if width is not None:
            metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
            self.call("Emulation.setDeviceMetricsOverride", metrics, session)
        self.send("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of a JavaScript *expression* in the page (JSON-serialisable; a
        promise is awaited)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        reply = self.call("Runtime.evaluate", params, session)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def close(self) -> None:
        with contextlib.suppress(OSError, TimeoutError, EOFError, RuntimeError):
            self.call("Browser.close")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        end_run(self.process, self.started)
        os.close(self._commands_w)
        os.close(self._replies_r)


@contextlib.contextmanager
def devtools(chromium: Path, work: Path, args: Sequence[str] = ()) -> Iterator[DevTools]:
    """One isolated headless Chromium driven over its DevTools pipe, ended on exit."""
    with short_scratch() as scratch:
        browser = DevTools(launch(chromium, work, scratch, args))
        try:
            yield browser
        finally:
            browser.close()


def chromium_or_skip() -> Path:
    """The Chromium binary; without one, a skip on a developer machine and a failure in CI."""
    found = find_chromium()
    if found is None:
        browser_unavailable("no chromium binary (Debian package chromium)")
    return found


def load_page(chromium: Path, page: Path, work: Path, *args: str) -> BrowserRun:
    """Chromium with *args* on the file *page*, which must end well."""
    done = run_chromium(chromium, page.as_uri(), work, args)
    assert done.returncode == 0, done.stderr[-2000:]
    return done
