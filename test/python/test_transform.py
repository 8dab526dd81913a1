"""Per-batch transforms on a thread pool (Lance's transform=), the client's
own statistics, len(), and the data-wait reports, against a real
`shardfeed serve`: order, threads, both error policies with exactly-once
and resume, and a 2-rank torchrun that stays in step through skipped
batches."""

import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shardfeed
from conftest import ROOT

N = 1200
SPEC = """  numSplits: 4
  globalBatchSize: 24
  shuffle: {seed: 3, blockSize: 200}
"""
STEPS = N // 24  # 50
BAD = {137, 611, 1000}  # a transform fails on the batches holding these ids


def table(n=N):
    return pa.table({"id": pa.array(np.arange(n, dtype=np.int64)), "x": pa.array(np.arange(n, dtype=np.float32))})


def double(rb):
    """A transform: a new column, the old ones dropped but for id."""
    return pa.RecordBatch.from_arrays([rb.column("id"), pc.multiply(rb.column("x"), 2.0)], names=["id", "x2"])


def failing(rb):
    ids = set(rb.column("_shardfeed_index").to_pylist())
    if ids & BAD:
        raise RuntimeError(f"cannot transform {sorted(ids & BAD)}")
    return double(rb)


def ids_of(batch):
    return [int(i) for i in batch["_shardfeed_index"].tolist()]


def test_a_transform_runs_on_a_pool_and_batches_keep_their_order(feed_factory):
    feed = feed_factory(table(), SPEC)
    plan = feed.plan_ids(1)
    threads = set()

    def slow(rb):
        threads.add(threading.current_thread().name)
        step = int(rb.column("_shardfeed_step")[0].as_py())
        time.sleep(0.02 * ((step * 7) % 5))  # later steps often finish first
        return double(rb)

    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, transform=slow, transform_threads=4)
    loader = shardfeed.FeedLoader(ds)
    assert len(loader) == STEPS
    steps = []
    for batch in loader:
        k = int(batch["_shardfeed_step"][0])
        steps.append(k)
        assert ids_of(batch) == plan[(k, 0)]
        assert set(batch) >= {"id", "x2", "_shardfeed_pad"} and "x" not in batch
        assert (batch["x2"].numpy() == 2 * batch["id"].numpy()).all()
        if k == 9:
            assert len(loader) == STEPS - 10
    assert steps == list(range(STEPS)), "a transform on a pool must not reorder batches"
    assert len(threads) > 1, f"the transform ran on {threads}: want several threads of the pool"
    st = loader.stats()
    assert st.batches == STEPS and st.consumed_rows == N and st.skipped_batches == 0
    assert st.transform_seconds > 0.5 and st.rows_waiting_raw == 0 and st.rows_waiting_transformed == 0
    assert st.data_wait_seconds > 0


@pytest.mark.parametrize("workers", [0, 1])
def test_columns_choose_what_the_transform_is_given_and_its_new_columns_are_delivered(feed_factory, workers):
    """columns= is applied before the transform: the transform sees only
    those columns (and the _shardfeed_ ones), and the column it adds is
    delivered (it was dropped, being no column the dataset names)."""
    feed = feed_factory(table(), SPEC)

    def add(rb):
        # What it was given, as a column (a worker's transform runs in
        # another process): the data columns other than x.
        others = [n for n in rb.schema.names if n != "x" and not n.startswith("_shardfeed_")]
        given = pa.array([len(others) + (0 if "x" in rb.schema.names else 100)] * rb.num_rows, pa.int32())
        return rb.append_column("x2", pc.multiply(rb.column("x"), 2.0)).append_column("given", given)

    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, columns=["x"], transform=add)
    batch = next(iter(shardfeed.FeedLoader(ds, num_workers=workers)))
    assert (batch["given"].numpy() == 0).all(), "the transform must be given x and no other data column"
    assert {"x", "x2", "given", "_shardfeed_index"} <= set(batch) and "id" not in batch, sorted(batch)
    assert (batch["x2"].numpy() == 2 * batch["x"].numpy()).all()


@pytest.mark.parametrize("workers", [0, 1])
def test_a_failing_transform_raises_by_default_naming_the_step(feed_factory, workers):
    feed = feed_factory(table(), SPEC)
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, transform=failing), num_workers=workers)
    with pytest.raises(shardfeed.TransformError, match=r"the transform failed on step \d+ \(24 rows\).*cannot transform.*skip_batch"):
        for _ in loader:
            pass


