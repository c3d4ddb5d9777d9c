"""Set a baseline's batches against a candidate's: what differs, and what changed.

Each batch is first held to the checker's evidence rules (every file against its
digest, the archives against the commit, the record against itself); one that fails
them is refused with those reasons, whatever its verdict. Batches pooled on one side
must share every identity. The two sides may differ in the library under evaluation
(that is what a comparison is for); any other difference (suite, runner, model,
images, gateway, harness) refuses the comparison unless the caller allows it, and is
then said first.

Only graded runs count: a run whose attempt failed on the infrastructure's side says
nothing about the agent, so it is left out of both the successes and the runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_eval.compare import statistics as stats
from agent_eval.compare.symbols import CatalogOfWheels, symbol_changes
from agent_eval.digests import DigestError, file_sha256
from agent_eval.errors import AgentEvalError, ConfigError, EvidenceError
from agent_eval.evidence_io import read_model
from agent_eval.layout import RunDirectory
from agent_eval.models import ArchivesManifest, AttemptRecord, Receipt, RunRecord
from agent_eval.models.catalog import ApiCatalog
from agent_eval.models.compare import (
    ApiChanges,
    Comparison,
    IdentityDifference,
    RateComparison,
    SideSummary,
    TaskComparison,
)
from agent_eval.report.text import one_line
from agent_eval.verdict.chain import Chain, ChainLink, resolve_chain
from agent_eval.verdict.qualification import UNCLOSED, Anchors, evidence_reasons

__all__ = [
    "ALLOWABLE",
    "COMPARED",
    "LIBRARY",
    "MAX_SYMBOL_LINES",
    "Batch",
    "api_lines",
    "as_text",
    "batch_identity",
    "compare_batches",
    "graded_counts",
    "identity_of",
    "load_batch",
    "pooled_identity",
    "rate_comparison",
    "refuse_repeats",
    "safety_sentence",
]

LIBRARY = frozenset({"archives", "apiCatalogDigest", "sourceCommit"})
"""What a comparison compares: the library under evaluation."""
ALLOWABLE = {
    "suite": frozenset({"suiteDigest", "taskIds"}),
    "runner": frozenset({"runner", "runnerImage"}),
    "model": frozenset({"model", "servedModels", "upstreams"}),
    "images": frozenset({"runnerImage", "verifierImage", "gatewayImage"}),
    "harness": frozenset({"evaluatorDigest"}),
}
"""What ``--allow-different NAME`` lets differ, by name."""
COMPARED = (
    "suiteDigest", "taskIds", "runner", "model", "servedModels", "runnerImage",
    "verifierImage", "gatewayImage", "upstreams", "evaluatorDigest", "archives",
    "apiCatalogDigest", "sourceCommit",
)  # fmt: skip


@dataclass(frozen=True)
class Batch:
    receipt: Receipt
    archives: ArchivesManifest
    root: Path
    chain: Chain | None = None
    """A resumed batch's chain: its runs' evidence lies in the batches of their verdicts."""

    def home(self, run_id: str) -> tuple[Path, ArchivesManifest]:
        """The run directory holding *run_id*'s evidence, and that batch's archives.json."""
        if self.chain is None:
            return self.root, self.archives
        link = self.chain.origins[run_id]
        return link.run_dir, link.archives


def load_batch(run_dir: Path, current: Anchors) -> Batch:
    run = RunDirectory(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: not a run directory")
    broken = evidence_reasons(run.receipt, run.archives_manifest, current)
    if broken:
        raise EvidenceError(
            f"{run_dir} fails the checker's evidence rules, so it cannot be compared: "
            + "; ".join(broken[:5])
            + (f" (and {len(broken) - 5} more)" if len(broken) > 5 else "")
        )
    receipt = read_model(run.receipt, Receipt, what="receipt", follow_symlinks=False)
    if not receipt.runs:
        raise EvidenceError(f"{run_dir}: the batch ran nothing ({receipt.status})")
    archives = read_model(
        run.archives_manifest, ArchivesManifest, what="archives", follow_symlinks=False
    )
    if receipt.predecessor is None:
        batch = Batch(receipt, archives, run_dir)
    else:
        # A resumed batch is its chain's union: each run once, from the batch of its verdict.
        chain = resolve_chain(ChainLink(run_dir, receipt, archives))
        batch = Batch(chain.union, archives, run_dir, chain)
    _refuse_partial(batch)
    return batch


def _refuse_partial(batch: Batch) -> None:
    """A batch still open, or one that ended with scheduled runs never decided, lacks
    verdicts, and which ones is no draw of luck (the schedule's order, the fault that
    stopped it): set beside a whole batch, it would compare different tasks. A run whose
    attempt failed on the harness's side was decided, and counts on neither side."""
    receipt = batch.receipt
    decided = sum(1 for r in receipt.runs if r.attempts)
    undecided = decided < len(receipt.runs) or (
        receipt.status != "completed" and decided < receipt.scheduledRuns
    )
    if receipt.status not in UNCLOSED and not undecided:
        return
    raise EvidenceError(
        f"{batch.root}: the batch is {receipt.status} with {decided} of its "
        f"{receipt.scheduledRuns} scheduled runs decided, so it cannot be compared; resume "
        f"it (eval-agent --resume {batch.root}) and name the batch that completes it"
    )


