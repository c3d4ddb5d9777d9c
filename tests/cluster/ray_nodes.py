"""A Ray cluster on this machine that cannot reach anything else: a head and worker nodes,
each worker with a container engine of its own, all in a network namespace of their own.

Ray looks outward unless told not to (usage statistics, the cloud-metadata
address, outside name lookups); every switch known to stop that is set here.
The namespace has a default route, as a real node has, but it leads into one
end of a veth pair whose other end is in the same namespace and forwards
nothing: whatever a missed switch would still send towards an address beyond
the cluster goes no further, and is counted. A cluster that sent anything that
way fails its block (``outward_packets``). Its control
services require a token. Each node is a ``ray start --block`` in a session
of its own; it is stopped by signalling exactly the processes of that
session, never by ``ray stop`` (which stops every Ray process of the machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults.engines import PrivateEngine

BIN = Path(sys.executable).parent
RESOURCE = "agent_eval_engine"
HEAD_PORT = 6379


def ray_environment(home: Path, token: str) -> dict[str, str]:
    """What every process of the cluster, and its driver, runs with."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return env | {
        "HOME": str(home),
        # Packing's build wheels stay where fetch-build-wheels put them (checked by hash).
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
    }


def session_members(leader: int) -> list[int]:
    """Every process of the session *leader* started (its own pid included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            # A zombie has ended; only its parent's wait removes it.
            if int(fields[3]) == leader and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def stop_session(leader: int, timeout_s: float = 30.0, sig: int = signal.SIGTERM) -> None:
    """Signal every process of *leader*'s session; SIGKILL those left after *timeout_s*."""
    stop_sessions([leader], timeout_s, sig)


def stop_sessions(leaders: list[int], timeout_s: float = 30.0, sig: int = signal.SIGTERM) -> None:
    """:func:`stop_session` for each of *leaders* at once: they end in one wait, not one each."""

    def members() -> list[int]:
        return [pid for leader in leaders for pid in session_members(leader)]

    for pid in members():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    deadline = time.monotonic() + timeout_s
    while members() and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in members():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while members() and time.monotonic() < deadline:
        time.sleep(0.2)


OUTWARD = "outward0"
"""The interface the namespace's default route names (one end of a veth pair)."""
NODE_IP = "192.0.2.1"
"""Every node's address: the one the default route's interface holds, as a real node's
is. Ray finds a node's address by asking where the default route leads and advertises
that, whatever ``--node-ip-address`` says; the node's own check then refuses a
configured address that differs."""
OUTWARD_ADDRESS = f"{NODE_IP}/24"
"""The interface's address, of the range kept for documentation: nothing routes it."""


@dataclass
class Worker:
    """A worker node: its engine, its directory, and its ``ray start`` once started."""

    name: str
    engine: PrivateEngine
    root: Path
    slots: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> str:
        return str(self.engine.socket)


