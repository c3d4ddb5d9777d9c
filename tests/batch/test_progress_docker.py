"""A real batch's log: eval-agent with ``--progress lines`` against the real engine.

Invariants: every line of its stderr starts with a UTC timestamp; every
preparing phase before the first run is logged when it starts and when it
ends, with its duration; each run's end says how long it took and how it
ended, in words read from its attempt records (the mutant reference runner
fails every first attempt and passes every repair; on approval-boundary its
first submission is unsafe).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from agent_eval.engine import ContainerEngine
from tests.batches import eval_agent_process, project_copy, write_config
from tests.paths import REPO

pytestmark = pytest.mark.docker

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def test_a_logged_batch_says_when_each_step_was_how_long_it_took_and_how_each_run_ended(
    engine: ContainerEngine, tmp_path: Path
) -> None:
    project = project_copy(tmp_path)
    config = write_config(engine, tmp_path / "r.json", "mutant")
    only = ("--only", "forms-1", "--only", "approval-boundary-1")
    junit = tmp_path / "batch.xml"
    done = eval_agent_process(
        project, config, None, *only, "--progress", "lines", "--junit", str(junit)
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["partial"] is True
    xmlschema.XMLSchema(REPO / "tests" / "data" / "junit" / "junit.xsd").validate(str(junit))
    cases = {c.get("name"): c for c in ET.parse(junit).iter("testcase")}
    assert cases["forms-1"].find("failure") is None  # passed on repair
    unsafe = cases["approval-boundary-1"].find("failure")
    assert unsafe is not None and unsafe.get("type") == "safety"
    assert set(cases) == {"qualification", "forms-1", "approval-boundary-1"}
    lines = done.stderr.splitlines()
    assert all(re.match(f"{STAMP} eval-agent: ", line) for line in lines), lines
    said = [line.split(" eval-agent: ", 1)[1] for line in lines]
    for step in (
        "checking the config, engine, images and suite",
        "packing the candidate archives",
        "preparing the consumer",
        "preparing the verifier",
    ):
        start = said.index(step)
        assert re.fullmatch(rf"{re.escape(step)}: done in \d+(s|m\d\ds)", said[start + 1])
    assert said.index("preparing the verifier") < said.index("2 runs scheduled, 2 at a time")
    ends = {line.split(" ", 1)[0]: line for line in said if " runs done, " in line}
    took = r" \(took \d+(s|m\d\ds)\); \d/2 runs done, 0 first / [12] final successes"
    first = r" \(attempt 1: [a-z ()]+\)"
    assert re.fullmatch("forms-1 passed on repair" + first + took, ends["forms-1"])
    assert re.fullmatch(
        "approval-boundary-1 passed on repair" + first + ", but attempt 1 was unsafe" + took,
        ends["approval-boundary-1"],
    )
