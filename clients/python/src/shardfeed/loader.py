"""FeedLoader: the DataLoader of a FeedDataset, counting progress in the
training loop's own process (design §4)."""

from __future__ import annotations

import logging
import time
from typing import Any, Iterator, Literal

from . import _convert
from ._client import Client
from ._device import ToDevice, backend_for, checked
from ._stats import FIELDS, Counters, Stats, WaitReporter, to_stats
from .dataset import STEP_COLUMN, FeedDataset, batch_step, resume_position
from .errors import ShardfeedError

try:
    import torch
except ImportError:  # pragma: no cover - exercised where torch is absent
    torch = None  # type: ignore[assignment]

log = logging.getLogger("shardfeed")

Resume = Literal["auto", "must", "fresh"]
RESUMES: tuple[Resume, ...] = ("auto", "must", "fresh")

_END = object()

# DataLoader arguments that only workers take (torch refuses them with
# num_workers=0).
WORKER_ONLY = ("persistent_workers", "prefetch_factor", "worker_init_fn", "multiprocessing_context")

MICRO = "_shardfeed_micro"
MICROS = "_shardfeed_micros"


def _rows(batch: Any) -> int:
    if isinstance(batch, dict):
        steps = batch[STEP_COLUMN]
        return len(steps) if getattr(steps, "ndim", 1) and hasattr(steps, "__len__") else 1
    return int(batch.num_rows)


def _inner_dataset(source: Any) -> FeedDataset:
    """The FeedDataset source reads: source itself, or the one a dataset of
    the user's holds as an attribute (looked for a few levels down)."""
    if isinstance(source, FeedDataset):
        return source
    found: list[FeedDataset] = []
    seen: set[int] = set()

    def look(obj: Any, depth: int) -> None:
        if id(obj) in seen or depth > 3:
            return
        seen.add(id(obj))
        if isinstance(obj, FeedDataset):
            if all(f is not obj for f in found):
                found.append(obj)
            return
        values = list(vars(obj).values()) if hasattr(obj, "__dict__") else []
        if isinstance(obj, (list, tuple)):
            values = list(obj)
        for value in values:
            if isinstance(value, (FeedDataset, list, tuple)) or hasattr(value, "__dict__") and not isinstance(value, type):
                look(value, depth + 1)

    look(source, 0)
    name = type(source).__name__
    if not found:
        raise TypeError(f"FeedLoader reads a FeedDataset, or a dataset of yours that holds one as an attribute "
                        f"(self.source = shardfeed.FeedDataset(...)); the {name} it was given holds none")
    if len(found) > 1:
        raise TypeError(f"the {name} given to FeedLoader holds {len(found)} FeedDatasets: a loader counts the steps of "
                        f"one; give each its own loader")
    return found[0]


def _split(batch: Any, m: int) -> list[Any]:
    """Cut a local batch into micro-batches of m rows."""
    n = _rows(batch)
    if n % m:
        raise ValueError(f"micro_batch_size={m} does not divide the local batch of {n} rows "
                         f"(globalBatchSize / data-parallel size): choose a divisor of {n}")
    count = n // m
    if hasattr(batch, "slice"):  # pyarrow.RecordBatch
        return [batch.slice(i * m, m) for i in range(count)]
    out = []
    for i in range(count):
        part = {k: v[i * m:(i + 1) * m] for k, v in batch.items()}
        part[MICRO], part[MICROS] = i, count
        out.append(part)
    return out


def _as_is(batch: Any) -> Any:
    """The batch as the dataset made it (a module function: workers pickle it)."""
    return batch


