"""The Python client (clients/python) against a real `shardfeed serve` on a
real MinIO, read the way training loops read: torch DataLoaders with 0-3
workers, torchdata's StatefulDataLoader, checkpoints, kills and restarts."""

import logging
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import torch

import shardfeed
from shardfeed import _convert
from conftest import ROOT, in_workers, relay

N = 2400
SPEC = """  numSplits: 6
  globalBatchSize: 24
  shuffle: {seed: 5, blockSize: 300}
"""
STEPS = N // 24  # 100


def tokens_table(n=N, width=8):
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "tokens": pa.FixedSizeListArray.from_arrays(pa.array((np.arange(n * width) % 50000).astype(np.int32)), width),
    })


def read_epoch(loader):
    """Every batch the loop receives: (step, ids)."""
    got = []
    for batch in loader:
        got.append((int(batch["_shardfeed_step"][0]), batch["_shardfeed_index"].tolist()))
    return got


@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_every_rank_and_worker_count_reads_the_plan_exactly_once(feed_factory, workers):
    feed = feed_factory(tokens_table(), SPEC)
    world = 2
    plan = feed.plan_ids(world)
    seen = []
    for rank in range(world):
        ds = shardfeed.FeedDataset(feed.socket, rank=rank, world_size=world)
        got = read_epoch(shardfeed.FeedLoader(ds, num_workers=workers, **relay(workers)))
        # The DataLoader yields the steps in order, whatever the workers.
        assert [k for k, _ in got] == list(range(STEPS))
        for k, ids in got:
            assert ids == plan[(k, rank)]
            seen.extend(ids)
    assert sorted(seen) == list(range(N))


def test_workers_with_nothing_to_run_are_not_started(feed_factory, caplog):
    """FeedLoader(num_workers=2) over an untransformed dataset reads in the
    training process (no child process, the same batches and state), says
    so once, and a worker_init_fn or a transform makes the workers run."""
    import multiprocessing

    feed = feed_factory(tokens_table(), SPEC)
    plan = feed.plan_ids(1)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    loader = shardfeed.FeedLoader(ds, num_workers=2, prefetch_factor=4, persistent_workers=True)
    assert loader.workers == 0
    got, children = [], set()
    with caplog.at_level(logging.INFO, logger="shardfeed"):
        for batch in loader:
            got.append((int(batch["_shardfeed_step"][0]), batch["_shardfeed_index"].tolist()))
            children |= {p.pid for p in multiprocessing.active_children()}
            if len(got) == 3:
                assert loader.state_dict()["step"] == 3
        said = [r.getMessage() for r in caplog.records if "nothing to run in DataLoader workers" in r.getMessage()]
        read_epoch(loader)  # the next epoch says nothing more
    assert got == [(k, plan[(k, 0)]) for k in range(STEPS)]
    assert not children and len(said) == 1, (children, said)
    assert loader.stats().batches == 2 * STEPS
    assert shardfeed.FeedLoader(ds, num_workers=2, worker_init_fn=in_workers).workers == 2
    assert shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, transform=lambda rb: rb), num_workers=2).workers == 2
    assert shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, handoff=False), num_workers=2).workers == 2


def test_tensors_are_the_samples_values(feed_factory):
    feed = feed_factory(tokens_table(), SPEC)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    batch = next(iter(ds))
    assert batch["tokens"].dtype == torch.int32 and batch["tokens"].shape == (24, 8)
    ids = batch["id"]
    assert torch.equal(batch["_shardfeed_index"], ids)
    want = (ids[:, None] * 8 + torch.arange(8)) % 50000
    assert torch.equal(batch["tokens"].long(), want)


