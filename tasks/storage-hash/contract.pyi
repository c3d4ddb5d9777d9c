from collections.abc import Callable
from typing import Any

def store_document(document: dict[str, Any], write: Callable[[str, str], None]) -> str:
    """Store the document under its content digest and return the digest.

    write(key, text) persists text (the stored bytes, decoded as UTF-8) under key.
    """

def load_document(digest: str, read: Callable[[str], str | None]) -> dict[str, Any]:
    """Return the document stored under digest, after checking it matches the digest.

    read(key) returns the text stored under key (the stored bytes, decoded as UTF-8),
    or None when nothing is stored there.
    """
