"""WebDataset tar shards written and read by webdataset, the WebDataset
project's own package (bin/venv-oracle), for the tests of shardfeed's
webdataset reader (sidecar/format/webdataset): every tar is written here at
test time by webdataset's TarWriter, never vendored.

  webdataset_oracle.py write DIR --tars N --samples K [--case CASE] [--seed S] [--image-bytes B]
      writes DIR/shards-000000.tar … (N tars of K samples each) and prints
      one JSON object: {"tars": [...], "bytes": total, "headers": the
      bytes of every member's headers, "members": [[name,
      header offset, data offset, size], …] of the first tar, as tarfile
      lists them}.
  webdataset_oracle.py energon DIR
      runs Megatron-Energon's `energon prepare` on DIR (all tars in one
      train split, no dataset.yaml): its index (.nv-meta/: .info.json,
      index.sqlite) and a .tar.idx beside each tar, which shardfeed index
      reuses instead of reading the tars.
  webdataset_oracle.py wids DIR
      runs wids' `widsindex create` in DIR on its tars: DIR/shardindex.json
      (each tar's url, sample count, size and md5), which shardfeed index
      reuses instead of reading the tars.
  webdataset_oracle.py read-wids INDEX CACHE
      prints the samples of wids' ShardListDataset over INDEX (its cache in
      CACHE), in order, as read prints them (wids' raw bytes, typed by
      webdataset's default decoders).
  webdataset_oracle.py record DIR
      records the golden tests' oracle (sidecar/format/webdataset/testdata/
      golden): each stream of RECORDED under DIR/NAME/, what
      webdataset.WebDataset reads of its tars in DIR/NAME.jsonl, what
      TarWriter wrote in DIR/NAME.written.json (write's object), and, for
      basic, Energon's and wids' indexes beside copies of its tars
      (DIR/energon/, DIR/wids/, and what wids reads in DIR/wids.jsonl)
      (test/oracle/golden.py).
  webdataset_oracle.py read URL… [--decode]
      prints the samples of the tars as webdataset.WebDataset reads them, one
      JSON object per line, in order: "__key__", each extension's value with
      webdataset's default decoders (txt: text, cls: an integer, json: the
      parsed value) and every other as hex of its bytes. --decode also
      decodes jpg and png members to RGB arrays (webdataset's "rgb8"),
      printed as {"shape": [h, w, 3], "sha256": hex of the pixels}.

Cases:
  basic  a jpg, a json caption, a cls and (most samples) a txt, as
         TarWriter writes them (PAX headers: its mtimes are fractions);
  ustar  keys longer than the 100 bytes of a USTAR name, split into its
         prefix and name fields;
  pax    the same in PAX headers (TarWriter's own);
  gnu    the same in GNU long-name headers;
  gz     basic, gzip-compressed (.tar.gz);
  mixed  basic, with a directory entry, a __meta__ entry, and names of
         several dots ("seg.png") that webdataset keeps or skips.
"""

import argparse
import hashlib
import io
import json
import os
import random
import shutil
import sys
import tarfile
import tempfile
from typing import Iterator

import golden
import numpy as np
import webdataset as wds
from PIL import Image


def jpeg(rng: random.Random, nbytes: int) -> bytes:
    side = max(8, int((nbytes / 1.5) ** 0.5))
    w, h = side + rng.randrange(8), side + rng.randrange(8)
    arr = np.random.default_rng(rng.randrange(1 << 30)).integers(0, 256, (h, w, 3), dtype=np.uint8)
    b = io.BytesIO()
    Image.fromarray(arr).save(b, format="JPEG", quality=90)
    return b.getvalue()


def png(rng: random.Random) -> bytes:
    arr = np.random.default_rng(rng.randrange(1 << 30)).integers(0, 256, (6, 9, 3), dtype=np.uint8)
    b = io.BytesIO()
    Image.fromarray(arr).save(b, format="PNG")
    return b.getvalue()


