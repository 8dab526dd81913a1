"""Hugging Face datasets written and read by datasets, the Hugging Face
project's own package (bin/venv-hf), for the tests of shardfeed's
huggingface reader (sidecar/format/huggingface): every dataset is written
here at test time, never vendored.

  hf_oracle.py write DIR --case CASE [--rows N]
      writes a dataset under DIR and prints one JSON object: {"stream": the
      directory of the stream's Arrow files, "files": N}.
  hf_oracle.py record DIR
      records the golden tests' oracle (sidecar/format/huggingface/
      testdata/golden): each case's stream folders copied out of datasets'
      caches under DIR/CASE/ (what write printed, relative to it, in
      DIR/CASE.written.json), and what datasets reads of each stream or
      split in DIR/CASE.jsonl or DIR/CASE-SPLIT.jsonl (test/oracle/golden.py).
  hf_oracle.py read DIR [--file NAME]
      prints the rows of the dataset datasets.load_from_disk(DIR) reads (or,
      with --file, Dataset.from_file of a cache file), one JSON object per
      line, in order, each value as pyarrow gives it (binary as hex).

Cases:
  disk   save_to_disk of text (some null), a ClassLabel, a list of int32, a
         float32, a struct, and an Image feature (PNG bytes), in 3 files of
         record batches of 64 rows;
  dict   a DatasetDict of train and test splits: the stream is DIR/train
         ("dict" is the DatasetDict's own folder, "split" its train split);
  cache  the datasets cache of Dataset.from_generator (cache_dir=DIR):
         the stream is the cache directory of its generator-train.arrow;
  builder
         the datasets cache of load_dataset("parquet") over a train and a
         test file: one folder of parquet-train.arrow and
         parquet-test.arrow ("file" the train one, "test_file" the other).

The output also has "dict" (a DatasetDict's folder) and "test_file" where
the case has them.
"""

import argparse
import glob
import io
import json
import os
import shutil
import struct
import sys
import tempfile
import zlib
from typing import Any, Iterator

import datasets
import golden
from datasets import ClassLabel, Dataset, DatasetDict, Features, Image, Sequence, Value


