"""One engine's runs: each attempt through the runner and the verifier, observed and judged.

A run is a first attempt and, when the rules allow, one repair. An attempt
goes through four steps, each of which may decide it: starting (the batch's
time left), the runner (with its gateway route, the protected inputs
compared before and after), the runner's response and collection, and the
verification. Whatever decides it, the attempt is judged from what was
observed (:func:`~agent_eval.batch.judging.judge_attempt`), its runner.log and
transcript written once, at its end.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from agent_eval.anchored import copy_into, make_dirs, remove_tree
from agent_eval.batch.collection import collect_solution
from agent_eval.batch.judging import AttemptObservations, judge_attempt, repair_feedback
from agent_eval.batch.ports import GatewayRoute, RunExecutor, RunnerOutcome, RunnerPort
from agent_eval.batch.progress import ProgressEvent, RunState
from agent_eval.batch.receipt_book import describe_failure
from agent_eval.batch.response import ResponseVerdict, judge_response
from agent_eval.batch.schedule import (
    BatchPlan,
    ExecutorFactory,
    Schedule,
    ScheduledTask,
    left_files,
)
from agent_eval.digests import sha256_bytes
from agent_eval.errors import AgentEvalError, CleanupError, EngineUnavailableError
from agent_eval.evidence_io import write_bytes_atomic
from agent_eval.gateway.host import parse_records, provider_problem, summarise, unmeasured
from agent_eval.layout import (
    ANALYSIS_FILE,
    GATEWAY_RECORD_FILE,
    MAX_TRANSCRIPT_BYTES,
    RUNNER_LOG_FILE,
    SOLUTION_DIR,
    TRANSCRIPT_FILE,
    AttemptDirectory,
)
from agent_eval.models import (
    MAX_TRIES_PER_ATTEMPT,
    RETRYABLE_KINDS,
    TRY_FOLDER,
    AttemptRecord,
    InfrastructureKind,
    InfrastructureTry,
    ProtectedInputs,
    RepairFeedback,
    RunnerRequest,
    RunRecord,
)
from agent_eval.models.analysis import MAX_DIAGNOSTIC_CHARS
from agent_eval.redaction import redact_evidence
from agent_eval.verification.protocol import Verifier

__all__ = ["Attempts", "LocalExecutor", "on_this_engine"]

RUNNER_LOG_BYTES = 8 * 1024
"""The end of the runner's stderr kept in runner.log."""


@dataclass
class _Attempt:
    """One attempt in progress: where it is, and what its runner did."""

    run_id: str
    task: ScheduledTask
    number: int
    evidence: AttemptDirectory
    workspace: Path
    seen: AttemptObservations
    outcome: RunnerOutcome | None = None
    request: RunnerRequest | None = None
    provider: str | None = None
    """The model provider's failure, as the gateway's records show it."""
    budget_bound: bool = False
    """The batch's time left, not the submission timeout, bounded the runner."""

    @property
    def state(self) -> RunState | None:
        """A repair shows as one state throughout, its runner and its verification alike."""
        return "repairing" if self.number > 1 else None


