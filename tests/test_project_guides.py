"""What the agent reads of each distribution is the repository's to declare.

Invariants: ``[tool.agent-eval.guides]`` names a file or a docs directory per
distribution (by its directory under packages/); one it leaves out reads its
``packages/<dir>/GUIDE.md``; a declared guide that is missing, outside the
repository or for no distribution is refused by name; a distribution with no
guide at all is warned about, never silently given nothing; the consumer holds
a file guide as ``GUIDE.md`` and a docs directory whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.consumer.archives import write_project
from agent_eval.errors import ConfigError
from agent_eval.layout import ConsumerLayout
from agent_eval.project import find_project


def repository(root: Path, guides: str = "") -> Path:
    for name in ("core", "extra", "bare"):
        (root / "packages" / name).mkdir(parents=True)
        (root / "packages" / name / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n')
    (root / "packages" / "core" / "GUIDE.md").write_text("# core (default)\n")
    (root / "docs" / "extra" / "howto").mkdir(parents=True)
    (root / "docs" / "extra" / "index.md").write_text("# extra\n")
    (root / "docs" / "extra" / "howto" / "first.md").write_text("# first\n")
    (root / "docs" / "core.md").write_text("# core (declared)\n")
    (root / "pyproject.toml").write_text(f"[tool.agent-eval]\n{guides}")
    return root


def test_a_distribution_left_out_reads_its_guide_md_and_one_without_is_warned_about(
    tmp_path: Path,
) -> None:
    project = find_project(repository(tmp_path))
    assert project.guides() == {"core": tmp_path / "packages" / "core" / "GUIDE.md"}
    warnings = project.guide_warnings()
    assert len(warnings) == 2
    assert warnings[0].startswith("distribution bare has no guide")
    assert "[tool.agent-eval.guides]" in warnings[0]
    assert warnings[1].startswith("distribution extra has no guide")


def test_declared_guides_win_and_may_be_files_or_docs_directories(tmp_path: Path) -> None:
    root = repository(tmp_path, '[tool.agent-eval.guides]\ncore = "docs/core.md"\n'
                      'extra = "docs/extra"\n')  # fmt: skip
    project = find_project(root)
    assert project.guides() == {"core": root / "docs" / "core.md", "extra": root / "docs" / "extra"}
    assert [w.split(":")[0] for w in project.guide_warnings()] == ["distribution bare has no guide"]
    consumer = tmp_path / "consumer"
    write_project(consumer, [], None, project.guides())
    docs = ConsumerLayout(consumer).docs
    assert (docs / "core" / "GUIDE.md").read_text() == "# core (declared)\n"
    assert (docs / "extra" / "index.md").read_text() == "# extra\n"
    assert (docs / "extra" / "howto" / "first.md").read_text() == "# first\n"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('core = "docs/none.md"', r"guides\]\.core: .*none\.md does not exist"),
        ('nobody = "docs/core.md"', r"guides\]\.nobody: no distribution"),
        ('core = "../outside.md"', r"\.guides\.core must be a relative path"),
        ("core = 3", r"\.guides\.core must be a relative path"),
    ],
)
def test_a_bad_guide_declaration_is_refused_by_its_name(
    tmp_path: Path, table: str, message: str
) -> None:
    root = repository(tmp_path, f"[tool.agent-eval.guides]\n{table}\n")
    with pytest.raises(ConfigError, match=message):
        find_project(root).guides()


def test_guides_that_are_not_a_table_are_refused(tmp_path: Path) -> None:
    root = repository(tmp_path, 'guides = "docs"\n')
    with pytest.raises(ConfigError, match=r"\[tool.agent-eval\].guides must be a table"):
        find_project(root)
