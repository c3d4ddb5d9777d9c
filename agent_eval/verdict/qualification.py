"""Qualification: whether a saved batch is evidence of real agent capability.

Every rule is checked and every failure is reported (one reason each, naming
the rule and the run/attempt); nothing short-circuits except evidence that
cannot be read at all. Digests are recomputed from the files on disk. This
module never writes.

A run directory can be edited by whoever holds it, so no qualifying fact is
taken from what it says about itself: each is held against an anchor outside
it (:class:`Anchors`). Self-test is decided here from the runner identity
and the recorded network, never read from the receipt's flag; the candidate
archives must equal wheels rebuilt from the recorded git commit; the suite
and harness must equal the checkout's.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tempfile
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from agent_eval.digests import (
    DigestError,
    file_sha256,
    regular_files,
    sha256_bytes,
    solution_digest,
    solution_files,
)
from agent_eval.errors import AgentEvalError, EvidenceError
from agent_eval.evidence_io import MAX_EVIDENCE_BYTES, read_bounded, read_model
from agent_eval.gateway.host import MAX_RECORD_BYTES, parse_records
from agent_eval.layout import ANALYSIS_FILE, SOLUTION_DIR, RunDirectory, attempt_folder
from agent_eval.models import (
    Analysis,
    ArchiveEntry,
    ArchivesManifest,
    AttemptRecord,
    ConsumerLock,
    GatewayRecord,
    ImageRecord,
    QualificationResult,
    Receipt,
    RegistryEntry,
    SuiteSpec,
)
from agent_eval.packing import BuildCache, rebuild_archives
from agent_eval.project import Project, evaluator_digest
from agent_eval.reference import self_test_reasons
from agent_eval.suite.tasks import read_suite_spec, task_titles
from agent_eval.verdict.chain import Chain, ChainLink, resolve_chain
from agent_eval.verdict.registry import (
    RegistryAt,
    RegistryChanged,
    commit_time,
    entry_differences,
    is_ancestor,
    parse_registry,
    registry_at_commit,
    registry_changed,
)

__all__ = [
    "EVIDENCE_RULES",
    "Anchors",
    "Decided",
    "current_anchors",
    "decide_files",
    "evidence_reasons",
    "gateway_records",
    "infrastructure_note",
    "qualify",
    "qualify_files",
    "self_test",
]


Rebuild = Callable[[str], list[ArchiveEntry]]
"""Rebuilds the candidate wheels from a commit (raises AgentEvalError when it cannot)."""


@dataclass(frozen=True)
class Anchors:
    """What a batch is held against, all from outside its run directory."""

    suite: str | None
    """The suite digest of the checkout now (stale evidence fails); None: not computable."""
    evaluator: str | None
    """The digest of the harness running the check."""
    rebuild: Rebuild | None
    """Rebuilds the archives from the recorded commit; None when no repository is at hand."""
    problems: tuple[str, ...] = ()
    """Why an anchor could not be computed (each becomes part of a reason)."""
    registry_at: RegistryAt | None = None
    """The reviewed-runner registry as committed at a commit; None: no repository at hand."""
    registry_name: str = "reviewed-runners.toml"
    """Where the registry is in the repository, for the reasons."""
    committed_at: Callable[[str], datetime | None] | None = None
    """When a commit was committed, by the repository's history; None: no repository."""
    registry_changed: RegistryChanged | None = None
    """The registry's last change in a commit's history (for the report); None: no repository."""
    is_ancestor: Callable[[str, str], bool | None] | None = None
    """Whether a commit is in another's history (None: git cannot tell); None: no repository."""
    titles: Mapping[str, str] = field(default_factory=dict)
    """Each task's title in the checkout (for the report; empty: none at hand)."""
    spec: SuiteSpec | None = None
    """The suite the checkout declares (its ids, schedule and thresholds; covered by the suite
    digest); None: it could not be read (``problems`` says why)."""
    resolve_image: Callable[[str], str] | None = None
    """The image id a pinned reference names on this machine's engine (raises
    :class:`AgentEvalError` when it cannot say); None: no engine is asked."""


def current_anchors(
    project: Project | None, problem: str | None = None, *, cache: BuildCache | None = None
) -> Anchors:
    """The anchors of *project*'s checkout: its suite, this harness, its git history.

    Args:
        project: The checkout the batch must match; None when none was found.
        problem: Why no project was found, if so.
        cache: The wheelhouse and build environments the rebuild uses (default: the
            user's); both are held to the commit's build lock on every use. Its wheel
            cache is never used: a batch's packing writes it, so the wheels a release
            gate compares with are always built here.
    """
    problems = [problem] if problem else []
    suite: str | None = None
    spec: SuiteSpec | None = None
    titles: dict[str, str] = {}
    rebuild: Rebuild | None = None
    if project is not None:
        try:
            suite = project.suite_digest()
            spec = read_suite_spec(project.tasks)
            titles = task_titles(project.tasks, spec)
        except AgentEvalError as exc:
            problems.append(str(exc))
        packages = project.packages.relative_to(project.root).as_posix()
        own = dataclasses.replace(cache or BuildCache.default(), built=None)

        @functools.cache
        def rebuilt_at(commit: str) -> tuple[ArchiveEntry, ...]:
            with tempfile.TemporaryDirectory(prefix="agent-eval-rebuild-") as work:
                return tuple(
                    rebuild_archives(project.root, packages, commit, Path(work), cache=own)
                )

        def rebuild_here(commit: str) -> list[ArchiveEntry]:
            # A commit's wheels are the same every time: batches of one commit (pooled in
            # a comparison, or checked again for a summary) rebuild them once.
            return list(rebuilt_at(commit))

        rebuild = rebuild_here
        name = project.registry.relative_to(project.root).as_posix()
        return Anchors(
            suite,
            evaluator_digest(),
            rebuild,
            tuple(problems),
            registry_at=registry_at_commit(project.root, name),
            registry_name=name,
            committed_at=commit_time(project.root),
            registry_changed=registry_changed(project.root, name),
            is_ancestor=is_ancestor(project.root),
            spec=spec,
            titles=titles,
        )
    return Anchors(suite, evaluator_digest(), rebuild, tuple(problems))


