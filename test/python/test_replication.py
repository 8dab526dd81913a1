"""Replication groups (tensor, context and pipeline parallelism) against a
real `shardfeed serve --data-parallel-size`: ranks of a torch DeviceMesh
under torchrun receive the batches of their data-parallel coordinates, the
ones `shardfeed plan --ids --mesh` prints, identical across each group."""

import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

import shardfeed
from conftest import ROOT, run_shardfeed

N = 1200
SPEC = """  numSplits: 4
  globalBatchSize: 24
  shuffle: {seed: 5, blockSize: 100}
"""
STEPS = N // 24


def table():
    return pa.table({"id": pa.array(np.arange(N, dtype=np.int64))})


class Mesh(SimpleNamespace):
    """What data_parallel_coordinates reads of a DeviceMesh."""

    def get_coordinate(self):
        return self.coordinate


@pytest.mark.parametrize("names,shape,coordinate,want", [
    (("dp",), (8,), (5,), (5, 8)),
    (("dp", "tp"), (4, 2), (3, 1), (3, 4)),
    (("pp", "dp", "tp"), (2, 2, 2), (1, 0, 1), (0, 2)),
    (("dp_replicate", "dp_shard", "tp"), (2, 4, 2), (1, 2, 0), (6, 8)),
])
def test_data_parallel_coordinates_of_a_mesh(names, shape, coordinate, want):
    mesh = Mesh(mesh_dim_names=names, mesh=np.zeros(shape), coordinate=coordinate)
    assert shardfeed.data_parallel_coordinates(mesh) == want


@pytest.mark.parametrize("kwargs,says", [
    ({"device_mesh": Mesh(mesh_dim_names=("tp",), mesh=np.zeros(2), coordinate=(0,))}, "no data-parallel dimension"),
    ({"device_mesh": Mesh(mesh_dim_names=None, mesh=np.zeros(2), coordinate=(0,))}, "no mesh_dim_names"),
    ({"dp_rank": 1}, "go together"),
    ({"dp_rank": 2, "dp_size": 2}, "outside dp_size=2"),
])
def test_bad_coordinates_are_refused(kwargs, says):
    with pytest.raises(ValueError, match=says):
        shardfeed.FeedDataset("/nonexistent.sock", **kwargs)


def plan_mesh(feed, mesh):
    out = run_shardfeed(feed.minio, "plan", "-f", str(feed.manifest), "--ids", "--mesh", mesh).stdout
    return {(d["step"], d["rank"]): (d["dpRank"], d["ids"]) for d in map(json.loads, out.splitlines())}


