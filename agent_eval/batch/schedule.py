"""Running the schedule: every scheduled run, where it executes, and a receipt after each run.

Each scheduled run is a fresh agent context: a fresh workspace, a first
attempt and, when the rules allow, one repair (:mod:`agent_eval.batch.attempt`).
There is no automatic replacement run. The receipt is rewritten atomically
after every run (:mod:`agent_eval.batch.receipt_book`), so an interrupted or
crashed batch leaves a truthful partial receipt.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_eval.batch.judging import AttemptObservations, judge_attempt, repair_feedback
from agent_eval.batch.ports import GatewayPort, RunExecutor
from agent_eval.batch.progress import ProgressEvent, Tally, duration, run_outcome
from agent_eval.batch.receipt_book import ReceiptBook, ReceiptNotWritten, describe_failure
from agent_eval.batch.signals import ABANDON, Stop
from agent_eval.digests import DigestError, file_sha256, regular_files
from agent_eval.layout import RunDirectory
from agent_eval.models import (
    MAX_TRIES_PER_ATTEMPT,
    RETRYABLE_KINDS,
    AttemptRecord,
    BatchStatus,
    ModelIdentity,
    Receipt,
    RunnerIdentity,
    RunRecord,
    TaskSpec,
)

__all__ = [
    "BatchPlan",
    "ExecutorFactory",
    "ReceiptNotWritten",
    "Schedule",
    "ScheduledTask",
    "SharedSlots",
    "describe_failure",
    "left_files",
    "run_schedule",
]

Clock = Callable[[], datetime]


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
    submission_timeout_ms: int
    """runner.json's submissionTimeoutMs: each attempt's time budget, at most."""
    batch_timeout_ms: int
    """runner.json's batchTimeoutMs: the whole schedule's time."""
    slots: int
    """Runs in flight at once here: runner.json's concurrency, or a node's engine count."""
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
    retry_budget: int | None = None
    """Infrastructure tries the whole batch may run again (None: one per scheduled run,
    at least :data:`MIN_RETRY_BUDGET`); once spent, the next infrastructure failure stops
    the batch."""
    work_anchor: Path | None = None
    """The directory the project names that *work_dir* lies below (the evidence directory,
    a node's root): each attempt's workspace is made and removed from it one name at a
    time, following no link. None: *work_dir* itself."""
    engine_problem: Callable[[], str | None] = field(default=lambda: None)
    """Why the batch's engine does not answer now (None: it does). Asked only once tries
    have kept failing on it: an engine gone for good stops the batch rather than spend
    its retry budget waiting."""


@dataclass
class Schedule:
    """What every run of one schedule shares: the plan, the clocks, the deadline, the stop."""

    plan: BatchPlan
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
    started: dict[str, tuple[int, datetime]] = field(default_factory=dict)
    """The attempt each run is in and when it started (for runs cut short: their real
    start)."""
    retried: list[str] = field(default_factory=list)
    """Why each infrastructure try run again so far failed (its kind and reason)."""
    infrastructure_failures: int = 0
    """Tries of attempts that ended in infrastructure a repeat may cure, so far."""
    engine_gone: str | None = None
    """Why the engine is taken for gone (see :meth:`note_try`), once it is."""
    _engine_failing: tuple[int, float] = (0, 0.0)
    """Tries in a row (over every run) that failed on the engine, and when the first did."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sealed: set[tuple[str, int]] = field(default_factory=set)
    """Attempts booked as cut short: what they left was counted, nothing more is written."""
    _writes: threading.RLock = field(default_factory=threading.RLock)

    @contextmanager
    def evidence_writes(self, run_id: str, number: int) -> Iterator[bool]:
        """Whether attempt *number* of *run_id* may still write its evidence, held while it does.

        A run the batch books as cut short (:meth:`unfinished`) has what its attempt left
        counted into its record; an attempt thread that goes on after that (its container
        removed by the cleanup, a second signal that stopped the wait) must not add a file
        the receipt does not account for. The booking and every write take turns.
        """
        with self._writes:
            yield (run_id, number) not in self._sealed

    @property
    def retry_budget(self) -> int:
        budget = self.plan.retry_budget
        return max(MIN_RETRY_BUDGET, len(self.plan.run_ids)) if budget is None else budget

    def take_retry(self, why: str, *, wanted: bool = True) -> bool:
        """Count one more infrastructure failure and whether its attempt may be tried again
        (False when the batch's budget is spent or the batch stopped)."""
        with self._lock:
            self.infrastructure_failures += 1
            if not wanted or len(self.retried) >= self.retry_budget or self.stop.is_set():
                return False
            self.retried.append(why)
            return True

    def note_try(self, kind: str | None) -> str | None:
        """Count a try that ended with infrastructure *kind* (None: not in infrastructure);
        why the engine is gone for good, when it is.

        Gone means: at least :data:`ENGINE_GONE_TRIES` tries in a row, over
        :data:`ENGINE_GONE_S` or more, failed on the engine, and it does not answer a ping
        now. A restart (a few seconds) or an engine that erred and still answers is
        tried again as before.
        """
        now = self.monotonic()
        with self._lock:
            if self.engine_gone is not None:
                return self.engine_gone
            count, since = self._engine_failing
            count, since = (count + 1, since if count else now) if kind == "engine" else (0, 0.0)
            self._engine_failing = (count, since)
        if count < ENGINE_GONE_TRIES or now - since < ENGINE_GONE_S:
            return None
        problem = self.plan.engine_problem()
        if problem is None:
            return None
        with self._lock:
            self.engine_gone = self.engine_gone or (
                f"{problem}; {count} tries in a row over {now - since:.0f} s failed on it"
            )
            return self.engine_gone

    def budget_spent(self) -> bool:
        with self._lock:
            return len(self.retried) >= self.retry_budget

    def begin_attempt(self, run_id: str, number: int) -> datetime:
        """Note (and return) when attempt *number* of *run_id* starts (its first try)."""
        now = self.clock()
        with self._lock:
            if self.started.get(run_id, (0, now))[0] != number:
                self.started[run_id] = (number, now)
        return now

    @property
    def evidence(self) -> RunDirectory:
        return RunDirectory(self.plan.batch_dir)

    def stop_now(self, reason: str) -> None:
        """No further attempt starts, and those that end are the batch's doing."""
        self.stop_reason = reason
        self.stop.set()

    def spend(self, tokens: int) -> int:
        """Count *tokens* as spent; all spent so far."""
        with self._lock:
            self.tokens += tokens
            return self.tokens

    def finish_attempt(self, run_id: str, record: AttemptRecord) -> None:
        with self._lock:
            self.finished.setdefault(run_id, []).append(record)

    def attempts_of(self, run_id: str) -> list[AttemptRecord]:
        with self._lock:
            return list(self.finished.get(run_id, []))

    def unfinished(self, run_id: str, reason: str) -> RunRecord:
        """A run the batch stopped: its finished attempts, then the one it was in, failed."""
        attempts = self.attempts_of(run_id)
        feedback = repair_feedback(attempts[-1]) if attempts else None
        if attempts and feedback is None:
            return self.record(run_id, attempts)  # finished: no repair was to come
        number = len(attempts) + 1
        with self._lock:
            noted = self.started.get(run_id)
        began = noted[1] if noted is not None and noted[0] == number else None
        cut = AttemptObservations(
            attempt=number,
            started_at=began or self.clock(),
            duration_ms=0,
            infrastructure_error=f"the batch stopped during this attempt: {reason}",
            infrastructure_kind="stopped",
            repair_feedback=feedback,
        )
        if began is not None:
            elapsed = (self.clock() - began).total_seconds()
            cut.duration_ms = max(0, int(elapsed * 1000))
        record = judge_attempt(cut)
        with self._writes:
            self._sealed.add((run_id, number))
            if began is not None:  # what it left is kept and accounted for, judged by nobody
                left = left_files(self.evidence.attempt(run_id, number).root, {})
                record = record.model_copy(update={"leftFiles": left})
        attempts.append(record)
        return self.record(run_id, attempts)

    def failed(self, run_id: str, error: str, *, node_lost: bool = False) -> RunRecord:
        """A run that came back as nothing but an infrastructure failure (from elsewhere)."""
        seen = AttemptObservations(
            attempt=1,
            started_at=self.clock(),
            duration_ms=0,
            infrastructure_error=error,
            infrastructure_kind="node" if node_lost else "engine",
        )
        return self.record(run_id, [judge_attempt(seen)])

    @staticmethod
    def record(run_id: str, attempts: list[AttemptRecord]) -> RunRecord:
        task_id, _, repetition = run_id.rpartition("-")
        return RunRecord(
            runId=run_id,
            taskId=task_id,
            repetition=int(repetition),
            firstSuccess=bool(attempts) and attempts[0].success,
            finalSuccess=bool(attempts) and attempts[-1].success,
            attempts=attempts,
        )


MIN_RETRY_BUDGET = 3
"""The smallest batch's budget of infrastructure tries run again."""
ENGINE_GONE_TRIES = 3
ENGINE_GONE_S = 30.0
"""Tries in a row, and how long, that fail on the engine before the batch asks whether it
is gone (each such try already waited out about 16-20 s of an unreachable engine)."""


def left_files(folder: Path, accounted: Mapping[str, str]) -> dict[str, str]:
    """Every regular file below *folder* that *accounted* does not name, with its digest.

    What an attempt that did not finish left (a collected solution never verified):
    kept as evidence and accounted for in its record, so an honest stop never reads as
    a file added to the run directory. A link or a device is not digested here: the
    checker then names it, as it must.
    """
    try:
        found = regular_files(folder) if folder.is_dir() else []
    except DigestError:
        return {}
    left = {}
    for name in found:
        if name in accounted:
            continue
        try:
            left[name] = file_sha256(folder / name)
        except DigestError:
            continue
    return left


class SharedSlots:
    """The slots several schedules share, one run at a time to each in turn.

    Schedules of several runners over one suite draw their runs from one pool: a slot
    goes to the schedule whose turn it is (round-robin over those with runs left), so a
    slow or loaded moment falls on every runner alike. Each schedule runs in a thread of
    its own; a signal the main thread receives is forwarded here (:meth:`interrupt`) and
    raised in each schedule's loop, where it closes that schedule's receipt as usual.
    """

    def __init__(self, slots: int, members: int) -> None:
        self._free = slots
        self._waiting = [True] * members
        self._turn = 0
        self._generation = 0
        self._changed = threading.Condition()
        self._stop: BaseException | None = None
        self.order: list[tuple[int, str]] = []
        """Every run handed a slot so far: (member, run id), in the order given."""

    def take(self, member: int, run_id: str) -> bool:
        """Whether *member* may start *run_id* now (its turn, and a slot free)."""
        with self._changed:
            if self._free == 0 or self._turn != member:
                return False
            self._free -= 1
            self.order.append((member, run_id))
            self._pass_turn()
            return True

    def release(self, _future: object = None) -> None:
        """A run ended: its slot is free (a future's done callback)."""
        with self._changed:
            self._free += 1
            self._changed_now()

    def leave(self, member: int) -> None:
        """*member* starts nothing more: the turn passes over it from now on."""
        with self._changed:
            if self._waiting[member]:
                self._waiting[member] = False
                if self._turn == member:
                    self._pass_turn()
                self._changed_now()

    def interrupt(self, stop: BaseException) -> None:
        """A signal stopped the command: every schedule raises it at its next look."""
        with self._changed:
            self._stop = stop
            self._changed_now()

    def generation(self) -> int:
        with self._changed:
            return self._generation

    def wait(self, seen: int, timeout: float) -> None:
        """Until something changed since generation *seen* (a run ended, a turn passed, a
        stop), or *timeout*."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation != seen, timeout)

    def raise_stop(self) -> None:
        """Raise the forwarded signal, if one came (a fresh one in each thread)."""
        with self._changed:
            stop = self._stop
        if isinstance(stop, Stop):
            raise Stop(stop.signum)
        if stop is not None:
            raise KeyboardInterrupt

    def _pass_turn(self) -> None:
        members = len(self._waiting)
        for step in range(1, members + 1):
            candidate = (self._turn + step) % members
            if self._waiting[candidate]:
                self._turn = candidate
                break
        self._changed_now()

    def _changed_now(self) -> None:
        self._generation += 1
        self._changed.notify_all()


@dataclass(frozen=True)
class SlotShare:
    """One schedule's place among those sharing :class:`SharedSlots`."""

    slots: SharedSlots
    member: int


ExecutorFactory = Callable[[Schedule], RunExecutor]
"""Makes the executor a schedule's runs execute on, from the schedule (this machine's
threads: :func:`agent_eval.batch.attempt.on_this_engine`; or a cluster's nodes)."""

SETTLE_S = 15.0
"""How long a batch waits for the runs it cut short to end on their threads before it
cleans up: their containers are already killed, so what is left is seconds of removing
them and writing the runs' last files (it bounds an engine that no longer answers)."""

GATEWAY_WATCH_S = 2.0
"""How often the schedule asks whether the gateway's container still runs, while runs are
in flight: a gateway that dies stops the batch within this, not at the next attempt's end."""


def run_schedule(
    plan: BatchPlan,
    executor: ExecutorFactory,
    *,
    clock: Clock = lambda: datetime.now(UTC),
    monotonic: Callable[[], float] = time.monotonic,
    grace_s: float = 60.0,
    settle_s: float = SETTLE_S,
    share: SlotShare | None = None,
) -> Receipt:
    """Run every scheduled run on *executor* (made from the schedule) and return the final
    receipt.

    With *share*, the runs start only as the shared slots let them (see
    :class:`SharedSlots`), interleaved with the other schedules' runs.

    A run whose every failure is the loss of its cluster node costs only that
    run: the batch goes on with the other nodes and ends
    ``infrastructure-failure``; when no node is left, the runs not started are
    recorded as such.

    Whatever ends the schedule leaves a final status, never ``running``: a
    signal (:class:`~agent_eval.batch.signals.Stop`, or KeyboardInterrupt)
    ``interrupted``, an infrastructure failure in a run, or any error of the
    harness itself (a full disk included), ``infrastructure-failure``. Then
    the runner and verifier containers are killed, the runs in flight are
    given *grace_s* to come back, and each run still unfinished is recorded
    with the attempts it finished and an infrastructure failure for the one
    it was in; every finished run is recorded. Once the receipt is closed, the
    runs so cut short are given *settle_s* to end on their threads, so the
    batch's cleanup does not race a run still removing its containers or
    writing its last files.

    Raises:
        ReceiptNotWritten: The final receipt could not be written.
    """
    book = ReceiptBook(plan.batch_dir, plan.receipt, plan.run_ids, clock)
    book.close("running", [])
    deadline = monotonic() + plan.batch_timeout_ms / 1000
    schedule = Schedule(plan, clock=clock, monotonic=monotonic, deadline=deadline)
    try:
        # Inside: an executor that cannot be made is the harness's failure, with a receipt.
        runs = executor(schedule)
    except Exception as exc:
        return book.close("infrastructure-failure", [describe_failure(exc, plan.batch_dir)])
    dispatch = _Dispatch(schedule, runs, book, share=share)
    stopped_by = dispatch.stopped_by()
    if stopped_by is None:
        runs.shutdown(wait=True)
        return book.close(dispatch.status, dispatch.reasons)
    dispatch.cut_short(stopped_by, grace_s)
    final = book.close(dispatch.status, dispatch.reasons)
    # The receipt is final: a first signal now only ends the wait.
    with contextlib.suppress(Stop, KeyboardInterrupt):
        runs.settle(dispatch.in_flight, settle_s)
    return final


class _GatewayLost(Exception):
    """The batch's gateway stopped serving (the message says how)."""


class _ExecutorLost(Exception):
    """The executor can run and reach nothing more (the message says why)."""


@dataclass
class _Dispatch:
    """Hands the pending runs to the executor as it has room, and books what comes back."""

    schedule: Schedule
    runs: RunExecutor
    book: ReceiptBook
    status: BatchStatus = "completed"
    reasons: list[str] = field(default_factory=list)
    in_flight: dict[Future[RunRecord], str] = field(default_factory=dict)
    done: int = 0
    share: SlotShare | None = None

    def stopped_by(self) -> str | None:
        """Run the schedule to its end; why it was stopped, if a signal or a failure did."""
        try:
            self._run_all()
        except _GatewayLost as exc:
            # Every attempt in flight would fail for want of its model: none is the agent's.
            self.status = "infrastructure-failure"
            return f"the model gateway stopped serving: {exc}; the batch stopped"
        except _ExecutorLost as exc:
            # Nothing in flight can come back through it: each is recorded as cut short.
            self.status = "infrastructure-failure"
            return f"{exc}; the batch stopped"
        except (Stop, KeyboardInterrupt) as exc:
            self.status = "interrupted"
            return exc.reason if isinstance(exc, Stop) else "interrupted by the operator (Ctrl-C)"
        except Exception as exc:  # the harness itself failed: the receipt must still close
            self.status = "infrastructure-failure"
            return describe_failure(exc, self.schedule.plan.batch_dir)
        finally:
            if self.share is not None:
                self.share.slots.leave(self.share.member)
        return None

    def cut_short(self, stopped_by: str, grace_s: float) -> None:
        """Stop everything in flight and book each run as it came back, or as cut short."""
        self.reasons.append(stopped_by)
        self.reasons += self.runs.stop_everything(stopped_by)
        self.runs.shutdown(wait=False)
        ends = self.schedule.monotonic() + grace_s
        while not ABANDON.is_set() and (left := ends - self.schedule.monotonic()) > 0:
            _, pending = wait(self.in_flight, timeout=min(left, 0.2))
            if not pending:
                break
        for future, run_id in self.in_flight.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                self.book.add_run(future.result())
            else:
                self.book.add_run(self.runs.unfinished(run_id, stopped_by))

    def _run_all(self) -> None:
        plan, schedule = self.schedule.plan, self.schedule
        pending = list(plan.run_ids)
        plan.progress(
            ProgressEvent(
                f"{len(pending)} runs scheduled, {self.runs.slots()} at a time",
                scheduled=tuple(pending),
            )
        )
        while pending or self.in_flight:
            if self.share is not None:
                if self._shared_turn(pending):
                    break
                continue
            while (
                pending and len(self.in_flight) < self.runs.slots() and not schedule.stop.is_set()
            ):
                if schedule.monotonic() >= schedule.deadline:
                    break
                run_id = pending.pop(0)
                self.in_flight[self.runs.submit(run_id)] = run_id
            if not self.in_flight:
                break
            finished, _ = wait(self.in_flight, timeout=GATEWAY_WATCH_S, return_when=FIRST_COMPLETED)
            self._book_finished(finished)
        if pending and not schedule.stop.is_set():
            self._not_started(pending)

    def _shared_turn(self, pending: list[str]) -> bool:
        """One turn of the loop on shared slots; True when nothing more is to be waited for."""
        assert self.share is not None
        slots, member = self.share.slots, self.share.member
        slots.raise_stop()
        seen = slots.generation()
        while pending and self._may_start() and len(self.in_flight) < self.runs.slots():
            if not slots.take(member, pending[0]):
                break
            run_id = pending.pop(0)
            try:
                future = self.runs.submit(run_id)
            except BaseException:
                slots.release()  # never started: its slot is the others'
                raise
            self.in_flight[future] = run_id
            future.add_done_callback(slots.release)
        if not pending or not self._may_start():
            slots.leave(member)
            if not self.in_flight:
                return True
        slots.wait(seen, GATEWAY_WATCH_S)
        self._book_finished({f for f in self.in_flight if f.done()})
        return False

    def _book_finished(self, finished: set[Future[RunRecord]]) -> None:
        if (lost := _gateway_lost(self.schedule.plan)) is not None:
            raise _GatewayLost(lost)
        if (gone := self.runs.lost()) is not None:
            raise _ExecutorLost(gone)
        for future in finished:
            # A run whose result raises stays in flight: it is recorded as cut short.
            record = future.result()
            self._arrived(self.in_flight.pop(future), record)

    def _may_start(self) -> bool:
        schedule = self.schedule
        return not schedule.stop.is_set() and schedule.monotonic() < schedule.deadline

    def _arrived(self, run_id: str, record: RunRecord) -> None:
        """Book a run that came back, tell the watcher, and stop the batch if it must."""
        self.book.finish_run(record)
        self.done += 1
        state, words = run_outcome(record)
        took = duration(sum(a.durationMs for a in record.attempts) / 1000)
        receipt = self.book.receipt
        tally = Tally(
            self.done, len(self.schedule.plan.run_ids), receipt.firstSuccesses,
            receipt.finalSuccesses,
        )  # fmt: skip
        self.schedule.plan.progress(
            ProgressEvent(
                f"{run_id} {words} (took {took}); {self.done}/{tally.total} runs done, "
                f"{tally.first} first / {tally.final} final successes",
                run_id,
                state,
                tally,
            )
        )
        if state == "infrastructure" and _node_lost(record):
            # Only that node's runs are lost: the others go on elsewhere.
            self.status = "infrastructure-failure"
            self.reasons.append(
                f"infrastructure failure in {run_id}: the node running it was lost; "
                "the other runs went on"
            )
        elif state == "infrastructure":
            self.status = "infrastructure-failure"
            last = record.attempts[-1] if record.attempts else None
            kind = (last.infrastructureKind if last else None) or "engine"
            why = _first_words(last)
            tries = last.tries if last else 1
            if (gone := self.schedule.engine_gone) is not None:
                # Said once: the runs that come back after it failed on the same engine.
                if not self.schedule.stop.is_set():
                    self.reasons.append(
                        f"the engine is gone: {gone} (last in {run_id}); the batch stopped"
                    )
                self.schedule.stop.set()
            elif (
                kind in RETRYABLE_KINDS
                and tries >= MAX_TRIES_PER_ATTEMPT
                and not self.schedule.budget_spent()
            ):
                # Tried as often as one attempt may be: that run is lost, not the batch.
                self.reasons.append(
                    f"infrastructure failure in {run_id} after {tries} tries "
                    f"({kind}: {why}); the other runs went on"
                )
            else:
                failures = self.schedule.infrastructure_failures
                if kind in RETRYABLE_KINDS and failures > 1:
                    cause = f"the {_KIND_WORDS.get(kind, kind)} failed {failures} times"
                else:
                    cause = f"the {_KIND_WORDS.get(kind, kind)} failed"
                self.reasons.append(f"{cause}: {why} (last in {run_id}); the batch stopped")
                self.schedule.stop.set()
        elif self.status == "completed" and (
            self.runs.rule_stop() is not None
            or any(a.failureCategory == "identity-mismatch" for a in record.attempts)
        ):
            # The first identity mismatch or a spent token budget: the other runs
            # would spend tokens on a batch that cannot qualify.
            self.status = "stopped"
            why = self.runs.rule_stop() or "the runner reported another identity"
            self.reasons.append(f"{why} (in {run_id}); the batch stopped")
            self.schedule.stop.set()

    def _not_started(self, pending: list[str]) -> None:
        why = (
            "the batch time budget was spent"
            if self.runs.slots() > 0
            else "no node is left to run them"
        )
        self.reasons.append(f"{why}; {len(pending)} run(s) not started: " + ", ".join(pending))
        for run_id in pending:
            self.book.add_run(Schedule.record(run_id, []))


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


_KIND_WORDS = {
    "engine": "engine",
    "verifier": "verifier's harness",
    "verifier-start": "start of the solution's process",
    "starved": "machine (a starved runner)",
    "provider": "model provider",
    "disk": "disk",
    "stopped": "batch's stop",
    "node": "cluster node",
}


def _first_words(record: AttemptRecord | None, limit: int = 200) -> str:
    """The attempt's first infrastructure diagnostic, shortened for a headline."""
    if record is None:
        return "no attempt was recorded"
    for diagnostic in record.diagnostics:
        if diagnostic.category in ("infrastructure", "provider"):
            text = diagnostic.message
            return text if len(text) <= limit else text[: limit - 3] + "..."
    return "no diagnostic was recorded"
