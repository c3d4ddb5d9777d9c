"""Packing builds each distribution as its own build system says, and exactly: through its
declared backend, in an isolated environment installed offline from the hash-pinned build
lock; the same source gives byte-identical wheels (a src layout, a flat layout, a version
computed from git); stale build output never reaches a wheel; a requirement the lock does
not pin, a wheel that is not the locked one, a build that fails and a version that cannot
be computed are each refused naming the distribution and the field."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from agent_eval.digests import file_sha256
from agent_eval.errors import ConfigError, InfrastructureError
from agent_eval.packing import (
    BUILD_LOCK,
    BuildCache,
    build_archives,
    fetch_build_wheels,
    find_distributions,
    rebuild_archives,
)
from agent_eval.project import source_identity
from tests.paths import DATA, REPO

SETUPTOOLS_LOCK = REPO / "packages" / BUILD_LOCK
HATCH_LOCK = DATA / "packing" / "hatch-vcs.lock"


@pytest.fixture(scope="module")
def cache() -> BuildCache:
    """The user's wheelhouse, with both locks' wheels (downloaded once, then reused), and its
    build environments; no wheel cache, so that every wheel here is really built."""
    user = BuildCache.default()
    for lock in (SETUPTOOLS_LOCK, HATCH_LOCK):
        fetch_build_wheels(lock, user.wheelhouse)
    return BuildCache(user.wheelhouse, user.environments)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
         "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", *args],
        check=True, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null",
             "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
             "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z"},
    )  # fmt: skip
    return done.stdout.strip()


def packages_with_lock(root: Path, lock: Path = SETUPTOOLS_LOCK) -> Path:
    packages = root / "packages"
    packages.mkdir(parents=True)
    shutil.copyfile(lock, packages / BUILD_LOCK)
    return packages


def tiny_distribution(packages: Path, name: str = "tinylib", *, flat: bool = False) -> Path:
    source = packages / name
    code = source if flat else source / "src"
    (code / name).mkdir(parents=True)
    (code / name / "__init__.py").write_text("VALUE = 1\n")
    find = "" if flat else '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\n{find}'
    )
    return source


def hatch_vcs_distribution(packages: Path) -> Path:
    source = packages / "vcslib"
    (source / "src" / "vcslib").mkdir(parents=True)
    (source / "src" / "vcslib" / "__init__.py").write_text("VALUE = 2\n")
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling", "hatch-vcs"]\n'
        'build-backend = "hatchling.build"\n'
        '[project]\nname = "vcslib"\ndynamic = ["version"]\n'
        '[tool.hatch.version]\nsource = "vcs"\n'
        '[tool.hatch.version.raw-options]\nroot = "../.."\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/vcslib"]\n'
    )
    return source


def names_in(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_a_src_layout_packs_to_identical_bytes(tmp_path: Path, cache: BuildCache) -> None:
    packages = packages_with_lock(tmp_path)
    tiny_distribution(packages)
    first = build_archives(packages, tmp_path / "a", cache=cache)
    second = build_archives(packages, tmp_path / "b", cache=cache)
    assert [e.sha256 for e in first] == [e.sha256 for e in second]
    entry = first[0]
    assert (entry.distribution, entry.version) == ("tinylib", "1.0")
    assert file_sha256(tmp_path / "a" / entry.filename) == entry.sha256


def test_a_flat_layout_packs_its_package_not_its_tests_to_identical_bytes(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages, "flatlib", flat=True)
    (source / "tests").mkdir()
    (source / "tests" / "__init__.py").write_text("")
    (dist,) = find_distributions(packages)
    assert (dist.packages, dist.src) == (("flatlib",), source)
    first = build_archives(packages, tmp_path / "a", cache=cache)
    second = build_archives(packages, tmp_path / "b", cache=cache)
    assert first[0].sha256 == second[0].sha256
    inside = names_in(tmp_path / "a" / first[0].filename)
    assert "flatlib/__init__.py" in inside
    assert not any(n.startswith("tests/") for n in inside)


def test_a_hatch_vcs_version_comes_from_the_packed_commit_and_is_reproducible(
    tmp_path: Path, cache: BuildCache
) -> None:
    repo = tmp_path / "repo"
    packages = packages_with_lock(repo, HATCH_LOCK)
    hatch_vcs_distribution(packages)
    git(repo, "init", "-q")
    git(repo, "add", "packages")
    git(repo, "commit", "-qm", "vcslib")
    git(repo, "tag", "v1.2.0")
    tagged = build_archives(packages, tmp_path / "a", cache=cache)
    again = build_archives(packages, tmp_path / "b", cache=cache)
    assert (tagged[0].version, tagged[0].filename) == ("1.2.0", "vcslib-1.2.0-py2.py3-none-any.whl")
    assert tagged[0].sha256 == again[0].sha256
    (packages / "vcslib" / "src" / "vcslib" / "extra.py").write_text("MORE = 3\n")
    git(repo, "add", "packages")
    git(repo, "commit", "-qm", "more")
    head = git(repo, "rev-parse", "HEAD")
    later = build_archives(packages, tmp_path / "c", cache=cache)
    assert later[0].version == f"1.2.1.dev1+g{head[:12]}"
    rebuilt = rebuild_archives(repo, "packages", head, tmp_path / "rebuild", cache=cache)
    assert [e.sha256 for e in rebuilt] == [e.sha256 for e in later]


def test_an_sdist_s_pkg_info_never_outvotes_the_version_computed_from_git(
    tmp_path: Path, cache: BuildCache
) -> None:
    """An sdist unpacked into packages/ holds PKG-INFO, which hatchling prefers to its
    version source: two commits would build the sdist's version with different bytes."""
    repo = tmp_path / "repo"
    packages = packages_with_lock(repo, HATCH_LOCK)
    source = hatch_vcs_distribution(packages)
    (source / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: vcslib\nVersion: 9.9.9\n")
    git(repo, "init", "-q")
    git(repo, "add", "packages")
    git(repo, "commit", "-qm", "vcslib from its sdist")
    head = git(repo, "rev-parse", "HEAD")
    [entry] = build_archives(packages, tmp_path / "a", cache=cache)
    assert entry.version == f"0.1.dev1+g{head[:12]}"
    assert entry.filename == f"vcslib-0.1.dev1+g{head[:12]}-py2.py3-none-any.whl"
    metadata = zipfile.ZipFile(tmp_path / "a" / entry.filename).read(
        f"vcslib-{entry.version}.dist-info/METADATA"
    )
    assert f"\nVersion: {entry.version}\n".encode() in metadata
    assert (source / "PKG-INFO").is_file()
    rebuilt = rebuild_archives(repo, "packages", head, tmp_path / "rebuild", cache=cache)
    assert [e.sha256 for e in rebuilt] == [entry.sha256]


def test_a_wheel_of_another_version_than_packing_s_is_refused_naming_each_version(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages)
    (source / "_build").mkdir()
    (source / "_build" / "backend.py").write_text(
        "import os\n"
        "from setuptools.build_meta import *  # noqa\n"
        "from setuptools import build_meta as _meta\n"
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        "    name = _meta.build_wheel(wheel_directory, config_settings, metadata_directory)\n"
        "    other = name.replace('-1.0-', '-2.0-')\n"
        "    os.rename(os.path.join(wheel_directory, name), os.path.join(wheel_directory, other))\n"
        "    return other\n"
    )
    pyproject = source / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'build-backend = "setuptools.build_meta"',
            'build-backend = "backend"\nbackend-path = ["_build"]',
        )
    )
    with pytest.raises(ConfigError) as refused:
        build_archives(packages, tmp_path / "out", cache=cache)
    message = str(refused.value)
    assert "tinylib-2.0-py3-none-any.whl is not of the version packing computed" in message
    assert "its file name says '2.0', its METADATA says '1.0', packing says '1.0'" in message
    assert not list((tmp_path / "out").glob("*.whl"))