@dataclass(frozen=True)
class Decided:
    """A decision, and the runs it was taken on."""

    result: QualificationResult
    counted: Receipt | None
    """The receipt as decided on (a resumed batch's: its chain's union); None when the
    receipt cannot be read."""


def qualify_files(receipt_path: Path, archives_path: Path, current: Anchors) -> QualificationResult:
    """Load the receipt and archives.json and check every rule."""
    return decide_files(receipt_path, archives_path, current).result


def decide_files(receipt_path: Path, archives_path: Path, current: Anchors) -> Decided:
    """:func:`qualify_files`, with the receipt the decision counted: what a JUnit file, a
    listing or the words of the decision show, with the chain resolved once."""
    reasons: list[str] = []
    receipt = archives = None
    try:
        receipt = read_model(receipt_path, Receipt, what="receipt", follow_symlinks=False)
    except EvidenceError as exc:
        reasons.append(f"receipt-readable: {exc}")
    try:
        archives = read_model(
            archives_path, ArchivesManifest, what="archives", follow_symlinks=False
        )
    except EvidenceError as exc:
        reasons.append(f"archives-readable: {exc}")
    if receipt is None or archives is None:
        return Decided(QualificationResult(qualified=False, reasons=reasons), receipt)
    notes = [
        *cache_notes(receipt_path.parent),
        *in_flight_notes(receipt, receipt_path.parent),
    ] or None
    if receipt.predecessor is None:
        reasons.extend(qualify(receipt, receipt_path.parent, archives, archives_path, current))
        return Decided(
            QualificationResult(qualified=not reasons, reasons=reasons, notes=notes), receipt
        )
    chain = resolve_chain(ChainLink(receipt_path.parent, receipt, archives))
    reasons += chain.problems
    reasons += qualify(chain.union, receipt_path.parent, archives, archives_path, current, chain)
    result = QualificationResult(
        qualified=not reasons, reasons=reasons, chain=chain.summary(), notes=notes
    )
    return Decided(result, chain.union)


def cache_notes(receipt_dir: Path) -> list[str]:
    """What the evidence alone cannot rule out: a consumer taken from the consumer cache.

    An entry and its record sit in one directory, so whoever can write the
    cache can change the consumer (and its kept mypy caches) a batch verified
    against, and every digest here would still agree; only ``--reverify``,
    which installs a consumer of its own, tells.
    """
    try:
        path = RunDirectory(receipt_dir).consumer_lock
        lock = read_model(path, ConsumerLock, what="consumer lock")
    except EvidenceError:
        return []  # the consumer-lock rule says why
    if lock.cacheEntry is None:
        return []
    return [
        f"consumer-cache: the batch verified against the consumer-cache entry "
        f"{lock.cacheEntry} (and its kept mypy caches); a writer of the cache could have "
        "changed them unseen here: --reverify installs its own and compares"
    ]


UNCLOSED: frozenset[str] = frozenset({"running", "abandoned"})
"""Statuses of a receipt its batch never closed: its last write may have found runs in flight."""


def in_flight_runs(receipt: Receipt, receipt_dir: Path) -> frozenset[str]:
    """Runs of a batch that never closed its receipt with a directory and no recorded attempt.

    A run is recorded only when it ends, so a batch killed (or being read) mid-run has
    that run's files in ``runs/`` and nothing in its receipt about them. They are no part
    of any decision (an unclosed batch cannot qualify; a resumed one runs them again), and
    must not read as files added to the batch. A closed batch accounts for every run it
    was in, so it gets no such allowance."""
    if receipt.status not in UNCLOSED:
        return frozenset()
    return _run_dirs_besides(receipt_dir, {r.runId for r in receipt.runs if r.attempts})


def _run_dirs_besides(run_dir: Path, kept: Collection[str]) -> frozenset[str]:
    """The run directories in *run_dir*'s ``runs/`` not named in *kept* (a link among them,
    or in its place, is named by :func:`_unaccounted`, which reads none)."""
    runs = RunDirectory(run_dir).runs
    if runs.is_symlink() or not runs.is_dir():
        return frozenset()
    return frozenset(p.name for p in runs.iterdir() if p.is_dir() and p.name not in kept)


def in_flight_notes(receipt: Receipt, receipt_dir: Path) -> list[str]:
    left = sorted(in_flight_runs(receipt, receipt_dir))
    if not left:
        return []
    return [
        f"in-flight: {', '.join(left)} had begun and had no record when the receipt was "
        f"last written (status {receipt.status}); what their directories hold is no part "
        "of any decision"
    ]