def write(d: str, tars: int, samples: int, case: str, seed: int, image_bytes: int) -> dict:
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    names, total, headers = [], 0, 0
    fmt = {"gnu": "GNU_FORMAT"}.get(case)
    ext = ".tar.gz" if case == "gz" else ".tar"
    for t in range(tars):
        name = f"shards-{t:06d}{ext}"
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            w = wds.TarWriter(f, compress=case == "gz")
            if fmt or case == "ustar":
                # TarWriter takes a format and does not hand it to tarfile
                # (its tars are PAX, tarfile's default): its stream is
                # reopened in the case's format, its writing unchanged.
                w.tarstream = tarfile.open(fileobj=f, mode="w|", format=getattr(tarfile, fmt or "USTAR_FORMAT"))
                w.mtime = 1_700_000_000
            if case == "mixed":
                ti = tarfile.TarInfo("dir")
                ti.type = tarfile.DIRTYPE
                w.tarstream.addfile(ti)
                meta = b'{"note": "skipped"}'
                ti = tarfile.TarInfo("__meta__")
                ti.size = len(meta)
                w.tarstream.addfile(ti, io.BytesIO(meta))
            for i in range(samples):
                key = f"s{t:04d}{i:05d}"
                if case in ("ustar", "pax", "gnu"):
                    key = f"deep/{'x' * 90}/{key}{'y' * (i % 30)}"
                s = {
                    "__key__": key,
                    "jpg": jpeg(rng, image_bytes),
                    "json": {"caption": f"a picture {t}/{i} ✓", "i": i, "w": [rng.random(), None]},
                    "cls": rng.randrange(1000),
                }
                if i % 5 != 3:
                    s["txt"] = f"text of {key} " * rng.randrange(1, 4)
                if case == "mixed" and i % 2 == 0:
                    s["seg.png"] = png(rng)
                w.write(s)
            w.close()
        names.append(name)
        total += os.path.getsize(path)
        if case != "gz":
            with tarfile.open(path) as tf:
                headers += sum(m.offset_data - m.offset for m in tf.getmembers())
    members = []
    if case != "gz":
        with tarfile.open(os.path.join(d, names[0])) as tf:
            members = [[m.name, m.offset, m.offset_data, m.size] for m in tf.getmembers()]
    return {"tars": names, "bytes": total, "headers": headers, "members": members}


def samples(urls: list[str], decode: bool) -> Iterator[dict]:
    ds = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
    if decode:
        ds = ds.decode("rgb8")
    else:
        ds = ds.decode()
    for s in ds:
        row = {}
        for k, v in s.items():
            if k in ("__url__", "__local_path__"):
                continue
            if isinstance(v, (bytes, bytearray)):
                v = v.hex()
            elif isinstance(v, np.ndarray):
                v = {"shape": list(v.shape), "sha256": hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()}
            row[k] = v
        yield row


def read(urls: list[str], decode: bool) -> None:
    for row in samples(urls, decode):
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")


def energon(d: str) -> None:
    import subprocess
    cli = os.path.join(os.path.dirname(sys.executable), "energon")
    subprocess.run([cli, "prepare", d, "--non-interactive", "--split-ratio", "1,0,0", "--skip-dataset-yaml", "--no-progress"],
                   check=True, stdout=subprocess.DEVNULL)


def wids_index(d: str) -> None:
    import subprocess
    cli = os.path.join(os.path.dirname(sys.executable), "widsindex")
    tars = sorted(n for n in os.listdir(d) if n.endswith(".tar"))
    subprocess.run([cli, "create", *tars, "--output", "shardindex.json"], cwd=d, check=True, stdout=subprocess.DEVNULL)


def typed(ext: str, data: bytes):
    """A member's bytes as webdataset's default decoders give them (the
    extensions these tests write), else hex."""
    if ext == "txt":
        return data.decode("utf-8")
    if ext == "cls":
        return int(data)
    if ext == "json":
        return json.loads(data)
    return data.hex()


