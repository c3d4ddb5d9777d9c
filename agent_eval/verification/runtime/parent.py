"""The trusted parent: load the grader, run its scenarios in fresh children, write the result.

Each scenario gets a fresh child process (``child``), so no state leaks from
one scenario to the next. The child talks to the parent over a dedicated
pipe pair; its stdout and stderr go to a third pipe of which the parent keeps
only a bounded tail, for diagnostics. Every read has a deadline, and the
parent never waits for end-of-file (a grandchild may hold a pipe open). When
a scenario ends, for whatever reason, the child's process group is killed,
and, in a container where the parent is PID-namespace root, every other
process too (``kill(-1)``, repeated until none is left, so that the next
scenario can start even after a fork bomb; PID 1 is the container's init).
Each child makes its own working directory (an unguessable name under the
scratch directory) once it runs as its UID: the parent needs no CAP_CHOWN,
and only removes the directory afterwards. Only the parent writes the result
file.

The solution runs in the child's process and can write its own bytes to the
pipe this parent reads: nothing on it is trusted. Whatever arrives ends as
the solution's own failure (a protocol violation, a timeout, a budget spent),
never as this parent's: decoding is linear in a frame's size, the arguments
of an effect call are decoded only for an effect the child was given, every
frame is charged to a per-call and per-scenario budget, and every string of
the result is made text before it is written.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import Any

from agent_eval.grading.effects import EffectCall, Raise, Refused, Return
from agent_eval.grading.errors import GraderError, SolutionFailed, SolutionRaised, VerifierBroken
from agent_eval.grading.grader import Grader
from agent_eval.grading.results import Category, Finding, GradeReport, bounded
from agent_eval.grading.session import Dispatch, Session

from . import timing
from .clock import (
    SolutionClock,
    backstop_s,
    namespace_pids,
    process_state,
    session_pids,
    wall_clock,
)
from .codec import EFFECT_KEY, EXCEPTION_ATTRIBUTES
from .framing import (
    Clock,
    FrameClosed,
    FrameError,
    FrameInvalid,
    FrameReader,
    FrameStarved,
    FrameTimeout,
    FrameTooLarge,
    write_frame,
)
from .isolation import remove_tree
from .job import Job
from .values import (
    MAX_DEPTH,
    NO_TYPES,
    DeclarationError,
    NonJsonValue,
    ValueRefused,
    ValueTypes,
    bounded_repr,
    decode,
    encode,
)
from .zygote import (
    ANSWER_TIMEOUT_S,
    BOOTSTRAP,
    DETERMINISM,
    INTERPRETER_FLAGS,
    Zygote,
    ZygoteBroken,
)

__all__ = ["STARVED", "encode_given", "run_and_write", "write_bytes"]

STARVED = "starved"
"""How an infrastructure finding of a verification the machine starved begins."""

# Killing and reaping is the harness's work: on a crowded machine it may take long.
_REAP_TIMEOUT_S = 60.0
_EXIT_GRACE_S = 0.5
_MAX_LATE_FRAMES = 64
_OUTPUT_IN_MESSAGE = 1000
_MAX_TASK_BYTES = 256 * 1024
# What the solution may make the parent read and decode, in multiples of the
# largest message: per call, and per scenario (one child). Decoding is linear,
# so this bounds the parent's CPU and memory spent on the solution's behalf,
# and a solution that floods its pipe fails itself instead of starving the
# parent into the harness's failure. Every frame costs at least
# _MIN_FRAME_CHARGE bytes: many tiny frames cost the parent too.
_CALL_BUDGET_MESSAGES = 4
_SCENARIO_BUDGET_MESSAGES = 8
_MIN_FRAME_CHARGE = 512
_EFFECT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""The shape of every effect's name (``grading.effects.Effect`` refuses others)."""
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_RESULT_SCHEMA_VERSION = 1


def _runtime_root() -> tuple[str, str]:
    """(directory to put on the child's sys.path, dotted name of this package)."""
    package = __package__ or "agent_eval.verification.runtime"
    root = os.path.dirname(os.path.abspath(__file__))
    for _ in package.split("."):
        root = os.path.dirname(root)
    return root, package


