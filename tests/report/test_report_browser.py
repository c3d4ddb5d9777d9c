"""In a real browser, offline, the report loads nothing, runs only its filter and shows every run.

Debian's Chromium runs headless on the report from ``file://`` inside a
network namespace whose only interface is loopback (``tests/browser.py``).
Its net log must show no URL request, host lookup or socket connect; a
control page that does load something shows the check would see it. The DOM
Chromium built (``--dump-dom``, parsed with ``html.parser``) must hold the 18
runs with their outcomes, and a solution written to break out of the page
(``<script>``, ``</textarea>``, entities, a bidirectional override) must be
there as text with nothing run, even with the page's CSP taken out. A
screenshot is written under the test's tmp directory and its path printed.

Driven over the DevTools pipe, the page reads as a reviewer reads it: a
not-run batch's decision box leads with its cause, a failed assertion's
message is on screen, a folded attempt opens when its summary is clicked,
the filter (the one script, allowed by its hash) hides the rows of other
tasks and outcomes, and at 800 px nothing scrolls sideways but a long value
inside its own box.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from markupsafe import escape

from agent_eval.engine import ContainerEngine
from agent_eval.grading.web import Document, parse_html
from agent_eval.models import Receipt
from agent_eval.report.render import CONTENT_SECURITY_POLICY, FILTER_SCRIPT, write_report
from agent_eval.report.summary import attempt_outcome
from tests.batch.test_batch_docker import (
    check,
    eval_agent,
    project_copy,
    receipt_of,
    write_config,
)
from tests.browser import (
    BrowserRun,
    DevTools,
    attempted_requests,
    chromium_or_skip,
    devtools,
    load_page,
)
from tests.evidence_builders import CURRENT, receipt, write_batch
from tests.report.test_report import NOW, grid, mixed_runs
from tests.report.test_report_reading import EXPECTED, with_explained_failure

pytestmark = pytest.mark.slow

# Each line tries another way out of the page; the title is what a script would change.
BREAKOUT = (
    "<script>document.title = 'ran'</script>\n"
    "</textarea></pre></code><img src=x onerror=\"document.title = 'ran'\">\n"
    "&amp;lt;script&amp;gt; and &lt;b&gt;\n"
    "admin = False  # \u202e } \u2066 if is_admin: \u2069 \u2066 begin\n"
)
CSP_META = (
    f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">'
)


@pytest.fixture(scope="module")
def chromium() -> Path:
    return chromium_or_skip()


def dom(done: BrowserRun) -> Document:
    return parse_html(done.stdout)


@pytest.fixture
def report_page(tmp_path: Path) -> Path:
    runs, _ = mixed_runs()
    batch = write_batch(tmp_path / "batch", receipt(runs))
    batch.replace_solution("forms-1", 1, BREAKOUT.encode())
    return write_report(batch.root, current=CURRENT, now=NOW)


def test_chromium_runs_where_only_loopback_exists(
    chromium: Path, report_page: Path, tmp_path: Path
) -> None:
    done = load_page(chromium, report_page, tmp_path / "b", "--dump-dom")
    assert done.interfaces == ("lo",)
    ours = os.readlink("/proc/self/ns/net")
    assert (tmp_path / "b" / "namespace.txt").read_text().strip() not in {"", ours}


def test_the_report_makes_no_network_request(
    chromium: Path, report_page: Path, tmp_path: Path
) -> None:
    done = load_page(chromium, report_page, tmp_path / "b", "--dump-dom")
    assert attempted_requests(done.net_log) == []


def test_the_request_check_sees_a_request_when_a_page_makes_one(
    chromium: Path, report_page: Path, tmp_path: Path
) -> None:
    probe = '<img src="http://127.0.0.1:9/probe.png">'
    html = report_page.read_text()
    assert CSP_META in html
    without_policy = tmp_path / "no-csp.html"
    without_policy.write_text(html.replace(CSP_META, "").replace("<main>", "<main>" + probe))
    done = load_page(chromium, without_policy, tmp_path / "b1", "--dump-dom")
    assert "URL_REQUEST_START_JOB http://127.0.0.1:9/probe.png" in attempted_requests(done.net_log)
    # And the policy alone is enough to stop it.
    with_policy = tmp_path / "csp.html"
    with_policy.write_text(html.replace("<main>", "<main>" + probe))
    done = load_page(chromium, with_policy, tmp_path / "b2", "--dump-dom")
    assert attempted_requests(done.net_log) == []


def test_every_run_is_in_the_dom_with_its_outcome(
    chromium: Path, report_page: Path, tmp_path: Path
) -> None:
    _, expected = mixed_runs()
    done = load_page(chromium, report_page, tmp_path / "b", "--dump-dom")
    shown = grid(dom(done))
    assert len(shown) == 18
    assert shown == expected


def test_a_solution_written_to_break_out_is_text_and_nothing_runs(
    chromium: Path, report_page: Path, tmp_path: Path
) -> None:
    html = report_page.read_text()
    without_policy = tmp_path / "no-csp.html"
    without_policy.write_text(html.replace(CSP_META, ""))
    for page in (report_page, without_policy):
        done = load_page(chromium, page, tmp_path / page.stem, "--dump-dom")
        doc = dom(done)
        title = doc.find("title")
        assert title is not None and title.text.startswith("agent-eval report:")
        assert [s.raw_text for s in doc.find_all("script")] == [FILTER_SCRIPT]
        assert doc.find_all("img") == []
        section = doc.by_id("att-forms-1-1")
        assert section is not None
        source = section.find("pre", class_="src")
        assert source is not None
        shown = "\n".join(line.raw_text for line in source.find_all(class_="ln"))
        assert shown == BREAKOUT.rstrip("\n")
        marks = [m.attrs["data-cp"] for m in source.find_all(class_="ctl")]
        assert marks == ["U+202E", "U+2066", "U+2069", "U+2066"]


def test_a_page_whose_script_runs_would_be_seen(chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "control.html"
    page.write_text("<title>before</title><script>document.title = 'ran'</script>")
    done = load_page(chromium, page, tmp_path / "b", "--dump-dom")
    title = dom(done).find("title")
    assert title is not None and title.text == "ran"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_a_screenshot_of_the_report_is_written(
    chromium: Path, report_page: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shot = tmp_path / "report.png"
    done = load_page(
        chromium, report_page, tmp_path / "b", f"--screenshot={shot}", "--window-size=1400,2000"
    )
    assert png_size(shot) == (1400, 2000) and shot.stat().st_size > 20_000
    assert attempted_requests(done.net_log) == []
    with capsys.disabled():  # the path is for whoever runs the tests, passing or not
        print(f"\nscreenshot of the report: {shot}")


# --- Read as a reviewer reads it -------------------------------------------------------

LONG_VALUE = "x" * 1500
"""An unbreakable value (a digest, a minified line) that must not widen the page."""


@pytest.fixture
def reading_page(tmp_path: Path) -> Path:
    data = with_explained_failure()
    for run_data in data["runs"]:
        if run_data["runId"] == "forms-1":
            run_data["attempts"][0]["diagnostics"] = [
                {"category": "behaviour", "message": "observed " + LONG_VALUE}
            ]
    batch = write_batch(tmp_path / "batch", data)
    batch.replace_solution("forms-2", 1, f"VALUE = '{LONG_VALUE}'\n".encode())
    return write_report(batch.root, current=CURRENT, now=NOW)


@pytest.fixture
def browser(chromium: Path, tmp_path: Path) -> Iterator[DevTools]:
    with devtools(chromium, tmp_path / "devtools") as driven:
        yield driven
    assert attempted_requests(driven.net_log) == []


def test_a_not_run_batch_leads_its_decision_with_the_cause(
    browser: DevTools, tmp_path: Path
) -> None:
    data = receipt([], status="not-run", reasons=["the runner image is not present"])
    batch = write_batch(tmp_path / "not-run", data)
    batch.archives.unlink()
    page = browser.open_page(write_report(batch.root, current=CURRENT, now=NOW).as_uri())
    lines = browser.evaluate(page, "document.getElementById('decision').innerText.split('\\n')")
    said = [line for line in lines if line.strip()]
    assert said[0] == "Rejected"
    assert said[1].startswith("The batch did not run")
    assert said[2] == "the runner image is not present"
    assert any("archives-readable" in line for line in said[3:])
    assert browser.evaluate(page, "document.querySelector('table.grid') === null")
    assert "There were no runs" in browser.evaluate(page, "document.body.innerText")


def test_a_failed_assertion_shows_its_message_on_screen(
    browser: DevTools, reading_page: Path
) -> None:
    page = browser.open_page(reading_page.as_uri())
    shown = browser.evaluate(
        page,
        "(() => { const m = document.querySelector('#att-forms-1-1 [data-message]');"
        " return [m.innerText, m.getClientRects().length > 0]; })()",
    )
    assert shown == ["the confirmation carried another account id than create_account gave", True]
    assert EXPECTED not in browser.evaluate(page, "document.documentElement.outerHTML")


def test_a_folded_attempt_opens_when_its_summary_is_clicked(
    browser: DevTools, reading_page: Path
) -> None:
    page = browser.open_page(reading_page.as_uri())
    state = (
        "(() => { const d = document.getElementById('att-forms-2-1');"
        " return [d.open, d.querySelector('dl').checkVisibility()]; })()"
    )
    assert browser.evaluate(page, state) == [False, False]
    assert browser.evaluate(page, "document.getElementById('att-forms-1-1').open") is True
    browser.evaluate(page, "document.querySelector('#att-forms-2-1 > summary').click()")
    assert browser.evaluate(page, state) == [True, True]


def test_a_link_into_a_folded_attempt_unfolds_it(browser: DevTools, reading_page: Path) -> None:
    page = browser.open_page(reading_page.as_uri() + "#att-forms-3-1-f0")
    assert browser.evaluate(page, "document.getElementById('att-forms-3-1').open") is True
    assert browser.evaluate(page, "document.getElementById('att-forms-2-1').open") is False
    # The page's handler runs on hashchange; the check waits for the task after it.
    browser.evaluate(
        page,
        "new Promise(done => { addEventListener('hashchange', () => setTimeout(done, 0),"
        " {once: true}); location.hash = 'att-forms-2-1-f0'; })",
    )
    assert browser.evaluate(page, "document.getElementById('att-forms-2-1').open") is True


VISIBLE_ROWS = (
    "Array.from(document.querySelectorAll('table.grid tr[data-task]'))"
    ".filter(r => r.getClientRects().length > 0).map(r => r.dataset.task)"
)


def choose(browser: DevTools, page: str, name: str, value: str) -> None:
    browser.evaluate(
        page,
        f"(() => {{ const s = document.querySelector('#filter select[name={name}]');"
        f" s.value = {value!r}; s.dispatchEvent(new Event('change', {{bubbles: true}})); }})()",
    )


def test_the_filter_hides_the_rows_of_other_tasks_and_outcomes(
    browser: DevTools, reading_page: Path
) -> None:
    page = browser.open_page(reading_page.as_uri())
    # The script ran (the policy allows its hash) and showed the filter.
    assert browser.evaluate(page, "document.getElementById('filter').hidden") is False
    every = browser.evaluate(page, VISIBLE_ROWS)
    assert len(every) == 6
    choose(browser, page, "task", "forms")
    assert browser.evaluate(page, VISIBLE_ROWS) == ["forms"]
    attempts = browser.evaluate(
        page,
        "Array.from(document.querySelectorAll('details.attempt'))"
        ".filter(a => a.getClientRects().length > 0).map(a => a.id)",
    )
    assert attempts == ["att-forms-1-1", "att-forms-2-1", "att-forms-3-1"]
    choose(browser, page, "task", "")
    choose(browser, page, "outcome", "fail")
    assert browser.evaluate(page, VISIBLE_ROWS) == ["forms"]
    browser.evaluate(page, "document.querySelector('#filter button').click()")
    assert browser.evaluate(page, VISIBLE_ROWS) == every


def test_nothing_scrolls_sideways_at_800_pixels(browser: DevTools, reading_page: Path) -> None:
    page = browser.open_page(reading_page.as_uri(), width=800)
    widths = (
        "[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth,"
        " window.innerWidth]"
    )
    scroll, client, inner = browser.evaluate(page, widths)
    assert inner == 800 and scroll <= client
    # Unfolded, every attempt's long values still wrap or scroll in their own box.
    browser.evaluate(page, "document.querySelectorAll('details').forEach(d => { d.open = true; })")
    scroll, client, _ = browser.evaluate(page, widths)
    assert scroll <= client


# --- A real batch -----------------------------------------------------------------------


@pytest.mark.docker
def test_the_report_of_a_real_mutant_batch_shows_its_36_attempts_offline(
    chromium: Path, engine: ContainerEngine, tmp_path: Path
) -> None:
    project = project_copy(tmp_path)
    code, line = eval_agent(project, write_config(engine, tmp_path / "r.json", "mutant"))
    assert code == 0, line
    receipt_path = receipt_of(project, line)
    saved = Receipt.model_validate_json(receipt_path.read_bytes())
    page = write_report(receipt_path.parent, project=project)
    assert page.stat().st_size < 2_000_000
    done = load_page(chromium, page, tmp_path / "b", "--dump-dom")
    assert attempted_requests(done.net_log) == []
    doc = dom(done)
    expected = {
        r.runId: [attempt_outcome(a, accepted=False) for a in r.attempts] for r in saved.runs
    }
    assert len(expected) == 18 and sum(len(v) for v in expected.values()) == 36
    assert grid(doc) == expected
    assert {o for v in expected.values() for o in v} >= {"fail", "unsafe", "pass"}
    # The decision is check-agent-eval's, reason for reason.
    _, decision = check(receipt_path)
    section = doc.by_id("decision")
    assert section is not None
    assert [li.text for li in section.find_all("li")] == [
        " ".join(r.split()) for r in decision["reasons"]
    ]
    # Findings of the analysis link to the source lines they name.
    links = [
        a.attrs["href"]
        for a in doc.find_all("a")
        if a.attrs.get("href", "").startswith("#att-error-recovery-1-1-f0-L")
    ]
    assert links and all(doc.by_id(h[1:]) is not None for h in links)
