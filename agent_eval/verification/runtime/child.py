"""The child: isolate, import the submitted module, and answer calls over the pipe pair.

Forked by this module's fork server (see :func:`serve_forks`), or started by
the parent as a fresh interpreter, with two descriptors (read, write) and
nothing else: stdin is /dev/null and stdout/stderr go to a pipe the parent
only keeps a bounded tail of. Every message is a frame (see ``framing``);
what the child prints is never read as an answer.

The fork server is one process per verification, started by the parent as a
fresh interpreter from the world-readable part of the staging: it raises its
OOM score, drops to the slot's UID and GID for good, imports this module (and
so everything a child needs before the solution) once, and then, per request,
forks a child with ``CLONE_PARENT``, so that the child is the parent's own (the
parent reaps it, reads its exit status, and is its ``getppid()``). The server
never imports, loads or receives anything of the solution or the grader: the
solution's code only ever runs in a forked child. A solution process runs as
the server's UID and may signal or re-limit it; the server blocks every signal
it can, the parent wakes it before each request, a child refuses to start when
what it inherited (resource limits, nice value, CPU affinity) is not what the
server began with, and the parent replaces a server that is gone or whose child
could not start.

Parent to child: ``start`` (once), ``call``, ``effect-result``/``effect-error``
(answers to the child's ``effect``); the parent ends a child by killing it.
Child to parent:
``isolation-error``, or ``isolated`` then ``ready`` or ``import-error`` (once);
then per call any number of ``effect`` requests followed by ``return``,
``raise`` or ``fail``.
"""

from __future__ import annotations

import importlib
import os
import resource
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from .codec import (
    EffectRevokedError,
    NonJsonValue,
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

__all__ = ["FORK_SERVER", "main", "serve_forks"]

FORK_SERVER = "--fork-server"
"""The first argument that makes :func:`main` the fork server."""

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
            except (NonJsonValue, FrameTooLarge) as exc:
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


def _isolate(start: dict[str, Any], server: _Forked | None = None) -> None:
    drop = start.get("dropPrivileges") is True
    if server is not None:
        # Forked: the OOM score and the drop are the server's, inherited; what a
        # solution process of the same UID could have changed in the server is not.
        server.check(drop, int(start["uid"]), int(start["gid"]))
    else:
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
    if drop and server is None:
        drop_privileges(int(start["uid"]), int(start["gid"]))
    if drop:
        # What an earlier scenario's process left in a shared place goes before
        # this scenario's solution can see it: every scenario starts clean.
        sweep_own_state([str(p) for p in start.get("sweep", [])])
    make_workdir(str(start["workDir"]))
    # A fresh interpreter gets these from its environment; a forked child, here.
    os.environ["HOME"] = os.environ["TMPDIR"] = str(start["workDir"])


def _import_failure(exc: BaseException) -> dict[str, Any]:
    description = describe_exception(exc)
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    description["message"] = bounded(detail)
    return {"op": "import-error", **description}


def main(argv: list[str], server: _Forked | None = None) -> int:
    """Entry point: ``argv`` is ``[read_fd, write_fd]``, or the fork server's (``FORK_SERVER``
    first, see :func:`serve_forks`)."""
    if argv and argv[0] == FORK_SERVER:
        return serve_forks(argv[1:])
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
        _isolate(start, server)
    except (IsolationError, KeyError, TypeError, ValueError) as exc:
        channel.send({"op": "isolation-error", "message": bounded(str(exc))})
        return 0
    # From here on a crash is the solution's doing, not the verifier's.
    channel.send({"op": "isolated"})
    sys.path[:0] = [str(start["solutionDir"]), *map(str, start.get("importPaths", []))]
    try:
        module = importlib.import_module(str(start["module"]))
    except BaseException as exc:  # any failure to import is the solution's
        channel.send(_import_failure(exc))
        return 0
    channel.send({"op": "ready"})
    types = ValueTypes.from_wire(start.get("valueTypes"), resolver(module))
    return _Server(channel, module, types).serve()


# -- the fork server -------------------------------------------------------------------

_CLONE_PARENT = 0x00008000
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}
_MAX_REQUEST = 64


def fork_supported() -> bool:
    """Whether this machine can fork children for the parent (Linux, a known clone number)."""
    return sys.platform == "linux" and os.uname().machine in _SYS_CLONE


