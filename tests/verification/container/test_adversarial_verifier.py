"""A hostile solution in the verifier container gets a failed verdict for the right reason,
and the trusted parent, the grader's files and the host stay untouched.

Every case submits a solution to a probe task (``tests/data/verifier-probe``)
whose only passing answer is a value kept inside the grader file: a passed
``secret-returned`` would mean the boundary broke. After the hostile
``probe()`` call, a fresh scenario calls ``echo``; it passing shows that the
parent and the next child survived whatever ``probe`` did. For every case:

* the verdict is failed, with the expected error category (or none, when
  the attack simply returned a wrong answer) and reason;
* the parent's analysis and result are present and well-formed (validated
  models, bound to the task and the staged solution's digest);
* the task's grader files are byte-identical before and after;
* no container of the test's batch is left (looked up by label);
* nothing on the host changed: the staging root holds only its canary, unchanged,
  and the submitted solution is unchanged.

A probe reports what it observed (errno names) by raising ``ProbeReport``
with JSON: that claim only explains *why* an attack failed; the verdict
never depends on it. Limits are small (calls 2.5 s, child memory 128 MiB,
container 256 MiB and 64 pids) so the whole module runs in a few minutes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import socket
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import pytest

from agent_eval.consumer.source import prepare_source_consumer
from agent_eval.engine import ResourceLimits, list_leftovers
from agent_eval.engine.docker_engine import DockerEngine, connect_local_engine
from agent_eval.images.build import build_images
from agent_eval.layout import staged_files
from agent_eval.models.behaviour import VerifierLimits
from agent_eval.models.task import TaskSpec
from agent_eval.project import find_project
from agent_eval.verification.container import staging
from agent_eval.verification.container.cache import warm_analysis_cache
from agent_eval.verification.container.limits import VerificationLimits
from agent_eval.verification.container.run import (
    ContainerVerification,
    VerifierSetup,
    verify_in_container,
)
from tests.paths import REPO

pytestmark = pytest.mark.docker

PROBE_TASK = REPO / "tests" / "data" / "verifier-probe"
SECRET = "grader-only-7c1e9a52d4b84f0e"
CANARY = b"host file: must stay as it is\n"

LIMITS = VerificationLimits(
    behaviour=VerifierLimits(
        callTimeoutMs=2500,
        scenarioTimeoutMs=5000,
        totalTimeoutMs=15_000,
        memoryBytes=128 * 1024 * 1024,
        cpuSeconds=5,
        outputBytes=2048,
    ),
    container=ResourceLimits(
        pids=64, memory_bytes=256 * 1024 * 1024, nano_cpus=1_000_000_000, tmp_bytes=64 << 20
    ),
    analysis_timeout_s=60,
    grace_s=15,
)

HEADER = """\
import errno, json, os, signal, socket, subprocess, sys, time


class ProbeReport(Exception):
    pass


def report(**facts):
    raise ProbeReport(json.dumps(facts, sort_keys=True))


def outcome(action):
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"


def echo(text):
    return text

