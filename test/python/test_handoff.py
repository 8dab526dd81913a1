"""The hand-off through shared memory (issue 25): the sidecar writes each
batch once into a memfd segment the training process maps, and the tensors
are views of it. Against a real `shardfeed serve` on a real MinIO: the
views, the slots' reuse and bound, batches the loop keeps, every column
type through DataLoader workers, a sidecar kill, a trainer kill, and a
client that misbehaves."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pyarrow as pa
import pytest
import torch

import shardfeed
from conftest import ROOT, in_workers, relay

SPEC = """  numSplits: 6
  globalBatchSize: 24
  shuffle: {seed: 5, blockSize: 300}
"""
N, WIDTH = 960, 2048  # 8 KiB samples: 40 steps of 192 KiB batches
STEPS = N // 24
SLOTS = 4  # the sidecar's default --handoff-slots


def table(n=N, width=WIDTH):
    ids = np.arange(n, dtype=np.int64)
    return pa.table({
        "id": pa.array(ids),
        "tokens": pa.FixedSizeListArray.from_arrays(pa.array((np.arange(n * width) % 50000).astype(np.int32)), width),
        "text": pa.array([f"sample {i} " + "x" * (i % 7) for i in ids]),
        "blob": pa.array([bytes([i % 251]) * (i % 5 + 1) for i in ids], type=pa.binary()),
    })


def expected_tokens(ids):
    return (ids[:, None] * WIDTH + torch.arange(WIDTH)) % 50000


def memfd_ranges(name="shardfeed-batch"):
    """The address ranges of this process's mappings of the sidecar's segments."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            if f"/memfd:{name}" in line:
                lo, hi = line.split()[0].split("-")
                out.append((int(lo, 16), int(hi, 16)))
    return out


def in_segment(t: torch.Tensor) -> bool:
    return any(lo <= t.data_ptr() and t.data_ptr() + t.nbytes <= hi for lo, hi in memfd_ranges())


def check(batch, plan):
    k = int(batch["_shardfeed_step"][0])
    ids = batch["_shardfeed_index"]
    assert ids.tolist() == plan[(k, 0)], f"step {k}"
    assert torch.equal(batch["tokens"].long(), expected_tokens(ids)), f"step {k}: tokens changed under the loop"
    assert batch["text"] == [f"sample {i} " + "x" * (i % 7) for i in ids.tolist()]
    assert batch["blob"] == [bytes([i % 251]) * (i % 5 + 1) for i in ids.tolist()]
    return k


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_are_views_of_the_sidecars_shared_memory(feed_factory, workers):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    client = shardfeed.Client(feed.socket)
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1), num_workers=workers, **relay(workers))
    steps, most = [], 0
    for batch in loader:
        steps.append(check(batch, plan))
        # Every fixed-width column, here in the training process, is a view
        # of a segment the sidecar wrote: nothing was copied on this side,
        # and nothing was pickled from the workers (strings and bytes too).
        for name in ("tokens", "id", "_shardfeed_index"):
            assert in_segment(batch[name]), f"{name} is not in the sidecar's shared memory"
        most = max(most, client.status()["handoff"]["segments"])
    assert steps == list(range(STEPS))
    # Bounded: at most SLOTS segments per stream (one stream per worker).
    assert 0 < most <= SLOTS * max(workers, 1)
    if workers == 0:
        # Reclaimed: 40 batches went through at most SLOTS segments.
        assert loader.dataset._stream is not None and loader.dataset._stream._serial <= SLOTS
        assert client.status()["handoff"]["inlineBatches"] == 0


@pytest.mark.parametrize("workers", [0, 2])
def test_a_batch_the_loop_keeps_is_never_overwritten(feed_factory, workers):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    kept = list(shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0), num_workers=workers, **relay(workers)))
    assert [check(b, plan) for b in kept] == list(range(STEPS))
    handoff = shardfeed.Client(feed.socket).status()["handoff"]
    # The loop held every slot: the sidecar sent the rest in the stream
    # rather than write into memory a tensor still views, or take more.
    assert handoff["inlineBatches"] >= STEPS - SLOTS * max(workers, 1)
    assert sum(in_segment(b["tokens"]) for b in kept) <= SLOTS * max(workers, 1)


