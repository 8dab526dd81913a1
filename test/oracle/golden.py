"""What every recorded oracle shares (test/oracle/*_oracle.py record DIR):
the answers a format's own reader gives, one canonical JSON object a line,
and a manifest naming the pinned packages that wrote and read the inputs.

A package's golden tests read DIR (its testdata/golden) without Python;
make golden re-records it, make test-golden re-records into a temporary
folder, fails on any answer that changed and runs the golden tests on the
fresh inputs (hack/golden.sh).
"""

import importlib.metadata
import json
import os
import shutil
from typing import Any, Iterable


def fresh(dir_: str) -> str:
    """Empties DIR (a recording never keeps an older one's files)."""
    shutil.rmtree(dir_, ignore_errors=True)
    os.makedirs(dir_)
    return dir_


def line(obj: Any) -> str:
    """One answer as canonical JSON: sorted keys, no spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def write_answers(path: str, rows: Iterable[Any]) -> int:
    """Writes one canonical JSON line per answer and returns their count."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(line(r) + "\n")
            n += 1
    return n


def write_manifest(dir_: str, packages: list[str], cases: dict[str, Any]) -> None:
    """manifest.json: the oracle's packages at their installed versions and
    what each case holds (the golden tests check they read every case)."""
    versions = {p: importlib.metadata.version(p) for p in packages}
    with open(os.path.join(dir_, "manifest.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"oracle": versions, "cases": cases}, sort_keys=True, indent=1) + "\n")