def _import_failure_category(mro: list[str]) -> Category:
    names = {entry.rsplit(".", 1)[-1] for entry in mro}
    if "SyntaxError" in names:
        return "syntax"
    if "ModuleNotFoundError" in names:
        return "missing-dependency"
    return "behaviour"


def _str(value: Any, limit: int) -> str | None:
    return bounded(value, limit) if isinstance(value, str) else None


def _shown(value: Any) -> str:
    """A value the solution sent, for a message: a short quoted string, or only its kind."""
    return bounded_repr(value) if isinstance(value, str) else f"a JSON {type(value).__name__}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal has no name of its own
        return f"signal {number}"


def _effect_names(value: Any, names: set[str], depth: int = 0) -> None:
    """Add the effects *value* (a call's encoded arguments) gives the solution to *names*."""
    if depth > 2 * MAX_DEPTH:
        return
    if isinstance(value, list):
        for item in value:
            _effect_names(item, names, depth + 1)
    elif isinstance(value, dict):
        if set(value) == {EFFECT_KEY} and isinstance(value[EFFECT_KEY], str):
            names.add(value[EFFECT_KEY])
            return
        for item in value.values():
            _effect_names(item, names, depth + 1)


def encode_given(value: Any, types: ValueTypes, what: str) -> Any:
    """The wire form of a value the grader gave; one it cannot send is the grader's error."""
    try:
        return encode(value, types)
    except NonJsonValue as exc:
        raise GraderError(f"{what}: {exc} (declare its type in value_types)") from None


class _Started:
    """A child this parent started itself (no zygote): its own child, reaped by it."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid

    def peek_exit(self) -> tuple[int, int] | None:
        """``(si_code, si_status)`` once it exited, without reaping it (its PID stays reserved)."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return None
        return None if info is None else (info.si_code, info.si_status)

    def reap(self, timeout_s: float) -> None:
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise TimeoutError from None


