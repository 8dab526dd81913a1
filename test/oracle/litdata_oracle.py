"""LitData optimized datasets written and read by litdata, the Lightning
project's own package (bin/venv-oracle), for the tests of shardfeed's
litdata reader (sidecar/format/litdata): every dataset is written here at
test time by litdata.optimize, never vendored.

  litdata_oracle.py write DIR --case CASE [--items N] [--compression LEVEL]
      writes DIR/index.json and DIR/chunk-*.bin (small chunks: several);
      --compression: zstd, wrapped as LEVEL says (LitData's
      compression_level: chunk, batch or sample).
  litdata_oracle.py record DIR
      records the golden tests' oracle (sidecar/format/litdata/testdata/
      golden): each dataset of RECORDED under DIR/NAME/, and what
      StreamingDataset reads of it in DIR/NAME.jsonl (with a block size,
      DIR/NAME.blockB.jsonl) (test/oracle/golden.py).
  litdata_oracle.py read DIR [--block-size B]
      prints the items of DIR as litdata.StreamingDataset reads them (no
      shuffle), one JSON object per line, in order: bytes as hex, arrays and
      tensors as lists, a decoded JPEG as {"shape": [...]}; with
      --block-size, the blocks of B tokens its TokensLoader(block_size=B)
      reads, each {"value": [...]}.

Cases:
  mixed    ints, floats, strings, bytes, booleans, 1-D numpy int32 and
           uint16 arrays and 1-D torch int64 and float32 tensors;
  strings  dicts of strings and integers only (LitData also appends its
           rows as an Arrow IPC file to each chunk: read from there);
  jpeg     a JPEG image (PIL) and a label;
  arrays   multi-dimensional numpy arrays (LitData's "numpy": a header of
           dtype and shape per item) and torch tensors ("tensor", its
           header big-endian), one shape a column, and a 0-d tensor;
  tokens   documents of int32 tokens of many lengths, written with
           item_loader=TokensLoader() (chunks of raw tokens end to end);
  nested   a dict holding a dict (refused by shardfeed);
  ragged2d 2-D numpy arrays of two shapes in one column (refused).
"""

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Iterator

import golden
import numpy as np
import torch


def item(case: str, i: int):
    if case == "mixed":
        return {"id": i, "name": f"n{i} ✓", "score": i / 4, "blob": bytes([i % 256]) * (i % 5), "ok": i % 2 == 0,
                "tok": np.arange(i % 6, dtype=np.int32), "small": np.arange(3, dtype=np.uint16) + i,
                "t": torch.arange(4, dtype=torch.int64) + i, "f": torch.arange(2, dtype=torch.float32) / (i + 1)}
    if case == "strings":
        return {"text": f"document {i} " * (i % 4 + 1), "lang": ["en", "fr", "de"][i % 3], "n": i}
    if case == "jpeg":
        from PIL import Image
        arr = np.random.default_rng(i).integers(0, 256, (8 + i % 3, 12, 3), dtype=np.uint8)
        b = io.BytesIO()
        Image.fromarray(arr).save(b, format="JPEG")
        b.seek(0)
        return {"image": Image.open(b), "label": i % 7}
    if case == "arrays":
        rng = np.random.default_rng(i)
        return {"id": i, "x": rng.random((2, 3), dtype=np.float32), "m": rng.integers(-9, 9, (3, 2, 2), dtype=np.int16),
                "img": torch.from_numpy(rng.integers(0, 256, (4, 4), dtype=np.uint8)), "t": torch.tensor(i * 1.5, dtype=torch.float64)}
    if case == "tokens":
        rng = np.random.default_rng(i)
        return torch.from_numpy(rng.integers(0, 50000, 1 + (i * 37) % 90, dtype=np.int32))
    if case == "nested":
        return {"a": {"b": i}, "c": i}
    return {"x": np.zeros((2, 3 + i % 2), dtype=np.float32) + i}


