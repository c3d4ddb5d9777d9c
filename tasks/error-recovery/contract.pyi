from collections.abc import Callable
from typing import Any

def fetch_report(
    report_id: str,
    fetch: Callable[[str], dict[str, Any]],
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    """Fetch a report with fetch(report_id), retrying transient failures.

    Success: {"status": "ok", "report": <what fetch returned>}.
    Failure: {"status": "failed", "error": <the library error's code>}.
    sleep(seconds) is the only way to wait between attempts.
    """
