"""A batch whose consumer came from the consumer cache reuses the mypy cache kept beside it,
only when every input is the same and its files are as recorded.

On the fake engine the consumer container writes what the installer would and
the warm-up container writes a mypy cache into its result mount; each test
counts the warm-ups that ran. A second batch of the same consumer runs none
and mounts the same cache; another consumer, image or harness warms anew; a
cache whose files changed is discarded, said once, and warmed again; a
consumer made outside the cache warms its own every time and keeps nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

import agent_eval
import agent_eval.verification.container.cache as analysis_cache
from agent_eval.consumer.archives import PreparedConsumer
from agent_eval.consumer.cache import ConsumerCache, cached_consumer, kept_entry
from agent_eval.digests import sha256_bytes
from agent_eval.engine import ContainerSpec
from agent_eval.engine.fake import FakeRuntime, Outcome
from agent_eval.errors import InfrastructureError
from agent_eval.layout import CONSUMER_MOUNT, RESULT_MOUNT, ConsumerLayout
from agent_eval.models import ArchiveEntry
from agent_eval.project import find_project
from agent_eval.verification.container.cache import (
    ANALYSIS_DIR,
    AnalysisCacheEntry,
    analysis_cache_key,
    kept_analysis_cache,
)
from agent_eval.verification.container.verifier import batch_verifier_factory
from agent_eval.verification.protocol import VerifierContext
from agent_eval.verification.runtime.attempt import MYPY_CACHE_DIR
from tests.fake_consumer import install, mounted
from tests.paths import REPO

WARM_UP = "analysis-cache"
"""The run id of the warm-up's container."""


def _warm(spec: ContainerSpec) -> None:
    """What mypy leaves in the analysis scratch: a cache entry per module it read."""
    cache = mounted(spec, RESULT_MOUNT) / "scratch" / MYPY_CACHE_DIR / "3.11"
    cache.mkdir(parents=True)
    catalog = json.loads(ConsumerLayout(mounted(spec, CONSUMER_MOUNT)).catalog.read_text())
    packages = [p for d in catalog["distributions"] for p in d["packages"]]
    for module in ("builtins", *packages):
        (cache / f"{module}.meta.json").write_text(json.dumps({"id": module}))
        (cache / f"{module}.data.json").write_text(json.dumps({"names": [module]}))


def _container(spec: ContainerSpec, stdin: bytes | None) -> None:
    _warm(spec) if spec.run_id == WARM_UP else install(spec)


class Batches:
    """Batches of one library on the fake engine: a wheel, the verifier image, the caches."""

    def __init__(self, tmp_path: Path) -> None:
        self.engine = FakeRuntime(default_outcome=Outcome(on_start=_container))
        self.image = self.engine.store.add_image(tags=("verifier:test",))
        self.archives_dir = tmp_path / "archives"
        self.archives_dir.mkdir()
        self.wheel = self.archives_dir / "lib-1.0-py3-none-any.whl"
        self.wheel.write_bytes(b"wheel one")
        self.consumers = ConsumerCache(tmp_path / "consumers")
        self.work = tmp_path / "work"
        self.notices: list[str] = []

    @property
    def warm_ups(self) -> int:
        """Warm-up containers run so far."""
        return sum(c.spec.run_id == WARM_UP for c in self.engine.containers.values())

    def consumer(self, name: str, *, cached: bool = True) -> PreparedConsumer:
        data = self.wheel.read_bytes()
        archive = ArchiveEntry(
            filename=self.wheel.name,
            distribution="lib",
            version="1.0",
            sha256=sha256_bytes(data),
            size=len(data),
        )
        # A guide with a link in it cannot be hashed: its consumer is made outside the cache.
        guide = self.work / name / "guide"
        guide.mkdir(parents=True)
        (guide / "lib.md").write_text("# lib\n")
        if not cached:
            (guide / "link.md").symlink_to(guide / "lib.md")
        return cached_consumer(
            self.engine,
            cache=self.consumers,
            verifier_image=self.image,
            stage=self.work / name / "stage",
            archives_dir=self.archives_dir,
            archives=[archive],
            dependency_lock=None,
            guides={"lib": guide},
            batch_id=name,
            fallback_root=self.work / name / "consumer",
        )

    def mypy_cache(self, name: str, consumer: PreparedConsumer | None = None) -> Path:
        """The mypy cache batch *name* mounts (its consumer prepared first, if not given)."""
        consumer = consumer or self.consumer(name)
        return kept_analysis_cache(
            self.engine,
            self.image,
            consumer.root,
            self.work / name / "verifier",
            batch_id=name,
            notice=self.notices.append,
        )