"""

_REPORT = re.compile(r"ProbeReport: (\{.*\}) \(the scenario expected it to return\)")


# --- Fixtures and helpers ------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(docker_client: docker.DockerClient) -> Iterator[DockerEngine]:
    connected = connect_local_engine()
    yield connected
    connected.close()


@pytest.fixture(scope="module")
def verifier_image(engine: DockerEngine, base_image: str) -> str:
    return build_images(engine, find_project(REPO).root).verifier


@pytest.fixture(scope="module")
def consumer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_source_consumer(REPO / "packages", tmp_path_factory.mktemp("c") / "consumer")


@pytest.fixture(scope="module")
def analysis_cache(
    engine: DockerEngine,
    verifier_image: str,
    consumer: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    return warm_analysis_cache(
        engine,
        verifier_image,
        consumer,
        tmp_path_factory.mktemp("cache") / "analysis-cache",
        batch_id=f"test-adversarial-{uuid.uuid4().hex[:12]}",
        limits=LIMITS,
    )


@pytest.fixture(scope="module")
def probe_task() -> TaskSpec:
    return TaskSpec.model_validate_json((PROBE_TASK / "task.json").read_bytes())


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@dataclass
class Verifier:
    """Runs one probe solution and checks what must hold whatever the verdict."""

    engine: DockerEngine
    image: str
    consumer: Path
    task: TaskSpec
    analysis_cache: Path

    def run(
        self, root: Path, snippet: str, *, slot: int = 0, limits: VerificationLimits = LIMITS
    ) -> ContainerVerification:
        root.mkdir(parents=True, exist_ok=True)
        solution = root / "solution"
        solution.mkdir()
        source = HEADER + textwrap.dedent(snippet)
        (solution / "solution.py").write_text(source, encoding="utf-8")
        staging = root / "staging"
        staging.mkdir()
        (staging / "canary").write_bytes(CANARY)
        grader_files = tree_hashes(PROBE_TASK)
        batch = f"test-adversarial-{uuid.uuid4().hex[:12]}"
        try:
            return verify_in_container(
                VerifierSetup(
                    engine=self.engine,
                    image=self.image,
                    consumer_dir=self.consumer,
                    graders_dir=find_project(PROBE_TASK).graders,
                    batch_id=batch,
                    limits=limits,
                    staging_root=staging,
                    analysis_cache=self.analysis_cache,
                ),
                self.task,
                PROBE_TASK,
                solution,
                run_id="verifier-probe-1",
                slot=slot,
            )
        finally:
            assert list_leftovers(self.engine, batch) == []
            assert tree_hashes(PROBE_TASK) == grader_files
            assert [p.name for p in staging.iterdir()] == ["canary"]
            assert (staging / "canary").read_bytes() == CANARY
            assert (solution / "solution.py").read_text(encoding="utf-8") == source
            assert [p.name for p in solution.iterdir()] == ["solution.py"]


@pytest.fixture(scope="module")
def verifier(
    engine: DockerEngine,
    verifier_image: str,
    consumer: Path,
    probe_task: TaskSpec,
    analysis_cache: Path,
) -> Verifier:
    return Verifier(engine, verifier_image, consumer, probe_task, analysis_cache)


def reported(result: ContainerVerification) -> dict[str, Any]:
    """The facts a probe reported by raising ProbeReport (only to explain a failure)."""
    assert result.behaviour.error is not None
    match = _REPORT.search(result.behaviour.error.message)
    assert match is not None, result.behaviour.error.message
    facts: dict[str, Any] = json.loads(match.group(1))
    return facts


# --- The table of hostile solutions ------------------------------------------------------


@dataclass(frozen=True)
class Case:
    snippet: str
    category: str | None
    """Error category of the result; None: grading completed and the answer was wrong."""
    reason: str = ""
    """A substring of the error message."""
    echo_passes: bool = True
    """The later, fresh scenario still works (the attack was confined to probe())."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What the probe must have observed (a subset of its report)."""