def test_a_transform_that_changes_the_rows_is_refused(feed_factory):
    feed = feed_factory(table(), SPEC)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, transform=lambda rb: rb.slice(0, 3))
    with pytest.raises(shardfeed.TransformError, match="returned 3 rows for a batch of 24: a transform keeps every row"):
        next(iter(ds))
    with pytest.raises(ValueError, match="on_transform_error='skip': use one of 'raise', 'skip_batch'"):
        shardfeed.FeedDataset(feed.socket, transform=double, on_transform_error="skip")


def read(loader, upto=None):
    """(step, ids, pads) of the batches the loop gets, up to a step."""
    got = []
    for batch in loader:
        k = int(batch["_shardfeed_step"][0])
        got.append((k, ids_of(batch), [bool(p) for p in batch["_shardfeed_pad"].tolist()], len(batch["x2"])))
        if upto is not None and k + 1 >= upto:
            break
    return got


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_batch_pads_failed_batches_and_stays_exactly_once_through_a_resume(feed_factory, workers):
    feed = feed_factory(table(), SPEC)
    plan = feed.plan_ids(1)
    bad_steps = {k for (k, _), ids in plan.items() if set(ids) & BAD}
    assert len(bad_steps) == 3

    def loader():
        return shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, transform=failing,
                                                          transform_threads=2, on_transform_error="skip_batch"), num_workers=workers)

    first = loader()
    got = read(first, upto=20)
    state = first.state_dict()
    second = loader()
    second.load_state_dict(state)
    got += read(second)
    assert [k for k, *_ in got] == list(range(STEPS))
    for k, ids, pads, rows in got:
        assert ids == plan[(k, 0)], "a pad batch carries the failed batch's ids"
        assert rows == 24, "a pad batch has the shape of the others"
        assert all(pads) == (k in bad_steps) and any(pads) == (k in bad_steps)
    assert sorted(i for _, ids, _, _ in got for i in ids) == list(range(N))
    skipped = first.stats().skipped_batches + second.stats().skipped_batches
    assert skipped == 3 and second.stats().skipped_rows + first.stats().skipped_rows == 72


def test_a_first_batch_that_fails_is_padded_once_a_batch_shows_the_shape(feed_factory):
    feed = feed_factory(table(), SPEC)
    plan = feed.plan_ids(1)
    first_ids = set(plan[(0, 0)])
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, output="numpy", on_transform_error="skip_batch",
                               transform=lambda rb: failing(rb) if not set(rb.column("_shardfeed_index").to_pylist()) & first_ids
                               else (_ for _ in ()).throw(ValueError("first")))
    batches = list(ds)
    assert [int(b["_shardfeed_step"][0]) for b in batches] == list(range(STEPS))
    assert batches[0]["_shardfeed_pad"].all() and batches[0]["x2"].shape == batches[5]["x2"].shape
    assert ds.stats().skipped_batches == 4  # step 0 and the three BAD ones


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_loop_waits_reach_the_sidecars_histogram_per_rank(feed_factory):
    port = free_port()
    feed = feed_factory(table(), SPEC, serve_args=("--metrics-addr", f"127.0.0.1:{port}"))
    for rank in range(2):
        loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=rank, world_size=2), num_workers=1)
        assert sum(1 for _ in loader) == STEPS
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for rank in range(2):
        m = re.search(rf'shardfeed_sidecar_data_wait_seconds_count{{rank="{rank}"}} (\d+)', metrics)
        assert m and int(m.group(1)) == STEPS, f"rank {rank}: {m and m.group(0)}"


DDP = ROOT / "test" / "python" / "ddp_transform.py"


def torchrun(feed, *args):
    env = dict(os.environ, SHARDFEED_SOCKET=feed.socket, PYTHONPATH=str(ROOT / "clients" / "python" / "src"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(DDP), *args],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_two_ranks_stay_in_step_through_skipped_batches_and_a_resume(feed_factory, tmp_path):
    feed = feed_factory(table(), SPEC)
    ckpt = tmp_path / "loader.json"
    first = torchrun(feed, "--state", str(ckpt), "--stop-at", "12")
    second = torchrun(feed, "--state", str(ckpt))
    got = {}
    for out in (first, second):
        for m in re.finditer(r"rank (\d) step (\d+) pad (\w+) ids \[([\d, ]*)\]", out):
            got[(int(m.group(1)), int(m.group(2)))] = (m.group(3) == "True", [int(x) for x in m.group(4).split(",")])
    plan = feed.plan_ids(2)
    assert set(got) == {(r, k) for (k, r) in plan}
    for (r, k), (pad, ids) in got.items():
        assert ids == plan[(k, r)]
        assert pad == bool(set(ids) & BAD), f"rank {r} step {k}"
    assert sorted(i for _, ids in got.values() for i in ids) == list(range(N))
    assert "rank 0 in step: 38 all-reduces" in second and "rank 1 in step: 38 all-reduces" in second