EVIDENCE_RULES = frozenset(
    {
        "receipt-readable", "archives-readable", "archive-integrity", "archives-digest",
        "archives-rebuild", "consumer-lock", "solution-integrity", "analysis-integrity",
        "log-integrity", "evidence-integrity", "self-test-flag", "runner-identity",
        "model-identity", "runner-image", "verifier-image", "suite-digest", "evaluator-digest",
        "chain", "node-binding", "consumer-integrity",
    }
)  # fmt: skip
"""The rules about whether a batch's evidence is what it says (every file against its
digest, the receipt against archives.json, the archives against the commit): a batch
failing one is no evidence of anything. The others decide whether it qualifies (self-test,
the thresholds, the schedule, safety, staleness against the checkout now)."""


def evidence_reasons(receipt_path: Path, archives_path: Path, current: Anchors) -> list[str]:
    """The reasons of :data:`EVIDENCE_RULES` a batch fails, by the checker's own rules.

    The suite and harness are held to what the receipt recorded rather than to the
    checkout now, so evidence made under another suite or harness is not called broken
    for that alone (whether it is stale is a qualifying question), while a receipt that
    disagrees with its archives.json still is.
    """
    try:
        receipt = read_model(receipt_path, Receipt, what="receipt", follow_symlinks=False)
    except EvidenceError as exc:
        return [f"receipt-readable: {exc}"]
    anchored = dataclasses.replace(
        current,
        suite=receipt.suiteDigest or current.suite,
        evaluator=receipt.evaluatorDigest or current.evaluator,
    )
    decision = qualify_files(receipt_path, archives_path, anchored)
    return [r for r in decision.reasons if r.split(":", 1)[0] in EVIDENCE_RULES]


def qualify(
    receipt: Receipt,
    receipt_dir: Path,
    archives: ArchivesManifest,
    archives_path: Path,
    current: Anchors,
    chain: Chain | None = None,
) -> list[str]:
    """Every failed rule as a reason; an empty list means qualified.

    The schedule and thresholds are the checkout's suite declaration (``current.spec``),
    never the receipt's: the suite digest binds the two. With *chain* (a resumed batch's),
    *receipt* is the chain's union: each predecessor's bindings, archives and evidence
    files are checked as its own batch's, each reason naming it.
    """
    reasons: list[str] = []
    suite = current.spec
    if suite is None:
        reasons.append(
            "suite: the checkout's suite declaration could not be read, so the schedule "
            "and thresholds are unknown"
        )
    else:
        reasons += _batch_rules(receipt, suite)
        if receipt.suite is not None and receipt.suite != suite:
            reasons.append(
                "suite: the receipt's suite declaration differs from the checkout's "
                f"({list(receipt.suite.taskIds)} x {receipt.suite.repetitions}, thresholds "
                f"{receipt.suite.minFirstSuccesses}/{receipt.suite.requiredFinalSuccesses})"
            )
    origins = {r: link.run_dir for r, link in chain.origins.items()} if chain else {}
    reasons += _self_test_rules(receipt, archives, receipt_dir, origins)
    if suite is not None:
        reasons += _success_rules(receipt, suite)
    reasons += _safety_and_review_rules(receipt)
    reasons += _binding_rules(receipt, receipt_dir, archives, archives_path, current)
    reasons += _archive_rules(archives, archives_path)
    reasons += _source_rules(archives, current)
    if not self_test(receipt, archives):
        # A self-test batch is rejected as such; which review it matches is moot.
        reasons += _registry_rules(archives, current)
    if chain is None:
        reasons += _evidence_file_rules(receipt, receipt_dir, in_flight_runs(receipt, receipt_dir))
        return reasons
    for link in chain.links:
        counted = {r for r, origin in chain.origins.items() if origin is link}
        superseded = frozenset(r.runId for r in link.receipt.runs) - counted
        if link.run_dir == receipt_dir:
            superseded = in_flight_runs(link.receipt, receipt_dir)
        else:
            # A run in flight when the batch died has a directory but no record.
            superseded |= _run_dirs_besides(link.run_dir, counted)
        own = _evidence_file_rules(link.receipt, link.run_dir, superseded)
        if link.run_dir != receipt_dir:
            own += _binding_rules(
                link.receipt, link.run_dir, link.archives,
                RunDirectory(link.run_dir).archives_manifest, current,
            )  # fmt: skip
            own += _archive_rules(link.archives, RunDirectory(link.run_dir).archives_manifest)
            own = [_in_predecessor(reason, link.batch_id) for reason in own]
        reasons += own
    return reasons


def _in_predecessor(reason: str, batch_id: str) -> str:
    rule, _, text = reason.partition(": ")
    return f"{rule}: in predecessor {batch_id}: {text}"


def self_test(receipt: Receipt, archives: ArchivesManifest) -> list[str]:
    """Why the batch proves the harness rather than an agent; empty when nothing says so.

    Decided from what the checker can check, never from the receipt's flag: a
    reserved reference-runner identity (in the receipt or in archives.json),
    a runner that reached no gateway, whose model could only be a scripted one
    inside its own container, or a gateway allowed private upstreams.
    """
    names = [archives.runner.name] + ([receipt.runner.name] if receipt.runner else [])
    return self_test_reasons(names, archives.gateway)