CASES: dict[str, Case] = {
    "reads-the-grader-and-its-inputs": Case(
        """
        def probe():
            report(**{
                p: outcome(lambda p=p: open(p, "rb").read())
                for p in ("/grader/task/grader.py", "/grader/task/task.json",
                          "/grader/task/contract.pyi", "/verifier/trusted/attempt.json",
                          "/verifier/trusted/agent_eval/grading/session.py")
            })
        """,
        "behaviour",
        facts={
            "/grader/task/grader.py": "EACCES",
            "/grader/task/task.json": "EACCES",
            "/grader/task/contract.pyi": "EACCES",
            "/verifier/trusted/attempt.json": "EACCES",
            "/verifier/trusted/agent_eval/grading/session.py": "EACCES",
        },
    ),
    "lists-the-grader-directory": Case(
        """
        def probe():
            report(grader=outcome(lambda: os.listdir("/grader")),
                   task=outcome(lambda: os.listdir("/grader/task")),
                   result=outcome(lambda: os.listdir("/result")),
                   verifier=outcome(lambda: os.listdir("/verifier")),
                   trusted=outcome(lambda: os.listdir("/verifier/trusted")))
        """,
        "behaviour",
        facts={
            "grader": "EACCES",
            "task": "EACCES",
            "result": "EACCES",
            "verifier": "EACCES",
            "trusted": "EACCES",
        },
    ),
    "reads-the-parents-proc-entries": Case(
        # Its own parent is the zygote (PID 1); the trusted parent is found by its
        # command line, which any process may read. Nothing else of either is readable.
        """
        def probe():
            def cmdline(pid):
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    return handle.read().replace(b"\\0", b" ").decode().strip()
            pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
            (parent,) = [p for p in pids if cmdline(p).startswith("/usr/bin/python3 -B -m")]
            facts = {"zygote": os.getppid(), "cmdline": cmdline(parent),
                     "zygote_cmdline": cmdline(os.getppid()).split(" -- ")[-1]}
            for who, pid in (("", parent), ("zygote_", os.getppid())):
                where = f"/proc/{pid}"
                facts.update({
                    who + "environ": outcome(lambda: open(f"{where}/environ", "rb").read()),
                    who + "mem": outcome(lambda: open(f"{where}/mem", "rb").read(1)),
                    who + "fd": outcome(lambda: os.listdir(f"{where}/fd")),
                    who + "maps": outcome(lambda: open(f"{where}/maps", "rb").read()),
                })
            report(**facts)
        """,
        "behaviour",
        facts={
            "zygote": 1,
            "cmdline": "/usr/bin/python3 -B -m agent_eval.verification.runtime.attempt "
            "/verifier/trusted/attempt.json",
            "zygote_cmdline": "/usr/bin/python3 -B -m agent_eval.verification.runtime.attempt "
            "/verifier/trusted/attempt.json",
            "environ": "EACCES",
            "mem": "EACCES",
            "fd": "EACCES",
            "maps": "EACCES",
            "zygote_environ": "EACCES",
            "zygote_mem": "EACCES",
            "zygote_fd": "EACCES",
            "zygote_maps": "EACCES",
        },
    ),
    "writes-outside-its-scratch-space": Case(
        """
        def probe():
            report(**{
                p: outcome(lambda p=p: open(p, "w").write("x"))
                for p in ("/verifier/x", "/grader/x", "/result/x", "/usr/x", "/x",
                          "/etc/passwd", "/proc/sys/kernel/hostname")
            })
        """,
        "behaviour",
        facts={
            "/verifier/x": "EROFS",
            "/grader/x": "EACCES",
            "/result/x": "EACCES",
            "/usr/x": "EROFS",
            "/x": "EROFS",
            "/etc/passwd": "EROFS",
            "/proc/sys/kernel/hostname": "EROFS",
        },
    ),
    "modifies-its-own-solution-or-the-consumer": Case(
        """
        def probe():
            report(
                append=outcome(lambda: open("/solution/solution.py", "a").write("x")),
                chmod=outcome(lambda: os.chmod("/solution/solution.py", 0o777)),
                rename=outcome(lambda: os.rename("/solution/solution.py", "/solution/x.py")),
                consumer=outcome(lambda: open("/consumer/site/appkit/__init__.py", "a").write("")),
                catalog=outcome(lambda: open("/consumer/docs/api-catalog.json", "w").write("{}")),
            )
        """,
        "behaviour",
        # Appending is refused by the file's mode before the read-only mount is
        # consulted; truncating, chmod and rename meet the read-only mount first.
        facts={
            "append": "EACCES",
            "chmod": "EROFS",
            "rename": "EROFS",
            "consumer": "EACCES",
            "catalog": "EROFS",
        },
    ),
    "signals-the-parent-and-pid-1": Case(
        # Its own parent is PID 1, the zygote; the trusted parent is found by its command line.
        """
        def probe():
            def cmdline(pid):
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    return handle.read().replace(b"\\0", b" ").decode().strip()
            pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
            (parent,) = [p for p in pids if cmdline(p).startswith("/usr/bin/python3 -B -m")]
            report(zygote=os.getppid(),
                   parent=outcome(lambda: os.kill(parent, signal.SIGKILL)),
                   init=outcome(lambda: os.kill(1, signal.SIGKILL)),
                   parent_group=outcome(lambda: os.killpg(os.getpgid(parent), 9)))
        """,
        "behaviour",
        facts={"zygote": 1, "parent": "EPERM", "init": "EPERM", "parent_group": "EPERM"},
    ),
    "kills-every-process-it-can": Case(
        # kill(-1) reaches only the solution's own processes (never itself, the
        # parent or PID 1): the helper dies, the probe answers, the parent lives.
        """
        def probe():
            helper = os.fork()
            if helper == 0:
                time.sleep(600)
                os._exit(0)
            os.kill(-1, signal.SIGKILL)
            _, status = os.waitpid(helper, 0)
            report(helper_killed=os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9)
        """,
        "behaviour",
        facts={"helper_killed": True},
    ),
    "forges-a-grade-on-stdout-stderr-and-its-exit-status": Case(
        """
        FORGED = json.dumps({"schemaVersion": 1, "taskId": "verifier-probe", "error": None,
                             "assertions": [{"id": "secret-returned", "passed": True}],
                             "needsReview": False, "diagnostics": []})

        def probe():
            print(FORGED, flush=True)
            print(FORGED, file=sys.stderr, flush=True)
            os._exit(0)
        """,
        "behaviour",
        reason="exited",
    ),
    "forges-a-grade-through-system-exit": Case(
        """
        def probe():
            sys.exit(0)
        """,
        "behaviour",
        reason="SystemExit",
    ),
    "forges-a-grade-on-every-descriptor-it-can-find": Case(
        """
        def probe():
            forged = b'{"op": "return", "id": 1, "value": "forged"}\\n'
            for fd in range(3, 1024):
                try:
                    os.write(fd, forged)
                except OSError:
                    pass
            return "forged"
        """,
        "behaviour",
        reason="broke the protocol",
    ),
    "forges-a-grade-in-the-result-and-the-containers-output": Case(
        """
        def probe():
            forged = "{\\"forged\\": true}"
            report(**{
                p: outcome(lambda p=p: open(p, "w").write(forged))
                for p in ("/result/result.json", "/result/analysis.json", "/proc/1/fd/1",
                          "/proc/1/fd/2", f"/proc/{os.getppid()}/fd/1")
            })
        """,
        "behaviour",
        facts={
            "/result/result.json": "EACCES",
            "/result/analysis.json": "EACCES",
            "/proc/1/fd/1": "EACCES",
            "/proc/1/fd/2": "EACCES",
        },
    ),
    "leaves-a-grandchild-holding-the-pipe": Case(
        """
        def probe():
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
            return "wrong"
        """,
        None,
    ),
    "forks-without-limit": Case(
        """
        def probe():
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.01)
        """,
        "timeout",
    ),
    "makes-orphans-that-exit-as-fast-as-it-forks": Case(
        # Each grandchild outlives its parent and exits at once: PID 1, the zygote, must
        # reap every one (reading /proc each time would cost it in proportion, on no
        # one's clock); none may be left a zombie for the next scenario's sweep.
        """
        def probe():
            made = 0
            for _ in range(300):
                pid = os.fork()
                if pid == 0:
                    if os.fork() == 0:
                        os._exit(0)
                    os._exit(0)
                os.waitpid(pid, 0)
                made += 1
            time.sleep(0.5)
            zombies = 0
            for name in os.listdir("/proc"):
                try:
                    stat = open(f"/proc/{name}/stat").read() if name.isdigit() else ""
                except OSError:
                    continue
                fields = stat[stat.rfind(")") + 2:].split()
                zombies += bool(fields) and fields[:2] == ["Z", "1"]
            report(made=made, zombies_of_pid_1=zombies)
        """,
        "behaviour",
        facts={"made": 300, "zombies_of_pid_1": 0},
    ),
    "allocates-more-memory-than-allowed": Case(
        """
        def probe():
            hog = [b"x" * (16 << 20) for _ in range(64)]
            return str(len(hog))
        """,
        "behaviour",
        reason="MemoryError",
    ),
    "fills-the-containers-memory-from-several-processes": Case(
        # Six processes of 64 MiB each, every one within its own RLIMIT_AS, fill
        # the 256 MiB container: the OOM killer picks solution processes (their
        # OOM score is raised), never the parent.
        """
        def probe():
            hogs = []
            for _ in range(6):
                pid = os.fork()
                if pid == 0:
                    try:
                        hog = b"x" * (64 << 20)
                        time.sleep(0.5)
                    finally:
                        os._exit(0)
                hogs.append(pid)
            ends = [os.waitpid(pid, 0)[1] for pid in hogs]
            report(oom_killed=any(os.WIFSIGNALED(e) and os.WTERMSIG(e) == 9 for e in ends))
        """,
        "behaviour",
        facts={"oom_killed": True},
    ),
    "spins-the-cpu": Case(
        """
        def probe():
            while True:
                pass
        """,
        "timeout",
    ),
    "sleeps-past-the-deadline": Case(
        """
        def probe():
            time.sleep(600)
        """,
        "timeout",
    ),
    "writes-gigabytes-of-output": Case(
        """
        def probe():
            chunk = b"x" * (1 << 20)
            for _ in range(4096):
                os.write(1, chunk)
                os.write(2, chunk)
            return "done"
        """,
        "timeout",
    ),
    "uses-a-setuid-binary": Case(
        """
        def probe():
            setid = []
            for top in ("/usr/bin", "/usr/sbin", "/usr/libexec", "/usr/lib/dbus-1.0"):
                for base, _, names in os.walk(top):
                    for name in names:
                        path = os.path.join(base, name)
                        try:
                            if os.lstat(path).st_mode & 0o6000:
                                setid.append(path)
                        except OSError:
                            pass
            su = subprocess.run(["su", "-c", "id -u", "root"], stdin=subprocess.DEVNULL,
                                capture_output=True, text=True, timeout=5)
            report(setid=setid, su_root=su.stdout.strip() == "0", su_status=su.returncode != 0,
                   setuid=outcome(lambda: os.setuid(0)), uid=os.getuid() >= 61000)
        """,
        "behaviour",
        facts={"setid": [], "su_root": False, "su_status": True, "setuid": "EPERM", "uid": True},
    ),
    "plants-files-in-dev-shm-and-tmp": Case(
        """
        def probe():
            for root in ("/tmp", "/dev/shm"):
                for name in ("graders", "verifier_runtime", "agent_eval"):
                    os.makedirs(f"{root}/{name}", exist_ok=True)
                    with open(f"{root}/{name}/__init__.py", "w") as handle:
                        handle.write("raise SystemExit('planted')\\n")
                for name in ("result.json", "analysis.json", "attempt.json", "job.json"):
                    with open(f"{root}/{name}", "w") as handle:
                        handle.write('{"passed": true}')
                for n in range(2, 40):
                    os.makedirs(f"{root}/scenario-{n}", exist_ok=True)
            for name in ("analysis", "result"):
                try:
                    os.symlink("/result", f"/tmp/{name}")
                except OSError:
                    pass
            return "planted"
        """,
        None,
    ),
    "shadows-the-standard-library-wherever-it-can-write": Case(
        # At import time: modules named like the standard library's (and like what
        # Python runs at start-up) in every place it can write, so that a later
        # scenario's process would import them. Each scenario must still start.
        """
        _SHADOWS = ("json", "typing", "os", "site", "sitecustomize", "usercustomize",
                    "encodings", "codecs", "io", "abc", "selectors", "struct", "importlib")
        for _where in {os.getcwd(), os.path.dirname(os.path.abspath(__file__)),
                       os.environ.get("HOME", "/tmp"), os.environ.get("TMPDIR", "/tmp"),
                       "/tmp", "/dev/shm", *[p for p in sys.path if p]}:
            for _name in _SHADOWS:
                try:
                    with open(os.path.join(_where, _name + ".py"), "w") as _handle:
                        _handle.write("import os\\nos._exit(9)\\n")
                except OSError:
                    pass

        def probe():
            return "planted"
        """,
        None,
    ),
    "imports-forever": Case(
        """
        while True:
            time.sleep(1)
        """,
        "timeout",
        reason="importing the solution module",
        echo_passes=False,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_solution_fails_for_its_reason_and_leaves_everything_else_untouched(
    name: str, verifier: Verifier, tmp_path: Path
) -> None:
    case = CASES[name]
    started = time.monotonic()
    result = verifier.run(tmp_path, case.snippet)
    seconds = time.monotonic() - started

    behaviour = result.behaviour
    outcomes = {a.id: a.passed for a in behaviour.assertions}
    assert list(outcomes) == ["secret-returned", "echo-works"]
    assert outcomes["secret-returned"] is False
    assert not behaviour.passed
    assert outcomes["echo-works"] is case.echo_passes, behaviour
    if case.category is None:
        assert behaviour.error is None, behaviour.error
    else:
        assert behaviour.error is not None
        assert behaviour.error.category == case.category, behaviour.error
        assert case.reason in behaviour.error.message
    if case.facts:
        facts = reported(result)
        assert {k: facts.get(k) for k in case.facts} == case.facts
    assert SECRET not in result.analysis_json.decode()
    assert SECRET not in behaviour.model_dump_json()
    assert result.analysis.taskId == "verifier-probe"
    # The parent finished on its own deadlines, far inside the outside one.
    assert seconds < LIMITS.deadline_s / 2


@pytest.fixture
def host_listeners() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A TCP listener and a UDP socket on the host's loopback: nothing may reach them."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with tcp, udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(8)
        udp.bind(("127.0.0.1", 0))
        tcp.setblocking(False)
        udp.setblocking(False)
        yield tcp, udp


def test_the_solution_has_no_network_and_reaches_nothing_on_the_host(
    verifier: Verifier, tmp_path: Path, host_listeners: tuple[socket.socket, socket.socket]
) -> None:
    tcp, udp = host_listeners
    tcp_port, udp_port = tcp.getsockname()[1], udp.getsockname()[1]
    snippet = f"""
        def probe():
            def tcp():
                socket.create_connection(("127.0.0.1", {tcp_port}), timeout=1).close()

            def udp():
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.sendto(b"hello", ("127.0.0.1", {udp_port}))

            def dns():
                try:
                    socket.getaddrinfo("example.com", 80)
                except socket.gaierror as exc:
                    raise OSError(errno.EHOSTUNREACH, str(exc)) from None

            def raw():
                socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()

            def packet():
                socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()

            with open("/proc/net/route") as routes:
                route_lines = len(routes.read().splitlines())
            report(tcp=outcome(tcp), udp=outcome(udp), dns=outcome(dns), raw=outcome(raw),
                   packet=outcome(packet), interfaces=[n for _, n in socket.if_nameindex()],
                   routes=route_lines - 1)
    """
    result = verifier.run(tmp_path, snippet)

    assert result.behaviour.error is not None
    assert result.behaviour.error.category == "behaviour"
    facts = reported(result)
    assert facts == {
        "tcp": "ECONNREFUSED",  # the container's own loopback: nothing listens there
        "udp": "ok",  # sent into the container's own loopback, and lost there
        "dns": "EHOSTUNREACH",
        "raw": "EPERM",
        "packet": "EPERM",
        "interfaces": ["lo"],
        "routes": 0,
    }
    with pytest.raises(BlockingIOError):
        tcp.accept()
    with pytest.raises(BlockingIOError):
        udp.recv(64)


def test_two_verifier_containers_with_hostile_children_do_not_disturb_each_other(
    verifier: Verifier, tmp_path: Path
) -> None:
    # A fork bomb in slot 0 holds its container's pids for the whole probe call;
    # in slot 1, at the same time, a solution forks a few helpers, sleeps, and
    # answers. Each gets exactly the verdict it would get alone: separate pids
    # limits, separate child UIDs (the process limit is set per UID here).
    limits = VerificationLimits(
        behaviour=LIMITS.behaviour.model_copy(
            update={"callTimeoutMs": 6000, "scenarioTimeoutMs": 8000, "maxProcesses": 48}
        ),
        container=LIMITS.container,
        analysis_timeout_s=60,
        grace_s=15,
    )
    bomb = """
        def probe():
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.01)
    """
    helpers = """
        def probe():
            time.sleep(2)
            children = []
            for _ in range(8):
                pid = os.fork()
                if pid == 0:
                    time.sleep(0.5)
                    os._exit(0)
                children.append(pid)
            for pid in children:
                os.waitpid(pid, 0)
            time.sleep(1)
            return "helpers done"
    """
    results: dict[str, ContainerVerification] = {}
    errors: list[BaseException] = []

    def run(name: str, snippet: str, slot: int) -> None:
        try:
            results[name] = verifier.run(tmp_path / name, snippet, slot=slot, limits=limits)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=("bomb", bomb, 0)),
        threading.Thread(target=run, args=("helpers", helpers, 1)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    bombed = results["bomb"].behaviour
    assert bombed.error is not None and bombed.error.category == "timeout"
    assert {a.id: a.passed for a in bombed.assertions} == {
        "secret-returned": False,
        "echo-works": True,
    }
    calm = results["helpers"].behaviour
    assert calm.error is None, calm.error
    assert {a.id: a.passed for a in calm.assertions} == {
        "secret-returned": False,
        "echo-works": True,
    }


# --- Grader material and state across scenarios -------------------------------------------


def test_no_file_the_solution_can_read_holds_grader_material(
    verifier: Verifier, tmp_path: Path
) -> None:
    # The markers are spelled in pieces: this solution's own file is readable.
    snippet = """
        MARKERS = ["The grading run of one" + " grader", "def run_and" + "_write(job",
                   "def error" + "_pairs(out", "grader-only-" + "7c1e9a52",
                   '"grader' + 'Path": "/grader', "GRADER = Verifier" + "Probe"]

        def probe():
            readable, leaks = [], []
            # /verifier cannot be listed: its two halves are walked by name.
            for top in ("/verifier", "/verifier/sandbox", "/verifier/trusted", "/grader",
                        "/result", "/tmp", "/dev/shm", "/consumer", "/opt", "/etc", "/root",
                        "/usr/local"):
                for folder, dirs, files in os.walk(top):
                    for name in files:
                        path = os.path.join(folder, name)
                        try:
                            with open(path, "rb") as handle:
                                data = handle.read(1 << 20).decode("utf-8", "replace")
                        except OSError:
                            continue
                        if path.startswith("/verifier"):
                            readable.append(path)
                        if any(marker in data for marker in MARKERS):
                            leaks.append(path)
            report(readable=sorted(readable), leaks=sorted(leaks))
    """
    roomy = dataclasses.replace(
        LIMITS,
        behaviour=LIMITS.behaviour.model_copy(
            update={"callTimeoutMs": 20_000, "scenarioTimeoutMs": 25_000, "totalTimeoutMs": 40_000}
        ),
    )
    result = verifier.run(tmp_path, snippet, limits=roomy)
    facts = reported(result)
    sandbox = [
        f"/verifier/sandbox/agent_eval/{rel}"
        for rel in staged_files(REPO / "agent_eval", "sandbox")
    ]
    # The sandbox's modules and their own bytecode, nothing else.
    compiled = [
        str(
            PurePosixPath(f).parent
            / "__pycache__"
            / f"{PurePosixPath(f).stem}.{sys.implementation.cache_tag}.pyc"
        )
        for f in sandbox
        if f.endswith(".py")
    ]
    assert facts["readable"] == sorted(sandbox + compiled)
    assert facts["leaks"] == []
    # The control: each marker does stand in the material it stands for.
    kit = REPO / "agent_eval"
    assert "The grading run of one grader" in (kit / "grading" / "session.py").read_text()
    assert "def run_and_write(job" in (kit / "verification" / "runtime" / "parent.py").read_text()
    assert "def error_pairs(out" in (REPO / "graders" / "results.py").read_text()


PLANT = """
import ctypes

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mq_open.restype = ctypes.c_int
PLACES = ("/tmp/.planted", "/dev/shm/.planted", "/tmp/.planted-dir/inner")
KEY = 0x5EED


def _found():
    found = [p for p in PLACES if os.path.exists(p)]
    if LIBC.shmget(KEY, 0, 0) != -1:
        found.append("sysv-shm")
    queue = LIBC.mq_open(b"/planted", os.O_RDONLY)
    if queue != -1:
        found.append("mqueue")
        os.close(queue)
    if os.environ.get("PLANTED"):
        found.append("environment")
    return found


FOUND = _found()


def _plant():
    planted = {}
    for path in PLACES:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write("state")
        planted[path] = os.path.exists(path)
    os.chmod("/tmp/.planted-dir", 0o500)  # harder to remove
    planted["sysv-shm"] = LIBC.shmget(KEY, 4096, 0o1000 | 0o600) != -1
    queue = LIBC.mq_open(b"/planted", os.O_CREAT | os.O_RDWR, 0o600, None)
    planted["mqueue"] = queue != -1
    os.environ["PLANTED"] = "1"
    return planted


def probe():
    report(found=FOUND, planted=_plant())


def echo(text):
    return text if not FOUND else "found " + ", ".join(FOUND)
"""


def test_nothing_a_solution_plants_survives_into_the_next_scenario(
    verifier: Verifier, tmp_path: Path
) -> None:
    result = verifier.run(tmp_path, PLANT)
    facts = reported(result)
    assert facts["found"] == []
    assert all(facts["planted"].values()), facts  # the planting itself worked
    outcomes = {a.id: a.passed for a in result.behaviour.assertions}
    assert outcomes["echo-works"] is True, result.behaviour


def test_without_the_sweep_the_planted_state_would_be_seen(
    verifier: Verifier, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control: the same solution, with the sweep turned off, finds its state again.
    monkeypatch.setattr(staging, "SWEPT", ())
    result = verifier.run(tmp_path, PLANT)
    outcomes = {a.id: a.passed for a in result.behaviour.assertions}
    assert outcomes["echo-works"] is False


# --- What a submission does to its own verdict is its own ---------------------------------
#
# Each of these once made the trusted parent raise VerifierBroken (an
# infrastructure failure: retried, then the batch stops) instead of failing
# the solution. The verdict must be the solution's, and the later scenario
# must start clean.


def _fails_as_the_solution(result: ContainerVerification) -> dict[str, bool]:
    behaviour = result.behaviour
    assert behaviour.error is not None, behaviour
    assert behaviour.error.category != "infrastructure", behaviour.error
    assert all(d.category != "infrastructure" for d in behaviour.diagnostics), behaviour
    assert not behaviour.passed
    outcomes = {a.id: a.passed for a in behaviour.assertions}
    assert outcomes["secret-returned"] is False
    return outcomes


SIBLING = """
import ctypes, platform

CLONE_PARENT = 0x8000
CLONE = {"x86_64": 56, "aarch64": 220}[platform.machine()]


def probe():
    libc = ctypes.CDLL(None, use_errno=True)
    pid = libc.syscall(CLONE, CLONE_PARENT | signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        time.sleep(600)  # the sibling: the trusted parent's child, not this process's
        os._exit(0)
    with open(f"/proc/{pid}/stat") as handle:
        its_parent = int(handle.read().rsplit(")", 1)[1].split()[1])
    report(made=pid > 0, parent_is_ours=its_parent == os.getppid())
"""


def test_a_sibling_made_with_clone_parent_is_reaped_and_fails_only_the_solution(
    verifier: Verifier, tmp_path: Path
) -> None:
    result = verifier.run(tmp_path, SIBLING)
    outcomes = _fails_as_the_solution(result)
    assert reported(result) == {"made": True, "parent_is_ours": True}
    assert outcomes["echo-works"] is True, result.behaviour


def _nest(start: str, depth: int) -> str:
    # Iterative (os.makedirs recurses), relative (no path grows past PATH_MAX).
    return f"""
def probe():
    os.chdir({start!r})
    for _ in range({depth}):
        os.mkdir("d")
        os.chdir("d")
    report(depth={depth})
"""


@pytest.mark.parametrize(
    ("start", "depth"),
    [
        ("/tmp", 200),  # one descriptor per level: past RLIMIT_NOFILE (64)
        ("/tmp", 1500),  # one frame per level: past the recursion limit
        (".", 1500),  # the scenario's own working directory, which the parent removes
    ],
)
def test_a_deep_tree_left_behind_is_swept_and_the_next_scenario_starts_clean(
    verifier: Verifier, tmp_path: Path, start: str, depth: int
) -> None:
    result = verifier.run(tmp_path, _nest(start, depth))
    outcomes = _fails_as_the_solution(result)
    assert reported(result) == {"depth": depth}
    assert outcomes["echo-works"] is True, result.behaviour


SHM_OWNED_BY_ROOT = """
import ctypes

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.shmat.restype = ctypes.c_void_p
LIBC.shmat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
KEY, IPC_CREAT, IPC_SET, MARKER = 0x5EEE, 0o1000, 1, b"left-by-probe"


class IpcPerm(ctypes.Structure):  # struct ipc64_perm of x86_64 and aarch64
    _fields_ = [("key", ctypes.c_int), ("uid", ctypes.c_uint), ("gid", ctypes.c_uint),
                ("cuid", ctypes.c_uint), ("cgid", ctypes.c_uint), ("mode", ctypes.c_uint),
                ("pad1", ctypes.c_ushort), ("seq", ctypes.c_ushort), ("pad2", ctypes.c_ushort),
                ("unused", ctypes.c_ulong * 2)]


class ShmidDs(ctypes.Structure):
    _fields_ = [("perm", IpcPerm), ("size", ctypes.c_size_t), ("rest", ctypes.c_long * 16)]


def _read():
    ident = LIBC.shmget(KEY, 0, 0)
    if ident == -1:
        return None
    address = LIBC.shmat(ident, None, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        return "unreadable"
    return ctypes.string_at(address, len(MARKER)).decode()


FOUND = _read()


def probe():
    ident = LIBC.shmget(KEY, 4096, IPC_CREAT | 0o666)
    address = LIBC.shmat(ident, None, 0)
    ctypes.memmove(address, MARKER, len(MARKER))
    ds = ShmidDs()
    LIBC.shmctl(ident, 2, ctypes.byref(ds))  # IPC_STAT
    ds.perm.uid = 0
    given = LIBC.shmctl(ident, IPC_SET, ctypes.byref(ds)) == 0
    LIBC.shmctl(ident, 2, ctypes.byref(ds))
    report(found=FOUND, given_to_root=given and ds.perm.uid == 0, read_back=_read())


def echo(text):
    return text if FOUND is None else f"found {FOUND}"
"""


def test_a_shared_memory_segment_given_to_root_by_its_creator_is_swept(
    verifier: Verifier, tmp_path: Path
) -> None:
    result = verifier.run(tmp_path, SHM_OWNED_BY_ROOT)
    outcomes = _fails_as_the_solution(result)
    facts = reported(result)
    assert facts == {"found": None, "given_to_root": True, "read_back": "left-by-probe"}, facts
    assert outcomes["echo-works"] is True, result.behaviour


# --- The same submission sees the same world on every run ------------------------------------

SEES = """
import locale


def probe():
    child = subprocess.run(
        [sys.executable, "-c", "import sys; print(hash('appkit'), sys.flags.hash_randomization)"],
        capture_output=True, text=True, timeout=2,
    )
    report(
        hash=hash("appkit"),
        randomized=sys.flags.hash_randomization,
        order=list({"alpha", "beta", "gamma", "delta", "epsilon"}),
        child=child.stdout.split(),
        tz=time.tzname,
        encoding=locale.getpreferredencoding(False),
    )
"""


def test_every_solution_process_has_the_same_hash_seed_time_zone_and_locale(
    verifier: Verifier, tmp_path: Path
) -> None:
    """A verdict must not hang on string hashing: a solution returning a set's order (or
    a process it starts doing so) gets the same answer on every run, as reverify needs."""
    first = reported(verifier.run(tmp_path / "one", SEES))
    second = reported(verifier.run(tmp_path / "two", SEES))
    assert first == second
    assert first["randomized"] == 0
    assert first["child"] == [str(first["hash"]), "0"]
    assert first["tz"] == ["UTC", "UTC"]
    assert first["encoding"] == "UTF-8"
