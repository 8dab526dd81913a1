"""Writes a small corpus of documents as Parquet into data/docs/: 3 files
of 2000 documents, each a run of token ids counting up from a random start
(so a model can learn the next one), of 4 to 300 tokens: some longer than
the 128-token sequences dataset.yaml packs them into."""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

VOCAB = 1000

out = Path(__file__).resolve().parent / "data" / "docs"
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
for part in range(3):
    docs = []
    for _ in range(2000):
        n = int(rng.integers(4, 300)) if rng.random() < 0.1 else int(rng.integers(4, 60))
        start = int(rng.integers(VOCAB))
        docs.append([(start + j) % VOCAB for j in range(n)])
    pq.write_table(pa.table({"tokens": pa.array(docs, pa.list_(pa.int32()))}), out / f"part-{part}.parquet", row_group_size=500)
print(f"wrote 6000 documents to {out}")