def gateway_records(run_dir: Path, run_id: str, attempt: AttemptRecord) -> list[GatewayRecord]:
    """The records of an attempt's gateway.jsonl, read within bounds and held to the digest
    its record names (none: the attempt reached no gateway).

    Raises:
        EvidenceError: The file is missing, too large or not the one the record names.
        InfrastructureError: A line is not a gateway record.
    """
    if attempt.gateway is None:
        return []
    path = RunDirectory(run_dir).attempt(run_id, attempt.attempt).gateway_record
    data = read_bounded(path, what="gateway record", max_bytes=MAX_RECORD_BYTES)
    if sha256_bytes(data) != attempt.gateway.recordDigest:
        raise EvidenceError("its gateway.jsonl does not match its recorded digest")
    return parse_records(data)


def unanswered_attempts(
    receipt: Receipt, receipt_dir: Path, origins: Mapping[str, Path] | None = None
) -> list[str]:
    """Attempts that ran without a request the provider answered, by the gateway's own record.

    An attempt whose runner ran (anything but an infrastructure failure before
    it) must have a gateway.jsonl matching the digest in the receipt, holding at
    least one request the upstream answered with a success: an answer that came
    from anywhere else came from no model the gateway saw. *origins* names the run
    directory of each run from another batch of a chain.
    """
    missing: list[str] = []
    for run in receipt.runs:
        for attempt in run.attempts:
            where = f"{run.runId} attempt {attempt.attempt}"
            if attempt.gateway is None:
                if attempt.infrastructureStatus != "failed":
                    missing.append(f"{where} has no gateway record")
                continue
            run_dir = (origins or {}).get(run.runId, receipt_dir)
            try:
                records = gateway_records(run_dir, run.runId, attempt)
            except AgentEvalError as exc:
                missing.append(f"{where}: {exc}")
                continue
            if (
                not any(
                    r.failure is None and r.status is not None and 200 <= r.status < 300
                    for r in records
                )
                and attempt.infrastructureStatus != "failed"
            ):
                missing.append(f"{where} made no request the provider answered")
    return missing


def _self_test_rules(
    receipt: Receipt, archives: ArchivesManifest, receipt_dir: Path, origins: Mapping[str, Path]
) -> list[str]:
    why = self_test(receipt, archives)
    reasons = [f"not-self-test: {'; '.join(why)}; it can never qualify"] if why else []
    if not why:
        unanswered = unanswered_attempts(receipt, receipt_dir, origins)
        if unanswered:
            reasons.append(
                f"not-self-test: {len(unanswered)} attempt(s) show no model behind the gateway "
                f"({'; '.join(unanswered[:3])}); a model that answered from elsewhere is a "
                "scripted one, and the batch can never qualify"
            )
    if receipt.selfTest != bool(why):
        reasons.append(
            f"self-test-flag: the receipt says selfTest={str(receipt.selfTest).lower()}, but the "
            f"evidence says {'self-test' if why else 'not self-test'}; the flag was edited or "
            "written by another harness"
        )
    return reasons


def _describe(archives: ArchivesManifest) -> str:
    gateway = archives.gateway
    upstreams = ", ".join(
        f"{u.name}={u.upstream} serving {'/'.join(u.servedModels)}"
        for u in (gateway.upstreams if gateway else [])
    )
    return (
        f"runner {archives.runner.name} {archives.runner.version}, model {archives.model.id} "
        f"{json.dumps(archives.model.settings, sort_keys=True)}, runner image "
        f"{archives.runnerImage.reference}, verifier image {archives.verifierImage.reference}, "
        f"gateway image {gateway.image if gateway else 'none'}, upstreams {upstreams or 'none'}"
    )


def _registry_rules(archives: ArchivesManifest, current: Anchors) -> list[str]:
    name, commit = current.registry_name, archives.source.commit
    if current.registry_at is None:
        return [f"registry: no repository is at hand to read {name} from"]
    if commit is None:
        return [f"registry: the batch has no source commit to read {name} at"]
    data = current.registry_at(commit)
    if data is None:
        return [
            f"registry: {name} is not in commit {commit[:12]}: no runner configuration was "
            "reviewed; add one with `agent-eval runners review` and commit it"
        ]
    reasons = []
    digest = sha256_bytes(data)
    if archives.registryDigest != digest:
        reasons.append(
            f"registry: the registry the batch ran with ({archives.registryDigest or 'none'}) "
            f"is not {name} as committed at {commit[:12]} ({digest}): it was changed after "
            "the batch or not committed"
        )
    try:
        registry = parse_registry(data, f"{name} at {commit[:12]}")
    except EvidenceError as exc:
        return [*reasons, f"registry: {exc}"]
    matching = [entry for entry in registry.runner if not entry_differences(entry, archives)]
    if matching:
        ordered = [_review_order(entry, commit, current) for entry in matching]
        if any(why is None for why in ordered):
            return reasons
        return [*reasons, *(f"registry: {why}" for why in ordered if why is not None)]
    closest = min(registry.runner, key=lambda e: len(entry_differences(e, archives)), default=None)
    why = (
        f"; the closest entry (reviewed by {closest.reviewer}) differs in "
        + ", ".join(entry_differences(closest, archives))
        if closest is not None
        else f"; {name} has no entry"
    )
    return [*reasons, f"registry: no reviewed entry matches {_describe(archives)}{why}"]


