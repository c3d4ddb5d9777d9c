"""In the real verifier container, no frame a solution writes is the harness's failure.

The solution writes its own bytes to the pipe its child talks to the trusted
parent on: a lone surrogate in a ``fail`` message, invalid UTF-8, a 1 MiB
value with a 500,000-character key, a value nested 3,000 deep, unknown and
out-of-order ops, a truncated frame, an announced length past the limit, a
flood of effect calls past the parent's budget, frames after the answer,
and 38 scripts drawn (deterministically) from the in-process property
suite's strategies (``tests/verification/runtime/hostile_frames.py``). Each
case has a scenario of its own (``tests/data/verifier-frames``), and a last
scenario's ``echo`` shows the parent survived them all. A second solution
writes a lone surrogate at import time.

For every verification: the parent's result is there and valid (a missing or
malformed one raises InfrastructureError, a parent crash), no outcome and no
finding is ``infrastructure``, and no container of the test's batch is left.
"""

from __future__ import annotations

import base64
import json
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from agent_eval.consumer.source import prepare_source_consumer
from agent_eval.engine import ResourceLimits, list_leftovers
from agent_eval.engine.docker_engine import DockerEngine, connect_local_engine
from agent_eval.images.build import build_images
from agent_eval.models.behaviour import BehaviourResult, VerifierLimits
from agent_eval.models.task import TaskSpec
from agent_eval.project import find_project
from agent_eval.verification.container.cache import warm_analysis_cache
from agent_eval.verification.container.limits import VerificationLimits
from agent_eval.verification.container.run import VerifierSetup, verify_in_container
from tests.paths import REPO
from tests.verification.runtime.hostile_frames import scripts

pytestmark = pytest.mark.docker

FRAMES_TASK = REPO / "tests" / "data" / "verifier-frames"
CASES = 48
NAMED = 10
"""The first cases are written out in the solution; the rest are drawn scripts."""

LIMITS = VerificationLimits(
    behaviour=VerifierLimits(
        callTimeoutMs=2000,
        scenarioTimeoutMs=4000,
        totalTimeoutMs=240_000,
        memoryBytes=256 * 1024 * 1024,
        cpuSeconds=10,
        outputBytes=2048,
    ),
    container=ResourceLimits(
        pids=64, memory_bytes=512 * 1024 * 1024, nano_cpus=1_000_000_000, tmp_bytes=64 << 20
    ),
    analysis_timeout_s=60,
    grace_s=15,
)

SOLUTION = """\
import base64, json, os, struct, sys

DRAWN = {drawn!r}


def frame(body):
    return struct.pack(">I", len(body)) + body


def message(value):
    return frame(json.dumps(value, separators=(",", ":")).encode())


def named(case):
    if case == 0:
        return frame(b'{{"op":"fail","id":1,"message":"bad \\\\ud800"}}')
    if case == 1:
        return message({{"op": "return", "id": 1, "value": {{"k" * 500000: [0] * 240000}}}})
    if case == 2:
        return frame(b'{{"op":"fail","id":1,"message":"not UTF-8 \\xff\\xed\\xa0\\x80"}}')
    if case == 3:
        return frame(b'{{"op":"return","id":1,"value":' + b"[" * 3000 + b"]" * 3000 + b"}}")
    if case == 4:
        return message({{"op": "grade", "id": 1, "passed": True}})
    if case == 5:
        return message({{"op": "ready"}}) + message({{"op": "isolated"}})
    if case == 6:
        return struct.pack(">I", 1000) + b'{{"op"'
    if case == 7:
        return struct.pack(">I", 2**31)
    if case == 8:
        flood = {{"op": "effect", "call": 1, "effect": "send", "args": ["a" * 200000],
                  "kwargs": {{}}}}
        return message(flood) * 30
    return message({{"op": "return", "id": 1, "value": "ok"}}) + message(
        {{"op": "effect", "call": 1, "effect": "send", "args": [], "kwargs": {{}}}}
    )


def probe(case, send):
    data = named(case) if case < {named} else base64.b64decode(DRAWN[case - {named}])
    fd = int(sys.argv[-1])  # the child's end of the pipe to the parent
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return "ok"


def echo(text):
    return text
"""

