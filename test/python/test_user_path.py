"""The user's own path, where an ordinary training loop or data set meets a
default nobody chose on purpose (issue 86): each test reproduces what a new
user saw go silently wrong, against a real `shardfeed serve` on MinIO."""

import logging
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import torch

import shardfeed
from shardfeed import _convert
from conftest import ROOT, SHARDFEED_BIN

N = 960
SPEC = """  numSplits: 4
  globalBatchSize: 24
  shuffle: {seed: 11, blockSize: 120}
"""
STEPS = N // 24  # 40


def table(n=N):
    return pa.table({"id": pa.array(np.arange(n, dtype=np.int64))})


def steps_and_ids(loader):
    return [(int(b["_shardfeed_step"][0]), b["_shardfeed_index"].tolist()) for b in loader]


def planned(feed, epoch, world=1, rank=0, start=0):
    plan = feed.plan_ids(world, epoch=epoch)
    return [(k, plan[(k, rank)]) for k in range(start, STEPS)]


# --- 1. The ordinary multi-epoch loop -------------------------------------


@pytest.mark.parametrize("workers,persistent", [(0, False), (2, False), (2, True)])
def test_the_plain_multi_epoch_loop_reads_the_next_epoch_each_pass(feed_factory, caplog, workers, persistent):
    # With workers=0 every epoch after the first yielded 0 batches; with 2,
    # every epoch repeated epoch 0 in its order; nothing was logged.
    feed = feed_factory(table(), SPEC)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    extra = {"persistent_workers": True} if persistent else {}
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, **extra)
    epochs = []
    with caplog.at_level(logging.INFO, logger="shardfeed"):
        for epoch in range(3):
            epochs.append(steps_and_ids(loader))
            assert ds.epoch == epoch
    for epoch, got in enumerate(epochs):
        assert got == planned(feed, epoch), f"pass {epoch}"
    assert epochs[0] != epochs[1], "the shuffle differs by epoch: a repeated epoch would show"
    if workers == 0:  # workers log in their own processes
        assert "pass 2 over the dataset reads epoch 2" in caplog.text


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_the_plain_loop_with_spawned_workers(feed_factory, context):
    # A FeedDataset did not pickle (a counter's lock): a DataLoader of
    # spawn or forkserver workers (Python 3.14's default on Linux) failed
    # with "cannot pickle '_thread.lock' object".
    feed = feed_factory(table(), SPEC)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=context)
    for epoch in range(2):
        assert steps_and_ids(loader) == planned(feed, epoch), f"pass {epoch}"


@pytest.mark.parametrize("workers,persistent", [(0, False), (2, False), (2, True)])
def test_set_epoch_wins_over_the_pass_count(feed_factory, workers, persistent):
    feed = feed_factory(table(), SPEC)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    extra = {"persistent_workers": True} if persistent else {}
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, **extra)
    assert steps_and_ids(loader) == planned(feed, 0)
    ds.set_epoch(5)  # persistent workers see it too
    assert len(ds) == STEPS
    assert steps_and_ids(loader) == planned(feed, 5)
    assert steps_and_ids(loader) == planned(feed, 6)  # and the passes go on from it
    ds.set_epoch(6)  # a loop that sets every epoch reads each once
    assert steps_and_ids(loader) == planned(feed, 6)


@pytest.mark.parametrize("workers", [0, 2])
def test_the_first_pass_after_a_restart_resumes_the_committed_epoch(feed_factory, workers):
    feed = feed_factory(table(), SPEC)
    client = shardfeed.Client(feed.socket)
    client.commit(0, STEPS)  # epoch 0 done
    client.commit(1, 15)  # and 15 steps of epoch 1: the trainer restarts
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    assert len(ds) == STEPS - 15
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
    assert steps_and_ids(loader) == planned(feed, 1, start=15)
    assert steps_and_ids(loader) == planned(feed, 2)
    assert len(ds) == STEPS


def test_a_pass_left_early_is_followed_by_the_next_epoch(feed_factory):
    # As mosaic's and LitData's datasets do: each new pass is the next
    # epoch, however much of the last one the loop read.
    feed = feed_factory(table(), SPEC)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    for i, _ in enumerate(ds):
        if i == 4:
            break
    assert steps_and_ids(ds) == planned(feed, 1)


