"""Egress of the peers: bytes fetched from MinIO in one epoch over the
dataset's bytes, for world sizes 1 to 16 (one rank per pod, each pod its
own cache), measured with real peers on a real MinIO. shardfeed's own
figures come from BenchmarkEgress (test/sidecar), on the same shape of data.

  hack/minio.sh -- bin/venv-oracle/bin/python hack/bench/egress.py [--out bin/bench/egress.json]

Data: 8192 samples of int32 × 2048 (8 KiB) and an id, written by
mosaicml-streaming's MDSWriter in shards of at most 1 MiB (as
BenchmarkEgress: 64 MiB in about 64 shards), uploaded to the bucket.

- mosaicml-streaming: StreamingDataset(remote=s3://…, local=a directory of
  the rank's own) in a DataLoader, W ranks in a torch.distributed group
  (gloo), one rank per node, each node in a mount namespace of its own
  (needs root, as the local cluster does); its bytes are the shard files
  each rank downloaded into its local directory.
- A resume on a new node: one rank's state at 90 % of the epoch restored
  into a new StreamingDataset whose local directory is empty; the bytes it
  downloads for the rest of the epoch and the time to its first batch.
- LitData, at one rank: the same samples written by litdata.optimize in
  chunks of 1 MB; its first batch from an empty cache directory, and a
  resume at 90 % (its StreamingDataLoader's state_dict) on a new node.
- torch DistributedSampler(shuffle=True) over a map-style dataset that
  fetches, with boto3, the whole shard of every sample its rank gets, and
  keeps every shard it fetched (a per-rank cache of the whole data set: the
  most favourable case for it); its bytes are the bodies it downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SAMPLES, WIDTH, WORLDS = 8192, 2048, (1, 2, 4, 8, 16)
PREFIX = "bench-egress/tokens/"
RESUME_AT = 0.9
LITDATA_PREFIX = "bench-egress/litdata/"


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def s3():
    import boto3

    return boto3.client("s3", endpoint_url=os.environ["SHARDFEED_S3_ENDPOINT"])


def write_and_upload(work: Path) -> tuple[int, list[dict]]:
    """Writes the data set with MDSWriter, uploads it; (shard bytes, shards of index.json)."""
    from streaming import MDSWriter

    local = work / "mds"
    rng = np.random.default_rng(1)
    with MDSWriter(out=str(local), columns={"id": "int64", "tokens": f"ndarray:int32:{WIDTH}"}, size_limit=1 << 20) as w:
        for i in range(SAMPLES):
            w.write({"id": i, "tokens": rng.integers(0, 50000, WIDTH, dtype=np.int32)})
    client, bucket = s3(), os.environ["SHARDFEED_S3_BUCKET"]
    for f in sorted(local.iterdir()):
        client.upload_file(str(f), bucket, PREFIX + f.name)
    shards = json.loads((local / "index.json").read_text())["shards"]
    return sum(s["raw_data"]["bytes"] for s in shards), shards


def mosaic_rank(world: int, rank: int, local: str, resume: float = 0.0) -> None:
    """One rank's epoch (run in its own process: mosaicml-streaming's world
    is per process); with resume, the rest of it from a state at that
    fraction of the epoch, restored as its docs say (load_state_dict on
    the new dataset before iterating)."""
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    os.environ["S3_ENDPOINT_URL"] = os.environ["SHARDFEED_S3_ENDPOINT"]
    start = time.monotonic()
    ds = StreamingDataset(remote=f"s3://{os.environ['SHARDFEED_S3_BUCKET']}/{PREFIX}", local=local, batch_size=64,
                          shuffle=True, shuffle_seed=1)
    if resume:
        state = ds.state_dict(int(resume * SAMPLES) // 64 * 64, from_beginning=True)
        state["epoch"] = 0  # a fresh dataset's state names epoch -1; the restored one iterates epoch 0
        ds.load_state_dict(state)
    n, first = 0, None
    for b in torch.utils.data.DataLoader(ds, batch_size=64):
        first = first if first is not None else time.monotonic() - start
        n += len(b["id"])
    print(json.dumps({"samples": n, "first": first}))


def mosaic_bytes(world: int, work: Path, resume: float = 0.0) -> tuple[int, int, float]:
    """(bytes the ranks downloaded, samples they read, the slowest rank's
    seconds from its dataset's creation, its local directory empty, to its
    first batch) for one world size.

    The ranks run at once (mosaicml-streaming joins them in a
    torch.distributed group), each as a node of its own: in a mount
    namespace with its own /dev/shm and its own TMPDIR, since it names its
    shared memory and locks per node and the nodes share this machine."""
    port = free_port()
    procs = []
    for rank in range(world):
        name = f"w{world}-r{rank}" + (f"-resume{resume}" if resume else "")
        local = work / f"mosaic-{name}"
        tmp = work / f"tmp-{name}"
        tmp.mkdir()
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TMPDIR": str(tmp)}
        cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
               'mount -t tmpfs -o size=256m tmpfs /dev/shm && exec "$@"', "sh",
               sys.executable, __file__, "--mosaic-rank", str(world), str(rank), str(local), str(resume)]
        procs.append((rank, local, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    fetched = samples = 0
    first = 0.0
    for rank, local, p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode:
            for _, _, q in procs:
                q.kill()
            raise SystemExit(f"mosaicml-streaming, rank {rank} of {world}, failed:\n{err[-3000:]}")
        done = json.loads(out.strip().splitlines()[-1])
        samples, first = samples + done["samples"], max(first, done["first"] or 0.0)
        fetched += sum(f.stat().st_size for f in local.iterdir() if f.name.startswith("shard."))
    return fetched, samples, first


def litdata_sample(i: int) -> dict:
    """Sample i of the data set, for litdata.optimize (the same shape as
    the MDS one: an id and 2048 int32 tokens)."""
    rng = np.random.default_rng(i)
    return {"id": i, "tokens": rng.integers(0, 50000, WIDTH, dtype=np.int32)}


def write_litdata(work: Path) -> int:
    """Writes the data set with litdata.optimize in chunks of 1 MB (as the
    MDS shards), uploads it; the chunks' bytes."""
    import litdata

    out = work / "litdata"
    # optimize leaves its work lists (litdata-node-*-items-*.pkl) in the
    # temporary directory: this run's, not the machine's.
    saved = tempfile.tempdir
    tempfile.tempdir = str(work)
    try:
        litdata.optimize(fn=litdata_sample, inputs=list(range(SAMPLES)), output_dir=str(out), chunk_bytes="1MB", num_workers=1)
    finally:
        tempfile.tempdir = saved
    client, bucket = s3(), os.environ["SHARDFEED_S3_BUCKET"]
    for f in sorted(out.iterdir()):
        client.upload_file(str(f), bucket, LITDATA_PREFIX + f.name)
    return sum(f.stat().st_size for f in out.iterdir() if f.name.startswith("chunk"))


