"""The test harness itself: real MinIO, real kube-apiserver, real pyarrow and torch."""

import uuid
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch


def test_minio_round_trips_a_parquet_file(minio, bucket):
    s3 = minio.filesystem()
    table = pa.table({"tokens": pa.array(np.arange(10_000, dtype=np.int32)), "text": [f"s{i}" for i in range(10_000)]})
    path = f"{bucket}/stream/part-0.parquet"
    pq.write_table(table, path, filesystem=s3, row_group_size=2_500)

    info = s3.get_file_info(path)
    assert info.size > 0
    meta = pq.ParquetFile(path, filesystem=s3).metadata
    assert meta.num_row_groups == 4
    assert pq.read_table(path, filesystem=s3).equals(table)


def test_buckets_are_fresh_per_test(minio, bucket):
    from pyarrow import fs

    listing = minio.filesystem().get_file_info(fs.FileSelector(bucket, recursive=True))
    assert listing == []


def test_apiserver_creates_and_reads_back_a_configmap(apiserver):
    ns = f"test-{uuid.uuid4().hex[:8]}"
    status, _ = apiserver.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    assert status == 201
    cm = {"metadata": {"name": "demo-plan"}, "data": {"fingerprint": "abc"}}
    status, created = apiserver.request("POST", f"/api/v1/namespaces/{ns}/configmaps", cm)
    assert status == 201, created
    status, got = apiserver.request("GET", f"/api/v1/namespaces/{ns}/configmaps/demo-plan")
    assert status == 200
    assert got["data"] == {"fingerprint": "abc"}
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    status, _ = apiserver.request("POST", f"/api/v1/namespaces/{ns}/configmaps", cm)
    assert status == 409  # AlreadyExists: the server is real


def test_fixed_width_arrow_column_becomes_a_tensor_without_copy():
    column = pa.array(np.arange(4096, dtype=np.int64))
    view = column.to_numpy(zero_copy_only=True)
    # Arrow buffers are immutable, so the array is read-only; torch warns and
    # shares the memory anyway, which is what a zero-copy client wants.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        tensor = torch.from_numpy(view)
    assert tensor.dtype == torch.int64
    assert tensor.data_ptr() == column.buffers()[1].address
    assert int(tensor.sum()) == 4095 * 4096 // 2


def test_torchdata_stateful_dataloader_resumes_mid_epoch():
    from torchdata.stateful_dataloader import StatefulDataLoader

    loader = StatefulDataLoader(list(range(10)), batch_size=2)
    it = iter(loader)
    first = [next(it).tolist() for _ in range(2)]
    state = loader.state_dict()
    resumed = StatefulDataLoader(list(range(10)), batch_size=2)
    resumed.load_state_dict(state)
    rest = [b.tolist() for b in resumed]
    assert first == [[0, 1], [2, 3]]
    assert rest == [[4, 5], [6, 7], [8, 9]]
