"""FeedDataset: a PyTorch IterableDataset of the sidecar's ready batches."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Generator, Iterator

from . import _convert
from ._convert import Output
from ._client import DEFAULT_WAIT_S, Client
from .errors import StreamCut

SLOT_KEY = "_shardfeed_slot"  # a worker's shared-memory slot, which a FeedLoader releases

try:  # torch is optional: without it the dataset is a plain iterable
    import torch
    import torch.utils.data as _tud
except ImportError:  # pragma: no cover - exercised where torch is absent
    torch = None  # type: ignore[assignment]

if TYPE_CHECKING:
    _Base = _tud.IterableDataset[Any]
else:
    _Base = _tud.IterableDataset if torch is not None else object

STEP_COLUMN = "_shardfeed_step"

OUTPUTS: tuple[Output, ...] = ("torch", "numpy", "arrow")


def resume_position(epoch: int, step: int, steps: int) -> tuple[int, int]:
    """Where a job reads next from its committed (epoch, step): there, or
    the next epoch's first step when the committed epoch is complete.

    Args:
        epoch: the committed epoch.
        step: the committed step (every rank finished the steps before it).
        steps: the plan's steps per epoch (0: not known, no roll-over).
    """
    if steps and step >= steps:
        return epoch + 1, 0
    return epoch, step


def _rank_and_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Explicit values, else torch.distributed, else torchrun's RANK and
    WORLD_SIZE, else a single process."""
    if rank is not None and world_size is not None:
        return rank, world_size
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        r, w = torch.distributed.get_rank(), torch.distributed.get_world_size()
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        r, w = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    else:
        r, w = 0, 1
    return (rank if rank is not None else r), (world_size if world_size is not None else w)


def batch_step(batch: Any) -> int:
    """The step of a batch in any output form."""
    col = batch.column(STEP_COLUMN) if hasattr(batch, "column") else batch[STEP_COLUMN]
    first = col[0]
    return int(first.as_py() if hasattr(first, "as_py") else first)


def _sidecar_says(client: Client) -> str:
    """Why the sidecar ended a stream, from its /v1/status, as the trainer's
    exception should say it."""
    try:
        errors = Client(client.socket, timeout=5).status().get("lastErrors") or []
    except Exception as err:  # noqa: BLE001 - the sidecar may be gone: say so
        return f"the sidecar on {client.socket} does not answer /v1/status either ({err})"
    if not errors:
        return f"the sidecar on {client.socket} reports no error (/v1/status)"
    last = errors[-1]
    return f"the sidecar says: {last.get('error', last)}"