@pytest.mark.parametrize("stop_at", [4, 5])  # a multiple of the 2 workers, and not
def test_resume_after_killing_the_trainer_and_the_server(feed_factory, stop_at):
    feed = feed_factory(tokens_table(), SPEC)
    world = 3
    plan = feed.plan_ids(world)
    # Rank 1 trains to step stop_at with 2 workers, checkpoints, and the
    # job commits; then the trainer and the sidecar die (SIGKILL).
    ds = shardfeed.FeedDataset(feed.socket, rank=1, world_size=world)
    loader = shardfeed.FeedLoader(ds, num_workers=2, worker_init_fn=in_workers)
    got = []
    for batch in loader:
        got.append(int(batch["_shardfeed_step"][0]))
        if got[-1] + 1 == stop_at:
            break
    checkpoint = loader.state_dict()
    assert checkpoint["step"] == stop_at and checkpoint["epoch"] == 0
    assert checkpoint["numSplits"] == 6 and checkpoint["globalBatchSize"] == 24 and checkpoint["fingerprint"].startswith("v1-")
    loader.commit()
    del loader
    feed.kill()
    feed.start()

    # From the checkpoint, with 3 workers now: the steps go on from stop_at.
    ds = shardfeed.FeedDataset(feed.socket, rank=1, world_size=world)
    loader = shardfeed.FeedLoader(ds, num_workers=3, worker_init_fn=in_workers)
    loader.load_state_dict(checkpoint)
    rest = read_epoch(loader)
    assert [k for k, _ in rest] == list(range(stop_at, STEPS))
    for k, ids in rest:
        assert ids == plan[(k, 1)]

    # Without a checkpoint of its own, a fresh trainer starts at the commit.
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=world)
    first = next(iter(shardfeed.FeedLoader(ds, num_workers=2, worker_init_fn=in_workers)))
    assert int(first["_shardfeed_step"][0]) == stop_at


@pytest.mark.parametrize("workers", [0, 2])
def test_the_loader_reads_the_epoch_the_dataset_asks_for(feed_factory, workers):
    # FeedDataset(epoch=e) through a FeedLoader once read the committed
    # epoch instead, silently.
    feed = feed_factory(tokens_table(), SPEC)
    assert shardfeed.Client(feed.socket).commit(0, 10)["step"] == 10
    plan1 = feed.plan_ids(1, epoch=1)
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=1), num_workers=workers, **relay(workers))
    assert loader.state_dict()["epoch"] == 1 and loader.state_dict()["step"] == 0
    assert len(loader) == STEPS
    got = []
    for batch in loader:
        got.append((int(batch["_shardfeed_step"][0]), batch["_shardfeed_index"].tolist()))
        if len(got) == 3:
            break
    assert got == [(k, plan1[(k, 0)]) for k in range(3)]
    assert loader.state_dict()["epoch"] == 1
    # The epoch the job is in resumes at its committed step.
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0), num_workers=workers, **relay(workers))
    assert len(loader) == STEPS - 10
    assert int(next(iter(loader))["_shardfeed_step"][0]) == 10


WIDE = 2048  # 8 KiB samples: a local batch is well above the size that travels in shared memory


def expected_tokens(ids, width):
    return (ids[:, None] * width + torch.arange(width)) % 50000


def test_batches_the_loop_keeps_are_never_overwritten(feed_factory):
    feed = feed_factory(tokens_table(960, WIDE), SPEC, row_group_size=40)
    plan = feed.plan_ids(1)
    for make in (lambda ds: shardfeed.FeedLoader(ds, num_workers=2, worker_init_fn=in_workers),
                 lambda ds: torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)):
        kept = list(make(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)))
        assert len(kept) == 40
        for k, batch in enumerate(kept):
            assert int(batch["_shardfeed_step"][0]) == k and batch["_shardfeed_index"].tolist() == plan[(k, 0)]
            assert torch.equal(batch["tokens"].long(), expected_tokens(batch["id"], WIDE))


def test_state_dict_round_trip_and_a_resumed_commit(feed_factory):
    feed = feed_factory(tokens_table(), SPEC)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    loader = shardfeed.FeedLoader(ds)
    it = iter(loader)
    for _ in range(10):
        next(it)
    early = loader.state_dict()
    for _ in range(10):
        next(it)
    assert loader.commit()["step"] == 20
    # Roll back to the older checkpoint: the commit that follows says
    # "resumed", so the sidecar takes it although it goes back.
    loader2 = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1))
    loader2.load_state_dict(early)
    assert loader2.state_dict() == early
    assert int(next(iter(loader2))["_shardfeed_step"][0]) == 10
    assert loader2.commit()["step"] == 11
    # An ordinary backwards commit is refused with the reason.
    with pytest.raises(shardfeed.SidecarError, match="behind the stored"):
        loader2.commit(step=3)
    # A checkpoint of another plan is refused before anything is read.
    with pytest.raises(shardfeed.ShardfeedError, match="different plan"):
        loader2.load_state_dict(dict(early, fingerprint="v1-0123"))


