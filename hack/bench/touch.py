"""The training loop every loader of the benchmark feeds (loaders.py and
peers.py run it in their own venvs): it reads every value of each batch,
and times the first batch apart from the rest, so start-up (worker
processes, connections, a first shard) does not blur the steady rate.

The loop runs torch on one thread, as a GPU training loop leaves the CPU to
the loaders: on two cores, torch's spinning intra-op threads would take
the cores the loaders' processes need (every loader alike)."""

import time

import torch


def touch_loop(make):
    """Build a loader with make() and read one epoch of it: {"first":
    seconds from building it to the first batch, "rest": seconds after it,
    "samples": all samples, "rest_samples": samples after the first batch,
    "checksum"}."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    first_at = None
    samples = first_samples = checksum = 0
    for batch in make():
        tokens = batch["tokens"] if isinstance(batch, dict) else batch
        checksum += int(tokens.max())  # read every value
        samples += len(tokens)
        if first_at is None:
            first_at, first_samples = time.perf_counter(), samples
    end = time.perf_counter()
    first_at = first_at or end
    return {"first": first_at - start, "rest": end - first_at, "samples": samples,
            "rest_samples": samples - first_samples, "checksum": checksum, "rss_mib": peak_rss_mib()}


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike getrusage's
    ru_maxrss, it does not carry over the parent's across fork and exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0
