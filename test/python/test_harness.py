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


def test_a_server_that_does_not_start_shows_its_own_output(tmp_path):
    """A fixture's server that fails says why: its script's output, not
    "seek of closed file" from reading a log stop() had closed."""
    import pytest

    from conftest import _Server

    script = tmp_path / "broken.sh"
    script.write_text("#!/bin/sh\necho 'listen tcp 127.0.0.1:9000: bind: address already in use' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(RuntimeError) as failed:
        _Server(str(script))
    message = str(failed.value)
    assert "exited with 3" in message and "address already in use" in message, message


def test_minio_starts_again_when_its_first_start_exits(tmp_path):
    """hack/minio.sh tries new ports when MinIO exits at start (a port
    taken between choosing it and binding it), saying so with MinIO's log,
    and serves."""
    import os
    import subprocess

    from conftest import ROOT

    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    first = tmp_path / "first-start-done"
    (fake_bin / "minio").write_text(f"""#!/bin/sh
if [ ! -e {first} ]; then
  touch {first}
  echo 'FATAL Unable to start the server: listen tcp: address already in use' >&2
  exit 1
fi
exec {ROOT / 'bin' / 'minio'} "$@"
""")
    (fake_bin / "minio").chmod(0o755)
    done = subprocess.run([str(ROOT / "hack" / "minio.sh"), "--", "sh", "-c", 'curl -fsS "$SHARDFEED_S3_ENDPOINT/minio/health/ready"'],
                          env=dict(os.environ, SHARDFEED_BIN=str(fake_bin)), capture_output=True, text=True, timeout=180)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "MinIO exited at start (attempt 1 of 3)" in out and "address already in use" in out, out
    assert "MinIO ready after" in out, out
