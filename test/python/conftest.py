"""pytest fixtures with the real servers shardfeed runs against.

`minio` (per session) runs hack/minio.sh and `bucket` gives each test a fresh
bucket in it; `apiserver` (per session) runs hack/control-plane.sh: etcd and
kube-apiserver. The scripts clean up every process and temporary directory
when the session ends.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyarrow import fs

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120


class _Server:
    """A hack/ script running in its own session until stop()."""

    def __init__(self, script: str, *args: str):
        self._dir = tempfile.TemporaryDirectory(prefix="shardfeed-pytest-")
        self.env_file = Path(self._dir.name) / "env"
        self._log = open(Path(self._dir.name) / "log", "w+b")
        self._proc = subprocess.Popen(
            [str(ROOT / "hack" / script), "--env-file", str(self.env_file), *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.env = self._wait_for_env(script)

    def _wait_for_env(self, script: str) -> dict[str, str]:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.env_file.exists():
            exited = self._proc.poll() is not None
            if exited or time.monotonic() > deadline:
                # Read the script's output before stop() closes it: it is
                # the only account of why the start failed.
                how = f"exited with {self._proc.returncode}" if exited else f"wrote no env file in {START_TIMEOUT_S} s"
                out = self._output()
                self.stop()
                raise RuntimeError(f"{script} did not start ({how}); its output:\n{out}")
            time.sleep(0.1)
        pairs = (line.split("=", 1) for line in self.env_file.read_text().splitlines() if "=" in line)
        return {k: v for k, v in pairs}

    def _output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        if self._log.closed:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        self._log.close()
        self._dir.cleanup()


@dataclass
class MinIO:
    endpoint: str  # http://127.0.0.1:port
    access_key: str
    secret_key: str
    region: str

    def filesystem(self, **kwargs) -> fs.S3FileSystem:
        """A pyarrow S3 filesystem on this server."""
        scheme, host = self.endpoint.split("://", 1)
        return fs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            endpoint_override=host,
            scheme=scheme,
            **kwargs,
        )


@pytest.fixture(scope="session")
def minio():
    server = _Server("minio.sh")
    env = server.env
    try:
        yield MinIO(
            endpoint=env["SHARDFEED_S3_ENDPOINT"],
            access_key=env["AWS_ACCESS_KEY_ID"],
            secret_key=env["AWS_SECRET_ACCESS_KEY"],
            region=env["AWS_REGION"],
        )
    finally:
        server.stop()


@pytest.fixture
def bucket(minio: MinIO):
    """A fresh, empty bucket for one test, deleted with its objects after it."""
    name = f"test-{uuid.uuid4().hex[:16]}"
    s3 = minio.filesystem(allow_bucket_creation=True, allow_bucket_deletion=True)
    s3.create_dir(name)
    yield name
    s3.delete_dir(name)


@dataclass
class APIServer:
    url: str
    token: str
    ca_file: str
    kubeconfig: str

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        """One REST call with admin rights; returns (HTTP status, JSON body)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        ctx = ssl.create_default_context(cafile=self.ca_file)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")


@pytest.fixture(scope="session")
def apiserver():
    server = _Server("control-plane.sh")
    env = server.env
    try:
        yield APIServer(
            url=env["SHARDFEED_APISERVER"],
            token=env["SHARDFEED_APISERVER_TOKEN"],
            ca_file=env["SHARDFEED_APISERVER_CA"],
            kubeconfig=env["KUBECONFIG"],
        )
    finally:
        server.stop()


# The Python client under test: the working tree's, not an installed copy.
import sys  # noqa: E402

sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

SHARDFEED_BIN = ROOT / "bin" / "shardfeed"


def run_shardfeed(minio: MinIO, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, AWS_ACCESS_KEY_ID=minio.access_key, AWS_SECRET_ACCESS_KEY=minio.secret_key)
    return subprocess.run([str(SHARDFEED_BIN), *args], env=env, capture_output=True, text=True, check=check, timeout=300)


