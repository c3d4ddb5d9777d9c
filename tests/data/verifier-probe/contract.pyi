def probe() -> str:
    """Return the grader's secret."""

def echo(text: str) -> str:
    """Return *text* unchanged."""
