"""The benchmark's data sets, generated here (no downloads), each written in
every tool's own format: Parquet (pyarrow; what Ray Data and
torch-dataloader-utils read), MDS (written by `shardfeed convert`,
byte-compatible with mosaicml-streaming's MDSWriter and read by
StreamingDataset as its own), a Lance table (lancedb), and LitData's chunks
(litdata.optimize). Runs in bin/venv-oracle (it has pyarrow, lancedb,
mosaicml-streaming, litdata and Pillow).

  datasets.py OUT KIND SCALE        write KIND (tokens|images|tabular) at SCALE into OUT

Kinds, at SCALE 1 (about 1 GB each; BENCH_SCALE=full is 4):
  tokens   131 072 samples of int32 × 2048 (8 KiB) and an id            1.07 GB
  images   10 240 samples of JPEG bytes (about 100 KB) a label and an id 1.0 GB
  tabular  4 194 304 rows of 20 mixed columns (ints, floats, strings,
           a float32 × 16 embedding), about 250 bytes a row              1.0 GB

A data set is written once into OUT/KIND-SCALE and reused while this file is
unchanged (the directory's .complete holds the file's digest).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
SHARDFEED = ROOT / "bin" / "shardfeed"
TOKEN_WIDTH = 2048
EMBED = 16
# Rows per Parquet row group and MDS shard size: shards of 8 MiB, row groups
# of a few MiB, so every tool reads a shuffled epoch from many pieces.
ROW_GROUP = {"tokens": 1024, "images": 64, "tabular": 32768}
SAMPLES = {"tokens": 131072, "images": 10240, "tabular": 4194304}


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def tokens(n: int, rng: np.random.Generator) -> pa.Table:
    values = rng.integers(0, 50000, size=n * TOKEN_WIDTH, dtype=np.int32)
    return pa.table({"id": np.arange(n, dtype=np.int64),
                     "tokens": pa.FixedSizeListArray.from_arrays(pa.array(values), TOKEN_WIDTH)})


def jpegs(count: int, rng: np.random.Generator) -> list[bytes]:
    """Real JPEG files of about 100 KB: smooth gradients plus noise, so
    they compress as photographs do."""
    from PIL import Image

    out = []
    y, x = np.mgrid[0:360, 0:448]
    for i in range(count):
        base = np.stack([(x + 17 * i) % 256, (y * 2 + 31 * i) % 256, (x + y + 7 * i) % 256], axis=-1)
        noisy = np.clip(base + rng.normal(0, 28, size=base.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(noisy).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def images(n: int, rng: np.random.Generator) -> pa.Table:
    """n JPEG samples: one of 64 distinct images, each made unique by the
    sample's id after the JPEG's end marker (decoders ignore trailing bytes)."""
    base = jpegs(64, rng)
    blobs = [base[i % len(base)] + i.to_bytes(8, "little") for i in range(n)]
    return pa.table({"id": np.arange(n, dtype=np.int64), "image": pa.array(blobs, pa.binary()),
                     "label": rng.integers(0, 1000, size=n, dtype=np.int32)})


def tabular(n: int, rng: np.random.Generator) -> pa.Table:
    """20 columns of the kinds a tabular or recommendation model reads."""
    cats = np.array([f"category-{i:04d}" for i in range(2000)])
    words = np.array(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"])
    text_idx = rng.integers(0, len(words), size=(n, 6))
    text = np.char.add(np.char.add(words[text_idx[:, 0]], " "), words[text_idx[:, 1]])
    for j in range(2, 6):
        text = np.char.add(np.char.add(text, " "), words[text_idx[:, j]])
    cols = {
        "id": np.arange(n, dtype=np.int64),
        "label": rng.integers(0, 2, size=n, dtype=np.int64),
        "i8": rng.integers(-128, 127, size=n, dtype=np.int8),
        "u8": rng.integers(0, 255, size=n, dtype=np.uint8),
    }
    for j in range(3):
        cols[f"i32_{j}"] = rng.integers(0, 1 << 30, size=n, dtype=np.int32)
    for j in range(2):
        cols[f"i64_{j}"] = rng.integers(0, 1 << 62, size=n, dtype=np.int64)
    cols["f16"] = rng.standard_normal(n).astype(np.float16)
    for j in range(4):
        cols[f"f32_{j}"] = rng.standard_normal(n).astype(np.float32)
    for j in range(2):
        cols[f"f64_{j}"] = rng.standard_normal(n)
    cols["category"] = pa.array(cats[rng.integers(0, len(cats), size=n)])
    cols["text"] = pa.array(text)
    cols["code"] = pa.array(np.char.mod("%08x", rng.integers(0, 1 << 31, size=n)))
    cols["embedding"] = pa.FixedSizeListArray.from_arrays(pa.array(rng.standard_normal(n * EMBED).astype(np.float32)), EMBED)
    table = pa.table(cols)
    assert table.num_columns == 20, table.num_columns
    return table


MAKERS = {"tokens": tokens, "images": images, "tabular": tabular}


def convert_mds(parquet_dir: Path, out: Path) -> None:
    """MDS shards of 8 MiB. `shardfeed convert` writes in seconds what
    MDSWriter's loop per sample writes in minutes; the files are the same
    format (docs/formats.md: checked both ways against mosaicml-streaming)."""
    done = subprocess.run([str(SHARDFEED), "convert", f"file://{parquet_dir}/", "--from", "parquet", "--to", "mds",
                           "--out", f"file://{out}/", "--shard-size", "8MiB"], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"shardfeed convert failed:\n{done.stderr}")


class LitdataRows:
    """LitData's optimize function: the rows of one Parquet row group, as
    the dicts it serialises (arrays for fixed-size lists)."""

    def __init__(self, source: str):
        self.source = source

    def __call__(self, group: int):
        table = pq.ParquetFile(self.source).read_row_group(group)
        cols = {}
        for name, col in zip(table.column_names, table.columns):
            col = col.combine_chunks()
            if pa.types.is_fixed_size_list(col.type):
                cols[name] = col.values.to_numpy().reshape(len(col), -1)
            elif pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
                cols[name] = col.to_numpy().tolist()
            else:
                cols[name] = col.to_pylist()
        for i in range(table.num_rows):
            yield {name: values[i] for name, values in cols.items()}


def write_litdata(parquet: Path, out: Path) -> None:
    """LitData's chunks of 8 MB, from the Parquet file's row groups, with
    litdata.optimize as its docs show."""
    import litdata

    source = str(parquet / "part-00000.parquet")
    litdata.optimize(fn=LitdataRows(source), inputs=list(range(pq.ParquetFile(source).num_row_groups)),
                     output_dir=str(out), chunk_bytes="8MB", num_workers=os.cpu_count() or 1, mode="overwrite")


def digest() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def write(out: Path, kind: str, scale: float) -> Path:
    """The directory of KIND at SCALE, written if missing or stale: parquet/,
    mds/, lance/ and meta.json (rows, bytes of each format)."""
    target = out / f"{kind}-{scale:g}"
    done = target / ".complete"
    if done.exists() and done.read_text() == digest():
        return target
    if not SHARDFEED.exists():
        raise SystemExit(f"{SHARDFEED} is missing: run make build")
    subprocess.run(["rm", "-rf", str(target)], check=True)
    (target / "parquet").mkdir(parents=True)
    n = int(SAMPLES[kind] * scale)
    start = time.monotonic()
    log(f"generating {kind}: {n:,} samples")
    table = MAKERS[kind](n, np.random.default_rng(7))
    pq.write_table(table, target / "parquet" / "part-00000.parquet", row_group_size=ROW_GROUP[kind], compression="none")
    log(f"{kind}: Parquet in {time.monotonic() - start:.0f} s; writing MDS")
    convert_mds(target / "parquet", target / "mds")
    log(f"{kind}: MDS in {time.monotonic() - start:.0f} s; writing Lance")
    import lancedb

    lancedb.connect(str(target / "lance")).create_table(kind, table, mode="overwrite")
    log(f"{kind}: Lance in {time.monotonic() - start:.0f} s; writing LitData")
    write_litdata(target / "parquet", target / "litdata")
    sizes = {f: sum(p.stat().st_size for p in (target / f).rglob("*") if p.is_file()) for f in ("parquet", "mds", "lance", "litdata")}
    meta = {"kind": kind, "scale": scale, "rows": n, "bytes": sizes, "columns": table.schema.names}
    (target / "meta.json").write_text(json.dumps(meta, indent=1))
    done.write_text(digest())
    log(f"{kind}: {n:,} samples, {sizes['mds'] / 1e9:.2f} GB of MDS, in {time.monotonic() - start:.0f} s")
    return target


def main() -> None:
    if len(sys.argv) != 4 or sys.argv[2] not in MAKERS:
        raise SystemExit(__doc__)
    os.environ.setdefault("LANCE_LOG", "error")
    print(write(Path(sys.argv[1]).resolve(), sys.argv[2], float(sys.argv[3])))


if __name__ == "__main__":
    main()
