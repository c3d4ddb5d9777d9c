"""A resumed batch's chain: its predecessors found, checked, and their runs united.

A batch made by ``eval-agent --resume`` names its predecessor by batch id
(a sibling run directory) and by the digest of its receipt, and lists the
runs whose verdict it reuses. The checker walks the chain back to its first
batch and decides on the union: each scheduled run once, from exactly one
batch (the last batch's own runs, then each reused run from the batch that
gave it a valid final verdict). A cycle, a missing or edited predecessor, a
predecessor bound to other identities, a reused run without a verdict there
or a run counted twice is a reason, and the union is then not trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_eval.digests import DigestError, file_sha256
from agent_eval.errors import AgentEvalError, EvidenceError
from agent_eval.evidence_io import read_model
from agent_eval.layout import RunDirectory
from agent_eval.models import ArchivesManifest, Receipt, RunRecord
from agent_eval.models.chain import ChainBatch, binding_differences, has_final_verdict

__all__ = ["MAX_CHAIN", "Chain", "ChainLink", "counted_receipt", "resolve_chain"]

MAX_CHAIN = 64
"""More batches than this in one chain is refused (each resume runs at least one run)."""


@dataclass(frozen=True)
class ChainLink:
    """One batch of a chain."""

    run_dir: Path
    receipt: Receipt
    archives: ArchivesManifest

    @property
    def batch_id(self) -> str:
        return self.receipt.batchId


@dataclass(frozen=True)
class Chain:
    """A chain, last batch first, and the union the decision is taken on."""

    links: tuple[ChainLink, ...]
    problems: tuple[str, ...]
    """Why the chain cannot be trusted (each a ``chain: …`` reason); empty when it can."""
    union: Receipt
    """The last batch's receipt holding every counted run, each from its batch."""
    origins: Mapping[str, ChainLink]
    """Which batch each counted run comes from."""

    def summary(self) -> list[ChainBatch]:
        """Each batch: the runs counted from it, the tokens and time it spent, first batch
        first."""
        return [
            ChainBatch(
                batchId=link.batch_id,
                runs=[r for r, origin in self.origins.items() if origin is link],
                tokens=sum(
                    a.gateway.inputTokens + a.gateway.outputTokens
                    for run in link.receipt.runs
                    for a in run.attempts
                    if a.gateway is not None
                ),
                durationMs=sum(a.durationMs for run in link.receipt.runs for a in run.attempts),
            )
            for link in reversed(self.links)
        ]


def counted_receipt(run_dir: Path, receipt: Receipt) -> Receipt:
    """The runs a decision on the batch in *run_dir* counts, as a receipt: a resumed
    batch's chain union (each run once, from the batch of its verdict), else *receipt*.

    What a listing, a JUnit file or the words of a decision show of a resumed batch must
    be the runs the checker decided on, not the resumed batch's own few. A chain that
    cannot be read gives *receipt* itself: the decision already says why.
    """
    if receipt.predecessor is None:
        return receipt
    try:
        archives = read_model(
            RunDirectory(run_dir).archives_manifest,
            ArchivesManifest,
            what="archives",
            follow_symlinks=False,
        )
        return resolve_chain(ChainLink(run_dir, receipt, archives)).union
    except AgentEvalError:
        return receipt


def resolve_chain(last: ChainLink) -> Chain:
    """Walk *last*'s predecessors and unite their runs; every broken link is a problem."""
    links = [last]
    problems: list[str] = []
    seen = {last.batch_id}
    link = last
    while (predecessor := link.receipt.predecessor) is not None:
        where = f"chain: {link.batch_id} resumes {predecessor.batchId}"
        if predecessor.batchId in seen:
            problems.append(f"{where}, already in its chain (a cycle)")
            break
        if len(links) >= MAX_CHAIN:
            problems.append(f"{where}: the chain is longer than {MAX_CHAIN} batches")
            break
        found = _predecessor(link, where)
        if isinstance(found, str):
            problems.append(found)
            break
        problems += _link_problems(found, link, where)
        links.append(found)
        seen.add(found.batch_id)
        link = found
    origins, union_problems = _unite(links)
    problems += union_problems
    ordered = _in_schedule_order(links, origins)
    runs = [_run_of(origins[run_id], run_id) for run_id in ordered]
    decisions = [d for link in links for d in link.receipt.reviewDecisions]
    union = last.receipt.model_copy(
        update={
            "runs": runs,
            "firstSuccesses": sum(r.firstSuccess for r in runs),
            "finalSuccesses": sum(r.finalSuccess for r in runs),
            "scheduledRuns": links[-1].receipt.scheduledRuns,
            "reviewDecisions": decisions,
            "predecessor": None,
        }
    )
    return Chain(tuple(links), tuple(problems), union, {r: origins[r] for r in ordered})


