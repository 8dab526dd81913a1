"""The epochs of a dataset's passes, agreed by every process that reads it.

A training loop written the ordinary way, `for epoch in range(n): for batch
in DataLoader(ds, ...)`, starts a new pass over the dataset each epoch and
expects the next epoch, as mosaic's and LitData's datasets give it. The
pass is started where the dataset is iterated: in the training process
without DataLoader workers, else in each worker, which torch makes anew
from the training process's dataset at every pass (persistent workers keep
theirs). So the record of passes cannot live in the dataset object: it is
a small file, unlinked, that the training process and its workers share
(inherited through fork, handed over as a file descriptor under spawn),
read and written under a POSIX lock.

The rule, per pass, where each of a pass's workers finds the same answer:

- a position set explicitly (set_epoch, FeedLoader's resume) for the next
  pass wins;
- else the pass after pass n reads the epoch after pass n's, from step 0;
- else (the first pass of this process) the job's committed position,
  which the sidecar knows and every rank reads alike.

Every worker of a pass counts its passes (worker w's n-th pass is the
pass's n-th): the first worker to start pass n records its position, the
others read it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from array import array
from dataclasses import dataclass
from typing import Any, Callable

# The file's layout, in int64 words.
_MAGIC = 0x5346504153534553  # "SFPASSES"
_HEADER = 8  # magic, workers of the latest pass, latest pass, request: set, epoch, start, sequence; spare
_RING = 64  # the positions of the latest passes: (pass, epoch, start)
MAX_WORKERS = 1024  # a pass counter per DataLoader worker
_WORDS = _HEADER + 3 * _RING + MAX_WORKERS
_SIZE = 8 * _WORDS
_NONE = -1  # a start not given: the job's committed step (in the committed epoch), else 0

_W_MAGIC, _W_WORKERS, _W_LATEST, _W_REQ_SET, _W_REQ_EPOCH, _W_REQ_START, _W_REQ_SEQ = range(7)


@dataclass(frozen=True)
class Position:
    """Where a pass starts.

    Attributes:
        epoch: the epoch the pass reads.
        start: the first step of worker 0 (worker w starts w steps later);
            None: the job's committed step in its committed epoch, else 0.
        source: why: "set" (set_epoch or resume), "next" (the pass after
            another), "committed" (the job's committed position), "state"
            (a worker's restored state_dict), "joined" (another worker of
            the pass started it).
        number: the pass's number in this process (0 is the first).
    """

    epoch: int
    start: int | None
    source: str
    number: int


class Passes:
    """The record of a dataset's passes, shared by the processes that read
    it (see the module's doc)."""

    def __init__(self) -> None:
        handle = tempfile.TemporaryFile(prefix="shardfeed-passes-")
        self._fd = os.dup(handle.fileno())
        handle.close()
        os.pwrite(self._fd, self._empty().tobytes(), 0)
        self._pid = os.getpid()
        self._lock = threading.Lock()

    @staticmethod
    def _empty() -> array[int]:
        words = array("q", [0] * _WORDS)
        words[_W_MAGIC] = _MAGIC
        words[_W_LATEST] = _NONE
        return words

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    # Pickled for a spawned worker (torch's DataLoader hands the dataset to
    # its workers so): the descriptor goes with it, as multiprocessing's own
    # locks and torch's shared tensors go.
    def __reduce__(self) -> tuple[Any, ...]:
        from multiprocessing.reduction import DupFd

        return (_attach, (DupFd(self._fd),))

    def _locked(self) -> Any:
        if self._pid != os.getpid():  # forked: a lock of this process's own
            self._pid, self._lock = os.getpid(), threading.Lock()
        return _FileLock(self._fd, self._lock)

    def _read(self) -> array[int]:
        words = array("q")
        words.frombytes(os.pread(self._fd, _SIZE, 0))
        if len(words) != _WORDS or words[_W_MAGIC] != _MAGIC:
            raise RuntimeError("the dataset's record of passes is not one this client wrote")
        return words

    def request(self, epoch: int, start: int | None) -> None:
        """The next pass starts at (epoch, start), whatever the passes before."""
        with self._locked():
            words = self._read()
            words[_W_REQ_SET], words[_W_REQ_EPOCH] = 1, int(epoch)
            words[_W_REQ_START] = _NONE if start is None else int(start)
            words[_W_REQ_SEQ] += 1
            os.pwrite(self._fd, words.tobytes(), 0)

    def latest(self) -> Position | None:
        """The latest pass started, if any."""
        words = self._read()
        n = words[_W_LATEST]
        return None if n == _NONE else _ring(words, n)

    def peek(self) -> tuple[int, int | None] | None:
        """Where a new pass would start, without starting it: (epoch, start),
        or None where it would be the job's committed position."""
        words = self._read()
        if words[_W_REQ_SET]:
            return words[_W_REQ_EPOCH], _start(words[_W_REQ_START])
        n = words[_W_LATEST]
        if n != _NONE:
            return _ring(words, n).epoch + 1, 0
        return None

    def begin(self, worker: int, workers: int, committed: Callable[[], int],
              restored: tuple[int, int | None] | None = None) -> Position:
        """Start worker's next pass and say where it starts.

        Args:
            worker: the DataLoader worker (0 without workers).
            workers: the DataLoader's workers (1 without).
            committed: the epoch the job resumes in, asked of the sidecar
                for a first pass.
            restored: this worker's own restored position (a
                StatefulDataLoader's state): it wins, and the pass is
                recorded at its epoch.
        """
        if not 0 <= worker < workers <= MAX_WORKERS:
            raise ValueError(f"worker {worker} of {workers}: a dataset's passes are counted for up to {MAX_WORKERS} DataLoader workers")
        with self._locked():
            words = self._read()
            latest = words[_W_LATEST]
            if words[_W_WORKERS] != workers:
                # Another number of workers than the last pass had: every
                # worker's next pass is the one after the latest.
                words[_W_WORKERS] = workers
                for w in range(MAX_WORKERS):
                    words[_HEADER + 3 * _RING + w] = latest + 1
            counter = _HEADER + 3 * _RING + worker
            n = words[counter]
            words[counter] = n + 1
            if n <= latest and restored is None:
                pos = _ring(words, n)  # another worker of this pass started it
                if pos.number != n:
                    raise RuntimeError(f"worker {worker} starts pass {n}, {latest - n} passes behind the dataset's other workers")
            else:
                if restored is not None:
                    epoch, start, source = restored[0], restored[1], "state"
                elif words[_W_REQ_SET]:
                    epoch, start, source = words[_W_REQ_EPOCH], _start(words[_W_REQ_START]), "set"
                elif latest != _NONE:
                    epoch, start, source = _ring(words, latest).epoch + 1, 0, "next"
                else:
                    epoch, start, source = committed(), None, "committed"
                words[_W_REQ_SET] = 0  # the request is this pass's (a restored state overrides it)
                pos = Position(epoch, start, source, n)
                slot = _HEADER + 3 * (n % _RING)
                words[slot], words[slot + 1], words[slot + 2] = n, epoch, _NONE if start is None else start
                words[_W_LATEST] = max(latest, n)
            os.pwrite(self._fd, words.tobytes(), 0)
            return pos


def _start(word: int) -> int | None:
    return None if word == _NONE else word


def _ring(words: array[int], n: int) -> Position:
    slot = _HEADER + 3 * (n % _RING)
    return Position(words[slot + 1], _start(words[slot + 2]), "joined", words[slot])


def _attach(dup: Any) -> Passes:
    """A Passes over the descriptor a DupFd brought."""
    passes = Passes.__new__(Passes)
    passes._fd = dup.detach()
    passes._pid = os.getpid()
    passes._lock = threading.Lock()
    return passes


class _FileLock:
    """This process's threads, then the other processes, excluded."""

    def __init__(self, fd: int, lock: threading.Lock):
        self._fd, self._lock = fd, lock

    def __enter__(self) -> None:
        self._lock.acquire()
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        finally:
            self._lock.release()
