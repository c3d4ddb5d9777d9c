"""The docker engine keeps its promises against a real engine.

Invariants: an image that is absent, or present but not the pinned one, is
refused, and the engine records no pull; a verifier container from the
verifier image runs as root with exactly SETUID, SETGID, DAC_OVERRIDE and KILL
and no-new-privileges, sees no network but ``lo``, cannot write its root or
its read-only mounts, and its image has no setuid or setgid file; a runner
container keeps no capability and runs as the agent user; a container that
outlives its deadline is killed from outside and its removal is confirmed;
output is cut at the byte limit per stream; stdin reaches the process; the
leftovers of one batch are removed by label and no other batch's.

Every container made here carries a batch label unique to the test, and is
removed by the test.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from agent_eval.engine import (
    ContainerSpec,
    Mount,
    ResourceLimits,
    list_leftovers,
    remove_leftovers,
    run_container,
)
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.errors import InfrastructureError
from agent_eval.images.build import BuiltImages, build_images
from agent_eval.project import find_project
from tests.paths import REPO

pytestmark = pytest.mark.docker

CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID = 1, 5, 6, 7
VERIFIER_CAPS = (1 << CAP_DAC_OVERRIDE) | (1 << CAP_KILL) | (1 << CAP_SETGID) | (1 << CAP_SETUID)
LIMITS = ResourceLimits(pids=64, memory_bytes=256 * 2**20, nano_cpus=1_000_000_000)

PROBE = r"""
import errno, json, os, stat, sys

def write_error(path):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    os.close(fd)
    os.unlink(path)
    return None

def setid_files():
    found = []
    root_dev = os.lstat("/").st_dev
    for top, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.lstat(os.path.join(top, d)).st_dev == root_dev]
        for name in files:
            mode = os.lstat(os.path.join(top, name)).st_mode
            if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(os.path.join(top, name))
    return found

with open("/proc/self/status") as f:
    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
with open("/proc/net/dev") as f:
    interfaces = sorted(line.split(":", 1)[0].strip() for line in f.readlines()[2:])
print(json.dumps({
    "uid": os.getuid(),
    "gid": os.getgid(),
    "capabilities": {k: int(status[k], 16) for k in ("CapPrm", "CapEff", "CapBnd", "CapAmb")},
    "no_new_privs": int(status["NoNewPrivs"]),
    "write_root": write_error("/probe"),
    "write_mount": write_error("/verifier/probe") if os.path.isdir("/verifier") else None,
    "write_tmp": write_error("/tmp/probe"),
    "interfaces": interfaces,
    "setid_files": setid_files() if "--walk" in sys.argv else None,
    "grader_mode": oct(os.stat("/grader").st_mode & 0o7777) if os.path.isdir("/grader") else None,
}))
"""


def batch() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def images(engine: DockerEngine, base_image: str) -> BuiltImages:
    """The project's images, built (quick when cached) and pinned by id."""
    return build_images(engine, find_project(REPO).root)


def spec(image: str, command: list[str], **changes: Any) -> ContainerSpec:
    fields: dict[str, Any] = {
        "image": image,
        "command": tuple(command),
        "role": "verifier",
        "batch_id": batch(),
        "run_id": "probe-1",
        "limits": LIMITS,
    }
    fields.update(changes)
    return ContainerSpec(**fields)


def gone(client: docker.DockerClient, container_id: str) -> bool:
    try:
        client.api.inspect_container(container_id)
    except docker.errors.NotFound:
        return True
    return False


def pulls_since(client: docker.DockerClient, since: float) -> list[Any]:
    events = client.events(
        since=int(since) - 1,
        until=int(time.time()) + 1,
        filters={"type": "image", "event": "pull"},
        decode=True,
    )
    return list(events)


# --- Pinned images, never pulled -----------------------------------------------------------


def test_an_absent_image_is_refused_and_not_pulled(
    engine: DockerEngine, docker_client: docker.DockerClient
) -> None:
    started = time.time()
    missing = uuid.uuid4().hex + uuid.uuid4().hex
    for reference in (f"sha256:{missing}", f"127.0.0.1:5999/agent-eval/absent@sha256:{missing}"):
        probe = spec(reference, ["true"])
        with pytest.raises(InfrastructureError, match="not present in the local engine"):
            engine.create(probe)
        assert list_leftovers(engine, probe.batch_id) == []
    assert pulls_since(docker_client, started) == []