def _predecessor(link: ChainLink, where: str) -> ChainLink | str:
    """The predecessor *link* names, read and held to its digest; or why it cannot be."""
    assert link.receipt.predecessor is not None
    named = link.receipt.predecessor
    evidence = RunDirectory(link.run_dir.parent / named.batchId)
    try:
        digest = file_sha256(evidence.receipt)
    except DigestError as exc:
        return f"{where}, which is missing ({exc})"
    if digest != named.receiptDigest:
        return (
            f"{where}, whose receipt.json is {digest}, not the {named.receiptDigest} it "
            "resumed: the predecessor was changed"
        )
    try:
        receipt = read_model(evidence.receipt, Receipt, what="receipt")
        archives = read_model(evidence.archives_manifest, ArchivesManifest, what="archives")
    except EvidenceError as exc:
        return f"{where}: {exc}"
    if receipt.batchId != named.batchId:
        return f"{where}, but the receipt there is of batch {receipt.batchId}"
    return ChainLink(evidence.root, receipt, archives)


def _link_problems(before: ChainLink, after: ChainLink, where: str) -> list[str]:
    """*after* must be bound to *before*'s identities and reuse exactly its verdicts."""
    problems = []
    if differ := binding_differences(
        before.receipt, before.archives, after.receipt, after.archives
    ):
        problems.append(f"{where}, bound to other identities: {', '.join(differ)} differ")
    assert after.receipt.predecessor is not None
    claimed = set(after.receipt.predecessor.reusedRuns)
    earlier = set(before.receipt.predecessor.reusedRuns) if before.receipt.predecessor else set()
    has = earlier | {r.runId for r in before.receipt.runs if has_final_verdict(r)}
    if unfounded := sorted(claimed - has):
        problems.append(
            f"{where} and reuses {', '.join(unfounded)}, which have no valid final verdict there"
        )
    if left := sorted(has - claimed - {r.runId for r in after.receipt.runs}):
        problems.append(f"{where} and neither reuses nor runs {', '.join(left)}")
    return problems


def _unite(links: list[ChainLink]) -> tuple[dict[str, ChainLink], list[str]]:
    """Each counted run's batch: the last batch's own runs, then each reused run from the
    nearest batch of the chain that ran it with a valid final verdict."""
    origins: dict[str, ChainLink] = {}
    problems = []
    wanted: set[str] | None = None  # None: every run of the batch counts (the last one)
    for link in links:
        own = {r.runId for r in link.receipt.runs}
        for run in link.receipt.runs:
            if wanted is not None and (run.runId not in wanted or not has_final_verdict(run)):
                continue
            origins[run.runId] = link
        if (predecessor := link.receipt.predecessor) is None:
            break
        reused = set(predecessor.reusedRuns)
        if twice := sorted(reused & own):
            problems.append(
                f"chain: {link.batch_id} both runs and reuses {', '.join(twice)} (a run "
                "counted twice)"
            )
        wanted = (reused if wanted is None else wanted & reused) - set(origins)
    return origins, problems


def _in_schedule_order(links: list[ChainLink], origins: Mapping[str, ChainLink]) -> list[str]:
    """The counted runs in the first batch's schedule order (then any others)."""
    order = [r.runId for r in links[-1].receipt.runs]
    for link in links:
        order += [r.runId for r in link.receipt.runs if r.runId not in order]
    return [r for r in order if r in origins]


def _run_of(link: ChainLink, run_id: str) -> RunRecord:
    return next(r for r in link.receipt.runs if r.runId == run_id)
