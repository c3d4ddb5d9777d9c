"""Shared fixtures: a real container engine and the offline base image.

Tests that need an engine are marked ``docker``. On a machine without one they
are skipped; in CI (the ``CI`` environment variable set to anything non-empty)
they must never be skipped: a missing engine or base image fails them, and any
``docker`` test that ends up skipped for another reason is reported as failed,
so a green CI run has always exercised a real engine.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import docker
import docker.errors
import pytest
from hypothesis import HealthCheck, settings

from agent_eval.batch.signals import STOPPING_SIGNALS
from agent_eval.consumer.cache import CACHE_ENV
from agent_eval.engine.docker_engine import DockerEngine, connect_local_engine

# The image every project image is built FROM. scripts/setup builds it under
# the same reference (BASE_IMAGE there); change both together.
BASE_IMAGE = "agent-eval/base:bookworm"

# Where the SDK's docker.from_env() looks when DOCKER_HOST is unset.
DEFAULT_SOCKET = "/var/run/docker.sock"

# Properties are checked for what they say, not for how fast one example runs: the
# suite runs on two workers on shared machines, where an example's time says nothing.
settings.register_profile(
    "shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("shared-machine")


def in_ci() -> bool:
    """Whether this run is a CI run, where docker tests may not be skipped."""
    return bool(os.environ.get("CI"))


def engine_unavailable(reason: str) -> NoReturn:
    """Skip on a developer machine, fail in CI, saying how to fix it."""
    message = f"{reason}; run scripts/setup to install and start the engine and build the images"
    if in_ci():
        pytest.fail(f"docker tests may not be skipped in CI: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    """A client of the local engine that answered a ping."""
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        engine_unavailable(f"DOCKER_HOST={host!r} is not a local unix:// socket")
    path = host.removeprefix("unix://") or DEFAULT_SOCKET
    # Knock first: the SDK leaks its socket when the connection is refused, and
    # the unclosed-socket warning would fail the run instead of skipping.
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(5)
            probe.connect(path)
    except OSError as exc:
        engine_unavailable(f"no container engine listens on {path} ({exc})")
    try:
        # from_env() already talks to the engine to negotiate the API version.
        client = docker.from_env()
    except (docker.errors.DockerException, OSError) as exc:
        engine_unavailable(f"no container engine answers ({exc})")
    try:
        client.ping()
    except (docker.errors.DockerException, OSError) as exc:
        client.close()
        engine_unavailable(f"the container engine does not answer a ping ({exc})")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    """The reference of the offline base image, checked to be present locally."""
    try:
        docker_client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        engine_unavailable(f"the base image {BASE_IMAGE} is not present in the engine")
    return BASE_IMAGE


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every ``docker`` test is ``slow`` too, so ``-m "not slow"`` is a loop without an engine."""
    if item.get_closest_marker("docker") is not None:
        item.add_marker(pytest.mark.slow)


# Modules that run one after another on one worker: each Ray cluster test starts a
# cluster of its own, too heavy to have two at once beside the other worker's tests.
SHARED_WORKER = {"tests/cluster/": "ray-clusters"}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """On workers, a whole module goes to one worker (its module fixtures are built once),
    and the modules of a :data:`SHARED_WORKER` folder all go to the same one."""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            for folder, group in SHARED_WORKER.items():
                if module.startswith(folder):
                    return group
            return module

    return ByModule(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """In CI, turn a skipped ``docker`` test into a failure, whatever skipped it."""
    report = yield
    if (
        in_ci()
        and report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("docker") is not None
    ):
        report.outcome = "failed"
        report.longrepr = f"docker tests may not be skipped in CI: {_skip_reason(report)}"
    return report


@pytest.fixture(scope="module")
def engine(docker_client: docker.DockerClient) -> Iterator[DockerEngine]:
    """The local engine through the harness's own port, one connection per module
    (docker_client has already checked that it answers)."""
    connected = connect_local_engine()
    yield connected
    connected.close()


@pytest.fixture(autouse=True)
def consumer_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A consumer cache of each test's own (inherited by the processes it starts).

    A batch test then prepares its consumer as a first batch does, whatever
    ran before it; a test that wants a hit runs two batches in one test.
    """
    root = tmp_path_factory.mktemp("consumer-cache")
    monkeypatch.setenv(CACHE_ENV, str(root))
    yield root


SESSION_HANDLERS = {signum: signal.getsignal(signum) for signum in STOPPING_SIGNALS}
"""The stopping signals' handlers as the test process started with them."""


@pytest.fixture(autouse=True)
def signal_handlers() -> Iterator[None]:
    """Each test starts and ends with the stopping signals' handlers the process started with.

    A command run in-process (through click's runner) keeps its stopping handler until
    its process exits, as a real command must; in the test process that exit never
    comes. Restored only to what a test found, a handler a module fixture's command left
    (set before any test of that module starts) went on to every later test of the same
    worker: a test that sends itself SIGINT then got no KeyboardInterrupt.
    """
    for signum, handler in SESSION_HANDLERS.items():
        signal.signal(signum, handler)
    # A library a module started (Ray's driver) may leave them blocked in this thread.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING_SIGNALS)
    yield
    for signum, handler in SESSION_HANDLERS.items():
        signal.signal(signum, handler)