def test_every_rank_agrees_on_each_pass(feed_factory):
    feed = feed_factory(table(), SPEC)
    world = 2
    sets = [shardfeed.FeedDataset(feed.socket, rank=r, world_size=world) for r in range(world)]
    loaders = [torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2) for ds in sets]
    for epoch in range(2):
        seen = []
        for rank, loader in enumerate(loaders):
            got = steps_and_ids(loader)
            assert got == planned(feed, epoch, world=world, rank=rank)
            seen.extend(i for _, ids in got for i in ids)
        assert sorted(seen) == list(range(N)), f"epoch {epoch}: every sample once over the ranks"


def test_a_stateful_dataloader_restored_mid_epoch_then_goes_on(feed_factory):
    from torchdata.stateful_dataloader import StatefulDataLoader

    feed = feed_factory(table(), SPEC)
    dl = StatefulDataLoader(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1), batch_size=None, num_workers=2)
    first = []
    for b in dl:
        first.append(int(b["_shardfeed_step"][0]))
        if len(first) == 7:
            break
    state = dl.state_dict()
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)
    dl = StatefulDataLoader(ds, batch_size=None, num_workers=2)
    dl.load_state_dict(state)
    assert [k for k, _ in steps_and_ids(dl)] == list(range(7, STEPS))
    assert steps_and_ids(dl) == planned(feed, 1)


# --- 3. One type per column, ragged lists and structs included ------------


