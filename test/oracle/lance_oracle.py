"""Lance tables written and read by pylance, the Lance project's own package
(bin/venv-oracle), for the tests of shardfeed's Lance reader
(sidecar/format/lance): the integration tests write their tables here at
test time; the unit tests read the small recording (record).

  lance_oracle.py write DIR --case CASE [--version V]
      writes table DIR (a CASE of the fixture matrix below, in Lance file
      version V: 2.0, 2.1, 2.2, or legacy and 2.3 for the refusals) and
      prints one JSON object: {"versions": [...], "tags": {name: version},
      "latest": N}.
  lance_oracle.py read DIR [--version N | --tag T] [--columns a,b] [--filter SQL]
      prints the rows of DIR at that version (default: the latest), one
      JSON object per line, in (fragment, offset) order, with "_rowaddr"
      (fragment << 32 | offset) and each value as testenv.Plain writes it:
      binary as hex, dates as days, timestamps as integers of their unit,
      decimals as strings.
  lance_oracle.py read-parquet DIR
      prints the rows of the Parquet files in DIR (shardfeed convert's
      output) as read prints a table's, without "_rowaddr".
  lance_oracle.py record DIR
      records the golden tests' oracle: each RECORDED case in each file
      version under DIR/VERSION/CASE/, and the rows pylance reads of each
      version the test reads in DIR/VERSION/CASE.vN.jsonl, hashed
      (test/oracle/golden.py); the blob columns' case in 2.1 and 2.2
      (DIR/VERSION/blobs/, the rows with each blob's bytes as take_blobs
      reads them); a small table in each file version shardfeed refuses
      under DIR/refused/VERSION/.
  lance_oracle.py blob-descriptors DIR
      prints each live row's blob descriptors (kind, size) as pylance
      reads them.
  lance_oracle.py cleanup DIR
      deletes the tag "pinned" and every version but the latest, as a
      table's owner would (cleanup_old_versions).

The cases force the encodings pylance chooses from data statistics
(../shared/reference/lance-scope.md §3, §7): bitpacking, FSST, dictionaries,
RLE, constants, full-zip values, general compression, several pages and
fragments, deletions of both kinds, appends, a compaction, a schema change
and a tag.
"""

import argparse
import datetime
import decimal
import functools
import json
import os
import random
import shutil
import sys
from typing import Iterator

import lance
from lance.blob import Blob, blob_array, blob_field
import golden
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
         "upsilon phi chi psi omega stream shard batch token image caption vector").split()


