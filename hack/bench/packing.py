"""The packing benchmark: padding of shardfeed's packers against Grain's
best-fit and first-fit packers and LanceDB's pack_sequences, on the same
documents' lengths.

  bin/venv-oracle/bin/python hack/bench/packing.py [--docs N] [--out bin/bench/packing.json]

For each distribution of document lengths (sequences of L tokens; every
document at most L, so that every packer sees the same ones):
- Grain (bin/venv-grain: FirstFitPackIterDataset, BestFitPackIterDataset,
  shuffle_bins off) at num_packing_bins N: the bins of a round are emitted
  when a document fits none, so a round holds about docs·N/packs documents;
- shardfeed (`shardfeed index --lengths tokens --pack-length L`, the
  counts a plan uses) with bestFit and firstFit at that many documents a
  window (an equal window), and bestFit at its default window;
- LanceDB (StreamingDataset(pack_sequences=L), one split, in order): it
  joins documents with an end-of-sequence token and cuts blocks, so it
  pads little and cuts documents; its budget, blocks_per_epoch, is exact
  here (all tokens and separators) and "auto" (its estimate).
Padding is exact, so each figure is one run. The documents' tokens are
written as Parquet under .cache/bench-packing/.

Packs across shards: the same documents written in shards (Parquet row
groups) of 100, 250 and 1000 documents, packed by shardfeed's bestFit at
windows of 64 to 4096 documents per shard (the window capped by a shard's
documents) and across shards (spec.packing.acrossShards: units of
consecutive shards holding two windows), beside the oracle, best-fit
decreasing over each window of that many consecutive documents of the
stream (bfd_windows, written here from the textbook rule: every pack of
a window closed at its end).

Then the rate: the pretraining distribution's documents into a PyTorch
loop that reads every value (touch.py), through `shardfeed serve` and the
Python client, packed (batches of 16 sequences of 4096 tokens) and not
(batches of 64 documents, each a tensor of its own: about as many
tokens), an epoch of ten passes over them: tokens per second, RUNS runs
of at most TIME_BOX seconds each.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / ".cache" / "bench-packing"
GRAIN = ROOT / "bin" / "venv-grain" / "bin" / "python"
SHARDFEED = ROOT / "bin" / "shardfeed"
BINS = (64, 1024)
# Documents a shard (a Parquet row group) and packing windows of the
# across-shards rows.
LAYOUTS = (100, 250, 1000)
WINDOWS = (64, 256, 1024, 4096)
RUNS = 3
TIME_BOX = 8.0


def log(msg: str) -> None:
    print(f"[packing] {msg}", file=sys.stderr, flush=True)


def distributions(n: int) -> dict[str, tuple[int, np.ndarray]]:
    """Lengths of n documents, by name, with each one's sequence length."""
    rng = np.random.default_rng(54)
    mixed = np.where(rng.random(n) < 0.7, rng.lognormal(5.5, 1.0, n), rng.uniform(1000, 4096, n))
    return {
        # Chat and instruction data: a few hundred tokens, a long tail.
        "sft (lognormal, mean 400)": (2048, rng.lognormal(5.5, 1.0, n)),
        # Web pretraining: mostly short pages, a third long ones.
        "pretraining (70% short, 30% long)": (4096, mixed),
        # Short documents, many to a sequence.
        "short (lognormal, mean 70)": (1024, rng.lognormal(4.0, 0.7, n)),
    } | {}


def clip(lengths: np.ndarray, seq: int) -> np.ndarray:
    return np.clip(lengths.astype(np.int64), 1, seq)


def grain(lengths_file: str, seq: int, bins: int, method: str) -> dict:
    """Runs in bin/venv-grain: Grain's packer over the documents."""
    import grain as g
    import grain.experimental as ge

    lengths = np.load(lengths_file)
    cls = ge.BestFitPackIterDataset if method == "bestFit" else ge.FirstFitPackIterDataset
    src = g.MapDataset.source([{"inputs": np.ones(int(n), np.int32)} for n in lengths]).to_iter_dataset()
    packs = used = 0
    start = time.perf_counter()
    for el in cls(src, length_struct={"inputs": seq}, num_packing_bins=bins, shuffle_bins=False):
        packs += 1
        used += int((el["inputs_segment_ids"] > 0).sum())
    return {"packs": packs, "tokens": used, "seconds": time.perf_counter() - start}