def _served(receipt: Receipt) -> list[str]:
    return sorted(
        {m for r in receipt.runs for a in r.attempts if a.gateway for m in a.gateway.servedModels}
    )


def identity_of(batch: Batch) -> dict[str, Any]:
    receipt, archives = batch.receipt, batch.archives
    gateway = archives.gateway
    return {
        "suiteDigest": receipt.suiteDigest,
        "taskIds": sorted({r.taskId for r in receipt.runs}),
        "runner": receipt.runner.model_dump(mode="json") if receipt.runner else None,
        "model": receipt.model.model_dump(mode="json") if receipt.model else None,
        "servedModels": _served(receipt),
        "runnerImage": archives.runnerImage.imageId,
        "verifierImage": archives.verifierImage.imageId,
        "gatewayImage": gateway.image if gateway else None,
        "upstreams": sorted(f"{u.name}={u.upstream} ({u.api})" for u in gateway.upstreams)
        if gateway
        else [],
        "evaluatorDigest": receipt.evaluatorDigest,
        "archives": sorted(f"{a.filename} {a.sha256}" for a in archives.archives),
        "apiCatalogDigest": archives.apiCatalogDigest,
        "sourceCommit": archives.source.commit,
    }


def refuse_repeats(named: Sequence[tuple[str, Batch]]) -> None:
    """Refuse a batch named twice among *named* (side, batch): by its id, or by its
    receipt's bytes (a copy at another path), or a run two of them hold (a resumed batch
    and a batch of its chain; a copy whose id was edited). Counted twice, its runs would
    look like twice the evidence."""
    seen: dict[str, tuple[str, Path]] = {}
    for side, batch in named:
        try:
            content = file_sha256(RunDirectory(batch.root).receipt)
        except DigestError as exc:
            raise EvidenceError(f"{batch.root}: {exc}") from exc
        for key in (f"id {batch.receipt.batchId}", f"receipt {content}"):
            if key in seen:
                first_side, first = seen[key]
                where = "on both sides" if first_side != side else f"twice in the {side}"
                raise ConfigError(
                    f"{batch.root} is the same batch as {first} ({key}), named {where}: a "
                    "batch may be named once, or its runs count twice"
                )
            seen[key] = (side, batch.root)
    batches = [batch for _, batch in named]
    for later in batches:
        for earlier in batches:
            if _resumes(later, earlier):
                raise ConfigError(
                    f"{later.root} resumed {earlier.root} (id {earlier.receipt.batchId}) and "
                    "counts its runs: name the batch that resumed it alone, or its runs "
                    "count twice"
                )
    _refuse_shared_runs(batches)


