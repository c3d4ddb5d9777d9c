"""The build lock is written from pip's resolution: every pin is the wheel pip chose, with
the sha256 pip's report gives, in the format packing reads; what a backend's
get_requires_for_build_wheel asks for beyond [build-system] requires is resolved with the
rest until nothing new is asked; a lock that exists and pins something else is named and
kept unless forced, one that pins the same versions and hashes is left as it is (its
comments and layout too); a report pip could not have written is refused naming the
entry, and an error of the command is one line. The real resolution (slow: it reaches the
index by package name) locks a setuptools and a hatchling distribution and packs both with
that lock.

``data/packing/pip-report-hatch.json`` is pip's report of ``hatchling hatch-vcs``, with
the index's address, the long descriptions and the machine's kernel left out.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.packing import BUILD_LOCK, BuildCache, build_archives
from agent_eval.packing.lock import read_build_lock
from agent_eval.packing.locking import (
    RecordedResolver,
    lock_build_requirements,
    lock_text,
    parse_pip_report,
)
from agent_eval.packing.sources import SourceDistribution
from tests.paths import DATA
from tests.test_packing import HATCH_LOCK, git, hatch_vcs_distribution, tiny_distribution

RECORDED = DATA / "packing" / "pip-report-hatch.json"


def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDED.read_bytes())
    return data


def report(*names: str, extra: Sequence[tuple[str, str]] = ()) -> bytes:
    """The recorded report with only *names*' entries, and a made-up wheel per *extra*."""
    document = recorded()
    installs = [i for i in document["install"] if i["metadata"]["name"] in names]
    for name, version in extra:
        entry = copy.deepcopy(installs[0])
        entry["metadata"].update(name=name, version=version)
        entry["download_info"]["url"] = f"https://index.example/{name}-{version}-py3-none-any.whl"
        digest = (name.encode().hex() * 64)[:64]
        entry["download_info"]["archive_info"] = {"hashes": {"sha256": digest}}
        installs.append(entry)
    document["install"] = installs
    return json.dumps(document).encode()


def no_more(lock: Path, dists: Sequence[SourceDistribution]) -> dict[str, tuple[str, ...]]:
    return {}


def test_a_recorded_report_gives_each_wheel_its_name_version_and_sha256() -> None:
    wheels = parse_pip_report(RECORDED.read_bytes(), "recorded")
    pins = read_build_lock(HATCH_LOCK).pins
    assert [w.name for w in wheels] == sorted(pins)
    assert all(pins[w.name].version == w.version for w in wheels)
    assert all(pins[w.name].hashes == {w.sha256} for w in wheels)


def test_the_written_lock_pins_the_closure_of_every_build_requirement_as_packing_reads_it(
    tmp_path: Path,
) -> None:
    packages = tmp_path / "packages"
    tiny_distribution(packages)
    hatch_vcs_distribution(packages)
    resolver = RecordedResolver([RECORDED.read_bytes()])
    done = lock_build_requirements(packages, resolver=resolver, ask_backends=no_more)
    assert resolver.asked == [("hatch-vcs", "hatchling", "setuptools>=68")]
    assert done.changed and done.path == packages / BUILD_LOCK
    assert done.path.read_text() == lock_text(done.wheels)
    assert read_build_lock(done.path).pins == read_build_lock(HATCH_LOCK).pins