def test_a_commit_waits_for_a_restarting_sidecar(feed_factory):
    import threading
    import time

    feed = feed_factory(tokens_table(), SPEC)
    client = shardfeed.Client(feed.socket)
    assert client.commit(0, 10)["step"] == 10
    feed.kill()  # the sidecar's container is killed; the kubelet starts it again
    restarted = threading.Timer(1.5, feed.start)
    began = time.monotonic()
    restarted.start()
    try:
        state = client.commit(0, 20)
    finally:
        restarted.join()
    assert time.monotonic() - began >= 1.5
    assert (state["epoch"], state["step"]) == (0, 20)
    assert client.state()["step"] == 20


def test_stateful_dataloader_restores_every_worker_exactly(feed_factory):
    from torchdata.stateful_dataloader import StatefulDataLoader

    feed = feed_factory(tokens_table(), SPEC)
    plan = feed.plan_ids(1)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=2)
    got = []
    for batch in dl:
        got.append(int(batch["_shardfeed_step"][0]))
        if len(got) == 7:
            break
    state = dl.state_dict()
    del dl
    ds2 = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)
    dl2 = StatefulDataLoader(ds2, batch_size=None, num_workers=2)
    dl2.load_state_dict(state)
    for batch in dl2:
        k = int(batch["_shardfeed_step"][0])
        assert batch["_shardfeed_index"].tolist() == plan[(k, 0)]
        got.append(k)
    assert got == list(range(STEPS))

    # The commit docs/python-client.md shows for a StatefulDataLoader: the
    # sidecar records it, and a loader with no state of its own starts there.
    client = ds2.client()
    client.commit(epoch=0, step=STEPS - 3)
    assert (client.state()["epoch"], client.state()["step"]) == (0, STEPS - 3)
    fresh = shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1))
    assert [int(b["_shardfeed_step"][0]) for b in fresh] == [STEPS - 3, STEPS - 2, STEPS - 1]


def test_micro_batches_split_a_step_and_count_it_once(feed_factory):
    feed = feed_factory(tokens_table(), SPEC)
    plan = feed.plan_ids(2)
    ds = shardfeed.FeedDataset(feed.socket, rank=1, world_size=2)
    loader = shardfeed.FeedLoader(ds, num_workers=2, micro_batch_size=4, worker_init_fn=in_workers)
    parts = []
    for micro in loader:
        parts.append(micro)
        if len(parts) == 3 * 3:  # 12 rows per rank and step: 3 micro-batches
            break
    for k in range(3):
        step = parts[3 * k:3 * k + 3]
        assert [int(m["_shardfeed_micro"]) for m in step] == [0, 1, 2] and all(m["_shardfeed_micros"] == 3 for m in step)
        assert all(int(m["_shardfeed_step"][0]) == k and m["tokens"].shape == (4, 8) for m in step)
        assert torch.cat([m["_shardfeed_index"] for m in step]).tolist() == plan[(k, 1)]
    assert loader.state_dict()["step"] == 3  # global steps, not micro-batches
    with pytest.raises(ValueError, match="does not divide the local batch of 12"):
        next(iter(shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=1, world_size=2), micro_batch_size=5)))


