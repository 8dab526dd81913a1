"""The MosaicML Streaming side of shardfeed's MDS compatibility tests.

Runs in bin/venv-oracle (hack/requirements-oracle.txt), which has the real
mosaicml-streaming package from PyPI.

  mds_oracle.py write OUT --columns "name=enc;..." --samples N [--compression zstd:7]
                [--hashes sha1,xxh64] [--size-limit BYTES] [--seed S]
      writes a dataset with streaming.MDSWriter and prints every sample, as
      MDS stores it, one JSON object per line (see canonical()).
  mds_oracle.py read DIR...
      reads each dataset with streaming.StreamingDataset and prints its
      samples the same way; with several, each one's samples end with a
      line {"__end__": DIR}.
  mds_oracle.py record DIR
      records the golden tests' oracle (sidecar/format/mds/testdata/golden):
      each dataset of RECORDED written by MDSWriter under DIR/NAME/, and
      every sample as MDS stores it in DIR/NAME.jsonl (test/oracle/golden.py).

Canonical values: integers and strings as JSON; floats as JSON numbers
(float16 and float32 widened exactly); str_decimal as its text; json as the
parsed value; bytes as {"b64": ...}; an image as {"b64": the bytes MDS stores
for it} when writing, {"mode", "size", "b64": raw pixels} when reading; an
ndarray as {"dtype", "shape", "b64": little-endian values}; lists as lists.
"""

import argparse
import base64
import fcntl
import io
import json
import os
import random
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import golden
import numpy as np
from PIL import Image
from streaming import MDSWriter, StreamingDataset
from streaming.base.format.mds.encodings import mds_encode

IMAGE_ENCODINGS = {"pil", "jpeg", "png"}
LIST_IMAGE_ENCODINGS = {"list[pil]": "pil", "list[jpeg]": "jpeg", "list[png]": "png"}
SCALARS = {
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "float16": np.float16, "float32": np.float32, "float64": np.float64,
}


def b64(data: bytes) -> dict:
    return {"b64": base64.b64encode(data).decode()}


def image(rng: random.Random) -> Image.Image:
    w, h = rng.randint(1, 9), rng.randint(1, 9)
    pixels = bytes(rng.randrange(256) for _ in range(w * h * 3))
    return Image.frombytes("RGB", (w, h), pixels)


def make_value(enc: str, rng: random.Random):
    base = enc.split(":")[0]
    if base == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
    if base == "str":
        return "".join(rng.choice("abc xyzé漢\n") for _ in range(rng.randint(0, 20)))
    if base == "int":
        return rng.randint(-(2**63), 2**63 - 1)
    if base in SCALARS:
        t = SCALARS[base]
        if base.startswith("float"):
            return t(rng.uniform(-1000, 1000))
        info = np.iinfo(t)
        return t(rng.randint(int(info.min), int(info.max)))
    if base == "str_int":
        return rng.randint(-(2**62), 2**62)
    if base == "str_float":
        return rng.choice([rng.uniform(-1e6, 1e6), 1e300, -0.0, 5e-324])
    if base == "str_decimal":
        return Decimal(f"{rng.randint(-10**9, 10**9)}.{rng.randint(0, 10**6):06d}")
    if base == "json":
        return {"k": rng.randint(0, 100), "l": [rng.random(), None, "s"], "nested": {"t": True}}
    if base in IMAGE_ENCODINGS:
        return image(rng)
    if base in LIST_IMAGE_ENCODINGS:
        return [image(rng) for _ in range(rng.randint(1, 3))]
    if base in ("jpeg_array", "jpegarray"):
        return [mds_encode("jpeg", image(rng)) for _ in range(rng.randint(1, 3))]
    if base == "ndarray":
        parts = enc.split(":")
        dtype = parts[1] if len(parts) > 1 else rng.choice(["uint8", "int16", "float32", "int64", "float16"])
        if len(parts) > 2:
            shape = tuple(int(d) for d in parts[2].split(","))
        else:
            shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(1, 3)))
        values = np.array([rng.uniform(0, 100) for _ in range(int(np.prod(shape)))]).astype(dtype)
        return values.reshape(shape)
    raise SystemExit(f"unknown encoding {enc}")


def canonical(enc: str, value, written: bool):
    base = enc.split(":")[0]
    if base == "bytes":
        return b64(value)
    if base in ("str", "str_int"):
        return value
    if base == "int":
        return int(value)
    if base in SCALARS:
        return value.item()
    if base == "str_float":
        return float(value)
    if base == "str_decimal":
        return str(value)
    if base == "json":
        return value
    if base in IMAGE_ENCODINGS:
        return b64(mds_encode(base, value)) if written else pixels(value)
    if base in LIST_IMAGE_ENCODINGS:
        inner = LIST_IMAGE_ENCODINGS[base]
        return [b64(mds_encode(inner, v)) if written else pixels(v) for v in value]
    if base in ("jpeg_array", "jpegarray"):
        return [b64(v) for v in value] if written else [pixels(v) for v in value]
    if base == "ndarray":
        return {"dtype": value.dtype.name, "shape": list(value.shape), **b64(value.astype(value.dtype.newbyteorder("<")).tobytes())}
    raise SystemExit(f"unknown encoding {enc}")


