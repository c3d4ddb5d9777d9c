"""The comparison's page says the verdict first, the identities side by side with the differing
ones marked, one row per task and the pooled row; whatever a runner, a provider or a
checkout chose is text in it, with every control character shown by its code point."""

from __future__ import annotations

import html as html_text
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_eval.cli import main
from agent_eval.compare.compare import compare_batches
from agent_eval.compare.page import comparison_view, render_comparison, write_comparison_page
from agent_eval.errors import EvidenceError
from agent_eval.grading.web import Document, Element, parse_html
from agent_eval.models import ApiCatalog
from agent_eval.models.compare import Comparison
from agent_eval.report.render import NO_SCRIPT_POLICY
from tests.compare.test_compare import batch
from tests.compare.test_symbols import AFTER, BEFORE, Catalogs, batch_with
from tests.evidence_builders import CURRENT, receipt, write_batch

HOSTILE_RUNNER = {"name": "<script>document.title='ran'</script>", "version": "1\u202e2"}
HOSTILE_MODEL = {"id": '"><img src=x onerror="document.title=1">', "settings": {"k": "</td>"}}
HOSTILE_TITLE = "</code></td></tr></table><script>document.title='ran'</script> \u2066x\u2069"


def page(comparison: Comparison, titles: dict[str, str] | None = None) -> Document:
    return parse_html(render_comparison(comparison_view(comparison, titles or {})))


def found(element: Element | None) -> Element:
    assert element is not None
    return element


def task_rows(doc: Document) -> dict[str, Element]:
    return {row.attrs["data-task"]: row for row in doc.find_all("tr") if "data-task" in row.attrs}


def outcomes(row: Element, side: str) -> list[str]:
    cells = next(c for c in row.find_all("div", class_="cells") if c.attrs["data-side"] == side)
    return [span.attrs["data-outcome"] for span in cells.find_all("span", class_="cell")]


def test_a_worse_candidate_is_said_first_with_every_task_row_and_the_pooled_row(
    tmp_path: Path,
) -> None:
    result = compare_batches(
        [batch(tmp_path / "a").root], [batch(tmp_path / "b", failing_first=18).root], CURRENT
    )
    doc = page(result, {"forms": "A sign-up form"})
    first = found(doc.by_id("verdict-first"))
    assert found(first.find("div", class_="big")).text == "worse"
    assert "18/18 (100 %) → 0/18 (0 %); -100 points (95 % interval" in first.text
    final = found(doc.by_id("verdict-final"))
    assert found(final.find("div", class_="big")).text == (
        "no detectable difference — these runs could detect only a difference of about 40 points"
    )
    rows = task_rows(doc)
    assert list(rows) == [*(t.taskId for t in result.tasks), "all tasks"]
    forms = rows["forms"]
    assert "A sign-up form" in forms.text
    assert outcomes(forms, "baseline") == ["pass"] * 3
    assert outcomes(forms, "candidate") == ["repaired"] * 3
    assert "3/3 (100 %) → 0/3 (0 %)" in found(forms.find("td", class_="first")).text
    assert "runs repaired: 0 → 3" in forms.text
    pooled = rows["all tasks"].find("td", class_="first")
    assert pooled is not None and "18/18 (100 %) → 0/18 (0 %)" in pooled.text
    assert "; p = " in pooled.text and "worse" in pooled.text
    assert doc.by_id("beyond-library") is None


def test_the_same_results_say_no_detectable_difference_with_what_could_be_detected(
    tmp_path: Path,
) -> None:
    result = compare_batches([batch(tmp_path / "a").root], [batch(tmp_path / "b").root], CURRENT)
    doc = page(result)
    first = doc.by_id("verdict-first")
    assert first is not None
    assert "could detect only a difference of about 40 points" in first.text
    assert "no detectable difference" in found(doc.find("title")).text
    table = doc.by_id("identities")
    assert table is not None
    assert {r.attrs.get("data-differs") for r in table.find_all("tr")} == {None, "no"}


def hostile_sides(tmp_path: Path) -> Comparison:
    def hostile(manifest: dict[str, Any]) -> None:
        manifest.update(runner=HOSTILE_RUNNER, model=HOSTILE_MODEL)

    before = batch_with(tmp_path / "a", BEFORE)
    after = write_batch(
        tmp_path / "b",
        receipt(batchId="batch-b", runner=HOSTILE_RUNNER, model=HOSTILE_MODEL),
        lambda m: (hostile(m), m.update(apiCatalogDigest=AFTER.digest())),
    )
    catalogs = Catalogs({before.root: BEFORE, after.root: AFTER})
    return compare_batches(
        [before.root], [after.root], CURRENT, allow=["runner", "model"], catalogs=catalogs
    )


