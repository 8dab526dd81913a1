"""A `shardfeed serve` owned by the Python process: the local path, without
Kubernetes (as mosaicml-streaming and LitData users read local data).

The first process of a machine to ask for a manifest and job starts the
server and holds a lock on it; the others (torchrun's other ranks) find its
socket. The server stops with the process that started it: at exit, and by
the kernel's parent-death signal should that process be killed.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import hashlib
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from ._binary import BINARY_ENV, bundled_binary, find_binary
from ._client import Client
from .errors import ShardfeedError, SidecarNotReady

__all__ = ["BINARY_ENV", "bundled_binary", "find_binary"]  # re-exported: callers know them here
STATE_DIR = ".shardfeed"
START_WAIT_S = 120.0

_PR_SET_PDEATHSIG = 1


# The serve flags a Python caller sets as from_manifest's arguments, and
# the words for them in what serve says.
_PYTHON_WORDS = [
    (re.compile(r"shardfeed serve (--job NAME|--job [^\s,;)]+) or --fresh on one machine"), 'job="NAME" or fresh=True in FeedDataset.from_manifest'),
    (re.compile(r"--job ([^\s,;)]+)"), r'job="\1"'),
    (re.compile(r"--fresh\b"), "fresh=True"),
    (re.compile(r"--job\b"), "job="),
]


def python_words(text: str) -> str:
    """What serve says, in the words of a Python caller: the arguments of
    FeedDataset.from_manifest (fresh=True, job=...) where serve names its
    flags (--fresh, --job), since Python users set those, not flags."""
    for pattern, words in _PYTHON_WORDS:
        text = pattern.sub(words, text)
    return text


def _run_dir() -> tuple[Path, int]:
    """A private directory for sockets and locks: short paths (a Unix
    socket's path is at most 107 bytes), this user's only. In a shared /tmp
    another user may have made the name first, as a link to a directory of
    ours they want files in: the name itself must be our directory, not a
    link, and it is opened without following one. Returns the path and a
    descriptor of it (the caller closes it) to create files under."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"shardfeed-{os.getuid()}"
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(base)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ShardfeedError(f"{base} is a symbolic link or not a directory (another user may have made it): remove it, or set XDG_RUNTIME_DIR")
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ShardfeedError(f"{base} belongs to another user or others may write it: remove it, or set XDG_RUNTIME_DIR")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise ShardfeedError(f"{base} changed while it was checked: remove it, or set XDG_RUNTIME_DIR")
    return base, fd


def _open_new(name: str, dir_fd: int, mode: str) -> IO[Any]:
    """Open name for writing under a directory's descriptor, refusing a
    link in its place."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ShardfeedError(f"{name} is a symbolic link where shardfeed keeps its own file: remove it") from None
        raise
    return os.fdopen(fd, mode)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """In the server's process: SIGTERM when the Python process dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class LocalServe:
    """One `shardfeed serve` for a manifest and a job, in a directory.

    Args:
        manifest: the TrainingDataset manifest.
        job: the job (its commits are its own state).
        fresh: start a new job from the beginning (serve --fresh).
        directory: where .shardfeed/ (state, cache, socket) lives; default
            the working directory, as for `shardfeed serve`.
        binary: the shardfeed command; default find_binary().
        args: more flags for serve (e.g. ["--cache-limit", "20Gi"]).
    """

    def __init__(self, manifest: str | os.PathLike[str], *, job: str = "local", fresh: bool = False,
                 directory: str | os.PathLike[str] | None = None, binary: str | None = None, args: list[str] | None = None):
        self.manifest = Path(manifest).resolve()
        if not self.manifest.is_file():
            raise ShardfeedError(f"no manifest at {self.manifest}: write a TrainingDataset (see examples/dataset.yaml)")
        self.directory = Path(directory or os.getcwd()).resolve()
        self.job = job
        key = hashlib.sha256(f"{self.directory}\0{self.manifest}\0{job}".encode()).hexdigest()[:16]
        run, run_fd = _run_dir()
        self.socket = str(run / f"{key}.sock")
        (self.directory / STATE_DIR).mkdir(exist_ok=True)
        self.log_path = self.directory / STATE_DIR / f"serve-{job}.log"
        try:
            self._lock: IO[Any] | None = _open_new(f"{key}.lock", run_fd, "w")
        finally:
            os.close(run_fd)
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # Another process of this machine serves it: use its socket.
            self._lock.close()
            self._lock = None
            return
        try:
            command = find_binary(binary)
        except ShardfeedError:
            self._lock.close()
            self._lock = None
            raise
        cmd = [command, "serve", "-f", str(self.manifest), "--job", job, "--socket", self.socket,
               "--metrics-addr", "", *(["--fresh"] if fresh else []), *(args or [])]
        state_fd = os.open(self.directory / STATE_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            log = _open_new(self.log_path.name, state_fd, "wb")
        finally:
            os.close(state_fd)
        log.truncate(0)
        try:
            self.proc = subprocess.Popen(cmd, cwd=self.directory, stdout=log, stderr=subprocess.STDOUT,
                                         preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        finally:
            log.close()
        atexit.register(self.stop)

    @property
    def owner(self) -> bool:
        """Whether this process started the server (and stops it)."""
        return self.proc is not None

    def wait_ready(self, timeout: float = START_WAIT_S) -> None:
        """Wait for the server to answer; raise with its log if it exits or
        does not get ready."""
        deadline = time.monotonic() + timeout
        client = Client(self.socket, timeout=5)
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ShardfeedError(f"shardfeed serve -f {self.manifest} exited with {self.proc.returncode}:\n"
                                     f"{python_words(self.log())}")
            try:
                client.wait_ready(min(1.0, max(deadline - time.monotonic(), 0.01)))
                return
            except SidecarNotReady:
                if time.monotonic() >= deadline:
                    raise SidecarNotReady(f"shardfeed serve -f {self.manifest} is not ready after {timeout:.0f} s:\n{self.log()}") from None

    def first_line(self) -> str:
        """What serve said first: which job, resumed where."""
        lines = self.log().splitlines()
        return lines[0] if lines else ""

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server if this process started it (SIGTERM: it finishes
        what it writes), and release the lock."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


_SERVERS: dict[tuple[str, str, str], LocalServe] = {}


def serve_manifest(manifest: str | os.PathLike[str], *, job: str = "local", fresh: bool = False,
                   directory: str | os.PathLike[str] | None = None, binary: str | None = None,
                   args: list[str] | None = None) -> LocalServe:
    """The process's server of manifest and job, started on first use.

    Args:
        manifest: the TrainingDataset manifest.
        job: the job.
        fresh: start a new job from the beginning.
        directory: where .shardfeed/ lives; default the working directory.
        binary: the shardfeed command.
        args: more flags for serve.
    """
    key = (str(Path(directory or os.getcwd()).resolve()), str(Path(manifest).resolve()), job)
    server = _SERVERS.get(key)
    if server is None or (server.proc is not None and server.proc.poll() is not None):
        server = LocalServe(manifest, job=job, fresh=fresh, directory=directory, binary=binary, args=args)
        _SERVERS[key] = server
    return server