def text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def tab_batch(start: int, n: int, seed: int, run: int = 500) -> pa.RecordBatch:
    """Rows start..start+n of the tabular case: one column per type and
    encoding path a table of this kind takes ("runs" of run rows each)."""
    rng = random.Random(seed)
    ids = list(range(start, start + n))
    meta_rle = {"lance-encoding:rle-threshold": "0.9"}
    cols = {
        "id": pa.array(ids, pa.int64()),
        "label": pa.array([rng.randint(0, 999) for _ in ids], pa.int32()),
        "score": pa.array([rng.random() for _ in ids], pa.float32()),
        "const": pa.array([7] * n, pa.int64()),
        "flag": pa.array([rng.random() < 0.3 for _ in ids], pa.bool_()),
        "emb16": pa.array([[rng.uniform(-1, 1) for _ in range(16)] for _ in ids], pa.list_(pa.float32(), 16)),
        "cat": pa.array([rng.choice(["cat", "dog", "bird", "fish"]) for _ in ids], pa.string()),
        "text": pa.array([text(rng, 5, 40) for _ in ids], pa.string()),
        "maybe": pa.array([None if i % 7 == 3 else rng.gauss(0, 1) for i in ids], pa.float64()),
        "tokens": pa.array([[rng.randint(-5, 50000) for _ in range(rng.randint(0, 20))] for _ in ids], pa.list_(pa.int32())),
        "pt": pa.array([{"x": rng.random(), "y": rng.randint(-300, 300)} for _ in ids],
                       pa.struct([("x", pa.float64()), ("y", pa.int16())])),
        "nstr": pa.array([None if i % 5 == 1 else text(rng, 1, 3) for i in ids], pa.string()),
        "i8": pa.array([rng.randint(-128, 127) for _ in ids], pa.int8()),
        "u8": pa.array([rng.randint(0, 255) for _ in ids], pa.uint8()),
        "u16": pa.array([rng.randint(0, 65535) for _ in ids], pa.uint16()),
        "u32": pa.array([rng.randint(0, 2**32 - 1) for _ in ids], pa.uint32()),
        "u64": pa.array([rng.randint(0, 2**64 - 1) for _ in ids], pa.uint64()),
        "f16": pa.array([rng.uniform(-4, 4) for _ in ids], pa.float32()).cast(pa.float16()),
        "day": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i % 2000) for i in ids], pa.date32()),
        "ts": pa.array([1_700_000_000_000_000 + i * 1_000_003 for i in ids], pa.timestamp("us", tz="UTC")),
        "price": pa.array([decimal.Decimal(rng.randint(-10**9, 10**9)) / 100 for _ in ids], pa.decimal128(10, 2)),
        "fsb": pa.array([bytes(rng.getrandbits(8) for _ in range(4)) for _ in ids], pa.binary(4)),
        "lstr": pa.array([text(rng, 1, 4) for _ in ids], pa.large_string()),
        "bin": pa.array([bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 12))) for _ in ids], pa.binary()),
        "runs": pa.array([i // run for i in ids], pa.int32()),
    }
    fields = [pa.field(k, v.type, metadata=meta_rle if k == "runs" else None) for k, v in cols.items()]
    return pa.RecordBatch.from_arrays(list(cols.values()), schema=pa.schema(fields))


def media_batch(start: int, n: int, seed: int, small: bool = False, compressed: bool = True) -> pa.RecordBatch:
    """Rows of the media case: tensors and images of full-zip size, values
    over 32 KiB (compressed one by one), captions. Small (the recording's):
    smaller images, and the large values a short random run repeated, so
    that they compress to little; a file version that does not compress
    them (not compressed) gets them under 8 KiB."""
    rng = random.Random(seed)
    ids = list(range(start, start + n))

    def big() -> bytes:
        size = rng.randint(40960, 81920) if compressed else rng.randint(4096, 8192)
        return (rng.randbytes(251) * (size // 251 + 1))[:size] if small else rng.randbytes(size)

    lo, hi = (600, 3000) if small else (2048, 20480)
    return pa.RecordBatch.from_pydict({
        "id": pa.array(ids, pa.int64()),
        "emb768": pa.array([[rng.uniform(-1, 1) for _ in range(768)] for _ in ids], pa.list_(pa.float32(), 768)),
        "image": pa.array([rng.randbytes(rng.randint(lo, hi)) for _ in ids], pa.binary()),
        "big": pa.array([big() if i % 3 == 0 else b"\x00" * 100 for i in ids], pa.large_binary()),
        "caption": pa.array([text(rng, 3, 30) for _ in ids], pa.string()),
    })


def nested_batch(start: int, n: int, seed: int, null_structs: bool = True) -> pa.RecordBatch:
    """Rows of the nested case: nulls at every level one struct or list
    deep, empty lists (and no null struct in file version 2.0, whose writer
    refuses them: "Lance file version 2.0 does not encode struct
    validity")."""
    rng = random.Random(seed)
    ids = list(range(start, start + n))

    def maybe_list(i: int, make):
        if i % 11 == 4:
            return None
        if i % 7 == 2:
            return []
        return make()

    return pa.RecordBatch.from_pydict({
        "id": pa.array(ids, pa.int64()),
        "vec": pa.array([None if i % 6 == 5 else [rng.uniform(-1, 1) for _ in range(8)] for i in ids],
                        pa.list_(pa.float32(), 8)),
        "rec": pa.array([None if null_structs and i % 9 == 1 else {"a": None if i % 4 == 0 else i, "s": None if i % 5 == 0 else text(rng, 1, 3)}
                         for i in ids], pa.struct([("a", pa.int32()), ("s", pa.string())])),
        "words": pa.array([maybe_list(i, lambda: [None if rng.random() < 0.1 else rng.choice(["x", "yy", "zzz"])
                                                   for _ in range(rng.randint(1, 6))]) for i in ids], pa.list_(pa.string())),
        "nums": pa.array([maybe_list(i, lambda: [rng.randint(0, 10**12) for _ in range(rng.randint(1, 9))]) for i in ids],
                         pa.list_(pa.int64())),
        "flts": pa.array([[rng.random() for _ in range(rng.randint(0, 4))] for _ in ids], pa.large_list(pa.float64())),
        "nint": pa.array([None if i % 3 == 0 else i for i in ids], pa.int32()),
        "nulls": pa.array([None] * n, pa.int64()),
    })


def opts_batch(start: int, n: int, seed: int, small: bool = False) -> pa.RecordBatch:
    """Rows of the options case: each column asks the writer, through field
    metadata, for an encoding it would not pick from the data alone. Small
    (the recording's): one mini-block binary in eight of 300 bytes, the
    others empty."""
    rng = random.Random(seed)
    ids = list(range(start, start + n))
    cols = [
        ("id", pa.array(ids, pa.int64()), {"lance-encoding:structural-encoding": "fullzip"}),
        ("zs", pa.array([text(rng, 2, 12) for _ in ids], pa.string()), {"lance-encoding:compression": "zstd"}),
        ("lz", pa.array([rng.random() for _ in ids], pa.float32()), {"lance-encoding:compression": "lz4"}),
        ("bss", pa.array([rng.gauss(0, 1) for _ in ids], pa.float64()),
         {"lance-encoding:bss": "on", "lance-encoding:compression": "zstd"}),
        ("mb", pa.array([(rng.randbytes(300) if i % 8 == 0 else b"") if small else rng.randbytes(300) for i in ids], pa.binary()),
         {"lance-encoding:structural-encoding": "miniblock"}),
        ("nd", pa.array([text(rng, 1, 2) for _ in ids], pa.string()), {"lance-encoding:dict-divisor": "100000"}),
        ("fz", pa.array([None if i % 4 == 0 else text(rng, 1, 3) for i in ids], pa.string()),
         {"lance-encoding:structural-encoding": "fullzip"}),
    ]
    return pa.RecordBatch.from_arrays([c for _, c, _ in cols], schema=pa.schema([pa.field(k, c.type, metadata=m) for k, c, m in cols]))


CASES = {"tab": tab_batch, "media": media_batch, "nested": nested_batch, "opts": opts_batch}


def small_batch(start: int, n: int) -> pa.RecordBatch:
    """Rows of the small cases the refusals are written with."""
    ids = list(range(start, start + n))
    return pa.RecordBatch.from_pydict({"id": pa.array(ids, pa.int64()), "s": pa.array([f"row {i}" for i in ids])})


def blob_table(start: int, n: int, version: str, seed: int) -> pa.Table:
    """Rows of blob columns: sizes from empty to 24 KiB (random, so
    incompressible), some null. In 2.1 payload is a v1 blob
    (lance-encoding:blob), bytes in the data file; in 2.2 a v2 blob with
    small thresholds, so that values lie inline (up to 256 bytes), packed
    in blob files of about 20 KB (up to 6,000) and each in a file of its
    own (above); and thumb, declared as v1, is written as a v2 blob of the
    default thresholds."""
    rng = random.Random(seed)
    sizes = [0, 1, 200, 256, 257, 3000, 6000, 6001, 24576]
    payload, thumb = [], []
    for i in range(start, start + n):
        size = sizes[i % len(sizes)] if i % 5 else rng.randrange(0, 20000)
        payload.append(None if i % 11 == 4 else rng.randbytes(size))
        thumb.append(None if i % 6 == 1 else rng.randbytes(rng.randrange(0, 700)))
    ids = pa.array(range(start, start + n), pa.int64())
    caption = pa.array([f"row {i}" for i in range(start, start + n)])
    v1 = {"lance-encoding:blob": "true"}
    if version == "2.1":
        return pa.table([ids, caption, pa.array(payload, pa.large_binary())],
                        schema=pa.schema([pa.field("id", pa.int64()), pa.field("caption", pa.string()),
                                          pa.field("payload", pa.large_binary(), metadata=v1)]))
    return pa.table([ids, caption, blob_array([None if v is None else Blob.from_bytes(v) for v in payload]),
                     pa.array(thumb, pa.large_binary())],
                    schema=pa.schema([pa.field("id", pa.int64()), pa.field("caption", pa.string()),
                                      blob_field("payload", inline_size_threshold=256, dedicated_size_threshold=6000,
                                                 pack_file_size_threshold=20000),
                                      pa.field("thumb", pa.large_binary(), metadata=v1)]))


def blob_columns(ds) -> list[str]:
    """The dataset's blob columns (v1's metadata, v2's extension)."""
    out = []
    for f in ds.schema:
        meta = f.metadata or {}
        if meta.get(b"lance-encoding:blob") == b"true" or isinstance(f.type, pa.ExtensionType) and f.type.extension_name == "lance.blob.v2":
            out.append(f.name)
    return out


def reader(make, start: int, n: int, batch: int, seed: int) -> pa.RecordBatchReader:
    """n rows streamed in batches: the writer flushes pages as they fill,
    so a column has several pages and the columns' pages interleave."""
    first = make(start, min(batch, n), seed)

    def gen():
        yield first
        for k, lo in enumerate(range(start + batch, start + n, batch)):
            yield make(lo, min(batch, start + n - lo), seed + k + 1)

    return pa.RecordBatchReader.from_batches(first.schema, gen())


# The recorded cases (record): the cases of the full matrix at a size the
# repository keeps, each still forcing every encoding its full form does
# (the golden test fails on one no case exercised), and "dels", whose
# dense deletion is a roaring bitmap (over 5,000 rows of one fragment).
RECORDED = ("tab", "media", "nested", "opts", "evolve", "dels", "edges", "lead-struct", "lead-list")
VERSIONS = ("2.0", "2.1", "2.2")
PAGE_BYTES = 1024


def write(args) -> None:
    w = write_case(args.dir, args.case, args.version, small=False, v1_names=args.v1_names, text_prefix=args.text_prefix)
    print(json.dumps(w))


def write_case(uri: str, case: str, version: str, small: bool, v1_names: bool = False, text_prefix: str = "p") -> dict:
    """Writes table uri (a case of the matrix, small for the recording) and
    returns its versions, tags and latest version."""
    # small: pages of a KiB, so that a column of a few hundred rows has
    # several and readers cross their boundaries; not tab's, whose text
    # pages must be over 32 KiB for FSST
    pages = {"data_cache_bytes": PAGE_BYTES * 4, "max_page_bytes": PAGE_BYTES} if small and case != "tab" else {}
    kw = {"data_storage_version": version, "enable_v2_manifest_paths": not v1_names, **pages}
    if case == "tab":
        # rows, batch, rows per file, appends, the dense deletion's ranges
        n, batch, per_file, a1, a2 = (400, 100, 300, 100, 50) if small else (20000, 1000, 8000, 5000, 2000)
        make = functools.partial(tab_batch, run=50 if small else 500)
        lance.write_dataset(reader(make, 0, n, batch, 1), uri, max_rows_per_file=per_file, **kw)
        ds = lance.write_dataset(pa.Table.from_batches([make(n, a1, 2)]), uri, mode="append", **pages)
        ds.delete("id % 97 = 0" if small else "id % 997 = 0")  # sparse: an Arrow deletion file
        ds.tags.create("pinned", ds.version)
        ds = lance.write_dataset(pa.Table.from_batches([make(n + a1, a2, 3)]), uri, mode="append", **pages)
        if small:
            ds.delete("id >= 160 AND id < 260")
        else:  # dense: over 5,000 rows of one fragment, a roaring bitmap
            ds.delete("(id >= 9000 AND id < 15500) OR (id >= 20500 AND id < 21000)")
    elif case == "dels":  # deletions of both kinds, in a narrow table
        lance.write_dataset(pa.Table.from_batches([small_batch(0, 10400).select(["id"])]), uri, max_rows_per_file=5200, **kw)
        ds = lance.dataset(uri)
        ds.delete("id % 3 = 1 AND id < 5200")  # 1,733 rows of fragment 0: an Arrow file
        ds.delete("id >= 5250 AND id < 10350")  # 5,100 rows of fragment 1: a roaring bitmap
    elif case == "media":
        # small: values over 32 KiB stay (compressed one by one), fewer rows
        n, per_file, a1, batch = (24, 10, 12, 4) if small else (150, 60, 100, 10)
        make = functools.partial(media_batch, small=small, compressed=version != "2.0")
        lance.write_dataset(pa.Table.from_batches([make(0, n, 1)]), uri, max_rows_per_file=per_file, **kw)
        ds = lance.write_dataset(reader(make, n, a1, batch, 2), uri, mode="append", **pages)
        ds.delete("id % 13 = 5")
        ds.tags.create("pinned", ds.version)
    elif case == "nested":
        n, batch, per_file, a1 = (900, 250, 400, 300) if small else (6000, 700, 2500, 3000)
        make = functools.partial(nested_batch, null_structs=version != "2.0")
        lance.write_dataset(reader(make, 0, n, batch, 1), uri, max_rows_per_file=per_file, **kw)
        ds = lance.write_dataset(pa.Table.from_batches([make(n, a1, 2)]), uri, mode="append", **pages)
        ds.delete("id % 10 = 3")
    elif case == "opts":
        # small: 2.1's lz4 from 2,000 rows (2.0 has none)
        n, a1, batch = ((700 if version == "2.0" else 2000), 300, 100) if small else (5000, 3000, 256)
        make = functools.partial(opts_batch, small=small)
        lance.write_dataset(pa.Table.from_batches([make(0, n, 1)]), uri, **kw)
        lance.write_dataset(reader(make, n, a1, batch, 2), uri, mode="append", **pages)
    elif case == "evolve":
        n, per_file, a1, target = (600, 200, 200, 500) if small else (6000, 2000, 1500, 5000)
        # small: the columns the schema's changes touch, and a few others
        make = (lambda *a: tab_batch(*a).select(["id", "label", "cat", "text", "maybe", "pt"])) if small else tab_batch
        lance.write_dataset(reader(make, 0, n, min(n, 1000), 1), uri, max_rows_per_file=per_file, **kw)
        ds = lance.dataset(uri)
        ds.add_columns({"twice": "id * 2", "note": "concat('n', CAST(label AS VARCHAR))"})  # a second data file per fragment
        ds.tags.create("widened", ds.version)
        ds.drop_columns(["text"])
        ds.alter_columns({"path": "cat", "name": "kind"})
        ds = lance.write_dataset(pa.Table.from_batches([make(n, a1, 2)]).drop(["text"]).rename_columns(
            [c if c != "cat" else "kind" for c in make(0, 1, 0).schema.names if c != "text"]).append_column(
            "twice", pa.array([2 * i for i in range(n, n + a1)], pa.int64())).append_column(
            "note", pa.array([None] * a1, pa.string())), uri, mode="append", **pages)
        ds.delete("id % 5 = 0")
        ds.optimize.compact_files(target_rows_per_fragment=target)
    elif case == "tiny":  # small files of every kind of nesting and null
        make = functools.partial(nested_batch, null_structs=version != "2.0")
        lance.write_dataset(pa.Table.from_batches([make(0, 300, 1)]), uri, **kw)
        lance.write_dataset(pa.Table.from_batches([tab_batch(0, 300, 1)]), uri + "-tab", **kw)
    elif case == "train":  # the sidecar tests' stream "p": text "p-<id>" and a heavy column never served
        def train_batch(start: int, n: int) -> pa.RecordBatch:
            ids = list(range(start, start + n))
            return pa.RecordBatch.from_pydict({
                "id": pa.array(ids, pa.int64()), "text": pa.array([f"{text_prefix}-{i}" for i in ids]),
                "pixels": pa.array([bytes([i % 251]) * 4096 for i in ids], pa.binary())})
        lance.write_dataset(pa.Table.from_batches([train_batch(0, 200)]), uri, max_rows_per_file=70, **kw)
        ds = lance.write_dataset(pa.Table.from_batches([train_batch(200, 100)]), uri, mode="append")
        ds.delete("id % 7 = 3")  # sparse: Arrow deletion files
        ds.delete("id >= 210 AND id < 260")  # dense: a roaring bitmap
        ds.tags.create("pinned", ds.version)
    elif case == "train-append":  # the train table moves on
        lance.write_dataset(pa.RecordBatch.from_pydict({
            "id": pa.array(range(300, 400), pa.int64()), "text": pa.array([f"{text_prefix}-{i}" for i in range(300, 400)]),
            "pixels": pa.array([bytes([i % 251]) * 4096 for i in range(300, 400)], pa.binary())}), uri, mode="append")
    elif case == "tokens":  # the first-batch benchmark's: 16,384 rows of 2,048 int32 tokens (128 MiB), as its MDS
        def token_batch(start: int, n: int) -> pa.RecordBatch:
            ids = np.arange(start, start + n, dtype=np.int64)
            toks = (ids[:, None] * 10 + np.arange(2048, dtype=np.int64)[None, :]).astype(np.int32)
            return pa.RecordBatch.from_pydict({"id": pa.array(ids),
                                               "tokens": pa.FixedSizeListArray.from_arrays(pa.array(toks.ravel()), 2048)})
        lance.write_dataset(pa.RecordBatchReader.from_batches(token_batch(0, 1).schema,
                                                              (token_batch(s, 1024) for s in range(0, 16384, 1024))), uri, **kw)
    elif case == "edges":  # values at the edges an independent review found: constants, -0.0, decimals' scales, no list items
        n = 64
        cols = {
            "id": pa.array(range(n), pa.int64()),
            "yes": pa.array([True] * n),  # constant pages
            "no": pa.array([False] * n),
            "zero": pa.array([-0.0 if i % 2 else 0.0 for i in range(n)], pa.float64()),
            "neg": pa.array([-1.5 if i % 3 else -0.0 for i in range(n)], pa.float32()),
            "d10": pa.array([decimal.Decimal(i % 3).scaleb(-10) for i in range(n)], pa.decimal128(38, 10)),
            "d38": pa.array([decimal.Decimal(i % 5).scaleb(-38) for i in range(n)], pa.decimal128(38, 38)),
            "dneg": pa.array([decimal.Decimal(i).scaleb(2) for i in range(n)], pa.decimal128(5, -2)),
            # one value a column, with and without nulls: 2.2 writes constant
            # pages, a string's value in a buffer and nulls as levels
            # (LeRobot's Lance layout: a camera's video_key)
            "key": pa.array(["observation.images.front"] * n),
            "blob1": pa.array([b"\x00\xff"] * n),
            "keynull": pa.array([None if i % 5 == 2 else "k" for i in range(n)]),
            "empty1": pa.array([""] * n),
            "sevens": pa.array([None if i % 4 == 1 else 7 for i in range(n)], pa.int64()),
            "truenull": pa.array([None if i % 3 == 0 else True for i in range(n)]),
            "halfnull": pa.array([None if i % 2 else 1.5 for i in range(n)], pa.float32()),
            "largekey": pa.array(["k" * 40] * n, pa.large_string()),  # a large type's offsets are u64s
            "largeblob": pa.array([None if i % 6 == 0 else b"zz" for i in range(n)], pa.large_binary()),
        }
        if version == "2.0":  # 2.1 and 2.2 write these as constant pages with levels, which shardfeed refuses
            cols["empty"] = pa.array([[]] * n, pa.list_(pa.int32()))
            cols["nolist"] = pa.array([None] * n, pa.list_(pa.int32()))
        lance.write_dataset(pa.table(cols), uri, max_rows_per_file=32, **kw)
    elif case in ("lead-struct", "lead-list"):  # field 0 a struct or a list: its children's parent id, 0, is left out of the manifest
        n = 40
        first = (pa.array([None if i % 7 == 3 else {"a": i, "b": str(i)} for i in range(n)], pa.struct([("a", pa.int64()), ("b", pa.string())]))
                 if case == "lead-struct" else pa.array([None if i % 5 == 1 else list(range(i % 4)) for i in range(n)], pa.list_(pa.int64())))
        tbl = pa.table({case.split("-")[1]: first, "id": pa.array(range(n), pa.int64())})
        if version == "2.0" and case == "lead-struct":  # 2.0 writes no null structs
            tbl = pa.table({"struct": pa.array([{"a": i, "b": str(i)} for i in range(n)], first.type), "id": pa.array(range(n), pa.int64())})
        lance.write_dataset(tbl, uri, max_rows_per_file=16, **kw)
    elif case == "packed":  # a struct stored as one column: refused
        st = pa.struct([("a", pa.int32()), ("b", pa.float64())])
        tbl = pa.Table.from_batches([small_batch(0, 50)]).append_column(
            pa.field("p", st, metadata={"lance-encoding:packed": "true"}), pa.array([{"a": i, "b": i / 2} for i in range(50)], st))
        lance.write_dataset(tbl, uri, **kw)
    elif case == "dict":  # a column of an Arrow dictionary, in 2.0: refused
        tbl = pa.Table.from_batches([small_batch(0, 50)]).append_column(
            "c", pa.array(["lo", "mid", "hi", None, "mid"] * 10).dictionary_encode())
        lance.write_dataset(tbl, uri, **kw)
    elif case == "small":  # the refusals of file versions: legacy, 2.3
        lance.write_dataset(pa.Table.from_batches([small_batch(0, 300)]), uri, **kw)
    elif case == "blobs":  # blob columns: 2.1's v1 (bytes in the data file), 2.2's v2 (inline, packed and dedicated)
        # small: 2.1's files (blobs inside) under the 64 KiB the fuzzers seed with
        n, per_file, a1 = (40, 16 if version == "2.2" else 8, 12) if small else (120, 40, 40)
        lance.write_dataset(blob_table(0, n, version, 1), uri, max_rows_per_file=per_file, **kw)
        ds = lance.dataset(uri)
        ds.delete("id % 7 = 3 OR id = 17")
        ds.tags.create("pinned", ds.version)
        ds = lance.write_dataset(blob_table(n, a1, version, 2), uri, mode="append", **pages)
        ds.delete(f"id = {n + 2}")
    elif case == "blobs-compacted":  # the blobs case, its fragments compacted into one (its blobs rewritten)
        write_case(uri, "blobs", version, small)
        lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
    elif case == "blob-images":  # PNGs in a v2 blob column: pixel (x, y) channel c of row i is (7i + 3x + 5y + c) % 256
        import io
        from PIL import Image
        def png(i: int) -> bytes:
            w, h = 16, 12
            px = bytes((7 * i + 3 * x + 5 * y + c) % 256 for y in range(h) for x in range(w) for c in range(3))
            out = io.BytesIO()
            Image.frombytes("RGB", (w, h), px).save(out, format="PNG", compress_level=(i % 10))
            return out.getvalue()
        n = 300
        tbl = pa.table({"id": pa.array(range(n), pa.int64()), "image": blob_array([Blob.from_bytes(png(i)) for i in range(n)])},
                       schema=pa.schema([pa.field("id", pa.int64()),
                                         blob_field("image", inline_size_threshold=100, dedicated_size_threshold=300)]))
        lance.write_dataset(tbl, uri, max_rows_per_file=120, **kw)
        lance.dataset(uri).delete("id % 9 = 4")
    elif case == "blob-external":  # a v2 blob that names a URI outside the dataset: refused
        tbl = pa.table({"id": pa.array(range(4), pa.int64()),
                        "payload": blob_array([Blob.from_bytes(b"x" * 10), Blob.from_uri("s3://elsewhere/obj", 0, 5),
                                               None, Blob.from_bytes(b"")])},
                       schema=pa.schema([pa.field("id", pa.int64()), blob_field("payload")]))
        lance.write_dataset(tbl, uri, allow_external_blob_outside_bases=True, **kw)
    elif case == "deep":  # a list of structs: nesting two deep
        tbl = pa.Table.from_batches([small_batch(0, 50)]).append_column(
            "points", pa.array([[{"x": i, "y": -i}] * (i % 3) for i in range(50)],
                               pa.list_(pa.struct([("x", pa.int32()), ("y", pa.int32())]))))
        lance.write_dataset(tbl, uri, **kw)
    elif case == "bases":  # data files under a second base path
        other = uri.rstrip("/") + "-bucket2"
        lance.write_dataset(pa.Table.from_batches([small_batch(0, 100)]), uri,
                            initial_bases=[lance.DatasetBasePath(other, name="bucket2")], target_bases=["bucket2"], **kw)
    else:
        raise SystemExit(f"unknown case {case}")
    ds = lance.dataset(uri)
    return {"versions": [v["version"] for v in ds.versions()],
            "tags": {k: v["version"] for k, v in ds.tags.list().items()}, "latest": ds.version}


def plain(v, typ: pa.DataType):
    """A value as testenv.Plain writes it."""
    if v is None:
        return None
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ):
        return v.hex()
    if pa.types.is_decimal(typ):  # every digit of the scale; a negative scale as digits and exponent
        if typ.scale < 0:
            unscaled = int(v.scaleb(typ.scale))
            return f"{unscaled}E+{-typ.scale}"
        return format(v, f".{typ.scale}f")
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return [plain(x, typ.value_type) for x in v]
    if pa.types.is_struct(typ):
        return {f.name: plain(v[f.name], f.type) for f in typ}
    return v


def storage(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Dates and timestamps as the integers they are stored as."""
    if pa.types.is_date32(col.type):
        return pc.cast(col, pa.int32())
    if pa.types.is_timestamp(col.type):
        return pc.cast(col, pa.int64())
    return col


def read(args) -> None:
    for row in rows(args.dir, version=int(args.version) if args.version else None, tag=args.tag,
                    columns=args.columns.split(",") if args.columns else None, filter_=args.filter):
        sys.stdout.write(json.dumps(row, default=str) + "\n")


def read_parquet(args) -> None:
    """The rows of the Parquet files in DIR (a shardfeed convert's output),
    in file order, as read prints a table's (without _rowaddr)."""
    import glob
    import pyarrow.parquet as pq
    for path in sorted(glob.glob(args.dir.rstrip("/") + "/*.parquet")):
        table = pq.read_table(path)
        cols = {name: storage(table.column(name)) for name in table.column_names}
        pylists = {name: c.to_pylist() for name, c in cols.items()}
        for i in range(table.num_rows):
            row = {name: plain(pylists[name][i], cols[name].type) for name in cols}
            sys.stdout.write(json.dumps(row, default=str) + "\n")


def rows(uri: str, version: int | None = None, tag: str | None = None, columns: list[str] | None = None,
         filter_: str | None = None) -> Iterator[dict]:
    """The rows of table uri at a version (default: the latest) or tag, in
    (fragment, offset) order, with "_rowaddr" and each value as
    testenv.Plain writes it."""
    ds = lance.dataset(uri, version=tag or version)
    table = ds.to_table(columns=columns, filter=filter_, with_row_address=True)
    table = table.sort_by("_rowaddr")
    for name in blob_columns(ds):  # the bytes Lance's blob reader gives, not the descriptors
        if name in table.column_names:
            addrs = table.column("_rowaddr").to_pylist()
            files = ds.take_blobs(name, addresses=addrs) if addrs else []
            table = table.set_column(table.column_names.index(name), name,
                                     pa.array([None if f is None else f.readall() for f in files], pa.large_binary()))
    cols = {name: storage(table.column(name)) for name in table.column_names}
    types = {name: c.type for name, c in cols.items()}
    pylists = {name: c.to_pylist() for name, c in cols.items()}
    for i in range(table.num_rows):
        yield {name: plain(pylists[name][i], types[name]) for name in cols}


def blob_descriptors(args) -> None:
    """Prints each live row's blob descriptors as pylance reads them (the
    descriptors, not the bytes): its _rowaddr, column, kind (0 inline, 1
    packed, 2 dedicated, 3 external; v1's are all 0) and size."""
    ds = lance.dataset(args.dir)
    for name in blob_columns(ds):
        table = ds.to_table(columns=[name], with_row_address=True)
        for addr, d in zip(table.column("_rowaddr").to_pylist(), table.column(name).to_pylist()):
            if d is not None:
                sys.stdout.write(json.dumps({"_rowaddr": addr, "column": name, "kind": d.get("kind", 0), "size": d["size"]}) + "\n")


def record(dir_: str) -> None:
    """The golden tests' oracle (sidecar/format/lance/lancetable/
    testdata/golden): each RECORDED case in each file version, written by
    pylance as VERSION/CASE/ (its manifests, data and deletion files), and
    the rows pylance reads of each version the test reads (the latest and
    each tag's) in VERSION/CASE.vN.jsonl, hashed (golden.hashed); the
    blobs case in 2.1 and 2.2; and a small table in each file version
    shardfeed refuses, refused/VERSION/."""
    golden.fresh(dir_)
    cases = {}
    for version in VERSIONS:
        for case in RECORDED:
            uri = os.path.join(dir_, version, case)
            w = write_case(uri, case, version, small=True, v1_names=case == "dels")  # both manifest namings
            shutil.rmtree(os.path.join(uri, "_transactions"), ignore_errors=True)  # the reader never opens them
            reads = sorted({w["latest"], *w["tags"].values()})
            for v in reads:
                golden.write_answers(os.path.join(dir_, version, f"{case}.v{v}.jsonl"), golden.hashed(rows(uri, version=v)))
            cases[f"{version}/{case}"] = {"versions": w["versions"], "tags": w["tags"], "latest": w["latest"], "read": reads}
    for version in ("2.1", "2.2"):  # blob columns: v1 in 2.1, v2 in 2.2
        uri = os.path.join(dir_, version, "blobs")
        w = write_case(uri, "blobs", version, small=True)
        shutil.rmtree(os.path.join(uri, "_transactions"), ignore_errors=True)
        reads = sorted({w["latest"], *w["tags"].values()})
        for v in reads:
            golden.write_answers(os.path.join(dir_, version, f"blobs.v{v}.jsonl"), golden.hashed(rows(uri, version=v)))
        cases[f"{version}/blobs"] = {"versions": w["versions"], "tags": w["tags"], "latest": w["latest"], "read": reads}
    for version in ("2.3", "legacy"):  # the file versions shardfeed refuses, for its refusals and fuzzers
        uri = os.path.join(dir_, "refused", version)
        write_case(uri, "small", version, small=True)
        shutil.rmtree(os.path.join(uri, "_transactions"), ignore_errors=True)
        cases[f"refused/{version}"] = {"rows": 300}
    for case, version in (("packed", "2.2"), ("dict", "2.0")):  # tables shardfeed refuses for what they hold
        uri = os.path.join(dir_, "refused", case)
        w = write_case(uri, case, version, small=True)
        shutil.rmtree(os.path.join(uri, "_transactions"), ignore_errors=True)
        cases[f"refused/{case}"] = {"version": version, "latest": w["latest"]}
    golden.write_manifest(dir_, ["pylance", "pyarrow"], cases)


def cleanup(args) -> None:
    ds = lance.dataset(args.dir)
    for tag in list(ds.tags.list()):
        ds.tags.delete(tag)
    ds.cleanup_old_versions(older_than=datetime.timedelta(0))


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--case", required=True)
    w.add_argument("--version", default="2.2")
    w.add_argument("--v1-names", action="store_true")
    w.add_argument("--text-prefix", default="p", help="the train cases' text: PREFIX-<id>, as the sidecar tests check a stream's")
    r = sub.add_parser("read")
    r.add_argument("dir")
    r.add_argument("--version")
    r.add_argument("--tag")
    r.add_argument("--columns")
    r.add_argument("--filter", help="a Lance SQL filter: only the rows it keeps")
    c = sub.add_parser("cleanup")
    c.add_argument("dir")
    bd = sub.add_parser("blob-descriptors")
    bd.add_argument("dir")
    q = sub.add_parser("read-parquet")
    q.add_argument("dir")
    rec = sub.add_parser("record")
    rec.add_argument("dir")
    args = p.parse_args()
    if args.cmd == "record":
        record(args.dir)
        return
    {"write": write, "read": read, "cleanup": cleanup, "read-parquet": read_parquet, "blob-descriptors": blob_descriptors}[args.cmd](args)


if __name__ == "__main__":
    main()