def test_a_build_sees_git_s_modes_so_a_checkout_s_umask_never_reaches_a_wheel(
    tmp_path: Path, cache: BuildCache
) -> None:
    """A backend may record its files' modes in the wheel: the copy it builds from has
    git's two (0644, or 0755 when executable), as git's archive of the commit has them, so a
    checkout made with umask 002 packs as the checker's rebuild does."""
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages)
    (source / "_build").mkdir()
    (source / "_build" / "backend.py").write_text(
        "import os\n"
        "from setuptools.build_meta import *  # noqa\n"
        "from setuptools import build_meta as _meta\n"
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        "    mode = os.stat('src/tinylib/__init__.py').st_mode & 0o777\n"
        "    with open('src/tinylib/mode.py', 'w') as marker:\n"
        "        marker.write(f'MODE = {mode:#o}\\n')\n"
        "    return _meta.build_wheel(wheel_directory, config_settings, metadata_directory)\n"
    )
    pyproject = source / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'build-backend = "setuptools.build_meta"',
            'build-backend = "backend"\nbackend-path = ["_build"]',
        )
    )
    module = source / "src" / "tinylib" / "__init__.py"
    seen = {}
    for mode in (0o644, 0o664, 0o600, 0o775):
        module.chmod(mode)
        [entry] = build_archives(packages, tmp_path / oct(mode), cache=cache)
        with zipfile.ZipFile(tmp_path / oct(mode) / entry.filename) as archive:
            seen[mode] = archive.read("tinylib/mode.py").decode()
    assert seen == {
        0o644: "MODE = 0o644\n", 0o664: "MODE = 0o644\n", 0o600: "MODE = 0o644\n",
        0o775: "MODE = 0o755\n",
    }  # fmt: skip