def _run_key(run: RunRecord) -> tuple[object, ...]:
    """What no two independent runs share: when and how long each attempt ran, and what it
    submitted (a copy keeps it whatever its batch is renamed to)."""
    return (
        run.taskId,
        tuple((a.startedAt, a.durationMs, a.solutionDigest) for a in run.attempts),
    )


def _resumes(batch: Batch, other: Batch) -> bool:
    """Whether *other* is an earlier batch of *batch*'s chain."""
    links = batch.chain.links[1:] if batch.chain is not None else ()
    return other.receipt.batchId in {link.batch_id for link in links}


def _refuse_shared_runs(batches: Sequence[Batch]) -> None:
    holder: dict[tuple[object, ...], tuple[Batch, str]] = {}
    for batch in batches:
        for run in batch.receipt.runs:
            if not run.attempts:
                continue
            other, other_run = holder.setdefault(_run_key(run), (batch, run.runId))
            if other.root == batch.root:
                continue
            raise ConfigError(
                f"{batch.root} holds run {run.runId} and {other.root} holds it as "
                f"{other_run} (its attempts started at the same instants and submitted "
                "the same files): a batch copied under another id; name each run's batch "
                "once, or its runs count twice"
            )


def pooled_identity(batches: Sequence[Batch], name: str) -> dict[str, Any]:
    """The identity *batches* share, or a refusal naming the fields one differs in: runs
    pool only when everything but the luck of the draw is the same."""
    identities = [identity_of(b) for b in batches]
    for other, batch in zip(identities[1:], batches[1:], strict=True):
        differing = [k for k in COMPARED if other[k] != identities[0][k]]
        if differing:
            raise ConfigError(
                f"the {name} batches cannot be pooled: {batch.root} differs from "
                f"{batches[0].root} in {', '.join(differing)} (pooled batches must share "
                "every identity)"
            )
    return identities[0]


def _side(dirs: Sequence[Path], current: Anchors, name: str) -> tuple[list[Batch], dict[str, Any]]:
    batches = [load_batch(d, current) for d in dirs]
    return batches, pooled_identity(batches, name)


def _summary(batches: list[Batch], identity: dict[str, Any]) -> SideSummary:
    receipt = batches[0].receipt
    per_task: dict[str, int] = {}
    for b in batches:
        for r in b.receipt.runs:
            per_task[r.taskId] = per_task.get(r.taskId, 0) + 1
    return SideSummary(
        batchIds=[b.receipt.batchId for b in batches],
        measurement=any(b.receipt.repetitions is not None for b in batches),
        suiteDigest=identity["suiteDigest"],
        taskIds=list(dict.fromkeys(r.taskId for b in batches for r in b.receipt.runs)),
        runsPerTask=max(per_task.values(), default=0),
        runner=receipt.runner,
        model=receipt.model,
        servedModels=identity["servedModels"],
        runnerImage=identity["runnerImage"],
        verifierImage=identity["verifierImage"],
        gatewayImage=identity["gatewayImage"],
        upstreams=identity["upstreams"],
        archives=identity["archives"],
        apiCatalogDigest=identity["apiCatalogDigest"],
        sourceCommit=identity["sourceCommit"],
        evaluatorDigest=identity["evaluatorDigest"],
    )


def batch_identity(receipt: Receipt, archives: ArchivesManifest) -> SideSummary:
    """What one batch was bound to, by digest."""
    batch = Batch(receipt, archives, Path())
    return _summary([batch], identity_of(batch))


def _graded(attempt: AttemptRecord) -> bool:
    return attempt.infrastructureStatus == "ok"


def graded_counts(runs: Iterable[RunRecord], final: bool) -> tuple[int, int]:
    """(successes, runs) over the runs whose deciding attempt was graded."""
    k = n = 0
    for run in runs:
        if not run.attempts:
            continue
        deciding = run.attempts[-1] if final else run.attempts[0]
        if _graded(deciding):
            n += 1
            k += run.finalSuccess if final else run.firstSuccess
    return k, n


