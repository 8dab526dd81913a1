"""Writes the Parquet stream of shardfeed's row filter acceptance test with
pyarrow, and the ids pyarrow's own filter keeps: the test's oracle.

    stream.py DIR

writes DIR/parquet/part-<k>.parquet, 4 files of 300 rows in row groups of
50 (id, text "p-<id>", tokens [10 id + j for j < 4], lang and score), and
DIR/filtered.json, the sorted ids pyarrow.dataset keeps with the filter
lang == "en" and score >= 0.5 (the test's, written in CEL there). Within a
file, score rises with the row, so the first three row groups are below
0.5 by their statistics, and the fifth holds lang "de" only: four row groups
per file that a filter reading statistics never reads.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

FILES, ROWS, GROUP = 4, 300, 50


def lang(j: int) -> str | None:
    if 100 <= j < 150 or 200 <= j < 250:
        return "de"
    return ["en", "fr", None][j % 3]


def main() -> None:
    out = sys.argv[1]
    os.makedirs(f"{out}/parquet")
    for k in range(FILES):
        ids = range(k * ROWS, (k + 1) * ROWS)
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "text": pa.array([f"p-{i}" for i in ids], pa.string()),
                "tokens": pa.array([[i * 10 + j for j in range(4)] for i in ids], pa.list_(pa.int32())),
                "lang": pa.array([lang(i - k * ROWS) for i in ids], pa.string()),
                "score": pa.array([(i - k * ROWS) / ROWS for i in ids], pa.float64()),
            }
        )
        pq.write_table(table, f"{out}/parquet/part-{k}.parquet", row_group_size=GROUP)
    kept = ds.dataset(f"{out}/parquet", format="parquet").to_table(
        filter=(ds.field("lang") == "en") & (ds.field("score") >= 0.5), columns=["id"]
    )
    with open(f"{out}/filtered.json", "w") as f:
        json.dump(sorted(kept.column("id").to_pylist()), f)


if __name__ == "__main__":
    main()
