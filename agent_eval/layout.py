"""Where things are: mount points, the consumer, the evidence of a batch, staged harness files.

Standard library only: the consumer installer and the verifier runtime read
it inside their containers too. Every path that more than one module spells
is spelled here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import Generic, TypeVar

__all__ = [
    "ANALYSIS_FILE",
    "ARCHIVES_MOUNT",
    "CATALOG_FILE",
    "CONSUMER_MOUNT",
    "DEPENDENCY_LOCK",
    "EVIDENCE_ENTRIES",
    "GATEWAY_MODELS_ENV",
    "GATEWAY_MOUNT",
    "GATEWAY_RECIPE",
    "GATEWAY_RECORD_FILE",
    "GATEWAY_TOKEN_ENV",
    "HARNESS_ROOT",
    "IN_CONTAINER_CONSUMER",
    "MAX_TRANSCRIPT_BYTES",
    "RECIPE_LOCK",
    "RESULT_FILE",
    "RESULT_MOUNT",
    "RUNNER_LOG_FILE",
    "RUNNER_RECIPES",
    "SOLUTION_DIR",
    "SOLUTION_MOUNT",
    "STAGED_HARNESS",
    "TIMINGS_FILE",
    "TRANSCRIPT_FILE",
    "TRANSCRIPT_MOUNT",
    "VERIFIER_GRADER_MOUNT",
    "VERIFIER_RUNTIME_MOUNT",
    "VERIFIER_SANDBOX",
    "VERIFIER_TRUSTED",
    "AttemptDirectory",
    "ConsumerLayout",
    "RunDirectory",
    "ShippedFiles",
    "attempt_folder",
    "evidence_holding",
    "staged_files",
]

# --- The harness itself ----------------------------------------------------------------

HARNESS_ROOT = Path(__file__).resolve().parent
"""The ``agent_eval`` package this process runs: what is staged into containers, hashed
into the evaluator digest and the image recipes, and shipped as package data."""

# --- Mount points -------------------------------------------------------------------

CONSUMER_MOUNT = "/consumer"
"""The batch's consumer, read-only in every runner and verifier container."""
SOLUTION_MOUNT = "/solution"
"""The runner's writable workspace; in a verifier, a read-only copy of the solution."""
GATEWAY_MOUNT = "/gateway"
"""The model gateway's sockets in a runner container (read-only): ``<upstream>.sock`` each."""
GATEWAY_TOKEN_ENV = "AGENT_EVAL_GATEWAY_TOKEN"
"""The runner's placeholder credential for one attempt (useless outside the gateway)."""
GATEWAY_MODELS_ENV = "AGENT_EVAL_MODELS"
"""The upstream names a runner may reach, comma-separated, in the runner config's order."""
TRANSCRIPT_MOUNT = "/transcript"
"""Where a runner's adapter leaves ``transcript.jsonl`` (writable; never collected as code)."""
TRANSCRIPT_FILE = "transcript.jsonl"
MAX_TRANSCRIPT_BYTES = 2 * 1024 * 1024
"""A transcript is kept up to this size; the rest is cut, and the cut marked."""
VERIFIER_RUNTIME_MOUNT = "/verifier"
"""The staged verifier runtime (read-only, mode 0711: nothing in it can be listed)."""
VERIFIER_TRUSTED = f"{VERIFIER_RUNTIME_MOUNT}/trusted"
"""The parent's half of it (0700, root): the harness, the kit, the repository's
grading helpers and attempt.json. No file the solution's UID can read."""
VERIFIER_SANDBOX = f"{VERIFIER_RUNTIME_MOUNT}/sandbox"
"""The child's half (world-readable): only the modules the child imports before
it imports the solution."""
VERIFIER_GRADER_MOUNT = "/grader/task"
"""The task's grader files, below the 0700 /grader (read-only)."""
RESULT_MOUNT = "/result"
"""The verifier's only writable mount, where its trusted parent writes its results."""
RESULT_FILE = "result.json"
"""The trusted parent's behavioural result, beside its ``analysis.json``."""
TIMINGS_FILE = "timings.json"
"""The parent's timing record, written only when the host asks for one (never a grade)."""
ARCHIVES_MOUNT = "/archives"
"""The candidate wheels, read-only, while the consumer is installed."""

# --- The consumer --------------------------------------------------------------------

CATALOG_FILE = "api-catalog.json"
"""The API catalog's file name under the consumer's ``docs/``."""


P = TypeVar("P", bound=PurePath)