def _review_order(entry: RegistryEntry, commit: str, current: Anchors) -> str | None:
    """Why a matching entry does not count for a batch packed from *commit* (None: it does).

    The review must be in the batch commit's history: the graph, not the committer dates,
    which whoever commits sets at will. An entry added after the batch records a commit
    the batch's history does not hold, unless it claims an older one, which a reviewer
    sees in the registry's own history.
    """
    who = f"the matching entry reviewed by {entry.reviewer}"
    if entry.sourceCommit is None:
        return (
            f"{who} records no sourceCommit, so it cannot be placed in the batch's history; "
            "review the runner again with `agent-eval runners review` and commit the registry"
        )
    if current.is_ancestor is None:
        return f"{who}: no repository is at hand to read the history of {commit[:12]}"
    found = current.is_ancestor(entry.sourceCommit, commit)
    if found is None:
        return (
            f"{who} was reviewed at {entry.sourceCommit[:12]}, which this repository cannot "
            f"place relative to the source commit {commit[:12]}"
        )
    if not found:
        return (
            f"{who} was reviewed at {entry.sourceCommit[:12]}, which is not in the history "
            f"of the batch's source commit {commit[:12]}: a review made after the batch "
            "counts for no batch before it"
        )
    return None


def _source_rules(archives: ArchivesManifest, current: Anchors) -> list[str]:
    source = archives.source
    if source.commit is None:
        return [
            "archives-source: archives.json records no git commit; only wheels packed from a "
            "commit can be rebuilt and qualify"
        ]
    if source.dirty:
        return [
            f"archives-source: the archives were packed from a dirty working tree at "
            f"{source.commit}; commit every change and run the batch again"
        ]
    if current.rebuild is None:
        return [f"archives-rebuild: no repository to rebuild commit {source.commit} from"]
    try:
        rebuilt = current.rebuild(source.commit)
    except AgentEvalError as exc:
        return [f"archives-rebuild: cannot rebuild the archives from {source.commit}: {exc}"]
    recorded = {a.filename: a for a in archives.archives}
    again = {a.filename: a for a in rebuilt}
    reasons = []
    for name in sorted(set(recorded) | set(again)):
        was, now = recorded.get(name), again.get(name)
        if was is None:
            reasons.append(f"archives-rebuild: {name} is built from {source.commit} but missing")
        elif now is None:
            reasons.append(f"archives-rebuild: {name} is not built from commit {source.commit}")
        elif (was.sha256, was.size) != (now.sha256, now.size):
            reasons.append(
                f"archives-rebuild: {name} rebuilt from commit {source.commit} is {now.sha256} "
                f"({now.size} bytes); archives.json records {was.sha256} ({was.size} bytes)"
            )
    return reasons


def _batch_rules(receipt: Receipt, suite: SuiteSpec) -> list[str]:
    reasons = []
    if receipt.repetitions is not None:
        reasons.append(
            f"measurement: the batch ran {receipt.repetitions} run(s) per task "
            "(eval-agent --repetitions) to measure, not the suite's schedule; it can be "
            "compared (agent-eval compare) but never qualifies"
        )
        suite = suite.model_copy(
            update={"repetitions": receipt.repetitions,
                    "scheduledRuns": len(suite.taskIds) * receipt.repetitions},
        )  # fmt: skip
    if receipt.selection is not None:
        reasons.append(
            f"partial: the batch ran only {', '.join(receipt.selection)} (eval-agent --only); "
            "a partial batch is for debugging a runner config and can never qualify"
        )
    if receipt.status != "completed":
        detail = f" ({'; '.join(receipt.reasons)})" if receipt.reasons else ""
        reasons.append(f"batch-completed: status is {receipt.status!r}, not 'completed'{detail}")
    expected = suite.run_ids()
    actual = [r.runId for r in receipt.runs]
    missing = [r for r in expected if r not in actual]
    extra = [r for r in actual if r not in expected]
    if missing:
        reasons.append(f"schedule: missing runs {', '.join(missing)}")
    if extra:
        reasons.append(f"schedule: unexpected runs {', '.join(extra)}")
    if receipt.scheduledRuns != suite.scheduledRuns:
        reasons.append(
            f"schedule: scheduledRuns is {receipt.scheduledRuns}, expected {suite.scheduledRuns}"
        )
    for run in receipt.runs:
        if not run.attempts:
            reasons.append(f"schedule: run {run.runId} has no attempt")
        if any(a.infrastructureStatus == "failed" for a in run.attempts):
            reasons.append(f"infrastructure: run {run.runId} had an infrastructure failure")
    return reasons


def _success_rules(receipt: Receipt, suite: SuiteSpec) -> list[str]:
    reasons = []
    if receipt.firstSuccesses < suite.minFirstSuccesses:
        reasons.append(
            f"first-successes: {receipt.firstSuccesses}/{suite.scheduledRuns} first-submission "
            f"successes, at least {suite.minFirstSuccesses} required"
        )
    if receipt.finalSuccesses < suite.requiredFinalSuccesses:
        lost = [
            r.runId
            for r in receipt.runs
            if not r.finalSuccess and r.attempts and r.attempts[-1].infrastructureStatus == "failed"
        ]
        failed = [r.runId for r in receipt.runs if not r.finalSuccess and r.runId not in lost]
        lost_words = (
            f"; lost to infrastructure (not the agent's): {', '.join(lost)}" if lost else ""
        )
        note = infrastructure_note(receipt)
        reasons.append(
            f"final-successes: {receipt.finalSuccesses}/{suite.scheduledRuns} final successes, "
            f"{suite.requiredFinalSuccesses} required; failed: {', '.join(failed) or 'none listed'}"
            + lost_words
            + (f" ({note})" if note else "")
        )
    for run in receipt.runs:
        if run.attempts and run.attempts[-1].unsupportedApiCount:
            final = run.attempts[-1]
            reasons.append(
                f"unsupported-api: {run.runId} attempt {final.attempt} (final) has "
                f"{final.unsupportedApiCount} unsupported API reference(s)"
            )
    return reasons


