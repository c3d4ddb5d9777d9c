"""Running the schedule: every scheduled run, its attempts, and a receipt after each run.

Each scheduled run is a fresh agent context: a fresh workspace, a first
attempt and, when the rules allow, one repair. There is no automatic
replacement run. The receipt is rewritten atomically after every run, so an
interrupted or crashed batch leaves a truthful partial receipt.
"""

from __future__ import annotations

import errno
import json
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval.batch.collection import collect_solution
from agent_eval.batch.judging import AttemptObservations, judge_attempt, repair_feedback
from agent_eval.batch.ports import (
    GatewayPort,
    GatewayRoute,
    RunExecutor,
    RunnerOutcome,
    RunnerPort,
)
from agent_eval.batch.progress import ProgressEvent, RunState, Tally, duration, run_outcome
from agent_eval.batch.response import ResponseVerdict, judge_response
from agent_eval.batch.signals import Stop
from agent_eval.digests import sha256_bytes
from agent_eval.errors import AgentEvalError
from agent_eval.evidence_io import write_bytes_atomic, write_model_atomic
from agent_eval.gateway.host import parse_records, provider_problem, summarise, unmeasured
from agent_eval.layout import MAX_TRANSCRIPT_BYTES, AttemptDirectory, RunDirectory
from agent_eval.models import (
    AttemptRecord,
    BatchStatus,
    ModelIdentity,
    ProtectedInputs,
    Receipt,
    RepairFeedback,
    RunnerIdentity,
    RunnerRequest,
    RunRecord,
    TaskSpec,
)
from agent_eval.verification.protocol import Verifier

__all__ = [
    "BatchPlan",
    "ExecutorFactory",
    "LocalExecutor",
    "ReceiptNotWritten",
    "Schedule",
    "ScheduledTask",
    "describe_failure",
    "run_schedule",
]

Clock = Callable[[], datetime]
RUNNER_LOG_BYTES = 8 * 1024
"""The end of the runner's stderr kept in runner.log."""


@dataclass(frozen=True)
class ScheduledTask:
    """A task as the schedule needs it: its spec, prompt and starter files."""

    spec: TaskSpec
    prompt: str
    starter_dir: Path | None


@dataclass
class BatchPlan:
    """Everything fixed before the first run starts."""

    batch_dir: Path
    work_dir: Path
    run_ids: list[str]
    tasks: dict[str, ScheduledTask]
    runner: RunnerIdentity
    model: ModelIdentity
    submission_timeout_s: float
    batch_timeout_s: float
    concurrency: int
    consumer_dir_in_runner: str
    output_dir_in_runner: str
    protected_digest: Callable[[], str]
    receipt: Receipt
    progress: Callable[[ProgressEvent], None] = field(default=lambda _event: None)
    disk_problem: Callable[[], str | None] = field(default=lambda: None)
    """Why the disk under the work directory cannot be trusted now (it is full), if it cannot:
    a runner or a verifier that could not write is then not the agent's failure."""
    gateway: GatewayPort[Any] | None = None
    """The batch's model gateway (None: the runner reaches nothing)."""
    token_budget: int | None = None
    """Tokens the whole batch may spend, as the gateway saw them reported."""
    redactions: Mapping[str, str] = field(default_factory=dict)
    """Values never written into runner.log, each replaced by its name."""


class ReceiptNotWritten(Exception):
    """The final receipt could not be written (the last one written stands)."""

    def __init__(self, receipt: Receipt, cause: OSError) -> None:
        super().__init__(f"the final receipt could not be written: {describe_failure(cause)}")
        self.receipt = receipt
        self.cause = cause


def describe_failure(exc: BaseException, where: Path | None = None) -> str:
    """What failed, in words an operator acts on (a full disk says so, and where)."""
    place = f" ({where})" if where is not None else ""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"the disk is full where the evidence is written{place}: {exc.strerror}"
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return f"the evidence directory became read-only{place}: {exc.strerror}"
    if isinstance(exc, AgentEvalError):
        return str(exc)
    return f"the harness failed: {type(exc).__name__}: {exc}"