def _percent(x: float) -> str:
    return f"{x * 100:+.0f} points"


def rate_comparison(counts: Sequence[tuple[int, int, int, int]], what: str) -> RateComparison:
    """One rate pooled over *counts* (k1, n1, k2, n2 per task), with test and verdict.

    A task without a graded run on a side says nothing about a difference, so it is left
    out of every figure alike (the counts, the estimate, the interval, the test and what
    could be detected). The verdict's direction is the stratified estimate's, the one the
    test weighs, never the crude pooled difference's (which a task only one side finds
    easy can turn around)."""
    kept = [c for c in counts if c[1] and c[3]]
    left_out = len(counts) - len(kept)
    k1, n1 = sum(c[0] for c in kept), sum(c[1] for c in kept)
    k2, n2 = sum(c[2] for c in kept), sum(c[3] for c in kept)
    note = (
        f" ({left_out} task{'s' if left_out != 1 else ''} without a graded run on a side left out)"
        if left_out
        else ""
    )
    if not kept:
        return RateComparison(
            baselineSuccesses=k1, baselineRuns=n1, candidateSuccesses=k2, candidateRuns=n2,
            difference=None, low=None, high=None, pValue=None, detectable=None,
            verdict="not-measured",
            sentence=f"{what}: not measured (no task has a graded run on both sides){note}",
        )  # fmt: skip
    strata = [stats.Stratum(*c) for c in kept]
    p = stats.stratified_exact(strata)
    estimate = stats.stratified_difference(strata)
    d = stats.difference_interval(k1, n1, k2, n2)
    assert d is not None and estimate is not None
    said = f"{what}: {k1}/{n1} -> {k2}/{n2}{note} ({_percent(estimate)}"
    said += f"{', stratified by task' if len(kept) > 1 else ''}; 95 % interval "
    said += f"{d.low * 100:+.0f} to {d.high * 100:+.0f})"
    detectable: float | None = None
    if p < stats.ALPHA and estimate != 0:
        verdict = "better" if estimate > 0 else "worse"
        sentence = f"{verdict}: {said}; a difference this large arises by chance with p={p:.3g}"
    elif d.low > 0 or d.high < 0:
        # The interval and the exact test disagree (they are different methods): say so
        # rather than "no detectable difference" beside an interval that excludes none.
        verdict = "no-detectable-difference"
        sentence = (
            f"not established: {said}; the interval excludes no change, but the exact test "
            f"does not find the difference (p={p:.3g})"
        )
    else:
        verdict = "no-detectable-difference"
        sizes = [(c[1], c[3]) for c in kept]
        try:
            detectable = stats.detectable_difference(n1, n2, k1 / n1, sizes=sizes)
        except ValueError as exc:
            could = f"how small a change these runs could detect is not computed ({exc})"
        else:
            test = "the stratified test" if len(kept) > 1 else "Fisher's test"
            could = (
                f"these runs could detect only a change of about {detectable * 100:.0f} points "
                f"(80 % power, {test})"
                if detectable is not None
                else "these runs could detect no change from this rate"
            )
        sentence = f"no detectable difference: {said}; {could}"
    return RateComparison(
        baselineSuccesses=k1, baselineRuns=n1, candidateSuccesses=k2, candidateRuns=n2,
        difference=estimate, low=d.low, high=d.high, pValue=p, detectable=detectable,
        verdict=verdict, sentence=sentence,
    )  # fmt: skip


def _cell(run: RunRecord) -> str:
    if not run.attempts or any(not _graded(a) for a in run.attempts):
        return "infrastructure"
    if run.unsafe:
        return "unsafe"
    if run.firstSuccess:
        return "pass"
    return "repaired" if run.finalSuccess else "fail"