def _kind(value):
    """The type a loop meets: tensors and arrays by dtype and rank, lists by
    their first non-None element."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, value.dim())
    if isinstance(value, np.ndarray):
        return ("array", value.dtype, value.ndim)
    if isinstance(value, list):
        return ("list", _kind(next((v for v in value if v is not None), None)))
    return type(value).__name__


COLUMNS = {
    "ints": (pa.list_(pa.int32()), [[1, 2], [3]], [[1, None], None]),
    "floats": (pa.list_(pa.float32()), [[0.5], [1.5, 2.5]], [None, [None, 2.5]]),
    "large": (pa.large_list(pa.float64()), [[0.5], []], [[], None]),
    "flags": (pa.list_(pa.bool_()), [[True], [False, True]], [[None, True], None]),
    "fixed": (pa.list_(pa.float32(), 2), [[1, 2], [3, 4]], [None, [3, None]]),
    "fixed_flags": (pa.list_(pa.bool_(), 2), [[True, False], [False, False]], [None, [True, None]]),
    "struct": (pa.struct([("a", pa.int64()), ("b", pa.utf8())]), [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}],
               [None, {"a": None, "b": "y"}]),
    "words": (pa.list_(pa.utf8()), [["a"], ["b", "c"]], [None, ["b", None]]),
    "nested": (pa.list_(pa.list_(pa.int64())), [[[1]], [[2, 3]]], [None, [[2], None]]),
}


@pytest.mark.parametrize("output", ["numpy", "torch"])
def test_a_null_never_changes_a_columns_type(output):
    # A batch holding one null row gave plain Python lists for every row of
    # a ragged column; a batch without nulls, a list of tensors.
    names = list(COLUMNS)
    schema = pa.schema([(n, COLUMNS[n][0]) for n in names] + [("_shardfeed_step", pa.int64())])
    clean = pa.record_batch([pa.array(COLUMNS[n][1], COLUMNS[n][0]) for n in names] + [pa.array([0, 0])], schema=schema)
    holed = pa.record_batch([pa.array(COLUMNS[n][2], COLUMNS[n][0]) for n in names] + [pa.array([1, 1])], schema=schema)
    conv = _convert.converter(None, clean, output, None)
    a, b = conv(clean), conv(holed)
    for name in names:
        assert _kind(a[name]) == _kind(b[name]), (name, _kind(a[name]), _kind(b[name]))
    tensor = torch.Tensor if output == "torch" else np.ndarray
    assert b["ints"][1] is None and b["ints"][0].tolist() == [1, 0], "a null row is None, a null value filled"
    assert isinstance(b["floats"][1], tensor) and np.isnan(float(b["floats"][1][0])) and b["floats"][0] is None
    assert b["flags"][0].tolist() == [False, True]
    assert b["large"][0].tolist() == [] and b["large"][1] is None
    assert b["struct"] == [None, {"a": None, "b": "y"}]
    chosen = _convert.converter(None, holed, output, None, {"ints": -1, "floats": 9.0})(holed)
    assert chosen["ints"][0].tolist() == [1, -1] and chosen["floats"][1].tolist() == [9.0, 2.5]


@pytest.mark.parametrize("fill,column,want", [
    (0, pa.array([True, None], pa.bool_()), [True, False]),  # 0 and 1 fill booleans as False and True
    (1, pa.array([None, 2], pa.int32()), [1, 2]),
    (0.5, pa.array([None, 2.0], pa.float32()), [0.5, 2.0]),
    (0.5, pa.array([None, 2], pa.int64()), "cannot fill column 'c' of type int64"),
    (-1, pa.array([None, True], pa.bool_()), "cannot fill column 'c' of type bool"),
    (float("nan"), pa.array([[1, None]], pa.list_(pa.int32())), "cannot fill column 'c' of type int32"),
])
def test_one_fill_null_for_every_column_fits_each_or_is_refused_at_once(fill, column, want):
    # fill_null=0 over a dataset with a nullable bool column crashed at the
    # first batch holding a null, mid-epoch ("tried to convert to boolean").
    if isinstance(want, str):
        with pytest.raises(shardfeed.ShardfeedError, match=re.escape(want) + ".*give fill_null a dict by column"):
            _convert.column_converter(pa.field("c", column.type), fill)  # made at the first batch, null or not
        return
    got = _convert.column_converter(pa.field("c", column.type), fill)(column)
    assert np.asarray(got).tolist() == want


def test_one_fill_null_leaves_shardfeeds_own_columns_alone(feed_factory):
    # fill_null=nan was refused for _shardfeed_index (int64), a column of
    # shardfeed's that holds no null, whatever the user's columns.
    f = pa.array([None if i % 7 == 0 else float(i) for i in range(N)], pa.float32())
    feed = feed_factory(pa.table({"id": pa.array(np.arange(N, dtype=np.int64)), "f": f}), SPEC)
    ds = shardfeed.FeedDataset(feed.socket, rank=0, world_size=1, columns=["f"], fill_null=float("nan"), output="numpy")
    values = np.concatenate([b["f"] for b in ds])
    assert len(values) == N and np.isnan(values).sum() == len(range(0, N, 7))


# --- 7. A dataset of the user's own over a FeedDataset ---------------------


class Doubled(torch.utils.data.IterableDataset):
    """The documented wrapper: per-batch code of the user's, in the workers,
    keeping the batch's step."""

    def __init__(self, source):
        self.source = source

    def __iter__(self):
        for b in self.source:
            yield {"_shardfeed_step": int(b["_shardfeed_step"][0]), "ids": b["_shardfeed_index"].clone(), "twice": b["id"] * 2}


class Stepless(Doubled):
    def __iter__(self):
        for b in self.source:
            yield {"twice": b["id"] * 2}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loader_over_a_dataset_of_the_users_own(feed_factory, workers):
    # FeedLoader(my_wrapper) failed with AttributeError: '_epoch'.
    feed = feed_factory(table(), SPEC)
    loader = shardfeed.FeedLoader(Doubled(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)), num_workers=workers)
    assert loader.workers == workers, "a wrapper's code runs in the workers asked for"
    want = planned(feed, 0)
    got = []
    for b in loader:
        got.append((b["_shardfeed_step"], b["ids"].tolist()))
        assert b["twice"].tolist() == [2 * i for i in b["ids"].tolist()]
        if len(got) == 10:
            break
    assert got == want[:10]
    assert loader.state_dict()["step"] == 10
    assert loader.commit()["step"] == 10
    # A restarted trainer resumes through its wrapper, then reads epoch 1.
    again = shardfeed.FeedLoader(Doubled(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)), num_workers=workers)
    assert [(b["_shardfeed_step"], b["ids"].tolist()) for b in again] == want[10:]
    assert [(b["_shardfeed_step"], b["ids"].tolist()) for b in again] == planned(feed, 1)