def test_every_column_kind_keeps_its_dtype_and_shape(feed_factory):
    n = 240
    ids = np.arange(n, dtype=np.int64)
    table = pa.table({
        "id": ids,
        "i8": pa.array((ids % 100).astype(np.int8)), "i16": pa.array((ids * 3).astype(np.int16)),
        "u8": pa.array((ids % 200).astype(np.uint8)), "u16": pa.array(ids.astype(np.uint16)),
        "u32": pa.array(ids.astype(np.uint32)), "u64": pa.array(ids.astype(np.uint64) << np.uint64(40)),
        "f16": pa.array((ids / 4).astype(np.float16)), "f32": pa.array((ids / 3).astype(np.float32)), "f64": ids / 7,
        "flag": pa.array(ids % 3 == 0),
        "text": pa.array([f"sample {i}" for i in ids]), "blob": pa.array([bytes([i % 256]) * (i % 5) for i in ids]),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, 4).astype(np.float32)), 4),
        "mat": pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, 6).astype(np.int16)), 2), 3),
        "ragged": pa.array([list(range(i % 4)) for i in ids], type=pa.list_(pa.int64())),
        "meta": pa.array([{"k": int(i)} for i in ids]),
        "wide": pa.FixedSizeListArray.from_arrays(pa.array(np.repeat(ids, WIDE).astype(np.int32)), WIDE),
    })
    feed = feed_factory(table, "  numSplits: 2\n  globalBatchSize: 8\n", row_group_size=60)
    kinds = {
        "i8": (torch.int8, (8,)), "i16": (torch.int16, (8,)), "u8": (torch.uint8, (8,)), "u16": (torch.uint16, (8,)),
        "u32": (torch.uint32, (8,)), "u64": (torch.uint64, (8,)), "f16": (torch.float16, (8,)), "f32": (torch.float32, (8,)),
        "f64": (torch.float64, (8,)), "flag": (torch.bool, (8,)), "vec": (torch.float32, (8, 4)), "mat": (torch.int16, (8, 3, 2)),
        "_shardfeed_index": (torch.int64, (8,)), "_shardfeed_stream": (torch.int16, (8,)), "_shardfeed_pad": (torch.bool, (8,)),
    }
    kinds["wide"] = (torch.int32, (8, WIDE))
    readers = {  # in the process, and through a DataLoader worker (shared memory)
        "torch": lambda: iter(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, output="torch")),
        "numpy": lambda: iter(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, output="numpy")),
        "torch, a worker": lambda: iter(shardfeed.FeedLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1),
                                                             num_workers=1)),
    }
    for how, read in readers.items():
        output = how.split(",")[0]
        batch = next(read())
        rows = batch["id"].tolist()
        src = table.take(rows).to_pydict()
        for name, (dtype, shape) in kinds.items():
            value = batch[name]
            if output == "torch":
                assert isinstance(value, torch.Tensor) and value.dtype == dtype, (name, value)
                value = value.numpy() if dtype not in (torch.uint16, torch.uint32, torch.uint64) else np.array(value.tolist())
            assert value.shape == shape, (name, value.shape)
            if not name.startswith("_"):
                assert np.array_equal(value, np.array(src[name], dtype=value.dtype)), name
        assert batch["text"] == src["text"] and batch["blob"] == src["blob"] and batch["meta"] == src["meta"]
        assert [list(map(int, r)) for r in batch["ragged"]] == src["ragged"]
    arrow = next(iter(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, output="arrow", columns=["id"])))
    assert isinstance(arrow, pa.RecordBatch)
    assert arrow.schema.names == ["id", "_shardfeed_index", "_shardfeed_stream", "_shardfeed_step", "_shardfeed_pad"]


def test_a_converter_still_looks_at_each_batch():
    """What each column becomes is worked out once per schema, and nulls are
    a batch's: a later batch with them comes out as the same array type,
    its nulls filled (NaN, 0, or the dataset's fill_null)."""
    schema = pa.schema([("n", pa.int64()), ("vec", pa.list_(pa.float32(), 2)), ("_shardfeed_step", pa.int64())])
    clean = pa.record_batch([pa.array([1, 2]), pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.float32()), 2),
                             pa.array([0, 0])], schema=schema)
    holed = pa.record_batch([pa.array([1, None]), pa.FixedSizeListArray.from_arrays(pa.array([1, None, 3, 4], pa.float32()), 2),
                             pa.array([1, 1])], schema=schema)
    conv = _convert.converter(None, clean, "numpy", ["n", "vec"])
    first = conv(clean)
    assert first["n"].tolist() == [1, 2] and first["vec"].shape == (2, 2) and first["_shardfeed_step"].tolist() == [0, 0]
    assert _convert.converter(conv, holed, "numpy", ["n", "vec"]) is conv
    second = conv(holed)
    assert second["n"].dtype == np.int64 and second["n"].tolist() == [1, 0]
    assert second["vec"].dtype == np.float32 and second["vec"].shape == (2, 2)
    assert np.isnan(second["vec"][0, 1]) and second["vec"][1].tolist() == [3.0, 4.0]
    chosen = _convert.converter(None, holed, "numpy", ["n", "vec"], {"n": -1, "vec": 0.5})(holed)
    assert chosen["n"].tolist() == [1, -1] and chosen["vec"].tolist() == [[1.0, 0.5], [3.0, 4.0]]
    assert _convert.converter(conv, clean, "numpy", ["n"]) is not conv  # other columns
    only_n = _convert.converter(None, clean, "numpy", ["n"])
    assert _convert.converter(only_n, clean.select([0, 2]), "numpy", ["n"]) is not only_n  # another schema
    assert list(_convert.converter(conv, clean, "torch", ["n"])(clean)) == ["n", "_shardfeed_step"]
    with pytest.raises(ValueError, match="no column 'x'"):
        _convert.converter(conv, clean, "numpy", ["x"])


