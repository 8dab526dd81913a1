"""Packed sequences (spec.packing) through a real `shardfeed serve`: the
documents pyarrow reads from the shards, filtered and mixed from two
streams, come back packed, each document's tokens exactly once per epoch,
with position ids, loss mask, boundaries and document ids that say so.
One split: an epoch of S splits leaves out its T mod S packs, as it
leaves out samples (docs/planner.md); the planner's tests cover splits."""

import json
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch

import shardfeed
from conftest import SHARDFEED_BIN

SEQ = 96


def _docs(rng: np.random.Generator, n: int) -> list[list[int] | None]:
    out: list[list[int] | None] = []
    for i in range(n):
        kind = rng.integers(10)
        if kind == 0:
            out.append(None)  # a null document: no token
        elif kind == 1:
            out.append([])
        else:
            size = int(rng.integers(1, 2 * SEQ + 20)) if kind == 2 else int(rng.integers(1, SEQ // 3))
            # Unique tokens (the stream's offset, then the row's) let the
            # test place each piece in its document.
            out.append((rng.permutation(200_000)[:size] + 1).tolist())
    return out


def _write(tmp_path, name: str, seed: int, files: int) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    d = tmp_path / name
    d.mkdir()
    tables = []
    for f in range(files):
        n = 300
        t = pa.table({"tokens": pa.array(_docs(rng, n), pa.list_(pa.int32())),
                      "lang": pa.array(["en" if x % 4 else "de" for x in range(n)])})
        pq.write_table(t, d / f"part-{f}.parquet", row_group_size=120)
        tables.append(t)
    return tables


def _manifest(tmp_path, method: str) -> str:
    path = tmp_path / f"{method}.yaml"
    path.write_text(f"""apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: packed-{method.lower()}}}
spec:
  streams:
  - {{name: web, format: parquet, source: {{uri: web/}}, filter: "lang == 'en'"}}
  - {{name: code, format: parquet, source: {{uri: code/}}}}
  numSplits: 1
  globalBatchSize: 8
  dropLast: false
  packing: {{column: tokens, sequenceLength: {SEQ}, method: {method}, window: 64, padToken: 7}}
""")
    return str(path)


def _index(manifest: str, stream: str) -> str:
    done = subprocess.run([str(SHARDFEED_BIN), "index", "-f", manifest, "--stream", stream], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("method", ["bestFit", "concatenate"])
def test_packed_batches_hold_every_document_once(tmp_path, method):
    web = _write(tmp_path, "web", 1, 2)
    code = _write(tmp_path, "code", 2, 1)
    manifest = _manifest(tmp_path, method)
    assert "packs of 96 tokens" in _index(manifest, "web")
    _index(manifest, "code")
    # The documents, as pyarrow reads them: the web's matching rows, then
    # the code's, numbered as the plan numbers samples.
    docs = [d or [] for t in web for d in t.filter(pc.equal(t["lang"], "en"))["tokens"].to_pylist()]
    docs += [d or [] for t in code for d in t["tokens"].to_pylist()]

    ds = shardfeed.FeedDataset.from_manifest(manifest, rank=0, world_size=1, binary=str(SHARDFEED_BIN), directory=str(tmp_path), fresh=True)
    planned = subprocess.run([str(SHARDFEED_BIN), "plan", "-f", manifest, "--ids", "--world-size", "1"], capture_output=True, text=True, timeout=120)
    assert planned.returncode == 0, planned.stderr
    lineage = [json.loads(line) for line in planned.stdout.splitlines()]
    pieces: dict[int, list[tuple[int, list[int]]]] = {}
    packs, padding = 0, 0
    for step, batch in enumerate(ds):
        # The packs and their documents, as plan --ids says.
        want = lineage[step]
        assert batch["_shardfeed_index"].tolist() == want["ids"]
        assert [d.tolist() for d in batch["doc_ids"]] == want["docs"]
        tokens, pos, mask = batch["tokens"].numpy(), batch["position_ids"].numpy(), batch["loss_mask"].numpy()
        # The batch flattened for a variable-length attention kernel: every
        # row's boundaries, offset by the row, its padding a segment.
        flat, longest = shardfeed.batch_cu_seqlens(batch)
        assert flat.dtype == torch.int32 and int(flat[-1]) == tokens.size and 0 < longest <= SEQ
        for r in range(tokens.shape[0]):
            row = (batch["cu_seqlens"][r].numpy() + r * SEQ).tolist()
            assert set(row) <= set(flat.tolist()) and r * SEQ in flat.tolist()
        assert tokens.shape[1] == SEQ and tokens.dtype == np.int32
        for r in range(tokens.shape[0]):
            if batch["_shardfeed_pad"][r]:
                continue  # a pad row repeats a pack of the split's start
            packs += 1
            cu, ids = batch["cu_seqlens"][r].tolist(), batch["doc_ids"][r].tolist()
            assert cu[0] == 0 and len(cu) == len(ids) + 1 and cu == sorted(cu) and cu[-1] <= SEQ
            for k, d in enumerate(ids):
                seg = tokens[r, cu[k]:cu[k + 1]].tolist()
                assert pos[r, cu[k]:cu[k + 1]].tolist() == list(range(len(seg)))
                pieces.setdefault(d, []).append((r, seg))
            assert mask[r, :cu[-1]].all() and not mask[r, cu[-1]:].any()
            assert (tokens[r, cu[-1]:] == 7).all() and (pos[r, cu[-1]:] == 0).all()
            padding += SEQ - cu[-1]
    # Every token of every document exactly once: each piece sits at its
    # own place in its document, and the pieces tile it.
    for d, doc in enumerate(docs):
        got = pieces.pop(d, [])
        if not doc:
            assert not got, f"empty document {d} delivered"
            continue
        covered = [0] * len(doc)
        for _, seg in got:
            at = doc.index(seg[0])
            assert doc[at:at + len(seg)] == seg, f"document {d}: a piece not in it"
            for k in range(at, at + len(seg)):
                covered[k] += 1
        assert covered == [1] * len(doc), f"document {d}: tokens delivered {covered}"
        if method == "bestFit" and len(doc) <= SEQ:
            assert len(got) == 1, f"document {d} of {len(doc)} tokens cut under bestFit"
    assert not pieces, f"documents that are not the streams': {sorted(pieces)[:5]}"
    total = sum(len(d) for d in docs)
    assert packs * SEQ == total + padding
    if method == "concatenate":  # a shard's documents end to end: padding only in its last pack
        assert padding < SEQ * (2 * 3 + 3)


def example(tmp_path, name: str):
    """A copy of examples/<name> (and of examples/packed, whose train.py
    the others run) without its data, and a runner of commands in it as
    its docstring runs them: the command's stdout, or a failed test."""
    import os
    import shutil

    root = SHARDFEED_BIN.parent.parent
    for d in {name, "packed", "raw_text"}:  # the chat example takes raw_text's tokenizer
        shutil.copytree(root / "examples" / d, tmp_path / d, ignore=shutil.ignore_patterns("data", ".shardfeed", "*.pt"))
    env = dict(os.environ, SHARDFEED_BINARY=str(SHARDFEED_BIN), PYTHONPATH=str(root / "clients" / "python" / "src"))
    env.pop("SHARDFEED_SOCKET", None)

    def run(*cmd: str) -> str:
        done = subprocess.run(list(cmd), cwd=tmp_path / name, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    return run, str(root / "bin" / "venv" / "bin" / "python")


def losses_of(out: str) -> list[float]:
    return [float(line.split("loss ")[1].split(",")[0]) for line in out.splitlines() if "loss" in line]


def test_the_packed_example_trains_and_resumes(tmp_path):
    """examples/packed as its docstring runs it: the data, the packs, a run
    stopped at step 30 as a crash would stop it, and a second run that
    resumes at the commit, trains the rest of the epoch and learns."""
    run, python = example(tmp_path, "packed")
    run(python, "make_data.py")
    assert "6000 documents (bestFit length=128 window=500 overlong=cut) in 2047 packs" in run(str(SHARDFEED_BIN), "index", "-f", "dataset.yaml")
    first = run(python, "train.py", "--fresh", "--max-steps", "30")
    second = run(python, "train.py")
    assert first.splitlines()[0] == "127 steps left in the epoch" and "step 30: loss" in first, first
    assert second.splitlines()[0] == "97 steps left in the epoch" and "step 127: loss" in second and "step 30:" not in second, second
    losses = losses_of(first + second)
    assert losses[-1] < losses[0] / 4, losses


def test_the_raw_text_example_tokenizes_packs_and_resumes(tmp_path):
    """examples/raw_text as its manifest runs it: raw JSON Lines and a
    tokenizer.json, the packs counted with the tokenizer (index -f), the
    packed example's training on input_ids stopped at step 30, and a second
    run that resumes at the commit and learns on."""
    run, python = example(tmp_path, "raw_text")
    run(python, "make_data.py")
    indexed = run(str(SHARDFEED_BIN), "index", "-f", "dataset.yaml")
    assert "lengths of input_ids" in indexed and "6000 documents (bestFit length=128 window=500 overlong=cut) in 7479 packs" in indexed, indexed
    train = [python, "../packed/train.py", "--column", "input_ids", "--vocab", "257"]
    first = run(*train, "--fresh", "--max-steps", "30")
    second = run(*train, "--max-steps", "60")
    assert first.splitlines()[0] == "467 steps left in the epoch" and "step 30: loss" in first, first
    assert second.splitlines()[0] == "437 steps left in the epoch" and "step 60: loss" in second and "step 30:" not in second, second
    losses = losses_of(first + second)
    assert losses[-1] < losses[0] / 2, losses


def test_the_chat_example_trains_on_the_assistants_tokens_and_resumes(tmp_path):
    """examples/chat as its manifest runs it: conversations rendered with
    the chat template and packed, the packs counted as rendered (index
    -f); the packed loss_mask keeps the assistant's tokens only (never a
    role's token, never what the user wrote); the packed example trains on
    them to step 20, and a second run resumes at the commit and learns on."""
    import torch

    import shardfeed

    run, python = example(tmp_path, "chat")
    run(python, "make_data.py")
    indexed = run(str(SHARDFEED_BIN), "index", "-f", "dataset.yaml")
    assert "lengths of input_ids" in indexed and "3000 documents (bestFit length=128 window=500 overlong=cut) in 3573 packs" in indexed, indexed
    user, assistant, end = 257, 258, 259
    ds = shardfeed.FeedDataset.from_manifest(tmp_path / "chat" / "dataset.yaml", job="check", fresh=True, directory=str(tmp_path / "chat"))
    checked = 0
    for batch in ds:
        tokens, mask = batch["input_ids"].long(), batch["loss_mask"].bool()
        assert not mask[(tokens == user) | (tokens == assistant)].any(), "a role's token is in the loss"
        # What the user wrote: from <|user|> to its <|end|>.
        for row in range(tokens.shape[0]):
            inside = False
            for t, m in zip(tokens[row].tolist(), mask[row].tolist()):
                if t == user:
                    inside = True
                elif t == end and inside:
                    assert not m, "the user's <|end|> is in the loss"
                    inside = False
                elif t == assistant:
                    inside = False
                assert not (inside and m), "the user's words are in the loss"
        assert mask.any() and (tokens[mask] == end).any(), "no assistant token, or no assistant <|end|>, in the loss"
        checked += 1
        if checked == 5:
            break
    del ds
    train = [python, "../packed/train.py", "--column", "input_ids", "--vocab", "260"]
    first = run(*train, "--fresh", "--max-steps", "20")
    second = run(*train, "--max-steps", "60")
    assert first.splitlines()[0] == "223 steps left in the epoch" and "step 20: loss" in first, first
    assert second.splitlines()[0] == "203 steps left in the epoch" and "step 60: loss" in second and "step 20:" not in second, second
    losses = losses_of(first + second)
    assert losses[-1] < losses[0] / 2, losses
    assert torch.is_tensor(batch["loss_mask"])


def test_from_uri_packs_with_no_manifest(tmp_path, monkeypatch):
    """FeedDataset.from_uri(pack_length=…) indexes the data, counts its packs
    once and serves packed rows; to_manifest() is the packed dataset."""
    monkeypatch.delenv("SHARDFEED_SOCKET", raising=False)
    web = _write(tmp_path, "web", 3, 1)
    docs = [d for d in web[0]["tokens"].to_pylist() if d]
    ds = shardfeed.FeedDataset.from_uri(tmp_path / "web", batch_size=4, pack_length=SEQ, binary=str(SHARDFEED_BIN),
                                        directory=str(tmp_path), rank=0, world_size=1, drop_last=False, num_splits=1)
    assert "packing:" in ds.to_manifest() and f"sequenceLength: {SEQ}" in ds.to_manifest()
    tokens, seen = 0, set()
    for batch in ds:
        assert batch["tokens"].shape[1] == SEQ
        for r in range(batch["tokens"].shape[0]):
            if not batch["_shardfeed_pad"][r]:
                tokens += int(batch["loss_mask"][r].sum())
                seen.update(batch["doc_ids"][r].tolist())
    assert tokens == sum(len(d) for d in docs) and len(seen) == len(docs)
    with pytest.raises(shardfeed.ShardfeedError, match="pack_length=0"):
        shardfeed.FeedDataset.from_uri(tmp_path / "web", batch_size=4, pack_length=0, binary=str(SHARDFEED_BIN))


def test_from_uri_packs_across_shards(tmp_path, monkeypatch):
    """FeedDataset.from_uri(pack_across_shards=True): the packs index groups
    the row groups into units (a pack may span them), every document is
    served once; without pack_length it is refused."""
    monkeypatch.delenv("SHARDFEED_SOCKET", raising=False)
    web = _write(tmp_path, "web", 5, 2)
    docs = [d for t in web for d in t["tokens"].to_pylist() if d]
    ds = shardfeed.FeedDataset.from_uri(tmp_path / "web", batch_size=4, pack_length=SEQ, pack_across_shards=True,
                                        binary=str(SHARDFEED_BIN), directory=str(tmp_path), rank=0, world_size=1,
                                        drop_last=False, num_splits=1)
    assert "acrossShards: true" in ds.to_manifest()
    packs = json.loads(next((tmp_path / "web" / "_shardfeed").glob("packs-*.json")).read_text())["shards"]
    assert any(s.get("unit", 0) > 1 for s in packs), "no unit spans shards"
    tokens = 0
    for batch in ds:
        for r in range(batch["tokens"].shape[0]):
            if not batch["_shardfeed_pad"][r]:
                tokens += int(batch["loss_mask"][r].sum())
    assert tokens == sum(len(d) for d in docs)
    with pytest.raises(shardfeed.ShardfeedError, match="pack_across_shards=True"):
        shardfeed.FeedDataset.from_uri(tmp_path / "web", batch_size=4, pack_across_shards=True, binary=str(SHARDFEED_BIN))


def test_proportions_of_tokens_give_each_stream_its_share_of_tokens(tmp_path):
    """spec.packing.proportions: tokens. A stream of documents of 60 tokens
    packs one a sequence of 96, a stream of documents of 30 three: equal
    proportions of tokens give the first 3 packs for every 2 of the
    second, and the served batches hold as many tokens of each (their loss
    masks, by _shardfeed_stream); proportions of packs give equal packs."""
    for name, size in (("long", 60), ("short", 30)):
        (tmp_path / name).mkdir()
        n = 300 * (96 // size)  # 300 packs
        pq.write_table(pa.table({"tokens": pa.array([[i + 1] * size for i in range(n)], pa.list_(pa.int32()))}), tmp_path / name / "part-0.parquet")

    def manifest(unit: str) -> str:
        path = tmp_path / f"{unit}.yaml"
        path.write_text(f"""apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: tokens-{unit}}}
spec:
  streams:
  - {{name: long, format: parquet, source: {{uri: long/}}, proportion: "1"}}
  - {{name: short, format: parquet, source: {{uri: short/}}, proportion: "1"}}
  epochSize: 200
  numSplits: 1
  globalBatchSize: 8
  packing: {{column: tokens, sequenceLength: {SEQ}, proportions: {unit}}}
""")
        return str(path)

    for unit, want in (("tokens", [120, 80]), ("packs", [100, 100])):
        m = manifest(unit)
        for s in ("long", "short"):
            _index(m, s)
        summary = subprocess.run([str(SHARDFEED_BIN), "plan", "-f", m, "-o", "json"], capture_output=True, text=True, timeout=120)
        assert summary.returncode == 0, summary.stderr
        assert [s["perEpoch"] for s in json.loads(summary.stdout)["streams"]] == want
    ds = shardfeed.FeedDataset.from_manifest(manifest("tokens"), rank=0, world_size=1, binary=str(SHARDFEED_BIN), directory=str(tmp_path), fresh=True)
    tokens = [0, 0]
    for batch in ds:
        for stream, mask in zip(batch["_shardfeed_stream"].tolist(), batch["loss_mask"].numpy()):
            tokens[stream] += int(mask.sum())
    assert tokens[0] == 120 * 60 and abs(tokens[1] - tokens[0]) <= 2 * SEQ, tokens