@pytest.fixture
def batches(tmp_path: Path) -> Batches:
    return Batches(tmp_path)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_miss_warms_once_and_keeps_the_cache_in_the_consumers_entry(batches: Batches) -> None:
    consumer = batches.consumer("one")

    cache = batches.mypy_cache("one", consumer)

    assert batches.warm_ups == 1
    entry = kept_entry(consumer.root)
    assert entry is not None
    assert cache.parent.parent == entry.entry / ANALYSIS_DIR
    record = AnalysisCacheEntry.model_validate_json((cache.parent / "entry.json").read_bytes())
    assert record.key == "sha256:" + cache.parent.name
    assert record.inputs["consumer"] == entry.key
    assert set(_files(cache)) == {
        f"3.11/{m}.{kind}.json" for m in ("builtins", "lib") for kind in ("meta", "data")
    }
    assert [p.name for p in cache.parent.parent.iterdir()] == [cache.parent.name]


def test_a_second_batch_of_the_same_consumer_mounts_the_kept_cache_without_a_warm_up(
    batches: Batches,
) -> None:
    first = batches.mypy_cache("one")
    files = _files(first)

    second = batches.mypy_cache("two")

    assert batches.warm_ups == 1
    assert second == first
    assert _files(second) == files
    assert batches.notices == []
    assert not (batches.work / "two" / "verifier").exists()


def test_a_consumer_made_outside_the_cache_warms_its_own_each_time_and_keeps_nothing(
    batches: Batches,
) -> None:
    one = batches.consumer("one", cached=False)
    assert kept_entry(one.root) is None

    first = batches.mypy_cache("one", one)
    second = batches.mypy_cache("two", batches.consumer("two", cached=False))

    assert batches.warm_ups == 2
    assert first.is_relative_to(batches.work / "one" / "verifier")
    assert second.is_relative_to(batches.work / "two" / "verifier")
    assert not batches.consumers.root.exists()


def test_another_consumer_warms_its_own_and_both_stay(batches: Batches) -> None:
    first = batches.mypy_cache("one")
    batches.wheel.write_bytes(b"wheel two")

    second = batches.mypy_cache("two")

    assert batches.warm_ups == 2
    assert second.parent.parent.parent != first.parent.parent.parent
    assert first.is_dir() and second.is_dir()


def test_the_key_changes_with_the_consumer_the_image_and_the_analysis_harness_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = tmp_path / "agent_eval"
    shutil.copytree(
        Path(agent_eval.__file__).parent, harness, ignore=shutil.ignore_patterns("__pycache__")
    )
    monkeypatch.setattr(analysis_cache, "HARNESS_ROOT", harness)
    consumer, image = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    first, _ = analysis_cache_key(consumer, image)

    assert analysis_cache_key(consumer, image)[0] == first
    assert analysis_cache_key("sha256:" + "3" * 64, image)[0] != first
    assert analysis_cache_key(consumer, "sha256:" + "4" * 64)[0] != first
    (harness / "report" / "render.py").write_text("# not part of the analysis\n")
    assert analysis_cache_key(consumer, image)[0] == first
    for part in (
        "verification/analysis/typecheck.py",
        "verification/runtime/attempt.py",
        "verification/container/staging.py",
    ):
        with (harness / part).open("a") as module:
            module.write("# changed\n")
        changed, _ = analysis_cache_key(consumer, image)
        assert changed != first, part
        first = changed


@pytest.mark.parametrize("tamper", ["edit", "add", "remove", "record"])
def test_a_tampered_cache_is_discarded_said_once_and_warmed_again(
    batches: Batches, tamper: str
) -> None:
    first = batches.mypy_cache("one")
    original = _files(first)
    if tamper == "edit":
        (first / "3.11" / "lib.data.json").write_text(json.dumps({"names": ["forged"]}))
    elif tamper == "add":
        (first / "3.11" / "extra.meta.json").write_text("{}")
    elif tamper == "remove":
        (first / "3.11" / "builtins.meta.json").unlink()
    else:
        (first.parent / "entry.json").write_text("{}")

    second = batches.mypy_cache("two")

    assert batches.warm_ups == 2
    assert len(batches.notices) == 1
    assert "mypy cache" in batches.notices[0] and "discarded" in batches.notices[0]
    assert second == first  # the same key, kept anew
    assert _files(second) == original
    assert not [p for p in second.parent.parent.iterdir() if p.name.startswith(".")]
    batches.mypy_cache("three")
    assert batches.warm_ups == 2
    assert len(batches.notices) == 1


def test_a_failed_warm_up_keeps_nothing(batches: Batches) -> None:
    consumer = batches.consumer("one")
    batches.engine.script(Outcome(exit_code=1, stderr=b"mypy broke"))

    with pytest.raises(InfrastructureError, match="warming the analysis cache failed"):
        batches.mypy_cache("one", consumer)

    entry = kept_entry(consumer.root)
    assert entry is not None
    assert list((entry.entry / ANALYSIS_DIR).iterdir()) == []
    batches.mypy_cache("two")
    assert batches.warm_ups == 2


