from collections.abc import Callable
from typing import Any

def handle_signup(
    submission: dict[str, Any], create_account: Callable[[dict[str, Any]], str]
) -> dict[str, Any]:
    """Handle one submission of the sign-up form.

    submission maps field names to the submitted strings, as in form-encoded data.
    Valid: calls create_account(values) once with the parsed values and returns
    {"ok": True, "accountId": <create_account's result>, "html": <confirmation HTML>}.
    Invalid: never calls create_account and returns
    {"ok": False, "html": <the sign-up form, re-rendered with the submitted values and errors>}.
    """
