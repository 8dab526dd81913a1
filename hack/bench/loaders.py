"""The loader benchmark: data into a PyTorch training loop, shardfeed side by
side with every peer (mosaicml-streaming, LitData, lancedb, Ray Data,
torch-dataloader-utils) and pyarrow, on the same data, with the machine's
limit as a row: each batch copied once in memory, then the same loop.

  bin/venv/bin/python hack/bench/loaders.py [--kinds tokens,images,images-decoded,tabular] [--scale S]
      [--runs R] [--time-box SECONDS] [--peer-time-box SECONDS] [--only REGEX] [--out bin/bench/loaders.json]

Data: datasets.py's data sets (about 1 GB each at scale 1; BENCH_SCALE),
each in every tool's own format. Every loop reads a shuffled epoch (pyarrow:
the Parquet file in order) and reads every value it gets (touch.py), for at
most --time-box seconds after its first batch (BENCH_TIME_BOX; a peer's
--peer-time-box, BENCH_PEER_TIME_BOX, long enough for its steady rate).
Each peer runs with the knobs peer_sweep.py found fastest for it
(peer-settings.json; its defaults where the sweep has not run). Every
measurement runs R times (BENCH_RUNS, default 3), each in its own process;
the results (median, min, max of each) go to --out as JSON, from which
report.py writes the tables and plots of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import itertools
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

import shardfeed  # noqa: E402
import torch  # noqa: E402
from shardfeed._convert import to_torch  # noqa: E402
from touch import AnonPeak, peak_rss_mib, touch_loop  # noqa: E402
from zygote import Zygote  # noqa: E402

ORACLE = ROOT / "bin" / "venv-oracle" / "bin" / "python"
HERE = ROOT / "hack" / "bench"
# The peers' knobs at their best, as the last peer_sweep.py found them.
PEER_SETTINGS = HERE / "peer-settings.json"
DATA = ROOT / ".cache" / "bench-data"
# Batch sizes: 4 MiB of tokens, 6 MB of images, 8192 rows of tabular data.
BATCH = {"tokens": 512, "images": 64, "tabular": 8192, "images-decoded": 64}
# images-decoded reads the images data set, each image decoded and resized
# to a 224×224 tensor: in shardfeed's sidecar (spec.decode), in the peers'
# workers (peers.decode_image).
DATA_OF = {"images-decoded": "images"}
DECODE = "  decode:\n  - column: image\n    image: {resize: 256, height: 224, width: 224}\n"
# Batch sizes of the throughput-vs-batch-size sweep (tokens, no workers),
# besides BATCH["tokens"].
SWEEP = (64, 2048)


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def scale_of(text: str) -> float:
    return 4.0 if text == "full" else float(text)


def dataset(kind: str, scale: float) -> tuple[Path, dict]:
    """The data set's directory (written by datasets.py if missing) and its meta.json."""
    out = subprocess.run([str(ORACLE), str(HERE / "datasets.py"), str(DATA), kind, f"{scale:g}"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    path = Path(out.strip().splitlines()[-1])
    os.sync()  # the data set's writeback would otherwise run under the first measurements
    warm_page_cache(path)
    return path, json.loads((path / "meta.json").read_text())


def warm_page_cache(path: Path) -> None:
    """Reads every file of a data set once, so that no loader's first
    measurement pays for reading it from the disk (the data sets were read
    warm, from the page cache, in every measurement after the first)."""
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        with f.open("rb", buffering=0) as src:
            while src.read(8 << 20):
                pass


def shuffle_block(batch: int) -> int:
    """The shuffle's block size for batches of batch rows."""
    return max(4096, 8 * batch)


class Serve:
    """A `shardfeed serve` of a data set's MDS, its cache warmed by one epoch."""

    def __init__(self, work: Path, data: Path, batch: int, decode: str = "", binary: str = "shardfeed", shuffle: str = "",
                 lance: bool = False, warm: bool = True):
        work.mkdir(parents=True, exist_ok=True)
        manifest = work / "dataset.yaml"
        # The Lance table lancedb wrote (datasets.py), read natively: its
        # index goes beside the sidecar's work, not into the data set.
        source = (f"format: lance\n    source: {{uri: \"file://{data}/lance/{data.name.rsplit('-', 1)[0]}.lance/\", "
                  f"indexURI: \"file://{work}/index/\"}}") if lance else f"format: mds\n    source: {{uri: \"file://{data}/mds/\"}}"
        manifest.write_text(f"""apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: bench}}
spec:
  streams:
  - name: data
    {source}
  numSplits: 2
  globalBatchSize: {batch}
  shuffle: {{seed: 1, blockSize: {shuffle_block(batch)}{", " + shuffle if shuffle else ""}}}
{decode}""")
        self.start(work, manifest, binary, index=lance, warm=warm)

    def start(self, work: Path, manifest: Path, binary: str, index: bool, warm: bool = True, extra: tuple[str, ...] = ()) -> None:
        """Serves the manifest's stream (indexed first where index says),
        its cache warmed by one epoch unless not warm; extra are more
        `shardfeed serve` flags."""
        if index:
            subprocess.run([str(ROOT / "bin" / binary), "index", "-f", str(manifest), "--stream", "data"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.socket = str(work / "feed.sock")
        self.log = open(work / "serve.log", "wb")
        # Default settings: what a pod gets without tuning.
        self.proc = subprocess.Popen([str(ROOT / "bin" / binary), "serve", "-f", str(manifest), "--socket", self.socket,
                                      "--cache-dir", str(work / "cache"), "--state", str(work / "state.json"),
                                      "--metrics-addr", "", *extra], stdout=self.log, stderr=subprocess.STDOUT)
        self.anon = AnonPeak(self.proc.pid)
        shardfeed.Client(self.socket).wait_ready(120)
        if not warm:
            return
        run_shardfeed(self.socket, 0, 0, None)  # every other loader reads local files: so does this one
        # The warming epoch left the cache's copy of the data set dirty (a
        # GB a sidecar): written back now, not under the measurements.
        os.sync()

    def peak_rss_mib(self) -> float:
        """Peak resident memory: the heap, the mapped cached shards (page
        cache) and the hand-off's shared memory."""
        return peak_rss_mib(self.proc.pid)

    def peak_anon_mib(self) -> float:
        """Peak anonymous memory (RssAnon): the heap."""
        return self.anon.peak

    def stop(self) -> None:
        self.anon.stop()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def _in_workers(_worker_id: int) -> None:
    """A worker_init_fn: code for the workers, so FeedLoader starts them."""


def run_shardfeed(socket: str, workers: int, epoch: int, time_box: float | None, handoff: bool = True,
                  binary_as: str = "bytes", columns: list[str] | None = None, relay: bool = False) -> dict:
    def make():
        ds = shardfeed.FeedDataset(socket, rank=0, world_size=1, handoff=handoff, binary_as=binary_as, columns=columns)
        # relay: the workers run (a worker_init_fn) and pass each batch on;
        # without code of the user's, FeedLoader reads in this process.
        loader = shardfeed.FeedLoader(ds, num_workers=workers, **({"worker_init_fn": _in_workers} if relay else {}))
        loader.set_epoch(epoch)
        return loader

    return touch_loop(make, time_box)


def resume_shardfeed(socket: str, workers: int, epoch: int, time_box: float | None) -> dict:
    """The rest of an epoch, restored at 90 % from a checkpoint's state."""
    probe = shardfeed.FeedLoader(shardfeed.FeedDataset(socket, rank=0, world_size=1))
    probe.set_epoch(epoch)
    state = probe.state_dict()
    state["step"] = int(0.9 * probe.plan()["steps"])

    def make():
        loader = shardfeed.FeedLoader(shardfeed.FeedDataset(socket, rank=0, world_size=1), num_workers=workers)
        loader.load_state_dict(state)
        return loader

    return touch_loop(make, time_box)


class _InMemory(torch.utils.data.IterableDataset):
    """Batches of tokens already in memory, each cloned: what torch's
    DataLoader alone costs for the same batches (worker processes send each
    through shared memory)."""

    def __init__(self, n: int, width: int):
        self.n, self.width = n, width

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        share = info.num_workers if info else 1
        base = torch.zeros(BATCH["tokens"], self.width, dtype=torch.int32)
        for _ in range(self.n // BATCH["tokens"] // share):
            yield {"tokens": base.clone()}


def run_ceiling(n: int, workers: int, time_box: float | None) -> dict:
    return touch_loop(lambda: torch.utils.data.DataLoader(_InMemory(n, 2048), batch_size=None, num_workers=workers), time_box)


def random_tokens(n: int, width: int) -> torch.Tensor:
    """n rows of width random tokens: a block of random rows repeated
    (randint over a GB took 3 s of each run of the limit rows; copying and
    reading the values costs the same whatever they are)."""
    block = torch.randint(0, 50000, (min(n, 8192), width), dtype=torch.int32)
    data = torch.empty(n, width, dtype=torch.int32)
    for lo in range(0, n, len(block)):
        data[lo:lo + len(block)] = block[:n - lo]
    return data


def one_copy(n: int, width: int):
    """The machine's limit for a loader: the whole data set in memory, each
    batch one copy of its rows (a contiguous slice, the best case: no
    gather) into a batch buffer reused as a loader's would be, handed to the
    same loop."""
    data = random_tokens(n, width)
    batch = BATCH["tokens"]
    bufs = [torch.empty(batch, width, dtype=torch.int32) for _ in range(2)]
    for i in range(n // batch):
        out = bufs[i % 2]
        out.copy_(data[i * batch:(i + 1) * batch])
        yield {"tokens": out}


def one_copy_images(n: int, size: int):
    """The machine's limit for a loader of images: n images of size bytes
    in memory, each batch one copy of its images (contiguous: the best
    case) into a reused buffer, handed to the same loop as a uint8 view
    per image, as shardfeed hands them over (binary_as="array")."""
    batch = BATCH["images"]
    data = torch.ones(n * size, dtype=torch.uint8)
    bufs = [torch.empty(batch * size, dtype=torch.uint8) for _ in range(2)]
    for i in range(n // batch):
        out = bufs[i % 2]
        out.copy_(data[i * batch * size:(i + 1) * batch * size])
        yield {"image": [out[j * size:(j + 1) * size] for j in range(batch)]}


def one_gather(n: int, width: int, block: int, run: int = 1):
    """The machine's limit for a loader that shuffles: as one_copy, but each
    batch gathers its rows in the order of a block shuffle (rows permuted
    within blocks of `block`, as the sidecar's plan permutes them; runs of
    `run` rows kept together with run > 1), one index_select into the reused
    buffer. Rows far apart in memory cost more to copy than a slice: every
    row starts a new stream of cache lines."""
    data = random_tokens(n, width)
    batch = BATCH["tokens"]
    g = torch.Generator().manual_seed(1)

    def block_order(b: int) -> torch.Tensor:
        size = min(block, n - b)
        runs = torch.randperm(size // run, generator=g)
        order = (runs[:, None] * run + torch.arange(run)).flatten()
        return b + torch.cat([order, torch.arange(size // run * run, size)])

    order = torch.cat([block_order(b) for b in range(0, n, block)])
    bufs = [torch.empty(batch, width, dtype=torch.int32) for _ in range(2)]
    for i in range(n // batch):
        out = bufs[i % 2]
        torch.index_select(data, 0, order[i * batch:(i + 1) * batch], out=out)
        yield {"tokens": out}


def one_copy_tabular(data: Path, batch: int):
    """The machine's limit for a loader of tabular rows: the data set in
    memory (its Parquet read whole), each batch one copy of its rows (a
    contiguous slice, the best case) into reused tensors, a column each,
    and each string column made into a list of str, as every loader here
    hands strings over, then the same loop."""
    table = pa.concat_tables(pq.read_table(p) for p in sorted((data / "parquet").glob("*.parquet"))).combine_chunks()
    bufs: list[dict[str, torch.Tensor]] = [{}, {}]
    for i in range(table.num_rows // batch):
        rb = table.slice(i * batch, batch)
        out: dict = {}
        for name, col in zip(rb.column_names, rb.columns):
            arr = col.chunk(0) if col.num_chunks == 1 else pa.concat_arrays(col.chunks)
            if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
                out[name] = arr.to_pylist()
                continue
            if pa.types.is_fixed_size_list(arr.type):  # its child sliced to the batch's rows
                width = arr.type.list_size
                src = torch.from_numpy(arr.values.slice(arr.offset * width, len(arr) * width).to_numpy().reshape(len(arr), width))
            else:
                src = torch.from_numpy(arr.to_numpy(zero_copy_only=False))
            buf = bufs[i % 2].get(name)
            if buf is None or buf.shape != src.shape:
                buf = bufs[i % 2][name] = torch.empty_like(src)
            out[name] = buf.copy_(src)
        yield out


def run_first_epoch(data: Path, batch: int, time_box: float | None, rerun: bool = False) -> dict:
    """The first epoch of a new `shardfeed serve`: nothing verified or
    cached yet, each local shard verified (one pass over its bytes) and
    mapped in place as the epoch first reads it; with rerun, a serve before
    it read the epoch on the same cache directory (the next run of a
    script: its verifications are taken). The data set's files are in the
    page cache, as they are for every loader's local files."""
    with tempfile.TemporaryDirectory(prefix="first-epoch-", dir=ROOT / "bin") as tmp:
        if rerun:
            serve = Serve(Path(tmp), data, batch, warm=False)
            try:
                run_shardfeed(serve.socket, 0, 0, None)
            finally:
                serve.stop()
        serve = Serve(Path(tmp), data, batch, warm=False)
        try:
            return run_shardfeed(serve.socket, 0, 0, time_box)
        finally:
            serve.stop()


def run_limit(n: int, time_box: float | None, gather: bool = False, run: int = 1) -> dict:
    if gather:
        return touch_loop(lambda: one_gather(n, 2048, shuffle_block(BATCH["tokens"]), run), time_box)
    return touch_loop(lambda: one_copy(n, 2048), time_box)


def run_pyarrow(data: Path, batch: int, time_box: float | None) -> dict:
    def make():
        for part in sorted((data / "parquet").glob("*.parquet")):
            for rb in pq.ParquetFile(part).iter_batches(batch_size=batch):
                yield to_torch(rb)

    return touch_loop(make, time_box)


def child(argv: list[str]) -> None:
    """--child NAME ARGS…: one measurement, its result as JSON on stdout."""
    cmd, args = argv[0], argv[1:]
    box = float(args[-1]) or None
    if cmd == "read-shardfeed":
        t = run_shardfeed(args[0], int(args[1]), int(args[2]), box)
    elif cmd == "read-shardfeed-array":
        t = run_shardfeed(args[0], int(args[1]), int(args[2]), box, binary_as="array")
    elif cmd == "read-shardfeed-columns":  # SOCKET WORKERS EPOCH COLUMN,COLUMN… BOX
        t = run_shardfeed(args[0], int(args[1]), int(args[2]), box, columns=args[3].split(","))
    elif cmd == "read-shardfeed-relay":  # SOCKET WORKERS EPOCH BINARY_AS BOX: workers that pass batches on
        t = run_shardfeed(args[0], int(args[1]), int(args[2]), box, binary_as=args[3], relay=True)
    elif cmd in ("first-epoch", "first-epoch-rerun"):  # DATA BATCH BOX
        t = run_first_epoch(Path(args[0]), int(args[1]), box, rerun=cmd.endswith("rerun"))
    elif cmd == "limit-tabular":  # DATA BATCH BOX
        t = touch_loop(lambda: one_copy_tabular(Path(args[0]), int(args[1])), box)
    elif cmd == "read-shardfeed-socket":
        t = run_shardfeed(args[0], int(args[1]), int(args[2]), box, handoff=False)
    elif cmd == "resume-shardfeed":
        t = resume_shardfeed(args[0], int(args[1]), int(args[2]), box)
    elif cmd == "pyarrow":
        t = run_pyarrow(Path(args[0]), int(args[1]), box)
    elif cmd == "ceiling":
        t = run_ceiling(int(args[0]), int(args[1]), box)
    elif cmd == "limit":
        t = run_limit(int(args[0]), box)
    elif cmd == "limit-images":
        t = touch_loop(lambda: one_copy_images(int(args[0]), int(args[1])), box)
    elif cmd == "limit-gather":
        t = run_limit(int(args[0]), box, gather=True, run=int(args[1]))
    else:
        raise SystemExit(f"unknown --child {cmd}")
    print(json.dumps(t))


# The measurements' processes: forks of a process that imported torch once
# (zygote.py), in this venv and in the peers'.
MINE = Zygote(sys.executable, __file__)
PEERS = Zygote(str(ORACLE), str(HERE / "peers.py"))


def run_child(*args) -> dict:
    """A measurement in its own process (a fork of the zygote), so that its
    peak memory and its allocator's state are its own."""
    done = MINE.run(["--child", *map(str, args)], timeout=900)
    if done.returncode:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise SystemExit(f"measurement {' '.join(map(str, args))} failed (exit {done.returncode}):\n{tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_peer(cmd: str, data: Path, workers: int, batch: int, epoch: int, box: float, knobs: dict | None = None, passes: int = 1) -> dict:
    """One peer measurement in the oracle venv, with its knobs; a failed
    start (Ray's, now and then) is tried once more, and a second failure
    shows its error. A peer that printed its result and then failed in its
    teardown (Ray's, now and then) has its result."""
    argv = [cmd, str(data), str(workers), str(batch), str(epoch), str(box)] + ([json.dumps(knobs)] if knobs else [])
    for attempt in (1, 2):
        done = PEERS.run(argv, timeout=900, env={"BENCH_PASSES": str(passes)})
        out = done.stdout.strip().splitlines()
        if done.returncode == 0 or out and out[-1].startswith("{"):
            if done.returncode:
                log(f"{cmd} exited {done.returncode} after printing its result (in its teardown): the result stands")
            return {**json.loads(out[-1]), "knobs": knobs or {}}
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        log(f"{cmd} failed (attempt {attempt}, exit {done.returncode}):\n{tail}")
    raise SystemExit(f"{cmd} on {data} failed twice; its error is above")


def cases(kind: str, data: Path, serve: Serve, batch: int, n: int, sweep: bool, build: str = "", sample_bytes: float = 0):
    """(loader, workers, measure(epoch, time_box)) of one data set; sweep:
    only the loaders at 0 workers, for the batch-size sweep; build: the
    sidecar's (BUILDS), whose rows are shardfeed's alone."""
    # Images are read as shardfeed recommends for them: each value a uint8
    # tensor viewing the batch (binary_as="array", what decode_jpeg takes),
    # beside a row of the same values copied into bytes, as the peers give.
    reader = "read-shardfeed-array" if kind in ARRAY_KINDS else "read-shardfeed"
    read = lambda w: lambda e, b: run_child(reader, serve.socket, w, e, b)  # noqa: E731
    # A peer's measurement takes passes: its longer epoch (measure_all).
    peer = lambda cmd, w: lambda e, b, passes=1: run_peer(cmd, data, w, batch, e, max(PEER_BOX.get("box") or b, b), peer_knobs_of(kind, cmd, w),  # noqa: E731
                                                          passes)
    pyarrow = lambda e, b: run_child("pyarrow", data, batch, b)  # noqa: E731
    if build == USER_BUILD:
        # The user's own decode in the DataLoader's workers, around a
        # sidecar of the JPEG bytes, measured in the same rounds as the
        # peers' decode rows (measure_all interleaves a kind's rows), with
        # the sidecar's CPU.
        return [] if sweep else [(USER_DECODE_ROW, w, functools.partial(
            lambda w, e, b: with_sidecar_cpu(serve, lambda: run_peer("decode-shardfeed", Path(serve.socket), w, batch, e, max(PEER_BOX.get("box") or b, b))), w))
            for w in (0, 2)] + [(USER_DECODE_LIMIT, w, functools.partial(
                lambda w, e, b: run_peer("decode-user-limit", data, w, batch, e, max(PEER_BOX.get("box") or b, b)), w)) for w in (0, 2)]
    if build:  # a variant of the sidecar: shardfeed's rows alone
        return [] if sweep else [(f"shardfeed, {build}", 0, read(0))]
    if kind == "images-decoded":
        # The decode limit: each JPEG decoded in full by libjpeg-turbo on
        # every core, nothing else (no resize, no loader): what decoding
        # these images costs any loader, above what decode + resize allow.
        return [("shardfeed, portable build (Go's image/jpeg)", 0, read(0))] + [
            (name, w, peer(cmd, w)) for name, cmd in (("LitData", "decode-litdata"), ("mosaicml-streaming", "decode-mosaic")) for w in (0, 2)] + [
            (DECODE_LIMIT, EVERY_CORE, lambda e, b: run_peer("decode-limit", data, 0, 0, e, b))]
    if sweep:
        return [("shardfeed", 0, read(0)), ("LitData", 0, peer("read-litdata", 0)), ("mosaicml-streaming", 0, peer("read-mosaic", 0)),
                ("lancedb", 0, peer("read-lance", 0)), ("pyarrow (Parquet, in order)", 0, pyarrow)]
    workers = (0, 1, 2) if kind == "tokens" else (0, 2)
    out = [("shardfeed", w, read(w)) for w in workers]
    binary_as = "array" if kind in ARRAY_KINDS else "bytes"
    out += [(RELAY_ROW, 2, lambda e, b: run_child("read-shardfeed-relay", serve.socket, 2, e, binary_as, b))]
    if kind in ARRAY_KINDS:
        out += [(BYTES_ROW, 0, lambda e, b: run_child("read-shardfeed", serve.socket, 0, e, b))]
    out += [("shardfeed, through the socket", 0, lambda e, b: run_child("read-shardfeed-socket", serve.socket, 0, e, b))]
    for name, cmd in PEER_READERS:
        # Ray Data runs its own tasks: DataLoader workers do not apply.
        out += [(name, w, peer(cmd, w)) for w in ((0,) if name == "Ray Data" else (0, 2))]
    out += [("pyarrow (Parquet, in order)", 0, pyarrow)]
    if kind in ARRAY_KINDS:
        size = int(sample_bytes)
        out += [(LIMIT, 0, lambda e, b: run_child("limit-images", n, size, b))]
    if kind == "tabular":
        out += [(LIMIT, 0, lambda e, b: run_child("limit-tabular", data, batch, b))]
    if kind == "tokens":
        out += [(FIRST_EPOCH_ROW, 0, lambda e, b: run_child("first-epoch", data, batch, b)),
                (FIRST_EPOCH_RERUN_ROW, 0, lambda e, b: run_child("first-epoch-rerun", data, batch, b))]
        out += [("shardfeed, resumed at 90 %", 0, lambda e, b: run_child("resume-shardfeed", serve.socket, 0, e, b)),
                ("mosaicml-streaming, resumed at 90 %", 0, peer("resume-mosaic", 0)),
                ("LitData, resumed at 90 %", 0, peer("resume-litdata", 0))]
        out += [(LIMIT, 0, lambda e, b: run_child("limit", n, b)),
                (LIMIT_GATHER, 0, lambda e, b: run_child("limit-gather", n, 1, b)),
                (LIMIT_GATHER_RUNS, 0, lambda e, b: run_child("limit-gather", n, RUN, b)),
                ("torch DataLoader alone (tensors in memory)", 2, lambda e, b: run_child("ceiling", n, 2, b))]
    return out


# The user's own code decoding each image (Pillow, decode and resize, as
# the peers' decode rows) in the DataLoader's workers, around a
# FeedDataset of the JPEG bytes (peers.py decode-shardfeed): rows of
# images-decoded, served by a sidecar of the bytes (the variant USER_BUILD).
USER_DECODE_ROW = "shardfeed, JPEG decoded by the user's code in the DataLoader workers (Pillow)"
USER_BUILD = "the user's decode (a sidecar of the JPEG bytes)"
# Its limit (peers.py decode-user-limit): the JPEG bytes in memory, the same
# decode in the same workers, no loader.
USER_DECODE_LIMIT = "the user's decode limit: JPEG bytes in memory, the same decode in the same DataLoader workers (no loader)"

# Runs of samples the tokens' variant shuffles (shuffle.runLength): 16
# samples of 8 KiB, a 128 KiB read each.
RUN = 16
# The sidecar variants a kind is measured with beyond the default (the
# binary in bin/, the rows' name, what the dataset's shuffle adds): make
# build-libjpeg links libjpeg-turbo; the tokens are also shuffled in runs.
BUILDS = {"images-decoded": [("shardfeed-libjpeg", "libjpeg-turbo build (cgo)", ""), ("shardfeed", USER_BUILD, "")],
          "tokens": [("shardfeed", f"shuffled in runs of {RUN} samples", f"runLength: {RUN}")]}

# A new serve's first epoch: the local shards verified as it reads them.
FIRST_EPOCH_ROW = "shardfeed, first epoch of a new sidecar (files verified and read in place)"

# …and of the next run's sidecar, on the same cache directory: the files
# verified before are not hashed again.
FIRST_EPOCH_RERUN_ROW = "shardfeed, first epoch of the next run's sidecar (files verified before)"


def cpu_seconds(pid: int) -> float:
    """A process's user and system CPU time so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_sidecar_cpu(serve: "Serve", fn) -> dict:
    """fn's measurement with the sidecar's CPU seconds over it."""
    before = cpu_seconds(serve.proc.pid)
    t = fn()
    return {**t, "sidecar_cpu_s": cpu_seconds(serve.proc.pid) - before}


# FeedLoader's workers made to run (a worker_init_fn), each batch passed on
# from them: what num_workers costs where workers run the user's code.
RELAY_ROW = "shardfeed, batches passed on by the workers (a worker_init_fn)"

# The kinds whose binary values shardfeed hands over as uint8 arrays
# (FeedDataset(binary_as="array")), and the row that copies them to bytes.
ARRAY_KINDS = ("images",)
BYTES_ROW = 'shardfeed, values copied to bytes (binary_as="bytes")'

# shardfeed reading the Lance table lancedb wrote, natively (format: lance),
# beside lancedb's own StreamingDataset on that table and shardfeed on MDS.
LANCE = "on the Lance table (format: lance)"
LANCE_KINDS = ("tokens", "images", "tabular")

# The peers, as loaders.py names them and peers.py runs them.
PEER_READERS = (("LitData", "read-litdata"), ("mosaicml-streaming", "read-mosaic"), ("lancedb", "read-lance"),
                ("Ray Data", "read-ray"), ("torch-dataloader-utils", "read-tdu"))
# The machine's limit: each batch copied once in memory, then the same loop.
LIMIT = "one copy of each batch + the loop (the limit)"
# The decoded images' limit (peers.decode_limit), a row of its own: every
# core, no DataLoader.
DECODE_LIMIT = "the limit: libjpeg-turbo's decode alone on every core (no resize, no loader)"
EVERY_CORE = -1
# The same for a shuffled epoch: each batch's rows gathered in plan order.
LIMIT_GATHER = "one gathered copy of each shuffled batch + the loop"
# …and with the rows shuffled in runs, as the runs variant's plan.
LIMIT_GATHER_RUNS = f"one gathered copy of each batch shuffled in runs of {RUN} + the loop"


# A peer's time box (--peer-time-box), set by main.
PEER_BOX: dict[str, float] = {}


@functools.cache
def _chosen_knobs() -> dict:
    return json.loads(PEER_SETTINGS.read_text()).get("chosen", {}) if PEER_SETTINGS.exists() else {}


def peer_knobs_of(kind: str, cmd: str, workers: int) -> dict:
    """The knobs the last sweep found fastest for this peer, data set and
    worker count ({}: the peer's defaults)."""
    return _chosen_knobs().get(f"{kind}/{cmd}/{workers}", {}).get("knobs", {})


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


# A measurement whose runs read for less than this many seconds each (an
# epoch of the fastest loaders takes a fifth of a second) is run SHORT_RUNS
# times as often: a median of three such short runs moves with the
# machine's noise (one run of shardfeed's tokens ranged from 0.5 to 0.9 of
# the limit in a row of six).
SHORT_RUN = 1.0
SHORT_RUNS = 4


# A start (constructor to first batch) of more than LONG_START of a
# peer's epoch (a pass over the data set) gets that peer a longer epoch:
# passes over the data set, built once, until its start is at most that
# share (at most MAX_PASSES passes), its time box as long. Its epoch's rate
# from the constructor then weighs the start as a longer training run
# would, and the rate after the first batch is not the only fair one.
# Such an epoch of a minute or more (ONCE: lancedb with workers, Ray Data,
# up to three minutes here) is measured once, its range the rates over
# each third of it (touch.part_rates): three of each were a third of make
# bench's time. A shorter one is measured as often as any other, in every
# round: one run of a few seconds is at the mercy of the host's noise.
LONG_START = 0.1
MAX_PASSES = 40
ONCE = 60.0


def longer_epoch(t: dict, box: float) -> tuple[int, float] | None:
    """The passes and time box of a longer epoch for a run whose start was
    more than LONG_START of its epoch; None if it was not."""
    first, rest = t["first"], t["rest"]
    if first <= LONG_START * (first + rest):
        return None
    want = first * (1 - LONG_START) / LONG_START  # seconds after the first batch
    passes = 1 if not t.get("complete", True) else min(MAX_PASSES, max(2, math.ceil(want / max(rest, 1e-3))))
    return passes, max(box, 1.2 * max(want, passes * rest))


def measure_all(jobs: list, runs: int, box: float) -> list[dict]:
    """Every (name, workers, fn, label for the log) job's runs, interleaved: each round runs
    every job once that needs another run (runs of each, SHORT_RUNS times
    as many for short ones), so that the machine's slow moments (its host's
    other tenants) fall on every row of a table alike, not on the six runs
    of one row. The tables compare rows: the limit's and a loader's."""
    done: list[list[dict]] = [[] for _ in jobs]

    longer: dict[int, tuple[int, float]] = {}  # a job's longer epoch: passes, time box
    starts: dict[int, float] = {}  # a longer job's first batch in its first (short) run

    def wants(i: int) -> bool:
        n, ts = len(done[i]), done[i]
        if i in longer and longer[i][1] >= ONCE:
            return n < 1
        return n < runs or n < SHORT_RUNS * runs and sum(t["rest"] for t in ts) / n < SHORT_RUN

    while todo := [i for i in range(len(jobs)) if wants(i)]:
        for i in todo:
            name, workers, fn, label = jobs[i]
            takes_passes = "passes" in inspect.signature(fn).parameters
            if i in longer:
                t = fn(len(done[i]) + 1, longer[i][1], passes=longer[i][0])
            else:
                t = fn(len(done[i]) + 1, box)
                if takes_passes and (more := longer_epoch(t, box)):
                    longer[i], starts[i] = more, t["first"]
                    log(f"{label} workers={workers}: a first batch in {t['first']:.2f} s of an epoch of {t['first'] + t['rest']:.2f} s: "
                        f"measured again over {more[0]} passes (time box {more[1]:.0f} s)")
                    t = fn(len(done[i]) + 1, more[1], passes=more[0])
            done[i].append(t)
            boxed = "" if t.get("complete", True) else f" (time box: {t['samples']:,} samples read)"
            log(f"{label} workers={workers} run {len(done[i])}: {rate_of(t):,.0f} samples/s after a first batch in {t['first']:.2f} s{boxed}")
    return [summarize(name, workers, ts, starts.get(i)) for i, ((name, workers, _, _), ts) in enumerate(zip(jobs, done))]


def rate_of(t: dict) -> float:
    """A run's steady rate: samples per second after the first batch."""
    return t["rest_samples"] / t["rest"] if t["rest"] else 0.0


def summarize(name: str, workers: int, ts: list[dict], short_start: float | None = None) -> dict:
    """A row's figures over its runs; a longer epoch's (short_start: the
    first batch of the short run that called for it) is one run, its
    range the rates over each third of it and its first batch's over both."""
    if short_start is not None and len(ts) == 1 and ts[0].get("part_rates"):
        t, parts = ts[0], ts[0]["part_rates"]
        rate = {"median": rate_of(t), "min": min(parts + [rate_of(t)]), "max": max(parts + [rate_of(t)])}
        return {**summarize(name, workers, ts), "rate": rate, "first": summary([short_start, t["first"]]), "once": True}
    return {"loader": name, "workers": workers, "rate": summary([rate_of(t) for t in ts]),
            "steady": summary([t.get("steady", rate_of(t)) for t in ts]), **({"knobs": ts[0]["knobs"]} if "knobs" in ts[0] else {}),
            "first": summary([t["first"] for t in ts]),
            "epoch_rate": summary([t["samples"] / (t["first"] + t["rest"]) for t in ts]), "passes": max(t.get("passes", 1) for t in ts),
            **({"sidecar_cpu_per_sample": summary([t["sidecar_cpu_s"] / max(t["samples"], 1) for t in ts])} if "sidecar_cpu_s" in ts[0] else {}),
            "rss_mib": max(t.get("rss_mib", 0.0) for t in ts), "worker_rss_mib": max(t.get("worker_rss_mib", 0.0) for t in ts),
            "complete": all(t.get("complete", True) for t in ts)}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", default="tokens,images,images-decoded,tabular")
    parser.add_argument("--scale", default=os.environ.get("BENCH_SCALE", "1"), help="data set size: 1 (about 1 GB each) or full (4)")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    parser.add_argument("--time-box", type=float, default=float(os.environ.get("BENCH_TIME_BOX", "3")),
                        help="seconds a measurement reads after its first batch, at most")
    parser.add_argument("--peer-time-box", type=float, default=float(os.environ.get("BENCH_PEER_TIME_BOX", "8")),
                        help="seconds a peer's measurement reads after its first batch, at most (long enough for its steady rate)")
    parser.add_argument("--only", default="", help="run only the measurements whose 'KIND/LOADER/WORKERS' matches this regular expression")
    parser.add_argument("--out", default=str(ROOT / "bin" / "bench" / "loaders.json"))
    args = parser.parse_args()
    if not ORACLE.exists():
        raise SystemExit(f"{ORACLE} is missing: run make tools-python")
    scale = scale_of(args.scale)
    PEER_BOX["box"] = args.peer_time_box
    started = time.monotonic()
    result = {"command": " ".join(["bin/venv/bin/python", "hack/bench/loaders.py", *sys.argv[1:]]) or "",
              "scale": scale, "runs": args.runs, "short_runs": SHORT_RUNS * args.runs, "time_box": args.time_box,
              "peer_time_box": args.peer_time_box,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "versions": {"python": platform.python_version(), "torch": torch.__version__, "pyarrow": pa.__version__,
                           **peer_versions()},
              "datasets": {}, "rows": [], "sweep": []}
    with tempfile.TemporaryDirectory(prefix="shardfeed-bench-", dir=ROOT / "bin") as tmp:
        for kind in args.kinds.split(","):
            data, meta = dataset(DATA_OF.get(kind, kind), scale)
            result["datasets"][kind] = {**meta, "batch": BATCH[kind], "sample_bytes": meta["bytes"]["mds"] / meta["rows"]}
            plans = [(BATCH[kind], False)] + ([(b, True) for b in SWEEP] if kind == "tokens" else [])
            # Every sidecar the kind's rows need serves at once, so that
            # their rows' runs interleave with the limit's and the peers'.
            serves: dict[tuple, Serve] = {}
            jobs, where = [], []
            try:
                variants = [("shardfeed", "", "")] + BUILDS.get(kind, []) + ([("shardfeed", LANCE, "")] if kind in LANCE_KINDS else [])
                for (batch, sweep), (binary, build, shuffle) in itertools.product(plans, variants):
                    todo = [c for c in cases(kind, data, None, batch, meta["rows"], sweep, build, result["datasets"][kind]["sample_bytes"])
                            if not args.only or re.search(args.only, f"{kind}/{c[0]}/{c[1]}")]
                    if not todo:
                        continue
                    log(f"{kind}, batches of {batch}: serving {data.name} with bin/{binary}" + (f" ({build})" if build else ""))
                    serve = Serve(Path(tmp) / (f"{kind}-{batch}-{binary}{'-' + shuffle.replace(': ', '') if shuffle else ''}"
                                               f"{'-lance' if build == LANCE else ''}{'-user' if build == USER_BUILD else ''}"),
                                  data, batch, DECODE if kind == "images-decoded" and build != USER_BUILD else "", binary, shuffle,
                                  lance=build == LANCE)
                    serves[(batch, build)] = serve
                    for name, workers, fn in cases(kind, data, serve, batch, meta["rows"], sweep, build, result["datasets"][kind]["sample_bytes"]):
                        if not args.only or re.search(args.only, f"{kind}/{name}/{workers}"):
                            jobs.append((name, workers, fn, f"{kind}, batches of {batch}: {name}"))
                            where.append((batch, sweep))
                for (batch, sweep), m in zip(where, measure_all(jobs, args.runs, args.time_box)):
                    row = {"kind": kind, "batch": batch, **m}
                    result["sweep" if sweep else "rows"].append(row)
                    # The sweep's point at the default batch size is the main table's row.
                    if not sweep and batch == BATCH["tokens"] and kind == "tokens" and m["workers"] == 0 and m["loader"] in (
                            "shardfeed", "LitData", "mosaicml-streaming", "lancedb", "pyarrow (Parquet, in order)"):
                        result["sweep"].append(row)
                for (batch, build), serve in serves.items():
                    at = str(batch) + (f", {build}" if build else "")
                    result["datasets"][kind].setdefault("sidecar_rss_mib", {})[at] = serve.peak_rss_mib()
                    result["datasets"][kind].setdefault("sidecar_anon_mib", {})[at] = serve.peak_anon_mib()
            finally:
                for serve in serves.values():
                    serve.stop()
    MINE.close()
    PEERS.close()
    result["seconds"] = time.monotonic() - started
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    log(f"loaders: {len(result['rows'])} measurements in {result['seconds']:.0f} s, written to {out}")


def peer_versions() -> dict:
    out = subprocess.run([str(ORACLE), "-c", "import importlib.metadata as m; import json; "
                          "print(json.dumps({p: m.version(p) for p in ('mosaicml-streaming', 'lancedb', 'litdata', 'ray', "
                          "'torch-dataloader-utils')}))"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


if __name__ == "__main__":
    main()
