"""Where the shardfeed command is. Light on purpose: the wheel's
`shardfeed` script imports this and nothing else of the package (no
torch, no pyarrow), then replaces itself with the binary."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .errors import ShardfeedError

BINARY_ENV = "SHARDFEED_BINARY"


def bundled_binary() -> Path:
    """Where a platform wheel puts the shardfeed command."""
    return Path(__file__).resolve().parent / "_bin" / "shardfeed"


def find_binary(binary: str | None = None, *, path: bool = True) -> str:
    """The shardfeed command to run: the argument, else $SHARDFEED_BINARY,
    else the wheel's own, else (if path) the one on PATH."""
    for candidate in (binary, os.environ.get(BINARY_ENV)):
        if candidate:
            if not os.access(candidate, os.X_OK):
                raise ShardfeedError(f"{candidate} is not an executable shardfeed command")
            return candidate
    own = bundled_binary()
    if os.access(own, os.X_OK):
        return str(own)
    found = shutil.which("shardfeed") if path else None
    if found:
        return found
    raise ShardfeedError("no shardfeed command: install the platform wheel (it bundles one; `make wheel` builds it), "
                         f"put the shardfeed binary on PATH, or set {BINARY_ENV}")