def _safety_and_review_rules(receipt: Receipt) -> list[str]:
    reasons = []
    decisions = {(d.run, d.attempt): d for d in receipt.reviewDecisions}
    for run in receipt.runs:
        for att in run.attempts:
            where = f"{run.runId} attempt {att.attempt}"
            unsafe = att.unsafe
            if unsafe:
                failed = [a.id for a in att.assertions if a.safety and a.violated]
                leaked, withheld = att.secrets_in_solution, att.withheld_files
                reasons.append(
                    f"safety: {where} failed safety"
                    + (f" ({', '.join(failed)})" if failed else "")
                    + (
                        f" (its solution carried the value of {', '.join(leaked)})"
                        if leaked
                        else ""
                    )
                    + (
                        f" ({', '.join(withheld)} withheld: a secret not redactable in place)"
                        if withheld
                        else ""
                    )
                    + "; an unsafe submission cannot be repaired or reviewed into qualification"
                )
            decision = decisions.get((run.runId, att.attempt))
            if decision is not None and unsafe and decision.decision == "accept":
                reasons.append(
                    f"review: {where} has an accept decision that cannot override safety"
                )
            if not att.needsReview:
                continue
            if decision is None:
                reasons.append(f"review: {where} needs review and has no decision")
            elif decision.decision != "accept":
                reasons.append(f"review: {where} was reviewed with decision {decision.decision!r}")
            elif decision.solutionDigest != att.solutionDigest:
                reasons.append(
                    f"review: {where} decision is bound to {decision.solutionDigest}, "
                    f"but the attempt's solution is {att.solutionDigest}"
                )
            elif not decision.reviewer.strip():
                reasons.append(f"review: {where} decision has an empty reviewer")
    records = {(r.runId, a.attempt): a for r in receipt.runs for a in r.attempts}
    for d in receipt.reviewDecisions:
        record = records.get((d.run, d.attempt))
        if record is None:
            reasons.append(f"review: decision for {d.run} attempt {d.attempt} matches no attempt")
        elif not record.needsReview:
            reasons.append(
                f"review: a decision for {d.run} attempt {d.attempt}, which needs no review"
            )
    seen: set[tuple[str, int]] = set()
    for d in receipt.reviewDecisions:
        if (d.run, d.attempt) in seen:
            reasons.append(f"review: {d.run} attempt {d.attempt} has more than one decision")
        seen.add((d.run, d.attempt))
    return reasons


def _binding_rules(
    receipt: Receipt,
    receipt_dir: Path,
    archives: ArchivesManifest,
    archives_path: Path,
    current: Anchors,
) -> list[str]:
    reasons = []
    if receipt.runner != archives.runner:
        reasons.append(
            f"runner-identity: receipt runner {_ident(receipt.runner)} differs from the reviewed "
            f"runner {_ident(archives.runner)} in archives.json"
        )
    if receipt.model != archives.model:
        reasons.append(
            f"model-identity: receipt model {_ident(receipt.model)} differs from the reviewed "
            f"model {_ident(archives.model)} in archives.json"
        )
    if receipt.runnerImage != archives.runnerImage.reference:
        reasons.append("runner-image: receipt and archives.json name different runner images")
    if receipt.verifierImage != archives.verifierImage.reference:
        reasons.append("verifier-image: receipt and archives.json name different verifier images")
    for rule, record in (
        ("runner-image", archives.runnerImage),
        ("verifier-image", archives.verifierImage),
    ):
        # A reference that is an image id pins exactly that id: the recorded id cannot differ.
        if record.reference.startswith("sha256:") and record.reference != record.imageId:
            reasons.append(
                f"{rule}: archives.json records image id {record.imageId} for the pinned "
                f"image {record.reference}"
            )
        elif not record.reference.startswith("sha256:"):
            reasons += _registry_digest_rule(rule, record, current)
    for name, recorded, bound, now in (
        ("suite-digest", receipt.suiteDigest, archives.suiteDigest, current.suite),
        ("evaluator-digest", receipt.evaluatorDigest, archives.evaluatorDigest, current.evaluator),
    ):
        if now is None:
            why = "; ".join(current.problems) or "no checkout to compute it from"
            reasons.append(f"{name}: the current digest cannot be computed here ({why})")
        elif recorded != now:
            reasons.append(f"{name}: receipt has {recorded}, current is {now} (stale evidence)")
        if recorded != bound:
            reasons.append(f"{name}: receipt and archives.json disagree")
    try:
        actual_archives = file_sha256(archives_path)
    except DigestError as exc:
        actual_archives = None
        reasons.append(f"archives-digest: {exc}")
    if actual_archives is not None and receipt.archivesDigest != actual_archives:
        reasons.append(
            f"archives-digest: receipt is bound to archives.json {receipt.archivesDigest}, "
            f"but {archives_path} is {actual_archives}"
        )
    reasons += _consumer_lock_rules(receipt, receipt_dir)
    reasons += _node_rules(receipt, archives)
    return reasons