@dataclass
class RayCluster:
    """A head and workers in namespace *netns*; :meth:`close` stops what it started."""

    netns: str
    root: Path
    token: str = field(default_factory=lambda: secrets.token_hex(32))
    node_env: dict[str, str] = field(default_factory=dict)
    """What every worker's environment holds besides (its model credentials, say)."""
    head: subprocess.Popen[bytes] | None = None
    workers: list[Worker] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{NODE_IP}:{HEAD_PORT}"

    def route_outward(self) -> None:
        """Give the namespace a default route into a veth pair that leads nowhere."""
        for command in (
            ["ip", "link", "add", OUTWARD, "type", "veth", "peer", "name", f"{OUTWARD}-end"],
            # IPv6 would send its own router and neighbour solicitations there.
            ["sysctl", "-q", "-w", f"net.ipv6.conf.{OUTWARD}.disable_ipv6=1",
             f"net.ipv6.conf.{OUTWARD}-end.disable_ipv6=1"],
            ["ip", "addr", "add", OUTWARD_ADDRESS, "dev", OUTWARD],
            ["ip", "link", "set", OUTWARD, "up"],
            ["ip", "link", "set", f"{OUTWARD}-end", "up"],
            ["ip", "route", "add", "default", "dev", OUTWARD],
        ):  # fmt: skip
            subprocess.run(self.in_netns(*command), check=True, capture_output=True)

    def outward_packets(self) -> int:
        """Packets sent towards an address beyond the cluster (ARP asking for one included)."""
        done = subprocess.run(
            self.in_netns("ip", "-s", "-j", "link", "show", OUTWARD),
            check=True,
            capture_output=True,
            text=True,
        )
        return int(json.loads(done.stdout)[0]["stats64"]["tx"]["packets"])

    @property
    def env(self) -> dict[str, str]:
        return ray_environment(self.root / "home", self.token)

    def in_netns(self, *command: str) -> list[str]:
        # The network namespace only: `ip netns exec` would also remount /sys.
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *command]

    def _start(self, command: list[str], log: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.root / log).open("ab") as out:
            return subprocess.Popen(
                self.in_netns(*command),
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def start_head(self) -> None:
        # fmt: off
        self.head = self._start(
            [
                str(BIN / "ray"), "start", "--head", "--block",
                f"--node-ip-address={NODE_IP}", f"--port={HEAD_PORT}",
                "--include-dashboard=false", "--disable-usage-stats",
                "--num-cpus=0", "--memory=500000000", "--object-store-memory=100000000",
                "--dashboard-agent-listen-port=52365",
                f"--temp-dir={self.root / 'ray'}",
            ],
            "head.log",
            self.env,
        )
        # fmt: on
        self.wait_for_nodes(0)

    def start_worker(self, worker: Worker) -> None:
        """Start *worker*'s node (again, after a kill) and wait until the head sees it."""
        index = self.workers.index(worker) + 1
        env = (
            self.env
            | self.node_env
            | {
                "DOCKER_HOST": f"unix://{worker.socket}",
                "AGENT_EVAL_NODE": worker.name,
                "AGENT_EVAL_NODE_IP": NODE_IP,
                "AGENT_EVAL_NODE_ROOT": str(worker.root),
            }
        )
        alive = self.alive_workers()
        # fmt: off
        worker.process = self._start(
            [
                str(BIN / "ray"), "start", "--block", f"--address={self.address}",
                f"--node-ip-address={NODE_IP}", "--num-cpus=1",
                f'--resources={{"{RESOURCE}": {worker.slots}}}',
                "--memory=1000000000", "--object-store-memory=100000000",
                f"--dashboard-agent-listen-port={52365 + index}",
            ],
            f"{worker.name}.log",
            env,
        )
        # fmt: on
        self.wait_for_nodes(alive + 1)

    def kill_worker(self, worker: Worker) -> None:
        """The node is lost: every process of it killed at once (its engine lives on)."""
        assert worker.process is not None
        stop_session(worker.process.pid, timeout_s=0, sig=signal.SIGKILL)
        worker.process.wait(timeout=30)

    def alive_workers(self) -> int:
        script = (
            f"import ray; ray.init(address='{self.address}', logging_level='error', "
            "log_to_driver=False); print(sum(1 for n in ray.nodes() "
            f"if n['Alive'] and n['Resources'].get('{RESOURCE}')))"
        )
        done = subprocess.run(
            self.in_netns(str(BIN / "python"), "-c", script),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
            check=False,
        )
        lines = done.stdout.strip().splitlines()
        return int(lines[-1]) if done.returncode == 0 and lines else -1

    def wait_for_nodes(self, count: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.alive_workers() == count:
                return
            if self.head is not None and self.head.poll() is not None:
                raise RuntimeError(f"the head exited: {self.log('head.log')}")
            time.sleep(0.5)
        raise RuntimeError(f"{count} worker(s) did not join: {self.log('head.log')}")

    def log(self, name: str) -> str:
        with contextlib.suppress(OSError):
            return (self.root / name).read_text(errors="replace")[-3000:]
        return ""

    def close(self) -> None:
        started = [p for p in [*(w.process for w in self.workers), self.head] if p is not None]
        stop_sessions([p.pid for p in started])
        for process in started:
            process.wait(timeout=30)
        with ThreadPoolExecutor(max_workers=max(1, len(self.workers))) as closing:
            # Each engine stops on its own: their minute-long waits overlap.
            list(closing.map(lambda worker: worker.engine.close(), self.workers))
        subprocess.run(["ip", "netns", "delete", self.netns], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def cluster_namespace(node_env: dict[str, str] | None = None) -> Iterator[RayCluster]:
    """A cluster with no node yet: its namespace (loopback up, the default route into the
    veth pair that leads nowhere) and its directory; both removed with what it started."""
    root = Path(tempfile.mkdtemp(prefix="ae-ray-", dir="/tmp"))
    netns = f"ae-ray-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", netns], check=True, capture_output=True)
    cluster = RayCluster(netns, root, node_env=dict(node_env or {}))
    try:
        subprocess.run(
            cluster.in_netns("ip", "link", "set", "lo", "up"), check=True, capture_output=True
        )
        cluster.route_outward()
        yield cluster
    finally:
        cluster.close()


@contextlib.contextmanager
def ray_cluster(
    images: list[str],
    workers: int = 2,
    slots: int = 1,
    node_env: dict[str, str] | None = None,
) -> Iterator[RayCluster]:
    """A head and *workers* nodes, each worker's engine holding *images* (by id) and its
    environment *node_env*."""
    with cluster_namespace(node_env) as cluster:
        home = cluster.root / "home"
        home.mkdir()
        # With no bootstrap config, Ray asks the cloud-metadata address where it runs.
        (home / "ray_bootstrap_config.yaml").write_text("{}\n")
        for index in range(1, workers + 1):
            engine = PrivateEngine(cluster.netns)
            node_root = cluster.root / f"node-{index}"
            cluster.workers.append(Worker(f"worker-{index}", engine, node_root, slots))
            engine.start()
            if images:
                engine.load_images(images)
        cluster.start_head()
        for worker in cluster.workers:
            cluster.start_worker(worker)
        yield cluster
        sent = cluster.outward_packets()
        assert sent == 0, f"the cluster sent {sent} packet(s) towards an address beyond it"
