class StatusError(Exception):
    """Raised for an answer outside 2xx."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code
        self._raw = message