def test_a_window_mask_is_a_bool_array_of_its_shape():
    """A lerobot window's KEY_is_pad, a fixed-size list of booleans with its
    shape, comes out as LeRobot's: a bool array (rows, T), sliced to the
    batch's rows (bits unpacked, never a view of them)."""
    mask = pa.field("a_is_pad", pa.list_(pa.bool_(), 3), metadata={b"shardfeed.shape": b"3"})
    schema = pa.schema([mask, ("_shardfeed_step", pa.int64())])
    bits = pa.array([True, False, False, False, False, True, True, True, False], pa.bool_())
    rec = pa.record_batch([pa.FixedSizeListArray.from_arrays(bits, 3), pa.array([0, 0, 0])], schema=schema).slice(1, 2)
    out = _convert.converter(None, rec, "numpy", ["a_is_pad"])(rec)["a_is_pad"]
    assert out.dtype == np.bool_ and out.tolist() == [[False, False, True], [True, True, False]]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_column_arrives_as_one_type_in_every_batch_with_rare_nulls(feed_factory, workers):
    """A float32 column with one null in 2048 rows came back as a tensor in
    31 batches and a Python list in the one holding the null: a training
    loop crashed at whichever step met it first. Over an epoch (in the
    process, and through workers' shared memory), every numeric, boolean
    and fixed-size list column is a tensor of one dtype in every batch, its
    nulls filled; fill_null chooses the values."""
    n = 2048
    ids = np.arange(n, dtype=np.int64)
    rare = {1000}
    vec = pa.FixedSizeListArray.from_arrays(pa.array([None if i in rare and j == 1 else float(i) for i in ids for j in range(2)],
                                                     pa.float32()), 2)
    table = pa.table({
        "id": ids,
        "score": pa.array([None if i in rare else float(i) for i in ids], pa.float32()),
        "count": pa.array([None if i in rare else int(i) for i in ids], pa.int32()),
        "ok": pa.array([None if i in rare else bool(i % 2) for i in ids], pa.bool_()),
        "vec": vec,
    })
    feed = feed_factory(table, "  numSplits: 2\n  globalBatchSize: 64\n", row_group_size=256)
    want = {"score": torch.float32, "count": torch.int32, "ok": torch.bool, "vec": torch.float32}
    for fill, expect in [(None, {"score": None, "count": 0, "ok": False, "vec": None}),
                         ({"score": -1.0, "count": -7, "ok": True, "vec": 0.25}, {"score": -1.0, "count": -7, "ok": True, "vec": 0.25})]:
        ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0, fill_null=fill)
        seen = 0
        for batch in shardfeed.FeedLoader(ds, num_workers=workers, **relay(workers)):
            for name, dtype in want.items():
                assert isinstance(batch[name], torch.Tensor) and batch[name].dtype == dtype, (name, type(batch[name]))
            where = (batch["id"] == 1000).nonzero()
            if len(where):
                row = int(where[0])
                seen += 1
                for name in ("score", "count", "ok"):
                    got = batch[name][row].item()
                    assert (expect[name] is None and got != got) or got == expect[name], (name, got)
                got = batch["vec"][row, 1].item()
                assert (expect["vec"] is None and got != got) or got == expect["vec"], got
                assert batch["vec"][row, 0].item() == 1000.0
        assert seen == 1, "the batch holding the null must be delivered once"


