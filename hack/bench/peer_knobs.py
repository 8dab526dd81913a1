"""Each peer's throughput knobs, as its maintainers name them, and the
values peer_sweep.py tries. loaders.py runs each peer with the values the
last sweep found fastest (peer-settings.json); peers.py applies them.

Where each knob comes from (docs/benchmarks.md, "Peers at their best",
says the same for readers):

- mosaicml-streaming: its performance-tuning guide names the shuffle
  algorithm (py1e by default; py1s or py2s where shard reads are the cost)
  and, for the DataLoader, enough prefetching workers; predownload and the
  cache limit only pace downloads, which local shards do not have.
- LitData: its README's LLM pretraining recipe reads tokens with a
  TokensLoader (blocks cut from the chunks, no per-sample decode);
  max_pre_download and the DataLoader's prefetch_factor pace its reading.
- lancedb: its StreamingDataset's docstring names read_batch_size (rows a
  take, "larger values amortise per-request overhead") and num_splits (the
  parallel reads) as the throughput knobs.
- Ray Data: iter_torch_batches' prefetch_batches and the read's block
  count (override_num_blocks: one file is one block unless told), the
  parallelism its performance tips name.
- torch-dataloader-utils: split_bytes (its splits are its workers' units
  of work; create_dataloader takes no DataLoader prefetch).
"""

from __future__ import annotations

ANY = "any"  # the knob applies to every data set and worker count
WORKERS = "workers"  # …only with DataLoader workers
TOKENS = "tokens"  # …only to the tokens data set

MOSAIC = [("shuffle_algo", ["py1e", "py1s", "py2s"], ANY), ("prefetch_factor", [2, 8], WORKERS)]
LITDATA = [("max_pre_download", [2, 8], ANY), ("prefetch_factor", [2, 8], WORKERS)]

# cmd → [(knob, values with the peer's default first, where it applies)].
# "batch" and "workers" stand for the measurement's batch size and worker
# count (lancedb's num_splits defaults to one split a worker).
GRID: dict[str, list[tuple[str, list, str]]] = {
    "read-mosaic": MOSAIC,
    "decode-mosaic": MOSAIC,
    "read-litdata": [("item_loader", ["pytree", "tokens"], TOKENS)] + LITDATA,
    "decode-litdata": LITDATA,
    "read-lance": [("read_batch_size", [64, "batch"], ANY), ("num_splits", ["workers", 4], ANY)],
    "read-ray": [("prefetch_batches", [1, 4], ANY), ("override_num_blocks", [None, 16], ANY)],
    "read-tdu": [("split_bytes", [None, "16MB"], ANY)],
}


def resolve(value, batch: int, workers: int):
    if value == "batch":
        return batch
    if value == "workers":
        return max(1, workers)
    return value


def grid(cmd: str, kind: str, workers: int, batch: int) -> list[tuple[str, list]]:
    """cmd's knobs that apply to kind with that many workers, each with its
    values resolved (the peer's default first)."""
    return [(name, [resolve(v, batch, workers) for v in values]) for name, values, where in GRID.get(cmd, [])
            if where == ANY or where == WORKERS and workers > 0 or where == TOKENS and kind == "tokens"]


def label(knobs: dict) -> str:
    """knobs as a reader reads them: name=value, the defaults too."""
    return ", ".join(f"{k}={v}" for k, v in knobs.items()) or "its defaults"