class FeedLoader:
    """Iterates a FeedDataset through a torch DataLoader (batch_size=None,
    num_workers workers) and records what the loop received: state_dict()
    is the step after the last batch the loop got, whatever the workers
    prefetched. With micro_batch_size=m, each local batch is cut into
    micro-batches of m rows in the main process, so gradient accumulation
    sees a step's micro-batches together; a step counts once its last
    micro-batch is out.

    Args:
        dataset: the FeedDataset to read, or a dataset of yours that holds
            one as an attribute and yields an item per batch with the
            batch's _shardfeed_step (it is what the DataLoader iterates,
            in the workers when num_workers is given).
        num_workers: DataLoader worker processes (0: read in this process).
            Workers run the dataset's transform (or a worker_init_fn given
            here); without either they would only pass on batches the
            sidecar already made, so the loader reads in this process, the
            fast path, and says so once.
        micro_batch_size: rows per micro-batch, a divisor of the local batch
            (globalBatchSize / data-parallel size); None: whole local batches.
        resume: where a loader with no checkpoint loaded starts. "auto"
            (default): at the job's committed step if it has one (as a
            restarted pod must), else at the beginning; it logs which.
            "must": refuse to start without committed progress. "fresh":
            refuse if the job has committed progress (a new job is a new
            shardfeed.io/job, or shardfeed serve --fresh / --job).
            A FeedDataset made with epoch=e reads epoch e instead: from its
            first step, or from the committed step when the job is in e.
        device: where the loop wants its tensors ("cuda", "cuda:1", …);
            None (default): on the CPU, as the dataset makes them. On CUDA
            each batch is one DMA from its shared-memory slot, page-locked
            once, on a side stream, the next batch copied while the loop
            runs a step (docs/python-client.md, "Batches on the GPU");
            use it instead of pin_memory=True, which copies each batch
            once more. The loader's own columns stay on the CPU.
        **dataloader_kwargs: passed to torch's DataLoader.
    """

    def __init__(self, dataset: Any, *, num_workers: int = 0, micro_batch_size: int | None = None,
                 resume: Resume = "auto", device: Any = None, **dataloader_kwargs: Any):
        # A dataset of the user's over a FeedDataset (to decode or augment
        # in the workers) is what the DataLoader iterates; the FeedDataset
        # inside it is where the loader's positions and commits go.
        self.source = dataset
        inner: FeedDataset = _inner_dataset(dataset)
        if micro_batch_size is not None and micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be at least 1, got {micro_batch_size}")
        if device is not None:
            if torch is None:
                raise ValueError(f"device={device!r} needs torch; install it or leave device=None")
            if inner.output != "torch":
                raise ValueError(f"device={device!r} moves tensors: make the dataset with output='torch' (it has {inner.output!r})")
            if dataloader_kwargs.get("pin_memory"):
                raise ValueError(f"device={device!r} copies each batch straight from its page-locked slot; "
                                 "pin_memory=True would copy it once more first: leave pin_memory out")
            checked(device)  # refuses a malformed device, or CUDA without one, here rather than at the first batch
        self.device = device
        if resume not in RESUMES:
            raise ValueError(f"resume={resume!r}: use one of {', '.join(map(repr, RESUMES))}")
        self.resume: Resume = resume
        if num_workers and torch is None:
            raise ValueError("DataLoader workers need torch; install it or use num_workers=0")
        self.dataset = inner
        self.num_workers = num_workers
        self.micro_batch_size = micro_batch_size
        self.dataloader_kwargs = dataloader_kwargs
        # The epoch the dataset was made to read (FeedDataset(epoch=e)):
        # the loader starts there, not at the committed epoch.
        self._asked_epoch: int | None = inner._epoch
        self._epoch: int | None = None
        self._step: int | None = None
        self._resumed = False
        self._plan: dict[str, Any] | None = None
        # The loop's own counts (batches, rows, data-wait); the workers'
        # pipelines count in a shared table, a row each.
        self._counters = Counters()
        self._table: Any = None
        self._said_in_process = False
        inner.report_waits = False  # the loop's waits are measured here

    @property
    def workers(self) -> int:
        """The DataLoader workers the loader runs: num_workers where they
        have code to run (the dataset's transform, a worker_init_fn, or
        batches to copy from the socket with handoff=False), else 0. A
        worker with none would only pass each batch on (in shared memory,
        but through the DataLoader's queues and pickling, on the cores the
        sidecar and the loop need): half the rate on two cores."""
        ds = self.dataset
        if (self.source is not ds or ds.transform is not None or not ds.handoff
                or self.dataloader_kwargs.get("worker_init_fn") is not None):
            return self.num_workers
        return 0

    def _loader(self) -> Any:
        workers = self.workers
        if workers != self.num_workers and not self._said_in_process:
            self._said_in_process = True
            log.info("FeedLoader(num_workers=%d): nothing to run in DataLoader workers (no transform, no worker_init_fn): "
                     "reading the sidecar's batches in this process, the fast path (they are made already, in parallel, "
                     "by the sidecar); give the dataset a transform to run per-batch code in workers", self.num_workers)
        kwargs = {k: v for k, v in self.dataloader_kwargs.items() if workers or k not in WORKER_ONLY}
        if torch is None or not workers and not kwargs:
            # Nothing a DataLoader would add in this process: its per-batch
            # bookkeeping is tens of microseconds the loop can keep.
            return iter(self.source)
        if workers:
            kwargs.setdefault("persistent_workers", False)
            _convert.warm()
        # The batches are made already; batch_size=None would otherwise walk
        # every value (and turn numpy arrays into tensors).
        kwargs.setdefault("collate_fn", _as_is)
        return torch.utils.data.DataLoader(self.source, batch_size=None, num_workers=workers, **kwargs)

    def _stats_table(self) -> None:
        """With workers, a fresh shared table of their counters."""
        self.dataset.use_stats_table(None)
        self._table = None
        if self.workers and torch is not None:
            self._table = torch.zeros((self.workers, len(FIELDS)), dtype=torch.float64)
            self._table.share_memory_()
            self.dataset.use_stats_table(self._table)

    def stats(self) -> Stats:
        """The input pipeline as the training loop sees it: its batches,
        rows and data-wait counted here; fetch and transform times, rows
        waiting and skipped batches summed over the DataLoader workers."""
        pipeline = self._table.numpy().sum(axis=0) if self._table is not None else self.dataset._counters.row.copy()
        own = self._counters.row
        for name in ("batches", "consumed_rows", "data_wait_seconds"):
            pipeline[FIELDS.index(name)] = own[FIELDS.index(name)]
        return to_stats(pipeline)

    def __len__(self) -> int:
        """The batches left in the epoch (micro-batches with
        micro_batch_size): from the step after the last batch received, or
        where the loader resumes, to the epoch's end."""
        plan = self.plan()
        steps = int(plan["steps"])
        if self._epoch is not None:
            epoch, start = self._epoch, self._step or 0
        else:
            state = self.dataset.client().state()
            epoch, start = self._start_in(resume_position(int(state.get("epoch", 0)), int(state.get("step", 0)), steps))
        left = max(steps - start, 0)
        if not self.micro_batch_size or left == 0:
            return left
        # Micro-batches per step follow the step's batch size, which a
        # schedule changes: count them run by run over the global steps.
        # Where it varies with each epoch's order (bucketed, a batch size per
        # bucket), the sidecar counts the epoch's steps by size.
        if "batchSizes" in plan and plan["batchSizes"] is None:
            counts = self.dataset.client().steps(epoch, start)
            return sum(int(c["steps"]) * max(int(c["globalBatchSize"]) // self.dataset.dp_size // self.micro_batch_size, 1)
                       for c in counts)
        runs = plan.get("batchSizes") or [{"fromStep": 0, "globalBatchSize": plan["globalBatchSize"]}]
        first, end = epoch * steps + start, (epoch + 1) * steps
        total = 0
        for i, run in enumerate(runs):
            lo = max(int(run["fromStep"]), first)
            hi = min(int(runs[i + 1]["fromStep"]), end) if i + 1 < len(runs) else end
            if lo < hi:
                local = int(run["globalBatchSize"]) // self.dataset.dp_size
                total += (hi - lo) * max(local // self.micro_batch_size, 1)
        return total

    def __iter__(self) -> Iterator[Any]:
        client = self.dataset.client()
        client.wait_ready(self.dataset.wait)
        if self._epoch is None:
            self._epoch, self._step = self._committed_position(client)
        # Every worker starts from here: worker w at step + w.
        self.dataset.resume(self._epoch, self._step or 0, self.dataset.fingerprint)
        self._stats_table()
        reporter = WaitReporter(Client(client.socket, timeout=2), self.dataset.rank)
        c = self._counters
        batches = iter(self._loader())
        if self.device is not None:
            # Before the counting: a batch copied ahead has not reached the loop.
            batches = iter(ToDevice(batches, backend_for(self.device)))
        try:
            yield from self._received(batches, reporter, c)
        finally:
            reporter.flush()
        # The epoch is read: the next iteration reads the next one.
        self.set_epoch(self._epoch + 1)

    def _received(self, batches: Iterator[Any], reporter: WaitReporter, c: Counters) -> Iterator[Any]:
        """The batches as the loop gets them, each wait measured."""
        while True:
            start = time.perf_counter()
            batch = next(batches, _END)
            if batch is _END:
                return
            waited = time.perf_counter() - start
            reporter.add(waited)
            k = self._step_of(batch)
            c.batch(_rows(batch), waited)
            # A batch counts as received once handed to the loop (the loop
            # may stop right after it); a step, once its last micro-batch is.
            if self.micro_batch_size:
                parts = _split(batch, self.micro_batch_size)
                for i, part in enumerate(parts):
                    if i == len(parts) - 1:
                        self._step = k + 1
                    yield part
            else:
                self._step = k + 1
                yield batch

    def _step_of(self, item: Any) -> int:
        """The step of what the loop received, which a dataset of the user's
        must carry on from the batch it read."""
        try:
            return batch_step(item)
        except (KeyError, TypeError, IndexError, AttributeError) as err:
            raise ShardfeedError(
                f"the items {type(self.source).__name__} yields carry no {STEP_COLUMN}: yield one item per batch read, and "
                f"keep the batch's {STEP_COLUMN} in it (the column, or its int under that key), so that the loader knows "
                f"the step the loop is at for state_dict() and commit() (docs/python-client.md, \"Epochs, restarts, "
                f"wrappers and commits\")") from err

    def _committed_position(self, client: Client) -> tuple[int, int]:
        """Where the job is: the committed step (the next epoch's start when
        the committed epoch is done), checked against self.resume."""
        state = client.state()
        job = state.get("job") or "the job"
        epoch, step = int(state.get("epoch", 0)), int(state.get("step", 0))
        committed = state.get("committed") is not None
        if self.resume == "must" and not committed:
            raise ShardfeedError(f"{job} has no committed progress to resume (resume='must'): check that the sidecar on "
                                 f"{client.socket} serves the job you meant (job=\"NAME\" in FeedDataset.from_manifest; shardfeed serve --job NAME)")
        if self.resume == "fresh" and committed:
            raise ShardfeedError(f"{job} has committed progress (epoch {epoch}, step {step}) and resume='fresh': start a new job "
                                 f"(fresh=True or job=\"NAME\" in FeedDataset.from_manifest; shardfeed serve --fresh or --job NAME; in a cluster, "
                                 f"a new shardfeed.io/job), or resume with resume='auto'")
        if committed:
            log.info('job "%s" resumes at its committed epoch %d, step %d', job, epoch, step)
        else:
            log.info('job "%s" starts from the beginning', job)
        return self._start_in(resume_position(epoch, step, int(self.plan()["steps"])))

    def _start_in(self, committed: tuple[int, int]) -> tuple[int, int]:
        """Where the loader starts, given where the job resumes: there, or
        the first step of the epoch the dataset was made to read (its
        committed step if the job is in that epoch)."""
        asked = self._asked_epoch
        if asked is None or asked == committed[0]:
            return committed
        log.info("reading epoch %d from its first step, as FeedDataset(epoch=%d) asks (the job resumes at epoch %d, step %d)",
                 asked, asked, committed[0], committed[1])
        return asked, 0

    def set_epoch(self, epoch: int) -> None:
        """Read epoch next, from its first step.

        Args:
            epoch: the epoch to read.
        """
        self.dataset.set_epoch(epoch)
        self._epoch, self._step = int(epoch), 0
        self._asked_epoch = None

    def _position(self) -> tuple[int, int]:
        """The step after the last batch the loop received, or, before any,
        the job's committed step."""
        if self._epoch is None:
            state = self.dataset.client().state()
            epoch, step = int(state.get("epoch", 0)), int(state.get("step", 0))
            if self._asked_epoch is not None and self._asked_epoch != epoch:
                return self._asked_epoch, 0
            return epoch, step
        return self._epoch, self._step or 0

    def plan(self) -> dict[str, Any]:
        """The sidecar's plan: fingerprint, numSplits, globalBatchSize, steps."""
        if self._plan is None:
            st = self.dataset.client().status()
            self._plan = {k: st[k] for k in ("fingerprint", "planVersion", "numSplits", "globalBatchSize", "steps")}
            self._plan["batchSizes"] = st.get("batchSizes")
        return self._plan

    def state_dict(self) -> dict[str, Any]:
        """Where the loop is: the epoch and the step after the last batch it
        received, with the plan's identity."""
        plan = self.plan()
        epoch, step = self._position()
        return {"epoch": epoch, "step": step, "fingerprint": plan["fingerprint"],
                "planVersion": plan["planVersion"], "numSplits": plan["numSplits"], "globalBatchSize": plan["globalBatchSize"]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at state's step (with any number of workers and any world
        size that divides numSplits: the global batches are the same).

        Args:
            state: what state_dict() returned, from a checkpoint.

        Raises:
            ShardfeedError: the checkpoint is of another plan.
        """
        plan = self.plan()
        for key in ("fingerprint", "numSplits", "globalBatchSize"):
            if key in state and state[key] != plan[key]:
                raise ShardfeedError(f"the checkpoint was taken with {key}={state[key]!r}, the sidecar serves {plan[key]!r}: "
                                     f"a different plan is a new TrainingDataset; resume with the dataset the checkpoint used")
        epoch, step = int(state["epoch"]), int(state["step"])
        self.dataset.resume(epoch, step, state.get("fingerprint"))
        self._epoch, self._step = epoch, step
        committed = self.dataset.client().state()
        self._resumed = (epoch, step) < (int(committed.get("epoch", 0)), int(committed.get("step", 0)))

    def commit(self, step: int | None = None, epoch: int | None = None) -> dict[str, Any]:
        """Record that every rank finished the steps before step and that
        the checkpoint is saved. Call it on rank 0, after saving, behind a
        barrier.

        Args:
            step: the step every rank finished the steps before; default the
                step after the last batch received.
            epoch: its epoch; default the epoch being read.

        Returns:
            The job's committed state, as the sidecar recorded it.
        """
        if epoch is None or step is None:
            # The same position state_dict() gives: before the first batch,
            # the job's committed one (a fresh loader used to send (0, 0)).
            here_epoch, here_step = self._position()
            epoch = here_epoch if epoch is None else epoch
            step = here_step if step is None else step
        state = self.dataset.client().commit(epoch, step, resumed=self._resumed)
        self._resumed = False
        return state
