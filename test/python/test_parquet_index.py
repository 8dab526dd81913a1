"""shardfeed index and plan on Parquet written by real pyarrow, in real MinIO."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from conftest import run_shardfeed


def shardfeed(*args, minio, check=True):
    return run_shardfeed(minio, *args, check=check)


def test_index_matches_pyarrow_footers_and_plan_covers_every_row(minio, bucket, tmp_path):
    s3 = minio.filesystem()
    sizes = [1200, 700, 3000]
    first = 0
    for i, n in enumerate(sizes):
        table = pa.table({
            "id": pa.array(np.arange(first, first + n, dtype=np.int64)),
            "tokens": pa.array([np.arange(8, dtype=np.int32) + j for j in range(n)], type=pa.list_(pa.int32())),
            "text": [f"sample {first + j}" for j in range(n)],
        })
        pq.write_table(table, f"{bucket}/web/part-{i}.parquet", filesystem=s3, row_group_size=500, compression="zstd")
        first += n

    uri = f"s3://{bucket}/web/"
    out = shardfeed("index", uri, "--endpoint", minio.endpoint, "--insecure", "--hash", "sha256", minio=minio).stdout
    assert "11 shards, 4900 samples" in out, out  # 3 + 2 + 6 row groups of 500

    with s3.open_input_stream(f"{bucket}/web/index.json") as f:
        index = json.load(f)
    assert index["shardfeed"] == 1 and index["format"] == "parquet"
    for i in range(len(sizes)):
        meta = pq.ParquetFile(f"{bucket}/web/part-{i}.parquet", filesystem=s3).metadata
        entries = [e for e in index["shards"] if e["object"] == f"part-{i}.parquet"]
        assert len(entries) == meta.num_row_groups
        for rg, e in enumerate(entries):
            group = meta.row_group(rg)
            starts = []
            for c in range(group.num_columns):
                col = group.column(c)
                start = col.data_page_offset
                if col.has_dictionary_page and col.dictionary_page_offset:
                    start = min(start, col.dictionary_page_offset)
                starts.append((start, start + col.total_compressed_size))
            assert e["samples"] == group.num_rows
            assert e["offset"] == min(s for s, _ in starts)
            assert e["offset"] + e["length"] == max(end for _, end in starts)
            assert e["hash"].startswith("sha256:")

    manifest = tmp_path / "ds.yaml"
    manifest.write_text(f"""apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: web}}
spec:
  streams:
    - name: web
      format: parquet
      source: {{uri: "{uri}", endpoint: "{minio.endpoint}", insecure: true}}
  numSplits: 7
  globalBatchSize: 14
  shuffle: {{seed: 5, blockSize: 100}}
""")
    lines = shardfeed("plan", "-f", str(manifest), "--ids", "--world-size", "7", minio=minio).stdout.splitlines()
    ids = [i for line in lines for i in json.loads(line)["ids"]]
    # 4900 samples in 7 splits of 700, 1 per split per step: 350 steps,
    # nothing dropped, every row exactly once.
    assert len(lines) == 350 * 7
    assert sorted(ids) == list(range(4900))
