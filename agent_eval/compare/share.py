"""A batch's summary as it may leave the machine: counts, identities, the decision's rules.

The summary is built from fields the harness wrote itself (counts, digests, identities
and the names of the rules a batch failed), never from text an agent, a provider or
the machine chose: no solution, transcript, log, prompt, solution file name, environment
value, reason wording (a reason may quote a file) or path. Its Markdown is rendered from
the same model, so the two say the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from agent_eval.compare.compare import (
    MAX_SYMBOL_LINES,
    batch_identity,
    compare_batches,
    safety_sentence,
)
from agent_eval.compare.matrix_compare import as_lines, compare_matrices
from agent_eval.compare.symbols import CatalogOfWheels
from agent_eval.errors import EvidenceError
from agent_eval.evidence_io import read_model
from agent_eval.layout import RunDirectory
from agent_eval.models import ArchivesManifest, Receipt
from agent_eval.models.compare import ApiChanges, Comparison, SharedSummary, SharedTask
from agent_eval.models.matrix import MatrixComparison
from agent_eval.report.text import markdown_text
from agent_eval.verdict.chain import ChainLink, resolve_chain
from agent_eval.verdict.qualification import Anchors, qualify_files

__all__ = ["as_markdown", "matrix_markdown", "share_matrix_comparison", "share_summary"]


def share_summary(
    run_dir: Path,
    current: Anchors,
    compare_with: Path | None = None,
    catalogs: CatalogOfWheels | None = None,
    allow: Iterable[str] = (),
) -> SharedSummary:
    """The shareable summary of the batch in *run_dir* (set against *compare_with*, the
    changed public symbols found with *catalogs*, as :func:`compare_batches` does).

    Raises:
        EvidenceError: The receipt or archives.json cannot be read.
        ConfigError: The comparison is refused (see :func:`compare_batches`).
    """
    run = RunDirectory(run_dir)
    if not run_dir.is_dir():
        raise EvidenceError(f"{run_dir}: not a run directory")
    receipt = read_model(run.receipt, Receipt, what="receipt", follow_symlinks=False)
    archives = read_model(
        run.archives_manifest, ArchivesManifest, what="archives", follow_symlinks=False
    )
    decision = qualify_files(run.receipt, run.archives_manifest, current)
    if receipt.predecessor is not None:
        # A resumed batch is summarised as its chain's union, as the checker decides on it.
        receipt = resolve_chain(ChainLink(run_dir, receipt, archives)).union
    rules = list(dict.fromkeys(r.split(":", 1)[0] for r in decision.reasons))
    tasks: dict[str, list[int]] = {}
    for r in receipt.runs:
        counts = tasks.setdefault(r.taskId, [0, 0, 0, 0, 0, 0])
        counts[0] += 1
        counts[1] += r.firstSuccess
        counts[2] += r.finalSuccess
        counts[3] += r.unsafe_attempts
        counts[4] += bool(r.attempts and r.attempts[-1].unsupportedApiCount)
        counts[5] += any(a.infrastructureStatus == "failed" for a in r.attempts)
    spec = receipt.suite or current.spec
    comparison = (
        _shareable(compare_batches([compare_with], [run_dir], current, allow, catalogs=catalogs))
        if compare_with is not None
        else None
    )
    return SharedSummary(
        schemaVersion=1,
        batchId=receipt.batchId,
        status=receipt.status,
        qualified=decision.qualified,
        reasonRules=rules,
        measurement=receipt.repetitions is not None,
        scheduledRuns=receipt.scheduledRuns,
        firstSuccesses=receipt.firstSuccesses,
        finalSuccesses=receipt.finalSuccesses,
        minFirstSuccesses=spec.minFirstSuccesses if spec is not None else None,
        tasks=[_task(task_id, c) for task_id, c in tasks.items()],
        identity=batch_identity(receipt, archives),
        comparison=comparison,
    )


def _shareable_api(api: ApiChanges) -> ApiChanges:
    """*api* without the words of why the catalogs were not compared (they may quote a
    path or a generator's output)."""
    if api.note is None:
        return api
    note = "the API catalogs could not be compared on the machine that made this summary"
    return api.model_copy(update={"note": note})


def _shareable(comparison: Comparison) -> Comparison:
    """*comparison* as it may be shared (see :func:`_shareable_api`)."""
    return comparison.model_copy(update={"api": _shareable_api(comparison.api)})


def share_matrix_comparison(
    baseline: Path,
    candidate: Path,
    evidence: Path,
    current: Anchors,
    catalogs: CatalogOfWheels | None = None,
    allow: Iterable[str] = (),
) -> MatrixComparison:
    """The comparison of two matrix records (see :func:`compare_matrices`) as it may be
    shared: what a batch comparison's summary redacts is redacted in each agent's.

    Raises:
        EvidenceError: A record or a batch it names fails its rules.
        ConfigError: The comparison is refused.
    """
    compared = compare_matrices(baseline, candidate, evidence, current, allow, catalogs)
    agents = [
        a.model_copy(update={"comparison": _shareable(a.comparison)}) for a in compared.agents
    ]
    return compared.model_copy(update={"api": _shareable_api(compared.api), "agents": agents})


def _task(task_id: str, c: list[int]) -> SharedTask:
    return SharedTask(
        taskId=task_id, runs=c[0], firstSuccesses=c[1], finalSuccesses=c[2],
        unsafeAttempts=c[3], unsupportedApi=c[4], infrastructure=c[5],
    )  # fmt: skip


def as_markdown(summary: SharedSummary) -> str:
    """The summary as Markdown, for a pull request or an issue.

    Every value read from the evidence (ids, names, digests, task ids and the sentences
    that hold them) is literal text (:func:`markdown_text`): a runner name holding a
    newline, a heading, an HTML comment or a bidirectional override cannot forge or hide
    a line of the summary."""
    m = markdown_text
    s, ident = summary, summary.identity
    verdict = "qualified" if s.qualified else "rejected (" + ", ".join(map(m, s.reasonRules)) + ")"
    threshold = f" (at least {s.minFirstSuccesses} needed)" if s.minFirstSuccesses else ""
    served = ", ".join(map(m, ident.servedModels))
    lines = [
        f"## agent-eval batch {m(s.batchId)}",
        "",
        f"- status: {m(s.status)}; decision: {verdict}"
        + ("; a measurement batch" if s.measurement else ""),
        f"- first-attempt successes: {s.firstSuccesses}/{s.scheduledRuns}{threshold}",
        f"- final successes: {s.finalSuccesses}/{s.scheduledRuns}",
        f"- runner: {m(_who(ident.runner))}; model: {m(_who(ident.model))}"
        + (f" (served: {served})" if ident.servedModels else ""),
        f"- images: runner {m(ident.runnerImage)}, verifier {m(ident.verifierImage)}"
        + (f", gateway {m(ident.gatewayImage)}" if ident.gatewayImage else ""),
        f"- library: {'; '.join(map(m, ident.archives))} "
        f"(commit {m(ident.sourceCommit or 'none')})",
        f"- suite {m(str(ident.suiteDigest))}; harness {m(str(ident.evaluatorDigest))}",
        "",
        "| task | runs | first | final | unsafe attempts | unsupported API | infrastructure |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {m(t.taskId)} | {t.runs} | {t.firstSuccesses} | {t.finalSuccesses} | "
        f"{t.unsafeAttempts} | {t.unsupportedApi} | {t.infrastructure} |"
        for t in s.tasks
    ]
    if s.comparison is not None:
        c = s.comparison
        lines += ["", f"### Against {', '.join(map(m, c.baseline.batchIds))}", ""]
        lines += [f"- {m(c.first.sentence)}", f"- {m(c.final.sentence)}"]
        lines.append(f"- {m(safety_sentence(c))}")
        if c.api.status == "compared":
            named = [f"{m(sym.name)} ({sym.change})" for sym in c.api.changes[:MAX_SYMBOL_LINES]]
            if len(c.api.changes) > MAX_SYMBOL_LINES:
                named.append(f"and {len(c.api.changes) - MAX_SYMBOL_LINES} more")
            changed = ", ".join(named) or "none"
            lines.append(f"- public symbols added, removed or changed: {changed}")
        elif c.api.status == "unavailable":
            lines.append(
                f"- public symbols added, removed or changed: not known ({m(str(c.api.note))})"
            )
        lines += [f"- {m(t.first.sentence)}" for t in c.tasks]
    return "\n".join(lines) + "\n"


def _who(identity: object) -> str:
    if identity is None:
        return "none"
    name = getattr(identity, "name", None) or getattr(identity, "id", "")
    version = getattr(identity, "version", None)
    return f"{name} {version}" if version else str(name)


def matrix_markdown(comparison: MatrixComparison) -> str:
    """The comparison of two matrices as Markdown, every value from the evidence literal
    text (:func:`markdown_text`), as :func:`as_markdown` renders a batch's."""
    m = markdown_text
    c = comparison
    lines = [
        "## agent-eval matrices compared",
        "",
        f"- baseline matrix {m(c.baselineRecord)}; candidate matrix {m(c.candidateRecord)}",
        f"- suite {m(str(c.suiteDigest))}; tasks: {', '.join(map(m, c.taskIds))}",
    ]
    if c.api.status == "compared":
        named = [f"{m(sym.name)} ({sym.change})" for sym in c.api.changes[:MAX_SYMBOL_LINES]]
        if len(c.api.changes) > MAX_SYMBOL_LINES:
            named.append(f"and {len(c.api.changes) - MAX_SYMBOL_LINES} more")
        lines.append(f"- public symbols added, removed or changed: {', '.join(named) or 'none'}")
    elif c.api.status == "unavailable":
        lines.append(
            f"- public symbols added, removed or changed: not known ({m(str(c.api.note))})"
        )
    lines.append("")
    lines += [f"- {m(line.strip())}" for line in as_lines(c) if line.strip()]
    return "\n".join(lines) + "\n"
