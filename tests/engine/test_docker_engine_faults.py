"""How the Docker engine adapter reads a connection that fails, over a stub of the SDK.

Invariants: a create is asked again on any dropped connection under its unique
name, and a create the engine did make is found by that name (never one of
another spec); a start is asked again only when the container has not
started (a start whose answer was lost is not repeated); an idempotent call
is asked again on any dropped connection; a wait whose connection drops is asked again on the
harness's own clock and is never taken for a timeout; a container that ended
non-zero while the engine was out of reach is an infrastructure failure. The
same faults against a real engine are in tests/faults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import docker.errors
import pytest
import requests
import urllib3.exceptions

from agent_eval.engine import ContainerSpec, docker_engine
from agent_eval.engine.docker_engine import DockerEngine
from agent_eval.engine.fake import FakeThreadClocks
from agent_eval.engine.run_queue import ThreadTimes
from agent_eval.errors import InfrastructureError, NotStartedError

IMAGE = "sha256:" + "c" * 64


def connection_error(cause: OSError) -> requests.ConnectionError:
    """What requests raises over the SDK's Unix socket adapter."""
    return requests.ConnectionError(urllib3.exceptions.ProtocolError("Connection aborted.", cause))


NEVER_SENT = [FileNotFoundError(2, "No such file"), ConnectionRefusedError(111, "refused")]
MAYBE_SENT = [ConnectionResetError(104, "reset"), BrokenPipeError(32, "broken pipe")]


class StubApi:
    """The SDK calls the adapter makes, each answering from a script of results."""

    def __init__(self, **scripts: list[Any]) -> None:
        self.scripts = scripts
        self.calls: dict[str, int] = {}

    def _answer(self, name: str) -> Any:
        self.calls[name] = self.calls.get(name, 0) + 1
        script = self.scripts[name]
        result = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(result, BaseException):
            raise result
        return result(self.calls[name]) if callable(result) else result

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in self.scripts:
            raise AttributeError(name)
        return lambda *args, **kwargs: self._answer(name)

    def create_host_config(self, **kwargs: Any) -> dict[str, Any]:
        return {}

    def inspect_image(self, reference: str) -> dict[str, Any]:
        return {"Id": IMAGE, "RepoDigests": []}


SPEC = ContainerSpec(
    image=IMAGE,
    command=("python3", "-c", "pass"),
    role="verifier",
    batch_id="batch-1",
    run_id="core-validation-1",
)


@pytest.fixture(autouse=True)
def no_back_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(docker_engine, "_RETRY_DELAYS_S", (0.0, 0.0, 0.0))
    yield


def engine(api: StubApi) -> DockerEngine:
    return DockerEngine(api, socket_path="/run/test.sock")  # type: ignore[arg-type]


@pytest.mark.parametrize("cause", NEVER_SENT, ids=lambda e: type(e).__name__)
def test_a_create_that_never_reached_the_engine_is_asked_again(cause: OSError) -> None:
    api = StubApi(create_container=[connection_error(cause), {"Id": "abc"}])
    assert engine(api).create(SPEC) == "abc"
    assert api.calls["create_container"] == 2


def conflict() -> docker.errors.APIError:
    answer = requests.Response()
    answer.status_code = 409
    return docker.errors.APIError("Conflict. The container name is already in use", answer)


def created(labels: dict[str, str]) -> dict[str, Any]:
    return {"Id": "abc", "Config": {"Labels": {"agent-eval.image": "verifier", **labels}}}


@pytest.mark.parametrize("cause", MAYBE_SENT, ids=lambda e: type(e).__name__)
def test_a_create_whose_answer_was_lost_is_found_by_its_name(cause: OSError) -> None:
    api = StubApi(
        create_container=[connection_error(cause), conflict()],
        inspect_container=[created(SPEC.labels)],
    )
    assert engine(api).create(SPEC) == "abc"
    assert (api.calls["create_container"], api.calls["inspect_container"]) == (2, 1)


@pytest.mark.parametrize("cause", MAYBE_SENT, ids=lambda e: type(e).__name__)
def test_a_create_the_engine_never_made_is_made_when_asked_again(cause: OSError) -> None:
    api = StubApi(create_container=[connection_error(cause), {"Id": "abc"}])
    assert engine(api).create(SPEC) == "abc"
    assert api.calls["create_container"] == 2


def test_a_container_of_that_name_with_other_labels_is_never_taken() -> None:
    api = StubApi(
        create_container=[connection_error(MAYBE_SENT[0]), conflict()],
        inspect_container=[created({**SPEC.labels, "agent-eval.batch": "another"})],
    )
    with pytest.raises(InfrastructureError, match="409"):
        engine(api).create(SPEC)


NOT_STARTED = {"State": {"Running": False, "StartedAt": "0001-01-01T00:00:00Z"}}
STARTED = {"State": {"Running": True, "StartedAt": "2026-12-01T14:00:00.1Z"}}
EXITED = {"State": {"Running": False, "StartedAt": "2026-12-01T14:00:00.1Z"}}


@pytest.mark.parametrize("cause", [*NEVER_SENT, *MAYBE_SENT], ids=lambda e: type(e).__name__)
def test_a_start_that_did_not_happen_is_asked_again(cause: OSError) -> None:
    api = StubApi(inspect_container=[NOT_STARTED], start=[connection_error(cause), None])
    engine(api).start("abc")
    assert api.calls["start"] == 2


@pytest.mark.parametrize("after", [STARTED, EXITED], ids=["running", "exited"])
def test_a_start_whose_answer_was_lost_is_not_repeated(after: dict[str, Any]) -> None:
    api = StubApi(inspect_container=[after], start=[connection_error(MAYBE_SENT[0])])
    engine(api).start("abc")
    assert api.calls["start"] == 1


