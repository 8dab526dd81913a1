"""The loader benchmark: tokens into a PyTorch training loop, shardfeed side
by side with mosaicml-streaming, lancedb and pyarrow, on the same data.

  bin/venv/bin/python hack/bench/loaders.py [--samples N] [--runs R] [--docs docs/benchmarks.md]

Data: N samples (default 32768, 256 MiB) of 2048 int32 tokens (8 KiB), made
here with numpy and written in each tool's own format: Parquet (pyarrow),
MDS (mosaicml-streaming's MDSWriter, which shardfeed serves as it is), a
Lance table (lancedb). Each loop reads one epoch in batches of 512, shuffled,
and reads every value it gets (touch.py). Every measurement is run R times (default 3,
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
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

import shardfeed  # noqa: E402
import torch  # noqa: E402
from touch import touch_loop  # noqa: E402

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


def run_shardfeed(socket: str, workers: int, epoch: int) -> dict:
    def make():
        ds = shardfeed.FeedDataset(socket, rank=0, world_size=1, columns=["tokens"])
        loader = shardfeed.FeedLoader(ds, num_workers=workers)
        loader.set_epoch(epoch)
        return loader

    return touch_loop(make)


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


def resume_shardfeed(socket: str, workers: int, epoch: int) -> dict:
    """The rest of an epoch, restored at 90 % from a checkpoint's state."""
    probe = shardfeed.FeedLoader(shardfeed.FeedDataset(socket, rank=0, world_size=1, columns=["tokens"]))
    probe.set_epoch(epoch)
    state = probe.state_dict()
    state["step"] = int(0.9 * probe.plan()["steps"])

    def make():
        loader = shardfeed.FeedLoader(shardfeed.FeedDataset(socket, rank=0, world_size=1, columns=["tokens"]), num_workers=workers)
        loader.load_state_dict(state)
        return loader

    return touch_loop(make)