def litdata_run(mode: str, cache: str, state_file: str) -> None:
    """One LitData reader from MinIO, in its own process (its download
    threads end with it), as its docs show: a StreamingDataset on the s3://
    prefix with a cache directory, in a StreamingDataLoader. mode: "cold"
    reads the epoch from an empty cache; "probe" reads 90 % of it and saves
    the loader's state_dict; "resume" restores that state and reads the
    rest. Prints {first, samples, fetched} as JSON."""
    import litdata
    import litdata.streaming.downloader

    # LitData fetches chunks with obstore, which it builds without
    # allow_http: it refuses MinIO's plain-HTTP endpoint (BadScheme). Its
    # boto3 path, which it uses for the index, fetches them instead.
    litdata.streaming.downloader._OBSTORE_AVAILABLE = False
    opts = {"endpoint_url": os.environ["SHARDFEED_S3_ENDPOINT"]}
    start = time.monotonic()
    ds = litdata.StreamingDataset(f"s3://{os.environ['SHARDFEED_S3_BUCKET']}/{LITDATA_PREFIX}", cache_dir=cache, storage_options=opts,
                                  shuffle=True, seed=1)
    loader = litdata.StreamingDataLoader(ds, batch_size=64)
    stop = int(RESUME_AT * SAMPLES) // 64 if mode == "probe" else None
    if mode == "resume":
        loader.load_state_dict(json.loads(Path(state_file).read_text()))
    n, first = 0, None
    for i, b in enumerate(loader):
        first = first if first is not None else time.monotonic() - start
        n += len(b["id"])
        if stop and i + 1 == stop:
            Path(state_file).write_text(json.dumps(loader.state_dict()))
            break
    fetched = sum(f.stat().st_size for f in Path(cache).rglob("chunk-*.bin"))
    print(json.dumps({"samples": n, "first": first, "fetched": fetched}))


