"""The child: isolate, import the submitted module, and answer calls over the pipe pair.

Started by the parent with two descriptors (read, write) and nothing else:
stdin is /dev/null and stdout/stderr go to a pipe the parent only keeps a
bounded tail of. Every message is a frame (see ``framing``); what the child
prints is never read as an answer.

Parent to child: ``start`` (once), ``call``, ``effect-result``/``effect-error``
(answers to the child's ``effect``); the parent ends a child by killing it.
Child to parent:
``isolation-error``, or ``isolated`` then ``ready``, ``sweep-error`` or
``import-error`` (once);
then per call any number of ``effect`` requests followed by ``return``,
``raise`` or ``fail``.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from .codec import (
    EffectRevokedError,
    NonJsonValue,
    as_text,
    bounded,
    describe_exception,
    make_exception,
    replace_effect_refs,
)
from .framing import FrameError, FrameReader, FrameTooLarge, encode_frame, write_frame
from .isolation import (
    IsolationError,
    apply_limits,
    drop_privileges,
    make_workdir,
    raise_oom_score,
    sweep_own_state,
)
from .values import ValueRefused, ValueTypes, decode, encode, resolver

__all__ = ["main"]

# Only a parent that is gone is given up on; a starved one sends start late, not never.
_START_TIMEOUT_S = 600.0
_PROTOCOL_EXIT = 3


class _Channel:
    """The child's end of the pipe pair; one request/answer exchange at a time."""

    def __init__(self, read_fd: int, write_fd: int, max_bytes: int, idle_s: float) -> None:
        self.reader = FrameReader(read_fd, max_bytes=max_bytes)
        self.write_fd = write_fd
        self.max_bytes = max_bytes
        self.idle_s = idle_s
        self.lock = threading.RLock()

    def send(self, message: dict[str, Any]) -> None:
        write_frame(
            self.write_fd,
            message,
            deadline=time.monotonic() + self.idle_s,
            max_bytes=self.max_bytes,
        )

    def receive(self) -> dict[str, Any]:
        return self.reader.read(time.monotonic() + self.idle_s)


def _protocol_exit(reason: str) -> NoReturn:
    # The parent is gone or confused: nothing sensible can be answered.
    print(f"verifier child: {reason}", file=sys.stderr, flush=True)
    os._exit(_PROTOCOL_EXIT)


class _Server:
    def __init__(self, channel: _Channel, module: Any, types: ValueTypes) -> None:
        self.channel = channel
        self.module = module
        self.types = types
        self.current_call = 0

    def effect_proxy(self, name: str) -> Callable[..., Any]:
        channel = self.channel

        def effect(*args: Any, **kwargs: Any) -> Any:
            try:
                request = {
                    "op": "effect",
                    "call": self.current_call,
                    "effect": name,
                    "args": encode(list(args), self.types),
                    "kwargs": encode(kwargs, self.types),
                }
                encode_frame(request, channel.max_bytes)
            except (NonJsonValue, FrameTooLarge, ValueError) as exc:  # ValueError: not text
                raise TypeError(f"effect {name!r} arguments must be bounded JSON: {exc}") from None
            with channel.lock:
                try:
                    channel.send(request)
                    reply = channel.receive()
                except FrameError as exc:
                    _protocol_exit(f"effect {name!r}: {exc}")
            op = reply.get("op")
            if op == "effect-result":
                try:
                    return decode(reply.get("value"), self.types)
                except ValueRefused as exc:
                    raise TypeError(f"effect {name!r} answered a value not built: {exc}") from None
            if op == "effect-error":
                message = str(reply.get("message", ""))
                type_ref = str(reply.get("type", ""))
                if type_ref == "$refused":
                    raise EffectRevokedError(message)
                args_list = reply.get("args")
                raise make_exception(
                    type_ref, args_list if isinstance(args_list, list) else [], message
                )
            _protocol_exit(f"unexpected answer {op!r} to an effect call")

        effect.__name__ = name
        effect.__qualname__ = name
        return effect

    def answer(self, call_id: Any, function: Any, args: Any, kwargs: Any) -> dict[str, Any]:
        if not isinstance(function, str) or function.startswith("_"):
            return {"op": "fail", "id": call_id, "message": "the function name is not exported"}
        target = getattr(self.module, function, None)
        if not callable(target):
            return {
                "op": "fail",
                "id": call_id,
                "message": f"the solution has no exported function {function!r}",
            }
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            _protocol_exit("malformed call")
        try:
            call_args = replace_effect_refs(decode(args, self.types), self.effect_proxy)
            call_kwargs = replace_effect_refs(decode(kwargs, self.types), self.effect_proxy)
        except ValueRefused as exc:
            return {"op": "fail", "id": call_id, "message": f"the arguments of {function}: {exc}"}
        try:
            result = target(*call_args, **call_kwargs)
        except BaseException as exc:  # the solution's exception is the observation
            return {"op": "raise", "id": call_id, **describe_exception(exc)}
        try:
            message = {"op": "return", "id": call_id, "value": encode(result, self.types)}
            encode_frame(message, self.channel.max_bytes)
        except (NonJsonValue, RecursionError) as exc:
            return {"op": "fail", "id": call_id, "message": f"{function} returned {exc}"}
        except FrameTooLarge:
            return {
                "op": "fail",
                "id": call_id,
                "message": f"{function} returned a value larger than the message limit",
            }
        except ValueError as exc:
            return {"op": "fail", "id": call_id, "message": f"{function} returned {exc}"}
        return message

    def serve(self) -> NoReturn:
        channel = self.channel
        while True:
            with channel.lock:
                try:
                    request = channel.receive()
                except FrameError as exc:
                    _protocol_exit(f"waiting for a call: {exc}")
            op = request.get("op")
            if op != "call":
                _protocol_exit(f"unexpected message {op!r}")
            self.current_call = request.get("id", 0)
            answer = self.answer(
                request.get("id"),
                request.get("function"),
                request.get("args"),
                request.get("kwargs", {}),
            )
            with channel.lock:
                try:
                    channel.send(answer)
                except FrameError as exc:
                    _protocol_exit(f"sending an answer: {exc}")