def test_the_slot_is_released_when_the_last_view_goes(feed_factory):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)
    it = iter(ds)
    first = next(it)
    stream = ds._stream
    slot, gen = stream.placement.slot, stream.placement.gen
    tokens = first["tokens"][3]  # a view of a view keeps it too
    del first
    second = next(it)  # the client holds nothing of the first any more
    assert stream.placement.slot != slot
    assert int(stream.words[slot]) != gen, "released while a tensor still views the batch"
    del tokens
    assert int(stream.words[slot]) == gen, "not released once nothing views the batch"
    del second
    it.close()


def test_without_shared_memory_the_batches_are_the_same(feed_factory):
    feed = feed_factory(table(), SPEC, row_group_size=40, serve_args=("--handoff-memory", "0"))
    plan = feed.plan_ids(1)
    for handoff in (True, False):
        ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0, handoff=handoff)
        got = []
        for batch in shardfeed.FeedLoader(ds, num_workers=2, worker_init_fn=in_workers):
            got.append(check(batch, plan))
            assert not in_segment(batch["tokens"])
        assert got == list(range(STEPS))


class PerSample(torch.utils.data.IterableDataset):
    """A user's own dataset over a FeedDataset, reading each batch's
    columns in the DataLoader workers (to decode or augment there)."""

    def __init__(self, ds):
        self.ds = ds

    def __iter__(self):
        for b in self.ds:
            # "id" as the batch gave it: a view of the shared memory,
            # which the DataLoader copies when it sends the item over.
            yield {"step": int(b["_shardfeed_step"][0]), "ids": b["_shardfeed_index"].clone(), "id": b["id"],
                   "tokens": b["tokens"][:, :16].clone(), "text": [t.upper() for t in b["text"]], "blob": [x[::-1] for x in b["blob"]]}


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_a_dataset_of_the_users_own_reads_the_batches_in_the_workers(feed_factory, workers):
    # The red team's reproduction: in a worker, FeedDataset yielded
    # SharedBatch objects ("'SharedBatch' object is not subscriptable").
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    loader = torch.utils.data.DataLoader(PerSample(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)),
                                         batch_size=None, num_workers=workers)
    steps = []
    for b in loader:
        k, ids = b["step"], b["ids"].tolist()
        assert ids == plan[(k, 0)], f"step {k}"
        assert b["id"].tolist() == ids
        assert torch.equal(b["tokens"].long(), expected_tokens(b["ids"])[:, :16])
        assert b["text"] == [(f"sample {i} " + "x" * (i % 7)).upper() for i in ids]
        assert b["blob"] == [(bytes([i % 251]) * (i % 5 + 1))[::-1] for i in ids]
        steps.append(k)
    assert sorted(steps) == list(range(STEPS))
    # The workers read the batches in shared memory, not through the socket.
    handoff = shardfeed.Client(feed.socket).status()["handoff"]
    assert handoff["batches"] >= STEPS and handoff["inlineBatches"] == 0, handoff


class SlotProbe(torch.utils.data.IterableDataset):
    """A user's dataset that yields each batch's tensors as it got them,
    with whether any of them was in the sidecar's shared memory."""

    def __init__(self, ds):
        self.ds = ds

    def __iter__(self):
        for b in self.ds:
            tensors = [v for v in b.values() if isinstance(v, torch.Tensor)]
            tensors += [x for v in b.values() if isinstance(v, list) for x in v if isinstance(x, torch.Tensor)]
            yield {"_shardfeed_step": b["_shardfeed_step"], "ids": b["_shardfeed_index"], "tokens": b["tokens"],
                   "blob": [x if isinstance(x, bytes) else bytes(x.numpy()) for x in b["blob"]], "in_slot": any(in_segment(t) for t in tensors)}