def litdata_cold_and_resume(work: Path) -> dict:
    """LitData's cold start and its resume at 90 % on a new node (the same
    cache directory, emptied: its state names the directory)."""
    total = write_litdata(work)

    def run(mode: str, cache: Path, state: Path) -> dict:
        out = subprocess.run([sys.executable, __file__, "--litdata", mode, str(cache), str(state)], capture_output=True, text=True, timeout=600)
        if out.returncode:
            raise SystemExit(f"LitData ({mode}) failed:\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold = run("cold", work / "litdata-cold", work / "unused")
    state = work / "litdata-state.json"
    run("probe", work / "litdata-node", state)
    shutil.rmtree(work / "litdata-node")
    resumed = run("resume", work / "litdata-node", state)
    if not 0 < resumed["samples"] <= (1 - RESUME_AT) * SAMPLES + 64:
        raise SystemExit(f"LitData resumed at {RESUME_AT:.0%} read {resumed['samples']} samples of {SAMPLES}: its state was not restored")
    return {"cold": {"first_s": cold["first"], "egress_x": cold["fetched"] / total, "samples": cold["samples"]},
            "resume": {"first_s": resumed["first"], "egress_x": resumed["fetched"] / total, "samples": resumed["samples"]}}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ShardFetching:
    """A map-style dataset whose samples live in MDS shards on S3: a sample
    fetches its whole shard unless this rank has fetched it before."""

    def __init__(self, shards: list[dict]):
        self.client, self.bucket = s3(), os.environ["SHARDFEED_S3_BUCKET"]
        self.shards = shards
        self.starts = np.cumsum([0] + [s["samples"] for s in shards])
        self.cache: dict[int, bytes] = {}
        self.fetched = 0

    def __len__(self):
        return int(self.starts[-1])

    def __getitem__(self, i):
        s = int(np.searchsorted(self.starts, i, side="right") - 1)
        if s not in self.cache:
            body = self.client.get_object(Bucket=self.bucket, Key=PREFIX + self.shards[s]["raw_data"]["basename"])["Body"].read()
            self.cache[s] = body
            self.fetched += len(body)
        return i


def sampler_bytes(world: int, shards: list[dict]) -> tuple[int, int]:
    from torch.utils.data import DataLoader, DistributedSampler

    fetched = samples = 0
    for rank in range(world):
        ds = ShardFetching(shards)
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=1)
        samples += sum(len(b) for b in DataLoader(ds, batch_size=64, sampler=sampler))
        fetched += ds.fetched
    return fetched, samples


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--litdata":
        litdata_run(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--mosaic-rank":
        mosaic_rank(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bin" / "bench" / "egress.json"))
    args = ap.parse_args()
    if "SHARDFEED_S3_ENDPOINT" not in os.environ:
        raise SystemExit("SHARDFEED_S3_ENDPOINT is not set: run this under hack/minio.sh -- (make bench does)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="shardfeed-egress-", dir=ROOT / "bin") as tmp:
        work = Path(tmp)
        total, shards = write_and_upload(work)
        log(f"egress: {SAMPLES} samples in {len(shards)} MDS shards, {total / 2**20:.1f} MiB, uploaded")
        result = {"samples": SAMPLES, "shards": len(shards), "bytes": total, "worlds": {}}
        for world in WORLDS:
            m, m_samples, m_first = mosaic_bytes(world, work)
            d, d_samples = sampler_bytes(world, shards)
            result["worlds"][str(world)] = {"mosaicml-streaming": m / total, "DistributedSampler": d / total,
                                            "samples": {"mosaicml-streaming": m_samples, "DistributedSampler": d_samples},
                                            "cold_first_batch_s": {"mosaicml-streaming": m_first}}
            log(f"egress: world {world}: mosaicml-streaming {m / total:.3f} ({m_samples} samples), "
                f"DistributedSampler {d / total:.3f} ({d_samples} samples)")
        # A one-pod job resumed on a new node: the rest of the epoch from a
        # state at 90 %, the local directory empty (BenchmarkEgress measures
        # shardfeed's).
        m, m_samples, m_first = mosaic_bytes(1, work, RESUME_AT)
        if not 0 < m_samples <= (1 - RESUME_AT) * SAMPLES + 64:
            raise SystemExit(f"mosaicml-streaming resumed at {RESUME_AT:.0%} read {m_samples} samples of {SAMPLES}: its state was not restored")
        result["resume"] = {"at": RESUME_AT, "mosaicml-streaming": {"egress_x": m / total, "samples": m_samples, "first_s": m_first}}
        lit = litdata_cold_and_resume(work)
        result["cold"] = {"LitData": lit["cold"]}
        result["resume"]["LitData"] = lit["resume"]
        log(f"egress: LitData from MinIO: first batch in {lit['cold']['first_s']:.2f} s from an empty cache; resumed at "
            f"{RESUME_AT:.0%} on a new node, it fetched {lit['resume']['egress_x']:.3f} of the data set, first batch in "
            f"{lit['resume']['first_s']:.2f} s")
        log(f"egress: resumed at {RESUME_AT:.0%} on a new node: mosaicml-streaming fetched {m / total:.3f} of the data set "
            f"for {m_samples} samples, first batch in {m_first:.2f} s")
    result["seconds"] = time.monotonic() - started
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    log(f"egress: written to {args.out} in {result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
