"""The formats benchmark: shardfeed serving WebDataset tars and a Megatron
indexed dataset, side by side with the formats' own loaders on the same
data in one run: webdataset's WebDataset/WebLoader and LitData on the
images (0 and 2 workers, bytes and decoded to 224×224), megatron-core's
IndexedDataset in a DataLoader on the tokens' documents, and its
GPTDataset on sequences of 2048 tokens (shardfeed: spec.packing,
concatenate), 0 and 2 workers.

  bin/venv/bin/python hack/bench/formats.py [--scale S] [--runs R] [--time-box SECONDS] [--out bin/bench/formats.json]

Data: datasets.py's images and tokens at the scale (BENCH_SCALE), written
as WebDataset tars by webdataset's ShardWriter (64 MB tars) and as a
Megatron .bin/.idx by megatron-core's IndexedDatasetBuilder (peers.py
prepare-formats). Each loop is loaders.py's: a shuffled epoch, every value
read, the rate after the first batch, each measurement R times in its own
process, interleaved; report.py writes the table into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loaders  # noqa: E402
from loaders import DECODE, DECODE_LIMIT, ORACLE, PEERS, ROOT, Serve, log, measure_all, run_child, run_peer, scale_of  # noqa: E402

BATCH = {"images": 64, "tokens": 512}
PACKED = "  packing: {column: tokens, sequenceLength: 2048, method: concatenate}\n"
# What GPTDataset gives a step (tokens, labels: the tokens shifted, the loss
# mask, positions), as a pack's columns; and the row of every column a pack
# has (cu_seqlens and doc_ids too: a tensor a row each, which GPTDataset
# does not give).
GPT_COLUMNS = "tokens,position_ids,loss_mask"
EVERY_PACKED_COLUMN = "shardfeed, every packed column (+ cu_seqlens, doc_ids)"


class FormatServe(Serve):
    """A `shardfeed serve` of one stream in a format of the formats issue,
    indexed first (its index beside the sidecar's work)."""

    def __init__(self, work: Path, data: Path, batch: int, kind: str, decode: str = "", binary: str = "shardfeed"):
        work.mkdir(parents=True, exist_ok=True)
        fmt, sub = ("webdataset", "wds") if kind == "images" else ("megatron", "megatron")
        manifest = work / "dataset.yaml"
        manifest.write_text(f"""apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: bench}}
spec:
  streams:
  - name: data
    format: {fmt}
    source: {{uri: "file://{data}/{sub}/", indexURI: "file://{work}/index/"}}
  numSplits: 2
  globalBatchSize: {batch}
  shuffle: {{seed: 1, blockSize: {loaders.shuffle_block(batch)}}}
{decode}""")
        self.start(work, manifest, binary, index=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default=os.environ.get("BENCH_SCALE", "1"))
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    ap.add_argument("--time-box", type=float, default=float(os.environ.get("BENCH_TIME_BOX", "3")))
    ap.add_argument("--out", default=str(ROOT / "bin" / "bench" / "formats.json"))
    args = ap.parse_args()
    scale = scale_of(args.scale)
    started = time.monotonic()
    images, imeta = loaders.dataset("images", scale)
    tokens, tmeta = loaders.dataset("tokens", scale)
    log("writing the WebDataset tars and the Megatron dataset (each once)")
    subprocess.run([str(ORACLE), str(HERE / "peers.py"), "prepare-formats", str(images), str(tokens)], check=True, stdout=subprocess.DEVNULL)
    versions = json.loads(subprocess.run([str(ORACLE), "-c", "import importlib.metadata as m, json; "
                                          "print(json.dumps({p: m.version(p) for p in ('webdataset', 'litdata', 'megatron-core')}))"],
                                         check=True, capture_output=True, text=True).stdout)
    result = {"command": " ".join(["bin/venv/bin/python", "hack/bench/formats.py", *sys.argv[1:]]), "scale": scale, "runs": args.runs,
              "time_box": args.time_box, "machine": f"{platform.machine()}, {os.cpu_count()} cores", "versions": versions,
              "datasets": {"images": imeta, "tokens": tmeta}, "rows": []}
    with tempfile.TemporaryDirectory(prefix="shardfeed-formats-", dir=ROOT / "bin") as tmp:
        serves = {
            "images": FormatServe(Path(tmp) / "images", images, BATCH["images"], "images"),
            # Decoded by the sidecar's libjpeg-turbo build (cgo), the
            # image's: what a pod runs.
            "images-decoded": FormatServe(Path(tmp) / "decoded", images, BATCH["images"], "images", DECODE.replace("column: image", "column: jpg"),
                                          binary="shardfeed-libjpeg"),
            "tokens": FormatServe(Path(tmp) / "tokens", tokens, BATCH["tokens"], "tokens"),
            # Sequences of 2048 tokens cut across the documents, as
            # GPTDataset gives them (spec.packing: concatenate).
            "sequences": FormatServe(Path(tmp) / "sequences", tokens, BATCH["tokens"], "tokens", PACKED),
        }
        try:
            jobs = []
            for kind, serve in serves.items():
                data = tokens if kind in ("tokens", "sequences") else images
                batch = BATCH["tokens" if kind in ("tokens", "sequences") else "images"]
                reader = "read-shardfeed-array" if kind == "images" else "read-shardfeed"
                peers = {"images": [("webdataset", "read-wds"), ("LitData", "read-litdata")],
                         "images-decoded": [("webdataset", "decode-wds"), ("LitData", "decode-litdata")],
                         "tokens": [("megatron-core IndexedDataset", "read-megatron")],
                         "sequences": [("megatron-core GPTDataset", "read-gpt")]}[kind]
                for workers in (0, 2):
                    if kind == "sequences":
                        # GPTDataset's columns (its labels are the tokens
                        # shifted by one), and every column a pack has.
                        jobs.append((f"{kind}/shardfeed", workers,
                                     lambda e, b, s=serve, w=workers: run_child("read-shardfeed-columns", s.socket, w, e, GPT_COLUMNS, b),
                                     f"{kind}: shardfeed"))
                        jobs.append((f"{kind}/{EVERY_PACKED_COLUMN}", workers,
                                     lambda e, b, s=serve, w=workers: run_child("read-shardfeed", s.socket, w, e, b),
                                     f"{kind}: {EVERY_PACKED_COLUMN}"))
                    else:
                        jobs.append((f"{kind}/shardfeed", workers,
                                     lambda e, b, s=serve, w=workers, r=reader: run_child(r, s.socket, w, e, b), f"{kind}: shardfeed"))
                    for name, cmd in peers:
                        jobs.append((f"{kind}/{name}", workers,
                                     lambda e, b, c=cmd, d=data, w=workers, n=batch, passes=1: run_peer(c, d, w, n, e, b, passes=passes),
                                     f"{kind}: {name}"))
            # The decode limit: what decoding these JPEGs costs any loader
            # on this machine's cores (report.py sets the rows against it).
            jobs.append((f"images-decoded/{DECODE_LIMIT}", loaders.EVERY_CORE,
                         lambda e, b: run_peer("decode-limit", images, 0, 0, e, b), "images-decoded: the decode limit"))
            for m in measure_all(jobs, args.runs, args.time_box):
                kind, name = m["loader"].split("/", 1)
                result["rows"].append({**m, "kind": kind, "loader": name})
        finally:
            for serve in serves.values():
                serve.stop()
    loaders.MINE.close()
    PEERS.close()
    result["seconds"] = time.monotonic() - started
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    log(f"formats: {len(result['rows'])} measurements in {result['seconds']:.0f} s, written to {out}")


if __name__ == "__main__":
    main()
