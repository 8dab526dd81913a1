"""The client's own observability: what a training loop can read of its
input pipeline (as Lance's StreamingDataset offers), and the data-wait
reports that feed the sidecar's per-rank histogram."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ._client import Client
from .errors import SidecarError

# How often, and after how many batches at most, a rank sends its waits.
REPORT_EVERY_S = 5.0
REPORT_MAX = 1024


@dataclass(frozen=True)
class Stats:
    """A snapshot of a loader's input pipeline, summed over its DataLoader
    workers.

    Attributes:
        batches: batches handed to the training loop.
        consumed_rows: their rows.
        rows_waiting_raw: rows read from the sidecar, waiting for the
            transform.
        rows_waiting_transformed: rows transformed, waiting to be handed out.
        fetch_seconds: time spent reading batches from the sidecar's socket.
        transform_seconds: time the transform ran, summed over its threads.
        data_wait_seconds: time the training loop waited for its batches.
        skipped_batches: batches whose transform failed, handed out as pad
            batches (on_transform_error="skip_batch").
        skipped_rows: their rows.
    """

    batches: int = 0
    consumed_rows: int = 0
    rows_waiting_raw: int = 0
    rows_waiting_transformed: int = 0
    fetch_seconds: float = 0.0
    transform_seconds: float = 0.0
    data_wait_seconds: float = 0.0
    skipped_batches: int = 0
    skipped_rows: int = 0


FIELDS = [f.name for f in fields(Stats)]
_INDEX = {name: i for i, name in enumerate(FIELDS)}
_INT = {f.name for f in fields(Stats) if f.type == "int"}
_BATCHES, _ROWS, _WAIT = _INDEX["batches"], _INDEX["consumed_rows"], _INDEX["data_wait_seconds"]


class Counters:
    """A Stats being counted, in a float64 array that may live in shared
    memory (a row of a FeedLoader's table, one per DataLoader worker)."""

    def __init__(self, row: np.ndarray | None = None):
        self.row = row if row is not None else np.zeros(len(FIELDS), dtype=np.float64)
        self._lock = threading.Lock()  # the transform's threads count too

    # Pickled for a worker that torch's DataLoader spawns (or starts from
    # a forkserver): the counts go, and the worker takes a lock of its own.
    def __getstate__(self) -> dict[str, Any]:
        return {"row": self.row}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.row, self._lock = state["row"], threading.Lock()

    def add(self, name: str, value: float) -> None:
        i = _INDEX[name]
        with self._lock:
            self.row[i] += value

    def batch(self, rows: int, waited: float) -> None:
        """Count a batch of rows handed out after waiting for it: one lock
        and three sums, not three calls of add (this runs once a batch)."""
        row = self.row
        with self._lock:
            row[_BATCHES] += 1
            row[_ROWS] += rows
            row[_WAIT] += waited

    def stats(self) -> Stats:
        return to_stats(self.row)


def to_stats(row: np.ndarray) -> Stats:
    """A Stats of a row (or the sum of rows) of counters."""
    values: dict[str, Any] = {}
    for i, name in enumerate(FIELDS):
        v = float(row[i])
        values[name] = int(round(v)) if name in _INT else v
    return Stats(**values)


class WaitReporter:
    """Sends a rank's data-wait times to its sidecar (POST /v1/waits) every
    few seconds: the sidecar's shardfeed_sidecar_data_wait_seconds{rank}.
    A report is best effort: it never fails the training loop, and a
    sidecar that does not know the endpoint is not asked again."""

    def __init__(self, client: Client, rank: int):
        self.client, self.rank = client, rank
        self._waits: list[float] = []
        self._last = time.monotonic()
        self._off = False

    def add(self, seconds: float) -> None:
        if self._off:
            return
        self._waits.append(max(seconds, 0.0))
        if len(self._waits) >= REPORT_MAX or time.monotonic() - self._last >= REPORT_EVERY_S:
            self.flush()

    def flush(self) -> None:
        waits, self._waits, self._last = self._waits, [], time.monotonic()
        if not waits or self._off:
            return
        try:
            self.client.post("/v1/waits", {"rank": self.rank, "seconds": waits})
        except SidecarError as err:
            if err.status in (404, 405):  # a sidecar of an older release
                self._off = True
        except Exception:  # noqa: BLE001 - a lost report is a gap in a graph, not a failure
            pass