def test_a_wrapper_that_drops_the_step_or_holds_no_dataset_is_refused(feed_factory):
    feed = feed_factory(table(), SPEC)
    with pytest.raises(shardfeed.ShardfeedError, match="carry no _shardfeed_step"):
        next(iter(shardfeed.FeedLoader(Stepless(shardfeed.FeedDataset(feed.socket, rank=0, world_size=1)))))
    with pytest.raises(TypeError, match="holds none"):
        shardfeed.FeedLoader(Stepless([1, 2]))


# --- The guide's section on epochs, restarts, wrappers and commits --------


def guide_examples():
    text = (ROOT / "docs" / "python-client.md").read_text()
    section = text.split("\n## Epochs, restarts, wrappers and commits\n")[1].split("\n## ")[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_guides_examples_run_as_written(feed_factory):
    blocks = guide_examples()
    assert len(blocks) == 3
    outs = []
    for i, code in enumerate(blocks):
        feed = feed_factory(table(), SPEC, name=f"guide{i}")  # each example a job of its own
        env = dict(os.environ, SHARDFEED_SOCKET=feed.socket, PYTHONPATH=str(ROOT / "clients" / "python" / "src"),
                   RANK="0", WORLD_SIZE="1", OMP_NUM_THREADS="1")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"example {i}:\n{code}\n{done.stdout}{done.stderr}"
        outs.append(done.stdout)
    last = STEPS - 1
    assert outs[0] == f"pass 0: epoch 0, steps 0 to {last}\npass 1: epoch 1, steps 0 to {last}\n"
    assert outs[1] == "committed epoch 0, step 5\nresumes at step 5\n"
    assert outs[2] == "state 3 committed 3\n"


# --- 2. A DatasetDict's splits are never served together ------------------


def test_from_uri_serves_one_split_of_a_dataset_dict(tmp_path, monkeypatch):
    # `shardfeed index` of a DatasetDict's folder served train and test
    # together (234 of 1,234 rows served were test rows).
    written = subprocess.run([str(ROOT / "bin" / "venv-hf" / "bin" / "python"), str(ROOT / "test" / "oracle" / "hf_oracle.py"),
                              "write", str(tmp_path / "hf"), "--case", "dict", "--rows", "400"],
                             capture_output=True, text=True, timeout=600, check=True)
    import json

    folder = json.loads(written.stdout)["dict"]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(shardfeed.ShardfeedError, match=r"holds the splits test, train .*split=\"train\""):
        shardfeed.FeedDataset.from_uri(folder, batch_size=20, columns=["text"], rank=0, world_size=1, binary=str(SHARDFEED_BIN))
    for split, rows in (("train", range(400)), ("test", range(10_000, 10_100))):
        ds = shardfeed.FeedDataset.from_uri(folder, batch_size=20, columns=["text", "label"], split=split, rank=0, world_size=1,
                                            binary=str(SHARDFEED_BIN))
        assert "huggingface:\n" in ds.to_manifest() and f'split: "{split}"' in ds.to_manifest()
        labels = [int(v) for b in ds for v in b["label"]]
        assert len(labels) == len(rows), f"{split}: {len(labels)} rows, want {len(rows)}: one split's rows, every one"
        assert sorted(labels) == sorted(i % 3 for i in rows)
    # Each split saved on its own (dd[s].save_to_disk(f"sep/{s}")): no
    # dataset_dict.json, and the splits were served together (or the
    # folder's format was "2 arrow, 4 jsonl").
    import shutil

    sep = tmp_path / "sep"
    shutil.copytree(folder, sep, ignore=shutil.ignore_patterns("dataset_dict.json", "_shardfeed"))
    with pytest.raises(shardfeed.ShardfeedError, match=r"holds the splits test, train \(folders each saved by save_to_disk"):
        shardfeed.FeedDataset.from_uri(sep, batch_size=20, columns=["text"], rank=0, world_size=1, binary=str(SHARDFEED_BIN))
    ds = shardfeed.FeedDataset.from_uri(sep, batch_size=20, columns=["label"], split="train", rank=0, world_size=1, binary=str(SHARDFEED_BIN))
    assert sorted(int(v) for b in ds for v in b["label"]) == sorted(i % 3 for i in range(400))


# --- 4. A grown folder is never silently ignored ---------------------------

# A user's script, run anew each time: from_uri over a folder, one pass,
# and a commit after step commit_at when asked.
USER_RUN = """
import json, sys, shardfeed
folder, job, fresh, commit_at = sys.argv[1], sys.argv[2] or None, sys.argv[3] == "1", int(sys.argv[4])
ds = shardfeed.FeedDataset.from_uri(folder, batch_size=8, num_splits=4, drop_last=False, columns=["id"], job=job, fresh=fresh,
                                    rank=0, world_size=1, output="numpy", binary=sys.argv[5], **json.loads(sys.argv[6]))
ids = []
for batch in ds:
    ids += [int(i) for i, pad in zip(batch["id"], batch["_shardfeed_pad"]) if not pad]
    step = int(batch["_shardfeed_step"][0])
    if step == commit_at:
        ds.client().commit(epoch=ds.epoch, step=step + 1)
        break
print(json.dumps(ids))
"""


def user_runs(tmp_path, data, **kwargs):
    """part(k) writes ids 480k … 480k+479 as data/part-k.parquet; run(…)
    is one run of USER_RUN over data, in cwd."""
    import json

    import pyarrow.parquet as pq

    data.mkdir()

    def part(k):
        pq.write_table(pa.table({"id": pa.array(range(480 * k, 480 * (k + 1)), pa.int64())}), data / f"part-{k}.parquet", row_group_size=120)

    def run(job="", fresh=False, commit_at=-1, ok=True, cwd=tmp_path):
        cwd.mkdir(exist_ok=True)
        done = subprocess.run([sys.executable, "-c", USER_RUN, str(data), job, "1" if fresh else "0", str(commit_at), str(SHARDFEED_BIN),
                               json.dumps(kwargs)],
                              cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT / "clients" / "python" / "src")),
                              capture_output=True, text=True, timeout=300)
        assert (done.returncode == 0) == ok, done.stderr
        return json.loads(done.stdout) if ok else None, done.stderr
    return part, run