def test_a_present_image_that_lacks_the_pinned_digest_is_refused(
    engine: DockerEngine, images: BuiltImages, docker_client: docker.DockerClient
) -> None:
    # The engine resolves any name@<image id> to that image, but the image carries
    # no such RepoDigest: it is not what the reference pins.
    reference = f"agent-eval/verifier@{images.verifier}"
    started = time.time()
    with pytest.raises(InfrastructureError, match="does not carry that digest"):
        engine.resolve_image(reference)
    assert pulls_since(docker_client, started) == []


def test_an_image_id_resolves_to_that_image(engine: DockerEngine, images: BuiltImages) -> None:
    assert engine.resolve_image(images.verifier).image_id == images.verifier


# --- The hardened boundary ------------------------------------------------------------------


@pytest.fixture(scope="module")
def verifier_probe(
    engine: DockerEngine, images: BuiltImages, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    staged = tmp_path_factory.mktemp("staged")
    run = run_container(
        engine,
        spec(
            images.verifier,
            ["python3", "-c", PROBE, "--walk"],
            mounts=(Mount(staged, "/verifier"),),
        ),
        timeout_s=30,
        log_limit_bytes=64 * 1024,
    )
    assert run.wait.exit_code == 0, run.output.stderr.decode()
    observed: dict[str, Any] = json.loads(run.output.stdout)
    return observed


def test_the_verifier_runs_as_root_with_exactly_four_capabilities(
    verifier_probe: dict[str, Any],
) -> None:
    assert (verifier_probe["uid"], verifier_probe["gid"]) == (0, 0)
    assert verifier_probe["capabilities"] == {
        "CapPrm": VERIFIER_CAPS,
        "CapEff": VERIFIER_CAPS,
        "CapBnd": VERIFIER_CAPS,
        "CapAmb": 0,
    }
    assert verifier_probe["no_new_privs"] == 1


def test_the_verifier_sees_no_network_but_loopback(verifier_probe: dict[str, Any]) -> None:
    assert verifier_probe["interfaces"] == ["lo"]


def test_the_verifier_cannot_write_its_root_or_a_read_only_mount(
    verifier_probe: dict[str, Any],
) -> None:
    assert verifier_probe["write_root"] == "EROFS"
    assert verifier_probe["write_mount"] == "EROFS"
    assert verifier_probe["write_tmp"] is None


def test_the_verifier_image_has_no_setuid_or_setgid_file(verifier_probe: dict[str, Any]) -> None:
    assert verifier_probe["setid_files"] == []


def test_the_grader_directory_is_private_to_root(verifier_probe: dict[str, Any]) -> None:
    assert verifier_probe["grader_mode"] == "0o700"


def test_a_runner_keeps_no_capability_and_runs_as_the_agent_user(
    engine: DockerEngine, images: BuiltImages
) -> None:
    run = run_container(
        engine,
        spec(images.runner_base, ["python3", "-c", PROBE], role="runner"),
        timeout_s=30,
        log_limit_bytes=64 * 1024,
    )
    assert run.wait.exit_code == 0, run.output.stderr.decode()
    observed = json.loads(run.output.stdout)
    assert (observed["uid"], observed["gid"]) == (10001, 10001)
    assert set(observed["capabilities"].values()) == {0}
    assert observed["write_root"] == "EROFS"
    assert observed["interfaces"] == ["lo"]


def test_the_trusted_parent_writes_its_result_to_the_writable_mount_only(
    engine: DockerEngine, images: BuiltImages, tmp_path: Path
) -> None:
    result = tmp_path / "result"
    result.mkdir(mode=0o700)
    run = run_container(
        engine,
        spec(
            images.verifier,
            ["python3", "-c", "open('/result/result.json', 'w').write('{}')"],
            mounts=(Mount(result, "/result", read_only=False),),
        ),
        timeout_s=30,
        log_limit_bytes=1024,
    )
    assert run.wait.exit_code == 0, run.output.stderr.decode()
    assert (result / "result.json").read_text() == "{}"


def test_a_container_past_its_deadline_is_killed_from_outside_and_removed(
    engine: DockerEngine, images: BuiltImages, docker_client: docker.DockerClient
) -> None:
    started = time.monotonic()
    run = run_container(
        engine, spec(images.verifier, ["sleep", "60"]), timeout_s=1, log_limit_bytes=1024
    )
    assert run.wait.timed_out
    assert run.wait.exit_code == 137
    assert time.monotonic() - started < 15
    assert gone(docker_client, run.container_id)


def test_the_cpu_time_a_container_used_is_measured_apart_from_its_wall_time(
    engine: DockerEngine, images: BuiltImages
) -> None:
    """A busy process is charged its CPU; one that sleeps is charged next to none, by its
    cgroup and by its threads' scheduler counters alike."""
    # Until it has used 2.5 s of CPU itself, however long a crowded machine makes that take.
    # One thread uses at most a second of CPU between the thread counters' last one-second
    # sample and its exit, so that sample holds at least 1.5 s of it.
    busy = "import time\nwhile time.process_time() < 2.5: pass"
    ran = run_container(
        engine, spec(images.verifier, ["python3", "-c", busy]), timeout_s=60, log_limit_bytes=1024
    )
    slept = run_container(
        engine, spec(images.verifier, ["sleep", "2"]), timeout_s=60, log_limit_bytes=1024
    )
    assert ran.wait.cpu_seconds is not None and slept.wait.cpu_seconds is not None
    # Sampled every quarter second: at least the part before the last sample.
    assert ran.wait.cpu_seconds >= 1.0, ran.wait
    assert slept.wait.cpu_seconds < 0.5, slept.wait
    assert not ran.wait.engine_lost and not slept.wait.engine_lost
    # Its threads' own counters (schedstat) say the same: read here, never guessed.
    busy, asleep = ran.wait.run_queue, slept.wait.run_queue
    assert busy is not None and asleep is not None, (ran.wait, slept.wait)
    assert busy.on_cpu_s >= 1.0 and asleep.on_cpu_s < 0.5, (busy, asleep)


def test_output_is_cut_at_the_limit_per_stream(engine: DockerEngine, images: BuiltImages) -> None:
    command = "import sys; sys.stdout.write('o' * 100000); sys.stderr.write('e' * 10)"
    run = run_container(
        engine,
        spec(images.verifier, ["python3", "-c", command]),
        timeout_s=30,
        log_limit_bytes=1000,
    )
    assert run.output.stdout == b"o" * 1000 and run.output.stdout_truncated
    assert run.output.stderr == b"e" * 10 and not run.output.stderr_truncated


def test_stdin_reaches_the_process_and_is_closed(engine: DockerEngine, images: BuiltImages) -> None:
    request = json.dumps({"schemaVersion": 1, "pad": "x" * 200_000}).encode()
    command = "import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
    run = run_container(
        engine,
        spec(images.runner_base, ["python3", "-c", command], role="runner", stdin=True),
        timeout_s=30,
        log_limit_bytes=1024,
        stdin=request,
    )
    assert run.output.stdout.decode().strip() == hashlib.sha256(request).hexdigest()


def test_the_leftovers_of_a_batch_are_removed_by_label_and_no_others(
    engine: DockerEngine, images: BuiltImages, docker_client: docker.DockerClient
) -> None:
    interrupted, other = batch(), batch()
    running = engine.create(spec(images.verifier, ["sleep", "60"], batch_id=interrupted))
    engine.start(running)
    created = engine.create(spec(images.verifier, ["true"], batch_id=interrupted, run_id="x-2"))
    survivor = engine.create(spec(images.verifier, ["true"], batch_id=other))
    try:
        found = {c.container_id for c in list_leftovers(engine, interrupted)}
        assert found == {running, created}
        assert set(remove_leftovers(engine, interrupted)) == {running, created}
        assert gone(docker_client, running) and gone(docker_client, created)
        assert [c.container_id for c in list_leftovers(engine, other)] == [survivor]
    finally:
        engine.remove(survivor)
    assert gone(docker_client, survivor)


def test_a_container_removed_while_it_is_waited_for_or_started_is_an_infrastructure_error(
    engine: DockerEngine,
    images: BuiltImages,
    docker_client: docker.DockerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stop removes the containers in flight under the threads that wait for them. The
    # removal falls here just after the engine's wait answered, before the exit status is
    # read: what the caller is told is the engine port's error, never the client's own.
    container_id = engine.create(spec(images.verifier, ["sleep", "60"]))
    engine.start(container_id)

    def removed_after_the_answer(container: str, timeout: float) -> Any:
        docker_client.api.remove_container(container, force=True)
        return {"StatusCode": 137, "Error": None}  # as the engine answered the kill

    monkeypatch.setattr(engine._api, "wait", removed_after_the_answer)
    with pytest.raises(InfrastructureError, match=f"container {container_id[:12]} is gone"):
        engine.wait(container_id, timeout_s=60)
    monkeypatch.undo()
    with pytest.raises(InfrastructureError):
        engine.wait(container_id, timeout_s=5)
    with pytest.raises(InfrastructureError):
        engine.start(container_id)


def test_removing_a_container_that_is_already_gone_is_confirmed(
    engine: DockerEngine, images: BuiltImages
) -> None:
    container_id = engine.create(spec(images.verifier, ["true"]))
    engine.remove(container_id)
    engine.remove(container_id)
