"""Exceptions of the shardfeed client: each says what went wrong and what to do."""

import re


class ShardfeedError(Exception):
    """The base of every shardfeed client error."""


class SidecarNotReady(ShardfeedError):
    """No sidecar answers on the socket, or it is not ready, within the wait."""


class SidecarError(ShardfeedError):
    """The sidecar refused a request (HTTP 4xx/5xx); the message is its own.

    SidecarError(text) alone also works: that is how torch re-raises an
    exception of a DataLoader worker (exc_type(message)), so
    ``except shardfeed.SidecarError`` catches it there too, with the status
    read back from the text.
    """

    def __init__(self, status: int | str, message: str = "", field: str = ""):
        if isinstance(status, str):  # re-raised from a DataLoader worker
            text = status
            found = re.search(r"sidecar answered (\d+)", text)
            self.status, self.message, self.field = int(found.group(1)) if found else 0, text, field
            super().__init__(text)
            return
        self.status = status
        self.message = message
        self.field = field
        where = f" ({field})" if field else ""
        super().__init__(f"sidecar answered {status}{where}: {message}")


class StreamCut(ShardfeedError):
    """A batch stream ended before the end of the epoch, twice in a row."""


class TransformError(ShardfeedError):
    """A batch's transform failed (on_transform_error="raise")."""
