"""The cluster tests' outward route counts what a node sends beyond the cluster.

The Ray cluster of ``tests/cluster/ray_nodes.py`` runs in a namespace whose
default route leads into a veth pair going nowhere, and its tests fail when a
single packet went out that way. Here, with no cluster: the route is the
default one, a UDP ``connect()`` to an outside address is given the route's
address and sends nothing (what Ray does to find a node's address), and a TCP
connection to an address behind the route is seen (its ARP request counted).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.cluster.ray_nodes import NODE_IP, RayCluster, cluster_namespace

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="network namespaces take root"
)


@pytest.fixture
def namespace() -> Iterator[RayCluster]:
    with cluster_namespace() as cluster:
        yield cluster


def _python(cluster: RayCluster, code: str) -> str:
    done = subprocess.run(
        cluster.in_netns(sys.executable, "-c", code),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.strip()


def test_a_udp_connect_outward_takes_the_routes_address_and_sends_nothing(
    namespace: RayCluster,
) -> None:
    route = subprocess.run(
        namespace.in_netns("ip", "route", "show", "default"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert route.stdout.startswith("default dev outward0")
    said = _python(
        namespace,
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        "s.connect(('198.51.100.7', 80)); print(s.getsockname()[0])",
    )
    assert said == NODE_IP
    assert namespace.outward_packets() == 0


def test_a_connection_beyond_the_cluster_is_counted(namespace: RayCluster) -> None:
    _python(
        namespace,
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.2', 80), timeout=1.5)\n"
        "except OSError:\n"
        "    pass\n",
    )
    assert namespace.outward_packets() > 0