class _Forked:
    """A child the zygote forked: it tells of the exit and reaps when released."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid

    def peek_exit(self) -> tuple[int, int] | None:
        try:
            return self.zygote.exit_status(self.pid)
        except ZygoteBroken as exc:
            raise VerifierBroken(str(exc)) from None

    def reap(self, timeout_s: float) -> None:
        try:
            self.zygote.reap(self.pid, timeout_s)
        except ZygoteBroken as exc:
            raise VerifierBroken(str(exc)) from None

    def ended(self) -> bool:
        """Whether the kernel holds it as exited already (the zygote's word may be late)."""
        return process_state(self.pid) == "Z"


class ChildProcess:
    """One scenario's solution process: the verifier's implementation of ``Transport``."""

    def __init__(
        self,
        job: Job,
        module: str,
        workdir: Path,
        clock: Clock = wall_clock,
        types: ValueTypes = NO_TYPES,
        zygote: Zygote | None = None,
    ) -> None:
        self.job = job
        self.zygote = zygote
        """Forks each child when the verifier container started one; else a fresh interpreter."""
        self.module = module
        self.workdir = workdir
        self.types = types
        """The types beyond JSON the grader declared; only they cross, either way."""
        self.clock = clock
        """What every deadline of this process is measured on (the solution's own time)."""
        self._backstop: float | None = None
        self.cannot_start = False
        """The solution cannot start (its module does not import, or what it left
        cannot be removed): no later scenario tries again."""
        self._failure: SolutionFailed | None = None
        self._proc: _Started | _Forked | None = None
        self._output = bytearray()
        self._call_ids = itertools.count(1)
        self._reader: FrameReader | None = None
        self._write_fd = -1
        self._out_fd = -1
        self._ready_at: float | None = None
        self._given: set[str] = set()
        """Effects this child's calls were given: only their calls' arguments are decoded."""
        self._call_spent = 0
        self._scenario_spent = 0

    # -- start -------------------------------------------------------------------

    def start(self, deadline: float | None) -> None:
        """Spawn the child, let it isolate itself and import the solution.

        Raises:
            SolutionFailed: The solution did not import (or not in time).
            VerifierBroken: The child could not be started or isolated.
        """
        self._spawn()
        self._handshake(deadline)

    def _spawn(self) -> None:
        """Start the child process with its pipe pair and its output pipe."""
        limits, isolation = self.job.limits, self.job.isolation
        # The child makes its own working directory once it runs as its UID: the
        # parent keeps no CAP_CHOWN in the container, and a directory the child
        # creates is its own without one. The parent only removes it afterwards.
        root, package = _runtime_root()
        if isolation.child_import_root is not None:
            # The child imports only the world-readable part of the staging: the
            # grader, the kit and this parent stay where its UID cannot read.
            root = isolation.child_import_root
        to_child_r, to_child_w = os.pipe2(os.O_CLOEXEC)
        to_parent_r, to_parent_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        self._write_fd, self._out_fd = to_child_w, out_r
        self._reader = FrameReader(
            to_parent_r,
            max_bytes=limits.max_message_bytes,
            on_idle=self._on_idle,
            clock=self.clock,
        )
        os.set_blocking(to_child_w, False)
        os.set_blocking(out_r, False)
        # The environment is the parent's own, so nothing else PYTHON* is in it.
        environment = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.workdir),
            "TMPDIR": str(self.workdir),
            **DETERMINISM,
        }
        try:
            if self.zygote is not None:
                pid = self.zygote.spawn(
                    str(self.job.scratch_dir), environment, (to_child_r, to_parent_w, out_w)
                )
                self._proc = _Forked(self.zygote, pid)
                return
            command = [sys.executable, *INTERPRETER_FLAGS, "-c", BOOTSTRAP, root,
                       f"{package}.child", str(to_child_r), str(to_parent_w)]  # fmt: skip
            self._proc = _Started(
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=out_w,
                    stderr=out_w,
                    pass_fds=(to_child_r, to_parent_w),
                    close_fds=True,
                    start_new_session=True,
                    cwd=self.job.scratch_dir,
                    env=environment,
                )
            )
        except (OSError, ZygoteBroken) as exc:
            raise VerifierBroken(f"cannot start the solution process: {exc}") from exc
        finally:
            for fd in (to_child_r, to_parent_w, out_w):
                os.close(fd)

    def _handshake(self, deadline: float | None) -> None:
        """Send the start message, then wait for the child's isolation and the import."""
        limits, isolation = self.job.limits, self.job.isolation
        start = {
            "op": "start",
            "module": self.module,
            "valueTypes": self.types.wire(),
            "solutionDir": str(self.job.solution_dir),
            "workDir": str(self.workdir),
            "importPaths": [str(p) for p in self.job.solution_import_paths],
            "limits": {
                "memoryBytes": limits.memory_bytes,
                "cpuSeconds": limits.cpu_seconds,
                "fileSizeBytes": limits.file_size_bytes,
                "openFiles": limits.open_files,
                "maxProcesses": limits.max_processes,
            },
            "dropPrivileges": isolation.drop_privileges,
            "sweep": list(isolation.sweep_paths),
            "uid": isolation.child_uid,
            "gid": isolation.child_gid,
            # The sweep's share of the start's time, on the child's own CPU clock:
            # a sweep that needs more fails the solution before the start does.
            "sweepCpuS": None if deadline is None else max(0.0, deadline - self.clock()) / 2,
            "maxMessageBytes": limits.max_message_bytes,
            # The child only gives up on a parent that is gone; a parent kept
            # waiting for a CPU is not gone, so it waits as long as any backstop.
            "idleTimeoutS": backstop_s(limits.scenario_timeout_ms / 1000) + 60,
        }
        self._start_operation(deadline)
        try:
            self._send(start, deadline, "starting")
            message = self._receive(deadline, "starting")
        except SolutionFailed as failure:
            # Nothing submitted has run yet: whatever happened is the verifier's.
            raise VerifierBroken(f"the solution process did not start: {failure}") from None
        if message.get("op") != "isolated":
            detail = _str(message.get("message"), 500) or f"sent {_shown(message.get('op'))}"
            self._kill()
            raise VerifierBroken(f"the solution process could not isolate itself: {detail}")
        what = f"importing the solution module {self.module!r}"
        self._start_operation(deadline)
        message = self._receive(deadline, what)
        op = message.get("op")
        if op == "ready":
            self._ready_at = timing.now()
            return
        if op == "sweep-error":
            # Only the solution's UID owns what the sweep removes: this is its doing.
            detail = _str(message.get("message"), 1500) or "unknown error"
            self.cannot_start = True
            raise self._fail(
                SolutionFailed(
                    "behaviour",
                    "what the solution left in an earlier scenario could not be removed "
                    f"before the next one: {detail}",
                    whole_solution=True,
                )
            )
        if op == "import-error":
            mro = message.get("mro")
            mro_names = [m for m in mro if isinstance(m, str)] if isinstance(mro, list) else []
            detail = _str(message.get("message"), 1500) or "unknown error"
            self.cannot_start = True
            raise self._fail(
                SolutionFailed(
                    _import_failure_category(mro_names),
                    f"the solution module {self.module!r} does not import: {detail}",
                    whole_solution=True,
                )
            )
        raise self._fail(self._protocol_violation(what, f"unexpected message {_shown(op)}"))

    # -- Transport -------------------------------------------------------------------

    def call(
        self,
        function: str,
        args: list[Any],
        kwargs: dict[str, Any],
        dispatch: Dispatch,
        deadline: float | None,
    ) -> Any:
        """Call *function* in the child, answering its effect calls until it returns."""
        if self._failure is not None:
            raise self._failure
        call_id = next(self._call_ids)
        what = f"calling {function}"
        self._start_operation(deadline)
        request = {
            "op": "call",
            "id": call_id,
            "function": function,
            "args": self._encode(args, f"{what}: an argument"),
            "kwargs": self._encode(kwargs, f"{what}: an argument"),
        }
        _effect_names([request["args"], request["kwargs"]], self._given)
        self._call_spent = 0
        self._send(request, deadline, what)
        while True:
            message = self._receive(deadline, what)
            op = message.get("op")
            if op == "effect":
                self._answer_effect(message, dispatch, deadline, what)
                continue
            if message.get("id") != call_id:
                raise self._fail(
                    self._protocol_violation(what, f"an answer to another call ({_shown(op)})")
                )
            if op == "return":
                try:
                    return decode(message.get("value"), self.types)
                except ValueRefused as exc:
                    refused = SolutionFailed(
                        "behaviour", f"{what}: the solution returned a value that is refused: {exc}"
                    )
                    raise self._fail(refused) from None
            if op == "raise":
                raise self._raised(function, message, what)
            if op == "fail":
                detail = _str(message.get("message"), 1500) or "failed"
                raise self._fail(SolutionFailed("behaviour", detail))
            raise self._fail(self._protocol_violation(what, f"unexpected message {_shown(op)}"))

    def close(self, dispatch: Dispatch) -> None:
        """Report late effect calls, then kill, reap and clean up; idempotent."""
        if self._proc is None:
            self._close_fds()
            return
        if self._ready_at is not None:
            timing.add("scenario: the solution's calls", self._ready_at, timing.now())
        try:
            if self._failure is None and self._reader is not None:
                self._drain_late_effects(dispatch)
        finally:
            with timing.span("scenario: killing, reaping, cleaning up"):
                self._stop()

    # -- internals ---------------------------------------------------------------------

    def _start_operation(self, deadline: float | None) -> None:
        """Set the wall-clock backstop of one operation (start, import, call)."""
        if deadline is None:
            self._backstop = None
            return
        self._backstop = time.monotonic() + backstop_s(max(0.0, deadline - self.clock()))

    def _starved(self, what: str) -> VerifierBroken:
        self._kill()
        return VerifierBroken(
            f"{STARVED}: {what}: the machine kept the solution waiting for a CPU past the "
            f"wall-clock backstop while it had time left on its own clock (re-verified)"
        )

    def _answer_effect(
        self, message: dict[str, Any], dispatch: Dispatch, deadline: float | None, what: str
    ) -> None:
        name, call = self._effect_call(message, what)
        outcome = dispatch(name, call)
        if isinstance(outcome, Return):
            answered = f"{what}: the answer of effect {name!r}"
            value = self._encode(outcome.value, answered)
            reply: dict[str, Any] = {"op": "effect-result", "value": value}
        elif isinstance(outcome, Raise):
            reply = {
                "op": "effect-error",
                "type": outcome.type_ref,
                "args": list(outcome.args),
                "message": outcome.message,
            }
        else:
            assert isinstance(outcome, Refused)
            reply = {"op": "effect-error", "type": "$refused", "message": outcome.message}
        self._send(reply, deadline, what)

    def _effect_call(self, message: dict[str, Any], what: str) -> tuple[str, EffectCall]:
        """The effect's name and its call; the arguments only of an effect this child was given.

        The name is checked first: a call of an effect never given is refused
        whatever its arguments, so they are never decoded.
        """
        name, args, kwargs = message.get("effect"), message.get("args"), message.get("kwargs")
        if (
            not isinstance(name, str)
            or not _EFFECT_NAME.fullmatch(name)
            or not isinstance(args, list)
            or not isinstance(kwargs, dict)
        ):
            raise self._fail(self._protocol_violation(what, "a malformed effect call"))
        if name not in self._given:
            return name, EffectCall(())
        try:
            return name, EffectCall(tuple(decode(args, self.types)), decode(kwargs, self.types))
        except ValueRefused as exc:
            raise self._fail(self._protocol_violation(what, f"effect {name!r}: {exc}")) from None

    def _encode(self, value: Any, what: str) -> Any:
        return encode_given(value, self.types, what)

    def _raised(self, function: str, message: dict[str, Any], what: str) -> Exception:
        type_name = _str(message.get("type"), 200)
        text = _str(message.get("message"), 2000)
        mro = message.get("mro")
        attributes = message.get("attributes")
        if (
            type_name is None
            or text is None
            or not isinstance(mro, list)
            or len(mro) > 64
            or not all(isinstance(m, str) for m in mro)
            or not isinstance(attributes, dict)
            or not set(attributes) <= set(EXCEPTION_ATTRIBUTES)
        ):
            return self._fail(self._protocol_violation(what, "a malformed exception report"))
        try:
            # Plain JSON, bounded in depth like every value the grader is given.
            copied = decode(attributes)
        except ValueRefused as exc:
            detail = f"an exception attribute is refused: {exc}"
            return self._fail(self._protocol_violation(what, detail))
        return SolutionRaised(function, type_name, [bounded(m, 300) for m in mro], text, copied)

    def _protocol_violation(self, what: str, detail: str) -> SolutionFailed:
        return SolutionFailed("behaviour", f"{what}: the solution broke the protocol ({detail})")

    def _fail(self, failure: SolutionFailed) -> SolutionFailed:
        """Remember the failure and stop the child at once (it may still be burning CPU)."""
        self._failure = failure
        self._kill()
        return failure

    def _send(self, message: dict[str, Any], deadline: float | None, what: str) -> None:
        try:
            write_frame(
                self._write_fd,
                message,
                deadline=deadline,
                max_bytes=self.job.limits.max_message_bytes,
                clock=self.clock,
                backstop=self._backstop,
            )
        except FrameStarved:
            raise self._starved(what) from None
        except FrameTooLarge as exc:
            raise GraderError(f"{what}: the arguments are too large ({exc})") from None
        except FrameTimeout:
            failure = SolutionFailed("timeout", f"{what}: the solution stopped reading")
            raise self._fail(failure) from None
        except FrameClosed:
            raise self._fail(self._exited(what)) from None

    def _receive(self, deadline: float | None, what: str) -> dict[str, Any]:
        assert self._reader is not None
        try:
            message = self._reader.read(deadline, self._backstop)
            self._charge(what)
            return message
        except FrameStarved:
            raise self._starved(what) from None
        except FrameTimeout:
            limit = "" if deadline is None else " within its time limit"
            raise self._fail(SolutionFailed("timeout", f"{what}: no answer{limit}")) from None
        except FrameClosed:
            raise self._fail(self._exited(what)) from None
        except (FrameTooLarge, FrameInvalid) as exc:
            raise self._fail(self._protocol_violation(what, str(exc))) from None
        except FrameError as exc:
            raise VerifierBroken(f"{what}: reading the solution's pipe failed: {exc}") from exc

    def _charge(self, what: str) -> None:
        """Count the frame just read against the call's and the scenario's budget."""
        assert self._reader is not None
        cost = max(self._reader.last_frame_bytes, _MIN_FRAME_CHARGE)
        self._call_spent += cost
        self._scenario_spent += cost
        largest = self.job.limits.max_message_bytes
        for spent, budget, per in (
            (self._call_spent, _CALL_BUDGET_MESSAGES * largest, "call"),
            (self._scenario_spent, _SCENARIO_BUDGET_MESSAGES * largest, "scenario"),
        ):
            if spent > budget:
                raise self._fail(
                    SolutionFailed(
                        "behaviour",
                        f"{what}: the solution sent more than {budget} bytes of messages in one "
                        f"{per} (each message counts at least {_MIN_FRAME_CHARGE} bytes)",
                    )
                )

    def _on_idle(self) -> None:
        self._drain_output()
        if self._peek_exit() is not None:
            raise FrameClosed("the solution process exited")

    def _peek_exit(self) -> tuple[int, int] | None:
        """The child's ``(si_code, si_status)`` without reaping it: its PID (= group id) stays
        reserved."""
        return None if self._proc is None else self._proc.peek_exit()

    def _exited(self, what: str) -> SolutionFailed:
        status, told_late = None, False
        deadline = time.monotonic() + _EXIT_GRACE_S
        while status is None and time.monotonic() < deadline:
            status = self._peek_exit()
            if status is None:
                if not told_late and isinstance(self._proc, _Forked) and self._proc.ended():
                    # It exited: how is the zygote's to tell, however busy the machine.
                    told_late, deadline = True, time.monotonic() + ANSWER_TIMEOUT_S
                time.sleep(0.01)
        self._drain_output()
        category: Category = "behaviour"
        if status is None:
            how = "closed its message pipe"
        elif status[0] == os.CLD_EXITED:
            how = f"exited with status {status[1]}"
        else:
            signame = _signal_name(status[1])
            how = f"was killed by {signame}"
            if status[1] == signal.SIGXCPU:
                category, how = "timeout", "exceeded its CPU time limit"
            elif status[1] == signal.SIGKILL:
                how += " (memory or CPU limit)"
        output = self.output_tail(_OUTPUT_IN_MESSAGE)
        suffix = (
            f"; the solution's own output (its last {len(output)} characters, escaped): "
            f"{json.dumps(output)[1:-1]}"
            if output
            else ""
        )
        return SolutionFailed(category, f"{what}: the solution process {how}{suffix}")

    def _drain_output(self) -> None:
        keep = self.job.limits.output_bytes
        while self._out_fd >= 0:
            try:
                chunk = os.read(self._out_fd, 65536)
            except (BlockingIOError, OSError):
                return
            if not chunk:
                return
            self._output += chunk
            if len(self._output) > keep:
                del self._output[: len(self._output) - keep]

    def output_tail(self, limit: int) -> str:
        """The last *limit* characters the solution printed (never parsed, only shown)."""
        text = self._output.decode("utf-8", errors="replace").strip()
        return text[-limit:]

    def _drain_late_effects(self, dispatch: Dispatch) -> None:
        assert self._reader is not None
        for _ in range(_MAX_LATE_FRAMES):
            try:
                message = self._reader.poll_frame()
                if message is None:
                    return
                self._charge("after the scenario")
                if message.get("op") == "effect":
                    name, call = self._effect_call(message, "after the scenario")
                    dispatch(name, call)
            except (FrameError, SolutionFailed):
                return

    def _kill(self) -> None:
        if self._proc is None:
            return
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(self._proc.pid, signal.SIGKILL)
        if self.job.isolation.kill_all_on_cleanup:
            # Only as PID-namespace root in the verifier container: every process
            # but this one and PID 1 (the container's init), grandchildren included.
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)

    def _stop(self) -> None:
        proc = self._proc
        try:
            self._kill()
            if proc is not None:
                try:
                    proc.reap(_REAP_TIMEOUT_S)
                except TimeoutError:
                    raise VerifierBroken(
                        f"the solution process {proc.pid} could not be stopped"
                    ) from None
            if self.job.isolation.kill_all_on_cleanup:
                _await_only_us()
            self._drain_output()
        finally:
            self._proc = None
            self._close_fds()
            # However deep the solution nested it (shutil.rmtree recurses); what
            # stays is the solution's UID's, and the next child's sweep removes it.
            with contextlib.suppress(OSError):
                remove_tree(str(self.workdir))

    def _close_fds(self) -> None:
        if self._reader is not None:
            os.close(self._reader.fd)
            self._reader = None
        for fd in (self._write_fd, self._out_fd):
            if fd >= 0:
                os.close(fd)
        self._write_fd = self._out_fd = -1


