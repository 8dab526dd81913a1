"""Batches in shared memory, for DataLoader worker processes.

torch's DataLoader sends a worker's tensors to the training process through
shared memory: a tensor on the heap is first copied into a fresh segment,
and each fresh segment costs page faults on both sides. A worker here reads
each batch from the socket straight into a shared segment, and the batch's
tensors are views of it, so the DataLoader only passes a file descriptor.

With a FeedLoader, segments are reused: the loader watches the batches it
handed out and, once the training loop holds no tensor of one, marks the
worker's slot free in a small shared table; the worker writes into a slot only when it is free. A batch
the loop keeps is never overwritten: the worker takes a fresh segment.
A reused segment the loader already maps is handed over as offsets alone
(a SlotBatch), so the DataLoader passes no descriptor for it either.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .dataset import SLOT_KEY

SLOTS = 8  # per worker: the DataLoader's prefetch, the loop's batch, and one being filled
SMALL = 64 << 10  # messages below this stay on the heap: the DataLoader copies them cheaply
SPARE = 64 << 10  # room per segment for arrays decoding makes
_GRAIN = 1 << 20


def release_table(workers: int) -> torch.Tensor:
    """The table of released generations, one row per worker."""
    table: torch.Tensor = torch.zeros((workers, SLOTS), dtype=torch.int64)
    table.share_memory_()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    return table


def _shared(size: int) -> torch.Tensor:
    """A segment of size bytes in shared memory."""
    seg = torch.empty(size, dtype=torch.uint8)
    seg.share_memory_()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    return seg


class Space:
    """One batch's segment: the message it was read from, then room for the
    arrays decoding makes (unpacked booleans), so every tensor of the batch
    is in the one segment and the DataLoader passes one descriptor."""

    def __init__(self, seg: torch.Tensor, slot: int, gen: int, size: int):
        self.seg, self.slot, self.gen = seg, slot, gen
        self._free = -(-size // 64) * 64

    def tensor(self, arr: np.ndarray) -> torch.Tensor | None:
        """arr as a tensor in the segment: a view where it already is, else a
        copy into the room left; None if neither."""
        if not arr.flags.c_contiguous:
            return None
        dtype = torch.from_numpy(np.empty(0, dtype=arr.dtype)).dtype
        start = arr.ctypes.data - self.seg.data_ptr()
        if 0 <= start and start + arr.nbytes <= self.seg.numel():
            if start % arr.dtype.itemsize:
                return None
            return self.seg[start:start + arr.nbytes].view(dtype).view(arr.shape)
        start = self._free
        if start + arr.nbytes > self.seg.numel():
            return None
        self._free = -(-(start + arr.nbytes) // 64) * 64
        out = self.seg[start:start + arr.nbytes].view(dtype).view(arr.shape)
        out.copy_(torch.from_numpy(arr))
        return out


class Segments:
    """A worker's shared segments. take(size) reads a message into one of
    at least size bytes; with a release table it is a reused slot when one
    is free, else a fresh segment."""

    def __init__(self, released: torch.Tensor | None, worker: int):
        self._released = released
        self._worker = worker
        self._slots: list[torch.Tensor | None] = [None] * SLOTS
        self._used = [0] * SLOTS  # generation handed out per slot
        self._sent: list[torch.Tensor | None] = [None] * SLOTS  # the segment the loader holds per slot
        self.current: Space | None = None

    def take(self, size: int) -> memoryview | None:
        """Where to read a message of size bytes; None for small ones (the
        schema, the end of the stream), which the heap holds better."""
        if size < SMALL:
            self.current = None
            return None
        self.current = self._take(size)
        return memoryview(self.current.seg.numpy().data).cast("B")[:size]

    def _take(self, size: int) -> Space:
        need = size + SPARE
        if self._released is not None:
            row = self._released[self._worker]
            for j in range(SLOTS):
                if int(row[j]) != self._used[j]:
                    continue  # still in the training loop's hands
                seg = self._slots[j]
                if seg is None or seg.numel() < need:
                    seg = _shared(-(-need // _GRAIN) * _GRAIN)
                    self._slots[j] = seg
                self._used[j] += 1
                return Space(seg, j, self._used[j], size)
        return Space(_shared(need), -1, 0, size)

    def tag(self) -> tuple[int, int, int] | None:
        """What the loader needs to release the current segment."""
        if self.current is None or self.current.slot < 0:
            return None
        return self._worker, self.current.slot, self.current.gen

    def pack(self, batch: Any) -> Any:
        """The batch to hand to the DataLoader: for a reused slot the loader
        already maps, only where each tensor is in it (no descriptor to
        pass); the segment itself the first time."""
        sp = self.current
        if sp is None or sp.slot < 0 or not isinstance(batch, dict):
            return batch
        # In the batch's order: (name, (offset, bytes, dtype, shape), None)
        # for a tensor in the segment, (name, None, value) for the rest.
        entries: list[tuple[str, tuple[int, int, torch.dtype, tuple[int, ...]] | None, Any]] = []
        ptr, end = sp.seg.data_ptr(), sp.seg.data_ptr() + sp.seg.numel()
        for name, v in batch.items():
            if isinstance(v, torch.Tensor) and v.is_contiguous() and ptr <= v.data_ptr() and v.data_ptr() + v.nbytes <= end:
                entries.append((name, (v.data_ptr() - ptr, v.nbytes, v.dtype, tuple(v.shape)), None))
            else:
                entries.append((name, None, v))
        seg = None
        if self._sent[sp.slot] is not sp.seg:
            seg = sp.seg
            self._sent[sp.slot] = sp.seg
        return SlotBatch((self._worker, sp.slot, sp.gen), seg, entries)


class SlotBatch:
    """A batch in a reused slot, as a worker hands it over: the slot, its
    segment (the first time only), and the batch's entries."""

    __slots__ = ("tag", "seg", "entries")

    def __init__(self, tag: tuple[int, int, int], seg: torch.Tensor | None, entries: list[Any]):
        self.tag, self.seg, self.entries = tag, seg, entries

    def __reduce__(self) -> tuple[type[SlotBatch], tuple[Any, ...]]:
        return (SlotBatch, (self.tag, self.seg, self.entries))


