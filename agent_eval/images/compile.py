"""Bytecode for an image's Python trees, compiled by the image's own interpreter.

An image's root filesystem is read-only at run time, so bytecode that is not
in the image is recompiled in memory at every start. The builder therefore
compiles the staged trees before it writes their layer, in a ``build``
container from the base image (pinned by id: the interpreter that compiles is
the one that will run, whatever Python the host has), with no network,
each tree bind-mounted at its path in the image (so tracebacks name that
path).

The output is reproducible: every ``.py`` file is compiled in one process, in
sorted order, with ``PYTHONHASHSEED=0`` (set and frozenset constants are
marshalled in hash order), into checked-hash pycs (PEP 552: they name a hash
of their source, never its mtime). A file that does not compile (a template,
another Python's syntax) gets no pyc. The same container then imports the
modules a recipe names, a smoke test of the payload against the real
interpreter.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from agent_eval.engine import ContainerEngine, ContainerSpec, Mount, ResourceLimits, run_container
from agent_eval.errors import InfrastructureError

__all__ = ["compile_trees"]

_TIMEOUT_S = 1200.0
_LOG_LIMIT = 64 * 1024
_SCRIPT = """
import importlib, importlib.util, json, os, py_compile, sys
job = json.loads(sys.argv[1])
mode = py_compile.PycInvalidationMode.CHECKED_HASH
for root in job["compile"]:
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(here, name)
                cfile = importlib.util.cache_from_source(path)
                try:
                    py_compile.compile(path, cfile, path, True, invalidation_mode=mode)
                except (py_compile.PyCompileError, SyntaxError, ValueError, UnicodeError):
                    pass
sys.path[:0] = job["path"]
for module in job["imports"]:
    importlib.import_module(module)
"""


def compile_trees(
    engine: ContainerEngine,
    base_id: str,
    trees: Sequence[tuple[Path, str]],
    *,
    imports: Sequence[str] = (),
    import_path: Sequence[str] = (),
    environment: Mapping[str, str] | None = None,
) -> None:
    """Compile every ``.py`` of *trees* in place, then import *imports*.

    Args:
        engine: The engine.
        base_id: The base image's id (its python3 compiles).
        trees: (host directory, its path in the image) pairs; each is mounted there
            read-write and gets its ``__pycache__`` directories.
        imports: Modules to import afterwards (a smoke test).
        import_path: Directories put first on ``sys.path`` for those imports.
        environment: More environment for the imports.

    Raises:
        InfrastructureError: The container failed, or an import did.
    """
    job = {"compile": [target for _, target in trees], "path": list(import_path)}
    job["imports"] = list(imports)
    spec = ContainerSpec(
        image=base_id,
        command=("/usr/bin/python3", "-s", "-B", "-c", _SCRIPT, json.dumps(job)),
        role="build",
        batch_id=f"images-{uuid.uuid4().hex[:12]}",
        run_id="compile",
        mounts=tuple(Mount(source, target, read_only=False) for source, target in trees),
        environment={**(environment or {}), "PYTHONHASHSEED": "0", "HOME": "/tmp"},
        limits=ResourceLimits(pids=64, memory_bytes=2 << 30, tmp_bytes=64 << 20),
    )
    done = run_container(engine, spec, timeout_s=_TIMEOUT_S, log_limit_bytes=_LOG_LIMIT)
    if done.wait.timed_out or done.wait.exit_code != 0:
        tail = done.output.stderr.decode("utf-8", "replace")[-2000:]
        raise InfrastructureError(
            f"compiling {', '.join(t for _, t in trees) or 'nothing'} or importing "
            f"{', '.join(imports) or 'nothing'} in the base image failed (exit "
            f"{done.wait.exit_code}, timed out: {done.wait.timed_out}):\n{tail}"
        )