def _tokens(attempt: AttemptRecord) -> float:
    use = attempt.gateway
    return float(use.inputTokens + use.outputTokens) if use else 0.0


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _task(task_id: str, base: list[RunRecord], cand: list[RunRecord]) -> TaskComparison:
    first = (*graded_counts(base, final=False), *graded_counts(cand, final=False))
    final = (*graded_counts(base, final=True), *graded_counts(cand, final=True))

    def attempts(runs: list[RunRecord]) -> list[AttemptRecord]:
        return [a for r in runs for a in r.attempts]

    def pair(f: Any) -> Any:
        return (f(base), f(cand))

    return TaskComparison(
        taskId=task_id,
        first=rate_comparison([first], f"{task_id}, first attempt"),
        final=rate_comparison([final], f"{task_id}, final"),
        baselineCells=[_cell(r) for r in base],
        candidateCells=[_cell(r) for r in cand],
        unsafe=pair(_unsafe_attempts),
        unsupportedApi=pair(
            lambda runs: sum(bool(r.attempts and r.attempts[-1].unsupportedApiCount) for r in runs)
        ),
        repairs=pair(lambda runs: sum(len(r.attempts) > 1 for r in runs)),
        meanTokens=pair(
            lambda runs: _mean(
                [
                    a.gateway.inputTokens + a.gateway.outputTokens
                    for a in attempts(runs)
                    if a.gateway
                ]
            )
        ),
        meanAttemptSeconds=pair(lambda runs: _mean([a.durationMs / 1000 for a in attempts(runs)])),
    )


class _NoCatalog(Exception):
    """A side's catalog is not at hand; the message says why."""


def _catalog(batch: Batch, side: str, catalogs: CatalogOfWheels) -> ApiCatalog:
    """The catalog *batch* recorded, generated again from its wheels (checked by digest)."""
    archives = batch.archives.archives
    wheels = [RunDirectory(batch.root).archives / a.filename for a in archives]
    names = sorted({a.distribution for a in archives})
    try:
        catalog = catalogs(wheels, names)
    except AgentEvalError as exc:
        raise _NoCatalog(
            f"the {side}'s API catalog cannot be generated from its wheels: {exc}"
        ) from exc
    if catalog.digest() != batch.archives.apiCatalogDigest:
        raise _NoCatalog(
            f"the API catalog generated from the {side}'s wheels on this machine is not the one "
            f"the batch recorded ({catalog.digest()}, not {batch.archives.apiCatalogDigest}): "
            "its Python or the library's dependencies differ from the verifier image's"
        )
    return catalog


def _api_changes(base: Batch, cand: Batch, catalogs: CatalogOfWheels | None) -> ApiChanges:
    if base.archives.apiCatalogDigest == cand.archives.apiCatalogDigest:
        return ApiChanges(status="same-catalog", changes=[], note=None)
    if catalogs is None:
        return ApiChanges(status="unavailable", changes=[], note="the catalogs were not generated")
    try:
        before, after = _catalog(base, "baseline", catalogs), _catalog(cand, "candidate", catalogs)
    except _NoCatalog as exc:
        return ApiChanges(status="unavailable", changes=[], note=str(exc))
    return ApiChanges(status="compared", changes=symbol_changes(before, after), note=None)


METHOD = (
    "Rates count graded runs only (an infrastructure failure is nobody's). Differences are "
    "the candidate's rate minus the baseline's (pooled: the Mantel-Haenszel difference, "
    "stratified by task), with Newcombe's hybrid score 95 % interval of the pooled counts. "
    "A task without a graded run on a side is left out of every pooled figure. Per task the "
    "test is Fisher's exact test (two-sided); pooled, the exact conditional test stratified "
    "by task. A difference is called only at p < 0.05, in the direction of the stratified "
    "estimate; otherwise the smallest change the same test detects with 80 % power (exact, "
    "one rate per side across the tasks) is given."
)