def _inherited() -> dict[str, Any]:
    """What a forked child inherits from the server that a process of its UID could change."""
    return {
        "limits": {
            name: resource.getrlimit(getattr(resource, name))
            for name in sorted(dir(resource))
            if name.startswith("RLIMIT_")
        },
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "cpus": sorted(os.sched_getaffinity(0)),
    }


def _oom_score() -> str:
    try:
        with open("/proc/self/oom_score_adj", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


class _Forked:
    """What a child forked by the server checks before it isolates itself further."""

    def __init__(self, state: dict[str, Any], uid: int, gid: int, dropped: bool) -> None:
        self.state = state
        self.uid, self.gid, self.dropped = uid, gid, dropped

    def check(self, drop: bool, uid: int, gid: int) -> None:
        if drop and not (self.dropped and (self.uid, self.gid) == (uid, gid)):
            raise IsolationError(f"the fork server does not run as {uid}:{gid}")
        if drop and (os.getresuid() != (uid,) * 3 or os.getresgid() != (gid,) * 3):
            raise IsolationError(f"the forked child does not run as {uid}:{gid}")
        if drop and _oom_score() != "1000":
            raise IsolationError("the forked child is not the OOM killer's first choice")
        if _inherited() != self.state:
            raise IsolationError("the fork server's limits, priority or CPUs have changed")


def _cloner() -> Callable[[], int]:
    """``fork()`` whose child is this process's parent's (``CLONE_PARENT``), as os.fork does it."""
    import ctypes  # only the server needs it

    number = _SYS_CLONE[os.uname().machine]
    # PyDLL: the call keeps the GIL, as os.fork's does.
    syscall = ctypes.PyDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long] * 6
    api = ctypes.pythonapi
    flags = _CLONE_PARENT | signal.SIGCHLD

    def clone() -> int:
        api.PyOS_BeforeFork()
        pid = int(syscall(number, flags, 0, 0, 0, 0))
        error = ctypes.get_errno()
        if pid == 0:
            api.PyOS_AfterFork_Child()
            return 0
        api.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(error, os.strerror(error))
        return pid

    return clone


def _close_all_but(keep: set[int]) -> None:
    low = 0
    for fd in sorted(keep):
        # Never an empty range: closerange(n, n) would close everything from n on.
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(low + 1, os.sysconf("SC_OPEN_MAX")))


def _child_of_server(fds: list[int], server: _Forked) -> int:
    """In a forked child: take the scenario's descriptors, drop the server's, then be a child."""
    read_fd, write_fd, out_fd = fds
    os.setsid()
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    # The server's control socket and its own stderr go: only the scenario's pipes stay.
    _close_all_but({0, 1, 2, read_fd, write_fd})
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    return main([str(read_fd), str(write_fd)], server)


def serve_forks(argv: list[str]) -> int:
    """The fork server: ``argv`` is ``[control_fd, uid, gid, drop (1 or 0)]``.

    Answers ``ready`` (or ``error: ...``) once isolated, then, for each
    ``fork`` request carrying three descriptors (the child's read and write
    ends and its output pipe), the forked child's PID (or ``error: ...``).
    Ends when the parent closes the socket.
    """
    control = socket.socket(fileno=int(argv[0]))
    uid, gid, drop = int(argv[1]), int(argv[2]), argv[3] == "1"
    try:
        clone = _cloner()
        try:
            raise_oom_score()
        except IsolationError:
            if drop:
                raise
        if drop:
            drop_privileges(uid, gid)
        os.chdir("/")
    except (IsolationError, OSError, KeyError, AttributeError) as exc:
        control.send(b"error: " + bounded(str(exc)).encode())
        return 0
    # A solution process of this UID may signal the server: only SIGKILL and SIGSTOP
    # reach it (the parent replaces a dead server and wakes a stopped one).
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    server = _Forked(_inherited(), uid, gid, drop)
    control.send(b"ready")
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, _MAX_REQUEST, 3)
        except OSError:
            return 0
        if message != b"fork" or len(fds) != 3:
            return 0  # the parent is gone (or confused): nothing more to fork for
        try:
            pid = clone()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            control.send(b"error: cannot fork: " + bounded(str(exc)).encode())
            continue
        if pid == 0:
            return _child_of_server(fds, server)
        for fd in fds:
            os.close(fd)
        control.send(str(pid).encode())
