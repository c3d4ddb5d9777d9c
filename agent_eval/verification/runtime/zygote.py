"""The zygote: the verifier container's first process, forking a ready child per scenario.

A fresh interpreter per scenario costs its start and the import of the child
kit (``child`` and what it imports), every scenario, on the container's one
CPU. The zygote pays that once: it imports the child kit, and nothing else of
the harness, then forks one child per scenario. The grader, the task and
every result live in the trusted parent, which the zygote starts (``command``)
and which asks it for each child over a socket pair; the zygote never sees
them, so a fork of it holds nothing the solution may not read.

The zygote stays UID 0 and is PID 1 of the container's PID namespace: the
solution's UID can neither signal it nor read its memory, the parent's
``kill(-1)`` sweep spares it as it spared the engine's init, and it reaps
every orphan as that init did. A forked child starts exactly where a fresh
one would be after importing the kit: a new session, /dev/null on stdin, the
output pipe on stdout and stderr, the two pipe ends on descriptors 3 and 4,
nothing else open, the parent's working directory and environment; it then
isolates itself (limits, then the drop to the slot's UID) as every child does.
Its CPU clock starts at the fork, so the kit's import is not charged to the
solution.

Parent to zygote (one JSON object per datagram):
``{"op": "spawn", "cwd", "env"}`` with the child's three pipe ends attached
(``SCM_RIGHTS``: its read end, its write end, its output), ``{"op": "release",
"pid"}`` once the parent has killed a child whose exit it was told of.
Zygote to parent: ``spawned`` (``pid``) or ``error`` (``message``),
``exited`` (``pid``, ``code``, ``status`` as ``waitid`` gives them; the child
stays a zombie, so its PID, its group's id, is not reused while the parent
may still kill the group), ``released`` (``pid``).
When the parent exits, the zygote exits with its status (as PID 1, the
kernel then ends every process left).

Standard library and the child kit only: staged into the sandbox.
"""

from __future__ import annotations

import sys

# The child kit first, before anything of the zygote's own: what is loaded now is what a
# fresh child holds once it imported the kit, and a fork drops every module beyond it.
# (A solution's own signal.py or socket.py must shadow the standard library's in a fork
# exactly as in a fresh child, which had never imported them.)
from . import child as _kit

_FRESH_MODULES = frozenset(sys.modules) - {__name__}

import array  # noqa: E402
import contextlib  # noqa: E402
import fcntl  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from typing import Any, NoReturn  # noqa: E402

__all__ = [
    "ANSWER_TIMEOUT_S",
    "BOOTSTRAP",
    "DETERMINISM",
    "INTERPRETER_FLAGS",
    "ZYGOTE_FD_ENV",
    "Zygote",
    "ZygoteBroken",
    "main",
    "zygote_command",
]