class FeedDataset(_Base):
    """The batches of this rank, ready: iterate it, or give it to a DataLoader
    with batch_size=None (a FeedLoader does that and counts progress).

    In a DataLoader with num_workers=n, worker w reads steps s, s+n, … so the
    DataLoader yields the steps in order (design §3 step 7). Every batch is a
    dict of the projected columns and _shardfeed_index, _shardfeed_stream,
    _shardfeed_step and _shardfeed_pad (a pyarrow.RecordBatch with
    output="arrow").

    Args:
        socket: the sidecar's Unix socket; default $SHARDFEED_SOCKET, else
            the first that exists of /var/run/shardfeed/feed.sock (in a pod)
            and .shardfeed/feed.sock (where `shardfeed serve` listens).
        rank: this process's rank; default torch.distributed's, else $RANK,
            else 0.
        world_size: the number of ranks; default torch.distributed's, else
            $WORLD_SIZE, else 1. It must divide the dataset's numSplits.
        columns: the dataset's columns to deliver (the _shardfeed_ columns
            come always); default all.
        output: "torch" (default with torch installed), "numpy" or "arrow".
        epoch: the epoch to read; default the committed one (the next one
            when the committed epoch is complete).
        wait: seconds to wait for the sidecar to be ready.
    """

    def __init__(self, socket: str | None = None, *, rank: int | None = None, world_size: int | None = None,
                 columns: list[str] | None = None, output: Output | None = None, epoch: int | None = None,
                 wait: float = DEFAULT_WAIT_S):
        if output is None:
            output = "torch" if torch is not None else "numpy"
        if output not in OUTPUTS:
            raise ValueError(f"output={output!r}: use one of {', '.join(OUTPUTS)}")
        if output == "torch" and torch is None:
            raise ValueError('output="torch" needs torch installed; use output="numpy" or "arrow"')
        self.socket = socket
        self.columns = list(columns) if columns is not None else None
        self.output: Output = output
        self.wait = wait
        self._rank, self._world = rank, world_size
        self._epoch = epoch
        # Where the next stream starts: k0 for every worker (worker w at
        # k0 + w, a plain DataLoader restarted at k0), or this worker's own
        # next step (StatefulDataLoader restores each worker's).
        self._start: int | None = None
        self._next: int | None = None
        self._fingerprint: str | None = None
        # A FeedLoader's table of released shared-memory slots (_shm): with
        # it, DataLoader workers reuse their segments.
        self._released: torch.Tensor | None = None

    @property
    def rank(self) -> int:
        return _rank_and_world(self._rank, self._world)[0]

    @property
    def world_size(self) -> int:
        return _rank_and_world(self._rank, self._world)[1]

    @property
    def fingerprint(self) -> str | None:
        """The plan's fingerprint the batches were read under, once known."""
        return self._fingerprint

    def client(self) -> Client:
        """A client of this dataset's sidecar."""
        return Client(self.socket)

    def use_release_table(self, table: torch.Tensor | None) -> None:
        """Let DataLoader workers reuse the shared-memory slots the table
        marks released (a FeedLoader's; None: a fresh segment per batch)."""
        self._released = table

    def set_epoch(self, epoch: int) -> None:
        """Read epoch next, from its first step.

        Args:
            epoch: the epoch to read.
        """
        self._epoch = int(epoch)
        self._start, self._next = None, None

    def resume(self, epoch: int, step: int, fingerprint: str | None = None) -> None:
        """Start the next iteration at (epoch, step): worker w at step + w.

        Args:
            epoch: the epoch to read.
            step: the first step to read.
            fingerprint: the plan the position is in; the sidecar refuses
                another (None: not checked).
        """
        self._epoch, self._start, self._next = int(epoch), int(step), None
        self._fingerprint = fingerprint

    def resolve_epoch(self, client: Client) -> int:
        """The epoch to read: the one set, else the committed one (the next
        one when the committed epoch is complete).

        Args:
            client: a client of the sidecar, to ask for the committed state.
        """
        if self._epoch is not None:
            return self._epoch
        state = client.state()
        steps = int(client.status().get("steps", 0))
        return resume_position(int(state.get("epoch", 0)), int(state.get("step", 0)), steps)[0]

    # The Stateful protocol of torchdata's StatefulDataLoader: a worker's
    # state is the next step it will produce.
    def state_dict(self) -> dict[str, Any]:
        """This worker's position: the epoch, the next step it produces."""
        return {"epoch": self._epoch, "next_step": self._next, "start": self._start, "fingerprint": self._fingerprint}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at a position state_dict() returned.

        Args:
            state: a worker's state_dict().
        """
        self._epoch = state.get("epoch")
        self._next = state.get("next_step")
        self._start = state.get("start")
        self._fingerprint = state.get("fingerprint")

    def __iter__(self) -> Iterator[Any]:
        worker, workers = 0, 1
        if torch is not None:
            info = _tud.get_worker_info()
            if info is not None:
                worker, workers = info.id, info.num_workers
        batches = self._batches(worker, workers)
        try:
            for k, batch in batches:
                # The state is what this worker handed out: set before
                # yielding, so a snapshot taken after the item sees it.
                self._next = k + workers
                yield batch
        finally:
            batches.close()

    def _batches(self, worker: int, workers: int) -> Generator[tuple[int, Any], None, None]:
        """(step, batch) of this worker's stream, reconnecting once at the
        step it expected when the stream is cut."""
        rank, world = _rank_and_world(self._rank, self._world)
        client = self.client()
        client.wait_ready(self.wait)
        self._epoch = self.resolve_epoch(client)
        segments = None
        if self.output == "torch" and _tud.get_worker_info() is not None:
            from ._shm import Segments

            segments = Segments(self._released, worker)
        step = self._next if self._next is not None else (self._start + worker if self._start is not None else None)
        cut: StreamCut | None = None
        while True:
            if cut is not None:
                # A restarted sidecar (a pod's sidecar container restarts by
                # itself) takes a moment to come back.
                client.wait_ready(self.wait)
            stream = client.batches(rank=rank, world=world, worker=worker, workers=workers,
                                    epoch=self._epoch, step=step, fingerprint=self._fingerprint,
                                    alloc=segments.take if segments is not None else None)
            expected = stream.start_step
            self._fingerprint = stream.fingerprint
            try:
                for batch in stream:
                    k = batch_step(batch)
                    expected = k + workers
                    cut = None
                    if segments is None:
                        yield k, _convert.convert(batch, self.output, self.columns)
                        continue
                    out = _convert.convert(batch, self.output, self.columns, segments.current)
                    yield k, segments.pack(out)
                return
            except StreamCut as err:
                if cut is not None:
                    raise StreamCut(f"rank {rank} worker {worker}: the stream of epoch {self._epoch} was cut twice at step "
                                    f"{expected}: {err}; {_sidecar_says(client)}") from err
                cut = err
                step = expected  # reconnect once, exactly where the stream stopped
