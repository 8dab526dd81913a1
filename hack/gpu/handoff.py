"""The GPU hand-off measured (issue 59), on a machine with a CUDA device:
host-to-device bandwidth and step time of FeedLoader(device="cuda")
(one DMA from each page-locked slot, copied a batch ahead on a side
stream) beside the two ways a loop gets batches to the GPU today: a
DataLoader's pin_memory=True (a pinned copy, then the DMA) and a plain
.to("cuda") of pageable memory. It checks the tensors on the device
against the plan first.

  bin/venv/bin/python hack/gpu/handoff.py [--device cuda] [--batches 200] [--step-ms 5] [--out bin/bench/gpu.json]

Data: 16 384 rows of 8192 int32 tokens (512 MiB of Parquet, written once
to .cache/gpu-handoff/), batches of 256 rows (8 MiB), served by
`FeedDataset.from_manifest` (bin/shardfeed). Each measurement reads
--batches batches twice: with no GPU work (the copy's own rate, GB/s) and
with a GPU step of --step-ms per batch (torch.cuda._sleep, calibrated):
the step time a training loop sees, the copy hidden or not. Runs on the
CPU with --device cpu (the harness's own check; nothing GPU is measured).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

import shardfeed  # noqa: E402

ROWS, WIDTH, BATCH = 16384, 8192, 256
DATA = ROOT / ".cache" / "gpu-handoff"
MANIFEST = """apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata:
  name: gpu-handoff
spec:
  streams:
    - name: tokens
      format: parquet
      source:
        uri: data/
  numSplits: 1
  globalBatchSize: %d
  shuffle: {seed: 1, blockSize: 4096}
""" % BATCH


def write_data() -> Path:
    manifest = DATA / "dataset.yaml"
    if not manifest.exists():
        (DATA / "data").mkdir(parents=True, exist_ok=True)
        ids = np.arange(ROWS, dtype=np.int64)
        tokens = (ids[:, None] * 7 + np.arange(WIDTH)[None, :]).astype(np.int32) % 50000
        pq.write_table(pa.table({"id": ids, "tokens": pa.FixedSizeListArray.from_arrays(pa.array(tokens.ravel()), WIDTH)}),
                       DATA / "data" / "part-0.parquet", row_group_size=1024)
        subprocess.run([str(ROOT / "bin" / "shardfeed"), "index", f"file://{DATA / 'data'}/", "--format", "parquet"], check=True,
                       stdout=subprocess.DEVNULL)
        manifest.write_text(MANIFEST)
    return manifest


def calibrate(device, ms: float) -> int:
    """Cycles of torch.cuda._sleep that take about ms milliseconds."""
    if device.type != "cuda" or ms <= 0:
        return 0
    cycles = 1_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return int(cycles * ms / max(start.elapsed_time(end), 1e-3))


def epochs(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def run(ds, kind: str, device, batches: int, cycles: int) -> dict:
    """`batches` batches read: {"seconds", "bytes", "gbps", "step_ms"}."""
    if kind == "shardfeed device=":
        loader = shardfeed.FeedLoader(ds, device=device)
        move = lambda b: b["tokens"]  # noqa: E731
    elif kind == "pin_memory=True":
        loader = shardfeed.FeedLoader(ds, pin_memory=True)
        move = lambda b: b["tokens"].to(device, non_blocking=True)  # noqa: E731
    else:  # pageable
        loader = shardfeed.FeedLoader(ds)
        move = lambda b: b["tokens"].to(device, non_blocking=True)  # noqa: E731
    moved = 0
    start = None
    for i, batch in enumerate(epochs(loader)):
        t = move(batch)
        if i == 0:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            continue
        moved += t.numel() * t.element_size()
        if cycles:
            torch.cuda._sleep(cycles)
        if i == batches:
            break
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "bytes": moved, "gbps": moved / seconds / 1e9, "step_ms": seconds / batches * 1e3}


def check(ds, device) -> None:
    """The first batches on the device are the plan's rows, bit for bit."""
    for i, batch in enumerate(shardfeed.FeedLoader(ds, device=device)):
        ids = batch["id"].to("cpu").long()
        want = ((ids[:, None] * 7 + torch.arange(WIDTH)[None, :]) % 50000).to(torch.int32)
        assert batch["tokens"].device.type == device.type, batch["tokens"].device
        assert torch.equal(batch["tokens"].to("cpu"), want), f"batch {i}: the device's tokens differ from the plan's rows"
        if i == 20:
            break


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--step-ms", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bin" / "bench" / "gpu.json"))
    args = ap.parse_args()
    device = torch.device(args.device)
    ds = shardfeed.FeedDataset.from_manifest(str(write_data()), job="gpu-handoff", fresh=True, directory=str(DATA),
                                             binary=str(ROOT / "bin" / "shardfeed"))
    check(ds, device)
    cycles = calibrate(device, args.step_ms)
    kinds = ("shardfeed device=", "pin_memory=True", "pageable .to()")
    rows: dict[str, dict[str, list[float]]] = {k: {"gbps": [], "step_ms": []} for k in kinds}
    for _ in range(args.runs):  # interleaved, as the loader benchmark's rows are
        for kind in kinds:
            rows[kind]["gbps"].append(run(ds, kind, device, args.batches, 0)["gbps"])
            rows[kind]["step_ms"].append(run(ds, kind, device, args.batches, cycles)["step_ms"])
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "none (CPU)"
    out = {"card": card, "torch": torch.__version__, "machine": platform.machine(), "batch_bytes": BATCH * WIDTH * 4,
           "batches": args.batches, "step_ms": args.step_ms, "runs": args.runs,
           "rows": {k: {m: {"median": statistics.median(v), "min": min(v), "max": max(v)} for m, v in r.items()} for k, r in rows.items()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    for k, r in out["rows"].items():
        print(f"{k:20s} H2D {r['gbps']['median']:6.2f} GB/s [{r['gbps']['min']:.2f}–{r['gbps']['max']:.2f}]  "
              f"step {r['step_ms']['median']:6.2f} ms [{r['step_ms']['min']:.2f}–{r['step_ms']['max']:.2f}] ({card})")


if __name__ == "__main__":
    main()