def test_stale_build_output_in_the_source_never_reaches_the_wheel(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages)
    stale = source / "build" / "lib" / "tinylib"
    stale.mkdir(parents=True)
    (stale / "deleted_module.py").write_text("SECRET = 1\n")
    entry = build_archives(packages, tmp_path / "out", cache=cache)[0]
    assert not any("deleted_module" in n for n in names_in(tmp_path / "out" / entry.filename))


def test_a_backend_the_lock_does_not_pin_is_refused_naming_the_distribution_and_field(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path)
    hatch_vcs_distribution(packages)
    with pytest.raises(ConfigError) as refused:
        build_archives(packages, tmp_path / "out", cache=cache)
    message = str(refused.value)
    assert "[build-system] requires 'hatchling' of vcslib" in message
    assert f"{BUILD_LOCK} does not pin hatchling" in message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_requirement_outside_the_locked_version_is_refused(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("setuptools>=68", "setuptools<60"))
    with pytest.raises(ConfigError, match=r"'setuptools<60' of tinylib, but .* pins setuptools=="):
        build_archives(packages, tmp_path / "out", cache=cache)


def test_a_changed_wheel_in_the_wheelhouse_is_refused_by_its_hash(
    tmp_path: Path, cache: BuildCache
) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    shutil.copytree(cache.wheelhouse, wheelhouse)
    (setuptools,) = wheelhouse.glob("setuptools-*.whl")
    with zipfile.ZipFile(setuptools, "a") as archive:
        archive.writestr("setuptools/injected.py", "import os\n")
    packages = packages_with_lock(tmp_path)
    tiny_distribution(packages)
    tampered = BuildCache(wheelhouse, tmp_path / "envs")
    with pytest.raises(
        ConfigError, match=rf"{setuptools.name} is sha256:[0-9a-f]{{64}}, not a hash the lock pins"
    ):
        build_archives(packages, tmp_path / "out", cache=tampered)
    assert not (tmp_path / "envs").exists()


