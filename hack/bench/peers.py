"""The peers' side of the loader benchmark; runs in bin/venv-oracle, which
has mosaicml-streaming and lancedb from PyPI (hack/requirements-oracle.txt).
The data sets are datasets.py's (MDS in DIR/mds, a Lance table in DIR/lance).

  peers.py read-mosaic DIR WORKERS BATCH EPOCH TIME_BOX    StreamingDataset in a DataLoader
  peers.py read-lance  DIR WORKERS BATCH EPOCH TIME_BOX    lancedb's StreamingDataset in a DataLoader
  peers.py resume-mosaic DIR WORKERS BATCH EPOCH TIME_BOX  the rest of an epoch, restored at 90 % (state_dict/load_state_dict)

A read prints touch.touch_loop's timing as JSON: the time from building the
loader to its first batch, and the rate after it, of a training loop that
reads every value.
"""

import fcntl
import json
import os
import sys
from pathlib import Path

import torch
from touch import touch_loop

WIDTH = 2048


def read_mosaic(path, workers, batch, epoch, time_box):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    # mosaicml-streaming names its shared memory per process tree: one
    # reader at a time on this machine (the compatibility tests take it too).
    lock = open(Path(__file__).resolve().parents[2] / "bin" / ".mds-oracle-read.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    clean_stale_shared_memory()

    def make():
        ds = StreamingDataset(local=f"{path}/mds", batch_size=batch, shuffle=True, shuffle_seed=epoch + 1)
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers)

    return touch_loop(make, time_box)


def resume_mosaic(path, workers, batch, epoch, time_box):
    """Time from building a StreamingDataset restored at 90 % of an epoch to
    its first batch."""
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    lock = open(Path(__file__).resolve().parents[2] / "bin" / ".mds-oracle-read.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    clean_stale_shared_memory()
    probe = StreamingDataset(local=f"{path}/mds", batch_size=batch, shuffle=True, shuffle_seed=epoch + 1)
    n = probe.num_samples
    state = probe.state_dict(int(0.9 * n) // batch * batch, True)
    state["epoch"] = 0  # a fresh dataset's state names epoch -1; the restored one iterates epoch 0
    del probe
    clean_stale_shared_memory()

    def make():
        ds = StreamingDataset(local=f"{path}/mds", batch_size=batch, shuffle=True, shuffle_seed=epoch + 1)
        ds.load_state_dict(state)
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers)

    return touch_loop(make, time_box)


def lance_token_rows(b):
    """Tokens: a dict of tensors per row, cut from the batch without a loop
    per value (faster than lancedb's default of plain Python rows)."""
    ids = torch.from_numpy(b.column("id").to_numpy())
    tokens = torch.from_numpy(b.column("tokens").flatten().to_numpy().reshape(-1, WIDTH))
    return [{"id": i, "tokens": t} for i, t in zip(ids, tokens)]


def read_lance(path, workers, batch, epoch, time_box):
    import lancedb
    from lancedb.streaming import StreamingDataset

    # lancedb sorts its permutation table in a 100 MB budget by default,
    # which 4 million rows (tabular) exceed ("Not enough memory to continue
    # external sort"); lancedb reads this variable for that budget.
    os.environ.setdefault("LANCEDB_PERM_BUILDER_MEMORY_LIMIT", str(1 << 30))

    def make():
        db = lancedb.connect(f"{path}/lance")
        table = db.open_table(db.list_tables().tables[0])
        # Tokens get a transform to tensors; other data sets lancedb's
        # default, a Python dict per row, which the DataLoader collates.
        transform = lance_token_rows if "tokens" in table.schema.names else None
        ds = StreamingDataset(table, num_splits=max(1, workers), shuffle=True, shuffle_seed=1, epoch=epoch,
                              read_batch_size=batch, transform=transform)
        # lancedb's runtime does not survive fork (it warns, and its workers
        # die here): spawn them, as it recommends.
        context = "spawn" if workers else None
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers, multiprocessing_context=context)

    return touch_loop(make, time_box)


def main():
    cmd = sys.argv[1]
    if cmd in ("read-mosaic", "read-lance", "resume-mosaic"):
        fn = {"read-mosaic": read_mosaic, "read-lance": read_lance, "resume-mosaic": resume_mosaic}[cmd]
        print(json.dumps(fn(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