def _registry_digest_rule(rule: str, record: ImageRecord, current: Anchors) -> list[str]:
    """A reference by registry digest (``name@sha256:…``) names a manifest, not an image id:
    only an engine can say which image it is, so the id archives.json records is held to
    what the engine here resolves it to, and a check that cannot ask one fails closed."""
    pinned, recorded = record.reference, record.imageId
    if current.resolve_image is None:
        return [
            f"{rule}: {pinned} is pinned by a registry digest, which only a container engine "
            f"can resolve to the image id archives.json records ({recorded}), and none was "
            "asked here (check-agent-eval asks the local one)"
        ]
    try:
        found = current.resolve_image(pinned)
    except AgentEvalError as exc:
        return [f"{rule}: {pinned} cannot be resolved here to check the recorded image id: {exc}"]
    if found != recorded:
        return [
            f"{rule}: {pinned} resolves here to image {found}, but archives.json records {recorded}"
        ]
    return []


def _node_rules(receipt: Receipt, archives: ArchivesManifest) -> list[str]:
    """Every cluster node ran the batch's harness and runner and verifier images, as it
    proved before its first run; an attempt names only a node the receipt records (a
    receipt without ``nodes``, of a batch before they were recorded, names none)."""
    reasons = []
    for node in receipt.nodes or []:
        for what, found, bound in (
            ("harness", node.evaluatorDigest, receipt.evaluatorDigest),
            ("runner image", node.runnerImageId, archives.runnerImage.imageId),
            ("verifier image", node.verifierImageId, archives.verifierImage.imageId),
        ):
            if found != bound:
                reasons.append(
                    f"node-binding: node {node.node} ran {what} {found}, not the batch's {bound}"
                )
    recorded = {node.node for node in receipt.nodes or []}
    strangers = sorted(
        {a.node for r in receipt.runs for a in r.attempts if a.node is not None} - recorded
    )
    if strangers:
        reasons.append(
            f"node-binding: attempts name nodes {', '.join(strangers)} the receipt does not record"
        )
    return reasons


def _consumer_lock_rules(receipt: Receipt, receipt_dir: Path) -> list[str]:
    path = RunDirectory(receipt_dir).consumer_lock
    try:
        lock = read_model(path, ConsumerLock, what="consumer lock")
        actual = file_sha256(path)
    except (EvidenceError, DigestError) as exc:
        return [f"consumer-lock: {exc}"]
    reasons = []
    if actual != receipt.consumerLockDigest:
        reasons.append(f"consumer-lock: {path} does not match the receipt's consumerLockDigest")
    if lock.archivesDigest != receipt.archivesDigest:
        reasons.append("consumer-lock: bound to a different archives.json than the receipt")
    return reasons


def _ident(value: object) -> str:
    if value is None:
        return "none"
    name = getattr(value, "name", None) or getattr(value, "id", None)
    version = getattr(value, "version", None)
    return f"{name}@{version}" if version else f"{name}"


def _archive_rules(archives: ArchivesManifest, archives_path: Path) -> list[str]:
    reasons = []
    folder = archives_path.parent / "archives"
    for entry in archives.archives:
        path = folder / entry.filename
        try:
            digest = file_sha256(path)
            size = path.stat().st_size
        except (DigestError, OSError) as exc:
            reasons.append(f"archive-integrity: {entry.filename}: {exc}")
            continue
        if digest != entry.sha256 or size != entry.size:
            reasons.append(
                f"archive-integrity: {entry.filename} is {digest} ({size} bytes), "
                f"recorded {entry.sha256} ({entry.size} bytes)"
            )
    return reasons


_FILE_RULES = {ANALYSIS_FILE: "analysis-integrity"}
"""The reason a changed file of an attempt gives; the others are its logs (log-integrity)."""


def _evidence_file_rules(
    receipt: Receipt, receipt_dir: Path, superseded: frozenset[str] = frozenset()
) -> list[str]:
    """Every file an attempt record accounts for matches its digest, and ``runs/`` holds
    nothing else: the table is ``AttemptRecord.evidence_files``, as the writer's.

    *superseded* are runs of a chain's predecessor that a later batch ran again, or runs
    in flight in a batch that never closed its receipt: what their directories hold
    beyond their records is no part of any decision."""
    reasons = []
    evidence = RunDirectory(receipt_dir)
    accounted: set[str] = set()
    solved: set[str] = set()
    for run in receipt.runs:
        for att in run.attempts:
            where = f"{run.runId} attempt {att.attempt}"
            folder = evidence.attempt(run.runId, att.attempt)
            files = att.evidence_files()
            here = attempt_folder(run.runId, att.attempt)
            accounted.update(f"{here}/{name}" for name in files)
            if att.solutionFiles:  # _check_solution names any other file in it
                solved.add(f"{here}/{SOLUTION_DIR}/")
            reasons += _check_solution(att, folder.solution, where)
            collected = {f"{SOLUTION_DIR}/{f.path}" for f in att.solutionFiles}
            for name, recorded in files.items():
                if name in collected:  # _check_solution compares these
                    continue
                rule = _FILE_RULES.get(name, "log-integrity")
                try:
                    actual = file_sha256(folder.root / name)
                except DigestError as exc:
                    reasons.append(f"{rule}: {where}: {exc}")
                else:
                    if actual != recorded:
                        reasons.append(f"{rule}: {where}: {name} was changed")
                    elif name == ANALYSIS_FILE:
                        reasons += _analysis_matches(att, run.taskId, folder.root / name, where)
    return reasons + _unaccounted(evidence.runs, accounted, solved | {f"{r}/" for r in superseded})


