"""Read whole epochs from a shardfeed socket with pyarrow, as a trainer would.

Usage: socket_reader.py SOCKET EPOCHS [--touch]

Prints one JSON line: {"seconds": s, "bytes": n, "batches": k} over the
epochs (rank 0 of a world of 1, one worker, each epoch from step 0).
With --touch every column is turned into a numpy view and summed, so the
bytes are read, not only received.
"""

import http.client
import json
import socket
import sys
import time

import numpy as np
import pyarrow as pa


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("shardfeed")
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path)
        self.sock = s


def touch(batch):
    total = 0
    for col in batch.columns:
        if pa.types.is_fixed_size_list(col.type):
            total += int(np.asarray(col.flatten()).sum(dtype=np.int64))
        elif pa.types.is_binary(col.type):
            total += int(np.frombuffer(col.buffers()[2], dtype=np.uint8).sum(dtype=np.int64))
        elif pa.types.is_integer(col.type):
            total += int(np.asarray(col).sum(dtype=np.int64))
    return total


def main():
    path, epochs = sys.argv[1], int(sys.argv[2])
    do_touch = "--touch" in sys.argv[3:]
    nbytes = batches = 0
    start = time.perf_counter()
    for epoch in range(epochs):
        conn = UnixConnection(path)
        conn.request("GET", f"/v1/batches?rank=0&world=1&epoch={epoch}&step=0")
        resp = conn.getresponse()
        if resp.status != 200:
            raise SystemExit(f"sidecar: {resp.status} {resp.read().decode()}")
        reader = pa.ipc.open_stream(resp)
        for batch in reader:
            nbytes += batch.nbytes
            batches += 1
            if do_touch:
                touch(batch)
        conn.close()
    print(json.dumps({"seconds": time.perf_counter() - start, "bytes": nbytes, "batches": batches}))


if __name__ == "__main__":
    main()