class Attempts:
    """Whole runs of *schedule* on one engine, through its runner and verifier."""

    def __init__(self, schedule: Schedule, runner: RunnerPort, verifier: Verifier) -> None:
        self.schedule = schedule
        self.runner = runner
        self.verifier = verifier

    def run(self, run_id: str) -> RunRecord:
        """One scheduled run: a first attempt and, when the rules allow, one repair."""
        schedule = self.schedule
        task = schedule.plan.tasks[run_id.rpartition("-")[0]]
        feedback: RepairFeedback | None = None
        previous: Path | None = task.starter_dir
        for number in (1, 2):
            if schedule.stop.is_set():
                # A repair the stop kept from running is the batch's, never the agent's.
                return schedule.unfinished(run_id, schedule.stop_reason or "the batch stopped")
            record = self.tried(run_id, task, number, feedback, previous)
            schedule.finish_attempt(run_id, record)
            feedback = repair_feedback(record)
            if feedback is None:
                break
            previous = schedule.evidence.attempt(run_id, number).solution
        return schedule.record(run_id, schedule.attempts_of(run_id))

    def tried(
        self,
        run_id: str,
        task: ScheduledTask,
        number: int,
        feedback: RepairFeedback | None,
        seed_dir: Path | None,
    ) -> AttemptRecord:
        """One attempt, run again in fresh containers while it ends in infrastructure a
        repeat may cure, up to :data:`MAX_TRIES_PER_ATTEMPT` tries and the batch's budget.

        Each earlier try's files are moved, as they were, to ``attempt-<k>/try-<n>/`` and
        accounted for in the recorded attempt's ``infrastructureTries``.
        """
        schedule = self.schedule
        kept: list[InfrastructureTry] = []
        while True:
            record = self.attempt(run_id, task, number, feedback, seed_dir, again=bool(kept))
            kind = record.infrastructureKind
            gone = schedule.note_try(kind)
            if kind not in RETRYABLE_KINDS or not schedule.take_retry(
                f"{kind}: {_infrastructure_words(record)}",
                wanted=gone is None and len(kept) + 1 < MAX_TRIES_PER_ATTEMPT,
            ):
                return record.model_copy(update={"infrastructureTries": kept})
            with schedule.evidence_writes(run_id, number) as open_:
                if not open_:  # booked as cut short meanwhile: its files stay where counted
                    return record.model_copy(update={"infrastructureTries": kept})
                kept.append(self._keep_try(run_id, number, len(kept) + 1, record))
            schedule.plan.progress(
                ProgressEvent(
                    f"{run_id} attempt {number}: {kind} failure, trying again in fresh "
                    f"containers (try {len(kept) + 1} of {MAX_TRIES_PER_ATTEMPT})",
                    run_id,
                    "repairing" if number > 1 else "running",
                )
            )

    def _keep_try(
        self, run_id: str, number: int, try_number: int, record: AttemptRecord
    ) -> InfrastructureTry:
        """Move what a failed try left below ``try-<n>/``; its account in the record."""
        schedule = self.schedule
        root = schedule.evidence.attempt(run_id, number).root
        earlier = {TRY_FOLDER.format(n=n) for n in range(1, try_number)}
        kept = root / TRY_FOLDER.format(n=try_number)
        kept.mkdir()
        for entry in sorted(root.iterdir()):
            if entry.name not in earlier and entry != kept:
                entry.rename(kept / entry.name)
        # A workspace that cannot go (a link planted on its way) makes the next try's
        # creation fail: that try is the harness's failure, and nothing outside is touched.
        with contextlib.suppress(CleanupError):
            remove_tree(_anchor(schedule.plan), _workspace(schedule.plan, run_id, number))
        files = left_files(kept, {})
        assert record.infrastructureKind is not None
        return InfrastructureTry(
            tryNumber=try_number,
            startedAt=record.startedAt,
            durationMs=record.durationMs,
            kind=record.infrastructureKind,
            reason=_infrastructure_words(record),
            files=files,
        )

    def stop_everything(self, reason: str) -> list[str]:
        """Stop every attempt in flight; returns what could not be stopped, as reasons."""
        self.schedule.stop_now(reason)
        problems = []
        for port in (self.runner, self.verifier):
            try:
                port.cancel_all()
            except Exception as exc:  # the receipt must close whatever the engine does
                problems.append(f"stopping the containers in flight: {describe_failure(exc)}")
        return problems

    def attempt(
        self,
        run_id: str,
        task: ScheduledTask,
        number: int,
        feedback: RepairFeedback | None,
        seed_dir: Path | None,
        *,
        again: bool = False,
    ) -> AttemptRecord:
        """Run, observe and judge one attempt (or, *again*, one more try of it), seeded
        with *seed_dir*'s files."""
        schedule = self.schedule
        started = schedule.monotonic()
        began = schedule.begin_attempt(run_id, number)
        evidence = schedule.evidence.attempt(run_id, number)
        evidence.root.mkdir(parents=True, exist_ok=again)
        workspace = _workspace(schedule.plan, run_id, number)
        # Made from the anchor down, never through a link swapped in since the batch began.
        if seed_dir is not None and seed_dir.is_dir():
            copy_into(seed_dir, _anchor(schedule.plan), workspace, mode=0o777)
        else:
            make_dirs(_anchor(schedule.plan), workspace, mode=0o777, exist_ok=False)
        seen = AttemptObservations(
            attempt=number, started_at=began, duration_ms=0, repair_feedback=feedback
        )
        now = _Attempt(run_id, task, number, evidence, workspace, seen)
        if self._run_runner(now) and self._submitted(now):
            self._verify(now)
        seen.duration_ms = int((schedule.monotonic() - started) * 1000)
        if now.outcome is not None:
            with schedule.evidence_writes(run_id, number) as open_:
                if open_:
                    seen.runner_log_digest = self._runner_log(evidence, now.outcome, seen)
                    seen.transcript_digest = self._transcript(evidence, now.outcome, seen)
            seen.resources = now.outcome.resources
        record = self._without_secrets(judge_attempt(seen), seen)
        if record.infrastructureStatus == "failed":
            # What a try that did not finish left (a solution never verified) is kept
            # and accounted for, never mistaken for a file added to the run directory.
            left = left_files(evidence.root, record.evidence_files())
            record = record.model_copy(update={"leftFiles": left})
        return record

    def _run_runner(self, now: _Attempt) -> bool:
        """Run the runner within the time left; whether what it did is the agent's to judge."""
        plan, seen = self.schedule.plan, now.seen
        remaining_ms = int((self.schedule.deadline - self.schedule.monotonic()) * 1000)
        now.budget_bound = remaining_ms < plan.submission_timeout_ms
        budget_ms = min(plan.submission_timeout_ms, remaining_ms)
        if budget_ms <= 0:
            seen.budget_exhausted = True
            return False
        now.request = request = self._request(now, budget_ms)
        plan.progress(
            ProgressEvent(
                f"{now.run_id} attempt {now.number}: runner started",
                now.run_id,
                now.state or "running",
            )
        )
        before = plan.protected_digest()
        route = plan.gateway.open_route(now.run_id, now.number) if plan.gateway else None
        if route is not None:
            seen.redactions = {value: name for name, value in route.environment.items()}
        now.outcome = self.runner.run_attempt(
            request, now.workspace, route.environment if route else None
        )
        try:
            after: str | None = plan.protected_digest()
        except OSError:
            after = None
        seen.protected = ProtectedInputs(before=before, after=after)
        if route is not None:
            try:
                now.provider = self._gateway_use(route, now, seen)
            except AgentEvalError as exc:
                seen.infrastructure_error = f"the model gateway's record: {exc}"
                seen.infrastructure_kind = "provider"
                return False
        if now.outcome.infrastructure_error is not None and self.schedule.stop_reason is None:
            seen.infrastructure_error = now.outcome.infrastructure_error
        return self._trusted(seen) and seen.identity_problem is None and not seen.budget_exhausted

    def _request(self, now: _Attempt, budget_ms: int) -> RunnerRequest:
        """What the runner is asked, on its stdin: the task, its places, its time budget."""
        plan = self.schedule.plan
        return RunnerRequest(
            schemaVersion=1,
            runId=now.run_id,
            taskId=now.task.spec.id,
            taskText=now.task.prompt,
            consumerDir=plan.consumer_dir_in_runner,
            outputDir=plan.output_dir_in_runner,
            allowedOutputPaths=now.task.spec.allowedOutputPaths,
            attempt=now.number,
            timeBudgetMs=budget_ms,
            repairFeedback=now.seen.repair_feedback,
        )

    def _trusted(self, seen: AttemptObservations) -> bool:
        """Whether nothing outside the agent (a stopped batch, a full disk) spoiled the attempt."""
        if self.schedule.stop_reason is not None:
            # Its containers were killed because the batch stopped: nothing here is the agent's.
            seen.infrastructure_error = (
                f"the batch stopped during this attempt: {self.schedule.stop_reason}"
            )
            seen.infrastructure_kind = "stopped"
        elif seen.infrastructure_error is None and (problem := self.schedule.plan.disk_problem()):
            seen.infrastructure_error, seen.infrastructure_kind = problem, "disk"
        return seen.infrastructure_error is None

    def _submitted(self, now: _Attempt) -> bool:
        """Judge the runner's response and collect its files; whether there is code to verify."""
        outcome, seen, plan = now.outcome, now.seen, self.schedule.plan
        assert outcome is not None and now.request is not None
        verdict = None
        if not outcome.timed_out and outcome.exit_code == 0:
            verdict = judge_response(
                outcome.stdout,
                truncated=outcome.stdout_truncated,
                request=now.request,
                runner=plan.runner,
                model=plan.model,
            )
        response = verdict.response if verdict is not None else None
        completed = response is not None and response.status == "completed"
        said_provider = response is not None and response.failureKind == "provider"
        seen.response = verdict
        if not completed and (now.provider is not None or said_provider):
            # The model API failed: whatever the runner did after, it is not the agent's.
            message = response.message if response is not None else None
            seen.infrastructure_error = (
                now.provider or f"the runner reports its model provider failed: {message}"
            )
            seen.infrastructure_kind = "provider"
        elif outcome.engine_lost and not outcome.timed_out and not completed:
            # The engine collects the runner's output: while it was away, that output
            # (and the exit status it reports) may be lost, so nothing here is the agent's.
            seen.response = None
            seen.infrastructure_error = (
                "the engine could not be reached while the runner ran and the runner left "
                "no completed response: its output may have been lost with the engine"
            )
        elif outcome.timed_out:
            seen.timed_out, seen.budget_exhausted = not now.budget_bound, now.budget_bound
        elif outcome.exit_code != 0:
            seen.response = ResponseVerdict(
                None, "invalid-response", f"the runner exited with status {outcome.exit_code}"
            )
        elif (
            completed
            and seen.protected is not None
            and seen.protected.after == seen.protected.before
        ):
            with self.schedule.evidence_writes(now.run_id, now.number) as open_:
                if not open_:
                    return False
                seen.collection = collect_solution(
                    now.workspace, now.evidence.solution, now.task.spec.allowedOutputPaths
                )
                self._redact_solution(now)
            return (
                not seen.collection.hostile
                and bool(seen.collection.files)
                and not seen.secret_in_solution
            )
        return False

    def _verify(self, now: _Attempt) -> None:
        """Verify the collected solution and keep its analysis, unless the batch spoiled it."""
        seen, spec = now.seen, now.task.spec
        self.schedule.plan.progress(
            ProgressEvent(
                f"{now.run_id} attempt {now.number}: verifying",
                now.run_id,
                now.state or "verifying",
            )
        )
        if not self._trusted(seen):
            return  # the batch stopped: no verifier container is started after that
        try:
            verification = self.verifier.verify(spec, now.evidence.solution, now.run_id)
        except AgentEvalError as exc:
            # Whatever kept the verifier from a trusted result, it is not the agent's doing.
            seen.infrastructure_error = str(exc)
            seen.infrastructure_kind = _verifier_kind(exc)
            self._trusted(seen)
            return
        if not self._trusted(seen):
            return
        kept = self._redacted(ANALYSIS_FILE, verification.analysis_json, seen)
        with self.schedule.evidence_writes(now.run_id, now.number) as open_:
            if not open_:
                return
            write_bytes_atomic(now.evidence.analysis, kept)
        seen.verification_retries = verification.retried
        seen.analysis = verification.analysis
        if kept != verification.analysis_json:
            # The record's diagnostics come from the analysis: they carry no value either
            # (and, should the redacted text no longer parse, are redacted in the record).
            with contextlib.suppress(ValueError):
                seen.analysis = type(seen.analysis).model_validate_json(kept)
        seen.analysis_digest = sha256_bytes(kept)
        seen.behaviour = verification.behaviour

    def _gateway_use(
        self, route: GatewayRoute, now: _Attempt, seen: AttemptObservations
    ) -> str | None:
        """Save the attempt's gateway records and judge them; the provider failure, if any.

        A served model outside the accepted set is an identity mismatch and a
        spent token budget exhausts the attempt; both stop the batch after it.
        """
        schedule = self.schedule
        gateway = schedule.plan.gateway
        assert gateway is not None
        data = gateway.close_route(route)
        records = parse_records(data)
        data = self._redacted(GATEWAY_RECORD_FILE, data, seen)
        with schedule.evidence_writes(now.run_id, now.number) as open_:
            if open_:
                write_bytes_atomic(now.evidence.gateway_record, data)
        seen.gateway = summarise(records, sha256_bytes(data))
        accepted = gateway.accepted_models()
        for record in records:
            allowed = accepted.get(record.upstream or "", frozenset())
            if record.servedModel and record.servedModel not in allowed:
                seen.identity_problem = (
                    f"{record.upstream} served {record.servedModel!r}, not one of "
                    f"{sorted(allowed)}: no fallback model is accepted"
                )
                schedule.rule_stop = f"identity mismatch: {seen.identity_problem}"
                break
        if seen.identity_problem is None and (why := unmeasured(records)) is not None:
            seen.identity_problem = why
            schedule.rule_stop = f"identity mismatch: {why}"
        reflected = [r for r in records if r.failure == "credential-reflected"]
        if reflected:
            # The gateway refused the answer, so nothing reached the runner; an upstream
            # that hands the credential back is not one a batch goes on with.
            schedule.rule_stop = schedule.rule_stop or (
                f"credential reflected: {reflected[0].upstream} answered "
                f"{reflected[0].method} {reflected[0].path} with the model credential in it; "
                "the gateway refused the answer and the batch stops"
            )
        spent = schedule.spend(seen.gateway.inputTokens + seen.gateway.outputTokens)
        budget = schedule.plan.token_budget
        if "budget" in seen.gateway.failures or (budget is not None and spent >= budget):
            seen.budget_exhausted = "budget" in seen.gateway.failures
            seen.budget_message = f"the batch's token budget of {budget} is spent ({spent} used)"
            schedule.rule_stop = schedule.rule_stop or seen.budget_message
        # An attempt the gateway answered nothing for is judged only once the
        # gateway is known to answer: a dead or frozen one is never the agent's.
        problem = gateway.problem(probe=seen.gateway.answered == 0)
        if problem is not None:
            return f"the model gateway stopped serving: {problem}"
        return provider_problem(records)

    def _runner_log(
        self, attempt: AttemptDirectory, outcome: RunnerOutcome, seen: AttemptObservations
    ) -> str:
        """Write runner.log (the stderr's end and the response's message, redacted)."""
        tail = outcome.stderr[-RUNNER_LOG_BYTES:].decode("utf-8", errors="replace")
        if outcome.stderr:
            size = len(outcome.stderr)
            text = f"runner stderr (its last {len(tail)} characters, of {size} bytes):\n"
            text += tail.rstrip("\n") + "\n"
        else:
            text = "runner stderr: nothing\n"
        verdict = seen.response
        if verdict is not None and verdict.response is not None and verdict.response.message:
            text += f"runner message: {verdict.response.message}\n"
        elif verdict is not None and verdict.message:
            text += f"response: {verdict.message}\n"
        data = self._redacted(RUNNER_LOG_FILE, text.encode("utf-8"), seen)
        write_bytes_atomic(attempt.runner_log, data)
        return sha256_bytes(data)

    def _transcript(
        self, attempt: AttemptDirectory, outcome: RunnerOutcome, seen: AttemptObservations
    ) -> str | None:
        """Write transcript.jsonl (bounded at a line, the cut marked, redacted), if one was kept."""
        data = outcome.transcript
        if not data:
            return None
        cut = len(data) > MAX_TRANSCRIPT_BYTES
        if cut:
            data = data[:MAX_TRANSCRIPT_BYTES]
            data = data[: data.rfind(b"\n") + 1]
        text = data.decode("utf-8", errors="replace")
        if cut:
            marker = {"agentEvalTranscriptCut": True, "keptBytes": len(data)}
            text += json.dumps(marker) + "\n"
        kept = self._redacted(TRANSCRIPT_FILE, text.encode("utf-8"), seen)
        write_bytes_atomic(attempt.transcript, kept)
        return sha256_bytes(kept)

    def _secrets(self, seen: AttemptObservations) -> dict[str, str]:
        """Name to value: every allowlisted value and the attempt's own (its token)."""
        values = {**self.schedule.plan.redactions, **seen.redactions}
        return {name: value for value, name in values.items()}

    def _redacted(self, name: str, data: bytes, seen: AttemptObservations) -> bytes:
        """*data*, to be stored as *name*, with every spelling of every secret replaced;
        which names were found is noted for the attempt's record."""
        kept = redact_evidence(data, self._secrets(seen))
        if kept.found:
            seen.redacted[name] = sorted(kept.found)
        if kept.withheld:
            seen.withheld.add(name)
        return kept.data

    def _without_secrets(self, record: AttemptRecord, seen: AttemptObservations) -> AttemptRecord:
        """*record* with its diagnostics (the runner's message, the analysis's findings)
        redacted: the receipt, the report and the summary show them."""
        secrets = self._secrets(seen)
        diagnostics = [
            d.model_copy(update={"message": _redacted_message(d.message, secrets)})
            for d in record.diagnostics
        ]
        return record.model_copy(update={"diagnostics": diagnostics})

    def _redact_solution(self, now: _Attempt) -> None:
        """Redact the collected files in place; a solution that carries a secret is not
        verified (the attempt fails as a safety problem) and never stored as it came."""
        collection, seen = now.seen.collection, now.seen
        assert collection is not None
        for index, file in enumerate(collection.files):
            path = now.evidence.solution / file.path
            data = path.read_bytes()
            kept = self._redacted(f"{SOLUTION_DIR}/{file.path}", data, seen)
            if kept != data:
                write_bytes_atomic(path, kept)
                collection.files[index] = file.model_copy(
                    update={"sha256": sha256_bytes(kept), "size": len(kept)}
                )
                seen.secret_in_solution = True


