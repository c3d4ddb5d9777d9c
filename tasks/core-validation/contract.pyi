from collections.abc import Callable
from typing import Any

def validate_order(payload: Any) -> dict[str, Any]:
    """Check an order payload against the order schema.

    Valid: {"ok": True, "order": <the validated order>}.
    Invalid: {"ok": False, "errors": [{"path": <field path>, "code": <error code>}, ...]},
    one entry per problem found.
    """

def submit_order(payload: Any, save: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """Validate the payload and, only when it is valid, save the validated order once.

    Valid: calls save(order) exactly once and returns {"ok": True, "orderId": <save's result>}.
    Invalid: never calls save and returns the same {"ok": False, "errors": [...]} as
    validate_order.
    """
