"""Inside the verifier image: install the consumer offline and generate its API catalog.

    python3 -m agent_eval.consumer.setup --distribution NAME [...]

Runs as the consumer container's command with the candidate archives at
/archives, the consumer project at /consumer (writable) and the image's
wheelhouse at /opt/agent-eval/wheelhouse. pip installs exactly the pinned,
hashed requirements (no index, no network) into /consumer/site and compiles
their bytecode with this interpreter (checked against each source's hash, and
outside every RECORD, so the lock is the same); the catalog is generated from
what was installed. Standard library only.
"""

from __future__ import annotations

import argparse
import compileall
import os
import py_compile
import subprocess
import sys

from agent_eval.layout import ARCHIVES_MOUNT, CONSUMER_MOUNT, IN_CONTAINER_CONSUMER

CONSUMER = CONSUMER_MOUNT
ARCHIVES = ARCHIVES_MOUNT
WHEELHOUSE = "/opt/agent-eval/wheelhouse"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="consumer_setup")
    parser.add_argument("--distribution", action="append", required=True)
    args = parser.parse_args(argv)
    with open(f"{CONSUMER}/python-version", "w", encoding="utf-8") as handle:
        handle.write(sys.version.split()[0] + "\n")
    try:
        import mypy.version  # the verifier image's type checker, recorded as toolchain

        mypy_version = mypy.version.__version__
    except ImportError:
        mypy_version = "absent"
    with open(f"{CONSUMER}/mypy-version", "w", encoding="utf-8") as handle:
        handle.write(mypy_version + "\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "PIP_NO_INDEX": "1",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    install = [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--no-index",
        "--require-hashes", "--only-binary=:all:", "--no-compile",
        "--find-links", WHEELHOUSE, "--find-links", ARCHIVES,
        "--target", str(IN_CONTAINER_CONSUMER.site),
        "-r", str(IN_CONTAINER_CONSUMER.requirements),
    ]  # fmt: skip
    done = subprocess.run(install, env=env, check=False)
    if done.returncode != 0:
        print(f"pip install failed with exit {done.returncode}", file=sys.stderr)
        return 3
    # Every verification imports the library in several fresh processes: compiled
    # once here, never again in each of them.
    compileall.compile_dir(
        IN_CONTAINER_CONSUMER.site,
        quiet=2,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )
    catalog = [sys.executable, "-m", "agent_eval.consumer.catalog"]
    catalog += ["--output-dir", str(IN_CONTAINER_CONSUMER.docs)]
    for name in args.distribution:
        catalog += ["--distribution", name]
    paths = f"{IN_CONTAINER_CONSUMER.site}:{os.environ.get('PYTHONPATH', '/verifier')}"
    done = subprocess.run(catalog, env={**env, "PYTHONPATH": paths}, check=False)
    if done.returncode != 0:
        print(f"catalog generation failed with exit {done.returncode}", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