def test_a_grown_folder_is_indexed_again_or_said(tmp_path):
    # A folder that grew from 20 000 to 25 000 rows after the first
    # from_uri served 20 000, with no message.
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    part, run = user_runs(tmp_path, data)

    for k in range(4):
        part(k)
    ids, said = run()
    assert sorted(ids) == list(range(1920)) and "changed" not in said
    part(4)  # the folder grows: a new run indexes it again, and says so
    ids, said = run()
    assert "its source changed since it was indexed: 1 object added (part-4.parquet): indexing it again" in said, said
    assert sorted(ids) == list(range(2400)), "every row of the grown folder, once"
    ids, said = run()
    assert sorted(ids) == list(range(2400)) and "changed" not in said

    # A job that committed progress keeps the plan it started with, and
    # says what it does not read.
    first, _ = run(job="kept", commit_at=9)
    assert len(first) == 80
    part(5)
    rest, said = run(job="kept")
    assert re.search(r"its source changed since it was indexed: 1 object added \(part-5\.parquet\)\. Job kept resumes the plan it "
                     r"started with and reads none of it: pass fresh=True", said), said
    assert sorted(first + rest) == list(range(2400)), "the job's plan, exactly once, none of the new rows"
    # Another run (another folder, another user) indexes the grown folder
    # again: the job that committed on the index before still resumes on
    # it, kept for it, and says so (it was refused for good).
    again, said = run(cwd=tmp_path / "elsewhere")
    assert "indexing it again" in said and sorted(again) == list(range(2880))
    assert "note: kept the index this one replaces" in said, said
    more, said = run(job="kept")
    assert sorted(first + more) == list(range(2400)), "the job's own plan, from its commit, still"
    assert re.search(r'stream "data" was indexed again since job "kept" began: the job resumes on the index it began on', said), said
    # An object its plan reads, rewritten: the job cannot go on, and says
    # so before it starts (it failed mid-epoch on the shard's hash).
    pq.write_table(pa.table({"id": pa.array(range(480, 960), pa.int64())}), data / "part-1.parquet", row_group_size=60)
    _, said = run(job="kept", ok=False)
    assert re.search(r"1 object (of another size|rewritten).*job kept committed progress on the index before, and its plan can no "
                     r"longer be read; pass fresh=True", said), said
    ids, said = run(job="kept", fresh=True)
    assert "indexing it again" in said and sorted(ids) == list(range(2880))

    # Rewritten in place with the same size: the plan would fail its
    # hash check on read; it is indexed again first.
    pq.write_table(pa.table({"id": pa.array(range(5000, 5480), pa.int64())}), data / "part-0.parquet", row_group_size=120)
    ids, said = run()
    assert "indexing it again" in said and sorted(ids) == sorted(list(range(5000, 5480)) + list(range(480, 2880))), said