@pytest.mark.parametrize("output", ["numpy", "torch"])
def test_ragged_columns_split_by_row(output):
    """Variable-length lists of numbers (packing's cu_seqlens and doc_ids)
    come out as one array or tensor a row, each viewing the batch: sliced
    columns (offsets not at 0), empty rows, large lists and empty batches."""
    lists = pa.array([[1, 2], [], [3], [4, 5, 6], [7]], pa.list_(pa.int32()))
    large = pa.array([[0.5], [1.5, 2.5], [], [], [3.5]], pa.large_list(pa.float64()))
    batch = pa.record_batch([lists, large], names=["lists", "large"])
    for rows in (batch, batch.slice(1, 3), batch.slice(2, 0)):
        got = _convert.converter(None, rows, output, None)(rows)
        for name in ("lists", "large"):
            want = rows.column(name).to_pylist()
            values = got[name]
            assert [v.tolist() for v in values] == want, (name, rows.num_rows)
            for v in values:
                kind = torch.Tensor if output == "torch" else np.ndarray
                assert isinstance(v, kind) and v.ndim == 1, (name, v)
                if output == "numpy":
                    assert not v.flags.owndata, name
    assert [v.dtype for v in _convert.converter(None, batch, "torch", None)(batch)["lists"]] == [torch.int32] * 5


def test_binary_arrays_view_the_batch():
    """binary_as="array": each binary value a uint8 array over the column's
    data buffer (no copy), sliced columns, large binaries, empty values and
    nulls (None) included; fixed-size binary one (rows, width) array."""
    blob = pa.array([b"ab", None, b"", b"\x00\xff\x10"], pa.binary())
    big = pa.array([b"x" * 5, b"yz", None, b""], pa.large_binary())
    fixed = pa.array([b"abcd", b"efgh", b"ijkl", b"mnop"], pa.binary(4))
    holed = pa.array([b"abcd", None, b"ijkl", b"mnop"], pa.binary(4))
    batch = pa.record_batch([blob, big, fixed, holed], names=["blob", "big", "fixed", "holed"]).slice(1, 3)
    got = _convert.converter(None, batch, "numpy", None, None, "array")(batch)
    for name in ("blob", "big"):
        want = batch.column(name).to_pylist()
        assert [None if v is None else v.tobytes() for v in got[name]] == want, name
        for v in got[name]:
            assert v is None or (v.dtype == np.uint8 and v.ndim == 1 and not v.flags.owndata), (name, v)
    assert got["fixed"].shape == (3, 4) and got["fixed"].dtype == np.uint8 and not got["fixed"].flags.owndata
    assert [bytes(r) for r in got["fixed"]] == [b"efgh", b"ijkl", b"mnop"]
    assert got["holed"][0] is None and [bytes(r) for r in got["holed"][1:]] == [b"ijkl", b"mnop"]
    tensors = _convert.converter(None, batch, "torch", ["blob"], None, "array")(batch)
    assert tensors["blob"][0] is None and bytes(tensors["blob"][2].numpy()) == b"\x00\xff\x10"
    assert tensors["blob"][2].dtype == torch.uint8
    as_bytes = _convert.converter(None, batch, "numpy", None)(batch)
    assert as_bytes["blob"] == [None, b"", b"\x00\xff\x10"] and as_bytes["fixed"] == [b"efgh", b"ijkl", b"mnop"]
    with pytest.raises(ValueError, match="binary_as='str'.*'bytes', 'array'"):
        shardfeed.FeedDataset("nowhere.sock", binary_as="str")  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", [0, 2])
def test_binary_arrays_over_shared_memory(feed_factory, workers):
    """Images handed over as uint8 tensors viewing the sidecar's shared
    memory (in the process, and from DataLoader workers): every value equals
    the table's, and every sample arrives once."""
    n = 512
    rng = np.random.default_rng(3)
    blobs = [rng.integers(0, 256, size=int(rng.integers(0, 3000)), dtype=np.uint8).tobytes() for _ in range(n)]
    table = pa.table({"id": np.arange(n, dtype=np.int64), "image": pa.array(blobs, pa.binary())})
    feed = feed_factory(table, "  numSplits: 2\n  globalBatchSize: 32\n", row_group_size=64)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0, binary_as="array")
    seen = []
    for batch in shardfeed.FeedLoader(ds, num_workers=workers, **relay(workers)):
        for i, image in zip(batch["id"].tolist(), batch["image"]):
            assert isinstance(image, torch.Tensor) and image.dtype == torch.uint8
            assert bytes(image.numpy()) == blobs[i], i
            seen.append(i)
    assert sorted(seen) == list(range(n))