BOOTSTRAP = (
    "import sys,importlib;r=sys.argv[1];sys.path.insert(0,r);"
    "m=importlib.import_module(sys.argv[2]);sys.path.remove(r);"
    "sys.exit(m.main(sys.argv[3:]))"
)
"""``python3 -c BOOTSTRAP ROOT MODULE ARGS…``: import MODULE from ROOT alone, then run it."""
INTERPRETER_FLAGS = ("-s", "-P", "-B")
"""Every solution interpreter's flags (-s -P, not -I: -I would also ignore PYTHONHASHSEED)."""
DETERMINISM = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC", "PYTHONHASHSEED": "0"}
"""One locale, time zone and hash seed for every solution process: the same
solution gets the same verdict on any machine, on any day."""
ZYGOTE_FD_ENV = "AGENT_EVAL_ZYGOTE_FD"
"""The parent's end of the socket pair, by descriptor number, in the parent's environment."""
ANSWER_TIMEOUT_S = 60.0
"""How long the zygote may take to answer (it is trusted; a crowded machine is slow)."""
_MAX_MESSAGE = 64 * 1024
_PIPE_FDS = 3
_CHILD_READ_FD, _CHILD_WRITE_FD = _CHILD_FDS = (3, 4)
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""What the zygote passes on to the parent (an init's duty: the engine's stop reaches it)."""
_EXITED = (os.CLD_EXITED, os.CLD_KILLED, os.CLD_DUMPED)
_CHILD_BROKEN = 70  # EX_SOFTWARE: the fork could not become a child


class ZygoteBroken(RuntimeError):
    """The zygote is gone or answered what it never sends (the verifier's failure)."""


def zygote_command(python: str, sandbox: str, command: Sequence[str]) -> tuple[str, ...]:
    """The container command: the zygote from *sandbox*, starting the parent's *command*."""
    module = f"{__package__ or 'agent_eval.verification.runtime'}.zygote"
    return (python, *INTERPRETER_FLAGS, "-c", BOOTSTRAP, sandbox, module, "--", *command)


# -- the parent's side ------------------------------------------------------------------


class Zygote:
    """The parent's end: ask for children, learn of their exit, release them."""

    def __init__(self, sock: socket.socket, timeout_s: float, pid: int) -> None:
        self.sock = sock
        self.timeout_s = timeout_s
        """How long an answer may take (the zygote is trusted; a crowded machine is slow)."""
        self.pid = pid
        """The zygote's process: its time forking the solution's is the harness's."""
        self._exits: dict[int, tuple[int, int]] = {}

    @classmethod
    def inherited(
        cls, timeout_s: float = ANSWER_TIMEOUT_S, environ: dict[str, str] | None = None
    ) -> Zygote | None:
        """The zygote that started this process, if one did (its descriptor leaves the
        environment, and no process this one starts inherits it)."""
        env: Any = os.environ if environ is None else environ
        value = env.pop(ZYGOTE_FD_ENV, None)
        if value is None:
            return None
        try:
            sock = socket.socket(fileno=int(value))
        except (ValueError, OSError) as exc:
            raise ZygoteBroken(f"{ZYGOTE_FD_ENV}={value!r} is not the zygote's socket") from exc
        sock.set_inheritable(False)
        return cls(sock, timeout_s, os.getppid())

    def spawn(self, cwd: str, env: Mapping[str, str], fds: Sequence[int]) -> int:
        """A new child with *fds* (its read end, write end, output); its PID."""
        request = json.dumps({"op": "spawn", "cwd": cwd, "env": dict(env)}).encode()
        try:
            self.sock.sendmsg(
                [request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
            )
        except OSError as exc:
            raise ZygoteBroken(f"cannot reach the zygote: {exc}") from exc
        answer = self._await(lambda m: m.get("op") in ("spawned", "error"), "a new child")
        if answer.get("op") == "error":
            raise ZygoteBroken(f"the zygote could not fork: {answer.get('message')}")
        return int(answer["pid"])

    def exit_status(self, pid: int) -> tuple[int, int] | None:
        """``(si_code, si_status)`` of *pid* once it exited; never blocks."""
        self._read(0.0)
        return self._exits.get(pid)

    def reap(self, pid: int, timeout_s: float) -> None:
        """Wait until *pid* exited, then have it reaped (its PID may be reused after this).

        Raises:
            TimeoutError: It did not exit within *timeout_s*.
        """
        deadline = time.monotonic() + timeout_s
        while pid not in self._exits:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"child {pid} did not exit")
            self._read(left)
        self._send({"op": "release", "pid": pid})
        self._await(lambda m: m.get("op") == "released" and m.get("pid") == pid, "a release")
        self._exits.pop(pid, None)

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.send(json.dumps(message).encode())
        except OSError as exc:
            raise ZygoteBroken(f"cannot reach the zygote: {exc}") from exc

    def _await(self, wanted: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ZygoteBroken(f"the zygote did not answer with {what} in {self.timeout_s:g} s")
            for message in self._read(left):
                if wanted(message):
                    return message
                if message.get("op") == "error":
                    raise ZygoteBroken(f"the zygote refused {what}: {message.get('message')}")

    def _read(self, timeout_s: float) -> list[dict[str, Any]]:
        """Messages that arrive within *timeout_s* (at least one when any does); exits kept."""
        got: list[dict[str, Any]] = []
        wait = timeout_s
        while select.select([self.sock], [], [], wait)[0]:
            wait = 0.0
            try:
                data = self.sock.recv(_MAX_MESSAGE)
            except OSError as exc:
                raise ZygoteBroken(f"cannot read the zygote's answer: {exc}") from exc
            if not data:
                raise ZygoteBroken("the zygote is gone")
            try:
                message = json.loads(data)
            except ValueError as exc:
                raise ZygoteBroken(f"the zygote sent what is not JSON: {exc}") from exc
            if not isinstance(message, dict):
                raise ZygoteBroken("the zygote sent what is not an object")
            if message.get("op") == "exited":
                self._exits[int(message["pid"])] = (int(message["code"]), int(message["status"]))
            got.append(message)
        return got


# -- the zygote ------------------------------------------------------------------------------


def _zombies_of(me: int, spared: set[int]) -> list[int]:
    """This process's exited children but *spared*, read from /proc (waitpid(-1) would
    take a held child too)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in spared:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[0] == b"Z" and fields[1] == str(me).encode():
            found.append(int(name))
    return found


def _reap_orphans(spared: set[int]) -> None:
    """Reap every exited child but *spared*, at the cost of a syscall each.

    A solution can make orphans exit as fast as it forks them, and what the
    zygote spends on them is on no one's clock: so the next exited child is
    looked at without reaping it, and /proc is read only when a spared one
    is first in line (a scenario's child between its exit and its release).
    """
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        if info.si_pid in spared:
            for pid in _zombies_of(os.getpid(), spared):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, os.WNOHANG)


def _become_child(
    fds: list[int],
    cwd: str,
    env: dict[str, str],
    dispositions: Mapping[signal.Signals, Any],
    sock: socket.socket | None,
) -> NoReturn:
    """In the fork: the descriptors and state of a fresh child, then the child's own main."""
    code = _CHILD_BROKEN
    try:
        if sock is not None:
            sock.close()
        signal.set_wakeup_fd(-1)
        # What the zygote's interpreter started with is what a fresh one would (an
        # ignored SIGHUP or SIGINT is inherited through the parent's exec and its own).
        for number, disposition in dispositions.items():
            signal.signal(number, signal.SIG_DFL if disposition is None else disposition)
        os.setsid()
        # Above every number set below, so no dup2 overwrites a pipe end before it is moved.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, _CHILD_WRITE_FD + 1) for fd in fds]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(high[2], 1)
        os.dup2(high[2], 2)
        os.dup2(high[0], _CHILD_READ_FD)
        os.dup2(high[1], _CHILD_WRITE_FD)
        os.closerange(_CHILD_WRITE_FD + 1, os.sysconf("SC_OPEN_MAX"))
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        # The arguments a fresh child is started with (``-c ROOT MODULE READ WRITE``).
        sys.argv[:] = ["-c", sys.argv[1], f"{__package__}.child", *map(str, _CHILD_FDS)]
        sys.orig_argv[:] = [sys.executable, *INTERPRETER_FLAGS, "-c", BOOTSTRAP, *sys.argv[1:]]
        for name in set(sys.modules) - _FRESH_MODULES:
            del sys.modules[name]
        # A fresh child calls the kit from its first frame; this one has the zygote's
        # below it, which must not cost the solution any recursion depth.
        below, frame = 0, sys._getframe()
        while frame.f_back is not None:
            below, frame = below + 1, frame.f_back
        sys.setrecursionlimit(sys.getrecursionlimit() + below)
        code = _kit.main(sys.argv[3:])
    except BaseException as exc:  # nothing submitted has run: this is the verifier's
        with contextlib.suppress(BaseException):
            os.write(2, f"verifier zygote: the child could not start: {exc!r}\n".encode())
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _received(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One request and the descriptors it carried; (None, []) when the parent closed its end."""
    fds = array.array("i")
    data, ancillary, _, _ = sock.recvmsg(_MAX_MESSAGE, socket.CMSG_SPACE(_PIPE_FDS * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if not data:
        return None, list(fds)
    message = json.loads(data)
    return (message if isinstance(message, dict) else {}), list(fds)


class _Server:
    def __init__(
        self, sock: socket.socket, parent: int, dispositions: Mapping[signal.Signals, Any]
    ) -> None:
        self.sock: socket.socket | None = sock
        self.parent = parent
        self.dispositions = dispositions
        """The signal dispositions the zygote started with, for every fork."""
        self.held: set[int] = set()
        """Forked children not yet released: never reaped before the parent says so."""
        self.told: set[int] = set()

    def _send(self, message: dict[str, Any]) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):  # a parent gone is seen at its exit
                self.sock.send(json.dumps(message).encode())

    def handle(self) -> None:
        assert self.sock is not None
        try:
            message, fds = _received(self.sock)
        except (OSError, ValueError):
            message, fds = {}, []
        try:
            if message is None:
                self.sock.close()
                self.sock = None
                return
            op = message.get("op")
            if op == "spawn":
                self._spawn(message, fds)
            elif op == "release":
                self._release(message.get("pid"))
            else:
                self._send({"op": "error", "message": f"unknown request {op!r}"})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _spawn(self, message: dict[str, Any], fds: list[int]) -> None:
        cwd, env = message.get("cwd"), message.get("env")
        if (
            len(fds) != _PIPE_FDS
            or not isinstance(cwd, str)
            or not isinstance(env, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            self._send({"op": "error", "message": "a malformed spawn request"})
            return
        try:
            pid = os.fork()
        except OSError as exc:
            self._send({"op": "error", "message": str(exc)})
            return
        if pid == 0:
            _become_child(fds, cwd, env, self.dispositions, self.sock)
        self.held.add(pid)
        self._send({"op": "spawned", "pid": pid})

    def _release(self, pid: Any) -> None:
        if not isinstance(pid, int) or pid not in self.told:
            self._send({"op": "error", "message": f"{pid!r} is no exited child of the zygote"})
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # told of only once it exited: it is a zombie
        self.held.discard(pid)
        self.told.discard(pid)
        self._send({"op": "released", "pid": pid})

    def reap(self) -> int | None:
        """Tell of held children that exited, reap the others; the parent's exit status."""
        for pid in sorted(self.held - self.told):
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
            # A ptrace stop (the child traced by PID 1 after PTRACE_TRACEME) is no exit.
            if info is not None and info.si_code in _EXITED:
                self.told.add(pid)
                self._send({"op": "exited", "pid": pid, "code": info.si_code,
                            "status": info.si_status})  # fmt: skip
        _reap_orphans(self.held | {self.parent})
        try:
            done, status = os.waitpid(self.parent, os.WNOHANG)
        except ChildProcessError:
            return 1
        return os.waitstatus_to_exitcode(status) if done else None


def main(argv: list[str]) -> int:
    """``-- COMMAND…``: start the parent's command, serve it, exit with its status."""
    if len(argv) < 2 or argv[0] != "--":
        print("usage: zygote -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    command = argv[1:]
    if any(os.environ.get(name) != value for name, value in DETERMINISM.items()):
        # The hash seed, locale and time zone are read at the interpreter's start:
        # a fork has the zygote's, so the zygote starts again with a fresh child's.
        args = [sys.executable, *INTERPRETER_FLAGS, "-c", BOOTSTRAP, *sys.argv[1:]]
        os.execve(sys.executable, args, {**os.environ, **DETERMINISM})
    # The parent's import path (PYTHONPATH, the trusted half) is not a child's: a
    # fresh child's interpreter never had it.
    inherited = set(os.environ.get("PYTHONPATH", "").split(os.pathsep)) - {""}
    sys.path[:] = [entry for entry in sys.path if entry not in inherited]
    dispositions = {n: signal.getsignal(n) for n in (*_FORWARDED, signal.SIGCHLD)}
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    theirs.set_inheritable(True)
    try:
        parent = os.posix_spawn(
            command[0],
            command,
            {**os.environ, ZYGOTE_FD_ENV: str(theirs.fileno())},
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD),
            # Not in PID 1's group: a group id of 1 would make killpg mean kill(-1).
            setsid=True,
        )
    except OSError as exc:
        print(f"verifier zygote: cannot start {command[0]}: {exc}", file=sys.stderr)
        return 1
    finally:
        theirs.close()

    def forward(number: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(parent, number)

    for number in _FORWARDED:
        signal.signal(number, forward)
    server = _Server(ours, parent, dispositions)
    while True:
        status = server.reap()
        if status is not None:
            # Outside a PID namespace of its own nothing ends what is left: the zygote does.
            for pid in server.held:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            return status if status >= 0 else 128 - status
        waiting = [wake_r] + ([server.sock] if server.sock is not None else [])
        ready = select.select(waiting, [], [])[0]
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 4096):
                    pass
        if server.sock is not None and server.sock in ready:
            server.handle()
