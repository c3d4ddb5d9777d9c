"""A batch's verifier makes its directory from the evidence directory down, through no link.

Whoever writes into the project may swap the work root (or any directory below
it) for a link while the batch prepares: the verifier's directory is then
refused, naming the link, and nothing is made where the link leads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.engine.fake import FakeRuntime
from agent_eval.errors import CleanupError
from agent_eval.project import find_project
from agent_eval.verification.container.verifier import batch_verifier_factory
from agent_eval.verification.protocol import VerifierContext
from tests.paths import REPO


@pytest.mark.parametrize("swapped", [".work", ".work/b-1"])
def test_the_verifiers_directory_is_not_made_behind_a_link(tmp_path: Path, swapped: str) -> None:
    evidence = tmp_path / "evidence"
    (evidence / ".work" / "b-1").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (evidence / swapped).rename(outside / "moved")
    (evidence / swapped).symlink_to(outside / "moved", target_is_directory=True)
    context = VerifierContext(
        engine=FakeRuntime(),
        image_id="sha256:" + "0" * 64,
        consumer_dir=tmp_path / "consumer",
        batch_id="b-1",
        slots=1,
        work_dir=evidence / ".work" / "b-1" / "verifier",
        work_anchor=evidence,
    )
    with pytest.raises(CleanupError, match=f"{evidence / swapped} is a symbolic link"):
        batch_verifier_factory(find_project(REPO), lambda _line: None)(context)
    assert not list(outside.rglob("verifier"))
