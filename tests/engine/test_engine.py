"""The engine boundary's rules, checked without an engine.

Invariants: only a local Unix socket is used (a remote ``DOCKER_HOST`` is
refused by name); an image is used only when it is present locally and is the
pinned one, and nothing is ever pulled; every container gets exactly the
hardening flags of its role and its three labels; dangerous mounts are
refused; a run's container is removed whatever happens, and an unconfirmed
removal is a CleanupError; leftovers are found and removed by batch label.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.engine import (
    DEFAULT_SOCKET,
    LABEL_BATCH,
    LABEL_ROLE,
    LABEL_RUN,
    ContainerSpec,
    Hardening,
    Mount,
    ResourceLimits,
    list_leftovers,
    local_socket_path,
    match_pinned_image,
    remove_leftovers,
    run_container,
)
from agent_eval.engine.fake import FakeEngine, Outcome
from agent_eval.errors import (
    CleanupError,
    ConfigError,
    EngineUnavailableError,
    InfrastructureError,
    NotStartedError,
)

DIGEST = "sha256:" + "a" * 64
OTHER_DIGEST = "sha256:" + "b" * 64
VERIFIER_REF = f"127.0.0.1:5000/agent-eval/verifier@{DIGEST}"


def spec(image: str, **changes: object) -> ContainerSpec:
    fields: dict[str, object] = {
        "image": image,
        "command": ("python3", "-c", "pass"),
        "role": "verifier",
        "batch_id": "batch-1",
        "run_id": "core-validation-1",
    }
    fields.update(changes)
    return ContainerSpec(**fields)  # type: ignore[arg-type]


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


# --- Local socket only ---------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["tcp://10.0.0.1:2375", "ssh://user@host", "npipe:////./pipe/docker", "fd://"]
)
def test_a_remote_docker_host_is_refused_by_name(host: str) -> None:
    with pytest.raises(EngineUnavailableError, match=r"DOCKER_HOST=.*not a local unix://"):
        local_socket_path(None, {"DOCKER_HOST": host})


def test_a_remote_docker_host_is_refused_even_with_a_runtime_path() -> None:
    with pytest.raises(EngineUnavailableError, match="DOCKER_HOST"):
        local_socket_path("/run/docker.sock", {"DOCKER_HOST": "tcp://127.0.0.1:2375"})


def test_the_runtime_path_wins_over_a_local_docker_host() -> None:
    path = local_socket_path("/srv/engine.sock", {"DOCKER_HOST": "unix:///other.sock"})
    assert path == "/srv/engine.sock"


def test_a_unix_docker_host_names_the_socket() -> None:
    assert local_socket_path(None, {"DOCKER_HOST": "unix:///x/docker.sock"}) == "/x/docker.sock"


def test_without_configuration_the_default_socket_is_used() -> None:
    assert local_socket_path(None, {}) == DEFAULT_SOCKET


def test_a_relative_socket_path_is_refused() -> None:
    with pytest.raises(EngineUnavailableError, match="absolute"):
        local_socket_path(None, {"DOCKER_HOST": "unix://docker.sock"})


# --- Pinned references ---------------------------------------------------------------


def test_a_digest_reference_matches_an_image_carrying_it_in_its_repo_digests() -> None:
    match_pinned_image(VERIFIER_REF, OTHER_DIGEST, [VERIFIER_REF])


def test_a_docker_hub_reference_matches_its_familiar_repo_digest() -> None:
    match_pinned_image(f"docker.io/library/debian@{DIGEST}", OTHER_DIGEST, [f"debian@{DIGEST}"])


def test_a_digest_reference_does_not_match_another_digest() -> None:
    with pytest.raises(InfrastructureError, match="does not carry that digest"):
        match_pinned_image(
            VERIFIER_REF, DIGEST, [f"127.0.0.1:5000/agent-eval/verifier@{OTHER_DIGEST}"]
        )


def test_a_digest_reference_does_not_match_the_same_digest_under_another_name() -> None:
    with pytest.raises(InfrastructureError, match="does not carry that digest"):
        match_pinned_image(VERIFIER_REF, DIGEST, [f"127.0.0.1:5000/other@{DIGEST}"])


def test_an_image_id_reference_matches_only_that_id() -> None:
    match_pinned_image(DIGEST, DIGEST, [])
    with pytest.raises(InfrastructureError, match="pinned by id"):
        match_pinned_image(DIGEST, OTHER_DIGEST, [])


@pytest.mark.parametrize("reference", ["agent-eval/verifier:local", "verifier", "sha256:abc"])
def test_an_unpinned_reference_is_a_config_error(reference: str) -> None:
    with pytest.raises(ConfigError, match="not pinned"):
        match_pinned_image(reference, DIGEST, [])


def test_an_absent_image_is_refused_and_nothing_is_pulled(engine: FakeEngine) -> None:
    with pytest.raises(
        InfrastructureError, match=r"not present in the local engine.*nothing is ever pulled"
    ):
        engine.create(spec(VERIFIER_REF))
    assert engine.pulls == []
    assert engine.containers == {}


def test_a_present_image_with_another_digest_is_refused(engine: FakeEngine) -> None:
    engine.add_image(
        tags=("127.0.0.1:5000/agent-eval/verifier:local",),
        repo_digests=(f"127.0.0.1:5000/agent-eval/verifier@{OTHER_DIGEST}",),
    )
    with pytest.raises(InfrastructureError, match="does not carry that digest"):
        engine.create(spec(VERIFIER_REF))
    assert engine.containers == {}


def test_a_container_is_created_from_the_resolved_image_id(engine: FakeEngine) -> None:
    image_id = engine.add_image(repo_digests=(VERIFIER_REF,))
    container = engine.containers[engine.create(spec(VERIFIER_REF))]
    assert container.image_id == image_id


# --- Hardening -----------------------------------------------------------------------

LIMITS = ResourceLimits(
    pids=64, memory_bytes=256 * 1024 * 1024, nano_cpus=500_000_000, tmp_bytes=8 * 1024 * 1024
)


def expected_flags(network: str, cap_add: list[str]) -> dict[str, object]:
    return {
        "init": True,
        "read_only": True,
        "network_mode": network,
        "security_opt": ["no-new-privileges"],
        "cap_drop": ["ALL"],
        "cap_add": cap_add,
        "privileged": False,
        "pids_limit": 64,
        "mem_limit": 256 * 1024 * 1024,
        "memswap_limit": 256 * 1024 * 1024,
        "nano_cpus": 500_000_000,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,noexec,size={8 * 1024 * 1024}"},
        "mounts": [],
    }


def test_the_verifier_keeps_exactly_four_capabilities_and_runs_as_root() -> None:
    hardening = Hardening.for_role("verifier", LIMITS)
    assert hardening.user == "0:0"
    assert hardening.host_config_kwargs() == expected_flags(
        "none", ["SETUID", "SETGID", "DAC_OVERRIDE", "KILL"]
    )


def test_the_runner_keeps_no_capability_and_runs_as_the_agent_user() -> None:
    hardening = Hardening.for_role("runner", LIMITS)
    assert hardening.user == "10001:10001"
    assert hardening.host_config_kwargs() == expected_flags("none", [])


def test_the_consumer_keeps_no_capability() -> None:
    hardening = Hardening.for_role("consumer", LIMITS)
    assert hardening.user == "0:0"
    assert hardening.host_config_kwargs() == expected_flags("none", [])


def test_only_the_gateway_may_have_a_network_or_fixed_hosts() -> None:
    flags = Hardening.for_role("gateway", LIMITS, "agent-eval-net").host_config_kwargs()
    assert flags["network_mode"] == "agent-eval-net" and flags["cap_add"] == []
    hosts = Hardening.for_role("gateway", LIMITS, "n", {"model.test": "10.0.0.2"})
    assert hosts.host_config_kwargs()["extra_hosts"] == {"model.test": "10.0.0.2"}
    assert Hardening.for_role("gateway", LIMITS).user == "10001:10001"
    for role in ("runner", "verifier", "consumer", "build"):
        with pytest.raises(ConfigError, match="never has a network"):
            Hardening.for_role(role, LIMITS, "default")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="never has a network"):
            Hardening.for_role(role, LIMITS, "none", {"x": "10.0.0.1"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not an engine network name"):
        Hardening.for_role("gateway", LIMITS, "bad name")


def test_only_the_verifiers_command_may_be_its_own_init() -> None:
    assert Hardening.for_role("verifier", LIMITS).host_config_kwargs()["init"] is True
    own = Hardening.for_role("verifier", LIMITS, own_init=True).host_config_kwargs()
    assert own["init"] is False
    for role in ("runner", "consumer", "build", "gateway"):
        assert Hardening.for_role(role, LIMITS).host_config_kwargs()["init"] is True
        with pytest.raises(ConfigError, match="only the verifier's command is its own init"):
            Hardening.for_role(role, LIMITS, own_init=True)
    with pytest.raises(ConfigError, match="only the verifier's command is its own init"):
        spec(VERIFIER_REF, role="runner", own_init=True)


def test_the_engine_creates_containers_with_the_roles_flags_user_and_labels(
    engine: FakeEngine,
) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    container = engine.containers[
        engine.create(spec(VERIFIER_REF, role="runner", limits=LIMITS, run_id="forms-2"))
    ]
    assert container.host_config == expected_flags("none", [])
    assert container.user == "10001:10001"
    assert container.labels == {
        LABEL_BATCH: "batch-1",
        LABEL_RUN: "forms-2",
        LABEL_ROLE: "runner",
    }


def test_memory_and_swap_limits_are_always_equal() -> None:
    kwargs = Hardening.for_role("verifier", ResourceLimits(memory_bytes=64 * 2**20))
    flags = kwargs.host_config_kwargs()
    assert flags["mem_limit"] == flags["memswap_limit"] == 64 * 2**20


@pytest.mark.parametrize("bad", ["batch 1", "", "../x", "a" * 129, "batch=1"])
def test_ids_that_are_not_label_values_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="label value"):
        spec(VERIFIER_REF, batch_id=bad)


def test_an_unpinned_spec_image_is_refused() -> None:
    with pytest.raises(ConfigError, match="not pinned"):
        spec("agent-eval/verifier:local")


# --- Mounts ----------------------------------------------------------------------------


def test_mounts_are_read_only_unless_stated(tmp_path: Path) -> None:
    staged = tmp_path / "stage"
    result = tmp_path / "result"
    staged.mkdir()
    result.mkdir()
    flags = Hardening.for_role("verifier").host_config_kwargs(
        [Mount(staged, "/verifier"), Mount(result, "/result", read_only=False)]
    )
    assert flags["mounts"] == [
        {"Type": "bind", "Source": str(staged), "Target": "/verifier", "ReadOnly": True},
        {"Type": "bind", "Source": str(result), "Target": "/result", "ReadOnly": False},
    ]


def refused(mount: Mount, match: str, engine_socket: str | None = None) -> None:
    with pytest.raises(ConfigError, match=match):
        Hardening.for_role("verifier").host_config_kwargs([mount], engine_socket=engine_socket)


def test_the_engine_socket_and_its_directory_are_never_mounted(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "engine.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        refused(Mount(path, "/x"), "socket", engine_socket=str(path))
        refused(Mount(tmp_path, "/x"), "engine socket", engine_socket=str(path))


def test_the_host_home_and_its_dot_directories_are_never_mounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "someone"
    (home / ".ssh").mkdir(parents=True)
    (home / "work").mkdir()
    monkeypatch.setenv("HOME", str(home))
    refused(Mount(home, "/x"), "host home")
    refused(Mount(home.parent, "/x"), "host home")
    refused(Mount(home / ".ssh", "/x"), "dot-directories")
    Hardening.for_role("verifier").host_config_kwargs([Mount(home / "work", "/x")])


def test_the_root_directory_is_never_mounted() -> None:
    refused(Mount(Path("/"), "/x"), "host home|engine socket")


def test_a_git_work_tree_is_never_mounted(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    refused(Mount(tmp_path, "/x"), "git work tree")


@pytest.mark.parametrize("target", ["/", "/proc/x", "/sys", "/dev/shm", "/tmp", "rel", "/a/../b"])
def test_system_and_relative_targets_are_refused(tmp_path: Path, target: str) -> None:
    refused(Mount(tmp_path, target), "target|managed")


def test_a_missing_source_is_refused(tmp_path: Path) -> None:
    refused(Mount(tmp_path / "missing", "/x"), "cannot be read")


def test_a_target_used_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="used twice"):
        Hardening.for_role("verifier").host_config_kwargs(
            [Mount(tmp_path, "/x"), Mount(tmp_path, "/x")]
        )


# --- Running a container -----------------------------------------------------------------


def test_a_run_returns_exit_code_and_output_and_leaves_no_container(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    engine.script(Outcome(exit_code=3, stdout=b"out", stderr=b"err"))
    run = run_container(
        engine, spec(VERIFIER_REF, stdin=True), timeout_s=5, log_limit_bytes=100, stdin=b"{}"
    )
    assert (run.wait.exit_code, run.wait.timed_out) == (3, False)
    assert (run.output.stdout, run.output.stderr) == (b"out", b"err")
    assert engine.containers[run.container_id].stdin == b"{}"
    assert engine.containers[run.container_id].removed
    assert list_leftovers(engine) == []


def test_a_timeout_is_recorded_and_the_container_killed_and_removed(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    engine.script(Outcome(timeout=True))
    run = run_container(engine, spec(VERIFIER_REF), timeout_s=0.1, log_limit_bytes=100)
    assert run.wait.timed_out
    assert run.wait.exit_code == 137
    container = engine.containers[run.container_id]
    assert container.killed and container.removed


def test_output_past_the_limit_is_cut_and_flagged_per_stream(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    engine.script(Outcome(stdout=b"x" * 11, stderr=b"y" * 10))
    run = run_container(engine, spec(VERIFIER_REF), timeout_s=5, log_limit_bytes=10)
    assert run.output.stdout == b"x" * 10 and run.output.stdout_truncated
    assert run.output.stderr == b"y" * 10 and not run.output.stderr_truncated


def test_a_failed_start_still_removes_the_container(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    engine.script(Outcome(start_error="OCI runtime create failed"))
    with pytest.raises(InfrastructureError, match="OCI runtime"):
        run_container(engine, spec(VERIFIER_REF), timeout_s=5, log_limit_bytes=10)
    assert all(c.removed for c in engine.containers.values())


def test_a_container_that_did_not_get_going_is_replaced_by_a_fresh_one(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    lost = NotStartedError("its stdin did not reach it, the connection to the engine broke")
    engine.script(Outcome(start_raises=lost))
    engine.script(Outcome(start_raises=lost))
    engine.script(Outcome(stdout=b"answered"))
    run = run_container(
        engine, spec(VERIFIER_REF, stdin=True), timeout_s=5, log_limit_bytes=100, stdin=b"{}"
    )
    assert run.output.stdout == b"answered"
    assert len(engine.containers) == 3 and all(c.removed for c in engine.containers.values())
    assert engine.containers[run.container_id].stdin == b"{}"


def test_containers_that_never_get_going_end_as_an_infrastructure_failure(
    engine: FakeEngine,
) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    for _ in range(3):
        engine.script(Outcome(start_raises=NotStartedError("the engine stayed unreachable")))
    with pytest.raises(InfrastructureError, match="stayed unreachable"):
        run_container(engine, spec(VERIFIER_REF), timeout_s=5, log_limit_bytes=10)
    assert len(engine.containers) == 3 and all(c.removed for c in engine.containers.values())


def test_an_unconfirmed_removal_is_a_cleanup_error(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    engine.script(Outcome(cleanup_fails=True))
    with pytest.raises(CleanupError, match="not confirmed"):
        run_container(engine, spec(VERIFIER_REF), timeout_s=5, log_limit_bytes=10)


def test_a_cleanup_error_wins_over_a_failed_start(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    engine.script(Outcome(start_error="boom", cleanup_fails=True))
    with pytest.raises(CleanupError) as caught:
        run_container(engine, spec(VERIFIER_REF), timeout_s=5, log_limit_bytes=10)
    assert isinstance(caught.value.__context__, InfrastructureError)


def test_stdin_data_needs_a_spec_that_opens_stdin(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    with pytest.raises(ConfigError, match="stdin"):
        run_container(engine, spec(VERIFIER_REF), timeout_s=5, log_limit_bytes=10, stdin=b"x")


def test_scripted_files_are_written_into_the_writable_mount_that_holds_them(
    engine: FakeEngine, tmp_path: Path
) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    result = tmp_path / "result"
    result.mkdir()
    engine.script(Outcome(files={"/result/result.json": b"{}"}))
    container_id = engine.create(
        spec(VERIFIER_REF, mounts=(Mount(result, "/result", read_only=False),))
    )
    engine.start(container_id)
    assert (result / "result.json").read_bytes() == b"{}"
    engine.script(Outcome(files={"/elsewhere/x": b"x"}))
    other = engine.create(spec(VERIFIER_REF, mounts=(Mount(result, "/result", read_only=False),)))
    with pytest.raises(AssertionError, match="in no writable mount"):
        engine.start(other)


# --- Leftovers --------------------------------------------------------------------------


def test_leftovers_are_listed_and_removed_by_batch_label_only(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    mine = [
        engine.leave_container(spec(VERIFIER_REF, run_id="forms-1")),
        engine.leave_container(spec(VERIFIER_REF, run_id="forms-2"), state="exited"),
    ]
    theirs = engine.leave_container(spec(VERIFIER_REF, batch_id="batch-2"))
    assert sorted(c.container_id for c in list_leftovers(engine, "batch-1")) == sorted(mine)
    assert sorted(remove_leftovers(engine, "batch-1")) == sorted(mine)
    assert list_leftovers(engine, "batch-1") == []
    assert [c.container_id for c in list_leftovers(engine)] == [theirs]


def test_every_leftover_is_tried_before_a_cleanup_error_is_raised(engine: FakeEngine) -> None:
    engine.add_image(repo_digests=(VERIFIER_REF,))
    engine.script(Outcome(cleanup_fails=True), Outcome())
    stuck = engine.leave_container(spec(VERIFIER_REF))
    other = engine.leave_container(spec(VERIFIER_REF))
    with pytest.raises(CleanupError, match="1 leftover"):
        remove_leftovers(engine, "batch-1")
    assert engine.containers[other].removed
    assert not engine.containers[stuck].removed
