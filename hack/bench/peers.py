"""The peers' side of the loader benchmark; runs in bin/venv-oracle, which
has mosaicml-streaming and lancedb from PyPI (hack/requirements-oracle.txt).

  peers.py write-mds   PARQUET OUT        the tokens as MDS, with streaming.MDSWriter
  peers.py write-lance PARQUET OUT        the tokens as a Lance table, with lancedb
  peers.py read-mosaic DIR  WORKERS BATCH EPOCH   one epoch of StreamingDataset in a DataLoader
  peers.py read-lance  DIR  WORKERS BATCH EPOCH   one epoch of lancedb's StreamingDataset in a DataLoader
  peers.py resume-mosaic DIR WORKERS BATCH EPOCH  the rest of an epoch, restored at 90 % (state_dict/load_state_dict)

A read prints touch.touch_loop's timing as JSON: the time from building the
loader to its first batch, and the rate after it, of a training loop that
reads every tensor.
"""

import fcntl
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from touch import touch_loop

WIDTH = 2048


def write_mds(parquet, out):
    from streaming import MDSWriter

    table = pq.read_table(parquet)
    tokens = table.column("tokens").combine_chunks().flatten().to_numpy().reshape(-1, WIDTH)
    ids = table.column("id").to_numpy()
    with MDSWriter(out=out, columns={"id": "int64", "tokens": f"ndarray:int32:{WIDTH}"}, size_limit=8 << 20) as w:
        for i in range(len(ids)):
            w.write({"id": int(ids[i]), "tokens": tokens[i]})


def write_lance(parquet, out):
    import lancedb

    db = lancedb.connect(out)
    db.create_table("tokens", pq.read_table(parquet), mode="overwrite")


def read_mosaic(path, workers, batch, epoch):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    # mosaicml-streaming names its shared memory per process tree: one
    # reader at a time on this machine (the compatibility tests take it too).
    lock = open(Path(__file__).resolve().parents[2] / "bin" / ".mds-oracle-read.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    clean_stale_shared_memory()

    def make():
        ds = StreamingDataset(local=path, batch_size=batch, shuffle=True, shuffle_seed=epoch + 1)
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers)

    return touch_loop(make)


def resume_mosaic(path, workers, batch, epoch):
    """Time from building a StreamingDataset restored at 90 % of an epoch to
    its first batch."""
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    lock = open(Path(__file__).resolve().parents[2] / "bin" / ".mds-oracle-read.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    clean_stale_shared_memory()
    probe = StreamingDataset(local=path, batch_size=batch, shuffle=True, shuffle_seed=epoch + 1)
    n = probe.num_samples
    state = probe.state_dict(int(0.9 * n) // batch * batch, True)
    state["epoch"] = 0  # a fresh dataset's state names epoch -1; the restored one iterates epoch 0
    del probe
    clean_stale_shared_memory()

    def make():
        ds = StreamingDataset(local=path, batch_size=batch, shuffle=True, shuffle_seed=epoch + 1)
        ds.load_state_dict(state)
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers)

    return touch_loop(make)


def lance_rows(b):
    """One tensor per row, cut from the batch without a loop per value."""
    return list(torch.from_numpy(b.column("tokens").flatten().to_numpy().reshape(-1, WIDTH)))


def read_lance(path, workers, batch, epoch):
    import lancedb
    from lancedb.streaming import StreamingDataset

    def make():
        table = lancedb.connect(path).open_table("tokens")
        ds = StreamingDataset(table, num_splits=max(1, workers), shuffle=True, shuffle_seed=1, epoch=epoch, columns=["tokens"],
                              read_batch_size=batch, transform=lance_rows)
        # lancedb's runtime does not survive fork (it warns, and its workers
        # die here): spawn them, as it recommends.
        context = "spawn" if workers else None
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers, multiprocessing_context=context)

    return touch_loop(make)


def main():
    cmd = sys.argv[1]
    if cmd == "write-mds":
        write_mds(sys.argv[2], sys.argv[3])
    elif cmd == "write-lance":
        write_lance(sys.argv[2], sys.argv[3])
    elif cmd in ("read-mosaic", "read-lance", "resume-mosaic"):
        fn = {"read-mosaic": read_mosaic, "read-lance": read_lance, "resume-mosaic": resume_mosaic}[cmd]
        print(json.dumps(fn(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
