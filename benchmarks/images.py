"""Two fresh clones of this commit build the same images: recipe digests and ids from both.

    .venv/bin/python benchmarks/images.py [--runner claude-code ...] [--cold]

Clones the repository's HEAD twice into a temporary directory, then, on the
local engine:

* **first build**: the first clone assembles every image from nothing and
  loads it (``build_images(rebuild=True)``: no layer of the engine is reused,
  only the downloads cache);
* **second clone**: the second clone assembles the same images from nothing
  again, without loading (the id is the digest of the config it writes);
* **cached build**: the first clone builds again; every tag is present.

Prints a table (image, recipe digest, id from each clone) and one JSON line;
exits 1 when an id differs. ``--cold`` uses an empty downloads cache (the
wheels and npm packages are fetched again). Images the benchmark created are
removed at the end; those that were present before are left alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agent_eval.engine.docker_engine import connect_local_engine  # noqa: E402
from agent_eval.images.archive import image_id  # noqa: E402
from agent_eval.images.base import BASE_REFERENCE  # noqa: E402
from agent_eval.images.build import Builder, build_images, default_cache_root  # noqa: E402
from agent_eval.images.recipes import Sources, image_names, image_tag, recipe_digest  # noqa: E402


def _log(message: str) -> None:
    print(f"images: {message}", file=sys.stderr)


def _clone(destination: Path) -> Path:
    command = ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(destination)]
    subprocess.run(command, check=True)
    return destination


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runner", action="append", default=None, help="agent (repeatable)")
    parser.add_argument("--cold", action="store_true", help="start from an empty download cache")
    args = parser.parse_args()
    runners = args.runner or ["claude-code"]
    engine = connect_local_engine()
    base = engine.image_id(BASE_REFERENCE)
    if base is None:
        print(f"the base image {BASE_REFERENCE} is absent; run scripts/setup", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="images-bench.") as scratch:
        root = Path(scratch)
        cache = root / "cache" if args.cold else default_cache_root()
        first, second = _clone(root / "first"), _clone(root / "second")
        names = image_names(runners)
        (root / "w0").mkdir()
        probe = Builder(engine, Sources.of(first), base, work_dir=root / "w0", cache_root=cache)
        tags = {name: image_tag(probe.recipe(name)) for name in names}
        present = {name for name, tag in tags.items() if engine.inspect_image(tag) is not None}

        started = time.monotonic()
        built = build_images(
            engine, first, runners=runners, cache_root=cache, rebuild=True, log=_log
        )
        first_build = time.monotonic() - started
        ids = {
            "verifier": built.verifier,
            "runner-base": built.runner_base,
            "reference-runner": built.reference_runner,
            "gateway": built.gateway,
            **{f"runner-{a}": built.runners[a] for a in runners},
        }

        started = time.monotonic()
        (root / "w2").mkdir()
        fresh = Builder(
            engine, Sources.of(second), base, work_dir=root / "w2", cache_root=cache, log=_log
        )
        again = {name: image_id(fresh.assemble(name, keep=False).config) for name in names}
        second_build = time.monotonic() - started

        started = time.monotonic()
        build_images(engine, first, runners=runners, cache_root=cache)
        cached_build = time.monotonic() - started

        rows = [
            {
                "image": name,
                "recipe": recipe_digest(fresh.recipe(name)),
                "first": ids[name],
                "second": again[name],
                "same": ids[name] == again[name],
            }
            for name in names
        ]
        for name in reversed(names):  # children before the runner base they are FROM
            if name not in present:
                subprocess.run(["docker", "rmi", tags[name]], capture_output=True, check=False)
    engine.close()
    print(f"{'image':<20} {'recipe digest':<20} {'id (first clone)':<20} {'id (second clone)':<20}")
    for row in rows:
        print(
            f"{row['image']:<20} {str(row['recipe'])[7:23]:<20} {str(row['first'])[7:23]:<20} "
            f"{str(row['second'])[7:23]:<20} {'same' if row['same'] else 'DIFFERENT'}"
        )
    print(
        f"first build {first_build:.1f} s, second clone {second_build:.1f} s, "
        f"cached build {cached_build:.1f} s ({'cold' if args.cold else 'warm'} downloads)"
    )
    summary = {
        "images": rows,
        "firstBuildSeconds": round(first_build, 1),
        "secondCloneSeconds": round(second_build, 1),
        "cachedBuildSeconds": round(cached_build, 1),
        "downloads": "cold" if args.cold else "warm",
    }
    print(json.dumps(summary, sort_keys=True))
    return 0 if all(row["same"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
