"""Exceptions of the shardfeed client: each says what went wrong and what to do."""


class ShardfeedError(Exception):
    """The base of every shardfeed client error."""


class SidecarNotReady(ShardfeedError):
    """No sidecar answers on the socket, or it is not ready, within the wait."""


class SidecarError(ShardfeedError):
    """The sidecar refused a request (HTTP 4xx/5xx); the message is its own."""

    def __init__(self, status: int, message: str, field: str = ""):
        self.status = status
        self.message = message
        self.field = field
        where = f" ({field})" if field else ""
        super().__init__(f"sidecar answered {status}{where}: {message}")


class StreamCut(ShardfeedError):
    """A batch stream ended before the end of the epoch, twice in a row."""
