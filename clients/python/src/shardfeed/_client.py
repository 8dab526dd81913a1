"""HTTP/1.1 over the sidecar's Unix socket: commits, state, status; batches in _stream."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.parse
from typing import Any

from ._stream import HANDOFF, BatchStream, request
from .errors import SidecarError, SidecarNotReady

SOCKET_ENV = "SHARDFEED_SOCKET"
# Where the sidecar listens in a pod, and where `shardfeed serve` listens
# outside one (relative to its working directory) unless told otherwise.
DEFAULT_SOCKET = "/var/run/shardfeed/feed.sock"
LOCAL_SOCKET = ".shardfeed/feed.sock"
DEFAULT_WAIT_S = 300.0
# Outside a pod, how long to wait for a socket that does not exist at all
# before saying how to start one: nothing will create it by itself.
MISSING_WAIT_S = 3.0
# How long a commit waits for a sidecar that restarts (its container was
# killed, the kubelet starts it again): a commit is safe to repeat.
COMMIT_WAIT_S = 120.0


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None):
        super().__init__("shardfeed", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if self.timeout is not None:
                sock.settimeout(self.timeout)
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def in_pod() -> bool:
    """Whether this process runs in a Kubernetes pod (the kubelet sets this)."""
    return "KUBERNETES_SERVICE_HOST" in os.environ


def socket_candidates(socket_arg: str | None = None) -> list[str]:
    """The sockets to look for, in order: the argument or $SHARDFEED_SOCKET
    alone if given, else the pod's and then `shardfeed serve`'s default."""
    given = socket_arg or os.environ.get(SOCKET_ENV)
    return [given] if given else [DEFAULT_SOCKET, LOCAL_SOCKET]


def socket_path(socket_arg: str | None = None) -> str:
    """The socket to use: the argument, else $SHARDFEED_SOCKET, else the
    first default that exists (the pod's, then `shardfeed serve`'s in the
    working directory), else the pod's in a pod and serve's outside one."""
    candidates = socket_candidates(socket_arg)
    for path in candidates:
        if os.path.exists(path):
            return path
    if len(candidates) == 1 or in_pod():
        return candidates[0]
    return LOCAL_SOCKET


class Client:
    """A client of one sidecar's HTTP API on its Unix socket.

    Args:
        socket: the socket; default $SHARDFEED_SOCKET, else the first that
            exists of /var/run/shardfeed/feed.sock (in a pod) and
            .shardfeed/feed.sock (where `shardfeed serve` listens).
        timeout: seconds a request may wait for the sidecar's answer
            (None: no limit).
    """

    def __init__(self, socket: str | None = None, *, timeout: float | None = 600.0):
        self._given = socket
        self.timeout = timeout

    @property
    def socket(self) -> str:
        """The socket in use: resolved again until one exists, so a
        `shardfeed serve` started after this client is found."""
        return socket_path(self._given)

    def _request(self, method: str, path: str, query: dict[str, Any] | None = None, body: Any = None) -> tuple[Any, Any]:
        if query:
            path += "?" + urllib.parse.urlencode(query)
        conn = _UnixConnection(self.socket, self.timeout)
        try:
            data = None
            headers = {}
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
        except (FileNotFoundError, ConnectionRefusedError) as err:
            conn.close()
            raise SidecarNotReady(self._not_there(err)) from err
        except OSError:
            conn.close()
            raise
        if resp.status >= 300:
            raw = resp.read()
            conn.close()
            try:
                doc = json.loads(raw)
                raise SidecarError(resp.status, doc.get("error", ""), doc.get("field", ""))
            except ValueError:
                raise SidecarError(resp.status, raw.decode(errors="replace").strip()) from None
        return conn, resp

    def _not_there(self, err: Exception) -> str:
        tried = " nor ".join(os.path.abspath(p) for p in socket_candidates(self._given))
        return (f"no shardfeed sidecar answers on {tried} ({err}). In a pod, label it "
                f"'shardfeed.io/dataset: <TrainingDataset name>' so the operator injects the sidecar; "
                f"outside one, run 'shardfeed serve -f dataset.yaml' in this directory "
                f"(it listens on {LOCAL_SOCKET}), or point {SOCKET_ENV} at the socket of one")

    def _json(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        conn, resp = self._request(method, path, body=body)
        try:
            out: dict[str, Any] = json.loads(resp.read())
            return out
        finally:
            conn.close()

    def post(self, path: str, body: Any) -> None:
        """POST body as JSON to path; an answer without content is fine.

        Args:
            path: the endpoint, e.g. /v1/waits.
            body: what to send, as JSON.
        """
        conn, resp = self._request("POST", path, body=body)
        try:
            resp.read()
        finally:
            conn.close()

    def wait_ready(self, timeout: float = DEFAULT_WAIT_S) -> None:
        """Wait until the sidecar's /readyz answers 200.

        Args:
            timeout: seconds to wait at most.

        Raises:
            SidecarNotReady: it did not get ready in time (the message says
                what it answered last).
        """
        start = time.monotonic()
        deadline = start + timeout
        last: Exception | None = None
        while True:
            try:
                conn, resp = self._request("GET", "/readyz")
                conn.close()
                return
            except (SidecarNotReady, SidecarError, OSError) as err:
                last = err
            # Outside a pod, nothing creates a missing socket by itself:
            # say how to start one rather than wait minutes in silence.
            missing = not any(os.path.exists(p) for p in socket_candidates(self._given))
            if missing and not in_pod() and time.monotonic() - start >= min(MISSING_WAIT_S, timeout):
                raise SidecarNotReady(self._not_there(FileNotFoundError("no such socket"))) from None
            if time.monotonic() >= deadline:
                if isinstance(last, SidecarNotReady):
                    raise SidecarNotReady(f"{last} (waited {timeout:.0f} s)") from None
                raise SidecarNotReady(f"the sidecar on {self.socket} is not ready after {timeout:.0f} s: {last}") from None
            time.sleep(0.05)

    def state(self) -> dict[str, Any]:
        """The job's committed state (epoch, step, attempt, …)."""
        return self._json("GET", "/v1/state")

    def status(self) -> dict[str, Any]:
        """The sidecar's status: the plan, readiness, counters, streams, last errors."""
        return self._json("GET", "/v1/status")

    def steps(self, epoch: int, start: int) -> list[dict[str, int]]:
        """The steps of epoch from step start to its end, counted by their
        global batch size: [{"globalBatchSize", "steps"}]."""
        got = self._json("GET", f"/v1/steps?epoch={int(epoch)}&from={int(start)}")
        return list(got.get("batchSizes") or [])

    def commit(self, epoch: int, step: int, resumed: bool = False, wait: float = COMMIT_WAIT_S) -> dict[str, Any]:
        """Record that every rank finished the steps of epoch before step.

        A sidecar that is away (restarting) or answers 503 is asked again
        for up to wait seconds: the same commit twice records it once.

        Args:
            epoch: the epoch of the steps.
            step: every rank finished the steps before it.
            resumed: the job restarted from a checkpoint older than the
                committed state (the sidecar allows the step to go back).
            wait: seconds to keep asking an absent sidecar.

        Returns:
            The job's committed state.
        """
        body = {"epoch": int(epoch), "step": int(step)}
        if resumed:
            body["resumed"] = True
        deadline = time.monotonic() + wait
        pause = 0.1
        while True:
            try:
                return self._json("POST", "/v1/commit", body)
            except (SidecarNotReady, SidecarError, ConnectionError, http.client.HTTPException) as err:
                if isinstance(err, SidecarError) and err.status != 503:
                    raise
                if time.monotonic() + pause >= deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 2.0)

    def batches(self, *, rank: int, world: int, worker: int = 0, workers: int = 1,
                data_parallel: tuple[int, int] | None = None, epoch: int | None = None, step: int | None = None, fingerprint: str | None = None,
                handoff: bool = True, release_here: bool = True) -> BatchStream:
        """Open the stream of one DataLoader worker's batches.

        Args:
            rank: the rank whose batches to read.
            world: the number of ranks; without data_parallel, it must
                divide numSplits.
            data_parallel: (dp_rank, dp_size), the rank's data-parallel
                coordinates when ranks form replication groups: the
                batches are dp_rank's, and dp_size must divide numSplits.
            worker: this DataLoader worker (of workers): it reads every
                workers-th step from its first.
            workers: the DataLoader's workers (1 without).
            epoch: the epoch; default the committed one.
            step: the first step; default the committed step plus worker.
            fingerprint: the plan the caller expects; another is refused.
            handoff: ask for the batches in shared memory (the sidecar
                sends them in the stream when it cannot).
            release_here: release each batch's shared memory when this
                process drops it (False: a SharedBatch handed to another
                process releases it there).
        """
        query: dict[str, Any] = {"rank": rank, "world": world, "worker": worker, "workers": workers}
        if data_parallel is not None:
            query["dp_rank"], query["dp_size"] = data_parallel
        if epoch is not None:
            query["epoch"] = epoch
        if step is not None:
            query["step"] = step
        if fingerprint:
            query["fingerprint"] = fingerprint
        if handoff:
            query["handoff"] = HANDOFF
        target = "/v1/batches?" + urllib.parse.urlencode(query)
        try:
            sock, reader, headers = request(self.socket, target, self.timeout)
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise SidecarNotReady(self._not_there(err)) from err
        return BatchStream(sock, reader, headers, release_here)
