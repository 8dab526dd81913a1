"""The training loop every loader of the benchmark feeds (loaders.py and
peers.py run it in their own venvs): it reads every value of each batch,
and times the first batch apart from the rest, so start-up (worker
processes, connections, a first shard) does not blur the steady rate.

The loop runs torch on one thread, as a GPU training loop leaves the CPU to
the loaders: on two cores, torch's spinning intra-op threads would take
the cores the loaders' processes need (every loader alike).

A measurement is time-boxed: the loop stops reading once `time_box`
seconds have passed after the first batch (the rate is over what it read),
so a slow loader costs the benchmark a bounded time. The rate over the
window's second half is reported too ("steady"): a loader still ramping
up (workers filling their queues, a first shard's download) reaches it
there."""

import os
import threading
import time

import torch


def touch(batch):
    """(rows, checksum): every tensor's max (which reads every value), and
    the length and last byte of every bytes or str value, and of every
    uint8 vector in a list (a binary value handed over as an array)."""
    values = batch.values() if isinstance(batch, dict) else [batch]
    rows, acc = 0, 0.0
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.numel():
                acc += float(v.max())
            rows = max(rows, len(v) if v.dim() else 1)
        elif isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and x.dim() == 1:
                    # numel and numpy: len() and indexing a tensor are
                    # Python-level in torch, ten times a bytes object's.
                    n = x.numel()
                    acc += n + (int(x.numpy()[n - 1]) if n else 0)
                elif isinstance(x, torch.Tensor):
                    acc += float(x.max()) if x.numel() else 0.0
                elif isinstance(x, (bytes, str)) and x:
                    acc += len(x) + (x[-1] if isinstance(x, bytes) else 0)
            rows = max(rows, len(v))
    return rows, acc


def touch_loop(make, time_box=None, passes=None):
    """Build a loader with make() and read one epoch of it, or until
    time_box seconds after the first batch: {"first": seconds from building
    it to the first batch, "rest": seconds after it, "samples": all
    samples, "rest_samples": samples after the first batch, "steady": the
    rate over the second half of the time after the first batch (samples/s),
    "part_rates": the rates over each third of that time (the range of a
    measurement made once: loaders.py, measure_all), "checksum", "complete": whether the epoch was read to its end, "rss_mib": this
    process's peak, "worker_rss_mib": the largest peak of its child
    processes (DataLoader workers), "passes": the passes read}.

    passes (default BENCH_PASSES, else 1) makes the epoch that many passes
    over the loader, built once: the longer epoch of a loader whose start
    is more than a tenth of its one pass (loaders.py, LONG_START), so that
    its epoch's rate from the constructor is not its start's alone."""
    passes = passes or int(os.environ.get("BENCH_PASSES", "1"))
    torch.set_num_threads(1)
    watch = _ChildPeaks()
    start = time.perf_counter()
    first_at = None
    samples = first_samples = 0
    checksum = 0.0
    complete = True
    marks: list[tuple[float, int]] = []
    loader = make()
    done = 0
    while done < passes and complete:
        before = samples
        for batch in loader:
            rows, acc = touch(batch)
            checksum += acc
            samples += rows
            now = time.perf_counter()
            if first_at is None:
                first_at, first_samples = now, samples
            else:
                marks.append((now - first_at, samples - first_samples))
                if time_box and now - first_at > time_box:
                    complete = False
                    break
        if samples == before:
            break  # a loader that is not iterated again (a generator): one pass is its epoch
        done += 1
    end = time.perf_counter()
    del loader
    watch.stop()
    first_at = first_at or end
    return {"first": first_at - start, "rest": end - first_at, "samples": samples,
            "rest_samples": samples - first_samples, "steady": steady_rate(marks), "part_rates": part_rates(marks), "checksum": checksum, "complete": complete,
            "rss_mib": peak_rss_mib(), "worker_rss_mib": watch.peak, "passes": done}


def part_rates(marks: list[tuple[float, int]], parts: int = 3) -> list[float]:
    """Samples/s over each of parts equal spans of the time the marks
    (seconds and samples after the first batch, one per batch) cover, each
    span cut at the first batch past its end; [] with too few batches."""
    if len(marks) < 2 * parts:
        return []
    end = marks[-1][0]
    cuts = [(0.0, 0)] + [next(m for m in marks if m[0] >= end * k / parts) for k in range(1, parts)] + [marks[-1]]
    return [(n1 - n0) / (t1 - t0) for (t0, n0), (t1, n1) in zip(cuts, cuts[1:]) if t1 > t0]


def steady_rate(marks: list[tuple[float, int]]) -> float:
    """Samples/s over the second half of the time the marks (seconds and
    samples after the first batch, one per batch) span; over all of it
    when fewer than two batches fall in that half."""
    if not marks:
        return 0.0
    end, total = marks[-1]
    half = [(t, n) for t, n in marks if t >= end / 2]
    if len(half) < 3 or end == half[0][0]:
        return total / end if end else 0.0
    t0, n0 = half[0]
    return (total - n0) / (end - t0)


def peak_rss_mib(pid="self") -> float:
    """A process's peak resident memory (VmHWM: unlike getrusage's
    ru_maxrss, it does not carry over the parent's across fork and exec)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class AnonPeak:
    """Samples a process's anonymous resident memory (RssAnon: its heap;
    VmHWM also counts mapped files and shared memory) every 20 ms until
    stopped: the largest seen, in MiB."""

    def __init__(self, pid: int):
        self.pid, self.peak = pid, 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.02):
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            self.peak = max(self.peak, int(line.split()[1]) / 1024)
            except OSError:
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


class _ChildPeaks:
    """Samples the peak memory of this process's children (its DataLoader
    workers) every 0.2 s, until stopped: the largest one seen."""

    def __init__(self):
        self.peak = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._done.wait(0.2):
            for pid in _children():
                self.peak = max(self.peak, peak_rss_mib(pid))

    def stop(self):
        self._done.set()
        self._thread.join()


def _children():
    out = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                out += f.read().split()
    except OSError:
        pass
    return out