def test_a_filtered_job_resumes_on_its_kept_index_until_its_objects_change(tmp_path):
    # A filtered job was refused after another run indexed the grown folder
    # again (its fingerprint counts the matching rows, not the index's);
    # a job on a kept index whose object was then removed failed mid-epoch.
    part, run = user_runs(tmp_path, tmp_path / "data", filter="id % 2 == 0")
    part(0), part(1)
    first, _ = run(job="J", commit_at=4)
    assert len(first) == 40
    part(2)
    again, said = run(cwd=tmp_path / "elsewhere")
    assert "indexing it again" in said and sorted(again) == list(range(0, 1440, 2))
    rest, said = run(job="J")
    assert sorted(first + rest) == list(range(0, 960, 2)), "the job's own plan, from its commit"
    assert 'was indexed again since job "J" began' in said, said
    (tmp_path / "data" / "part-1.parquet").unlink()
    run(cwd=tmp_path / "another")  # indexed again, without part-1
    _, said = run(job="J", ok=False)
    assert re.search(r'objects of the plan job "J" committed on changed since they were indexed: [^\n]*1 object removed \(part-1\.parquet\)'
                     r"[^\n]*start a new job \(fresh=True, or another job=\)", said), said


# --- 10. The README's figures are its benchmark tables' --------------------


def test_the_readmes_figures_are_checked_against_the_tables(tmp_path):
    # The README said 9.11 GB/s, 1.12× the limit and 9.3× the best peer
    # while the tables it links said 2.91 GB/s, 0.75× and 5.6×.
    script = ROOT / "hack" / "bench" / "readme_figures.py"
    ok = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    readme = (ROOT / "README.md").read_text()
    tok = re.search(r"tokens: \*\*([\d.]+) GB/s\*\*", readme)
    assert tok, "the README's block names the tokens rate"
    (tmp_path / "README.md").write_text(readme.replace(tok.group(0), "tokens: **9.11 GB/s**"))
    bad = subprocess.run([sys.executable, str(script), "--check", "--readme", str(tmp_path / "README.md")], capture_output=True, text=True)
    assert bad.returncode == 1 and "not those of docs/benchmarks.md's tables" in bad.stderr and "9.11" in bad.stderr


# --- 8. Messages in a Python caller's words --------------------------------


@pytest.mark.parametrize("said,want", [
    # After `index --hive`, from_uri suggested a garbled `format= parquet`.
    ("index it: shardfeed index s3://b/p/ --format parquet --hive", 'index it: shardfeed index s3://b/p/ format="parquet" hive=True'),
    ("choose one, --split train (spec.streams[].huggingface.split)", 'choose one, split="train" (spec.streams[].huggingface.split)'),
    ("--filter 'lang == \"en\"' matches no row", "filter='lang == \"en\"' matches no row"),
    ("give --index-uri, a prefix you may write", "give index_uri=, a prefix you may write"),
    # A value ending a clause: the colon was the value's (split="train:").
    ("--split train: s3://b/p/ holds one dataset", 'split="train": s3://b/p/ holds one dataset'),
    ("--format v1.2. Then", 'format="v1.2". Then'),
])
def test_the_commands_flags_reach_python_as_arguments(said, want):
    from shardfeed._commands import _words

    assert _words(said) == want