def _isolate(start: dict[str, Any]) -> None:
    drop = start.get("dropPrivileges") is True
    try:
        raise_oom_score()
    except IsolationError:
        if drop:
            raise
    limits = start.get("limits", {})
    apply_limits(
        memory_bytes=int(limits["memoryBytes"]),
        cpu_seconds=int(limits["cpuSeconds"]),
        file_size_bytes=int(limits["fileSizeBytes"]),
        open_files=int(limits["openFiles"]),
        max_processes=None if limits.get("maxProcesses") is None else int(limits["maxProcesses"]),
    )
    if drop:
        drop_privileges(int(start["uid"]), int(start["gid"]))
    make_workdir(str(start["workDir"]))


def _sweep(start: dict[str, Any]) -> dict[str, Any] | None:
    """Remove what earlier scenarios left; the failure message when that fails.

    Run once the child has reported itself isolated: only the solution's UID
    can own anything the sweep removes, so however the sweep fails (a tree
    too deep, too wide or too slow to remove) it is the solution's failure.
    """
    if start.get("dropPrivileges") is not True:
        return None
    budget = start.get("sweepCpuS")
    try:
        # What an earlier scenario's process left in a shared place goes before
        # this scenario's solution can see it: every scenario starts clean.
        sweep_own_state(
            [str(p) for p in start.get("sweep", [])],
            keep=str(start["workDir"]),
            cpu_budget_s=None if budget is None else float(budget),
        )
    except Exception as exc:  # MemoryError too: whatever stops the sweep was left for it
        return {"op": "sweep-error", "message": bounded(f"{type(exc).__name__}: {exc}")}
    return None


def _import_failure(exc: BaseException) -> dict[str, Any]:
    description = describe_exception(exc)
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    description["message"] = bounded(as_text(detail))
    return {"op": "import-error", **description}


def main(argv: list[str]) -> int:
    """Entry point: ``argv`` is ``[read_fd, write_fd]``."""
    read_fd, write_fd = int(argv[0]), int(argv[1])
    channel = _Channel(read_fd, write_fd, 1 << 20, _START_TIMEOUT_S)
    try:
        start = channel.receive()
    except FrameError as exc:
        _protocol_exit(f"waiting for start: {exc}")
    if start.get("op") != "start":
        _protocol_exit("the first message was not start")
    try:
        channel.max_bytes = channel.reader.max_bytes = int(start["maxMessageBytes"])
        channel.idle_s = float(start["idleTimeoutS"])
        _isolate(start)
    except (IsolationError, KeyError, TypeError, ValueError) as exc:
        channel.send({"op": "isolation-error", "message": bounded(str(exc))})
        return 0
    # From here on a crash is the solution's doing, not the verifier's.
    channel.send({"op": "isolated"})
    swept = _sweep(start)
    if swept is not None:
        channel.send(swept)
        return 0
    sys.path[:0] = [str(start["solutionDir"]), *map(str, start.get("importPaths", []))]
    try:
        module = importlib.import_module(str(start["module"]))
    except BaseException as exc:  # any failure to import is the solution's
        channel.send(_import_failure(exc))
        return 0
    channel.send({"op": "ready"})
    types = ValueTypes.from_wire(start.get("valueTypes"), resolver(module))
    return _Server(channel, module, types).serve()
