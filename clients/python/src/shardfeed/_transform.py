"""Per-batch transforms on a thread pool, in order (Lance's `transform=`).

The transform takes and returns a pyarrow.RecordBatch of the same rows.
Batches are handed to the pool ahead of the training loop and come back in
step order. A batch whose transform fails either ends the stream
(on_transform_error="raise") or is handed out as a pad batch
("skip_batch"): the shape of the transformed batches, every row marked
_shardfeed_pad and its ids those of the failed batch, as a corrupt shard
under onCorruptShard: skip is. So every DDP rank gets a batch for every
step, and the ids account for each planned sample once.
"""

from __future__ import annotations

import os
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterator, Literal

import pyarrow as pa

from ._stats import Counters
from .errors import TransformError

OnTransformError = Literal["raise", "skip_batch"]
ON_TRANSFORM_ERRORS: tuple[OnTransformError, ...] = ("raise", "skip_batch")

Transform = Callable[[pa.RecordBatch], pa.RecordBatch]

PREFIX = "_shardfeed_"
PAD = "_shardfeed_pad"


def default_threads() -> int:
    """The pool's size by default: the CPUs this process may use."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def _complete(out: object, raw: pa.RecordBatch) -> pa.RecordBatch:
    """The transform's output with the _shardfeed_ columns it dropped put
    back from its input; an output that is not a batch of the same rows is
    the transform's error."""
    if not isinstance(out, pa.RecordBatch):
        raise TypeError(f"the transform returned {type(out).__name__}, not a pyarrow.RecordBatch")
    if out.num_rows != raw.num_rows:
        raise ValueError(f"the transform returned {out.num_rows} rows for a batch of {raw.num_rows}: a transform keeps every "
                         f"row (every rank's batches must stay the same size); mark rows to ignore in a column of your own")
    names = list(out.schema.names)
    arrays = list(out.columns)
    fields = list(out.schema)
    for i, field in enumerate(raw.schema):
        if field.name.startswith(PREFIX) and field.name not in names:
            fields.append(field)
            arrays.append(raw.column(i))
    if len(fields) == out.num_columns:
        return out
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, metadata=out.schema.metadata))


def _pad(template: pa.RecordBatch, raw: pa.RecordBatch) -> pa.RecordBatch:
    """A pad batch for raw: the template's columns and shape (rows cycled
    to raw's count), raw's _shardfeed_ ids, every row a pad."""
    idx = pa.array([i % template.num_rows for i in range(raw.num_rows)], type=pa.int64())
    base = template.take(idx)
    arrays = []
    for i, field in enumerate(base.schema):
        if field.name == PAD:
            arrays.append(pa.array([True] * raw.num_rows, type=field.type))
        elif field.name.startswith(PREFIX) and field.name in raw.schema.names:
            arrays.append(raw.column(field.name).cast(field.type))
        else:
            arrays.append(base.column(i))
    return pa.RecordBatch.from_arrays(arrays, schema=base.schema)


class OrderedTransform:
    """Runs transform over a stream of (step, batch) on a thread pool of
    threads, keeping up to 2 × threads batches in flight, yielding in order.

    Args:
        transform: the function over each pyarrow.RecordBatch.
        threads: the pool's threads.
        on_error: "raise" or "skip_batch".
        counters: where to count rows waiting, seconds and skips.
    """

    def __init__(self, transform: Transform, threads: int, on_error: OnTransformError, counters: Counters):
        self.transform, self.threads, self.on_error, self.counters = transform, threads, on_error, counters

    def _timed(self, raw: pa.RecordBatch) -> pa.RecordBatch:
        start = time.perf_counter()
        try:
            return _complete(self.transform(raw), raw)
        finally:
            self.counters.add("transform_seconds", time.perf_counter() - start)

    def run(self, batches: Iterator[tuple[int, pa.RecordBatch]]) -> Iterator[tuple[int, pa.RecordBatch]]:
        c = self.counters
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="shardfeed-transform")
        pending: deque[tuple[int, pa.RecordBatch, Future[pa.RecordBatch]]] = deque()
        # Failed batches before any success: padded once a transformed
        # batch shows the shape to pad with.
        failed: list[tuple[int, pa.RecordBatch]] = []
        template: pa.RecordBatch | None = None
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < 2 * self.threads:
                    start = time.perf_counter()
                    item = next(batches, None)
                    c.add("fetch_seconds", time.perf_counter() - start)
                    if item is None:
                        exhausted = True
                        break
                    k, raw = item
                    c.add("rows_waiting_raw", raw.num_rows)
                    fut = pool.submit(self._timed, raw)
                    fut.add_done_callback(self._done(raw.num_rows))
                    pending.append((k, raw, fut))
                if not pending:
                    break
                k, raw, fut = pending.popleft()
                try:
                    out = fut.result()
                except Exception as err:  # noqa: BLE001 - the user's transform may raise anything
                    if self.on_error == "raise":
                        raise TransformError(f"the transform failed on step {k} ({raw.num_rows} rows): {err!r}; "
                                             f"on_transform_error='skip_batch' hands such a batch out as pad rows instead") from err
                    if template is None:
                        failed.append((k, raw))
                        continue
                    yield k, self._skipped(template, raw)
                    continue
                c.add("rows_waiting_transformed", -raw.num_rows)
                if template is None:
                    template = out
                    for fk, fraw in failed:
                        yield fk, self._skipped(template, fraw)
                    failed.clear()
                yield k, out
            if failed:
                raise TransformError(f"the transform failed on every batch of this stream ({len(failed)}, steps {failed[0][0]} "
                                     f"to {failed[-1][0]}): there is no transformed batch to shape pad rows after; fix the transform")
        finally:
            for _, _, fut in pending:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)

    def _done(self, rows: int) -> Callable[[Future[pa.RecordBatch]], None]:
        """Moves a batch's rows from waiting raw to waiting transformed."""
        def done(fut: Future[pa.RecordBatch]) -> None:
            self.counters.add("rows_waiting_raw", -rows)
            if not fut.cancelled() and fut.exception() is None:
                self.counters.add("rows_waiting_transformed", rows)
        return done

    def _skipped(self, template: pa.RecordBatch, raw: pa.RecordBatch) -> pa.RecordBatch:
        self.counters.add("skipped_batches", 1)
        self.counters.add("skipped_rows", raw.num_rows)
        return _pad(template, raw)