class _Book:
    """The receipt under construction; every update is written atomically.

    A run is added to the book before the receipt is written, so a write
    that fails (a full disk) loses nothing: the final write has every run.
    When the disk is full, the space reserved at the start is given back for
    the final write.
    """

    def __init__(self, plan: BatchPlan, clock: Clock) -> None:
        self._plan = plan
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: dict[str, RunRecord] = {}
        self.receipt = plan.receipt

    def add_run(self, record: RunRecord) -> None:
        with self._lock:
            self._runs[record.runId] = record

    def finish_run(self, record: RunRecord) -> None:
        with self._lock:
            self._runs[record.runId] = record
            self._write("running", [])

    def close(self, status: BatchStatus, reasons: list[str]) -> Receipt:
        """Write the final receipt.

        Raises:
            ReceiptNotWritten: Even with the reserved space given back.
        """
        with self._lock:
            try:
                return self._write(status, reasons)
            except OSError as exc:
                reserve = RunDirectory(self._plan.batch_dir).reserve
                if exc.errno != errno.ENOSPC or not reserve.exists():
                    raise ReceiptNotWritten(self.receipt, exc) from exc
                reserve.unlink()
            try:
                return self._write(status, reasons)
            except OSError as exc:
                raise ReceiptNotWritten(self.receipt, exc) from exc

    def _write(self, status: BatchStatus, reasons: list[str]) -> Receipt:
        runs = [self._runs[r] for r in self._plan.run_ids if r in self._runs]
        receipt = self.receipt.model_copy(
            update={
                "status": status,
                "reasons": [*self._plan.receipt.reasons, *reasons],
                "updatedAt": self._clock(),
                "runs": runs,
                "firstSuccesses": sum(r.firstSuccess for r in runs),
                "finalSuccesses": sum(r.finalSuccess for r in runs),
            }
        )
        Receipt.model_validate(receipt.model_dump())
        write_model_atomic(RunDirectory(self._plan.batch_dir).receipt, receipt)
        self.receipt = receipt
        return receipt