def test_errors_say_what_to_do(feed_factory, tmp_path):
    missing = str(tmp_path / "nowhere.sock")
    with pytest.raises(shardfeed.SidecarNotReady) as err:
        next(iter(shardfeed.FeedDataset(missing, rank=0, world_size=1, wait=0.3)))
    assert missing in str(err.value) and "shardfeed.io/dataset" in str(err.value)

    feed = feed_factory(tokens_table(), SPEC)
    with pytest.raises(shardfeed.SidecarError, match="4 ranks do not divide spec.numSplits") as err:
        next(iter(shardfeed.FeedDataset(feed.socket, rank=0, world_size=4)))
    assert err.value.status == 400 and err.value.field == "world"

    # The data goes bad in storage mid-run: the stream is cut, the client
    # reconnects once at the step it expected, is cut again, and raises.
    s3 = feed.minio.filesystem()
    path = f"{feed.bucket}/web/part-0.parquet"
    with s3.open_input_stream(path) as f:
        data = f.read()
    with s3.open_output_stream(path) as f:
        f.write(data[: len(data) // 4])
    with pytest.raises(shardfeed.StreamCut, match="cut twice at step") as cut:
        for _ in shardfeed.FeedDataset(feed.socket, rank=0, world_size=1):
            pass
    # Trap 5 of the first-hour issue: the reason reaches the exception,
    # not only the sidecar's /v1/status.
    assert "the sidecar says:" in str(cut.value) and "part-0.parquet" in str(cut.value), str(cut.value)


def test_mistakes_in_the_loop_are_errors_that_name_the_fix(feed_factory):
    """Trap 5: each of these was silent, or lost its type."""
    feed = feed_factory(tokens_table(), SPEC)
    # A misspelt column.
    with pytest.raises(ValueError, match=r"no column 'tokns'; its columns are id, tokens"):
        next(iter(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, columns=["tokns"])))
    # A DataLoader that batches the batches again.
    loader = torch.utils.data.DataLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1), batch_size=8)
    with pytest.raises(TypeError, match="batch_size=None"):
        next(iter(loader))
    # numpy asked, numpy given, through a FeedLoader too.
    for workers in (0, 1):
        ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, output="numpy")
        batch = next(iter(shardfeed.FeedLoader(ds, num_workers=workers, **relay(workers))))
        assert isinstance(batch["id"], np.ndarray) and isinstance(batch["tokens"], np.ndarray), {k: type(v) for k, v in batch.items()}
    # A sidecar's refusal keeps its type through a DataLoader worker.
    bad = torch.utils.data.DataLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=4), batch_size=None, num_workers=1)
    with pytest.raises(shardfeed.SidecarError, match="4 ranks do not divide spec.numSplits") as err:
        next(iter(bad))
    assert err.value.status == 400


def test_the_package_installs_with_pip(tmp_path):
    import shutil

    # From a copy: setuptools writes build/ and *.egg-info next to the sources.
    source = tmp_path / "python"
    shutil.copytree(ROOT / "clients" / "python", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target),
                    str(source)], check=True, timeout=300)
    out = subprocess.run([sys.executable, "-c", "import shardfeed, sys; print(shardfeed.__file__)"], check=True,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(target)), cwd=tmp_path).stdout
    assert out.startswith(str(target))


def test_a_sidecar_restart_mid_epoch_is_ridden_out_at_the_right_step(feed_factory):
    import threading

    # 8 KiB samples: an epoch (19 MiB) is far more than the socket buffers
    # hold, so the kill does cut the stream.
    feed = feed_factory(tokens_table(width=2048), SPEC)
    plan = feed.plan_ids(1)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, epoch=0)
    got = []
    restarted = threading.Event()
    for batch in ds:
        k = int(batch["_shardfeed_step"][0])
        assert batch["_shardfeed_index"].tolist() == plan[(k, 0)]
        got.append(k)
        if len(got) == 5:
            # The sidecar dies (SIGKILL) and comes back half a second later.
            feed.kill()
            threading.Timer(0.5, lambda: (feed.start(), restarted.set())).start()
    assert restarted.wait(30)
    assert got == list(range(STEPS))
    # The new sidecar served the rest: it counted what it sent.
    sent = shardfeed.Client(feed.socket).status()["consumedRows"]
    assert 0 < sent < N, sent
