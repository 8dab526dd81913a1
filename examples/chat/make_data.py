"""Writes a small chat corpus as JSON Lines into data/chats/ (2 files of
1500 conversations: a user asks to count on from a number, in English
number words, and the assistant counts; one to three turns) and a
byte-level tokenizer.json into data/ (the 256 bytes, an end-of-text
token and the chat template's three tokens, no merges). The tokenizer is
written byte for byte the same every time: dataset.yaml pins its sha256."""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "raw_text"))
from make_data import WORDS, tokenizer  # noqa: E402  the raw text example's byte-level tokenizer

CHAT_TOKENS = ["<|user|>", "<|assistant|>", "<|end|>"]


def chat_tokenizer() -> dict:
    t = tokenizer()
    for i, content in enumerate(CHAT_TOKENS):
        t["added_tokens"].append({"id": 257 + i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                                  "normalized": False, "special": True})
    return t


here = Path(__file__).resolve().parent / "data"
(here / "chats").mkdir(parents=True, exist_ok=True)
(here / "tokenizer.json").write_text(json.dumps(chat_tokenizer(), sort_keys=True, ensure_ascii=False), encoding="utf-8")
rng = np.random.default_rng(1)
for part in range(2):
    with open(here / "chats" / f"part-{part}.jsonl", "w", encoding="utf-8") as f:
        for _ in range(1500):
            messages = []
            for _ in range(int(rng.integers(1, 4))):
                start, n = int(rng.integers(len(WORDS))), int(rng.integers(3, 20))
                messages.append({"role": "user", "content": f"count on from {WORDS[start]}"})
                messages.append({"role": "assistant", "content": " ".join(WORDS[(start + j) % len(WORDS)] for j in range(1, n))})
            f.write(json.dumps({"messages": messages}) + "\n")
print(f"wrote 3000 conversations to {here / 'chats'} and {here / 'tokenizer.json'}")
