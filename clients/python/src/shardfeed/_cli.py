"""The `shardfeed` command of the wheel: the bundled binary, run as is.
It imports nothing heavy (the package's __init__ is lazy), so a CLI call
costs the binary's start, not torch's import."""

from __future__ import annotations

import os
import sys

from ._binary import find_binary
from .errors import ShardfeedError


def main() -> None:
    """Replace this process with the shardfeed binary and its arguments."""
    try:
        binary = find_binary(path=False)  # on PATH is this very script
    except ShardfeedError as err:
        sys.exit(f"shardfeed: {err}")
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
