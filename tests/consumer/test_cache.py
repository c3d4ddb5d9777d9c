"""A cached consumer is used only when every input is the same and its files are as recorded.

The consumer container is scripted on the fake engine to write what the
installer would; each test counts the consumer containers that ran. A second
preparation with the same inputs runs none and describes the same consumer
(the same lock, the same catalog); any input that differs runs one; an entry
whose files changed is discarded, said, and prepared again.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from agent_eval.consumer.archives import PreparedConsumer, installed_digest, prepare_consumer
from agent_eval.consumer.cache import (
    CACHE_ENV,
    CacheEntry,
    ConsumerCache,
    cached_consumer,
    consumer_key,
    files_digest,
    kept_entry,
)
from agent_eval.digests import sha256_bytes
from agent_eval.engine import ContainerSpec
from agent_eval.engine.fake import FakeRuntime, Outcome
from agent_eval.errors import InfrastructureError
from agent_eval.layout import ConsumerLayout
from agent_eval.models import ArchiveEntry
from tests.fake_consumer import install


class Inputs:
    """One batch's inputs on the fake engine: a wheel, a guide, the verifier image."""

    def __init__(self, tmp_path: Path) -> None:
        self.engine = FakeRuntime(default_outcome=Outcome(on_start=install))
        self.image = self.engine.store.add_image(tags=("verifier:test",))
        self.archives_dir = tmp_path / "archives"
        self.archives_dir.mkdir()
        self.wheel = self.archives_dir / "lib-1.0-py3-none-any.whl"
        self.wheel.write_bytes(b"wheel one")
        self.guide = tmp_path / "GUIDE.md"
        self.guide.write_text("# lib\n")
        self.lock = tmp_path / "requirements.lock"
        self.lock.write_text("")
        self.cache = ConsumerCache(tmp_path / "cache")
        self.work = tmp_path / "work"
        self.notices: list[str] = []

    @property
    def runs(self) -> int:
        """Consumer containers run so far."""
        return sum(c.spec.role == "consumer" for c in self.engine.containers.values())

    def archives(self) -> list[ArchiveEntry]:
        data = self.wheel.read_bytes()
        return [
            ArchiveEntry(
                filename=self.wheel.name,
                distribution="lib",
                version="1.0",
                sha256=sha256_bytes(data),
                size=len(data),
            )
        ]

    def prepare(self, name: str = "batch") -> PreparedConsumer:
        return cached_consumer(
            self.engine,
            cache=self.cache,
            verifier_image=self.image,
            stage=self.work / name / "stage",
            archives_dir=self.archives_dir,
            archives=self.archives(),
            dependency_lock=self.lock,
            guides={"lib": self.guide},
            batch_id=name,
            fallback_root=self.work / name / "consumer",
            notice=self.notices.append,
        )


@pytest.fixture
def inputs(tmp_path: Path) -> Inputs:
    return Inputs(tmp_path)


def test_a_miss_prepares_the_consumer_in_the_cache_and_records_its_files(inputs: Inputs) -> None:
    prepared = inputs.prepare()

    assert inputs.runs == 1
    assert prepared.root.parent.parent == inputs.cache.root
    entry = CacheEntry.model_validate_json((prepared.root.parent / "entry.json").read_bytes())
    assert entry.key == "sha256:" + prepared.root.parent.name
    assert [d.name for d in prepared.distributions] == ["lib"]
    assert not any(p.name.startswith(".building-") for p in inputs.cache.root.iterdir())


def test_the_same_inputs_reuse_the_entry_and_bind_the_same_consumer(inputs: Inputs) -> None:
    first = inputs.prepare("one")
    second = inputs.prepare("two")

    assert inputs.runs == 1
    assert second.root == first.root
    assert second.lock("sha256:" + "0" * 64) == first.lock("sha256:" + "0" * 64)
    assert second.catalog == first.catalog
    assert inputs.notices == []


@pytest.mark.parametrize(
    "change",
    ["wheel", "guide", "lock", "image"],
)
def test_any_different_input_prepares_another_consumer(inputs: Inputs, change: str) -> None:
    first = inputs.prepare("one")
    if change == "wheel":
        inputs.wheel.write_bytes(b"wheel two")
    elif change == "guide":
        inputs.guide.write_text("# lib, revised\n")
    elif change == "lock":
        inputs.lock.write_text("dep==1 --hash=sha256:" + "1" * 64 + "\n")
    else:
        inputs.image = inputs.engine.store.add_image(tags=("verifier:other",))

    second = inputs.prepare("two")

    assert inputs.runs == 2
    assert second.root != first.root
    assert first.root.is_dir()  # the other entry stays for batches of its own inputs


@pytest.mark.parametrize("tamper", ["edit", "add", "remove", "record"])
def test_a_tampered_entry_is_discarded_said_and_prepared_again(inputs: Inputs, tamper: str) -> None:
    first = inputs.prepare("one")
    layout = ConsumerLayout(first.root)
    if tamper == "edit":
        (layout.site / "lib-1.0.dist-info" / "RECORD").write_text("lib/evil.py,,\n")
    elif tamper == "add":
        (layout.site / "sitecustomize.py").write_text("import os\n")
    elif tamper == "remove":
        layout.catalog.unlink()
    else:
        (first.root.parent / "entry.json").write_text("{}")

    second = inputs.prepare("two")

    assert inputs.runs == 2
    assert len(inputs.notices) == 1
    assert "discarded" in inputs.notices[0]
    assert not (layout.site / "sitecustomize.py").exists()
    assert "evil" not in (layout.site / "lib-1.0.dist-info" / "RECORD").read_text()
    third = inputs.prepare("three")
    assert inputs.runs == 2
    assert third.lock("sha256:" + "0" * 64) == second.lock("sha256:" + "0" * 64)


