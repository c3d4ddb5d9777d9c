"""Rendering the report, and writing it where a batch's evidence is.

The page is one file with its style inline and nothing to fetch: its Content
Security Policy allows no connection and no resource but inline style,
``data:`` images and the one inline script of this package (the filter),
allowed by its sha256 computed here, never ``unsafe-inline``. The page is
whole without the script: it only adds the filter. The template is rendered
with autoescaping on and never marks a string safe (the script is included
as a file of the template), so whatever an agent or a solution wrote is text.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import shlex
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, Template

import agent_eval
from agent_eval.errors import AgentEvalError, EvidenceError
from agent_eval.evidence_io import write_bytes_atomic
from agent_eval.layout import RunDirectory
from agent_eval.project import find_project
from agent_eval.report.text import one_line, segments
from agent_eval.report.view import BatchView, load_batch
from agent_eval.verdict.qualification import Anchors, current_anchors

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "FILTER_SCRIPT",
    "NO_SCRIPT_POLICY",
    "write_report",
]

FILTER_SCRIPT = (Path(__file__).parent / "templates" / "filter.js").read_text(encoding="utf-8")
"""The page's one script: the filter by task and outcome (it reads nothing but the page)."""


NO_SCRIPT_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""What a page without a script may load: inline style and data: images, nothing else."""


def content_security_policy(script: str = FILTER_SCRIPT) -> str:
    """What the page may load: inline style, data: images and exactly *script*."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return f"{NO_SCRIPT_POLICY}; script-src 'sha256-{digest}'"


CONTENT_SECURITY_POLICY = content_security_policy()
"""The policy of every page this package writes."""

_OUTCOME_LABELS = {
    "pass": "pass",
    "fail": "fail",
    "unsafe": "unsafe",
    "infrastructure": "infra",
    "needs-review": "review",
    "not-run": "not run",
}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def _p3(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _ms(value: int | None) -> str:
    if value is None:
        return "—"
    return f"{value} ms" if value < 1000 else f"{value / 1000:.1f} s"


def _when(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def html_environment(package: str) -> Environment:
    """The jinja2 environment of a self-contained page whose templates are in *package*.

    Every value is escaped and an undefined one is an error; text an agent or a
    provider chose is split where a control character is (the ``segments``
    filter), so a template can mark each one as the report's source view does.
    """
    env = Environment(
        loader=PackageLoader(package, "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["segments"] = segments
    return env


def _environment() -> Environment:
    env = html_environment("agent_eval.report")
    filters: dict[str, Callable[..., str]] = {
        "pct": _pct,
        "p3": _p3,
        "ms": _ms,
        "when": _when,
        "tojson_text": _json_text,
        "shquote": shlex.quote,
        "outcome_label": _OUTCOME_LABELS.__getitem__,
        "one_line": one_line,
    }
    env.filters.update(filters)
    return env


@functools.cache
def _template() -> Template:
    # Compiling the template costs more than rendering a batch: once per process.
    return _environment().get_template("report.html.j2")


def render_report(view: BatchView) -> str:
    """The report's HTML for *view*."""
    return _template().render(
        b=view,
        suite=view.suite,
        version=agent_eval.__version__,
        # The template includes the script's file as it is; the policy allows its hash.
        csp=content_security_policy(FILTER_SCRIPT),
    )


def write_report(
    run_dir: Path,
    output: Path | None = None,
    *,
    project: Path | None = None,
    current: Anchors | None = None,
    now: datetime | None = None,
) -> Path:
    """Write the report of the batch in *run_dir* and return where it is.

    *output* defaults to ``run_dir/report.html``. The decision holds the batch
    against the anchors ``check-agent-eval`` uses: the checkout found from
    *project* (default: the current directory) and the installed harness;
    *current* replaces them. It works for any receipt status and never changes
    another file of the run directory.

    Raises:
        EvidenceError: the run directory or its receipt cannot be read, or the
            report cannot be written (the message names the file).
    """
    if current is None:
        try:
            located = find_project(project)
        except AgentEvalError as exc:
            current = current_anchors(None, str(exc))
        else:
            current = current_anchors(located)
    view = load_batch(run_dir, current, generated_at=now or datetime.now(UTC))
    target = output if output is not None else RunDirectory(run_dir).report
    try:
        # A path not in UTF-8 (a directory named in another encoding) is shown escaped.
        write_bytes_atomic(target, render_report(view).encode("utf-8", "backslashreplace"))
    except OSError as exc:
        raise EvidenceError(f"report {target}: cannot write: {exc.strerror or exc}") from exc
    return target
