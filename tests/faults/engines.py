"""Engines a test may break: a private dockerd to kill, and a socket proxy that drops connections.

Neither touches the engine other tests and tools use: the private engine has
its own socket, data, exec root and cgroup parent, and no network (no
bridge, no iptables); the proxy forwards to a socket it is given.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors

_REQUEST_LINE = re.compile(rb"^(?:GET|POST|PUT|DELETE|HEAD) (\S+) HTTP/1\.[01]\r$", re.MULTILINE)


class PrivateEngine:
    """A dockerd of the test's own, over a containerd of its own, as a service manager runs them.

    The test may kill dockerd with any signal and start it again; containerd,
    like a separately managed service, lives on meanwhile.
    """

    def __init__(self, netns: str | None = None) -> None:
        # Inside *netns* when given (a network namespace the test made); nsenter changes the
        # network namespace only (ip netns exec would remount /sys, hiding the cgroups).
        self.prefix = ["nsenter", f"--net=/run/netns/{netns}", "--"] if netns else []
        # A short directory of its own: a Unix socket path has at most 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="ae-engine-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.containerd_socket = self.root / "containerd" / "containerd.sock"
        (self.root / "containerd").mkdir()
        (self.root / "daemon.json").write_text("{}\n")
        (self.root / "containerd" / "config.toml").write_text(
            "version = 2\n"
            f'root = "{self.root}/containerd/root"\n'
            f'state = "{self.root}/containerd/state"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            f'[grpc]\n  address = "{self.containerd_socket}"\n'
            f'[ttrpc]\n  address = "{self.containerd_socket}.ttrpc"\n'
            '[debug]\n  address = ""\n  level = "warn"\n'
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.containerd: subprocess.Popen[bytes] | None = None

    @property
    def data_root(self) -> Path:
        return self.root / "data"

    def _spawn(self, command: list[str], log_name: str) -> subprocess.Popen[bytes]:
        with (self.root / log_name).open("ab") as log:
            return subprocess.Popen(
                [*self.prefix, *command],
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def start(self, timeout_s: float = 60.0) -> None:
        """Start containerd unless it runs, then dockerd, and wait until dockerd answers."""
        deadline = time.monotonic() + timeout_s
        if self.containerd is None or self.containerd.poll() is not None:
            self.containerd = self._spawn(
                ["containerd", "--config", str(self.root / "containerd" / "config.toml")],
                "containerd.log",
            )
            while not self.containerd_socket.exists():
                if self.containerd.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"containerd did not start: {self.log_tail('containerd')}")
                time.sleep(0.1)
        assert self.process is None or self.process.poll() is not None, "already running"
        # fmt: off
        self.process = self._spawn(
            [
                "dockerd",
                "--host", f"unix://{self.socket}",
                "--containerd", str(self.containerd_socket),
                "--data-root", str(self.data_root),
                "--exec-root", str(self.root / "exec"),
                "--pidfile", str(self.root / "dockerd.pid"),
                "--config-file", str(self.root / "daemon.json"),
                "--bridge=none", "--iptables=false", "--ip6tables=false",
                "--ip-masq=false", "--userland-proxy=false",
                "--cgroup-parent", "agent-eval-faults",
                "--log-level", "warn",
            ],
            "dockerd.log",
        )
        # fmt: on
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dockerd exited {self.process.returncode}: {self.log_tail()}")
            if self.answers():
                return
            time.sleep(0.2)
        raise RuntimeError(f"dockerd did not answer within {timeout_s:g} s: {self.log_tail()}")

    def answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(2)
                probe.connect(str(self.socket))
                probe.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
                return probe.recv(64).startswith(b"HTTP/1.0 200")
        except OSError:
            return False

    def kill(self, signum: int = signal.SIGKILL, *, wait: bool = True) -> None:
        """Send dockerd *signum*; wait for it to end unless told not to (containerd lives on)."""
        assert self.process is not None
        self.process.send_signal(signum)
        if wait:
            self.process.wait(timeout=60)

    def load_images(self, images: list[str]) -> None:
        """Copy *images* from the default engine: saved and loaded, their ids unchanged."""
        save = subprocess.Popen(["docker", "save", *images], stdout=subprocess.PIPE)
        assert save.stdout is not None
        try:
            subprocess.run(
                ["docker", "-H", f"unix://{self.socket}", "load", "-q"],
                stdin=save.stdout,
                check=True,
                capture_output=True,
                timeout=300,
            )
        finally:
            save.stdout.close()
            assert save.wait(timeout=300) == 0, "docker save failed"

    def log_tail(self, name: str = "dockerd") -> str:
        try:
            return (self.root / f"{name}.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def close(self) -> None:
        """Remove its containers, stop dockerd and containerd, end what they left, remove it all."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a test may have left it frozen
        if self.answers():
            subprocess.run(
                ["sh", "-c", f'ids=$(docker -H unix://{self.socket} ps -aq); '
                 f'[ -z "$ids" ] || docker -H unix://{self.socket} rm -f $ids'],
                check=False,
                capture_output=True,
                timeout=120,
            )  # fmt: skip
        for process in (self.process, self.containerd):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=30)
        # Shims outlive containerd by design; these serve only this engine.
        for pid in _processes_naming(self.root):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for mount_point in sorted(_mounts_under(self.root), reverse=True):
            subprocess.run(["umount", "-l", mount_point], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _processes_naming(root: Path) -> list[int]:
    """Processes whose command line names *root* (what this engine started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if str(root).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _mounts_under(root: Path) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4]
        if mount_point == str(root) or mount_point.startswith(f"{root}/"):
            found.append(mount_point)
    return found


class _Pair:
    """One proxied connection and the path of its client's latest request."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.last_path = b""
        self.closed = threading.Event()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for end in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()


class EngineProxy:
    """A Unix socket in front of an engine's that can drop waits and refuse connections."""

    def __init__(self, upstream: str, path: Path) -> None:
        self.upstream = upstream
        self.path = path
        self._pairs: set[_Pair] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.dropped = 0
        self.refused_for_s = 0.0

    def __enter__(self) -> EngineProxy:
        self._listen()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._unlisten()
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.close()
        for thread in self._threads:
            thread.join(timeout=10)

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        listener.bind(str(self.path))
        listener.listen(64)
        listener.settimeout(0.2)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _unlisten(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _accept(self, listener: socket.socket) -> None:
        while not self._stopping.is_set() and self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            client.settimeout(None)
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.upstream)
            except OSError:
                upstream.close()
                client.close()
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.add(pair)
            for source, sink, requests in ((client, upstream, True), (upstream, client, False)):
                thread = threading.Thread(
                    target=self._pump, args=(pair, source, sink, requests), daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _pump(
        self, pair: _Pair, source: socket.socket, sink: socket.socket, requests: bool
    ) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if requests:
                    for match in _REQUEST_LINE.finditer(data):
                        pair.last_path = match.group(1)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            pair.close()
            with self._lock:
                self._pairs.discard(pair)

    def drop_waits(self) -> int:
        """Close every connection whose latest request is a container wait; how many."""
        with self._lock:
            waiting = [p for p in self._pairs if re.search(rb"/containers/[^/]+/wait", p.last_path)]
        for pair in waiting:
            pair.close()
        self.dropped += len(waiting)
        return len(waiting)

    def refuse_for(self, seconds: float) -> None:
        """Drop every connection and take the socket away for *seconds* (an engine restart)."""
        self._unlisten()
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.close()
        self.dropped += len(pairs)
        time.sleep(seconds)
        self.refused_for_s += seconds
        if not self._stopping.is_set():
            self._listen()


@contextlib.contextmanager
def chaos(proxy: EngineProxy, *, drop_every_s: float, refuse_every_s: float) -> Iterator[None]:
    """In the background: drop the waits every *drop_every_s*, refuse for a moment now and then."""
    stop = threading.Event()

    def work() -> None:
        last_refusal = time.monotonic()
        while not stop.wait(drop_every_s):
            proxy.drop_waits()
            if time.monotonic() - last_refusal >= refuse_every_s:
                proxy.refuse_for(0.5)
                last_refusal = time.monotonic()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def remove_containers(engine_socket: Path | str, label: str) -> None:
    """Force-remove the engine's containers carrying *label*; an engine that is gone (a
    private one a test ended) has none, and is not asked."""
    if not Path(engine_socket).is_socket():
        return
    try:
        client = docker.APIClient(base_url=f"unix://{engine_socket}", version="auto", timeout=30)
    except docker.errors.DockerException:
        return
    try:
        for container in client.containers(all=True, filters={"label": [label]}):
            with contextlib.suppress(docker.errors.NotFound):
                client.remove_container(container["Id"], force=True)
    except (docker.errors.DockerException, OSError):
        pass
    finally:
        client.close()


def containers_of(engine_socket: Path | str, label: str) -> list[dict[str, object]]:
    """The engine's containers carrying *label*, running or not."""
    client = docker.APIClient(base_url=f"unix://{engine_socket}", version="auto", timeout=30)
    try:
        return list(client.containers(all=True, filters={"label": [label]}))
    except docker.errors.DockerException:
        return []
    finally:
        client.close()
