"""In a real browser, offline, the comparison's page loads nothing, shows the verdict and every
task's row, and fits a window 800 pixels wide without scrolling sideways.

Debian's Chromium runs headless on the page from ``file://`` in a network namespace whose
only interface is loopback (``tests/browser.py``); its net log must show no URL request,
host lookup or socket connect. The width is measured by a copy of the page with the
policy taken out and a script added that writes the document's scroll width into its
title (the page itself runs no script); a control copy with a wide element shows that the
measurement would see a page that does not fit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from markupsafe import escape

from agent_eval.compare.compare import compare_batches
from agent_eval.compare.page import write_comparison_page
from agent_eval.grading.web import Document, parse_html
from agent_eval.report.render import NO_SCRIPT_POLICY
from tests.browser import attempted_requests, chromium_or_skip, load_page
from tests.compare.test_compare import batch
from tests.compare.test_page import HOSTILE_TITLE, hostile_sides, outcomes, task_rows
from tests.evidence_builders import CURRENT

pytestmark = pytest.mark.slow

# As the page writes it: the policy escaped like every value of the template.
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{escape(NO_SCRIPT_POLICY)}">'
MEASURE = (
    "<script>document.title = document.documentElement.scrollWidth + ' ' + "
    "document.documentElement.clientWidth</script>"
)
LONG_TITLE = "a-task-title-without-a-single-space-" * 12 + HOSTILE_TITLE


@pytest.fixture(scope="module")
def chromium() -> Path:
    return chromium_or_skip()


@pytest.fixture
def worse_page(tmp_path: Path) -> Path:
    result = compare_batches(
        [batch(tmp_path / "a").root], [batch(tmp_path / "b", failing_first=18).root], CURRENT
    )
    return write_comparison_page(tmp_path / "compare.html", result, {"forms": LONG_TITLE})


@pytest.fixture
def hostile_page(tmp_path: Path) -> Path:
    return write_comparison_page(
        tmp_path / "hostile.html", hostile_sides(tmp_path), {"forms": LONG_TITLE}
    )


def test_the_page_shows_the_verdict_and_every_row_and_makes_no_request(
    chromium: Path, worse_page: Path, tmp_path: Path
) -> None:
    done = load_page(chromium, worse_page, tmp_path / "b", "--dump-dom")
    assert done.interfaces == ("lo",)
    assert attempted_requests(done.net_log) == []
    doc: Document = parse_html(done.stdout)
    first = doc.by_id("verdict-first")
    assert first is not None
    big = first.find("div", class_="big")
    assert big is not None and big.text == "worse"
    assert "18/18 (100 %) → 0/18 (0 %)" in first.text
    rows = task_rows(doc)
    assert len(rows) == 7 and "all tasks" in rows
    assert outcomes(rows["forms"], "candidate") == ["repaired"] * 3
    assert doc.find_all("script") == []


def scroll_width(chromium: Path, page: Path, work: Path, extra: str = "") -> tuple[int, int]:
    html = page.read_text(encoding="utf-8")
    assert CSP_META in html
    measured = work.with_suffix(".html")
    measured.write_text(
        html.replace(CSP_META, "").replace("</main>", extra + "</main>" + MEASURE),
        encoding="utf-8",
    )
    done = load_page(chromium, measured, work, "--dump-dom", "--window-size=800,1000")
    title = parse_html(done.stdout).find("title")
    assert title is not None
    scroll, client = (int(n) for n in title.text.split())
    return scroll, client


@pytest.mark.parametrize("which", ["worse_page", "hostile_page"])
def test_the_page_fits_800_pixels_without_scrolling_sideways(
    chromium: Path, which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    page: Path = request.getfixturevalue(which)
    scroll, client = scroll_width(chromium, page, tmp_path / "measure")
    assert 700 <= client <= 800
    assert scroll <= client, f"{scroll} px wide in a {client} px window"


def test_the_measurement_sees_a_page_that_does_not_fit(
    chromium: Path, worse_page: Path, tmp_path: Path
) -> None:
    scroll, client = scroll_width(
        chromium, worse_page, tmp_path / "control", '<div style="width:1500px">wide</div>'
    )
    assert scroll > client


def test_hostile_values_are_text_in_the_browser_too(
    chromium: Path, hostile_page: Path, tmp_path: Path
) -> None:
    done = load_page(chromium, hostile_page, tmp_path / "b", "--dump-dom")
    assert attempted_requests(done.net_log) == []
    doc = parse_html(done.stdout)
    title = doc.find("title")
    assert title is not None and title.text.startswith("agent-eval comparison:")
    assert doc.find_all("script") == [] and doc.find_all("img") == []
    assert doc.by_id("beyond-library") is not None