@dataclass(frozen=True)
class ConsumerLayout(Generic[P]):
    """The consumer project's files under *root* (a host path or a mount point)."""

    root: P

    @property
    def site(self) -> P:
        """The library and its dependencies, installed with ``pip --target``."""
        return self.root / "site"

    @property
    def docs(self) -> P:
        """The guides, ``API.md`` and the API catalog: what prompts call the consumer dir."""
        return self.root / "docs"

    @property
    def catalog(self) -> P:
        """The API catalog."""
        return self.root / "docs" / CATALOG_FILE

    @property
    def requirements(self) -> P:
        """Every distribution pinned by version and sha256."""
        return self.root / "requirements.txt"


IN_CONTAINER_CONSUMER = ConsumerLayout(PurePosixPath(CONSUMER_MOUNT))
"""The consumer as runners and verifiers see it."""

# --- The evidence of a batch ------------------------------------------------------------

# The names of an attempt's evidence, below ``runs/<run>/attempt-<k>/``. Which of them
# an attempt has, and their digests, is ``AttemptRecord.evidence_files``: the one table
# the writer, a node's arrival check, the checker and the report go by.
SOLUTION_DIR = "solution"
ANALYSIS_FILE = "analysis.json"
RUNNER_LOG_FILE = "runner.log"
GATEWAY_RECORD_FILE = "gateway.jsonl"


@dataclass(frozen=True)
class AttemptDirectory:
    """``runs/<run>/attempt-<k>/``: what one attempt left as evidence."""

    root: Path

    @property
    def solution(self) -> Path:
        """The collected solution files."""
        return self.root / SOLUTION_DIR

    @property
    def analysis(self) -> Path:
        """analysis.json exactly as the verifier's parent wrote it."""
        return self.root / ANALYSIS_FILE

    @property
    def runner_log(self) -> Path:
        """The runner's own log, when one was kept (optional)."""
        return self.root / RUNNER_LOG_FILE

    @property
    def transcript(self) -> Path:
        """The agent's transcript, one JSON object a line, when one was kept (optional)."""
        return self.root / TRANSCRIPT_FILE

    @property
    def gateway_record(self) -> Path:
        """The model gateway's record of this attempt's requests, when there was one (optional)."""
        return self.root / GATEWAY_RECORD_FILE


@dataclass(frozen=True)
class RunDirectory:
    """One batch's evidence directory, ``<evidence>/<timestamp>-<uuid>/``.

    The writer, the checker and review all find files through this class.
    """

    root: Path

    @property
    def receipt(self) -> Path:
        """The batch record, rewritten atomically after every run."""
        return self.root / "receipt.json"

    @property
    def archives_manifest(self) -> Path:
        """archives.json: the candidate archives and every identity the batch is bound to."""
        return self.root / "archives.json"

    @property
    def consumer_lock(self) -> Path:
        """consumer-lock.json: every distribution installed in the consumer."""
        return self.root / "consumer-lock.json"

    @property
    def archives(self) -> Path:
        """The candidate wheels."""
        return self.root / "archives"

    @property
    def lease(self) -> Path:
        """lease.json: the process that holds the batch (gone once it is cleaned up)."""
        return self.root / "lease.json"

    @property
    def reserve(self) -> Path:
        """Space kept free for the final receipt: given back when the disk fills up."""
        return self.root / ".reserve"

    @property
    def report(self) -> Path:
        """report.html: the reviewer's view, written from the other files (never read back)."""
        return self.root / "report.html"

    @property
    def runs(self) -> Path:
        """``runs/``: every attempt's evidence, and nothing else."""
        return self.root / "runs"

    def attempt(self, run_id: str, attempt: int) -> AttemptDirectory:
        """One attempt's evidence."""
        return AttemptDirectory(self.runs / attempt_folder(run_id, attempt))


EVIDENCE_ENTRIES = frozenset(
    {"receipt.json", "archives.json", "consumer-lock.json", "archives", "runs", "lease.json",
     ".reserve"}
)  # fmt: skip
"""What of a run directory is the batch's evidence (or its state): never written by a
command that only reads the batch (its report.html, an export's atif/ are not)."""


def evidence_holding(path: Path) -> Path | None:
    """The run directory whose evidence *path* is or lies in (links followed), or None.

    A command's output there would replace a file the checker holds the batch to, or add
    one no record accounts for."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a link loop: nothing anyone could write
        return None
    for inner, folder in zip((resolved, *resolved.parents), resolved.parents, strict=False):
        if inner.name in EVIDENCE_ENTRIES and RunDirectory(folder).receipt.is_file():
            return folder
    return None


def attempt_folder(run_id: str, attempt: int) -> str:
    """An attempt's directory below ``runs/``, as a POSIX path."""
    return f"{run_id}/attempt-{attempt}"


