"""shardfeed index and plan on Parquet written by real pyarrow, in real MinIO."""

import json
import subprocess

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

    with s3.open_input_stream(f"{bucket}/web/_shardfeed/index.json") as f:
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


def test_empty_row_groups_are_indexed_as_empty_shards_and_served(feed_factory, minio, bucket):
    # pyarrow writes an empty table as one row group with no pages
    # (data_page_offset 0); shardfeed index refused such files.
    schema = pa.schema({"id": pa.int64(), "text": pa.string()})
    s3 = minio.filesystem()
    with pq.ParquetWriter(f"{bucket}/mixed/part-0.parquet", schema, filesystem=s3) as w:
        w.write_table(pa.table({"id": pa.array(range(0, 30), pa.int64()), "text": [f"t{i}" for i in range(30)]}))
        w.write_table(schema.empty_table())
        w.write_table(pa.table({"id": pa.array(range(30, 50), pa.int64()), "text": [f"t{i}" for i in range(30, 50)]}))
    pq.write_table(schema.empty_table(), f"{bucket}/mixed/part-1.parquet", filesystem=s3)
    meta = pq.ParquetFile(f"{bucket}/mixed/part-1.parquet", filesystem=s3).metadata
    assert meta.num_row_groups == 1 and meta.row_group(0).column(0).data_page_offset == 0

    out = shardfeed("index", f"s3://{bucket}/mixed/", "--endpoint", minio.endpoint, "--insecure", minio=minio).stdout
    assert "4 shards, 50 samples" in out, out
    with s3.open_input_stream(f"{bucket}/mixed/_shardfeed/index.json") as f:
        shards = json.load(f)["shards"]
    assert [(e["object"], e["samples"]) for e in shards] == [
        ("part-0.parquet", 30), ("part-0.parquet", 0), ("part-0.parquet", 20), ("part-1.parquet", 0)]
    assert all(e["length"] == 0 for e in shards if e["samples"] == 0)

    import shardfeed as sf

    feed = feed_factory(None, "  numSplits: 2\n  globalBatchSize: 10\n", name="mixed")
    plan = feed.plan_ids(world=1)
    got = {}
    for batch in sf.Client(feed.socket).batches(rank=0, world=1):
        ids = batch.column("_shardfeed_index").to_pylist()
        step = batch.column("_shardfeed_step")[0].as_py()
        assert ids == plan[(step, 0)]
        for i, text in zip(batch.column("id").to_pylist(), batch.column("text").to_pylist()):
            assert text == f"t{i}"
            got[i] = got.get(i, 0) + 1
    assert got == {i: 1 for i in range(50)}


def test_a_nan_fails_an_ordering_in_every_layout_and_its_guard_prunes(minio, bucket):
    # pyarrow leaves NaN out of a row group's min and max: the group of low
    # scores with a NaN was once ruled out unread (the filter "worked"),
    # while the same rows in one group failed with advice that does not
    # help for NaN. Now both fail, advising x == x, which then prunes.
    s3 = minio.filesystem()
    table = pa.table({"id": pa.array(np.arange(8, dtype=np.int64)),
                      "score": pa.array([0.1, 0.2, float("nan"), 0.3, 0.6, 0.7, 0.8, 0.9])})
    for group in (4, 8):
        pq.write_table(table, f"{bucket}/nan{group}/part-0.parquet", filesystem=s3, row_group_size=group)
        uri = f"s3://{bucket}/nan{group}/"
        failed = shardfeed("index", uri, "--endpoint", minio.endpoint, "--insecure", "--filter", "score != null && score > 0.5",
                           minio=minio, check=False)
        assert failed.returncode != 0 and "test x == x first" in failed.stderr, failed.stderr
        guarded = shardfeed("index", uri, "--endpoint", minio.endpoint, "--insecure", "--filter", "score == score && score > 0.5",
                            minio=minio).stdout
        assert "4 of 8 samples match" in guarded, guarded
        if group == 4:
            assert "1 shards ruled out by their statistics" in guarded, guarded


