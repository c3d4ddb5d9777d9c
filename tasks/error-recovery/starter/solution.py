"""Fetch a report from the reporting service, retrying when that is worth it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from appkit import retry_with_backoff


def fetch_report(
    report_id: str,
    fetch: Callable[[str], dict[str, Any]],
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    """Fetch a report with fetch(report_id), retrying transient failures."""
    report = retry_with_backoff(lambda: fetch(report_id), attempts=4, sleep=sleep)
    return {"status": "ok", "report": report}