def test_identities_that_differ_are_marked_and_those_beyond_the_library_bannered(
    tmp_path: Path,
) -> None:
    doc = page(hostile_sides(tmp_path))
    banner = doc.by_id("beyond-library")
    assert banner is not None and "differ in runner, model, not only in the library" in banner.text
    table = doc.by_id("identities")
    assert table is not None
    marked = {
        found(r.find("th")).text.split(" ≠")[0]: r.attrs["class"]
        for r in table.find_all("tr")
        if r.attrs.get("data-differs") == "yes"
    }
    assert marked == {"API catalog": "differs", "runner": "beyond", "model": "beyond"}
    symbols = doc.by_id("symbols")
    assert symbols is not None
    changes = [li.attrs["data-change"] for li in symbols.find_all("li")]
    assert sorted(changes) == ["added", "changed", "changed", "changed", "removed"]
    assert "appkit.fresh function (name: str) -> None" in symbols.text


def test_hostile_runner_model_and_title_are_text_and_nothing_could_run(tmp_path: Path) -> None:
    comparison = hostile_sides(tmp_path)
    html = render_comparison(comparison_view(comparison, {"forms": HOSTILE_TITLE}))
    assert "<script" not in html and "<img" not in html and "</td></tr></table><" not in html
    doc = parse_html(html)
    assert doc.find_all("script") == [] and doc.find_all("img") == []
    table = doc.by_id("identities")
    assert table is not None
    shown = table.raw_text
    assert HOSTILE_RUNNER["name"] in shown and HOSTILE_MODEL["id"] in shown
    assert '{"k": "</td>"}' in shown
    forms = task_rows(doc)["forms"]
    assert "</code></td></tr></table><script>document.title='ran'</script>" in forms.raw_text
    marks = [m.attrs["data-cp"] for m in doc.find_all(class_="ctl")]
    assert marks == ["U+202E", "U+2066", "U+2069"]
    assert len(task_rows(doc)) == len(comparison.tasks) + 1  # the table was not broken out of


def test_the_page_allows_nothing_but_inline_style_and_no_script(tmp_path: Path) -> None:
    result = compare_batches([batch(tmp_path / "a").root], [batch(tmp_path / "b").root], CURRENT)
    html = render_comparison(comparison_view(result, {}))
    meta = f'<meta http-equiv="Content-Security-Policy" content="{NO_SCRIPT_POLICY}">'
    assert meta in html_text.unescape(html)
    doc = parse_html(html)
    for tag in ("script", "img", "link", "iframe", "object", "embed", "a"):
        assert doc.find_all(tag) == [], tag
    assert "url(" not in html and "@import" not in html


def test_unknown_symbol_changes_say_why(tmp_path: Path) -> None:
    a, b = batch_with(tmp_path / "a", BEFORE), batch_with(tmp_path / "b", AFTER)
    elsewhere: ApiCatalog = BEFORE  # not the candidate's recorded catalog
    result = compare_batches(
        [a.root], [b.root], CURRENT, catalogs=Catalogs({a.root: BEFORE, b.root: elsewhere})
    )
    symbols = page(result).by_id("symbols")
    assert symbols is not None and "Not known: the API catalog generated from" in symbols.text


def test_the_command_writes_the_page_atomically_and_names_a_file_it_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_eval.cli.compare as command

    monkeypatch.setattr(command, "gate_anchors", lambda located: CURRENT)
    a, b = batch(tmp_path / "a"), batch(tmp_path / "b", failing_first=18)
    out = tmp_path / "compare.html"
    result = CliRunner().invoke(main, ["compare", str(a.root), str(b.root), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert "worse" in found(parse_html(out.read_text()).by_id("verdict-first")).text
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    (tmp_path / "a-file").write_text("")
    nowhere = tmp_path / "a-file" / "compare.html"
    failed = CliRunner().invoke(main, ["compare", str(a.root), str(b.root), "--html", str(nowhere)])
    # An output whose directory is not one is refused before anything is compared.
    assert failed.exit_code == 2
    assert f"{tmp_path / 'a-file'} is not a directory (it is not created)" in failed.output
    assert "Traceback" not in failed.output
    blocked = tmp_path / "dir"
    blocked.mkdir()
    with pytest.raises(EvidenceError, match="cannot write"):
        write_comparison_page(blocked, compare_batches([a.root], [b.root], CURRENT))