def wids_samples(index: str, cache: str) -> Iterator[dict]:
    import wids

    ds = wids.ShardListDataset(index, cache_dir=cache, transformations=[])
    for i in range(len(ds)):
        s = ds[i]
        row = {"__key__": s["__key__"]}
        for k, v in s.items():
            if k.startswith("."):
                row[k[1:]] = typed(k[1:], bytes(v.read() if hasattr(v, "read") else v))
        yield row


def read_wids(index: str, cache: str) -> None:
    for row in wids_samples(index, cache):
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")


# The golden streams: name, case, tars, samples a tar, seed, image bytes.
# Small (the tars are committed): a plain tar is still several 16 KiB
# shards.
RECORDED = [
    ("basic", "basic", 3, 8, 1, 400),
    ("ustar", "ustar", 2, 6, 2, 400),
    ("pax", "pax", 2, 6, 3, 400),
    ("gnu", "gnu", 2, 6, 4, 400),
    ("gz", "gz", 2, 8, 5, 400),
    ("mixed", "mixed", 4, 3, 6, 400),
    ("damaged", "basic", 1, 4, 7, 3000),
]


def record(dir_: str) -> None:
    golden.fresh(dir_)
    cases = {}
    for name, case, tars, n, seed, image_bytes in RECORDED:
        d = os.path.join(dir_, name)
        w = write(d, tars, n, case, seed, image_bytes)
        with open(os.path.join(dir_, name + ".written.json"), "w") as f:
            f.write(golden.line(w) + "\n")
        golden.write_answers(os.path.join(dir_, name + ".jsonl"), samples([os.path.join(d, t) for t in w["tars"]], False))
        cases[name] = {"case": case, "tars": tars, "samples": n}
    # Energon's and wids' indexes of basic's tars, without the tars (the
    # tests lay them over a copy of basic).
    for tool in ("energon", "wids"):
        with tempfile.TemporaryDirectory() as tmp:
            d = os.path.join(tmp, tool)
            shutil.copytree(os.path.join(dir_, "basic"), d)
            (energon if tool == "energon" else wids_index)(d)
            if tool == "wids":
                with tempfile.TemporaryDirectory() as cache:
                    golden.write_answers(os.path.join(dir_, "wids.jsonl"), wids_samples(os.path.join(d, "shardindex.json"), cache))
            shutil.copytree(d, os.path.join(dir_, tool), ignore=shutil.ignore_patterns("*.tar"))
        cases[tool] = {"case": "basic", "index": tool}
    golden.write_manifest(dir_, ["webdataset", "megatron-energon", "wids", "pillow", "numpy"], cases)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--tars", type=int, default=2)
    w.add_argument("--samples", type=int, default=20)
    w.add_argument("--case", default="basic", choices=["basic", "ustar", "pax", "gnu", "gz", "mixed"])
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--image-bytes", type=int, default=3000)
    e = sub.add_parser("energon")
    e.add_argument("dir")
    x = sub.add_parser("wids")
    x.add_argument("dir")
    y = sub.add_parser("read-wids")
    y.add_argument("index")
    y.add_argument("cache")
    rec = sub.add_parser("record")
    rec.add_argument("dir")
    r = sub.add_parser("read")
    r.add_argument("urls", nargs="+")
    r.add_argument("--decode", action="store_true")
    a = ap.parse_args()
    if a.cmd == "write":
        print(json.dumps(write(a.dir, a.tars, a.samples, a.case, a.seed, a.image_bytes)))
    elif a.cmd == "energon":
        energon(a.dir)
    elif a.cmd == "wids":
        wids_index(a.dir)
    elif a.cmd == "read-wids":
        read_wids(a.index, a.cache)
    elif a.cmd == "record":
        record(a.dir)
    else:
        read(a.urls, a.decode)


if __name__ == "__main__":
    main()