# --- Image recipes and example runner configs ------------------------------------------

DEPENDENCY_LOCK = "requirements.lock"
"""The library's hash-pinned runtime dependencies, in the packages directory (optional):
the verifier image's wheelhouse, from which the consumer installs them offline."""
RUNNER_RECIPES = "images/runners"
"""The runner recipes, one directory per agent, relative to the repository or ``shipped/``."""
GATEWAY_RECIPE = "images/gateway"
"""The model gateway's recipe directory, relative to the repository or ``shipped/``."""
RECIPE_LOCK = "requirements.lock"
"""A pip recipe's hash-pinned closure, beside its ``install.json`` (runners, the gateway)."""

SHIPPED_DIR = "shipped"
"""Below the ``agent_eval`` package: the image recipes (``images/``) and the example
runner configs (``examples/runners/``) it ships, as package data."""


@dataclass(frozen=True)
class ShippedFiles:
    """The image recipes and example runner configs a build or a trial reads.

    Each is found at the same relative path in the repository first and in the
    harness's package data second: a repository overrides one recipe (a file, or a
    runner's or the gateway's whole directory, so a lock never mixes with another
    recipe's install.json) by putting its own there, and adds an agent the same way.
    """

    repository: Path
    """The embedding repository's root."""
    harness: Path
    """The ``agent_eval`` package the shipped files come with."""

    def find(self, relative: str) -> Path:
        """The repository's *relative* path when it exists, else the shipped one."""
        own = self.repository / relative
        return own if own.exists() else self.harness / SHIPPED_DIR / relative

    def verifier_requirements(self) -> Path:
        """The verifier's hash-pinned requirements (mypy and pip)."""
        return self.find("images/verifier/requirements.txt")

    def gateway_recipe(self) -> Path:
        """The model gateway's recipe directory (install.json and its lock)."""
        return self.find(GATEWAY_RECIPE)

    def runner_recipe(self, agent: str) -> Path:
        """Agent *agent*'s runner recipe directory (install.json, image.json, the lock)."""
        return self.find(f"{RUNNER_RECIPES}/{agent}")

    def runner_agents(self) -> list[str]:
        """Every agent with a runner recipe (an ``image.json``), shipped or the repository's."""
        roots = (self.repository / RUNNER_RECIPES, self.harness / SHIPPED_DIR / RUNNER_RECIPES)
        return sorted(
            {p.name for root in roots if root.is_dir() for p in root.iterdir()
             if (p / "image.json").is_file()}
        )  # fmt: skip

    def example_runner_config(self, agent: str) -> Path:
        """The example runner config of *agent*."""
        return self.find(f"examples/runners/{agent}.json")


# --- Harness files staged into containers and images ------------------------------------

STAGED_HARNESS: dict[str, tuple[str, ...]] = {
    "verifier": (
        "__init__.py",
        "errors.py",
        "digests.py",
        "layout.py",
        "syntax.py",
        "grading",
        "suite/__init__.py",
        "suite/contract.py",
        "verification/__init__.py",
        "verification/analysis",
        "verification/runtime",
    ),
    "consumer": (
        "__init__.py",
        "errors.py",
        "digests.py",
        "layout.py",
        "consumer/__init__.py",
        "consumer/setup.py",
        "consumer/catalog.py",
    ),
    "sandbox": (
        "__init__.py",
        "verification/__init__.py",
        "verification/runtime/__init__.py",
        "verification/runtime/child.py",
        "verification/runtime/codec.py",
        "verification/runtime/framing.py",
        "verification/runtime/isolation.py",
        "verification/runtime/values.py",
        "verification/runtime/zygote.py",
    ),
    "runner": (
        "__init__.py",
        "layout.py",
        "adapters",
    ),
    "gateway": (
        "__init__.py",
        "gateway/__init__.py",
        "gateway/policy.py",
        "gateway/addon.py",
        "gateway/serve.py",
    ),
}
"""What of ``agent_eval`` each container gets, relative to the package: a file, or a
directory's ``*.py`` files. Each set imports with the standard library alone (a test
imports every module of each set with nothing else on the path)."""


def staged_files(package_root: Path, kind: str) -> list[str]:
    """The ``*.py`` files of :data:`STAGED_HARNESS` [*kind*], relative to *package_root*."""
    found: list[str] = []
    for entry in STAGED_HARNESS[kind]:
        path = package_root / entry
        if path.is_dir():
            found += sorted(
                p.relative_to(package_root).as_posix()
                for p in path.glob("*.py")
                if p.is_file() and not p.is_symlink()
            )
        else:
            found.append(entry)
    return found
