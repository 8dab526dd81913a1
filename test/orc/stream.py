"""Writes the ORC and hive-partitioned streams of shardfeed's acceptance
tests with pyarrow, and the rows pyarrow reads of each: their oracle.

    stream.py DIR ROWS

writes DIR/orc/part-<k>-<compression>.orc, ROWS rows in all, one file per
compression pyarrow's ORC writer offers, each of several stripes, with ids
running on across files; and DIR/hive/, a tree of date=/region=/bucket=
directories (region null in some: __HIVE_DEFAULT_PARTITION__) of Parquet
and ORC files, ids running on after the ORC stream's. DIR/orc.jsonl holds
the rows pyarrow.dataset reads of DIR/orc, and DIR/hive.jsonl those it
reads of DIR/hive with hive partitioning and the filter
region == "eu" and date >= "2024-01-02" and bucket < 2 (the acceptance
test's selection, written in CEL there), one JSON object per row.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.orc as orc
import pyarrow.parquet as pq

COMPRESSIONS = ["uncompressed", "zlib", "snappy", "zstd", "lz4"]
DATES = ["2024-01-01", "2024-01-02", "2024-01-03"]
REGIONS = ["eu", "us", "__HIVE_DEFAULT_PARTITION__"]
BUCKETS = [0, 1, 2]


def body(i: int) -> bytes:
    return b"".join(hashlib.sha256(f"{i}/{k}".encode()).digest() for k in range(16))


def rows(prefix: str, start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "text": pa.array([f"{prefix}-{i}" for i in ids], pa.string()),
            "score": pa.array([None if i % 9 == 0 else i / 4 for i in ids], pa.float64()),
            "tokens": pa.array([[i * 10 + j for j in range(4)] for i in ids], pa.list_(pa.int32())),
            # Bytes that do not compress fill the writer's 64 KiB compression
            # blocks, so that a compressed file has several stripes.
            "body": pa.array([body(i) for i in ids], pa.binary()),
        }
    )


def dump(table: pa.Table, path: str) -> None:
    with open(path, "w") as f:
        for row in table.sort_by("id").to_pylist():
            row["body"] = row["body"].hex()
            f.write(json.dumps(row, sort_keys=True) + "\n")


def main() -> None:
    out, n = sys.argv[1], int(sys.argv[2])
    os.makedirs(f"{out}/orc")
    per = n // len(COMPRESSIONS)
    for k, c in enumerate(COMPRESSIONS):
        t = rows("p", k * per, per if k < len(COMPRESSIONS) - 1 else n - k * per)
        orc.write_table(t, f"{out}/orc/part-{k}-{c}.orc", compression=c, stripe_size=1024, batch_size=32)
    dump(ds.dataset(f"{out}/orc", format="orc").to_table(), f"{out}/orc.jsonl")

    selection = (ds.field("region") == "eu") & (ds.field("date") >= "2024-01-02") & (ds.field("bucket") < 2)
    start, selected = n, []
    for tree, prefix, fmt in [("hive", "h", "parquet"), ("hive-orc", "o", "orc")]:
        first = start
        for date in DATES:
            for region in REGIONS:
                for bucket in BUCKETS:
                    d = f"{out}/{tree}/date={date}/region={region}/bucket={bucket}"
                    os.makedirs(d)
                    t = rows(prefix, start, 40)
                    start += 40
                    if fmt == "orc":
                        orc.write_table(t, f"{d}/part-0.orc", stripe_size=4096, batch_size=64)
                    else:
                        pq.write_table(t, f"{d}/part-0.parquet", row_group_size=25)
        read = ds.dataset(f"{out}/{tree}", format=fmt, partitioning="hive").to_table(filter=selection)
        dump(read, f"{out}/{tree}.jsonl")
        selected.append(f"{tree}: {read.num_rows} rows selected of {start - first}")
    print(f"orc: {n} rows;", "; ".join(selected))


if __name__ == "__main__":
    main()