def test_the_index_leaves_the_data_readable_by_pyarrow_and_pandas(tmp_path):
    """shardfeed index and its filter selections write under _shardfeed/,
    which pyarrow.dataset skips (and pandas.read_parquet, which reads with
    it): the directory still reads as the table it was (an index.json
    beside the data broke both)."""
    import pyarrow.dataset as pads

    from conftest import SHARDFEED_BIN

    data = tmp_path / "table"
    data.mkdir()
    table = pa.table({"id": pa.array(range(100), pa.int64()), "lang": ["en", "de"] * 50})
    pq.write_table(table, data / "part-0.parquet")
    done = subprocess.run([str(SHARDFEED_BIN), "index", str(data), "--filter", "lang == 'en'"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    written = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file())
    assert written[0] == "_shardfeed/filter-" + written[0].split("filter-")[1] and "_shardfeed/index.json" in written, written
    assert [p for p in written if not p.startswith("_shardfeed/")] == ["part-0.parquet"], written
    assert pads.dataset(str(data), format="parquet").to_table().equals(table)
    assert pq.read_table(data).equals(table)


def _uvarint(b: bytes, i: int) -> tuple[int, int]:
    v, shift = 0, 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        if x < 0x80:
            return v, i
        shift += 7


def _selected_rows(data: "os.PathLike[str]", expr: str) -> list[int]:
    """The stream rows a filter's selection under data/_shardfeed/ keeps,
    read back from its runs (count, then gap and length of each run)."""
    import hashlib
    import pathlib

    root = pathlib.Path(data) / "_shardfeed"
    name = "filter-" + hashlib.sha256(expr.encode()).hexdigest()
    sel = json.loads((root / f"{name}.json").read_text())
    runs = (root / f"{name}.runs").read_bytes()
    shards = json.loads((root / "index.json").read_text())["shards"]
    assert sel["nulls"] == "three-valued", sel
    rows, first = [], 0
    for shard, s in zip(shards, sel["shards"]):
        if s["matching"]:
            b = runs[s["offset"]:s["offset"] + s["length"]]
            n, i = _uvarint(b, 0)
            end = 0
            for _ in range(n):
                gap, i = _uvarint(b, i)
                length, i = _uvarint(b, i)
                start = end + gap
                rows.extend(range(first + start, first + start + length))
                end = start + length
        first += shard["samples"]
    return rows


def test_filters_treat_null_as_pyarrow_does(tmp_path):
    """A null is unknown, as in pyarrow, SQL and Spark: lang != 'de' leaves
    a null lang out, null || true is true, null && false is false, and
    x == null is pyarrow's is_null(). The rows shardfeed index selects are
    exactly those pyarrow.dataset's filter keeps, row groups pruned by their
    statistics or not."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    from conftest import SHARDFEED_BIN

    n = 120
    langs = [["en", "de", None, "fr"][i % 4] if i < 100 else None for i in range(n)]
    scores = [None if i % 7 == 0 else (i % 10) / 10 for i in range(n)]
    table = pa.table({"id": pa.array(range(n), pa.int64()), "lang": pa.array(langs, pa.string()),
                      "score": pa.array(scores, pa.float64())})
    data = tmp_path / "t"
    data.mkdir()
    pq.write_table(table, data / "part-0.parquet", row_group_size=20)
    lang, score = pc.field("lang"), pc.field("score")
    cases = {
        "lang != 'de'": lang != "de",
        "!(lang == 'de')": ~(lang == "de"),
        "lang == 'de' || score > 0.5": (lang == "de") | (score > 0.5),
        "lang != 'de' && score > 0.5": (lang != "de") & (score > 0.5),
        "!(lang != 'de' && score > 0.5)": ~((lang != "de") & (score > 0.5)),
        "lang == null": lang.is_null(),
        "lang != null && score < 0.3": lang.is_valid() & (score < 0.3),
        "score >= 0.5": score >= 0.5,
        "lang == null || score == null": lang.is_null() | score.is_null(),
    }
    for cel, expression in cases.items():
        done = subprocess.run([str(SHARDFEED_BIN), "index", str(data), "--filter", cel], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, cel + ": " + done.stdout + done.stderr
        want = sorted(pads.dataset(str(data), format="parquet").to_table(filter=expression).column("id").to_pylist())
        assert _selected_rows(data, cel) == want, cel