def test_an_engine_that_stays_unreachable_is_named_and_nothing_started() -> None:
    unreachable = connection_error(NEVER_SENT[1])
    api = StubApi(start=[unreachable], inspect_container=[unreachable])
    with pytest.raises(NotStartedError, match="stayed unreachable"):
        engine(api).start("abc")
    assert (api.calls["start"], api.calls["inspect_container"]) == (1, 4)


def state(exit_code: int) -> dict[str, Any]:
    return {"State": {"ExitCode": exit_code, "Error": "", "OOMKilled": False}}


@pytest.mark.parametrize("cause", [*NEVER_SENT, *MAYBE_SENT], ids=lambda e: type(e).__name__)
def test_a_wait_whose_connection_drops_is_asked_again_and_is_no_timeout(cause: OSError) -> None:
    api = StubApi(wait=[connection_error(cause), {"StatusCode": 0}], inspect_container=[state(0)])
    result = engine(api).wait("abc", timeout_s=30)
    assert (result.exit_code, result.timed_out) == (0, False)
    assert api.calls["wait"] == 2


def test_a_wait_whose_response_is_cut_off_is_asked_again() -> None:
    cut = requests.exceptions.ChunkedEncodingError("Response ended prematurely")
    api = StubApi(wait=[cut, {"StatusCode": 0}], inspect_container=[state(0)])
    assert engine(api).wait("abc", timeout_s=30).exit_code == 0
    assert api.calls["wait"] == 2


def test_a_read_timeout_before_the_deadline_is_waited_again() -> None:
    api = StubApi(
        wait=[requests.exceptions.ReadTimeout(), {"StatusCode": 3}], inspect_container=[state(3)]
    )
    result = engine(api).wait("abc", timeout_s=30)
    assert (result.exit_code, result.timed_out) == (3, False)


def test_a_container_that_ended_badly_while_the_engine_was_unreachable_is_not_trusted() -> None:
    api = StubApi(
        wait=[connection_error(MAYBE_SENT[0]), {"StatusCode": 137}], inspect_container=[state(137)]
    )
    with pytest.raises(InfrastructureError, match=r"unreachable.*not trusted"):
        engine(api).wait("abc", timeout_s=30)


def test_a_container_that_ended_badly_with_the_engine_in_reach_is_its_own_outcome() -> None:
    api = StubApi(wait=[{"StatusCode": 137}], inspect_container=[state(137)])
    assert engine(api).wait("abc", timeout_s=30).exit_code == 137


def test_a_container_that_ended_badly_after_another_call_found_the_engine_away_is_not_trusted() -> (
    None
):
    """A restart of the engine kills the containers it finds running (exit 143): a container
    whose own wait never saw the outage (it was between calls) is judged by any call that
    did, from its creation on."""
    runner = StubApi(create_container=[{"Id": "abc"}], wait=[{"StatusCode": 143}],
                     inspect_container=[state(143)])  # fmt: skip
    made = engine(runner)
    assert made.create(SPEC) == "abc"
    neighbour = StubApi(create_container=[connection_error(NEVER_SENT[0]), {"Id": "def"}])
    assert engine(neighbour).create(SPEC) == "def"
    with pytest.raises(InfrastructureError, match=r"unreachable.*not trusted"):
        made.wait("abc", timeout_s=30)


def test_an_outage_before_a_container_was_made_leaves_its_outcome_its_own() -> None:
    neighbour = StubApi(create_container=[connection_error(NEVER_SENT[0]), {"Id": "def"}])
    assert engine(neighbour).create(SPEC) == "def"
    runner = StubApi(create_container=[{"Id": "abc"}], wait=[{"StatusCode": 143}],
                     inspect_container=[state(143)])  # fmt: skip
    made = engine(runner)
    assert made.create(SPEC) == "abc"
    result = made.wait("abc", timeout_s=30)
    assert (result.exit_code, result.engine_lost) == (143, False)


def test_a_wait_reports_the_containers_own_wait_for_a_cpu_from_its_thread_counters() -> None:
    """Read while it runs and once more as the wait ends (before a kill would end it)."""
    readings = [{1: ThreadTimes(10**9, 2 * 10**9)}, {1: ThreadTimes(3 * 10**9, 5 * 10**9)}]
    clocks = FakeThreadClocks({"abc": list(readings), "def": [None]})
    api = StubApi(wait=[{"StatusCode": 0}], inspect_container=[state(0)])
    made = DockerEngine(api, socket_path="/run/test.sock", clocks=clocks)  # type: ignore[arg-type]
    measured = made.wait("abc", timeout_s=30).run_queue
    assert clocks.reads["abc"] == 2
    assert measured is not None and (measured.on_cpu_s, measured.waiting_s) == (3.0, 5.0)
    assert made.wait("def", timeout_s=30).run_queue is None


@pytest.mark.parametrize(
    ("code", "peak", "oom"),
    [(137, 64 << 20, True), (137, (64 << 20) - 4096, True), (137, 32 << 20, False),
     (1, 64 << 20, False)],
)  # fmt: skip
def test_a_sigkill_at_the_memory_limit_is_an_oom_kill_when_the_engine_has_not_said_so(
    monkeypatch: pytest.MonkeyPatch, code: int, peak: int, oom: bool
) -> None:
    """The engine sets OOMKilled from an event that can come after the exit it caused
    (cgroup v1): a hog killed at its 64 MiB limit once read as no OOM kill."""
    monkeypatch.setattr(docker_engine._UsageWatch, "peak", property(lambda self: peak))
    inspected = {**state(code), "HostConfig": {"Memory": 64 << 20}}
    api = StubApi(wait=[{"StatusCode": code}], inspect_container=[inspected, inspected])
    assert engine(api).wait("abc", timeout_s=30).oom_killed is oom