def bfd_windows(lengths: np.ndarray, seq: int, window: int) -> dict:
    """The oracle: best-fit decreasing over each window of `window`
    consecutive documents, every pack of a window closed at its end (each
    document into the pack with the least room that holds it, a new pack
    when none does)."""
    import bisect

    packs = 0
    for start in range(0, len(lengths), window):
        rooms: list[int] = []  # the open packs' room, sorted
        for n in sorted((int(x) for x in lengths[start:start + window]), reverse=True):
            k = bisect.bisect_left(rooms, n)
            if k == len(rooms):
                packs += 1
                bisect.insort(rooms, seq - n)
            else:
                bisect.insort(rooms, rooms.pop(k) - n)
    return {"packs": packs, "tokens": int(lengths.sum()), "seconds": 0.0}


def write_docs(name: str, lengths: np.ndarray, per_shard: int = 0) -> Path:
    """The documents as Parquet row groups (shards) of per_shard documents,
    one row group without it: token ids from 2 (0 pads and 1 ends a
    document in LanceDB's packing)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = DATA / ("".join(c if c.isalnum() else "-" for c in name) + (f"-{per_shard}" if per_shard else ""))
    d.mkdir(parents=True, exist_ok=True)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = (np.arange(offsets[-1], dtype=np.int64) % 50_000 + 2).astype(np.int32)
    table = pa.table({"tokens": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))})
    pq.write_table(table, d / "docs.parquet", row_group_size=per_shard or len(lengths))
    return d


def shardfeed_packs(d: Path, seq: int, window: int, method: str, across: bool = False) -> dict:
    """shardfeed's packs of the documents in d, as the plan counts them."""
    for old in glob.glob(str(d / "_shardfeed" / "packs-*.json")):
        Path(old).unlink()
    start = time.perf_counter()
    subprocess.run([str(SHARDFEED), "index", f"file://{d}/", "--format", "parquet", "--lengths", "tokens", "--pack-length", str(seq),
                    "--pack-window", str(window), "--pack-method", method, *(["--pack-across-shards"] if across else [])],
                   check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    (packs,) = glob.glob(str(d / "_shardfeed" / "packs-*.json"))
    shards = json.loads(Path(packs).read_text())["shards"]
    return {"packs": sum(s["packs"] for s in shards), "tokens": sum(s["tokens"] for s in shards), "cut": sum(s.get("cutDocs", 0) for s in shards),
            "seconds": seconds}


def lance_packs(d: Path, lengths: np.ndarray, seq: int, budget: int | str) -> dict:
    """LanceDB's StreamingDataset packing the documents of d, in order."""
    import lancedb
    import pyarrow.parquet as pq
    from lancedb.streaming import StreamingDataset

    db = lancedb.connect(str(d / "lance"))
    if "docs" not in db.list_tables().tables:
        db.create_table("docs", pq.read_table(d / "docs.parquet"))
    table = db.open_table("docs")
    ds = StreamingDataset(table, num_splits=1, shuffle=False, columns=["tokens"], pack_sequences=seq, eos_id=1, pad_id=0,
                          blocks_per_epoch=budget)
    blocks = pad = tokens = cut = 0
    start = time.perf_counter()
    for item in ds:
        ids = item["input_ids"]
        blocks += 1
        pad += int((ids == 0).sum())
        tokens += int((ids > 1).sum())
        cut += int(ids[-1] > 1)  # a block that ends inside a document: it goes on in the next
    return {"packs": blocks, "tokens": tokens, "padding": pad, "dropped": int(lengths.sum()) - tokens, "cut": cut,
            "separators": len(lengths), "seconds": time.perf_counter() - start}


MANIFEST = """apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: {name}}}
spec:
  streams:
  - {{name: docs, format: parquet, source: {{uri: "file://{data}/"}}, repeat: "10"}}
  numSplits: 1
  globalBatchSize: {batch}
  shuffle: {{seed: 1}}
{extra}"""


def rates(d: Path, seq: int, mean: float) -> list[dict]:
    """Tokens per second into a loop that reads every value: the documents
    packed, and as they are."""
    sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
    sys.path.insert(0, str(ROOT / "hack" / "bench"))
    import os

    import shardfeed
    from touch import touch_loop

    os.environ["SHARDFEED_BINARY"] = str(SHARDFEED)
    packs = json.loads(Path(glob.glob(str(d / "_shardfeed" / "packs-*.json"))[0]).read_text())["shards"]
    fill = sum(s["tokens"] for s in packs) / (sum(s["packs"] for s in packs) * seq)
    out = []
    for mode, batch, extra, per_row in (
            ("packed", 16, f"  packing: {{column: tokens, sequenceLength: {seq}}}\n", seq * fill),
            ("unpacked", 64, "", mean)):
        manifest = d / f"{mode}.yaml"
        manifest.write_text(MANIFEST.format(name=f"bench-{mode}", data=d, batch=batch, extra=extra))
        values = []
        for run in range(RUNS + 1):  # the first warms the page cache
            ds = shardfeed.FeedDataset.from_manifest(manifest, rank=0, world_size=1, directory=str(d), fresh=True, epoch=run)
            t = touch_loop(lambda: ds, TIME_BOX)
            if run:
                values.append(t["rest_samples"] * per_row / t["rest"])
        out.append({"mode": mode, "batch": batch, "tokensPerSecond": values})
        log(f"{mode}: {', '.join(f'{v / 1e6:.1f}' for v in values)} M tokens/s")
    return out


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "grain":
        print(json.dumps(grain(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--out", default=str(ROOT / "bin" / "bench" / "packing.json"))
    args = ap.parse_args()
    out: dict = {"docs": args.docs, "bins": list(BINS), "distributions": []}
    for name, (seq, raw) in distributions(args.docs).items():
        lengths = clip(raw, seq)
        total = int(lengths.sum())
        d = write_docs(name, lengths)
        np.save(d / "lengths.npy", lengths)
        rows = []

        def row(packer: str, window: str, r: dict) -> None:
            padding = r["packs"] * seq - r["tokens"] if "padding" not in r else r["padding"]
            rows.append({"packer": packer, "window": window, "packs": r["packs"], "padding": padding / (r["packs"] * seq),
                         "dropped": r.get("dropped", total - r["tokens"]), "cut": r.get("cut", 0),
                         "separators": r.get("separators", 0) / (r["packs"] * seq), "seconds": r["seconds"]})
            log(f"{name}: {packer} ({window}): {r['packs']} packs, {100 * padding / (r['packs'] * seq):.2f}% padding")

        for bins in BINS:
            equal = 0
            for method in ("firstFit", "bestFit"):
                done = subprocess.run([str(GRAIN), __file__, "grain", str(d / "lengths.npy"), str(seq), str(bins), method],
                                      check=True, capture_output=True, text=True)
                r = json.loads(done.stdout.strip().splitlines()[-1])
                row(f"Grain {method}", f"{bins} bins", r)
                equal = max(equal, round(args.docs * bins / r["packs"]))
            for method in ("firstFit", "bestFit"):
                row(f"shardfeed {method}", f"{equal} documents (= {bins} bins)", shardfeed_packs(d, seq, equal, method))
        row("shardfeed bestFit", "1024 documents (default)", shardfeed_packs(d, seq, 1024, "bestFit"))
        exact = math.ceil((total + len(lengths)) / seq)
        row("LanceDB pack_sequences", f"blocks_per_epoch {exact} (exact)", lance_packs(d, lengths, seq, exact))
        row("LanceDB pack_sequences", "blocks_per_epoch auto", lance_packs(d, lengths, seq, "auto"))
        layouts = []
        for per_shard in LAYOUTS:
            ld = write_docs(name, lengths, per_shard)
            for window in WINDOWS:
                oracle, shard, across = (bfd_windows(lengths, seq, window), shardfeed_packs(ld, seq, window, "bestFit"),
                                         shardfeed_packs(ld, seq, window, "bestFit", across=True))
                pad = {k: (r["packs"] * seq - r["tokens"]) / (r["packs"] * seq) for k, r in
                       (("oracle", oracle), ("shard", shard), ("across", across))}
                layouts.append({"docsPerShard": per_shard, "window": window, "padding": pad,
                                "packs": {"oracle": oracle["packs"], "shard": shard["packs"], "across": across["packs"]}})
                log(f"{name}: {per_shard} documents a shard, window {window}: best-fit decreasing {100 * pad['oracle']:.2f}%, "
                    f"shardfeed per shard {100 * pad['shard']:.2f}%, across shards {100 * pad['across']:.2f}%")
        out["distributions"].append({"name": name, "seqLength": seq, "tokens": total, "meanLength": total / len(lengths), "rows": rows,
                                     "layouts": layouts})
        if name.startswith("pretraining"):
            shardfeed_packs(d, seq, 1024, "bestFit")  # the default packing, which the rate's manifest names
            out["rate"] = {"distribution": name, "seqLength": seq, "timeBox": TIME_BOX, "modes": rates(d, seq, total / len(lengths))}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
