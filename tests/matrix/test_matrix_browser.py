"""In a real browser, offline, the matrix page loads nothing, ranks the agents as their
batches say, shows every pair, and fits a window 800 pixels wide without scrolling
sideways, with a hostile runner name and long task ids among its values.

Debian's Chromium runs headless on the page from ``file://`` in a network namespace
whose only interface is loopback (``tests/browser.py``); its net log must show no URL
request, host lookup or socket connect. The width is measured as the comparison page's
is (a copy with the policy taken out and a measuring script added).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval.compare.matrix import matrix_of_batches
from agent_eval.compare.matrix_page import write_matrix_page
from agent_eval.grading.web import parse_html
from tests.browser import attempted_requests, chromium_or_skip, load_page
from tests.compare.test_compare_browser import scroll_width
from tests.evidence_builders import CURRENT
from tests.matrix.test_matrix import HOSTILE, agent, named

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chromium() -> Path:
    return chromium_or_skip()


@pytest.fixture
def three_agents(tmp_path: Path) -> Path:
    """Three agents as their plans make them: 18/18, 18/18 with 9 repaired, 6/18."""
    batches = [
        agent(tmp_path / "weak", named("weak-agent"), failed=12).root,
        agent(tmp_path / "strong", named("strong-agent")).root,
        agent(tmp_path / "repaired", HOSTILE, repaired=9).root,
    ]
    matrix = matrix_of_batches(batches, CURRENT)
    return write_matrix_page(tmp_path / "matrix.html", matrix)


def test_the_page_ranks_the_agents_shows_every_pair_and_makes_no_request(
    chromium: Path, three_agents: Path, tmp_path: Path
) -> None:
    done = load_page(chromium, three_agents, tmp_path / "b", "--dump-dom")
    assert done.interfaces == ("lo",)
    assert attempted_requests(done.net_log) == []
    doc = parse_html(done.stdout)
    assert doc.find_all("script") == [] and doc.find_all("img") == []
    rows = doc.find_all("tr", class_="row")
    assert [r.attrs.get("data-rank") for r in rows] == ["1", "2", "3"]
    labels = [r.find_all("td")[1].text for r in rows]
    assert labels[0].startswith("strong-agent") and labels[2].startswith("weak-agent")
    finals = [r.find("td", class_="final") for r in rows]
    assert [f.text.split()[0] for f in finals if f is not None] == ["18/18", "18/18", "6/18"]
    pairs = doc.find_all("tr", class_="pair")
    assert len(pairs) == 3
    # The hostile name is text, its controls marked, and breaks no row.
    assert "<script>" in labels[1] and doc.find_all("span", class_="ctl")


def test_the_page_fits_800_pixels_without_scrolling_sideways(
    chromium: Path, three_agents: Path, tmp_path: Path
) -> None:
    scroll, client = scroll_width(chromium, three_agents, tmp_path / "measure")
    assert 700 <= client <= 800
    assert scroll <= client, f"{scroll} px wide in a {client} px window"