def png(i: int) -> bytes:
    """A 2×2 grey PNG whose first pixel is i: written without Pillow."""
    raw = b"".join(b"\x00" + bytes([i % 256, 7]) for _ in range(2))

    def chunk(t: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


FEATURES = Features({
    "text": Value("string"),
    "label": ClassLabel(names=["cat", "dog", "bird"]),
    "ids": Sequence(Value("int32")),
    "score": Value("float32"),
    "meta": {"source": Value("string"), "n": Value("int64")},
    "image": Image(),
})


def rows(n: int, base: int = 0):
    for i in range(base, base + n):
        yield {
            "text": None if i % 11 == 4 else f"row {i} ✓",
            "label": i % 3,
            "ids": list(range(i % 7)),
            "score": i / 8,
            "meta": {"source": f"s{i % 5}", "n": i * 3},
            "image": {"bytes": png(i), "path": None},
        }


def write(d: str, case: str, n: int) -> dict:
    if case == "cache":
        ds = Dataset.from_generator(rows, gen_kwargs={"n": n}, features=FEATURES, cache_dir=d, writer_batch_size=64)
        path = ds.cache_files[0]["filename"]
        return {"stream": os.path.dirname(path), "file": os.path.basename(path), "files": 1}
    ds = Dataset.from_generator(rows, gen_kwargs={"n": n}, features=FEATURES, cache_dir=os.path.join(d, ".gen"), writer_batch_size=64)
    if case == "builder":
        test = Dataset.from_generator(rows, gen_kwargs={"n": n // 4, "base": 10_000}, features=FEATURES, cache_dir=os.path.join(d, ".gen2"))
        src = os.path.join(d, "src")
        os.makedirs(src)
        ds.to_parquet(os.path.join(src, "train.parquet"))
        test.to_parquet(os.path.join(src, "test.parquet"))
        built = datasets.load_dataset("parquet", data_files={"train": os.path.join(src, "train.parquet"), "test": os.path.join(src, "test.parquet")},
                                      features=FEATURES, cache_dir=os.path.join(d, "cache"))
        train, test_path = built["train"].cache_files[0]["filename"], built["test"].cache_files[0]["filename"]
        return {"stream": os.path.dirname(train), "file": os.path.basename(train), "test_file": os.path.basename(test_path), "files": 1}
    if case == "dict":
        test = Dataset.from_generator(rows, gen_kwargs={"n": n // 4, "base": 10_000}, features=FEATURES, cache_dir=os.path.join(d, ".gen2"))
        DatasetDict({"train": ds, "test": test}).save_to_disk(os.path.join(d, "out"), num_shards={"train": 2, "test": 1})
        stream = os.path.join(d, "out", "train")
        return {"stream": stream, "dict": os.path.join(d, "out"), "files": len(glob.glob(os.path.join(stream, "*.arrow")))}
    else:
        ds.save_to_disk(os.path.join(d, "out"), num_shards=3)
        stream = os.path.join(d, "out")
    return {"stream": stream, "files": len(glob.glob(os.path.join(stream, "*.arrow")))}


def plain(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def read_rows(d: str, file: str | None) -> Iterator[Any]:
    ds = Dataset.from_file(os.path.join(d, file)) if file else datasets.load_from_disk(d)
    for table in ds.with_format("arrow").iter(batch_size=100):
        for row in table.to_pylist():
            yield plain(row)


def read(d: str, file: str | None) -> None:
    for row in read_rows(d, file):
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")


def record(dir_: str) -> None:
    golden.fresh(dir_)
    cases = {}
    # Rows a case: save_to_disk writes record batches of 100 rows (its
    # size for image features), and each file should hold two.
    for case, n in (("disk", 450), ("dict", 300), ("cache", 200), ("builder", 300)):
        with tempfile.TemporaryDirectory() as tmp:
            w = write(tmp, case, n)
            # The stream's folder (for a DatasetDict, the dict's own)
            # copied out of the caches, without datasets' lock files.
            top = w.get("dict", w["stream"])
            shutil.copytree(top, os.path.join(dir_, case), ignore=shutil.ignore_patterns("*.lock"))
            if "dict" in w:
                w["stream"] = os.path.join(case, os.path.relpath(w["stream"], top))
                w["dict"] = case
            else:
                w["stream"] = case
            copy = os.path.join(dir_, case)
            if case == "dict":
                for split in ("train", "test"):
                    golden.write_answers(os.path.join(dir_, f"{case}-{split}.jsonl"), read_rows(os.path.join(copy, split), None))
            elif case == "builder":
                golden.write_answers(os.path.join(dir_, f"{case}-train.jsonl"), read_rows(copy, w["file"]))
                golden.write_answers(os.path.join(dir_, f"{case}-test.jsonl"), read_rows(copy, w["test_file"]))
            else:
                golden.write_answers(os.path.join(dir_, f"{case}.jsonl"), read_rows(copy, w.get("file")))
        with open(os.path.join(dir_, case + ".written.json"), "w") as f:
            f.write(golden.line(w) + "\n")
        cases[case] = {"rows": n}
    golden.write_manifest(dir_, ["datasets", "pyarrow"], cases)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--case", required=True, choices=["disk", "dict", "cache", "builder"])
    w.add_argument("--rows", type=int, default=700)
    rec = sub.add_parser("record")
    rec.add_argument("dir")
    r = sub.add_parser("read")
    r.add_argument("dir")
    r.add_argument("--file")
    a = ap.parse_args()
    datasets.disable_progress_bars()
    if a.cmd == "write":
        print(json.dumps(write(a.dir, a.case, a.rows)))
    elif a.cmd == "record":
        record(a.dir)
    else:
        read(a.dir, a.file)


if __name__ == "__main__":
    main()
