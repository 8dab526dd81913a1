"""The tokenizer benchmark: shardfeed's Go tokenizer (sidecar/tokenizer,
through hack/tokbench) beside Hugging Face tokenizers' encode_batch on the
same tokenizer.json files and texts, on one core and on every core.

  bin/venv-tok/bin/python hack/bench/tokenizer_speed.py [--texts N] [--runs R] [--out bin/bench/tokenize.json]

The texts: N sentences of words drawn from a Zipf distribution over a
synthetic vocabulary in Latin, Cyrillic, Greek, Arabic and CJK scripts,
with digits, punctuation, emoji and the Unicode pieces of the tokenizer
tests (test/oracle/tokenizers_oracle.py). The tokenizers: GPT-2's, Llama
3's and BERT's kinds, trained by tokenizers on those texts (vocabulary
8,000), and T5's as transformers converts a sentencepiece model trained on
them (nmt_nfkc: a Precompiled normalizer, Metaspace, Unigram). Each
run starts from a fresh tokenizer (an empty cache of words), tokenizers'
runs in processes of their own, one core being RAYON_NUM_THREADS=1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "oracle"))

import tokenizers_oracle  # noqa: E402

SCRIPTS = ["abcdefghijklmnopqrstuvwxyz", "абвгдежзийклмнопрстуфхцчшщыэюя", "αβγδεζηθικλμνξοπρστυφχψω", "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
           "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长"]


def corpus(path: Path, n: int) -> int:
    rng = random.Random(11)
    words = []
    for i in range(20_000):
        script = SCRIPTS[0] if i % 5 < 3 else rng.choice(SCRIPTS[1:])
        length = 1 if script is SCRIPTS[-1] and rng.random() < 0.5 else rng.randint(2, 9)
        words.append("".join(rng.choice(script) for _ in range(length)))
    weights = [1 / (k + 1) for k in range(len(words))]
    size = 0
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            parts = rng.choices(words, weights, k=rng.randint(8, 60))
            for k in range(len(parts)):
                r = rng.random()
                if r < 0.08:
                    parts[k] += rng.choice(",.;:!?")
                elif r < 0.11:
                    parts[k] = str(rng.randint(0, 10**rng.randint(1, 7)))
                elif r < 0.12:
                    parts[k] = rng.choice("😀👍🎉🇯🇵")
            text = " ".join(parts)
            if i % 50 == 0:
                text += " " + rng.choice(tokenizers_oracle.PIECES)
            size += len(text.encode())
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    return size


def hf(tokenizer: Path, texts_path: Path, threads: int | None, runs: int) -> dict:
    """tokenizers' encode_batch, in a process of its own (RAYON_NUM_THREADS
    is read when its thread pool starts)."""
    env = dict(os.environ)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    code = f"""
import json, time
from tokenizers import Tokenizer
texts = [json.loads(l)["text"] for l in open({str(texts_path)!r}, encoding="utf-8")]
size = sum(len(t.encode()) for t in texts)
mb, tok = [], []
for _ in range({runs}):
    t = Tokenizer.from_file({str(tokenizer)!r})
    s = time.perf_counter()
    n = sum(len(e.ids) for e in t.encode_batch(texts))
    d = time.perf_counter() - s
    mb.append(size / d / 1e6); tok.append(n / d)
print(json.dumps({{"mb_per_s": mb, "tokens_per_s": tok}}))
"""
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bin" / "bench" / "tokenize.json"))
    args = ap.parse_args()
    started = time.monotonic()
    cores = os.cpu_count() or 1
    import tokenizers

    result = {"command": " ".join(["bin/venv-tok/bin/python", "hack/bench/tokenizer_speed.py", *sys.argv[1:]]), "runs": args.runs,
              "machine": f"{platform.machine()}, {cores} cores", "tokenizers": tokenizers.__version__, "rows": []}
    with tempfile.TemporaryDirectory(prefix="shardfeed-tokenize-", dir=ROOT / "bin") as tmp:
        texts = Path(tmp) / "texts.jsonl"
        result["bytes"] = corpus(texts, args.texts)
        result["texts"] = args.texts
        tokbench = Path(tmp) / "tokbench"
        subprocess.run(["go", "build", "-o", str(tokbench), "./hack/tokbench"], cwd=ROOT, check=True)
        for kind in ("gpt2", "llama3", "bert", "t5-precompiled"):
            file = Path(tmp) / f"{kind}.json"
            if kind == "t5-precompiled":
                lines = [json.loads(line)["text"] for line in texts.open(encoding="utf-8")]
                # Here, not at the top: rawtext.py borrows corpus() in
                # bin/venv-oracle, which has no sentencepiece.
                import tokenizer_matrix

                tokenizer_matrix.t5_from(lines, tmp).save(str(file))
            else:
                tokenizers_oracle.train(kind, str(texts), str(file), vocab_size=8000)
            ours = json.loads(subprocess.run([str(tokbench), "-tokenizer", str(file), "-corpus", str(texts), "-runs", str(args.runs)],
                                             check=True, capture_output=True, text=True).stdout)
            for r in ours:
                result["rows"].append({"tokenizer": kind, "loader": "shardfeed (Go)", "cores": r["cores"], "mb_per_s": r["mb_per_s"],
                                       "tokens_per_s": r["tokens_per_s"]})
            for threads in (1, None):
                r = hf(file, texts, threads, args.runs)
                result["rows"].append({"tokenizer": kind, "loader": "tokenizers encode_batch", "cores": threads or cores, **r})
            print(f"[bench] tokenize {kind}: done", file=sys.stderr)
    result["seconds"] = time.monotonic() - started
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"[bench] tokenize: {len(result['rows'])} rows in {result['seconds']:.0f} s, written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