def test_a_lock_names_the_entry_its_consumer_came_from_and_the_files_it_held(
    inputs: Inputs,
) -> None:
    kept = inputs.prepare("one")
    reused = inputs.prepare("two")
    key = "sha256:" + kept.root.parent.name

    for prepared in (kept, reused):
        lock = prepared.lock("sha256:" + "0" * 64)
        assert lock.cacheEntry == key
        assert lock.installedDigest == installed_digest(prepared.root)
    fresh = fresh_consumer(inputs, "fresh")
    assert fresh.lock("sha256:" + "0" * 64).cacheEntry is None
    assert installed_digest(fresh.root) == installed_digest(kept.root)  # the guides aside


def test_an_entry_rewritten_with_its_record_is_used_but_its_lock_tells_a_fresh_install_apart(
    inputs: Inputs,
) -> None:
    # The cache cannot tell (its record is rewritten too): the batch's lock must.
    first = inputs.prepare("one")
    (ConsumerLayout(first.root).site / "lib" / "__init__.py").write_text("def lenient(): ...\n")
    record_path = first.root.parent / "entry.json"
    record = CacheEntry.model_validate_json(record_path.read_bytes())
    forged = record.model_copy(update={"filesDigest": files_digest(first.root)})
    record_path.write_text(forged.model_dump_json())

    poisoned = inputs.prepare("two")

    assert inputs.runs == 1 and inputs.notices == []
    lock = poisoned.lock("sha256:" + "0" * 64)
    assert lock.cacheEntry == record.key
    assert lock.installedDigest != installed_digest(fresh_consumer(inputs, "fresh").root)


def fresh_consumer(inputs: Inputs, name: str) -> PreparedConsumer:
    """What the checker installs for itself: no cache, no guides."""
    return prepare_consumer(
        inputs.engine,
        verifier_image=inputs.image,
        root=inputs.work / name / "consumer",
        stage=inputs.work / name / "stage",
        archives_dir=inputs.archives_dir,
        archives=inputs.archives(),
        dependency_lock=inputs.lock,
        guides={},
        batch_id=name,
    )


def test_a_failed_preparation_leaves_no_entry(inputs: Inputs) -> None:
    inputs.engine.script(Outcome(exit_code=3, stderr=b"pip install failed"))

    with pytest.raises(InfrastructureError, match="preparing the consumer failed"):
        inputs.prepare("one")

    assert list(inputs.cache.root.iterdir()) == []
    inputs.prepare("two")
    assert inputs.runs == 2


def test_a_guide_that_cannot_be_hashed_is_prepared_without_the_cache(
    inputs: Inputs, tmp_path: Path
) -> None:
    guide = tmp_path / "guide-dir"
    guide.mkdir()
    (guide / "real.md").write_text("x")
    (guide / "link.md").symlink_to(guide / "real.md")
    inputs.guide = guide

    prepared = inputs.prepare("one")

    assert prepared.root == inputs.work / "one" / "consumer"
    assert not inputs.cache.root.exists()


def test_concurrent_batches_of_the_same_inputs_end_with_one_entry(inputs: Inputs) -> None:
    results: list[PreparedConsumer] = []
    barrier = threading.Barrier(2)

    def install_together(spec: ContainerSpec, stdin: bytes | None) -> None:
        install(spec, stdin)
        barrier.wait(timeout=10)  # both are built before either is kept

    inputs.engine.default_outcome = Outcome(on_start=install_together)
    threads = [
        threading.Thread(target=lambda n=n: results.append(inputs.prepare(n)))
        for n in ("one", "two")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(results) == 2
    assert results[0].root == results[1].root
    entries = [p for p in inputs.cache.root.iterdir()]
    assert entries == [results[0].root.parent]


def test_entries_unused_for_a_day_are_pruned_when_another_is_kept(inputs: Inputs) -> None:
    old = inputs.prepare("one").root.parent
    day_ago = time.time() - 25 * 3600
    os.utime(old, (day_ago, day_ago))
    inputs.wheel.write_bytes(b"wheel two")

    new = inputs.prepare("two").root.parent

    assert not old.exists()
    assert new.is_dir()


def test_the_key_changes_with_each_input_and_only_with_them(inputs: Inputs) -> None:
    def key() -> str:
        keyed = consumer_key(
            verifier_image=inputs.image,
            archives=inputs.archives(),
            dependency_lock=inputs.lock,
            guides={"lib": inputs.guide},
        )
        assert keyed is not None
        return keyed[0]

    first = key()
    assert key() == first
    inputs.guide.write_text("# other\n")
    assert key() != first


def test_the_cache_is_where_the_environment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "/somewhere/consumers")
    assert ConsumerCache.default(Path("/evidence")).root == Path("/somewhere/consumers")
    monkeypatch.delenv(CACHE_ENV)
    assert ConsumerCache.default(Path("/evidence")).root == Path("/evidence/.consumers")


def test_a_cached_consumer_names_its_entry_and_no_other_consumer_does(
    inputs: Inputs, tmp_path: Path
) -> None:
    prepared = inputs.prepare("one")

    kept = kept_entry(prepared.root)

    assert kept is not None
    assert kept.entry == prepared.root.parent
    assert kept.key == "sha256:" + kept.entry.name
    assert kept_entry(tmp_path / "elsewhere" / "consumer") is None
    record = kept.entry / "entry.json"
    record.write_text(record.read_text().replace(kept.key, "sha256:" + "0" * 64))
    assert kept_entry(prepared.root) is None  # a record of another key


def test_the_entry_record_has_exactly_these_fields() -> None:
    assert set(CacheEntry.model_fields) == {"schemaVersion", "key", "inputs", "filesDigest"}
