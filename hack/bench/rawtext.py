"""The raw-text benchmark: JSON Lines of text to packed input_ids in a
PyTorch loop, tokenized on the fly, through shardfeed's sidecar and
through Hugging Face datasets' streaming map, with the same tokenizer.json.

  bin/venv-oracle/bin/python hack/bench/rawtext.py [--texts N] [--runs R] [--out bin/bench/rawtext.json]

The texts are tokenizer_speed.py's (Zipf words of five scripts, digits,
emoji, the tokenizer tests' Unicode pieces), N of them in four JSON Lines
files under .cache/bench-rawtext/; the tokenizer is GPT-2's kind trained
by tokenizers on them (vocabulary 8,000). Each document's ids and an
end-of-text token are concatenated and cut into sequences of 2048 tokens
(packing's concatenate method: no padding), 16 sequences a batch, into
touch.py's loop (every value read), time-boxed; a rate is the tokens read
over the whole time from building the loader (its start, the first
shards' tokenization) to the last batch.

- shardfeed: spec.tokenize and spec.packing (`shardfeed index -f` counted
  the tokens and the packs), `FeedDataset.from_manifest`. The sidecar
  tokenizes each shard on the machine's cores and keeps its tokens in the
  pod's cache: an epoch from a fresh cache ("uncached": every shard read
  and tokenized) and the next epoch on that cache ("cached": the tokens
  read back).
- Hugging Face datasets: `load_dataset("json", streaming=True)`, `.map` of
  tokenizers' `encode_batch` (batched), `.map` of the concatenate-and-cut
  that its documentation's group_texts does, `with_format("torch")`, a
  DataLoader of two workers (one a core; TOKENIZERS_PARALLELISM off, as
  tokenizers asks in forked workers), batches of 16. It runs in
  bin/venv-hf (datasets), with torch and tokenizers from bin/venv-oracle.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "oracle"))
sys.path.insert(0, str(ROOT / "hack" / "bench"))

DATA = ROOT / ".cache" / "bench-rawtext"
SHARDFEED = ROOT / "bin" / "shardfeed"
HF_PYTHON = ROOT / "bin" / "venv-hf" / "bin" / "python"
SEQ, BATCH, FILES = 2048, 16, 4
TIME_BOX = 10.0


def log(msg: str) -> None:
    print(f"[rawtext] {msg}", file=sys.stderr, flush=True)


MANIFEST = """apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: bench-rawtext}}
spec:
  streams:
  - {{name: web, format: jsonl, source: {{uri: "file://{data}/"}}}}
  tokenize:
    tokenizer: {{uri: "file://{tok}", sha256: "{sha}"}}
    column: text
    endOfDocument: "<|endoftext|>"
  packing: {{column: input_ids, sequenceLength: {seq}, method: concatenate}}
  numSplits: 1
  globalBatchSize: {batch}
  shuffle: {{seed: 1}}
"""


def prepare(n: int) -> tuple[Path, Path, int]:
    """The texts in FILES files, the tokenizer, the manifest, the index and
    the packs; returns the data directory, the manifest and the bytes."""
    import tokenizer_speed
    import tokenizers_oracle

    data, tok = DATA / f"texts-{n}", DATA / "tokenizer.json"
    data.mkdir(parents=True, exist_ok=True)
    if not (data / "part-0.jsonl").exists():
        with tempfile.TemporaryDirectory() as tmp:
            whole = Path(tmp) / "all.jsonl"
            tokenizer_speed.corpus(whole, n)
            lines = whole.read_text(encoding="utf-8").splitlines(keepends=True)
            for k in range(FILES):
                (data / f"part-{k}.jsonl").write_text("".join(lines[k::FILES]), encoding="utf-8")
            tokenizers_oracle.train("gpt2", str(whole), str(tok), vocab_size=8000)
    sha = hashlib.sha256(tok.read_bytes()).hexdigest()
    manifest = DATA / f"rawtext-{n}.yaml"
    manifest.write_text(MANIFEST.format(data=data, tok=tok, sha=sha, seq=SEQ, batch=BATCH))
    if not glob.glob(str(data / "_shardfeed" / "packs-*.json")):
        subprocess.run([str(SHARDFEED), "index", f"file://{data}/", "--format", "jsonl", "--shard-size", "2Mi"], check=True, capture_output=True)
        subprocess.run([str(SHARDFEED), "index", "-f", str(manifest)], check=True, capture_output=True)
    size = sum(p.stat().st_size for p in data.glob("part-*.jsonl"))
    return data, manifest, size


def fill(data: Path) -> float:
    """The packs' share of tokens (the rest is each shard's last pack's
    padding)."""
    (packs,) = glob.glob(str(data / "_shardfeed" / "packs-*.json"))
    shards = json.loads(Path(packs).read_text())["shards"]
    return sum(s["tokens"] for s in shards) / (sum(s["packs"] for s in shards) * SEQ)


def shardfeed_epoch(manifest: str, cache: str, epoch: int) -> dict:
    """One epoch through a sidecar of its own (this process's: the
    client keeps one server a manifest and job) on the cache in cache."""
    sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
    import shardfeed
    from touch import touch_loop

    os.environ["SHARDFEED_BINARY"] = str(SHARDFEED)

    def make() -> object:
        # The server starts inside the measurement, as the peer's workers do.
        return shardfeed.FeedDataset.from_manifest(manifest, rank=0, world_size=1, directory=str(DATA), fresh=True, epoch=epoch,
                                                   serve_args=["--cache-dir", cache])

    return touch_loop(make, TIME_BOX)


def shardfeed_rates(data: Path, manifest: Path, runs: int) -> dict:
    """Tokens per second of an uncached epoch and of the cached one after
    it (a new sidecar on the same cache), runs times, each on a fresh
    cache."""
    per_row = SEQ * fill(data)
    out: dict = {"uncached": [], "cached": []}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(dir=DATA) as cache:
            for epoch, mode in ((0, "uncached"), (1, "cached")):
                done = subprocess.run([sys.executable, __file__, "shardfeed", str(manifest), cache, str(epoch)], check=True, capture_output=True, text=True)
                t = json.loads(done.stdout.strip().splitlines()[-1])
                out[mode].append(t["samples"] * per_row / (t["first"] + t["rest"]))
                log(f"shardfeed {mode}: {out[mode][-1] / 1e6:.2f} M tokens/s ({t['samples']} sequences in {t['first']:.2f} + {t['rest']:.2f} s)")
    return out


HF_CODE = """
import itertools, json, os, sys
sys.path.append({oracle_site!r})  # torch and tokenizers, after venv-hf's own packages
os.environ["TOKENIZERS_PARALLELISM"] = "false"
import datasets, torch
from datasets import load_dataset
from tokenizers import Tokenizer
sys.path.append({bench!r})  # after datasets: hack/bench/datasets.py is not it
from touch import touch_loop