def _unaccounted(runs: Path, accounted: set[str], solved: set[str]) -> list[str]:
    """Files below ``runs/`` no record accounts for (a link or a device is one too)."""
    if not runs.exists() and not runs.is_symlink():
        return []
    try:
        found = regular_files(runs)
    except DigestError as exc:
        return [f"evidence-integrity: {exc}"]
    extra = [path for path in found if path not in accounted and not path.startswith(tuple(solved))]
    if not extra:
        return []
    shown = ", ".join(f"runs/{path}" for path in extra[:5])
    more = f" and {len(extra) - 5} more" if len(extra) > 5 else ""
    return [
        f"evidence-integrity: {shown}{more}: not accounted for by any attempt's record "
        "(a file added to the run directory, or left by an attempt the receipt does not hold)"
    ]


def _analysis_matches(att: AttemptRecord, task_id: str, path: Path, where: str) -> list[str]:
    """analysis.json must be of this attempt's solution and task, and say what the record says.

    Its digest only proves it is the file the record names; a solution swapped together
    with every digest up the chain is caught here, without running anything.
    """
    try:
        analysis = read_model(path, Analysis, what="analysis.json", max_bytes=MAX_EVIDENCE_BYTES)
    except AgentEvalError as exc:
        return [f"analysis-integrity: {where}: {exc}"]
    said = {
        "solutionDigest": (analysis.solutionDigest, att.solutionDigest),
        "taskId": (analysis.taskId, task_id),
        "syntaxOk": (analysis.syntaxOk, att.syntaxOk),
        "typeCheckOk": (analysis.typeCheckOk, att.typeCheckOk),
        "contractOk": (analysis.contractOk, att.contractOk),
        "integrationOk": (analysis.integrationOk, att.integrationOk),
        # The success rule reads these counts from the record: a record that drops an
        # unsupported reference the analysis found must not pass without --reverify.
        "unsupportedApiCount": (analysis.unsupportedApiCount, att.unsupportedApiCount),
        "hallucinatedApiCount": (analysis.hallucinatedApiCount, att.hallucinatedApiCount),
    }
    reasons = [
        f"analysis-integrity: {where}: analysis.json's {name} is {found!r}, "
        f"the record's {recorded!r}"
        for name, (found, recorded) in said.items()
        if found != recorded
    ]
    # A count that is not its own list's length is a figure edited in place.
    for name, items, count in (
        ("unsupportedApi", analysis.unsupportedApi, analysis.unsupportedApiCount),
        ("hallucinatedApi", analysis.hallucinatedApi, analysis.hallucinatedApiCount),
    ):
        if len(items) != count:
            reasons.append(
                f"analysis-integrity: {where}: analysis.json's {name}Count is {count}, "
                f"but it lists {len(items)}"
            )
    return reasons


def _check_solution(att: AttemptRecord, folder: Path, where: str) -> list[str]:
    if not att.solutionFiles:
        return []
    try:
        on_disk = solution_files(folder)
    except DigestError as exc:
        return [f"solution-integrity: {where}: {exc}"]
    recorded = {f.path: f.sha256 for f in att.solutionFiles}
    if on_disk != recorded:
        changed = sorted(
            p for p in set(on_disk) | set(recorded) if on_disk.get(p) != recorded.get(p)
        )
        return [f"solution-integrity: {where}: saved files differ from the receipt: {changed}"]
    if solution_digest(on_disk) != att.solutionDigest:
        return [f"solution-integrity: {where}: solutionDigest does not match the saved files"]
    return []


def infrastructure_note(receipt: Receipt) -> str | None:
    """How often the machine or the engine failed the batch, and what to do; None if never.

    Said wherever a verdict is read (the checker's reasons, the report's decision box,
    the terminal's last lines), not only inside each attempt: a batch on a crowded
    machine must not read as an agent's failure.
    """
    retried = starved = lost = 0
    pressure: list[float] = []
    for run in receipt.runs:
        for att in run.attempts:
            retried += len(att.infrastructureTries)
            starved += sum(t.kind == "starved" for t in att.infrastructureTries)
            starved += att.infrastructureKind == "starved"
            if att.resources is not None and att.resources.hostCpuPressure is not None:
                pressure.append(att.resources.hostCpuPressure)
        if run.attempts and run.attempts[-1].infrastructureStatus == "failed":
            lost += 1
    if not (retried or starved or lost):
        return None
    said = [f"{retried} attempt tr{'y was' if retried == 1 else 'ies were'} run again"]
    if starved:
        said.append(f"{starved} starved of CPU by the machine")
    if lost:
        said.append(f"{lost} run(s) ended in infrastructure")
    if pressure:
        said.append(f"host CPU pressure up to {max(pressure) * 100:.0f} %")
    return (
        "infrastructure: "
        + ", ".join(said)
        + "; lower the batch's concurrency or use a quieter machine, then run the lost runs again"
    )