def sidecar_hwm(serve: Serve) -> float:
    """The sidecar process's peak resident memory so far, MiB."""
    for line in Path(f"/proc/{serve.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_ceiling(n: int, workers: int) -> dict:
    return touch_loop(lambda: torch.utils.data.DataLoader(_InMemory(n), batch_size=None, num_workers=workers))


def run_pyarrow(path: Path) -> dict:
    def make():
        for rb in pq.ParquetFile(path).iter_batches(batch_size=BATCH, columns=["tokens"]):
            yield torch.from_numpy(rb.column(0).flatten().to_numpy().reshape(-1, WIDTH))

    return touch_loop(make)


def run_child(*args: str) -> dict:
    """A measurement of this script in its own process, so that its peak
    memory is the loader's alone."""
    out = subprocess.run([sys.executable, __file__, "--child", *map(str, args)],
                         check=True, capture_output=True, text=True, timeout=900).stdout
    return json.loads(out.strip().splitlines()[-1])


def child(argv: list[str]) -> None:
    """--child read-shardfeed|resume-shardfeed SOCKET WORKERS EPOCH | pyarrow PATH | ceiling N WORKERS"""
    cmd = argv[0]
    if cmd in ("read-shardfeed", "resume-shardfeed"):
        fn = run_shardfeed if cmd == "read-shardfeed" else resume_shardfeed
        t = fn(argv[1], int(argv[2]), int(argv[3]))
    elif cmd == "pyarrow":
        t = run_pyarrow(Path(argv[1]))
    elif cmd == "ceiling":
        t = run_ceiling(int(argv[1]), int(argv[2]))
    else:
        raise SystemExit(f"unknown --child {cmd}")
    print(json.dumps(t))


def run_peer(cmd: str, path: Path, workers: int, epoch: int) -> dict:
    out = subprocess.run([str(ORACLE), str(PEERS), cmd, str(path), str(workers), str(BATCH), str(epoch)],
                         check=True, capture_output=True, text=True, timeout=900).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=32768)
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
            run_shardfeed(serve.socket, 0, 0)  # warm the cache: every other loader reads local files too
            cases = [("shardfeed", w, lambda w, e: run_child("read-shardfeed", serve.socket, w, e)) for w in (0, 1, 2)]
            cases += [("mosaicml-streaming", w, lambda w, e: run_peer("read-mosaic", paths["mds"], w, e)) for w in (0, 1, 2)]
            cases += [("lancedb", w, lambda w, e: run_peer("read-lance", paths["lance"], w, e)) for w in (0, 1, 2)]
            cases += [("shardfeed, resumed at 90 %", w, lambda w, e: run_child("resume-shardfeed", serve.socket, w, e)) for w in (0, 2)]
            cases += [("mosaicml-streaming, resumed at 90 %", w, lambda w, e: run_peer("resume-mosaic", paths["mds"], w, e)) for w in (0, 2)]
            cases += [("pyarrow (Parquet, in order)", 0, lambda w, e: run_child("pyarrow", paths["parquet"]))]
            cases += [("torch DataLoader alone (tensors in memory)", w, lambda w, e: run_child("ceiling", args.samples, w)) for w in (0, 1, 2)]
            for name, workers, fn in cases:
                rates, firsts, epochs, rss = [], [], [], []
                for run in range(args.runs):
                    t = fn(workers, run + 1)
                    want = args.samples - int(0.9 * args.samples) // BATCH * BATCH if "resumed" in name else args.samples
                    if abs(t["samples"] - want) > BATCH:
                        log(f"{name} workers={workers}: read {t['samples']} samples of {want}")
                    rates.append(t["rest_samples"] / t["rest"] if t["rest"] else 0.0)
                    firsts.append(t["first"])
                    epochs.append(t["samples"] / (t["first"] + t["rest"]))
                    rss.append(t.get("rss_mib", 0))
                    log(f"{name} workers={workers} run {run + 1}: {rates[-1]:,.0f} samples/s after a first batch "
                        f"in {t['first']:.3f} s")
                rows.append((name, workers, statistics.median(rates), min(rates), max(rates),
                             statistics.median(firsts), statistics.median(epochs), max(rss)))
            sidecar_peak = sidecar_hwm(serve)
        finally:
            serve.stop()

    def ref(name, workers):
        return next((r[2] for r in rows if r[0] == name and r[1] == workers), None)


    lines = [BEGIN, "",
             f"Command: `bin/venv/bin/python hack/bench/loaders.py --samples {args.samples} --runs {args.runs}` "
             f"(part of `make bench`). {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             f"torch {torch.__version__}, pyarrow {pa.__version__}. {args.samples} samples of {WIDTH} int32 tokens "
             f"({args.samples * WIDTH * 4 >> 20} MiB), batches of {BATCH}, one epoch per run, median of {args.runs} [min–max]. "
             "The rate is the steady one, after the first batch; the time to the first batch (building the "
             "loader, starting its workers) and the rate over the whole epoch are in their own columns. Peak "
             "memory is the training process's (VmHWM; DataLoader workers not included), each run in its own process; "
             f"the shardfeed sidecar (`shardfeed serve`, which served every shardfeed row) peaked at {sidecar_peak:.0f} MiB.",
             "",
             "| loader | DataLoader workers | samples/s | GB/s | × mosaicml-streaming | × lancedb | first batch (s) "
             "| samples/s over the epoch | trainer peak RSS (MiB) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, workers, med, lo, hi, first, epoch_rate, rss in rows:
        m, l = ref("mosaicml-streaming", workers), ref("lancedb", workers)
        if "resumed" in name:
            m, l = ref("mosaicml-streaming, resumed at 90 %", workers), None
        xm = f"{med / m:.1f}" if m and not name.startswith("mosaicml-streaming") else "–"
        xl = f"{med / l:.1f}" if l and name != "lancedb" else "–"
        mem = f"{rss:,.0f}"
        lines.append(f"| {name} | {workers} | {med:,.0f} [{lo:,.0f}–{hi:,.0f}] | {med * WIDTH * 4 / 1e9:.2f} | {xm} | {xl} "
                     f"| {first:.2f} | {epoch_rate:,.0f} | {mem} |")
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
