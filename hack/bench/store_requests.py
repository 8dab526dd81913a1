"""Requests and time per epoch from a store with a cloud's latency: the
same small objects read by shardfeed, mosaicml-streaming and LitData from
MinIO behind the latency proxy (hack/latencyproxy: DELAY before each
request), the proxy's counts of each loader's requests, not its own.

  hack/minio.sh -- bin/venv-oracle/bin/python hack/bench/store_requests.py --proxy bin/latencyproxy [--out bin/bench/requests.json]

Data: 8192 samples of int32 × 2048 (8 KiB) and an id, 64 MiB.

- Many small objects: MDSWriter's shards of at most 64 KiB (seven samples
  each, about 1200 objects), read by shardfeed (`FeedDataset.from_manifest` of from_uri's manifest) and
  mosaicml-streaming (`StreamingDataset(remote=…)`), both from MDS's own
  index.json; LitData reads the same
  samples written by `litdata.optimize` in chunks of 64 KB. One shuffled
  epoch at one rank, each loader in a process of its own with an empty
  cache, at its defaults.
- Many small ranges of one object: the samples as one Parquet file of row
  groups of 8 rows (1024 row groups, each a shard; its index written
  beforehand, not through the proxy), read by shardfeed in
  order and shuffled: its ranges of one object that follow each other come
  in one ranged GET (docs/sidecar.md), so the requests are fewer than the
  shards. The peers do not read Parquet.

Each row: the proxy's requests (GETs, ranged GETs, HEADs, lists), the
bytes it passed, the time from the loader's constructor to its first
batch and to its last. A loader whose epoch passes ONCE seconds is
measured once. A loader whose requests wait in turn takes about
requests × DELAY; one that keeps many in flight, bytes / bandwidth.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SAMPLES, WIDTH, BATCH = 8192, 2048, 64
PREFIX = "bench-requests/"
DELAY = "30ms"
SHARD_BYTES = 64 << 10
ROW_GROUP = 8
# A loader whose epoch through the proxy takes longer than this (the
# peers': about 80 s, one request at a time) is measured once: its
# requests are its design's and its time their delays' (over three runs
# in earlier runs, under 1 % apart), and three of them were 8 of make
# bench's minutes.
ONCE = 60.0
# The shardfeed command measured (another build's, to compare).
SHARDFEED = os.environ.get("BENCH_SHARDFEED", str(ROOT / "bin" / "shardfeed"))


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def s3(endpoint: str | None = None):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint or os.environ["SHARDFEED_S3_ENDPOINT"])


def bucket() -> str:
    return os.environ["SHARDFEED_S3_BUCKET"]


def tokens(i: int) -> np.ndarray:
    return np.random.default_rng(i).integers(0, 50000, WIDTH, dtype=np.int32)


def litdata_sample(i: int) -> dict:
    """Sample i, for litdata.optimize."""
    return {"id": i, "tokens": tokens(i)}


def upload(local: Path, prefix: str) -> int:
    """Uploads the files under local to prefix; their count."""
    client = s3()
    files = sorted(f for f in local.rglob("*") if f.is_file())
    for f in files:
        client.upload_file(str(f), bucket(), prefix + f.relative_to(local).as_posix())
    return len(files)


def write(work: Path) -> dict:
    """Writes the three layouts and uploads them; their object counts."""
    import litdata
    import pyarrow as pa
    import pyarrow.parquet as pq
    from streaming import MDSWriter

    mds = work / "mds"
    with MDSWriter(out=str(mds), columns={"id": "int64", "tokens": f"ndarray:int32:{WIDTH}"}, size_limit=SHARD_BYTES) as w:
        for i in range(SAMPLES):
            w.write({"id": i, "tokens": tokens(i)})
    lit = work / "litdata"
    saved = tempfile.tempdir
    tempfile.tempdir = str(work)  # optimize's work lists: this run's
    try:
        litdata.optimize(fn=litdata_sample, inputs=list(range(SAMPLES)), output_dir=str(lit), chunk_bytes="64KB", num_workers=1)
    finally:
        tempfile.tempdir = saved
    pqdir = work / "parquet"
    pqdir.mkdir()
    table = pa.table({"id": pa.array(range(SAMPLES), pa.int64()),
                      "tokens": pa.array([tokens(i) for i in range(SAMPLES)], pa.list_(pa.int32()))})
    pq.write_table(table, pqdir / "part-0.parquet", row_group_size=ROW_GROUP, compression="none")
    objects = {"mds": upload(mds, PREFIX + "mds/"), "litdata": upload(lit, PREFIX + "litdata/"),
               "parquet": upload(pqdir, PREFIX + "parquet/")}
    objects["mdsShards"] = len(json.loads((mds / "index.json").read_text())["shards"])
    objects["litdataChunks"] = len(list(lit.glob("chunk-*.bin")))
    objects["parquetRowGroups"] = pq.ParquetFile(pqdir / "part-0.parquet").num_row_groups
    objects["parquetBytes"] = (pqdir / "part-0.parquet").stat().st_size
    return objects


@contextlib.contextmanager
def proxy(binary: str, counts: dict) -> Iterator[str]:
    """MinIO behind the latency proxy: yields its URL; counts gets the
    requests it passed, once it stops."""
    upstream = os.environ["SHARDFEED_S3_ENDPOINT"].removeprefix("http://").rstrip("/")
    p = subprocess.Popen([binary, "--upstream", upstream, "--delay", DELAY], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"{binary} exited before it listened (status {p.wait()})")
        yield json.loads(line)["url"]
    finally:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        if out.strip():
            counts.update(json.loads(out.strip().splitlines()[-1]))


def epoch_of(make, count) -> dict:
    """Reads one epoch of the loader make() builds: the times from the
    constructor to the first batch and to the last, and the samples."""
    start = time.monotonic()
    loader = make()
    n, first = 0, None
    for b in loader:
        if first is None:
            first = time.monotonic() - start
        n += count(b)
    return {"samples": n, "first": first, "epoch": time.monotonic() - start}


def run_shardfeed(url: str, work: str, layout: str, shuffle: bool) -> dict:
    sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
    import shardfeed
    from shardfeed._commands import dataset_manifest, to_yaml

    os.environ["SHARDFEED_BINARY"] = SHARDFEED
    fmt = "mds" if layout == "mds" else "parquet"
    # from_uri's manifest, in order where asked (its default shuffles).
    m = dataset_manifest(f"s3://{bucket()}/{PREFIX}{layout}/", batch_size=BATCH, format=fmt, endpoint=url, insecure=True,
                         shuffle_seed=1, binary=SHARDFEED)
    if not shuffle:
        m["spec"]["shuffle"] = {"enabled": False}
    manifest = Path(work) / "dataset.yaml"
    manifest.write_text(to_yaml(m) + "\n")
    return epoch_of(lambda: shardfeed.FeedDataset.from_manifest(manifest, directory=work, fresh=True, rank=0, world_size=1),
                    lambda b: len(b["id"]))


def run_mosaic(url: str, work: str, layout: str, shuffle: bool) -> dict:
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    os.environ["S3_ENDPOINT_URL"] = url
    return epoch_of(lambda: torch.utils.data.DataLoader(StreamingDataset(
        remote=f"s3://{bucket()}/{PREFIX}mds/", local=f"{work}/local", batch_size=BATCH, shuffle=shuffle, shuffle_seed=1),
        batch_size=BATCH), lambda b: len(b["id"]))


def run_litdata(url: str, work: str, layout: str, shuffle: bool) -> dict:
    import litdata
    import litdata.streaming.downloader

    # Its obstore path refuses a plain-HTTP endpoint (BadScheme); its
    # boto3 one, which it reads the index with, fetches the chunks.
    litdata.streaming.downloader._OBSTORE_AVAILABLE = False
    return epoch_of(lambda: litdata.StreamingDataLoader(litdata.StreamingDataset(
        f"s3://{bucket()}/{PREFIX}litdata/", cache_dir=f"{work}/cache", storage_options={"endpoint_url": url},
        shuffle=shuffle, seed=1), batch_size=BATCH), lambda b: len(b["id"]))


RUNNERS = {"shardfeed": run_shardfeed, "mosaicml-streaming": run_mosaic, "LitData": run_litdata}


def measure(proxy_bin: str, loader: str, layout: str, shuffle: bool, work: Path) -> dict:
    """One epoch of loader in a process of its own, through a proxy of
    its own."""
    d = Path(tempfile.mkdtemp(dir=work, prefix=f"{loader}-{layout}-"))
    counts: dict = {}
    with proxy(proxy_bin, counts) as url:
        p = subprocess.run([sys.executable, __file__, "--run", loader, url, str(d), layout, str(int(shuffle))],
                           capture_output=True, text=True, timeout=1200, env={**os.environ, "TMPDIR": str(d)})
    if p.returncode:
        raise SystemExit(f"{loader} on {layout} failed:\n{p.stderr[-3000:]}")
    got = json.loads(p.stdout.strip().splitlines()[-1])
    shutil.rmtree(d, ignore_errors=True)
    requests = sum(counts.get(k, 0) for k in ("get", "getRanged", "head", "list", "put", "other"))
    row = {"loader": loader, "layout": layout, "shuffle": shuffle, **got, "requests": requests, "counts": counts}
    log(f"{loader} {layout}{' shuffled' if shuffle else ''}: {got['samples']} samples, {requests} requests, "
        f"first batch {got['first']:.2f} s, epoch {got['epoch']:.1f} s")
    return row


def index_parquet() -> None:
    """shardfeed's index of the Parquet prefix, written straight to MinIO:
    the epochs measure reading, not indexing (an MDS stream's index is
    its own index.json)."""
    subprocess.run([SHARDFEED, "index", f"s3://{bucket()}/{PREFIX}parquet/", "--format", "parquet",
                    "--endpoint", os.environ["SHARDFEED_S3_ENDPOINT"], "--insecure"], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    if len(sys.argv) == 7 and sys.argv[1] == "--run":
        _, _, loader, url, work, layout, shuffle = sys.argv
        print(json.dumps(RUNNERS[loader](url, work, layout, shuffle == "1")))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--proxy", default=str(ROOT / "bin" / "latencyproxy"), help="the latency proxy's binary (go build ./hack/latencyproxy)")
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    ap.add_argument("--out", default=str(ROOT / "bin" / "bench" / "requests.json"))
    ap.add_argument("--only", default="", help="only the rows whose 'loader layout' matches this regular expression")
    args = ap.parse_args()
    if "SHARDFEED_S3_ENDPOINT" not in os.environ:
        raise SystemExit("run it under hack/minio.sh: hack/minio.sh -- bin/venv-oracle/bin/python hack/bench/store_requests.py")
    work = Path(tempfile.mkdtemp(prefix="shardfeed-bench-requests-"))
    try:
        log("writing 64 MiB as MDS shards of 64 KiB, LitData chunks of 64 KB and Parquet row groups of 8 rows")
        objects = write(work)
        index_parquet()
        rows = []
        cases = [(loader, "mds" if loader != "LitData" else "litdata", True) for loader in RUNNERS]
        cases += [("shardfeed", "parquet", False), ("shardfeed", "parquet", True)]
        cases = [c for c in cases if re.search(args.only, f"{c[0]} {c[1]}")]
        for run in range(args.runs):
            for loader, layout, shuffle in cases:
                if run and any(r["loader"] == loader and r["layout"] == layout and r["epoch"] > ONCE for r in rows):
                    continue  # an epoch of over ONCE seconds: measured once
                rows.append(measure(args.proxy, loader, layout, shuffle, work))
        out = {"samples": SAMPLES, "sampleBytes": WIDTH * 4, "delay": DELAY, "objects": objects, "runs": rows}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
