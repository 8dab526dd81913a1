"""Batches onto an accelerator with one copy (FeedLoader(device=...)).

A batch in the hand-off already lives in a shared-memory slot the training
process maps. On CUDA, each slot's segment is page-locked once
(cudaHostRegister), so `.to(device, non_blocking=True)` of a tensor viewing
it is one DMA from the slot, with no pinned staging copy (PyTorch cannot
pin shared memory itself: pytorch#78018). The copies run on a side stream:
batch k+1 is copied while step k runs, and the loop's stream waits for a
batch's copy before its first use.

A slot goes back to the sidecar when nothing views its bytes; a DMA reads
them after `.to()` has returned, so the host batch is held here until its
copy has completed (its event), and only then dropped. Before pulling the
next batch from the sidecar, every copy handed out is waited for: the
batches held are at most `ahead` + 1, and the sidecar is never left
waiting for a slot only this process could free.

Elsewhere (another device type, or no CUDA), each tensor is copied
synchronously: the same batches, steps and exactly-once accounting.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Iterator, Protocol

from . import _stream

log = logging.getLogger("shardfeed")

# Columns the loader itself reads (the step of each row): kept on the host.
_OWN = "_shardfeed_"

_END = object()


class Backend(Protocol):
    """How batches reach a device: copies started, handed over, completed."""

    def start(self, batch: dict[str, Any]) -> tuple[dict[str, Any], Any]: ...

    def hand_over(self, batch: dict[str, Any], event: Any) -> None: ...

    def wait(self, event: Any) -> None: ...

    def close(self) -> None: ...


def _map_tensors(batch: dict[str, Any], fn: Any) -> dict[str, Any]:
    """batch with fn applied to every tensor (in lists too); the loader's
    own columns copied on the CPU (a few numbers a row: the device batch
    then views nothing of the slot, which goes back once the copy is done)."""
    import torch

    out: dict[str, Any] = {}
    for k, v in batch.items():
        if k.startswith(_OWN):
            out[k] = v.clone() if isinstance(v, torch.Tensor) else v
        elif isinstance(v, torch.Tensor):
            out[k] = fn(v)
        elif isinstance(v, list) and v and all(isinstance(x, torch.Tensor) for x in v):
            out[k] = [fn(x) for x in v]
        else:
            out[k] = v
    return out


class SyncBackend:
    """A device without streams to overlap with (the CPU, or a GPU type
    without CUDA): each tensor copied at once, nothing left in flight."""

    def __init__(self, device: Any):
        self.device = device

    def start(self, batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        return _map_tensors(batch, lambda t: t.to(self.device, copy=True)), None

    def hand_over(self, batch: dict[str, Any], event: Any) -> None:
        pass

    def wait(self, event: Any) -> None:
        pass

    def close(self) -> None:
        pass


class CudaBackend:
    """Copies on a side stream from page-locked slots; an event per batch."""

    def __init__(self, device: Any):
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.stream = torch.cuda.Stream(device=self.device)  # type: ignore[no-untyped-call]
        self.cudart = torch.cuda.cudart()  # type: ignore[no-untyped-call]
        # Segment address → its mapping, kept mapped while registered.
        self.registered: dict[int, Any] = {}
        self._failed = False

    def _register(self, t: Any) -> None:
        seg = _stream.segment_of(t.data_ptr()) if t.numel() else None
        if seg is None or seg.addr in self.registered or self._failed:
            return
        err = int(self.cudart.cudaHostRegister(seg.addr, len(seg.map), 0))
        if err:
            # Copies still work, from pageable memory (a staging copy each).
            self._failed = True
            log.warning("cudaHostRegister of a %d-byte batch slot failed (CUDA error %d): batches are copied to %s "
                        "from pageable memory; check the locked-memory limit (ulimit -l) of the training container",
                        len(seg.map), err, self.device)
            return
        self.registered[seg.addr] = seg.map

    def start(self, batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        torch = self.torch

        def copy(t: Any) -> Any:
            self._register(t)
            return t.to(self.device, non_blocking=True)

        with torch.cuda.stream(self.stream):
            out = _map_tensors(batch, copy)
            event = torch.cuda.Event()
            event.record(self.stream)
        return out, event

    def hand_over(self, batch: dict[str, Any], event: Any) -> None:
        main = self.torch.cuda.current_stream(self.device)
        main.wait_event(event)
        # The tensors were made on the side stream: the allocator must not
        # reuse their memory before the loop's stream is done with them.
        for v in batch.values():
            for t in v if isinstance(v, list) else [v]:
                if isinstance(t, self.torch.Tensor) and t.is_cuda:
                    t.record_stream(main)

    def wait(self, event: Any) -> None:
        event.synchronize()

    def close(self) -> None:
        self.stream.synchronize()
        for addr in self.registered:
            self.cudart.cudaHostUnregister(addr)
        self.registered.clear()


def checked(device: Any) -> Any:
    """device as a torch.device, refused if malformed or CUDA without one."""
    import torch

    d = torch.device(device)
    if d.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: this torch has no CUDA device ({torch.__version__}); "
                         "use device=None to keep batches on the CPU")
    return d


def backend_for(device: Any) -> Backend:
    d = checked(device)
    return CudaBackend(d) if d.type == "cuda" else SyncBackend(d)


class ToDevice:
    """batches (dicts of tensors) onto device, `ahead` batches copied
    ahead of the one the loop has; see the module's docstring."""

    def __init__(self, batches: Iterator[Any], backend: Backend, ahead: int = 1):
        # Held by this process at once: `ahead` copies started, the one being
        # pulled; the sidecar's --handoff-slots (4 by default) must exceed it.
        if ahead < 0:
            raise ValueError(f"ahead must be 0 or more, got {ahead}")
        self.batches, self.backend, self.ahead = batches, backend, ahead
        # Copies started: (device batch, event, host batch).
        self.pending: deque[tuple[dict[str, Any], Any, Any]] = deque()
        # Batches handed out whose copy may still read their slot.
        self.held: deque[tuple[Any, Any]] = deque()

    def _settle(self) -> None:
        """Wait for every copy handed out, then drop its host batch (its
        slot goes back to the sidecar once nothing else views it)."""
        while self.held:
            event, _ = self.held[0]
            self.backend.wait(event)
            self.held.popleft()

    def _start(self, host: Any) -> None:
        if not isinstance(host, dict):
            raise TypeError(f"FeedLoader(device=...) moves dicts of tensors (output='torch'), got {type(host).__name__}")
        out, event = self.backend.start(host)
        self.pending.append((out, event, host))

    def _hand_out(self) -> dict[str, Any]:
        out, event, host = self.pending.popleft()
        self.backend.hand_over(out, event)
        self.held.append((event, host))
        return out

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            while True:
                # The copies handed out complete before the sidecar is asked
                # for another batch (it may need one of their slots).
                self._settle()
                host = next(self.batches, _END)
                if host is _END:
                    break
                self._start(host)
                del host
                if len(self.pending) > self.ahead:
                    yield self._hand_out()
            while self.pending:
                yield self._hand_out()
            self._settle()
        finally:
            # Stopped early, or done: every copy started completes before
            # its slot can go back, then the device's state is let go.
            try:
                for _, event, _ in self.pending:
                    self.backend.wait(event)
                self._settle()
            finally:
                self.pending.clear()
                self.held.clear()
                self.backend.close()
