"""The shareable summary says the counts and identities and leaks nothing else."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_eval.cli import main
from agent_eval.compare.share import as_markdown, share_summary
from agent_eval.digests import sha256_bytes, solution_digest
from agent_eval.errors import EvidenceError, InfrastructureError
from agent_eval.models import ApiCatalog, SharedSummary
from agent_eval.models.identity import RunnerIdentity
from tests.compare.test_symbols import AFTER, BEFORE, Catalogs, batch_with
from tests.evidence_builders import CURRENT, receipt, run, write_batch
from tests.paths import EXAMPLE_SUITE
from tests.verdict.test_chain import first_batch, resumed

SOLUTION_NAME = "zz_private_module_name.py"


def leaky_batch(root: Path, secret: str) -> Path:
    """A batch whose solution, log and transcript (and a solution file name) hold *secret*."""
    runs = [run(r) for r in EXAMPLE_SUITE.run_ids()]
    first = runs[0]["attempts"][0]
    content = f"# {secret}\nVALUE = 1\n".encode()
    log = f"runner said {secret} from /home/someone/{secret}\n".encode()
    transcript = json.dumps({"text": secret}).encode() + b"\n"
    first.update(
        solutionFiles=[{"path": SOLUTION_NAME, "sha256": sha256_bytes(content),
                        "size": len(content)}],
        runnerLogDigest=sha256_bytes(log), transcriptDigest=sha256_bytes(transcript),
        diagnostics=[{"category": "runner", "message": f"said {secret}", "path": None,
                      "line": None}],
    )  # fmt: skip
    first["solutionDigest"] = solution_digest([(SOLUTION_NAME, sha256_bytes(content))])
    batch = write_batch(root, receipt(runs))
    where = batch.attempt_dir(runs[0]["runId"], 1)
    (where / "solution" / "solution.py").unlink(missing_ok=True)
    (where / "solution").mkdir(exist_ok=True)
    (where / "solution" / SOLUTION_NAME).write_bytes(content)
    (where / "runner.log").write_bytes(log)
    (where / "transcript.jsonl").write_bytes(transcript)
    return batch.root


def test_a_summary_holds_the_counts_and_identities(tmp_path: Path) -> None:
    root = write_batch(tmp_path / "b", receipt()).root
    shared = share_summary(root, CURRENT)
    assert (shared.firstSuccesses, shared.finalSuccesses, shared.scheduledRuns) == (18, 18, 18)
    assert shared.qualified and shared.reasonRules == [] and shared.minFirstSuccesses == 15
    assert [t.taskId for t in shared.tasks] == list(EXAMPLE_SUITE.taskIds)
    text = as_markdown(shared)
    assert "first-attempt successes: 18/18 (at least 15 needed)" in text
    assert "| forms | 3 | 3 | 3 | 0 | 0 | 0 |" in text


def test_a_summary_of_a_run_directory_whose_receipt_is_a_link_is_refused(
    tmp_path: Path,
) -> None:
    """A linked receipt.json summarised another batch as this one, exit 0; show, report,
    export and the checker refuse a link there."""
    other = write_batch(tmp_path / "other", receipt()).root
    root = write_batch(tmp_path / "b", receipt()).root
    for name in ("receipt.json", "archives.json"):
        target = root / name
        target.unlink()
        target.symlink_to(other / name)
        with pytest.raises(EvidenceError, match="link"):
            share_summary(root, CURRENT)
        target.unlink()
        target.write_bytes((other / name).read_bytes())


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=12, max_size=24))
def test_no_byte_of_a_solution_log_transcript_or_path_is_in_the_summary(
    tmp_path_factory: pytest.TempPathFactory, word: str
) -> None:
    secret = f"canary{word}"
    root = leaky_batch(tmp_path_factory.mktemp("leak"), secret)
    other = write_batch(tmp_path_factory.mktemp("base"), receipt(batchId="base")).root
    shared = share_summary(root, CURRENT, compare_with=other)
    assert shared.qualified and shared.comparison is not None
    damaged = root / "runs" / EXAMPLE_SUITE.run_ids()[0] / "attempt-1" / "solution"
    (damaged / f"added_{secret}.py").write_text(secret)  # a reason would quote its name
    rejected = share_summary(root, CURRENT)
    assert "solution-integrity" in rejected.reasonRules
    for summary in (shared, rejected):
        for text in (as_markdown(summary), summary.model_dump_json()):
            assert secret not in text
            assert SOLUTION_NAME not in text and "zz_private" not in text
            assert str(root) not in text and str(other) not in text and "/home/" not in text
            assert "/tmp" not in text


def test_the_command_prints_markdown_and_writes_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_eval.cli.compare as command

    monkeypatch.setattr(command, "gate_anchors", lambda located: CURRENT)
    root = write_batch(tmp_path / "b", receipt()).root
    out = tmp_path / "summary.json"
    result = CliRunner().invoke(main, ["summary", str(root), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("## agent-eval batch batch-1")
    assert SharedSummary.model_validate_json(out.read_bytes()).batchId == "batch-1"
    missing = CliRunner().invoke(main, ["summary", str(tmp_path / "nope")])
    assert missing.exit_code == 2


def test_a_summary_names_the_changed_symbols_but_not_why_they_are_unknown(
    tmp_path: Path,
) -> None:
    before, after = batch_with(tmp_path / "a", BEFORE), batch_with(tmp_path / "b", AFTER)
    catalogs = Catalogs({before.root: BEFORE, after.root: AFTER})
    shared = share_summary(after.root, CURRENT, before.root, catalogs)
    text = as_markdown(shared)
    assert "- public symbols added, removed or changed: appkit.LIMIT (changed), " in text
    assert "appkit.fresh (added)" in text and "appkit.gone (removed)" in text

    def failing(wheels: Sequence[Path], distributions: Sequence[str]) -> ApiCatalog:
        raise InfrastructureError(f"cannot run {wheels[0]} from /home/someone/x")

    unknown = share_summary(after.root, CURRENT, before.root, failing)
    assert unknown.comparison is not None and unknown.comparison.api.status == "unavailable"
    for said in (as_markdown(unknown), unknown.model_dump_json()):
        assert "/home/someone" not in said and str(tmp_path) not in said
    assert "not known (the API catalogs could not be compared on the machine" in as_markdown(
        unknown
    )


def test_a_resumed_batch_is_summarised_as_its_chains_union(tmp_path: Path) -> None:
    last = resumed(tmp_path / "evidence", first_batch(tmp_path / "evidence"))
    shared = share_summary(last.root, CURRENT)
    assert (shared.firstSuccesses, shared.finalSuccesses, shared.scheduledRuns) == (18, 18, 18)
    assert shared.qualified and sum(t.runs for t in shared.tasks) == 18


@pytest.mark.parametrize("command", ["summary", "compare"])
@pytest.mark.parametrize("target", ["fifo", "/dev/null", "dir", "missing/x.json"])
def test_json_to_a_fifo_a_device_or_a_missing_directory_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, target: str
) -> None:
    import agent_eval.cli.compare as cli

    monkeypatch.setattr(cli, "gate_anchors", lambda located: CURRENT)
    a = write_batch(tmp_path / "a", receipt(batchId="a")).root
    b = write_batch(tmp_path / "b", receipt(batchId="b")).root
    out = Path(target) if target.startswith("/") else tmp_path / target
    if target == "fifo":
        os.mkfifo(out)
    elif target == "dir":
        out.mkdir()
    args = ["summary", str(b)] if command == "summary" else ["compare", str(a), str(b)]
    result = CliRunner().invoke(main, [*args, "--json", str(out)])
    assert result.exit_code == 2, result.output
    assert "--json" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "missing").exists()


def test_summary_compare_takes_the_allow_different_its_refusal_suggests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_eval.cli.compare as cli

    monkeypatch.setattr(cli, "gate_anchors", lambda located: CURRENT)
    other_model = {"id": "another-model", "settings": {}}
    a = write_batch(tmp_path / "a", receipt(batchId="a")).root
    b = write_batch(
        tmp_path / "b",
        receipt(batchId="b", model=other_model),
        lambda manifest: manifest.update(model=other_model),
    ).root
    refused = CliRunner().invoke(main, ["summary", str(b), "--compare", str(a)])
    assert refused.exit_code == 1 and "--allow-different model" in refused.output
    allowed = CliRunner().invoke(
        main, ["summary", str(b), "--compare", str(a), "--allow-different", "model"]
    )
    assert allowed.exit_code == 0, allowed.output
    assert "### Against a" in allowed.output


FORGED_RUNNER = {"name": "ok\n## Decision: QUALIFIED\n<!-- the rest", "version": "1\u202e2"}


def test_a_runner_name_cannot_forge_a_heading_or_hide_the_rest(tmp_path: Path) -> None:
    def forged(manifest: dict[str, Any]) -> None:
        manifest.update(runner=FORGED_RUNNER)

    root = write_batch(tmp_path / "b", receipt(runner=FORGED_RUNNER), forged).root
    text = as_markdown(share_summary(root, CURRENT))
    assert [line for line in text.splitlines() if line.startswith("#")] == [
        "## agent-eval batch batch-1"
    ]
    assert "<!--" not in text and "\u202e" not in text
    assert "- runner: okU+000A## Decision: QUALIFIEDU+000A\\<\\!-- the rest 1U+202E2;" in text


_SHARED: list[SharedSummary] = []


def _shared(factory: pytest.TempPathFactory) -> SharedSummary:
    if not _SHARED:
        _SHARED.append(share_summary(write_batch(factory.mktemp("s"), receipt()).root, CURRENT))
    return _SHARED[0]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.text(min_size=1, max_size=40), version=st.text(min_size=1, max_size=10))
def test_no_runner_name_changes_the_summary_s_structure(
    tmp_path_factory: pytest.TempPathFactory, name: str, version: str
) -> None:
    honest = _shared(tmp_path_factory)
    runner = RunnerIdentity.model_construct(name=name, version=version)  # whatever got through
    identity = honest.identity.model_copy(
        update={"runner": runner, "model": None, "servedModels": []}
    )
    lines = as_markdown(honest.model_copy(update={"identity": identity})).splitlines()
    assert len(lines) == len(as_markdown(honest).splitlines())
    assert [x for x in lines if x.startswith("#")] == ["## agent-eval batch batch-1"]
    runner_line = next(x for x in lines if x.startswith("- runner: "))
    assert runner_line.endswith("; model: none")
    inner = runner_line.removeprefix("- runner: ").removesuffix("; model: none")
    assert not any(c in inner for c in "\r\x0b\x0c\x1b\u2028\u2029\u202e\u2066\u200b\ufeff")
    # Every character that could open inline structure or HTML is escaped.
    bare = inner.replace("\\\\", "")
    for char in "<`*_[]!&|~":
        assert bare.count(char) == bare.count("\\" + char), (char, inner)