def _other_processes(proc_root: str = "/proc") -> list[int]:
    """Processes of this PID namespace but this one and PID 1 (the container's init)."""
    me = os.getpid()
    try:
        names = os.listdir(proc_root)
    except OSError:
        return []
    return [int(n) for n in names if n.isdigit() and int(n) not in (1, me)]


def _await_only_us() -> None:
    """Kill and wait until no solution process is left, so the next scenario can start.

    A fork bomb fills the container's pids limit; until its processes are gone
    (and reaped by init) the next child could not even be spawned, which would
    look like the verifier's failure. A process forked while kill(-1) ran may
    escape one round, so every round kills again. Called once the scenario's
    child is reaped: every child of this process left is the solution's.
    """
    deadline = time.monotonic() + _REAP_TIMEOUT_S
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        _reap_strays()
        left = _other_processes()
        if not left:
            return
        if time.monotonic() > deadline:
            raise VerifierBroken(
                f"{len(left)} solution process(es) survived kill(-1) for "
                f"{_REAP_TIMEOUT_S:g} s (pids {left[:8]})"
            )
        time.sleep(0.01)


def _reap_strays() -> None:
    """Reap every exited child of this process.

    The solution can make this process its processes' parent (clone with
    CLONE_PARENT makes a sibling of the scenario's child): killed, they stay
    zombies, listed in /proc, until their parent reaps them.
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class ChildOpener:
    """Starts a fresh child per scenario; a solution that cannot start is not retried."""

    def __init__(
        self, job: Job, module: str, types: ValueTypes = NO_TYPES, zygote: Zygote | None = None
    ) -> None:
        self.job = job
        self.module = module
        self.types = types
        self.zygote = zygote
        self.started = 0
        self._import_failure: SolutionFailed | None = None
        self._current: ChildProcess | None = None
        self.clock = SolutionClock(
            self.solution_pids, helper_pids=() if zygote is None else (zygote.pid,)
        )
        """The solution's own time: every limit of the grading is measured on it."""

    def solution_pids(self) -> list[int]:
        """The processes of the current scenario's solution."""
        if self.job.isolation.kill_all_on_cleanup:
            # PID-namespace root: every process but this one and init is the solution's.
            return namespace_pids()
        proc = self._current._proc if self._current is not None else None
        return [] if proc is None else session_pids(proc.pid)

    def _new_process(self, workdir: Path) -> ChildProcess:
        return ChildProcess(self.job, self.module, workdir, self.clock, self.types, self.zygote)

    def __call__(self, scenario: str, deadline: float | None) -> ChildProcess:
        if self._import_failure is not None:
            failure = self._import_failure
            raise SolutionFailed(failure.category, failure.message, whole_solution=True)
        self.started += 1
        # An unguessable name: an earlier scenario's process could otherwise have
        # planted this one's directory (the scratch root is shared with it).
        workdir = self.job.scratch_dir / f"scenario-{self.started}-{secrets.token_hex(8)}"
        # An earlier scenario's processes are gone: their PIDs may come back as new ones.
        self.clock.forget()
        process = self._new_process(workdir)
        self._current = process
        try:
            with timing.span("scenario: child start, isolation, solution import"):
                process.start(deadline)
        except SolutionFailed as failure:
            if process.cannot_start:
                self._import_failure = failure
            process.close(_refuse_all)
            raise
        except BaseException:
            process.close(_refuse_all)
            raise
        return process


