"""Writes a small corpus of raw text as JSON Lines into data/docs/ (3
files of 2000 documents: runs of English number words counting up from a
random start, so a model can learn the next word, of 2 to 60 words) and a
byte-level tokenizer.json into data/ (the 256 bytes and an end-of-text
token, no merges: GPT-2's alphabet, a model of any size learns it). The
tokenizer is written byte for byte the same every time: dataset.yaml pins
its sha256."""

import json
from pathlib import Path

import numpy as np

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]


def byte_alphabet() -> list[str]:
    """GPT-2's byte-level alphabet: byte b's character."""
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    out, extra = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def tokenizer() -> dict:
    vocab = {c: i for i, c in enumerate(byte_alphabet())}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 256, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": []},
    }


def main() -> None:
    here = Path(__file__).resolve().parent / "data"
    (here / "docs").mkdir(parents=True, exist_ok=True)
    (here / "tokenizer.json").write_text(json.dumps(tokenizer(), sort_keys=True, ensure_ascii=False), encoding="utf-8")
    rng = np.random.default_rng(0)
    for part in range(3):
        with open(here / "docs" / f"part-{part}.jsonl", "w", encoding="utf-8") as f:
            for _ in range(2000):
                start, n = int(rng.integers(len(WORDS))), int(rng.integers(2, 60))
                text = " ".join(WORDS[(start + j) % len(WORDS)] for j in range(n))
                f.write(json.dumps({"text": text}) + "\n")
    print(f"wrote 6000 documents to {here / 'docs'} and {here / 'tokenizer.json'}")


if __name__ == "__main__":  # examples/chat imports its tokenizer
    main()