@pytest.mark.parametrize("mesh", ["dp=2,tp=2", "pp=2,dp=2,tp=2"])
def test_mesh_ranks_under_torchrun_get_their_groups_batches(feed_factory, mesh):
    feed = feed_factory(table(), SPEC, serve_args=("--data-parallel-size", "2"))
    size = 1
    for d in mesh.split(","):
        size *= int(d.split("=")[1])
    env = dict(os.environ, SHARDFEED_SOCKET=feed.socket, PYTHONPATH=str(ROOT / "clients" / "python" / "src"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(size),
                           str(ROOT / "test" / "python" / "ddp_mesh.py"), "--mesh", mesh],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {}
    for m in re.finditer(r"rank (\d+) dp (\d)/2 step (\d+) ids \[([\d, ]*)\]", proc.stdout):
        got[(int(m.group(3)), int(m.group(1)))] = (int(m.group(2)), [int(x) for x in m.group(4).split(",")])
    plan = plan_mesh(feed, mesh)
    assert len(plan) == STEPS * size and got == plan
    # The data-parallel ranks together train every sample once.
    assert sorted(i for (k, r), (dp, ids) in plan.items() if r == min(q for (s, q), (d, _) in plan.items() if s == k and d == dp)
                  for i in ids) == list(range(N))
    assert all(f"rank {r} read {STEPS} steps" in proc.stdout for r in range(size))


def test_a_rank_without_coordinates_is_told_to_give_them(feed_factory):
    feed = feed_factory(table(), SPEC, serve_args=("--data-parallel-size", "2"))
    with pytest.raises(shardfeed.SidecarError, match=r"declares a data-parallel size of 2.*dp_rank and dp_size"):
        next(iter(shardfeed.FeedDataset(feed.socket, rank=0, world_size=4)))
    with pytest.raises(shardfeed.SidecarError, match="dp_size=4, but this job declares a data-parallel size of 2"):
        next(iter(shardfeed.FeedDataset(feed.socket, rank=0, world_size=4, dp_rank=0, dp_size=4)))
    batch = next(iter(shardfeed.FeedDataset(feed.socket, rank=3, world_size=4, dp_rank=1, dp_size=2, output="numpy")))
    assert len(batch["id"]) == 12  # globalBatchSize / dp_size


SCHEDULE = """  numSplits: 4
  globalBatchSize: 8
  shuffle: {seed: 5, blockSize: 100}
  schedule:
    phases:
    - {startStep: 0, globalBatchSize: 4}
    - {startStep: 10, globalBatchSize: 16}
    - {startStep: 20, repeatSteps: 3}
"""


def test_micro_batches_follow_a_schedules_batch_sizes(feed_factory):
    """A ramp-up changes the local batch size at its step: the loader cuts
    each step into its own number of micro-batches, and len() counts them
    as they come (from the sidecar's batchSizes)."""
    feed = feed_factory(table(), SCHEDULE)
    status = shardfeed.Client(feed.socket).status()
    assert status["batchSizes"] == [{"fromStep": 0, "globalBatchSize": 4}, {"fromStep": 10, "globalBatchSize": 16}]
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=2, output="numpy"), micro_batch_size=2)
    expected = len(loader)
    assert expected == 10 * 1 + (N // 8 - 10) * 4  # 150 steps: 2 rows a step, then 8
    sizes = {}
    count = 0
    for micro in loader:
        count += 1
        sizes[int(micro["_shardfeed_step"][0])] = int(micro["_shardfeed_micros"])
    assert count == expected
    assert sizes[9] == 1 and sizes[10] == 4 and sizes[21] == 4


BUCKETED = """  numSplits: 4
  globalBatchSize: 8
  shuffle: {seed: 5, blockSize: 100}
  bucketing: {column: tokens, boundaries: [4], batchSizes: [16, 8]}
"""


def test_micro_batches_follow_each_buckets_batch_size(feed_factory, minio):
    """A bucketed plan with a batch size per bucket: every global batch is
    of one bucket (its documents' lengths, as pyarrow counts them), of that
    bucket's size; status's batchSizes is null, and len() counts the
    micro-batches from the sidecar's /v1/steps, as many as come."""
    rng = np.random.default_rng(54)
    lengths = rng.integers(1, 8, size=N)
    tokens = pa.array([list(range(n)) for n in lengths], type=pa.list_(pa.int32()))
    feed = feed_factory(pa.table({"id": pa.array(np.arange(N, dtype=np.int64)), "tokens": tokens}), BUCKETED, start=False)
    uri = f"s3://{feed.bucket}/web/"
    run_shardfeed(minio, "index", uri, "--endpoint", minio.endpoint, "--insecure", "--selection-only", "--lengths", "tokens", "--buckets", "4")
    feed.start()
    status = shardfeed.Client(feed.socket).status()
    assert status["batchSizes"] is None and status["planVersion"] == 5
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=2, output="numpy"), micro_batch_size=2)
    expected = len(loader)
    short = int((lengths < 4).sum())
    # Bucket 0 (short documents) in steps of 16 rows, 8 a rank, 4 micro-batches;
    # bucket 1 in steps of 8 rows, 2 micro-batches.
    assert expected == (short // 16) * 4 + ((N - short) // 8) * 2
    count, rows = 0, {}
    for micro in loader:
        count += 1
        k = int(micro["_shardfeed_step"][0])
        rows.setdefault(k, []).extend(int(i) for i in micro["id"])
        assert int(micro["_shardfeed_micros"]) in (2, 4)
    assert count == expected
    for k, ids in rows.items():
        short_rows = {bool(lengths[i] < 4) for i in ids}
        assert len(short_rows) == 1, f"step {k} mixes buckets"
        assert len(ids) == (8 if short_rows == {True} else 4), f"step {k}: {len(ids)} rows on rank 0"