@pytest.mark.parametrize("binary_as", ["bytes", "array"])
def test_a_users_dataset_in_workers_gets_tensors_of_its_own(feed_factory, binary_as):
    # A review's reproduction (issue 94): the user's dataset yielded a
    # tensor as it got it and kept np.asarray() of it; torch moved the
    # tensor's storage to new shared memory to send it, and the kept array
    # read the slot the sidecar had written the next batches into (or
    # crashed once the slot's segment was replaced by a larger one).
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0, binary_as=binary_as)
    steps = []
    for b in shardfeed.FeedLoader(SlotProbe(ds), num_workers=2):
        k = int(b["_shardfeed_step"][0])
        assert not b["in_slot"], f"step {k}: the user's code got a tensor in the sidecar's shared memory"
        assert b["ids"].tolist() == plan[(k, 0)], f"step {k}"
        assert torch.equal(b["tokens"].long(), expected_tokens(b["ids"])), f"step {k}"
        assert b["blob"] == [bytes([i % 251]) * (i % 5 + 1) for i in b["ids"].tolist()], f"step {k}"
        steps.append(k)
    assert sorted(steps) == list(range(STEPS))
    handoff = shardfeed.Client(feed.socket).status()["handoff"]
    assert handoff["batches"] >= STEPS and handoff["inlineBatches"] == 0, handoff


# A dataset of the user's that reports, with each batch it reads in a
# DataLoader worker, the modules that reading it imported there. Run in the
# oracle venv, which has pandas, as most training environments do.
FIRST_BATCH_IMPORTS = textwrap.dedent("""
    import json, sys
    import torch
    import shardfeed

    class Probe(torch.utils.data.IterableDataset):
        def __init__(self, ds):
            self.ds = ds

        def __iter__(self):
            before = set(sys.modules)
            for b in self.ds:
                # torch's pickling of the tensors to the training process
                # imports torch.nested the first time, in any loader's workers.
                new = sorted(m for m in set(sys.modules) - before if not m.startswith("torch."))
                yield {"_shardfeed_step": b["_shardfeed_step"], "new": new}
                before = set(sys.modules)

    loader = shardfeed.FeedLoader(Probe(shardfeed.FeedDataset(sys.argv[1], rank=0, world_size=1)), num_workers=2)
    imported, steps = set(), 0
    for b in loader:
        imported.update(b["new"])
        steps += 1
    print(json.dumps({"pandas": "pandas" in sys.modules, "imported": sorted(imported), "steps": steps}))
""")


def test_a_users_dataset_in_workers_imports_nothing_to_read_a_batch(feed_factory):
    # Seen (issue 94): pyarrow imports pandas the first time it makes an
    # array, and a training process whose workers read the batches had
    # never made one, so each worker imported it at each epoch's start
    # (0.4 s of CPU before its first batch, on cores the decode needs).
    feed = feed_factory(table(), SPEC, row_group_size=40)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "clients" / "python" / "src")}
    out = subprocess.run([str(ROOT / "bin" / "venv-oracle" / "bin" / "python"), "-c", FIRST_BATCH_IMPORTS, feed.socket],
                         check=True, capture_output=True, text=True, timeout=300, env=env).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["steps"] == STEPS
    assert got["pandas"], "the oracle venv has pandas: the training process imports it before its workers start"
    assert got["imported"] == [], f"the workers imported {got['imported'][:8]} to read their batches"


def test_a_held_batch_outlives_a_sidecar_kill(feed_factory):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)
    got, held = [], None
    restarted = threading.Event()
    for batch in ds:
        got.append(check(batch, plan))
        if len(got) == 3:
            held = batch
        if len(got) == 5:
            # SIGKILL mid-stream: the sidecar's segments go with it, the
            # ones this process maps stay; it comes back half a second later.
            feed.kill()
            threading.Timer(0.5, lambda: (feed.start(), restarted.set())).start()
    assert restarted.wait(30)
    assert got == list(range(STEPS))
    assert check(held, plan) == 2 and in_segment(held["tokens"])