tok = Tokenizer.from_file({tok!r})
eos = tok.token_to_id("<|endoftext|>")
seq = {seq}

def tokenize(batch):
    return {{"input_ids": [e.ids + [eos] for e in tok.encode_batch(batch["text"])]}}

def group_texts(batch):
    ids = list(itertools.chain.from_iterable(batch["input_ids"]))
    n = len(ids) // seq * seq
    return {{"input_ids": [ids[i:i + seq] for i in range(0, n, seq)]}}

def make():
    ds = load_dataset("json", data_files={files!r}, split="train", streaming=True)
    ds = ds.map(tokenize, batched=True, remove_columns=["text"]).map(group_texts, batched=True).with_format("torch")
    return torch.utils.data.DataLoader(ds, batch_size={batch}, num_workers=2)

rates = []
for _ in range({runs}):
    t = touch_loop(make, {time_box})
    rates.append(t["samples"] * seq / (t["first"] + t["rest"]))
    print(f"[rawtext] datasets: {{t['samples']}} sequences in {{t['first']:.2f}} + {{t['rest']:.2f}} s, complete {{t['complete']}}", file=sys.stderr)
print(json.dumps({{"rates": rates, "datasets": datasets.__version__}}))
"""


def hf_rates(data: Path, runs: int) -> dict:
    """Hugging Face datasets' streaming map, in bin/venv-hf."""
    import site

    oracle_site = next(p for p in site.getsitepackages() if p.endswith("site-packages"))
    code = HF_CODE.format(oracle_site=oracle_site, bench=str(ROOT / "hack" / "bench"), tok=str(DATA / "tokenizer.json"), seq=SEQ, batch=BATCH,
                          files=sorted(str(p) for p in data.glob("part-*.jsonl")), runs=runs, time_box=TIME_BOX)
    done = subprocess.run([str(HF_PYTHON), "-c", code], check=True, stdout=subprocess.PIPE, text=True)
    r = json.loads(done.stdout.strip().splitlines()[-1])
    for v in r["rates"]:
        log(f"datasets streaming map: {v / 1e6:.2f} M tokens/s")
    return r


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "shardfeed":
        print(json.dumps(shardfeed_epoch(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bin" / "bench" / "rawtext.json"))
    args = ap.parse_args()
    started = time.monotonic()
    data, manifest, size = prepare(args.texts)
    log(f"{args.texts} texts, {size / 1e6:.1f} MB in {FILES} files")
    ours = shardfeed_rates(data, manifest, args.runs)
    hf = hf_rates(data, args.runs)
    result = {"command": " ".join(["bin/venv-oracle/bin/python", "hack/bench/rawtext.py", *sys.argv[1:]]), "texts": args.texts, "bytes": size,
              "runs": args.runs, "timeBox": TIME_BOX, "seqLength": SEQ, "batch": BATCH, "datasets": hf["datasets"],
              "machine": f"{os.cpu_count()} cores, {platform.machine()}",
              "rows": [{"loader": "shardfeed (sidecar tokenizes, cache of tokenized shards empty)", "tokensPerSecond": ours["uncached"]},
                       {"loader": "shardfeed (the next epoch: tokens from the cache)", "tokensPerSecond": ours["cached"]},
                       {"loader": "Hugging Face datasets streaming map, 2 DataLoader workers", "tokensPerSecond": hf["rates"]}],
              "seconds": time.monotonic() - started}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
