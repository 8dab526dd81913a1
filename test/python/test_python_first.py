"""The Python-first start (the first hour, round two, item 6): a URI and a
constructor, no YAML; the stream indexed where it has none, its filter's
rows selected; the TrainingDataset it describes applies to a real API
server unchanged; index and convert as functions. Against the real
shardfeed command, MinIO and kube-apiserver."""

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardfeed
from conftest import ROOT, SHARDFEED_BIN


def plan_ids(manifest: Path, env: dict[str, str] | None = None) -> dict[int, list[int]]:
    out = subprocess.run([str(SHARDFEED_BIN), "plan", "-f", str(manifest), "--ids", "--world-size", "1"],
                         capture_output=True, text=True, check=True, timeout=120, env=env).stdout
    return {json.loads(line)["step"]: json.loads(line)["ids"] for line in out.splitlines()}


def test_from_uri_indexes_selects_and_serves_a_local_table(tmp_path, monkeypatch):
    """from_uri on a directory of Parquet files with no index: the format
    read from the files, the index and the filter's selection written under
    _shardfeed/, and every matching row served exactly once, in the batches
    shardfeed plan lists for to_manifest()'s TrainingDataset."""
    data = tmp_path / "events"
    data.mkdir()
    n = 240  # 80 matching rows: 10 in each of 8 splits, none dropped
    table = pa.table({"id": pa.array(np.arange(n, dtype=np.int64)), "text": [f"t{i}" for i in range(n)],
                      "score": pa.array(np.arange(n) / n)})
    pq.write_table(table.slice(0, 120), data / "part-0.parquet", row_group_size=50)
    pq.write_table(table.slice(120), data / "part-1.parquet", row_group_size=50)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHARDFEED_SOCKET", raising=False)

    ds = shardfeed.FeedDataset.from_uri(data, batch_size=8, shuffle_seed=3, columns=["id", "text"], filter="id % 3 == 0",
                                        drop_last=False, rank=0, world_size=1, output="numpy", binary=str(SHARDFEED_BIN))
    assert (data / "_shardfeed" / "index.json").is_file()
    assert len(list((data / "_shardfeed").glob("filter-*.runs"))) == 1
    manifest = ds.to_manifest()
    for want in ['format: "parquet"', f'uri: "{data.as_uri()}/"', 'filter: "id % 3 == 0"', "numSplits: 8",
                 "globalBatchSize: 8", 'name: "events"', "seed: 3"]:
        assert want in manifest, manifest
    saved = tmp_path / "events.yaml"
    saved.write_text(manifest)
    planned = plan_ids(saved)

    seen: dict[int, int] = {}
    steps = 0
    for batch in ds:
        assert {"id", "text"} <= set(batch) and "score" not in batch, batch.keys()
        ids = [int(i) for i in batch["id"]]
        for i, text in zip(ids, batch["text"]):
            assert i % 3 == 0 and text == f"t{i}"
            seen[i] = seen.get(i, 0) + 1
        steps += 1
    assert steps == len(planned)
    assert seen == {i: 1 for i in range(0, n, 3)}

    # Another filter over the same data selects its rows over the index
    # there, which stays as it is (and so does every plan over it).
    before = (data / "_shardfeed" / "index.json").stat().st_mtime_ns
    other = shardfeed.FeedDataset.from_uri(data, batch_size=8, filter="id < 16", rank=0, world_size=1, output="numpy",
                                           binary=str(SHARDFEED_BIN))
    assert sorted(int(i) for b in other for i in b["id"]) == list(range(16))
    assert (data / "_shardfeed" / "index.json").stat().st_mtime_ns == before
    assert len(list((data / "_shardfeed").glob("filter-*.runs"))) == 2

    # A second from_uri of the same data reads the index there: no new one.
    before = (data / "_shardfeed" / "index.json").stat().st_mtime_ns
    again = shardfeed.FeedDataset.from_uri(data, batch_size=8, shuffle_seed=3, columns=["id", "text"], filter="id % 3 == 0",
                                           drop_last=False, rank=0, world_size=1, output="numpy", binary=str(SHARDFEED_BIN))
    assert again.to_manifest() == manifest
    assert (data / "_shardfeed" / "index.json").stat().st_mtime_ns == before


