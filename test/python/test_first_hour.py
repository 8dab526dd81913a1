"""The first hour's trap 4: which job's progress a run uses, said on its
first line; --job, --fresh and --resume on `shardfeed serve`, and the
client's resume= and commit(), against real `serve` processes."""

import os
import signal
import subprocess

import numpy as np
import pyarrow as pa
import pytest

import shardfeed
from conftest import SHARDFEED_BIN, wait_for_socket

SPEC = "  numSplits: 2\n  globalBatchSize: 10\n"


class Serve:
    """`shardfeed serve` in a project directory, with the defaults a new
    user gets (socket and state under .shardfeed/)."""

    def __init__(self, feed, here):
        self.feed, self.here = feed, here
        self.env = dict(os.environ, AWS_ACCESS_KEY_ID=feed.minio.access_key, AWS_SECRET_ACCESS_KEY=feed.minio.secret_key)

    def start(self, *args):
        self.log = self.here / "serve.log"
        self.out = open(self.log, "wb")
        self.proc = subprocess.Popen([str(SHARDFEED_BIN), "serve", "-f", str(self.feed.manifest), "--metrics-addr", "", *args],
                                     cwd=self.here, env=self.env, stdout=self.out, stderr=subprocess.STDOUT)
        sock = self.here / ".shardfeed" / "feed.sock"
        shardfeed.Client(str(sock)).wait_ready(wait_for_socket(sock, self.proc))
        return self.first_line()

    def first_line(self):
        return self.log.read_text().splitlines()[0]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0, self.log.read_text()
        self.out.close()

    def run(self, *args):
        """serve expected to refuse: its exit code and output."""
        done = subprocess.run([str(SHARDFEED_BIN), "serve", "-f", str(self.feed.manifest), "--metrics-addr", "", *args],
                              cwd=self.here, env=self.env, capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout + done.stderr


@pytest.fixture
def project(feed_factory, tmp_path, monkeypatch):
    feed = feed_factory(pa.table({"id": pa.array(np.arange(200, dtype=np.int64))}), SPEC, start=False)
    here = tmp_path / "project"
    here.mkdir()
    monkeypatch.delenv("SHARDFEED_SOCKET", raising=False)
    monkeypatch.chdir(here)
    return Serve(feed, here)


def test_a_run_says_which_job_it_resumes_and_jobs_keep_their_own_state(project):
    first = project.start()
    assert 'job "local" of TrainingDataset "web" starts from the beginning' in first, first
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(rank=0, world_size=1))
    # Before any batch, commit() and state_dict() agree (a fresh loader's
    # commit used to send (0, 0)).
    assert loader.state_dict()["step"] == 0
    for i, _ in enumerate(loader):
        if i == 4:
            break
    loader.commit()
    project.stop()
    state = project.here / ".shardfeed" / "web" / "local" / "state.json"

    again = project.start()
    assert 'job "local" of TrainingDataset "web" resumes at epoch 0, step 5' in again and "--fresh" in again, again
    fresh_loader = shardfeed.FeedLoader(shardfeed.FeedDataset(rank=0, world_size=1))
    assert fresh_loader.state_dict()["step"] == 5
    assert fresh_loader.commit()["step"] == 5, "commit() before iterating must agree with state_dict()"
    with pytest.raises(shardfeed.ShardfeedError, match=r"committed progress \(epoch 0, step 5\) and resume='fresh'"):
        next(iter(shardfeed.FeedLoader(shardfeed.FeedDataset(rank=0, world_size=1), resume="fresh")))
    assert next(iter(shardfeed.FeedLoader(shardfeed.FeedDataset(rank=0, world_size=1), resume="must")))["_shardfeed_step"][0] == 5
    project.stop()
    before = state.read_bytes()

    other = project.start("--job", "run2")
    assert 'job "run2" of TrainingDataset "web" starts from the beginning' in other, other
    with pytest.raises(shardfeed.ShardfeedError, match="no committed progress to resume"):
        next(iter(shardfeed.FeedLoader(shardfeed.FeedDataset(rank=0, world_size=1), resume="must")))
    assert next(iter(shardfeed.FeedLoader(shardfeed.FeedDataset(rank=0, world_size=1), resume="fresh")))["_shardfeed_step"][0] == 0
    project.stop()

    # --fresh starts the job again under its own name (it once committed to
    # local-<time>, and the next run without --fresh resumed the old
    # progress, training its steps again); the earlier state is kept aside.
    fresh = project.start("--fresh")
    assert '--fresh: job "local" of TrainingDataset "web" starts again; its earlier progress (epoch 0, step 5) is kept in' in fresh, fresh
    kept = list((project.here / ".shardfeed" / "web").glob("local-*/state.json"))
    assert len(kept) == 1 and kept[0].read_bytes() == before, "the earlier progress is kept whole"
    assert 'job "local" of TrainingDataset "web" starts from the beginning' in project.log.read_text().splitlines()[1]
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(rank=0, world_size=1))
    for i, _ in enumerate(loader):
        if i == 2:
            break
    assert loader.commit()["step"] == 3
    project.stop()
    again = project.start()
    assert 'job "local" of TrainingDataset "web" resumes at epoch 0, step 3' in again, again
    project.stop()
    assert "local-" in subprocess.run([str(SHARDFEED_BIN), "jobs"], cwd=project.here, capture_output=True, text=True).stdout

    code, out = project.run("--resume", "--job", "nothing")
    assert code != 0 and 'job "nothing" of TrainingDataset "web" has no committed progress' in out, out
    code, out = project.run("--resume", "--fresh")
    assert code != 0 and "exclude each other" in out, out


def test_errors_that_reach_python_name_its_arguments_not_serve_flags(project, monkeypatch):
    """A Python user sets from_manifest's fresh= and job=, not serve's
    flags: what serve says reaches them in those words."""
    project.start()
    loader = shardfeed.FeedLoader(shardfeed.FeedDataset(rank=0, world_size=1))
    for i, _ in enumerate(loader):
        if i == 2:
            break
    loader.commit()
    project.stop()
    manifest = project.feed.manifest
    manifest.write_text(manifest.read_text().replace("globalBatchSize: 10", "globalBatchSize: 20"))  # another plan
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", project.feed.minio.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", project.feed.minio.secret_key)
    with pytest.raises(shardfeed.ShardfeedError) as refused:
        shardfeed.FeedDataset.from_manifest(manifest, rank=0, world_size=1, binary=str(SHARDFEED_BIN))
    said = str(refused.value)
    assert "fresh=True" in said and 'job="NAME"' in said and "--fresh" not in said and "--job" not in said, said