def wait_for_socket(path: str | Path, proc: subprocess.Popen, timeout: float = 60.0) -> float:
    """Wait until `path` exists while `proc` runs, and return the seconds
    left of `timeout` (at least 1). The client gives up on a socket missing
    for 3 s outside a pod, since nothing would create it; a `shardfeed
    serve` just started will, in its own time on a loaded machine."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return max(deadline - time.monotonic(), 1.0)


class Feed:
    """A dataset in MinIO and a `shardfeed serve` on it, restartable."""

    def __init__(self, minio: MinIO, bucket: str, workdir: Path, manifest: Path):
        self.minio, self.bucket, self.dir, self.manifest = minio, bucket, workdir, manifest
        self.socket = str(workdir / "run" / "feed.sock")
        self.proc: subprocess.Popen | None = None

    def start(self, *extra: str) -> "Feed":
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.minio.access_key, AWS_SECRET_ACCESS_KEY=self.minio.secret_key)
        self._log = open(self.dir / "serve.log", "ab")
        self.proc = subprocess.Popen(
            [str(SHARDFEED_BIN), "serve", "-f", str(self.manifest), "--socket", self.socket, "--cache-dir", str(self.dir / "cache"),
             "--state", str(self.dir / "state.json"), "--metrics-addr", "", *extra],
            env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )
        import shardfeed

        try:
            shardfeed.Client(self.socket).wait_ready(wait_for_socket(self.socket, self.proc))
        except shardfeed.SidecarNotReady:
            self.kill()
            raise RuntimeError(f"shardfeed serve did not start:\n{(self.dir / 'serve.log').read_text()}")
        return self

    def kill(self) -> None:
        """SIGKILL: nothing is flushed, nothing is cleaned up."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def stop(self) -> int | None:
        """SIGTERM, and the exit code (None if it was not running)."""
        code = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            code = self.proc.wait(timeout=30)
        self._close()
        return code

    def _close(self) -> None:
        self.proc = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None

    def plan_ids(self, world: int, workers: int = 1, epoch: int = 0) -> dict[tuple[int, int], list[int]]:
        """`shardfeed plan --ids`: (step, rank) -> the ids of that batch."""
        out = run_shardfeed(self.minio, "plan", "-f", str(self.manifest), "--ids", "--world-size", str(world),
                            "--workers", str(workers), "--epoch", str(epoch)).stdout
        lines = (json.loads(line) for line in out.splitlines())
        return {(d["step"], d["rank"]): d["ids"] for d in lines}


@pytest.fixture
def feed_factory(minio, bucket, tmp_path):
    """Make a Feed from a pyarrow table written as Parquet to MinIO (or from
    what the test wrote under the bucket's `name/` when table is None)."""
    feeds: list[Feed] = []

    def make(table, spec: str, *, row_group_size: int = 100, name: str = "web", start: bool = True, serve_args=()) -> Feed:
        import pyarrow.parquet as pq

        if table is not None:  # None: the test wrote s3://bucket/name/ itself
            pq.write_table(table, f"{bucket}/{name}/part-0.parquet", filesystem=minio.filesystem(), row_group_size=row_group_size)
        uri = f"s3://{bucket}/{name}/"
        run_shardfeed(minio, "index", uri, "--endpoint", minio.endpoint, "--insecure")
        workdir = tmp_path / f"feed-{len(feeds)}"
        workdir.mkdir()
        manifest = workdir / "dataset.yaml"
        manifest.write_text(f"""apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: {name}}}
spec:
  streams:
  - name: {name}
    format: parquet
    source: {{uri: "{uri}", endpoint: "{minio.endpoint}", insecure: true}}
{spec}""")
        feed = Feed(minio, bucket, workdir, manifest)
        feeds.append(feed)
        if start:
            feed.start(*serve_args)
        return feed

    yield make
    for f in feeds:
        f.stop()


def in_workers(_worker_id: int) -> None:
    """A worker_init_fn: code for DataLoader workers, so a FeedLoader with
    num_workers runs them (without it, an untransformed dataset is read in
    the training process) and a test exercises the workers' relay."""


def relay(workers: int) -> dict:
    """FeedLoader arguments that make its workers run (see in_workers)."""
    return {"worker_init_fn": in_workers} if workers else {}
