"""Megatron-LM indexed datasets written and read by megatron-core, the
Megatron project's own package (bin/venv-oracle), for the tests of
shardfeed's megatron reader (sidecar/format/megatron): every fixture is
written here at test time by IndexedDatasetBuilder, never vendored.

  megatron_oracle.py write PREFIX --case CASE [--seed N] [--docs N] [--read UNIT]
      writes PREFIX.bin and PREFIX.idx and prints one JSON object:
      {"sequences": N, "documents": N, "dtype": "uint16"}; with --read,
      then prints its samples as read does (one start of torch, not two).
  megatron_oracle.py record DIR
      records the golden tests' oracle (sidecar/format/megatron/testdata/
      golden): each case's pair written by IndexedDatasetBuilder under
      DIR/STREAM/, and what IndexedDataset reads of each stream in
      DIR/STREAM.UNIT.jsonl (test/oracle/golden.py).
  megatron_oracle.py read PREFIX [--unit document|sequence] [--multimodal]
      prints the samples of PREFIX as megatron-core's IndexedDataset reads
      them, one JSON object per line, in order: {"tokens": [...]} (a
      document's tokens are its sequences', concatenated) and, for a
      multimodal dataset's sequences, "mode".

Cases:
  gpt         one sequence per document, uint16 tokens (the dtype
              preprocess_data.py picks for a vocabulary under 65 500), some
              documents empty;
  int32       as gpt, with int32 tokens (a large vocabulary);
  sentences   documents of several sequences (preprocess_data.py
              --split-sentences), added with add_item and end_document;
  multimodal  sequences with a mode each (multimodal=True);
  merged      two datasets concatenated by add_index, as
              merge_datasets.py does.
"""

import argparse
import json
import os
import random
import sys
import tempfile
from typing import Iterator

import golden
import numpy as np
import torch

from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder


def tokens(rng: random.Random, n: int, vocab: int) -> torch.Tensor:
    return torch.tensor([rng.randrange(vocab) for _ in range(n)], dtype=torch.int64)


def build(prefix: str, case: str, seed: int, docs: int) -> dict:
    rng = random.Random(seed)
    dtype = {"int32": np.int32}.get(case, np.uint16)
    vocab = 200_000 if case == "int32" else 50_257
    multimodal = case == "multimodal"
    if case == "merged":
        with tempfile.TemporaryDirectory() as tmp:
            parts = []
            for k in range(2):
                p = os.path.join(tmp, f"part{k}")
                build(p, "gpt", seed + k, docs // 2)
                parts.append(p)
            b = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
            for p in parts:
                b.add_index(p)
            b.finalize(prefix + ".idx")
    else:
        b = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype, multimodal=multimodal)
        for d in range(docs):
            if case == "sentences":
                for _ in range(rng.randrange(1, 5)):
                    b.add_item(tokens(rng, rng.randrange(1, 40), vocab))
            elif case == "multimodal":
                for _ in range(rng.randrange(1, 4)):
                    b.add_item(tokens(rng, rng.randrange(0, 60), vocab), mode=rng.randrange(3))
            else:
                n = 0 if d % 17 == 5 else rng.randrange(1, 300)
                b.add_item(tokens(rng, n, vocab))
            b.end_document()
        b.finalize(prefix + ".idx")
    ds = IndexedDataset(prefix, multimodal=multimodal)
    return {"sequences": len(ds), "documents": len(ds.document_indices) - 1, "dtype": np.dtype(dtype).name}


def samples(prefix: str, unit: str, multimodal: bool) -> Iterator[dict]:
    ds = IndexedDataset(prefix, multimodal=multimodal)
    if unit == "sequence":
        for i in range(len(ds)):
            if multimodal:
                seq, mode = ds[i]
                yield {"tokens": seq.tolist(), "mode": int(mode)}
            else:
                yield {"tokens": ds[i].tolist()}
        return
    di = ds.document_indices
    for d in range(len(di) - 1):
        seqs = [ds[int(s)] for s in range(int(di[d]), int(di[d + 1]))]
        yield {"tokens": np.concatenate(seqs).tolist() if seqs else []}


def read(prefix: str, unit: str, multimodal: bool) -> None:
    for s in samples(prefix, unit, multimodal):
        sys.stdout.write(json.dumps(s) + "\n")


# The golden streams: a stream's pairs (case, seed), its documents a pair,
# and the units its answers are read in. Small: the answers are committed.
STREAMS = {
    "gpt-merged": ([("gpt", 1), ("merged", 2)], 40, ["document"]),
    "int32": ([("int32", 1)], 40, ["document"]),
    "sentences": ([("sentences", 1)], 60, ["document", "sequence"]),
    "multimodal": ([("multimodal", 1)], 80, ["sequence"]),
}


def record(dir_: str) -> None:
    golden.fresh(dir_)
    cases = {}
    for stream, (pairs, docs, units) in STREAMS.items():
        os.makedirs(os.path.join(dir_, stream))
        written = {}
        for case, seed in pairs:
            written[case] = build(os.path.join(dir_, stream, case), case, seed, docs)
        for unit in units:
            multimodal = stream == "multimodal"
            rows = [s for case, _ in pairs for s in samples(os.path.join(dir_, stream, case), unit, multimodal)]
            golden.write_answers(os.path.join(dir_, f"{stream}.{unit}.jsonl"), rows)
        cases[stream] = {"pairs": written, "units": units}
    golden.write_manifest(dir_, ["megatron-core", "numpy", "torch"], cases)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("prefix")
    w.add_argument("--case", required=True, choices=["gpt", "int32", "sentences", "multimodal", "merged"])
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--docs", type=int, default=400)
    w.add_argument("--read", choices=["document", "sequence"])
    rec = sub.add_parser("record")
    rec.add_argument("dir")
    r = sub.add_parser("read")
    r.add_argument("prefix")
    r.add_argument("--unit", default="document", choices=["document", "sequence"])
    r.add_argument("--multimodal", action="store_true")
    a = ap.parse_args()
    if a.cmd == "write":
        print(json.dumps(build(a.prefix, a.case, a.seed, a.docs)))
        if a.read:
            read(a.prefix, a.read, a.case == "multimodal")
    elif a.cmd == "record":
        record(a.dir)
    else:
        read(a.prefix, a.unit, a.multimodal)


if __name__ == "__main__":
    main()
