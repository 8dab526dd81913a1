"""pyarrow reads `shardfeed serve`'s socket: the batches of the plan, exactly
once, with the columns of design §1; a cut stream is an error, not an end.

The dataset is Parquet written by real pyarrow into real MinIO and indexed
with `shardfeed index`; the server is the real binary.
"""

import http.client
import json
import socket

import numpy as np
import pyarrow as pa
import pytest

from conftest import run_shardfeed


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("shardfeed", timeout=60)
        self.path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def get(sock_path, path):
    conn = UnixConnection(sock_path)
    conn.request("GET", path)
    return conn, conn.getresponse()


@pytest.fixture
def served(feed_factory):
    """A Parquet stream of 3000 rows in MinIO and `shardfeed serve` on it."""
    n = 3000
    table = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "tokens": pa.array([np.arange(16, dtype=np.int32) + j for j in range(n)], type=pa.list_(pa.int32())),
        "text": [f"sample {j}" for j in range(n)],
    })
    feed = feed_factory(table, "  numSplits: 6\n  globalBatchSize: 60\n  shuffle: {seed: 9, blockSize: 500}\n",
                        row_group_size=250, serve_args=("--prefetch", "0"))
    yield {"socket": feed.socket, "manifest": feed.manifest, "minio": feed.minio, "bucket": feed.bucket}
    code = feed.stop()
    assert code == 0, (feed.dir / "serve.log").read_text()


def test_pyarrow_reads_every_batch_of_the_plan_exactly_once(served):
    world, workers = 3, 2
    plan = {}
    out = run_shardfeed(served["minio"], "plan", "-f", str(served["manifest"]), "--ids",
                        "--world-size", str(world), "--workers", str(workers)).stdout
    for line in out.splitlines():
        rec = json.loads(line)
        plan[(rec["step"], rec["rank"])] = rec["ids"]
    seen = []
    for rank in range(world):
        for worker in range(workers):
            conn, resp = get(served["socket"], f"/v1/batches?rank={rank}&world={world}&worker={worker}&workers={workers}")
            assert resp.status == 200, resp.read()
            assert resp.getheader("Content-Type") == "application/vnd.apache.arrow.stream"
            assert int(resp.getheader("Shardfeed-Start-Step")) == worker
            steps = []
            for batch in pa.ipc.open_stream(resp):
                assert batch.schema.names == ["id", "tokens", "text", "_shardfeed_index", "_shardfeed_stream", "_shardfeed_step", "_shardfeed_pad"]
                assert batch.schema.field("_shardfeed_index").type == pa.int64()
                assert batch.schema.field("_shardfeed_stream").type == pa.int16()
                assert batch.schema.field("_shardfeed_pad").type == pa.bool_()
                step = batch.column("_shardfeed_step")[0].as_py()
                ids = batch.column("_shardfeed_index").to_pylist()
                assert ids == plan[(step, rank)]
                # Every value is the sample's own: id, tokens and text agree.
                assert batch.column("id").to_pylist() == ids
                tokens = np.asarray(batch.column("tokens").flatten()).reshape(len(ids), 16)
                assert (tokens[:, 0] == np.asarray(ids)).all() and (tokens[:, 15] == np.asarray(ids) + 15).all()
                assert batch.column("text").to_pylist() == [f"sample {i}" for i in ids]
                steps.append(step)
                seen.extend(ids)
            conn.close()
            assert steps == list(range(worker, len(plan) // world, workers))
    assert sorted(seen) == list(range(3000))


def test_a_bad_request_says_what_to_fix(served):
    conn, resp = get(served["socket"], "/v1/batches?rank=0&world=4")
    body = json.loads(resp.read())
    conn.close()
    assert resp.status == 400
    assert body["field"] == "world" and "do not divide spec.numSplits (6)" in body["error"]


def test_a_cut_stream_raises_in_pyarrow_instead_of_ending(served):
    s3 = served["minio"].filesystem()
    path = f"{served['bucket']}/web/part-0.parquet"
    with s3.open_input_stream(path) as f:
        data = f.read()
    # Overwrite the object with a truncated copy: every later range read fails.
    with s3.open_output_stream(path) as f:
        f.write(data[: len(data) // 3])
    conn, resp = get(served["socket"], "/v1/batches?rank=0&world=1")
    assert resp.status == 200
    # http.client sees the missing terminal chunk (IncompleteRead); were the
    # HTTP framing lost, pyarrow would still miss the end-of-stream marker.
    with pytest.raises((pa.ArrowInvalid, http.client.IncompleteRead, OSError)):
        for _ in pa.ipc.open_stream(resp):
            pass
    conn.close()
    conn, resp = get(served["socket"], "/v1/status")
    status = json.loads(resp.read())
    conn.close()
    assert status["lastErrors"], status


def test_outside_a_pod_a_missing_socket_fails_at_once_saying_what_to_run(tmp_path, monkeypatch):
    """Trap 3 of the first-hour issue: the client waited 300 s in silence."""
    import time

    import shardfeed

    monkeypatch.delenv("SHARDFEED_SOCKET", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    with pytest.raises(shardfeed.SidecarNotReady) as err:
        shardfeed.Client().wait_ready(300)
    waited = time.monotonic() - start
    msg = str(err.value)
    assert waited < 60, f"waited {waited:.0f} s for a socket nothing will create"
    for want in ("/var/run/shardfeed/feed.sock", str(tmp_path / ".shardfeed" / "feed.sock"), "shardfeed serve -f dataset.yaml"):
        assert want in msg, msg


def test_serve_and_the_client_agree_on_the_default_socket(feed_factory, tmp_path, monkeypatch):
    """`shardfeed serve` without --socket, and the client without a socket,
    started in the same directory, find each other."""
    import os
    import signal
    import subprocess

    import shardfeed
    from conftest import SHARDFEED_BIN, wait_for_socket

    table = pa.table({"id": pa.array(np.arange(200, dtype=np.int64))})
    feed = feed_factory(table, "  numSplits: 2\n  globalBatchSize: 10\n", start=False)
    monkeypatch.delenv("SHARDFEED_SOCKET", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    here = tmp_path / "project"
    here.mkdir()
    monkeypatch.chdir(here)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=feed.minio.access_key, AWS_SECRET_ACCESS_KEY=feed.minio.secret_key)
    with open(here / "serve.log", "wb") as log:
        proc = subprocess.Popen([str(SHARDFEED_BIN), "serve", "-f", str(feed.manifest), "--metrics-addr", ""],
                                cwd=here, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            client = shardfeed.Client()
            client.wait_ready(wait_for_socket(here / ".shardfeed" / "feed.sock", proc))
            assert client.socket == ".shardfeed/feed.sock"
            assert (here / ".shardfeed" / "feed.sock").is_socket()
            assert client.state()["epoch"] == 0
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    assert proc.returncode == 0, (here / "serve.log").read_text()