def _refuse_all(name: str, call: EffectCall) -> Refused:
    return Refused("no effects exist before a scenario starts")


def load_grader(path: Path) -> Grader:
    """Execute the task's grader.py and return its ``GRADER`` instance, declaration checked."""
    spec = importlib.util.spec_from_file_location("task_grader", path)
    if spec is None or spec.loader is None:
        raise GraderError(f"cannot load the grader {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise GraderError(f"{path.name} does not load: {type(exc).__name__}: {exc}") from exc
    grader = getattr(module, "GRADER", None)
    if not isinstance(grader, Grader):
        raise GraderError(f"{path.name} must bind a graders.Grader instance to GRADER")
    grader.check_declaration()
    return grader


def _solution_module(grader: Grader, task: dict[str, Any]) -> str:
    if grader.solution_module is not None:
        return grader.solution_module
    outputs = task.get("allowedOutputPaths")
    if not isinstance(outputs, list) or not outputs or not isinstance(outputs[0], str):
        raise GraderError("task.json has no allowedOutputPaths to find the solution module")
    path = PurePosixPath(outputs[0])
    parts = [*path.parent.parts, path.stem] if path.stem != "__init__" else list(path.parent.parts)
    return ".".join(parts)


def _check_against_task(grader: Grader, job: Job) -> dict[str, Any]:
    try:
        with job.task_path.open("rb") as handle:
            task = json.loads(handle.read(_MAX_TASK_BYTES).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GraderError(f"cannot read task.json {job.task_path}: {exc}") from exc
    if not isinstance(task, dict):
        raise GraderError("task.json is not a JSON object")
    if not (task.get("id") == grader.task_id == job.task_id):
        raise GraderError(
            f"task ids differ: job {job.task_id!r}, task.json {task.get('id')!r}, "
            f"grader {grader.task_id!r}"
        )
    for key, declared in (
        ("assertionIds", grader.assertion_ids),
        ("safetyAssertionIds", grader.safety_assertion_ids),
    ):
        listed = task.get(key)
        if not isinstance(listed, list) or sorted(map(str, listed)) != sorted(declared):
            only_grader = sorted(set(declared) - set(map(str, listed or [])))
            only_task = sorted(set(map(str, listed or [])) - set(declared))
            raise GraderError(
                f"task.json {key} and the grader differ: only in the grader {only_grader}, "
                f"only in task.json {only_task}"
            )
    return task


def _infrastructure_report(task_id: str, message: str) -> GradeReport:
    finding = Finding("infrastructure", bounded(message))
    return GradeReport(
        task_id=task_id, assertions=(), needs_review=False, diagnostics=(finding,), error=finding
    )


def run_job(job: Job, zygote: Zygote | None = None) -> GradeReport:
    """Grade the job's solution with its task's grader; never raises for a grading problem.

    *zygote*, when the verifier container started one, forks each scenario's child.
    """
    try:
        grader = load_grader(job.grader_path)
        task = _check_against_task(grader, job)
        module = _solution_module(grader, task)
        types = ValueTypes.declared(grader.value_types)
    except (GraderError, DeclarationError) as exc:
        return _infrastructure_report(job.task_id, f"grader error: {exc}")
    limits = job.limits
    opener = ChildOpener(job, module, types, zygote)
    session = Session(
        grader,
        opener,
        call_timeout=limits.call_timeout_ms / 1000,
        scenario_timeout=limits.scenario_timeout_ms / 1000,
        total_timeout=limits.total_timeout_ms / 1000,
        clock=opener.clock,
    )
    return session.grade()


def _text_only(value: Any) -> Any:
    """*value* with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    Whatever the solution sent may reach the result inside a message, and JSON
    escapes let it send surrogates that no UTF-8 can encode; one character for
    one keeps every length bound the host checks.
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_text_only(k): _text_only(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_text_only(item) for item in value]
    return value


def write_result(path: Path, result: dict[str, Any]) -> None:
    """Write the result file atomically, readable by its owner only; every string as text."""
    text = json.dumps(_text_only(result), ensure_ascii=False, allow_nan=False, indent=2)
    write_bytes(path, (text + "\n").encode())


def write_bytes(path: Path, data: bytes) -> None:
    """Write *data* to *path* atomically (a fresh temporary file, then a rename), mode 0600."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _terminate(signum: int, frame: FrameType | None) -> None:
    # Unwinds through the open scenario, whose exit kills the child.
    raise SystemExit(128 + signum)


def run_and_write(job: Job, zygote: Zygote | None = None) -> int:
    """Run the job and write its result; the exit status is 0 when a result was written."""
    signal.signal(signal.SIGTERM, _terminate)
    report = run_job(job, zygote)
    try:
        with timing.span("writing result.json"):
            write_result(job.result_path, report.to_json())
    except OSError as exc:
        print(f"verifier: cannot write the result {job.result_path}: {exc}", file=sys.stderr)
        return 1
    return 0