def test_a_changed_cached_environment_is_made_again_not_used(
    tmp_path: Path, cache: BuildCache
) -> None:
    own = BuildCache(cache.wheelhouse, tmp_path / "envs")
    packages = packages_with_lock(tmp_path)
    tiny_distribution(packages)
    first = build_archives(packages, tmp_path / "a", cache=own)
    (builder,) = (tmp_path / "envs").glob("*/lib/python*/site-packages/setuptools/build_meta.py")
    original = builder.read_bytes()
    builder.write_text("raise SystemExit('a changed backend ran')\n")
    second = build_archives(packages, tmp_path / "b", cache=own)
    assert builder.read_bytes() == original
    assert first[0].sha256 == second[0].sha256


def test_a_cached_environment_that_would_see_the_system_s_packages_is_made_again(
    tmp_path: Path, cache: BuildCache
) -> None:
    own = BuildCache(cache.wheelhouse, tmp_path / "envs")
    packages = packages_with_lock(tmp_path)
    tiny_distribution(packages)
    build_archives(packages, tmp_path / "a", cache=own)
    (settings,) = (tmp_path / "envs").glob("*/pyvenv.cfg")
    opened = settings.read_text().replace("site-packages = false", "site-packages = true")
    settings.write_text(opened)
    build_archives(packages, tmp_path / "b", cache=own)
    assert "include-system-site-packages = false" in settings.read_text()


def test_a_lock_missing_a_dependency_of_the_backend_is_refused(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path)
    lock = packages / BUILD_LOCK
    text = lock.read_text()
    lock.write_text(text[: text.index("packaging==")] + text[text.index("setuptools==") :])
    tiny_distribution(packages)
    own = BuildCache(cache.wheelhouse, tmp_path / "envs")
    with pytest.raises(ConfigError, match=r"do not install offline .*packaging"):
        build_archives(packages, tmp_path / "out", cache=own)


def test_a_distribution_that_does_not_build_says_its_last_lines(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("setuptools.build_meta", "nope.backend"))
    with pytest.raises(ConfigError) as refused:
        build_archives(packages, tmp_path / "out", cache=cache)
    message = str(refused.value)
    assert (
        "building the wheel of tinylib with its [build-system] build-backend 'nope.backend'"
        in message
    )
    assert "nope" in message.split("its last lines:", 1)[1]


def test_a_version_from_git_outside_a_repository_cannot_be_computed(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path, HATCH_LOCK)
    hatch_vcs_distribution(packages)
    with pytest.raises(
        ConfigError, match=r"\[project\] dynamic version of vcslib \(from git\) cannot be computed"
    ):
        build_archives(packages, tmp_path / "out", cache=cache)


def test_a_tag_that_is_not_a_version_cannot_give_one(tmp_path: Path, cache: BuildCache) -> None:
    repo = tmp_path / "repo"
    packages = packages_with_lock(repo, HATCH_LOCK)
    hatch_vcs_distribution(packages)
    git(repo, "init", "-q")
    git(repo, "add", "packages")
    git(repo, "commit", "-qm", "vcslib")
    git(repo, "tag", "release-1")
    with pytest.raises(ConfigError, match=r"the tag 'release-1' is not a version"):
        build_archives(packages, tmp_path / "out", cache=cache)


def test_an_in_tree_backend_on_its_backend_path_builds_the_wheel(
    tmp_path: Path, cache: BuildCache
) -> None:
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages)
    (source / "_build").mkdir()
    (source / "_build" / "backend.py").write_text(
        "from setuptools.build_meta import *  # noqa\n"
        "from setuptools import build_meta as _meta\n"
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        "    with open('src/tinylib/built_by.py', 'w') as marker:\n"
        "        marker.write('BY = 1\\n')\n"
        "    return _meta.build_wheel(wheel_directory, config_settings, metadata_directory)\n"
    )
    pyproject = source / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'build-backend = "setuptools.build_meta"',
            'build-backend = "backend"\nbackend-path = ["_build"]',
        )
    )
    (dist,) = find_distributions(packages)
    assert (dist.build_system.backend, dist.build_system.backend_path) == ("backend", ("_build",))
    [entry] = build_archives(packages, tmp_path / "out", cache=cache)
    assert "tinylib/built_by.py" in names_in(tmp_path / "out" / entry.filename)