def plain(v):
    if isinstance(v, (bytes, memoryview)):
        return bytes(v).hex()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, torch.Tensor):
        if v.dtype == torch.uint8 and v.dim() == 3 and v.shape[0] == 3:
            return {"shape": list(v.shape)}
        return v.tolist()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def write(dir_: str, case: str, items: int, compression: str | None) -> None:
    import litdata as ld
    packed = {"compression": "zstd", "compression_level": compression} if compression else {}
    if case == "tokens":
        ld.optimize(fn=_Fn(case), inputs=list(range(items)), output_dir=dir_, chunk_size=700, num_workers=1,
                    item_loader=ld.TokensLoader(), **packed)
    else:
        ld.optimize(fn=_Fn(case), inputs=list(range(items)), output_dir=dir_, chunk_bytes=900, num_workers=1, **packed)


def items(dir_: str, block_size: int) -> Iterator[Any]:
    import litdata as ld
    if block_size:
        ds = ld.StreamingDataset(dir_, shuffle=False, item_loader=ld.TokensLoader(block_size=block_size))
        for x in ds:
            yield {"value": plain(x)}
        return
    for x in ld.StreamingDataset(dir_, shuffle=False):
        yield plain(x)


# The golden datasets: name, case, items, compression, and the block
# sizes read (0: items, not TokensLoader blocks). nested and ragged2d are
# refused by shardfeed: they have no answers.
RECORDED = [
    ("mixed", "mixed", 60, None, [0]),
    ("strings", "strings", 60, None, [0]),
    ("jpeg", "jpeg", 60, None, [0]),
    ("arrays", "arrays", 60, None, [0]),
    ("tokens", "tokens", 60, None, [64, 300]),
    ("nested", "nested", 8, None, []),
    ("ragged2d", "ragged2d", 8, None, []),
    ("mixed-zstd-chunk", "mixed", 60, "chunk", [0]),
    ("mixed-zstd-batch", "mixed", 60, "batch", [0]),
    ("arrays-zstd-sample", "arrays", 60, "sample", [0]),
    ("tokens-zstd-chunk", "tokens", 60, "chunk", [64]),
]


def record(dir_: str) -> None:
    golden.fresh(dir_)
    cases = {}
    for name, case, n, compression, blocks in RECORDED:
        write(os.path.join(dir_, name), case, n, compression)
        for block in blocks:
            # StreamingDataset inflates a compressed chunk in its folder and
            # keeps a cache: it reads a copy.
            with tempfile.TemporaryDirectory() as tmp:
                copy = os.path.join(tmp, name)
                shutil.copytree(os.path.join(dir_, name), copy)
                answers = os.path.join(dir_, name + (f".block{block}" if block else "") + ".jsonl")
                golden.write_answers(answers, items(copy, block))
        cases[name] = {"case": case, "items": n, "compression": compression, "blocks": blocks}
    golden.write_manifest(dir_, ["litdata", "numpy", "torch", "pillow"], cases)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--case", required=True, choices=["mixed", "strings", "jpeg", "arrays", "tokens", "nested", "ragged2d"])
    w.add_argument("--items", type=int, default=60)
    w.add_argument("--compression", choices=["chunk", "batch", "sample"])
    rec = sub.add_parser("record")
    rec.add_argument("dir")
    r = sub.add_parser("read")
    r.add_argument("dir")
    r.add_argument("--block-size", type=int, default=0)
    a = ap.parse_args()
    if a.cmd == "write":
        write(a.dir, a.case, a.items, a.compression)
        print(json.dumps({"dir": a.dir}))
    elif a.cmd == "record":
        record(a.dir)
    else:
        for x in items(a.dir, a.block_size):
            sys.stdout.write(json.dumps(x, ensure_ascii=False) + "\n")


class _Fn:
    """A picklable fn for optimize's worker."""

    def __init__(self, case: str) -> None:
        self.case = case

    def __call__(self, i: int):
        return item(self.case, i)


if __name__ == "__main__":
    main()
