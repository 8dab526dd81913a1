"""The loader benchmark: tokens into a PyTorch training loop, shardfeed side
by side with mosaicml-streaming, lancedb and pyarrow, on the same data.

  bin/venv/bin/python hack/bench/loaders.py [--samples N] [--runs R] [--docs docs/benchmarks.md]

Data: N samples (default 16384, 128 MiB) of 2048 int32 tokens (8 KiB), made
here with numpy and written in each tool's own format: Parquet (pyarrow),
MDS (mosaicml-streaming's MDSWriter, which shardfeed serves as it is), a
Lance table (lancedb). Each loop reads one epoch in batches of 512, shuffled,
and sums every tensor it gets. Every measurement is run R times (default 3,
BENCH_RUNS): the table gives the median and the min–max, and replaces the
section between the loaders markers of --docs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

import shardfeed  # noqa: E402
import torch  # noqa: E402

ORACLE = ROOT / "bin" / "venv-oracle" / "bin" / "python"
PEERS = ROOT / "hack" / "bench" / "peers.py"
WIDTH = 2048
BATCH = 512
BEGIN, END = "<!-- loaders:begin -->", "<!-- loaders:end -->"


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def make_data(work: Path, n: int) -> dict[str, Path]:
    paths = {"parquet": work / "tokens.parquet", "mds": work / "mds", "lance": work / "lance"}
    tokens = (np.arange(n * WIDTH, dtype=np.int64) % 50000).astype(np.int32)
    table = pa.table({"id": np.arange(n, dtype=np.int64), "tokens": pa.FixedSizeListArray.from_arrays(pa.array(tokens), WIDTH)})
    pq.write_table(table, paths["parquet"], row_group_size=1024, compression="none")
    for cmd, out in (("write-mds", paths["mds"]), ("write-lance", paths["lance"])):
        log(f"{cmd} {out}")
        subprocess.run([str(ORACLE), str(PEERS), cmd, str(paths["parquet"]), str(out)], check=True)
    return paths


def touch_loop(loader) -> tuple[int, int]:
    samples = checksum = 0
    for batch in loader:
        tokens = batch["tokens"]
        checksum += int(tokens.max())  # read every value
        samples += len(tokens)
    return samples, checksum


class Serve:
    def __init__(self, work: Path, mds: Path, n: int):
        manifest = work / "dataset.yaml"
        manifest.write_text(f"""apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: bench}}
spec:
  streams:
  - name: tokens
    format: mds
    source: {{uri: "file://{mds}/"}}
  numSplits: 2
  globalBatchSize: {BATCH}
  shuffle: {{seed: 1, blockSize: 4096}}
