"""Writes a small chat data set as JSON Lines into data/chat/: 4 files of
1000 records, each with an id, a text and 32 token ids (counting up from a
random start, so a model can learn the next one). Only the standard
library: run it with any Python 3."""

import json
import random
from pathlib import Path

WORDS = "the a data shard batch epoch step rank sidecar socket plan seed token model train loss".split()

out = Path(__file__).resolve().parent / "data" / "chat"
out.mkdir(parents=True, exist_ok=True)
rng = random.Random(0)
for part in range(4):
    with open(out / f"part-{part}.jsonl", "w") as f:
        for i in range(part * 1000, (part + 1) * 1000):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 24)))
            start = rng.randrange(1000)
            tokens = [(start + j) % 1000 for j in range(32)]
            f.write(json.dumps({"id": i, "text": text, "tokens": tokens}) + "\n")
print(f"wrote 4000 records to {out}")
