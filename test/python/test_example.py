"""examples/train_ddp.py runs with torchrun against `shardfeed serve`: it
trains, checkpoints and commits, stops as a crash would, resumes from its
checkpoint, and the steps it trained are the plan's, exactly once."""

import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa

from conftest import ROOT

EXAMPLE = ROOT / "clients" / "python" / "examples" / "train_ddp.py"


def torchrun(feed, checkpoint, *args):
    env = dict(os.environ, SHARDFEED_SOCKET=feed.socket, PYTHONPATH=str(ROOT / "clients" / "python" / "src"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(EXAMPLE),
                           "--checkpoint", str(checkpoint), "--checkpoint-every", "10", *args],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def trained(out):
    """(rank, step) -> ids, from the example's output."""
    steps = {}
    for m in re.finditer(r"rank (\d+): step (\d+) loss [\d.]+ ids \[([\d, ]*)\]", out):
        steps[(int(m.group(1)), int(m.group(2)))] = [int(x) for x in m.group(3).split(",")]
    return steps


def test_the_example_trains_commits_and_resumes(feed_factory, tmp_path):
    n = 1200
    table = pa.table({
        "id": np.arange(n, dtype=np.int64),
        "tokens": pa.FixedSizeListArray.from_arrays(pa.array((np.arange(n * 16) % 50000).astype(np.int32)), 16),
    })
    feed = feed_factory(table, "  numSplits: 4\n  globalBatchSize: 24\n  shuffle: {seed: 1, blockSize: 200}\n")
    ckpt = tmp_path / "ckpt.pt"

    first = torchrun(feed, ckpt, "--max-steps", "25")
    assert "rank 0: committed step 20" in first and "stopping at step 25" in first
    second = torchrun(feed, ckpt)
    assert "resumed at epoch 0 step 20" in second and "finished 1 epoch(s)" in second

    # The lineage: steps 0-19 of the first run (its steps 20-24 were not
    # checkpointed and are trained again), then the second run's.
    a, b = trained(first), trained(second)
    lineage = {key: ids for key, ids in a.items() if key[1] < 20}
    lineage.update(b)
    plan = feed.plan_ids(2)
    assert set(lineage) == set((r, k) for (k, r) in plan)
    for (r, k), ids in lineage.items():
        assert ids == plan[(k, r)]
    seen = sorted(i for ids in lineage.values() for i in ids)
    assert seen == list(range(n))