AT_IMPORT = """\
import os, struct, sys

_body = b'{"op":"import-error","type":"E\\\\ud800","mro":["\\\\udfff"],"message":"\\\\ud800"}'
os.write(int(sys.argv[-1]), struct.pack(">I", len(_body)) + _body)


def probe(case, send):
    return "ok"


def echo(text):
    return text
"""


def drawn_scripts(count: int) -> list[bytes]:
    """*count* scripts drawn from the property suite's strategy, the same on every run."""
    drawn: list[bytes] = []

    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(scripts.filter(lambda script: len(script) <= 64 * 1024))
    def collect(script: bytes) -> None:
        drawn.append(script)

    collect()
    return drawn[:count]


@pytest.fixture(scope="module")
def engine(docker_client: docker.DockerClient) -> Iterator[DockerEngine]:
    connected = connect_local_engine()
    yield connected
    connected.close()


@pytest.fixture(scope="module")
def setup(
    engine: DockerEngine, base_image: str, tmp_path_factory: pytest.TempPathFactory
) -> VerifierSetup:
    image = build_images(engine, find_project(REPO).root).verifier
    root = tmp_path_factory.mktemp("frames")
    consumer = prepare_source_consumer(REPO / "packages", root / "consumer")
    batch = f"test-frames-{uuid.uuid4().hex[:12]}"
    cache = warm_analysis_cache(
        engine, image, consumer, root / "analysis-cache", batch_id=batch, limits=LIMITS
    )
    return VerifierSetup(
        engine=engine,
        image=image,
        consumer_dir=consumer,
        graders_dir=find_project(FRAMES_TASK).graders,
        batch_id=batch,
        limits=LIMITS,
        analysis_cache=cache,
    )


def verify(setup: VerifierSetup, root: Path, source: str) -> BehaviourResult:
    """The parent's result for *source*; a missing or malformed one raises (a parent crash)."""
    solution = root / "solution"
    solution.mkdir(parents=True)
    (solution / "solution.py").write_text(source, encoding="utf-8")
    task = TaskSpec.model_validate_json((FRAMES_TASK / "task.json").read_bytes())
    try:
        return verify_in_container(
            setup, task, FRAMES_TASK, solution, run_id="verifier-frames-1", slot=0
        ).behaviour
    finally:
        assert list_leftovers(setup.engine, setup.batch_id) == []


def assert_nothing_is_infrastructure(result: BehaviourResult) -> None:
    assert not result.infrastructure_failed, result.error
    assert [d for d in result.diagnostics if d.category == "infrastructure"] == []


def test_no_frame_a_solution_writes_is_an_infrastructure_outcome(
    setup: VerifierSetup, tmp_path: Path
) -> None:
    drawn = [base64.b64encode(s).decode() for s in drawn_scripts(CASES - NAMED)]
    assert len(drawn) == CASES - NAMED
    source = textwrap.dedent(SOLUTION.format(drawn=drawn, named=NAMED))
    result = verify(setup, tmp_path, source)
    assert_nothing_is_infrastructure(result)
    # The parent survived every case: the last, fresh scenario still answers.
    assert [(a.id, a.passed) for a in result.assertions] == [("echo-works", True)]
    failed = {d.message.split(":")[0] for d in result.diagnostics}
    # Each named case fails the solution but 1 and 9, which forge a well-formed answer.
    for case in (0, 2, 3, 4, 5, 6, 7, 8):
        assert f"scenario 'frames {case}'" in failed, (case, result.diagnostics)
    messages = json.dumps([d.message for d in result.diagnostics])
    assert "lone surrogate" in messages
    assert "bytes of messages in one call" in messages


def test_a_lone_surrogate_written_at_import_is_the_solutions_failure(
    setup: VerifierSetup, tmp_path: Path
) -> None:
    result = verify(setup, tmp_path, AT_IMPORT)
    assert_nothing_is_infrastructure(result)
    assert result.error is not None and result.error.category == "behaviour"
    assert "broke the protocol" in result.error.message