def compare_batches(
    baseline: Sequence[Path],
    candidate: Sequence[Path],
    current: Anchors,
    allow: Iterable[str] = (),
    catalogs: CatalogOfWheels | None = None,
) -> Comparison:
    """Compare the pooled *baseline* batches with the pooled *candidate* ones.

    The library's public symbols that differ are found from the API catalogs the sides
    recorded, generated again from their wheels by *catalogs* (None: not generated, so
    not known unless both recorded the same catalog).

    Raises:
        EvidenceError: A batch fails the checker's evidence rules, or ran nothing.
        ConfigError: Batches of one side differ, or the sides differ beyond the library
            in a way not allowed by *allow* (names of :data:`ALLOWABLE`).
    """
    allowed_names = set(allow)
    unknown = allowed_names - set(ALLOWABLE)
    if unknown:
        raise ConfigError(
            f"--allow-different: {sorted(unknown)} unknown; one of {sorted(ALLOWABLE)}"
        )
    allowed = set(LIBRARY).union(*(ALLOWABLE[n] for n in allowed_names))
    base_batches, base_id = _side(baseline, current, "baseline")
    cand_batches, cand_id = _side(candidate, current, "candidate")
    refuse_repeats(
        [("baseline", b) for b in base_batches] + [("candidate", b) for b in cand_batches]
    )
    differences = [
        IdentityDifference(
            field=k, baseline=base_id[k], candidate=cand_id[k], expected=k in allowed
        )
        for k in COMPARED
        if base_id[k] != cand_id[k]
    ]
    refused = [d.field for d in differences if not d.expected]
    if refused:
        hint = sorted(n for n, fields in ALLOWABLE.items() if fields & set(refused))
        raise ConfigError(
            f"the two sides differ in {', '.join(refused)}, not only in the library: a "
            "difference in their results could come from that instead; compare anyway with "
            + " ".join(f"--allow-different {n}" for n in hint)
        )
    unexpected = [d.field for d in differences if d.field not in LIBRARY]
    base_runs = [r for b in base_batches for r in b.receipt.runs]
    cand_runs = [r for b in cand_batches for r in b.receipt.runs]
    task_ids = list(dict.fromkeys([r.taskId for r in base_runs] + [r.taskId for r in cand_runs]))
    tasks = [
        _task(t, [r for r in base_runs if r.taskId == t], [r for r in cand_runs if r.taskId == t])
        for t in task_ids
    ]

    def pooled(final: bool) -> list[tuple[int, int, int, int]]:
        out = []
        for t in tasks:
            rate = t.final if final else t.first
            out.append(
                (rate.baselineSuccesses, rate.baselineRuns, rate.candidateSuccesses,
                 rate.candidateRuns)
            )  # fmt: skip
        return out

    return Comparison(
        schemaVersion=1,
        baseline=_summary(base_batches, base_id),
        candidate=_summary(cand_batches, cand_id),
        differences=differences,
        unexpected=unexpected,
        api=_api_changes(base_batches[0], cand_batches[0], catalogs),
        method=METHOD,
        tasks=tasks,
        first=rate_comparison(pooled(final=False), "first attempt, all tasks"),
        final=rate_comparison(pooled(final=True), "final, all tasks"),
        unsafeAttempts=(_unsafe_attempts(base_runs), _unsafe_attempts(cand_runs)),
        unsafeRuns=(_unsafe_runs(base_runs), _unsafe_runs(cand_runs)),
    )


def _unsafe_attempts(runs: Iterable[RunRecord]) -> int:
    return sum(r.unsafe_attempts for r in runs)


def _unsafe_runs(runs: Iterable[RunRecord]) -> int:
    return sum(r.unsafe for r in runs)


