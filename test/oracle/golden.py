"""What every recorded oracle shares (test/oracle/*_oracle.py record DIR):
the answers a format's own reader gives, one canonical JSON object a line,
and a manifest naming the pinned packages that wrote and read the inputs.

A package's golden tests read DIR (its testdata/golden) without Python;
make golden re-records it, make test-golden re-records into a temporary
folder, fails on any answer that changed and runs the golden tests on the
fresh inputs (hack/golden.sh).
"""

import decimal
import hashlib
import importlib.metadata
import json
import math
import os
import shutil
from typing import Any, Iterable, Iterator


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


def go_float(f: float) -> str:
    """A float as Go's encoding/json prints a float64: the shortest digits
    that read back, fixed notation from 1e-6 up to 1e21, and an exponent
    without a leading zero ("1e-7") beyond."""
    if math.isnan(f) or math.isinf(f):
        raise ValueError(f"{f} has no JSON form")
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exp = decimal.Decimal(repr(f)).normalize().as_tuple()
    assert isinstance(exp, int)
    d = "".join(map(str, digits))
    out = "-" if sign else ""
    if abs(f) < 1e-6 or abs(f) >= 1e21:
        e = exp + len(d) - 1
        mant = d[0] + ("." + d[1:] if len(d) > 1 else "")
        return out + mant + "e" + ("-" if e < 0 else "+") + (str(-e) if -10 < e < 0 else f"{abs(e):02d}")
    if exp >= 0:
        return out + d + "0" * exp
    point = len(d) + exp
    return out + (d[:point] + "." + d[point:] if point > 0 else "0." + "0" * -point + d)


_GO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def go_string(s: str) -> str:
    """A string as Go's encoding/json prints it (HTML characters escaped)."""
    out = ['"']
    for c in s:
        if c in _GO_ESCAPES:
            out.append(_GO_ESCAPES[c])
        elif ord(c) < 0x20:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def go_line(obj: Any) -> str:
    """obj as internal/testenv.Canonical prints it: Go's encoding/json over
    the value with keys sorted and integral numbers as integers. A hashed
    answer is the hash of this line, so both sides must print alike."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return go_float(obj)  # Python prints a float with "." or "e": Go reads it as one
    if isinstance(obj, str):
        return go_string(obj)
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(go_line(x) for x in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ",".join(go_string(k) + ":" + go_line(obj[k]) for k in sorted(obj)) + "}"
    raise TypeError(f"{type(obj).__name__} has no canonical form")


def go_hash(obj: Any) -> str:
    """The first 16 hex digits of sha256 over go_line(obj)
    (testenv.GoldenHash)."""
    return hashlib.sha256(go_line(obj).encode()).hexdigest()[:16]


def hashed(rows: Iterable[Any], every: int = 41, limit: int = 2048) -> Iterator[Any]:
    """Answers too large to keep whole: each row's go_hash, and every
    every-th row whole when its line is under limit bytes, so that a
    difference can be shown and not only found."""
    for i, row in enumerate(rows):
        if i % every == 0 and len(line(row)) <= limit:
            yield {"row": row}
        else:
            yield go_hash(row)