@pytest.mark.parametrize("planted", ["scratch", "scratch/mypy-cache", "scratch/mypy-cache/3.11"])
def test_a_link_the_warm_up_left_is_refused_never_mounted_or_kept(
    batches: Batches, tmp_path: Path, planted: str
) -> None:
    """The warm-up's container writes its result mount: a link there to a host directory
    would be mounted into every verifier container (the engine follows it on the host)."""
    host = tmp_path / "host-dir"
    host.mkdir()
    (host / "key").write_text("the host's own file\n")

    def plant(spec: ContainerSpec, stdin: bytes | None) -> None:
        if spec.run_id != WARM_UP:
            install(spec)
            return
        _warm(spec)
        link = mounted(spec, RESULT_MOUNT) / planted.replace("mypy-cache", MYPY_CACHE_DIR)
        shutil.rmtree(link)
        link.symlink_to(host)

    batches.engine.default_outcome = Outcome(on_start=plant)
    for cached in (True, False):
        consumer = batches.consumer(f"one-{cached}", cached=cached)
        with pytest.raises(InfrastructureError, match="symbolic link"):
            batches.mypy_cache(f"one-{cached}", consumer)
        entry = kept_entry(consumer.root)
        assert entry is None or list((entry.entry / ANALYSIS_DIR).iterdir()) == []
    assert os.listdir(host) == ["key"]
    assert (host / "key").read_text() == "the host's own file\n"


def test_a_consumer_with_a_link_is_refused_before_any_file_of_it_is_read(
    batches: Batches, tmp_path: Path
) -> None:
    """The consumer's container imports the library and writes the consumer: a version
    file linked to a host file must not be read into the batch's record."""
    host = tmp_path / "host-file"
    host.write_text("the host's own file\n")

    def plant(spec: ContainerSpec, stdin: bytes | None) -> None:
        install(spec)
        version = ConsumerLayout(mounted(spec, CONSUMER_MOUNT)).root / "python-version"
        version.unlink()
        version.symlink_to(host)

    batches.engine.default_outcome = Outcome(on_start=plant)
    for cached in (True, False):
        with pytest.raises(InfrastructureError, match="python-version is a symbolic link"):
            batches.consumer(f"one-{cached}", cached=cached)


def test_an_entry_that_cannot_hold_a_cache_warms_one_for_the_batch_and_says_so(
    batches: Batches,
) -> None:
    consumer = batches.consumer("one")
    entry = kept_entry(consumer.root)
    assert entry is not None
    (entry.entry / ANALYSIS_DIR).write_text("not a directory")

    cache = batches.mypy_cache("one", consumer)

    assert batches.warm_ups == 1
    assert cache.is_relative_to(batches.work / "one" / "verifier")
    assert len(batches.notices) == 1 and "cannot be written" in batches.notices[0]


def test_concurrent_batches_of_the_same_consumer_end_with_one_cache(batches: Batches) -> None:
    consumer = batches.consumer("one")
    results: list[Path] = []
    barrier = threading.Barrier(2)

    def warm_together(spec: ContainerSpec, stdin: bytes | None) -> None:
        _warm(spec)
        barrier.wait(timeout=10)  # both are warmed before either is kept

    batches.engine.default_outcome = Outcome(on_start=warm_together)
    threads = [
        threading.Thread(target=lambda n=n: results.append(batches.mypy_cache(n, consumer)))
        for n in ("one", "two")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert batches.warm_ups == 2
    assert len(results) == 2 and results[0] == results[1]
    assert [p for p in results[0].parent.parent.iterdir()] == [results[0].parent]
    assert batches.notices == []


def test_caches_unused_for_a_day_are_pruned_when_another_is_kept(batches: Batches) -> None:
    consumer = batches.consumer("one")
    kept = batches.mypy_cache("one", consumer).parent
    old = kept.with_name("0" * 64)
    kept.rename(old)
    day_ago = time.time() - 25 * 3600
    os.utime(old, (day_ago, day_ago))

    new = batches.mypy_cache("two", consumer).parent

    assert not old.exists()
    assert new == kept and new.is_dir()


def test_the_batch_verifier_mounts_the_kept_cache(batches: Batches) -> None:
    make = batch_verifier_factory(find_project(REPO), batches.notices.append)

    def verifier(name: str) -> Path | None:
        context = VerifierContext(
            engine=batches.engine,
            image_id=batches.image,
            consumer_dir=batches.consumer(name).root,
            batch_id=name,
            slots=1,
            work_dir=batches.work / name / "verifier",
        )
        return make(context).setup.analysis_cache

    first, second = verifier("one"), verifier("two")

    assert batches.warm_ups == 1
    assert first is not None and first == second
    entry = kept_entry(batches.consumer("three").root)
    assert entry is not None and first.is_relative_to(entry.entry)


def test_the_cache_record_has_exactly_these_fields() -> None:
    assert set(AnalysisCacheEntry.model_fields) == {"schemaVersion", "key", "inputs", "filesDigest"}
