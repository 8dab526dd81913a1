"""The hand-off's golden frames (docs/handoff.md): what a sidecar sent,
byte by byte and descriptor by descriptor (clients/testdata/handoff),
replayed to this client. No sidecar runs: the replayer says only what the
recording says, and writes a slot only once the client released the batch
before in it, as a sidecar must."""

import gc
import json
import mmap
import os
import socket
import threading
import time
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

import shardfeed

from conftest import ROOT

GOLDEN = ROOT / "clients" / "testdata" / "handoff"
WAITING = 2  # the sidecar's waiting word, after the slots' and two others


def _body(chunk: bytes) -> bytes:
    return chunk[chunk.index(b"\n") + 2:-2]


def _segment(size: int) -> tuple[int, mmap.mmap]:
    fd = os.memfd_create("replay", os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    return fd, mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)


class Replay(threading.Thread):
    """Serves one recording to one connection on a socket of its own."""

    def __init__(self, folder: Path, tmp: Path):
        super().__init__(daemon=True)
        self.folder = folder
        self.tr = json.loads((folder / "transcript.json").read_text())
        self.resp = (folder / "response.bin").read_bytes()
        control = next(c for c in self.tr["chunks"] if c["kind"] == "C")
        self.slots = json.loads(_body(self.resp[control["at"]:control["end"]]))["slots"]
        self.ctl_fd, self.ctl = _segment(control["bytes"])
        self.words = np.frombuffer(self.ctl, dtype=np.uint64)
        self.path = str(tmp / "feed.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.target = ""
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._serve()
        except BaseException as err:  # reported by the test
            self.error = err

    def _wait_release(self, slot: int, gen: int) -> None:
        deadline = time.monotonic() + 30
        while int(self.words[slot]) != gen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the client never released generation {gen} of slot {slot}")
            time.sleep(0.001)

    def _serve(self) -> None:
        with self.listener:
            conn, _ = self.listener.accept()
        ctl_fd, self.ctl_fd = self.ctl_fd, -1
        with conn:
            conn.settimeout(60)
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data:
                    raise ConnectionError("the client closed before its request's end")
                head += data
            self.target = head.split(b"\r\n", 1)[0].split()[1].decode()
            # The sidecar's waiting word stays set: the client wakes it
            # after each read and release.
            self.words[self.slots + WAITING] = 1
            segments: dict[int, mmap.mmap] = {}
            gens: dict[int, int] = {}
            pos = 0
            for c in self.tr["chunks"]:
                conn.sendall(self.resp[pos:c["at"]])
                chunk = self.resp[c["at"]:c["end"]]
                if c["kind"] == "C":
                    socket.send_fds(conn, [chunk], [ctl_fd])
                elif c["kind"] == "S":
                    fd, segments[c["slot"]] = _segment(c["bytes"])
                    socket.send_fds(conn, [chunk], [fd])
                    os.close(fd)
                else:
                    if c["kind"] == "B":
                        self._wait_release(c["slot"], gens.get(c["slot"], 0))
                        data = (self.folder / c["contents"]).read_bytes()
                        segments[c["slot"]][:len(data)] = data
                        gens[c["slot"]] = c["gen"]
                    conn.sendall(chunk)
                pos = c["end"]
            os.close(ctl_fd)
            try:
                # The terminal chunk: a client that stops at the
                # end-of-stream marker may have closed its end already.
                conn.sendall(self.resp[pos:])
                # The client's end of the connection ends the replay.
                while conn.recv(4096):
                    pass
            except (BrokenPipeError, ConnectionResetError):
                pass


@pytest.mark.parametrize("name", ["releases", "keeps"])
def test_the_client_reads_the_golden_frames(name, tmp_path):
    replay = Replay(GOLDEN / name, tmp_path)
    replay.start()
    want = [json.loads(line) for line in (GOLDEN / name / "batches.jsonl").read_text().splitlines()]
    client = shardfeed.Client(replay.path, timeout=60)
    stream = client.batches(rank=0, world=4, epoch=0, handoff=True)
    got = []
    for batch in stream:
        got.append({"inSlot": stream.placement is not None, "rows": batch.to_pylist()})
    del batch  # the last batch's slot is released once nothing views it
    gc.collect()
    replay.join(60)
    assert replay.error is None, replay.error
    recorded = urllib.parse.parse_qs(urllib.parse.urlsplit(replay.tr["target"]).query)
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(replay.target).query) == recorded
    assert got == want
    words = [int(w) for w in replay.words]
    control = replay.tr["control"]
    assert words[:replay.slots] == control["released"]
    assert words[replay.slots:replay.slots + 2] == [control["read"], control["seq"]]
