from collections.abc import Callable
from typing import Any

def dispatch_tool_call(
    call: Any,
    send_email: Callable[[dict[str, Any]], str],
    create_ticket: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """Run one tool call requested by a language model: {"tool": <name>, "arguments": {...}}.

    Success: {"ok": True, "tool": <name>, "result": <the handler's result>}.
    Invalid arguments: {"ok": False, "error": "invalid_arguments",
    "errors": [{"path": <field path>, "code": <error code>}, ...]}.
    Unknown tool: {"ok": False, "error": "unknown_tool"}.
    """