class Releaser:
    """The loader's side: remembers the slot of every batch handed out and
    frees it in the table once the training loop holds no tensor of it.

    It keeps each slot's storage itself, so torch maps a reused segment
    once (its cache of received segments holds them only weakly) and a
    batch is free when that reference is the storage's last.
    """

    def __init__(self, table: torch.Tensor):
        self.table = table
        self._out: list[tuple[int, int, int, list[Any]]] = []
        self._kept: dict[tuple[int, int], Any] = {}

    def unpack(self, item: Any) -> Any:
        """A worker's SlotBatch as the batch dict, its tensors views of the
        slot's segment this process maps; anything else as it is."""
        if not isinstance(item, SlotBatch):
            return item
        worker, slot, _ = item.tag
        if item.seg is not None:
            self._kept[(worker, slot)] = item.seg.untyped_storage()
        storage = self._kept[(worker, slot)]
        base = torch.empty(0, dtype=torch.uint8).set_(storage)
        batch = {}
        for name, where, value in item.entries:
            if where is None:
                batch[name] = value
            else:
                start, nbytes, dtype, shape = where
                batch[name] = base[start:start + nbytes].view(dtype).view(shape)
        batch[SLOT_KEY] = item.tag
        return batch

    def track(self, batch: Any) -> None:
        tag = batch.pop(SLOT_KEY, None) if isinstance(batch, dict) else None
        if tag is None:
            return
        worker, slot, gen = tag
        # A storage's Python object is unique, so this is one per storage.
        storages = list({id(s): s for s in (v.untyped_storage() for v in batch.values() if isinstance(v, torch.Tensor))}.values())
        if storages:
            self._kept[(worker, slot)] = max(storages, key=lambda s: s.nbytes())
        self._out.append((worker, slot, gen, storages))

    def sweep(self) -> None:
        keep = []
        for worker, slot, gen, storages in self._out:
            if all(torch._C._storage_Use_Count(s._cdata) == 1 for s in storages):
                self.table[worker, slot] = gen
            else:
                keep.append((worker, slot, gen, storages))
        self._out = keep