""")
        self.socket = str(work / "feed.sock")
        self.log = open(work / "serve.log", "wb")
        self.proc = subprocess.Popen([str(ROOT / "bin" / "shardfeed"), "serve", "-f", str(manifest), "--socket", self.socket,
                                      "--cache-dir", str(work / "cache"), "--state", str(work / "state.json"),
                                      "--metrics-addr", "", "--memory-limit", "2Gi"], stdout=self.log, stderr=subprocess.STDOUT)
        shardfeed.Client(self.socket).wait_ready(60)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def run_shardfeed(serve: Serve, workers: int, epoch: int) -> tuple[float, int, int]:
    start = time.perf_counter()
    ds = shardfeed.FeedDataset(serve.socket, rank=0, world_size=1, columns=["tokens"])
    loader = shardfeed.FeedLoader(ds, num_workers=workers)
    loader.set_epoch(epoch)
    samples, checksum = touch_loop(loader)
    return time.perf_counter() - start, samples, checksum


class _InMemory(torch.utils.data.IterableDataset):
    """Batches of tokens already in memory: what torch's DataLoader alone
    costs for the same batches (worker processes send each through shared
    memory)."""

    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        share = info.num_workers if info else 1
        base = torch.zeros(BATCH, WIDTH, dtype=torch.int32)
        for _ in range(self.n // BATCH // share):
            yield {"tokens": base.clone()}


def run_ceiling(n: int, workers: int) -> tuple[float, int, int]:
    start = time.perf_counter()
    samples, checksum = touch_loop(torch.utils.data.DataLoader(_InMemory(n), batch_size=None, num_workers=workers))
    return time.perf_counter() - start, samples, checksum


def run_pyarrow(path: Path, epoch: int) -> tuple[float, int, int]:
    start = time.perf_counter()
    f = pq.ParquetFile(path)
    samples = checksum = 0
    for rb in f.iter_batches(batch_size=BATCH, columns=["tokens"]):
        tokens = torch.from_numpy(rb.column(0).flatten().to_numpy().reshape(-1, WIDTH))
        checksum += int(tokens.max())
        samples += len(tokens)
    return time.perf_counter() - start, samples, checksum


def run_peer(cmd: str, path: Path, workers: int, epoch: int) -> tuple[float, int, int]:
    out = subprocess.run([str(ORACLE), str(PEERS), cmd, str(path), str(workers), str(BATCH), str(epoch)],
                         check=True, capture_output=True, text=True, timeout=900).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["seconds"], r["samples"], r["checksum"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=16384)
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    parser.add_argument("--docs", default=str(ROOT / "docs" / "benchmarks.md"))
    args = parser.parse_args()
    if not ORACLE.exists():
        raise SystemExit(f"{ORACLE} is missing: run make tools-python")

    rows = []
    with tempfile.TemporaryDirectory(prefix="shardfeed-bench-", dir=ROOT / "bin") as tmp:
        work = Path(tmp)
        log(f"writing {args.samples} samples of {WIDTH} int32 tokens in every format")
        paths = make_data(work, args.samples)
        serve = Serve(work, paths["mds"], args.samples)
        try:
            run_shardfeed(serve, 0, 0)  # warm the cache: every other loader reads local files too
            cases = [("shardfeed", w, lambda w, e: run_shardfeed(serve, w, e)) for w in (0, 1, 2)]
            cases += [("mosaicml-streaming", w, lambda w, e: run_peer("read-mosaic", paths["mds"], w, e)) for w in (0, 1, 2)]
            cases += [("lancedb", w, lambda w, e: run_peer("read-lance", paths["lance"], w, e)) for w in (0, 1, 2)]
            cases += [("pyarrow (Parquet, in order)", 0, lambda w, e: run_pyarrow(paths["parquet"], e))]
            cases += [("torch DataLoader alone (tensors in memory)", w, lambda w, e: run_ceiling(args.samples, w)) for w in (0, 1, 2)]
            for name, workers, fn in cases:
                rates = []
                for run in range(args.runs):
                    seconds, samples, _ = fn(workers, run + 1)
                    if samples != args.samples:
                        log(f"{name} workers={workers}: read {samples} samples of {args.samples}")
                    rates.append(samples / seconds)
                    log(f"{name} workers={workers} run {run + 1}: {samples / seconds:,.0f} samples/s")
                rows.append((name, workers, statistics.median(rates), min(rates), max(rates)))
        finally:
            serve.stop()

    def ref(name, workers):
        return next((r[2] for r in rows if r[0] == name and r[1] == workers), None)

    lines = [BEGIN, "",
             f"Command: `bin/venv/bin/python hack/bench/loaders.py --samples {args.samples} --runs {args.runs}` "
             f"(part of `make bench`). {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             f"torch {torch.__version__}, pyarrow {pa.__version__}. {args.samples} samples of {WIDTH} int32 tokens "
             f"({args.samples * WIDTH * 4 >> 20} MiB), batches of {BATCH}, one epoch per run, median of {args.runs} [min–max].",
             "",
             "| loader | DataLoader workers | samples/s | GB/s | × mosaicml-streaming | × lancedb |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, workers, med, lo, hi in rows:
        m, l = ref("mosaicml-streaming", workers), ref("lancedb", workers)
        xm = f"{med / m:.1f}" if m and name != "mosaicml-streaming" else "–"
        xl = f"{med / l:.1f}" if l and name != "lancedb" else "–"
        lines.append(f"| {name} | {workers} | {med:,.0f} [{lo:,.0f}–{hi:,.0f}] | {med * WIDTH * 4 / 1e9:.2f} | {xm} | {xl} |")
    lines += ["", END]
    table = "\n".join(lines)
    print(table)
    docs = Path(args.docs)
    text = docs.read_text()
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + table + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n## Loaders: tokens into a PyTorch loop\n\n" + table + "\n"
    docs.write_text(text)
    log(f"wrote the table into {docs}")


if __name__ == "__main__":
    main()