def test_from_uri_reads_a_save_to_disk_directory(tmp_path, monkeypatch):
    """A directory laid out as datasets' save_to_disk lays it out (Arrow IPC
    stream files beside state.json and dataset_info.json; datasets itself
    writes the Go tests' datasets) is read as huggingface, every row once."""
    data = tmp_path / "hf"
    data.mkdir()
    n = 96
    table = pa.table({"id": pa.array(np.arange(n, dtype=np.int64)), "text": [f"t{i}" for i in range(n)]})
    for k in range(2):
        with pa.ipc.new_stream(data / f"data-0000{k}-of-00002.arrow", table.schema) as w:
            for batch in table.slice(k * 48, 48).to_batches(max_chunksize=16):
                w.write_batch(batch)
    (data / "state.json").write_text(json.dumps({"_data_files": [{"filename": f"data-0000{k}-of-00002.arrow"} for k in range(2)]}))
    (data / "dataset_info.json").write_text(json.dumps({"features": {}}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHARDFEED_SOCKET", raising=False)
    ds = shardfeed.FeedDataset.from_uri(data, batch_size=8, shuffle_seed=1, rank=0, world_size=1, output="numpy", binary=str(SHARDFEED_BIN))
    assert 'format: "huggingface"' in ds.to_manifest()
    seen = sorted(int(i) for batch in ds for i in batch["id"])
    assert seen == list(range(n))


def test_from_uri_refuses_what_it_cannot_serve_in_python_words(tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    with pytest.raises(shardfeed.ShardfeedError, match="give format="):
        shardfeed.FeedDataset.from_uri(empty, batch_size=8, binary=str(SHARDFEED_BIN))
    with pytest.raises(shardfeed.ShardfeedError, match=r"give the format of s3://b/p/ \(format="):
        shardfeed.FeedDataset.from_uri("s3://b/p/", batch_size=8, binary=str(SHARDFEED_BIN))
    with pytest.raises(shardfeed.ShardfeedError, match="not a multiple of num_splits=4"):
        shardfeed.FeedDataset.from_uri("s3://b/p/", format="parquet", batch_size=6, num_splits=4, binary=str(SHARDFEED_BIN))
    data = tmp_path / "t"
    data.mkdir()
    pq.write_table(pa.table({"id": pa.array(np.arange(10, dtype=np.int64))}), data / "part-0.parquet")
    with pytest.raises(shardfeed.ShardfeedError) as refused:
        shardfeed.FeedDataset.from_uri(data, batch_size=2, filter="langue == 'en'", directory=tmp_path, binary=str(SHARDFEED_BIN))
    said = str(refused.value)
    assert "no column langue: the columns are id" in said and "--filter" not in said, said


def test_the_manifest_from_uri_writes_applies_to_a_cluster_unchanged(minio, bucket, apiserver, tmp_path, monkeypatch):
    """The notebook's dataset, in MinIO: from_uri indexes it there with the
    environment's credentials, and to_manifest()'s TrainingDataset, naming
    the Secret a cluster reads the bucket with, is taken by a real API
    server with the CRD's schema and rules as it is."""
    s3 = minio.filesystem()
    pq.write_table(pa.table({"id": pa.array(np.arange(64, dtype=np.int64)), "lang": ["en", "de"] * 32}),
                   f"{bucket}/chat/part-0.parquet", filesystem=s3)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", minio.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", minio.secret_key)
    monkeypatch.setenv("AWS_REGION", minio.region)
    monkeypatch.delenv("SHARDFEED_SOCKET", raising=False)
    ds = shardfeed.FeedDataset.from_uri(f"s3://{bucket}/chat/", format="parquet", batch_size=4, shuffle_seed=1, filter="lang == 'en'",
                                        endpoint=minio.endpoint, insecure=True, credentials_secret="minio", directory=tmp_path,
                                        rank=0, world_size=1, output="arrow", binary=str(SHARDFEED_BIN))
    rows = sum(b.num_rows for b in ds)
    assert rows == 32
    manifest = tmp_path / "chat.yaml"
    manifest.write_text(ds.to_manifest())

    env = dict(os.environ, KUBECONFIG=apiserver.kubeconfig)
    kubectl = [str(ROOT / "bin" / "kubectl")]
    crd = ROOT / "config" / "crd" / "bases" / "data.shardfeed.io_trainingdatasets.yaml"
    subprocess.run([*kubectl, "apply", "--server-side", "-f", str(crd)], env=env, check=True, capture_output=True, timeout=60)
    # kubectl wait fails at once while the new CRD has no conditions yet
    # ("accessor error: <nil>"): the API server is polled instead.
    deadline = time.monotonic() + 60
    while True:
        got = subprocess.run([*kubectl, "get", "crd/trainingdatasets.data.shardfeed.io", "-o",
                              "jsonpath={.status.conditions[?(@.type=='Established')].status}"],
                             env=env, capture_output=True, text=True, timeout=60)
        if got.stdout.strip() == "True":
            break
        assert time.monotonic() < deadline, f"the CRD is not Established after 60 s: {got.stdout} {got.stderr}"
        time.sleep(0.2)
    ns = f"py-{bucket[-8:]}"
    subprocess.run([*kubectl, "create", "namespace", ns], env=env, check=True, capture_output=True, timeout=60)
    done = subprocess.run([*kubectl, "apply", "-n", ns, "-f", str(manifest)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(subprocess.run([*kubectl, "get", "-n", ns, "trainingdataset", "chat", "-o", "json"], env=env, check=True,
                                    capture_output=True, text=True, timeout=60).stdout)
    stream = got["spec"]["streams"][0]
    assert stream["source"]["credentialsSecretRef"] == {"name": "minio"} and stream["filter"] == "lang == 'en'"
    assert got["spec"]["globalBatchSize"] == 4 and got["spec"]["shuffle"]["seed"] == 1


def test_index_and_convert_are_python_functions(tmp_path):
    """shardfeed.convert and shardfeed.index do what the commands do, and
    their errors name the functions' arguments."""
    src = tmp_path / "chat"
    src.mkdir()
    (src / "part-0.jsonl").write_text("".join(json.dumps({"id": i, "text": f"hello {i}"}) + "\n" for i in range(100)))
    out = shardfeed.convert(src, tmp_path / "chat-parquet", from_format="jsonl", to_format="parquet", binary=str(SHARDFEED_BIN))
    assert "100 samples in 1 parquet shards" in out, out
    assert pq.read_table(tmp_path / "chat-parquet").num_rows == 100
    said = shardfeed.index(src, format="jsonl", filter="id < 10", binary=str(SHARDFEED_BIN))
    assert "10 of 100 samples match" in said, said
    assert (src / "_shardfeed" / "index.json").is_file()
    with pytest.raises(shardfeed.ShardfeedError) as refused:
        shardfeed.index(src, format="jsonl", filter="idd < 10", binary=str(SHARDFEED_BIN))
    assert "no column idd" in str(refused.value) and "filter=" in str(refused.value), refused.value
