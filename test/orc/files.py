"""Writes the ORC test files of shardfeed with pyarrow, and what pyarrow
reads back of them: the recorded oracle of the ORC reader's unit tests
(sidecar/format/orc/orcfile/testdata/golden; make golden).

    files.py record DIR

writes DIR/<name>.orc for each compression pyarrow's ORC writer offers
(uncompressed, zlib, snappy, zstd, lz4), and two more: dictionary
(zstd, strings dictionary-encoded) and v0.11 (zlib, file version 0.11:
RLE v1): the uncompressed and dictionary files in several stripes, the
compressed ones' streams in several compression chunks. The rows pyarrow
reads of each (binary values as hex, dates as days, hashed:
test/oracle/golden.py) are in the .jsonl file its manifest entry names
(one for all, as they hold one table). DIR/unsupported.orc has a type
shardfeed does not read, inside a struct.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import sys
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import golden  # noqa: E402

ROWS = 8000  # several stripes of STRIPE_BYTES, streams of several compression chunks
STRIPE_BYTES = 16 * 1024

FILES: dict[str, dict[str, Any]] = {
    "uncompressed": {"compression": "uncompressed"},
    "zlib": {"compression": "zlib"},
    "snappy": {"compression": "snappy"},
    "zstd": {"compression": "zstd"},
    "lz4": {"compression": "lz4"},
    "dictionary": {"compression": "zstd", "dictionary_key_size_threshold": 1.0},
    "v0.11": {"compression": "zlib", "file_version": "0.11"},
}


def table(n: int) -> pa.Table:
    rng = random.Random(1)
    # patched: small negatives with rare outliers, RLE v2's patched base
    # with a negative base; falling: a strictly decreasing run, delta runs
    # of negative deltas (an independent review's mutants lived without them)
    patched = [2**40 + i if i % 512 in (3, 400) else rng.randint(-20, -5) for i in range(n)]
    falling = [10**6 - i * 5 - rng.randint(0, 4) for i in range(n)]
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "small": pa.array([i % 100 - 50 for i in range(n)], pa.int32()),
            "tiny": pa.array([i % 256 - 128 for i in range(n)], pa.int8()),
            "short": pa.array([(i * 37) % 65536 - 32768 for i in range(n)], pa.int16()),
            "wide": pa.array([(i * 2654435761) % (1 << 62) - (1 << 61) for i in range(n)], pa.int64()),
            "f32": pa.array([i / 8 for i in range(n)], pa.float32()),
            "f": pa.array([i / 3 for i in range(n)], pa.float64()),
            "text": pa.array([None if i % 7 == 0 else f"row-{i}" for i in range(n)], pa.string()),
            "label": pa.array([["cat", "dog", "bird"][i % 3] for i in range(n)], pa.string()),
            "flag": pa.array([None if i % 11 == 0 else i % 2 == 0 for i in range(n)], pa.bool_()),
            "tokens": pa.array([None if i % 13 == 0 else [i, i + 1, -i] for i in range(n)], pa.list_(pa.int32())),
            "blob": pa.array([bytes([i % 256]) * (i % 5) for i in range(n)], pa.binary()),
            "day": pa.array([i % 20000 for i in range(n)], pa.date32()),
            "patched": pa.array(patched, pa.int64()),
            "falling": pa.array(falling, pa.int64()),
            "meta": pa.array(
                [None if i % 17 == 0 else {"a": i, "b": None if i % 3 == 0 else f"m{i}"} for i in range(n)],
                pa.struct([("a", pa.int64()), ("b", pa.string())]),
            ),
        }
    )


def plain(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, datetime.date):
        return (v - datetime.date(1970, 1, 1)).days
    return v


def record(out: str) -> None:
    golden.fresh(out)
    t = table(ROWS)
    cases: dict[str, Any] = {}
    read: dict[str, list[str]] = {}
    for name, opts in FILES.items():
        path = f"{out}/{name}.orc"
        orc.write_table(t, path, stripe_size=STRIPE_BYTES, compression_block_size=64 * 1024, **opts)
        back = orc.read_table(path)
        # Every file holds one table: pyarrow's reads of them are one
        # answer file unless one reads otherwise.
        rows = [golden.line(r) for r in golden.hashed(plain(row) for row in back.to_pylist())]
        answers = next((a for a, seen in read.items() if seen == rows), f"{name}.jsonl")
        if answers not in read:
            read[answers] = rows
            golden.write_answers(f"{out}/{answers}", (json.loads(r) for r in rows))
        cases[name] = {"rows": back.num_rows, "stripes": orc.ORCFile(path).nstripes, "answers": answers, **opts}
    # A type shardfeed does not read yet, inside a struct: refused naming
    # the column by its path.
    stamps = pa.table({"id": pa.array([1, 2], pa.int64()),
                       "meta": pa.array([{"at": datetime.datetime(2026, 1, 1)}, None], pa.struct([("at", pa.timestamp("ns"))]))})
    orc.write_table(stamps, f"{out}/unsupported.orc")
    golden.write_manifest(out, ["pyarrow"], cases)


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] != "record":
        raise SystemExit("usage: files.py record DIR")
    record(sys.argv[2])


if __name__ == "__main__":
    main()