def run_schedule(
    plan: BatchPlan,
    runner: RunnerPort,
    verifier: Verifier,
    *,
    clock: Clock = lambda: datetime.now(UTC),
    monotonic: Callable[[], float] = time.monotonic,
    grace_s: float = 60.0,
    executor: ExecutorFactory | None = None,
) -> Receipt:
    """Run every scheduled run with bounded concurrency and return the final receipt.

    The runs execute on *executor* (made from the schedule), this machine's
    threads by default. A run whose every failure is the loss of its cluster
    node costs only that run: the batch goes on with the other nodes and ends
    ``infrastructure-failure``; when no node is left, the runs not started are
    recorded as such.

    Whatever ends the schedule leaves a final status, never ``running``: a
    signal (:class:`~agent_eval.batch.signals.Stop`, or KeyboardInterrupt)
    ``interrupted``, an infrastructure failure in a run, or any error of the
    harness itself (a full disk included), ``infrastructure-failure``. Then
    the runner and verifier containers are killed, the runs in flight are
    given *grace_s* to come back, and each run still unfinished is recorded
    with the attempts it finished and an infrastructure failure for the one
    it was in; every finished run is recorded.

    Raises:
        ReceiptNotWritten: The final receipt could not be written.
    """
    book = _Book(plan, clock)
    book.close("running", [])
    schedule = Schedule(
        plan,
        runner,
        verifier,
        clock=clock,
        monotonic=monotonic,
        deadline=monotonic() + plan.batch_timeout_s,
    )
    pending = list(plan.run_ids)
    status: BatchStatus = "completed"
    reasons: list[str] = []
    done = 0
    stopped_by: str | None = None
    in_flight: dict[Future[RunRecord], str] = {}
    try:
        # Inside: an executor that cannot be made is the harness's failure, with a receipt.
        runs = (executor or LocalExecutor)(schedule)
    except Exception as exc:
        return book.close("infrastructure-failure", [describe_failure(exc, plan.batch_dir)])
    plan.progress(
        ProgressEvent(
            f"{len(pending)} runs scheduled, {runs.slots()} at a time",
            scheduled=tuple(pending),
        )
    )
    try:
        while pending or in_flight:
            while pending and len(in_flight) < runs.slots() and not schedule.stop.is_set():
                if monotonic() >= schedule.deadline:
                    break
                run_id = pending.pop(0)
                in_flight[runs.submit(run_id)] = run_id
            if not in_flight:
                break
            finished, _ = wait(in_flight, timeout=GATEWAY_WATCH_S, return_when=FIRST_COMPLETED)
            if (lost := _gateway_lost(plan)) is not None:
                raise _GatewayLost(lost)
            for future in finished:
                # A run whose result raises stays in flight: it is recorded as cut short.
                record = future.result()
                run_id = in_flight.pop(future)
                book.finish_run(record)
                done += 1
                state, words = run_outcome(record)
                infrastructure = state == "infrastructure"
                took = duration(sum(a.durationMs for a in record.attempts) / 1000)
                tally = Tally(
                    done, len(plan.run_ids), book.receipt.firstSuccesses,
                    book.receipt.finalSuccesses,
                )  # fmt: skip
                plan.progress(
                    ProgressEvent(
                        f"{run_id} {words} (took {took}); {done}/{tally.total} runs done, "
                        f"{tally.first} first / {tally.final} final successes",
                        run_id,
                        state,
                        tally,
                    )
                )
                if infrastructure and _node_lost(record):
                    # Only that node's runs are lost: the others go on elsewhere.
                    status = "infrastructure-failure"
                    reasons.append(
                        f"infrastructure failure in {run_id}: the node running it was lost; "
                        "the other runs went on"
                    )
                elif infrastructure:
                    status = "infrastructure-failure"
                    reason = f"infrastructure failure in {run_id}; the batch stopped"
                    reasons.append(reason)
                    schedule.stop.set()
                elif status == "completed" and (
                    runs.rule_stop() is not None
                    or any(a.failureCategory == "identity-mismatch" for a in record.attempts)
                ):
                    # The first identity mismatch or a spent token budget: the other runs
                    # would spend tokens on a batch that cannot qualify.
                    status = "stopped"
                    why = runs.rule_stop() or "the runner reported another identity"
                    reasons.append(f"{why} (in {run_id}); the batch stopped")
                    schedule.stop.set()
        if pending and not schedule.stop.is_set():
            why = (
                "the batch time budget was spent"
                if runs.slots() > 0
                else "no node is left to run them"
            )
            reasons.append(f"{why}; {len(pending)} run(s) not started: " + ", ".join(pending))
            for run_id in pending:
                book.add_run(_not_started(plan, run_id))
    except _GatewayLost as exc:
        # Every attempt in flight would fail for want of its model: none is the agent's.
        status = "infrastructure-failure"
        stopped_by = f"the model gateway stopped serving: {exc}; the batch stopped"
    except (Stop, KeyboardInterrupt) as exc:
        status = "interrupted"
        stopped_by = exc.reason if isinstance(exc, Stop) else "interrupted by the operator (Ctrl-C)"
    except Exception as exc:  # the harness itself failed: the receipt must still close
        status = "infrastructure-failure"
        stopped_by = describe_failure(exc, plan.batch_dir)
    if stopped_by is not None:
        reasons.append(stopped_by)
        reasons += runs.stop_everything(stopped_by)
        runs.shutdown(wait=False)
        wait(in_flight, timeout=grace_s)
        for future, run_id in in_flight.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                book.add_run(future.result())
            else:
                book.add_run(runs.unfinished(run_id, stopped_by))
    else:
        runs.shutdown(wait=True)
    return book.close(status, reasons)


GATEWAY_WATCH_S = 2.0
"""How often the schedule asks whether the gateway's container still runs, while runs are
in flight: a gateway that dies stops the batch within this, not at the next attempt's end."""


class _GatewayLost(Exception):
    """The batch's gateway stopped serving (the message says how)."""


def _gateway_lost(plan: BatchPlan) -> str | None:
    """Why the batch's gateway is not serving, by its container's state; None while it is
    (or the engine cannot say: each attempt then finds out for itself)."""
    if plan.gateway is None:
        return None
    try:
        return plan.gateway.problem()
    except Exception:  # an engine away for a moment is not a dead gateway
        return None


def _node_lost(record: RunRecord) -> bool:
    failed = [a for a in record.attempts if a.infrastructureStatus == "failed"]
    return bool(failed) and all(a.infrastructureKind == "node" for a in failed)


ExecutorFactory = Callable[["Schedule"], RunExecutor]
"""Makes the executor a schedule's runs execute on, from the schedule."""