TRAINER = textwrap.dedent("""
    import os, sys, time
    import shardfeed
    ds = shardfeed.FeedDataset(sys.argv[1], rank=0, world_size=1)
    workers = int(sys.argv[2])  # with a worker_init_fn, so that they run
    loader = shardfeed.FeedLoader(ds, num_workers=workers, **({"worker_init_fn": lambda _: None} if workers else {}))
    for batch in loader:
        if int(batch["_shardfeed_step"][0]) == 6:
            loader.commit()
            print("committed", flush=True)
            time.sleep(600)  # holding this batch; the sidecar waits with the next ones in memory
""")


def kill_after_commit(feed, script: str, workers: int) -> shardfeed.Client:
    """Run a trainer script (socket and workers as its arguments) until it
    prints "committed", check what the sidecar then holds for it, SIGKILL
    it with its workers, and wait for the sidecar to unmap its segments."""
    client = shardfeed.Client(feed.socket)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "clients" / "python" / "src"))
    proc = subprocess.Popen([sys.executable, "-c", script, feed.socket, str(workers)], stdout=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "committed"
        assert client.status()["handoff"]["segments"] > 0
        assert client.state()["step"] == 7, "the commit after batch 6 records step 7"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the trainer and its workers
        proc.wait()
        proc.stdout.close()
    # The sidecar notices the streams closed and unmaps their segments.
    deadline = 50
    while client.status()["handoff"]["bytes"] and deadline:
        threading.Event().wait(0.1)
        deadline -= 1
    assert client.status()["handoff"] == {**client.status()["handoff"], "bytes": 0, "segments": 0}
    return client


@pytest.mark.parametrize("workers", [0, 2])
def test_a_trainer_kill_returns_its_memory_and_the_job_resumes_exactly_once(feed_factory, workers):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    kill_after_commit(feed, TRAINER, workers)
    rest = [check(b, plan) for b in shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1), num_workers=workers, **relay(workers))]
    assert rest == list(range(7, STEPS))


def test_a_client_cannot_resize_a_segment_and_its_scribbles_stay_its_own(feed_factory):
    feed = feed_factory(table(), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)
    it = iter(ds)
    batch = next(it)
    stream = ds._stream
    seg = stream.placement.seg
    # Sealed: no shrinking (which would fault the sidecar), no growing.
    for size in (0, len(seg.map) * 2):
        with pytest.raises(PermissionError):
            os.ftruncate(seg.fd, size)
    # Garbage in the control words: the sidecar decides only this stream's
    # slots by them; another reader is served as ever.
    stream.words[:] = np.random.default_rng(1).integers(-2**62, 2**62, len(stream.words))
    other = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)
    assert [check(b, plan) for b in other] == list(range(STEPS))
    del batch
    it.close()
    assert shardfeed.Client(feed.socket).status()["ready"]


@pytest.mark.parametrize("body,want", [
    (b'{"gen":12,"size":4198000,"slot":2}', {"gen": 12, "size": 4198000, "slot": 2}),
    # Other spellings of the same object: spaces, another key order, more keys.
    (b'{ "slot": 2, "gen": 12, "size": 7 }', {"gen": 12, "size": 7, "slot": 2}),
    (b'{"gen":1,"size":2,"slot":3,"more":4}', {"gen": 1, "size": 2, "slot": 3, "more": 4}),
])
def test_a_batch_descriptor_is_read_as_the_sidecar_writes_it(body, want):
    from shardfeed._stream import _descriptor

    assert _descriptor(body) == want


@pytest.mark.parametrize("body", [b'{"gen":1,"size":2,"slot":x}', b'[1,2,3]', b'{"gen":1,"size":2', b"\xff"])
def test_a_malformed_batch_descriptor_is_refused(body):
    from shardfeed._stream import _descriptor
    from shardfeed.errors import StreamCut

    # StreamCut, or ValueError (json's), which the stream reports as a cut.
    with pytest.raises((StreamCut, ValueError)):
        _descriptor(body)