def test_a_backend_path_outside_the_distribution_is_refused(tmp_path: Path) -> None:
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("[project]", 'backend-path = ["../elsewhere"]\n[project]')
    )
    with pytest.raises(
        ConfigError, match=r"\[build-system\] backend-path '../elsewhere' is outside"
    ):
        find_distributions(packages)


def test_a_pyproject_without_a_build_system_is_built_by_setuptools_as_pep_517_says(
    tmp_path: Path,
) -> None:
    packages = packages_with_lock(tmp_path)
    source = tiny_distribution(packages)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().split("[project]", 1)[1].join(["[project]", ""]))
    (dist,) = find_distributions(packages)
    assert dist.build_system.backend == "setuptools.build_meta:__legacy__"
    assert dist.build_system.requires == ("setuptools>=40.8.0",)


def test_a_dynamic_version_is_computed_at_build_time_and_from_git_only_with_a_vcs_plugin(
    tmp_path: Path,
) -> None:
    packages = packages_with_lock(tmp_path)
    hatch_vcs_distribution(packages)
    source = tiny_distribution(packages)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "1.0"', 'dynamic = ["version"]'))
    plain, vcs = find_distributions(packages)
    assert (plain.name, plain.version, plain.version_from_git) == ("tinylib", None, False)
    assert (vcs.name, vcs.version, vcs.version_from_git) == ("vcslib", None, True)
    assert plain.dist_info_name == "tinylib-0+source.dist-info"


def test_a_lock_line_without_a_hash_is_refused_naming_the_entry(tmp_path: Path) -> None:
    packages = packages_with_lock(tmp_path)
    (packages / BUILD_LOCK).write_text("setuptools==84.2.1\n")
    tiny_distribution(packages)
    with pytest.raises(ConfigError, match=r"entry 1 \('setuptools==84.2.1'\) is not name==version"):
        build_archives(packages, tmp_path / "out")


def test_packages_without_a_build_lock_are_refused_naming_the_lock(tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    tiny_distribution(packages)
    with pytest.raises(ConfigError, match=rf"{BUILD_LOCK}: cannot read the build lock"):
        build_archives(packages, tmp_path / "out")


def test_an_empty_packages_directory_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "packages").mkdir()
    with pytest.raises(ConfigError, match="no distribution"):
        build_archives(tmp_path / "packages", tmp_path / "out")


def test_source_identity_names_the_commit_and_whether_the_tree_is_dirty(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "a")
    clean = source_identity(repo)
    assert clean.commit == git(repo, "rev-parse", "HEAD") and clean.dirty is False
    (repo / "a.txt").write_text("changed\n")
    assert source_identity(repo).dirty is True


def test_outside_a_repository_there_is_no_commit_and_the_tree_counts_as_dirty(
    tmp_path: Path,
) -> None:
    outside = source_identity(tmp_path)
    assert outside.commit is None and outside.dirty is True


def test_a_fetch_cut_off_leaves_no_part_of_a_wheel_where_others_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip writes into a folder of the fetch's own: a reader of the wheelhouse (another
    batch, another test worker) never meets the half wheel a cut-off download leaves."""
    seen: list[Path] = []

    def cut_off(arguments: list[str], doing: str) -> subprocess.CompletedProcess[str]:
        dest = Path(arguments[arguments.index("--dest") + 1])
        seen.append(dest)
        (dest / "setuptools-75.0.0-py3-none-any.whl").write_bytes(b"PK\x03\x04 half")
        return subprocess.CompletedProcess(arguments, 1, "", "connection reset")

    monkeypatch.setattr("agent_eval.packing.lock.run_pip", cut_off)
    wheelhouse = tmp_path / "wheelhouse"
    with pytest.raises(InfrastructureError, match="connection reset"):
        fetch_build_wheels(SETUPTOOLS_LOCK, wheelhouse)
    assert seen and seen[0].parent == wheelhouse and seen[0] != wheelhouse
    assert list(wheelhouse.iterdir()) == []