class LocalExecutor:
    """This machine's threads: *concurrency* runs at once, sharing its engine and gateway."""

    def __init__(self, schedule: Schedule) -> None:
        self._schedule = schedule
        self._slots = schedule.plan.concurrency
        self._pool = ThreadPoolExecutor(max_workers=self._slots, thread_name_prefix="run")

    def slots(self) -> int:
        return self._slots

    def submit(self, run_id: str) -> Future[RunRecord]:
        return self._pool.submit(self._schedule.run, run_id)

    def rule_stop(self) -> str | None:
        return self._schedule.rule_stop

    def stop_everything(self, reason: str) -> list[str]:
        return self._schedule.stop_everything(reason)

    def unfinished(self, run_id: str, reason: str) -> RunRecord:
        return self._schedule.unfinished(run_id, reason)

    def shutdown(self, *, wait: bool) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


def _not_started(plan: BatchPlan, run_id: str) -> RunRecord:
    task = plan.tasks[run_id.rsplit("-", 1)[0]]
    return RunRecord(
        runId=run_id,
        taskId=task.spec.id,
        repetition=int(run_id.rsplit("-", 1)[1]),
        firstSuccess=False,
        finalSuccess=False,
        attempts=[],
    )


@dataclass
class Schedule:
    """What every run of one schedule shares: the plan, the ports, the clocks, the deadline."""

    plan: BatchPlan
    runner: RunnerPort
    verifier: Verifier
    clock: Clock
    monotonic: Callable[[], float]
    deadline: float
    """The batch's deadline on the monotonic clock."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when no further attempt may start (interruption, infrastructure failure)."""
    stop_reason: str | None = None
    """Why the batch stopped, when a signal or a failure of the harness stopped it: an
    attempt that ends after that is the batch's doing, never the agent's."""
    rule_stop: str | None = None
    """Why a rule stops the batch after the attempt that broke it (a served model outside
    the accepted set, a spent token budget): no further attempt starts."""
    tokens: int = 0
    """Tokens the gateway saw reported so far."""
    finished: dict[str, list[AttemptRecord]] = field(default_factory=dict)
    """The attempts each run has finished so far (for runs cut short)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def evidence(self) -> RunDirectory:
        return RunDirectory(self.plan.batch_dir)

    def run(self, run_id: str) -> RunRecord:
        """One scheduled run: a first attempt and, when the rules allow, one repair."""
        task = self.plan.tasks[run_id.rpartition("-")[0]]
        feedback: RepairFeedback | None = None
        previous: Path | None = task.starter_dir
        for number in (1, 2):
            if self.stop.is_set():
                break
            record = self._attempt(run_id, task, number, feedback, previous)
            with self._lock:
                self.finished.setdefault(run_id, []).append(record)
            feedback = repair_feedback(record)
            if feedback is None:
                break
            previous = self.evidence.attempt(run_id, number).solution
        return self._record(run_id, self.finished.get(run_id, []))

    def stop_everything(self, reason: str) -> list[str]:
        """Stop every attempt in flight; returns what could not be stopped, as reasons."""
        self.stop_reason = reason
        self.stop.set()
        problems = []
        for port in (self.runner, self.verifier):
            try:
                port.cancel_all()
            except Exception as exc:  # the receipt must close whatever the engine does
                problems.append(f"stopping the containers in flight: {describe_failure(exc)}")
        return problems

    def unfinished(self, run_id: str, reason: str) -> RunRecord:
        """A run the batch stopped: its finished attempts, then the one it was in, failed."""
        with self._lock:
            attempts = list(self.finished.get(run_id, []))
        feedback = repair_feedback(attempts[-1]) if attempts else None
        if not attempts or feedback is not None:
            cut = AttemptObservations(
                attempt=len(attempts) + 1,
                started_at=self.clock(),
                duration_ms=0,
                infrastructure_error=f"the batch stopped during this attempt: {reason}",
                repair_feedback=feedback,
            )
            attempts.append(judge_attempt(cut))
        return self._record(run_id, attempts)

    def failed(self, run_id: str, error: str, *, node_lost: bool = False) -> RunRecord:
        """A run that came back as nothing but an infrastructure failure (from elsewhere)."""
        seen = AttemptObservations(
            attempt=1,
            started_at=self.clock(),
            duration_ms=0,
            infrastructure_error=error,
            infrastructure_kind="node" if node_lost else "engine",
        )
        return self._record(run_id, [judge_attempt(seen)])

    @staticmethod
    def _record(run_id: str, attempts: list[AttemptRecord]) -> RunRecord:
        task_id, _, repetition = run_id.rpartition("-")
        return RunRecord(
            runId=run_id,
            taskId=task_id,
            repetition=int(repetition),
            firstSuccess=bool(attempts) and attempts[0].success,
            finalSuccess=bool(attempts) and attempts[-1].success,
            attempts=attempts,
        )

    def _gateway_use(
        self, route: GatewayRoute, attempt: AttemptDirectory, seen: AttemptObservations
    ) -> str | None:
        """Save the attempt's gateway records and judge them; the provider failure, if any.

        A served model outside the accepted set is an identity mismatch and a
        spent token budget exhausts the attempt; both stop the batch after it.
        """
        gateway = self.plan.gateway
        assert gateway is not None
        data = gateway.close_route(route)
        write_bytes_atomic(attempt.gateway_record, data)
        records = parse_records(data)
        seen.gateway = summarise(records, sha256_bytes(data))
        accepted = gateway.accepted_models()
        for record in records:
            allowed = accepted.get(record.upstream or "", frozenset())
            if record.servedModel and record.servedModel not in allowed:
                seen.identity_problem = (
                    f"{record.upstream} served {record.servedModel!r}, not one of "
                    f"{sorted(allowed)}: no fallback model is accepted"
                )
                self.rule_stop = f"identity mismatch: {seen.identity_problem}"
                break
        if seen.identity_problem is None and (why := unmeasured(records)) is not None:
            seen.identity_problem = why
            self.rule_stop = f"identity mismatch: {why}"
        with self._lock:
            self.tokens += seen.gateway.inputTokens + seen.gateway.outputTokens
            spent = self.tokens
        budget = self.plan.token_budget
        if "budget" in seen.gateway.failures or (budget is not None and spent >= budget):
            seen.budget_exhausted = "budget" in seen.gateway.failures
            seen.budget_message = f"the batch's token budget of {budget} is spent ({spent} used)"
            self.rule_stop = self.rule_stop or seen.budget_message
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
        data = self._redact(text, seen.redactions).encode("utf-8")
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
        text = self._redact(data.decode("utf-8", errors="replace"), seen.redactions)
        if cut:
            marker = {"agentEvalTranscriptCut": True, "keptBytes": len(data)}
            text += json.dumps(marker) + "\n"
        kept = text.encode("utf-8")
        write_bytes_atomic(attempt.transcript, kept)
        return sha256_bytes(kept)

    def _redact(self, text: str, extra: Mapping[str, str]) -> str:
        """Every allowlisted value (and the attempt's token) replaced by its name."""
        values = {**self.plan.redactions, **extra}
        for value, name in sorted(values.items(), key=lambda kv: -len(kv[0])):
            if len(value) >= 4:
                text = text.replace(value, f"${name}")
        return text

    def _attempt(
        self,
        run_id: str,
        task: ScheduledTask,
        number: int,
        feedback: RepairFeedback | None,
        seed_dir: Path | None,
    ) -> AttemptRecord:
        plan = self.plan
        started = self.monotonic()
        evidence = self.evidence.attempt(run_id, number)
        evidence.root.mkdir(parents=True, exist_ok=False)
        workspace = plan.work_dir / run_id / f"attempt-{number}"
        if seed_dir is not None and seed_dir.is_dir():
            shutil.copytree(seed_dir, workspace, symlinks=True)
        else:
            workspace.mkdir(parents=True)
        seen = AttemptObservations(
            attempt=number, started_at=self.clock(), duration_ms=0, repair_feedback=feedback
        )

        ran: list[RunnerOutcome] = []

        def observed() -> AttemptRecord:
            seen.duration_ms = int((self.monotonic() - started) * 1000)
            if ran:
                seen.runner_log_digest = self._runner_log(evidence, ran[0], seen)
                seen.transcript_digest = self._transcript(evidence, ran[0], seen)
                seen.resources = ran[0].resources
            return judge_attempt(seen)

        remaining = self.deadline - self.monotonic()
        budget_bound = remaining < plan.submission_timeout_s
        timeout_s = max(0.0, min(plan.submission_timeout_s, remaining))
        if timeout_s <= 0:
            seen.budget_exhausted = True
            return observed()
        request = RunnerRequest(
            schemaVersion=1,
            runId=run_id,
            taskId=task.spec.id,
            taskText=task.prompt,
            consumerDir=plan.consumer_dir_in_runner,
            outputDir=plan.output_dir_in_runner,
            allowedOutputPaths=task.spec.allowedOutputPaths,
            attempt=number,
            timeBudgetMs=max(1, int(timeout_s * 1000)),
            repairFeedback=feedback,
        )
        # A repair shows as one state throughout, its runner and its verification alike.
        repair: RunState | None = "repairing" if number > 1 else None
        plan.progress(
            ProgressEvent(f"{run_id} attempt {number}: runner started", run_id, repair or "running")
        )
        before = plan.protected_digest()
        route = plan.gateway.open_route(run_id, number) if plan.gateway else None
        if route is not None:
            seen.redactions = {value: name for name, value in route.environment.items()}
        outcome = self.runner.run_attempt(
            request, workspace, timeout_s, route.environment if route else None
        )
        ran.append(outcome)
        try:
            after: str | None = plan.protected_digest()
        except OSError:
            after = None
        seen.protected = ProtectedInputs(before=before, after=after)
        provider: str | None = None
        if route is not None:
            try:
                provider = self._gateway_use(route, evidence, seen)
            except AgentEvalError as exc:
                seen.infrastructure_error = f"the model gateway's record: {exc}"
                seen.infrastructure_kind = "provider"
                return observed()
        if self.stop_reason is not None:
            # Its container was killed because the batch stopped: nothing here is the agent's.
            seen.infrastructure_error = f"the batch stopped during this attempt: {self.stop_reason}"
            seen.infrastructure_kind = "stopped"
            return observed()
        if outcome.infrastructure_error is not None:
            seen.infrastructure_error = outcome.infrastructure_error
            return observed()
        if (problem := plan.disk_problem()) is not None:
            seen.infrastructure_error, seen.infrastructure_kind = problem, "disk"
            return observed()
        if seen.identity_problem is not None or seen.budget_exhausted:
            return observed()
        verdict = None
        if not outcome.timed_out and outcome.exit_code == 0:
            verdict = judge_response(
                outcome.stdout,
                truncated=outcome.stdout_truncated,
                request=request,
                runner=plan.runner,
                model=plan.model,
            )
        completed = verdict is not None and verdict.response is not None
        completed = completed and verdict.response.status == "completed"  # type: ignore[union-attr]
        said_provider = (
            verdict is not None
            and verdict.response is not None
            and verdict.response.failureKind == "provider"
        )
        if not completed and (provider is not None or said_provider):
            # The model API failed: whatever the runner did after, it is not the agent's.
            message = verdict.response.message if verdict and verdict.response else None
            seen.response = verdict
            seen.infrastructure_error = (
                provider or f"the runner reports its model provider failed: {message}"
            )
            seen.infrastructure_kind = "provider"
            return observed()
        if outcome.engine_lost and not outcome.timed_out and not completed:
            # The engine collects the runner's output: while it was away, that output
            # (and the exit status it reports) may be lost, so nothing here is the agent's.
            seen.infrastructure_error = (
                "the engine could not be reached while the runner ran and the runner left "
                "no completed response: its output may have been lost with the engine"
            )
            return observed()
        if outcome.timed_out:
            seen.timed_out, seen.budget_exhausted = not budget_bound, budget_bound
            return observed()
        if outcome.exit_code != 0:
            seen.response = ResponseVerdict(
                None, "invalid-response", f"the runner exited with status {outcome.exit_code}"
            )
            return observed()
        assert verdict is not None
        seen.response = verdict
        if verdict.response is None or verdict.response.status != "completed" or after != before:
            return observed()
        collection = collect_solution(workspace, evidence.solution, task.spec.allowedOutputPaths)
        seen.collection = collection
        if collection.hostile or not collection.files:
            return observed()
        plan.progress(
            ProgressEvent(f"{run_id} attempt {number}: verifying", run_id, repair or "verifying")
        )
        try:
            verification = self.verifier.verify(task.spec, evidence.solution, run_id)
        except AgentEvalError as exc:
            # Whatever kept the verifier from a trusted result, it is not the agent's doing.
            seen.infrastructure_error = str(exc)
            return observed()
        if self.stop_reason is not None:
            seen.infrastructure_error = f"the batch stopped during this attempt: {self.stop_reason}"
            seen.infrastructure_kind = "stopped"
            return observed()
        if (problem := plan.disk_problem()) is not None:
            seen.infrastructure_error, seen.infrastructure_kind = problem, "disk"
            return observed()
        write_bytes_atomic(evidence.analysis, verification.analysis_json)
        seen.verification_retries = verification.retried
        seen.analysis = verification.analysis
        seen.analysis_digest = sha256_bytes(verification.analysis_json)
        seen.behaviour = verification.behaviour
        return observed()