def pixels(img: Image.Image) -> dict:
    return {"mode": img.mode, "size": list(img.size), **b64(img.tobytes())}


def written(out: str, columns_: str, samples: int, compression: str | None, hashes: str | None, size_limit: int,
            seed: int) -> Iterator[dict]:
    """Writes a dataset with MDSWriter and yields each sample as MDS stores it."""
    columns = dict(c.split("=", 1) for c in columns_.split(";"))
    rng = random.Random(seed)
    kwargs: dict[str, Any] = {"out": out, "columns": columns, "size_limit": size_limit}
    if compression:
        kwargs["compression"] = compression
    if hashes:
        kwargs["hashes"] = hashes.split(",")
    with MDSWriter(**kwargs) as w:
        for _ in range(samples):
            sample = {name: make_value(enc, rng) for name, enc in columns.items()}
            w.write(sample)
            yield {name: canonical(enc, sample[name], True) for name, enc in columns.items()}


def write(args) -> None:
    for row in written(args.out, args.columns, args.samples, args.compression, args.hashes, args.size_limit, args.seed):
        print(json.dumps(row))


# Every encoding MDS has, in one dataset.
ALL_ENCODINGS = ("b=bytes;s=str;i=int;u8=uint8;u16=uint16;u32=uint32;u64=uint64;i8=int8;i16=int16;i32=int32;i64=int64;"
                 "f16=float16;f32=float32;f64=float64;si=str_int;sf=str_float;sd=str_decimal;j=json;img=jpeg;pn=png;p=pil;"
                 "lj=list[jpeg];lp=list[png];lpil=list[pil];ja=jpeg_array;tok=ndarray:int32:8;mat=ndarray:float16:2,3;dyn=ndarray:uint16;any=ndarray")

# The golden datasets: name, compression, hashes, shard size limit. Each
# holds every encoding (ALL_ENCODINGS), 12 samples.
RECORDED = [
    ("raw", None, "md5,sha1,sha256,xxh3_64,xxh64", 1 << 26),
    ("zstd7", "zstd:7", "xxh64", 2048),
    ("gz", "gz", "sha256", 1 << 26),
    ("bz2", "bz2", None, 4096),
    ("br5", "br:5", None, 1 << 26),
    ("snappy", "snappy", "xxh3_64", 3000),
]


def record(dir_: str) -> None:
    golden.fresh(dir_)
    cases = {}
    for seed, (name, compression, hashes, limit) in enumerate(RECORDED):
        rows = written(os.path.join(dir_, name), ALL_ENCODINGS, 12, compression, hashes, limit, seed)
        golden.write_answers(os.path.join(dir_, name + ".jsonl"), list(rows))
        cases[name] = {"compression": compression, "hashes": hashes, "size_limit": limit, "seed": seed}
    golden.write_manifest(dir_, ["mosaicml-streaming", "pillow", "numpy"], {"columns": ALL_ENCODINGS, "datasets": cases})


def read(args) -> None:
    for d in args.dirs:
        with open(f"{d}/index.json") as f:
            shard = json.load(f)["shards"][0]
        columns = dict(zip(shard["column_names"], shard["column_encodings"]))
        # StreamingDataset names its shared memory after the first free prefix
        # it finds in /dev/shm; two processes starting at once can pick the same
        # one (FileExistsError). The tests run oracles side by side, so readers
        # take turns, machine-wide.
        with open(Path(__file__).resolve().parents[2] / "bin" / ".mds-oracle-read.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            ds = StreamingDataset(local=d, shuffle=False, batch_size=1)
            for i in range(len(ds)):
                sample = ds[i]
                print(json.dumps({name: canonical(enc, sample[name], False) for name, enc in columns.items()}))
            del ds
        if len(args.dirs) > 1:
            print(json.dumps({"__end__": d}))


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--columns", required=True)
    w.add_argument("--samples", type=int, default=50)
    w.add_argument("--compression")
    w.add_argument("--hashes")
    w.add_argument("--size-limit", type=int, default=1 << 26)
    w.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("read")
    r.add_argument("dirs", nargs="+")
    rec = sub.add_parser("record")
    rec.add_argument("dir")
    args = p.parse_args()
    if args.cmd == "record":
        record(args.dir)
    else:
        {"write": write, "read": read}[args.cmd](args)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