def test_what_a_backend_asks_for_is_resolved_with_the_rest(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    tiny_distribution(packages)
    asked_with: list[set[str]] = []

    def wants_wheel(lock: Path, dists: Sequence[SourceDistribution]) -> dict[str, tuple[str, ...]]:
        asked_with.append(set(read_build_lock(lock).pins))
        return {"tinylib": ("wheel>=0.40",)}

    resolver = RecordedResolver(
        [report("setuptools"), report("setuptools", extra=[("wheel", "0.48.0")])]
    )
    done = lock_build_requirements(packages, resolver=resolver, ask_backends=wants_wheel)
    assert resolver.asked == [("setuptools>=68",), ("setuptools>=68", "wheel>=0.40")]
    assert asked_with == [{"setuptools"}, {"setuptools", "wheel"}]
    assert [(w.name, w.version) for w in done.wheels] == [
        ("setuptools", "84.2.1"), ("wheel", "0.48.0"),
    ]  # fmt: skip


def test_a_backend_that_keeps_asking_for_what_is_not_resolved_is_refused(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    tiny_distribution(packages)

    def greedy(lock: Path, dists: Sequence[SourceDistribution]) -> dict[str, tuple[str, ...]]:
        return {"tinylib": ("wheel>=99",)}

    resolver = RecordedResolver([report("setuptools", extra=[("wheel", "0.48.0")])] * 4)
    with pytest.raises(ConfigError, match=r"still ask for wheel>=99 after 4 resolutions"):
        lock_build_requirements(packages, resolver=resolver, ask_backends=greedy)
    assert not (packages / BUILD_LOCK).exists()


def test_a_lock_that_pins_something_else_is_named_and_kept_unless_forced(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    tiny_distribution(packages)
    old = (
        "setuptools==80.0 \\\n    --hash=sha256:"
        + "1" * 64
        + "\nwheel==0.40 --hash=sha256:"
        + "2" * 64
    )
    (packages / BUILD_LOCK).write_text(old)
    with pytest.raises(ConfigError) as refused:
        lock_build_requirements(
            packages, resolver=RecordedResolver([report("setuptools")]), ask_backends=no_more
        )
    assert str(refused.value) == (
        f"{packages / BUILD_LOCK} exists and pins something else (setuptools 80.0 -> 84.2.1, "
        "-wheel==0.40); nothing written: give --force to replace it"
    )
    assert (packages / BUILD_LOCK).read_text() == old
    done = lock_build_requirements(
        packages, resolver=RecordedResolver([report("setuptools")]), ask_backends=no_more,
        force=True,
    )  # fmt: skip
    assert done.changed and set(read_build_lock(done.path).pins) == {"setuptools"}


def test_a_lock_that_already_pins_the_same_is_left_as_it_is_comments_and_all(
    tmp_path: Path,
) -> None:
    packages = tmp_path / "packages"
    tiny_distribution(packages)
    lock_build_requirements(
        packages, resolver=RecordedResolver([report("setuptools")]), ask_backends=no_more
    )
    before = (packages / BUILD_LOCK).stat()
    again = lock_build_requirements(
        packages, resolver=RecordedResolver([report("setuptools")]), ask_backends=no_more
    )
    assert not again.changed
    assert (packages / BUILD_LOCK).stat().st_mtime_ns == before.st_mtime_ns
    commented = "# Ours, reviewed.\n" + (packages / BUILD_LOCK).read_text().replace(" \\\n   ", "")
    (packages / BUILD_LOCK).write_text(commented)
    kept = lock_build_requirements(
        packages, resolver=RecordedResolver([report("setuptools")]), ask_backends=no_more
    )
    assert not kept.changed and (packages / BUILD_LOCK).read_text() == commented


def test_distributions_that_require_nothing_to_build_have_nothing_to_lock(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    pyproject = tiny_distribution(packages) / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('["setuptools>=68"]', "[]"))
    resolver = RecordedResolver([])
    with pytest.raises(ConfigError, match=r"requires is empty, so there is nothing to lock"):
        lock_build_requirements(packages, resolver=resolver, ask_backends=no_more)
    assert resolver.asked == [] and not (packages / BUILD_LOCK).exists()


def test_the_command_s_error_is_one_line_naming_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.agent-eval]\n")
    result = CliRunner().invoke(main, ["lock-build", "--project", str(tmp_path)])
    assert result.exit_code == 1
    assert (
        result.output == f"error: {tmp_path / 'packages'}: the packages directory does not exist\n"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(version="2"), r"recorded: pip's report has version '2', not '1'"),
        (
            lambda d: d["install"][2]["download_info"].pop("archive_info"),
            r"recorded: install\[2\]: no name, version and archive_info.hashes.sha256",
        ),
        (
            lambda d: d["install"][1]["download_info"].update(url="https://index.example/x.tar.gz"),
            r"install\[1\] \(hatch-vcs\): https://index.example/x.tar.gz is not a wheel",
        ),
    ],
    ids=["another-version", "no-hash", "not-a-wheel"],
)
def test_a_report_pip_could_not_have_written_is_refused_naming_the_entry(
    change: Any, message: str
) -> None:
    document = recorded()
    change(document)
    with pytest.raises(InfrastructureError, match=message):
        parse_pip_report(json.dumps(document).encode(), "recorded")


@pytest.mark.slow
def test_a_setuptools_and_a_hatchling_distribution_are_locked_by_pip_and_packed_with_it(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    packages = repo / "packages"
    tiny_distribution(packages)
    hatch_vcs_distribution(packages)
    (repo / "pyproject.toml").write_text("[tool.agent-eval]\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two distributions")
    git(repo, "tag", "v2.0.0")
    runner = CliRunner()
    locked = runner.invoke(main, ["lock-build", "--project", str(repo)])
    assert locked.exit_code == 0, locked.output
    pins = read_build_lock(packages / BUILD_LOCK).pins
    assert {"setuptools", "hatchling", "hatch-vcs", "setuptools-scm"} <= set(pins)
    assert locked.output.endswith(f"wrote {packages / BUILD_LOCK} ({len(pins)} pins)\n")
    entries = build_archives(packages, tmp_path / "wheels", cache=BuildCache.default())
    assert [(e.distribution, e.version) for e in entries] == [
        ("tinylib", "1.0"),
        ("vcslib", "2.0.0"),
    ]
    again = runner.invoke(main, ["lock-build", "--project", str(repo)])
    assert again.exit_code == 0 and "unchanged: " in again.output
    other = (packages / BUILD_LOCK).read_text().replace(f"=={pins['hatchling'].version} ", "==1.0 ")
    (packages / BUILD_LOCK).write_text(other)
    refused = runner.invoke(main, ["lock-build", "--project", str(repo)])
    assert refused.exit_code == 1
    assert refused.output.startswith(f"error: {packages / BUILD_LOCK} exists and pins something")
    assert f"hatchling 1.0 -> {pins['hatchling'].version}" in refused.output
    assert (packages / BUILD_LOCK).read_text() == other