def _anchor(plan: BatchPlan) -> Path:
    """Where each workspace is made and removed from, following no link below it."""
    if plan.work_anchor is not None:
        return plan.work_anchor
    plan.work_dir.mkdir(parents=True, exist_ok=True)  # a plan without one: made by name
    return plan.work_dir


def _workspace(plan: BatchPlan, run_id: str, number: int) -> Path:
    """The attempt's workspace: what the runner writes, mounted at /solution."""
    return plan.work_dir / run_id / f"attempt-{number}"


def _redacted_message(message: str, secrets: dict[str, str]) -> str:
    """A diagnostic's *message* as the receipt may hold it: read as a stored file is (a
    value escaped or split in it is found too), bounded."""
    kept = redact_evidence(message.encode("utf-8"), secrets).data
    return kept.decode("utf-8", errors="replace")[:MAX_DIAGNOSTIC_CHARS]


class LocalExecutor:
    """This machine's threads: the plan's *slots* runs at once, sharing its engine and gateway."""

    def __init__(self, attempts: Attempts) -> None:
        self._attempts = attempts
        self._slots = attempts.schedule.plan.slots
        self._pool = ThreadPoolExecutor(max_workers=self._slots, thread_name_prefix="run")

    def slots(self) -> int:
        return self._slots

    def submit(self, run_id: str) -> Future[RunRecord]:
        return self._pool.submit(self._attempts.run, run_id)

    def rule_stop(self) -> str | None:
        return self._attempts.schedule.rule_stop

    def lost(self) -> None:
        """Never: this machine's threads go as the batch goes."""
        return None

    def stop_everything(self, reason: str) -> list[str]:
        return self._attempts.stop_everything(reason)

    def unfinished(self, run_id: str, reason: str) -> RunRecord:
        return self._attempts.schedule.unfinished(run_id, reason)

    def shutdown(self, *, wait: bool) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def settle(self, runs: Collection[Future[RunRecord]], timeout_s: float) -> bool:
        # A future is done once its thread has returned: nothing of the run runs after it.
        _, running = wait(runs, timeout=timeout_s)
        return not running


def on_this_engine(runner: RunnerPort, verifier: Verifier) -> ExecutorFactory:
    """The executor of runs on this machine's threads, through *runner* and *verifier*."""

    def executor(schedule: Schedule) -> RunExecutor:
        return LocalExecutor(Attempts(schedule, runner, verifier))

    return executor


def _verifier_kind(exc: AgentEvalError) -> InfrastructureKind:
    """Which party a verification that gave no trusted result failed on."""
    if isinstance(exc, (CleanupError, EngineUnavailableError)):
        return "engine"
    if "did not start" in str(exc):
        return "verifier-start"
    return "verifier"


def _infrastructure_words(record: AttemptRecord, limit: int = 500) -> str:
    for diagnostic in record.diagnostics:
        if diagnostic.category in ("infrastructure", "provider"):
            text = diagnostic.message
            return text if len(text) <= limit else text[: limit - 3] + "..."
    return "no diagnostic was recorded"