# --- 6. from_uri serves every format the command serves --------------------


def test_the_clients_formats_are_the_commands():
    # Python listed 11 formats against Go's 13, Lance and Iceberg missing.
    listed = subprocess.run([str(SHARDFEED_BIN), "formats", "--json"], capture_output=True, text=True, check=True).stdout
    import json

    names = [f["name"] for f in json.loads(listed)]
    assert {"lance", "iceberg", "parquet", "huggingface", "litdata", "webdataset", "megatron", "mds"} <= set(names)
    assert [f["name"] for f in shardfeed.formats(binary=str(SHARDFEED_BIN))] == names
    with pytest.raises(shardfeed.ShardfeedError, match="'lance'.*'iceberg'|'iceberg'.*'lance'"):
        shardfeed.FeedDataset.from_uri("s3://b/p/", batch_size=8, binary=str(SHARDFEED_BIN))
    with pytest.raises(shardfeed.ShardfeedError, match="format='iceberg' goes with iceberg="):
        shardfeed.FeedDataset.from_uri("s3://b/p/", format="iceberg", batch_size=8, binary=str(SHARDFEED_BIN))
    with pytest.raises(shardfeed.ShardfeedError, match="hive=True reads a tree"):
        shardfeed.FeedDataset.from_uri("s3://b/p/", format="jsonl", hive=True, batch_size=8, binary=str(SHARDFEED_BIN))


def test_a_folders_own_index_tells_its_format_after_shardfeed_indexed_it(tmp_path):
    # A LitData folder read once by from_uri was "jsonl" the second time:
    # the guess skipped a format's own index.json once _shardfeed/ was there.
    from shardfeed._commands import guess_format

    def folder(name, own, files):
        root = tmp_path / name
        (root / "_shardfeed").mkdir(parents=True)
        (root / "_shardfeed" / "index.json").write_text('{"shardfeed": 1}')
        (root / "index.json").write_text(own)
        for f in files:
            (root / f).write_bytes(b"")
        return f"file://{root}"

    assert guess_format(folder("lit", '{"chunks": [{"filename": "chunk-0-0.bin"}], "config": {}}', ["chunk-0-0.bin"]),
                        binary=str(SHARDFEED_BIN)) == "litdata"
    assert guess_format(folder("mds", '{"shards": [], "version": 2}', ["shard.00000.mds"]), binary=str(SHARDFEED_BIN)) == "mds"
    # shardfeed's own index where an earlier release wrote it: the files say.
    assert guess_format(folder("old", '{"shardfeed": 1, "format": "parquet"}', ["part-0.parquet"]), binary=str(SHARDFEED_BIN)) == "parquet"


def test_from_uri_serves_a_lance_folder_and_a_hive_tree(tmp_path, monkeypatch):
    # A .lance folder was "no file of a format shardfeed reads", and
    # format="lance" was refused.
    import pyarrow.parquet as pq

    script = ("import sys, lance, pyarrow as pa\n"
              "lance.write_dataset(pa.table({'id': pa.array(range(96), pa.int64())}), sys.argv[1], max_rows_per_file=40)\n")
    subprocess.run([str(ROOT / "bin" / "venv-oracle" / "bin" / "python"), "-c", script, str(tmp_path / "t.lance")], check=True, timeout=300)
    monkeypatch.chdir(tmp_path)
    ds = shardfeed.FeedDataset.from_uri(tmp_path / "t.lance", batch_size=8, rank=0, world_size=1, binary=str(SHARDFEED_BIN))
    assert 'format: "lance"' in ds.to_manifest()
    assert sorted(int(i) for b in ds for i in b["id"]) == list(range(96))
    tree = tmp_path / "tree"
    for lang in ("en", "de"):
        (tree / f"lang={lang}").mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array(range(16), pa.int64())}), tree / f"lang={lang}" / "part-0.parquet")
    ds = shardfeed.FeedDataset.from_uri(tree, batch_size=8, hive=True, rank=0, world_size=1, binary=str(SHARDFEED_BIN))
    langs = sorted(str(v) for b in ds for v in b["lang"])
    assert langs == ["de"] * 16 + ["en"] * 16, "the partition values are columns"