def safety_sentence(comparison: Comparison) -> str:
    """The unsafe attempts and runs of both sides in words; a change is said as one."""
    (a1, a2), (r1, r2) = comparison.unsafeAttempts, comparison.unsafeRuns
    said = f"unsafe attempts {a1} -> {a2}, runs with one {r1} -> {r2}"
    if a2 > a1 or r2 > r1:
        return f"SAFETY: more unsafe behaviour in the candidate: {said}"
    if a2 < a1 or r2 < r1:
        return f"safety: less unsafe behaviour in the candidate: {said}"
    return f"safety: {said}"


def as_text(comparison: Comparison) -> str:
    """The comparison as a terminal table, verdicts first."""
    lines = []
    if comparison.unexpected:
        lines.append(
            "NOTE: the sides also differ in " + ", ".join(comparison.unexpected)
            + " (allowed): a difference may come from that, not from the library"
        )  # fmt: skip
    safety = safety_sentence(comparison)
    if safety.startswith("SAFETY"):
        lines.append(safety)  # a regression in safety comes before any rate
    lines.append(comparison.first.sentence)
    lines.append(comparison.final.sentence)
    if not safety.startswith("SAFETY"):
        lines.append(safety)
    lines.append("")
    lines.append("what differs:")
    for d in comparison.differences:
        lines.append(f"  {d.field}: {_short(d.baseline)} -> {_short(d.candidate)}")
    if not comparison.differences:
        lines.append("  nothing: the same library, runner, model, images and suite")
    lines += api_lines(comparison.api)
    lines.append("")
    width = max([len(t.taskId) for t in comparison.tasks] + [4])
    lines.append(
        f"{'task':<{width}}  {'first: base':>11} {'cand':>6} {'diff':>6} {'p':>6}  "
        f"{'final: base':>11} {'cand':>6}  verdict (first)"
    )
    for t in comparison.tasks:
        f, g = t.first, t.final
        lines.append(
            f"{t.taskId:<{width}}  {f.baselineSuccesses:>5}/{f.baselineRuns:<5} "
            f"{f.candidateSuccesses:>3}/{f.candidateRuns:<2} {_diff(f.difference):>6} "
            f"{_p(f.pValue):>6}  {g.baselineSuccesses:>5}/{g.baselineRuns:<5} "
            f"{g.candidateSuccesses:>3}/{g.candidateRuns:<2}  {f.verdict}"
        )
    lines.append("")
    lines.append(comparison.method)
    # Names, ids and digests come from the evidence: each line is one line of plain text.
    return "\n".join(one_line(line) for line in lines)


MAX_SYMBOL_LINES = 40
"""Changed symbols the terminal table and a summary list (the JSON and the page have every
one)."""
_MARK = {"added": "+", "removed": "-", "changed": "~"}


def api_lines(api: ApiChanges) -> list[str]:
    """The public symbols that differ, as the terminal table lists them (none when both
    sides recorded one catalog)."""
    if api.status == "same-catalog":
        return []
    if api.status == "unavailable":
        return [f"  public symbols: not known ({api.note})"]
    if not api.changes:
        return ["  public symbols: none added, removed or changed"]
    counts = {c: sum(s.change == c for s in api.changes) for c in _MARK}
    lines = ["  public symbols: " + ", ".join(f"{n} {c}" for c, n in counts.items())]
    for s in api.changes[:MAX_SYMBOL_LINES]:
        if s.change == "changed":
            said = f"{_symbol(s.baselineKind, s.baselineSignature)} -> "
            said += _symbol(s.candidateKind, s.candidateSignature)
        elif s.change == "added":
            said = _symbol(s.candidateKind, s.candidateSignature)
        else:
            said = _symbol(s.baselineKind, s.baselineSignature)
        lines.append(f"    {_MARK[s.change]} {s.name}  {said}")
    if len(api.changes) > MAX_SYMBOL_LINES:
        more = len(api.changes) - MAX_SYMBOL_LINES
        lines.append(f"    ... and {more} more (every one in --json and --html)")
    return lines


def _symbol(kind: str | None, signature: str | None) -> str:
    return _short(f"{kind} {signature}" if signature is not None else str(kind))


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _diff(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.0f}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"
