"""Forks the benchmark's measurements from one process that has imported
torch: each measurement runs in a process of its own (its peak memory its
own, its DataLoader workers its own), but `import torch` takes about 3 s
on the benchmark's machine, and `make bench` runs about 240 measurements:
started as fresh interpreters, a quarter of the run was torch's import.
A fork starts with torch imported, as a fresh process would have it after
its imports (its peak RSS counts the same pages); nothing that runs in the
zygote starts a thread or opens a loader, so a fork inherits no state but
the imported modules.

  python zygote.py SCRIPT      answers requests on stdin, one JSON line each:
  {"argv": [...], "timeout": s, "env": {...}} → {"code": exit code, "stdout": ..., "stderr": ...}

Each request runs SCRIPT as __main__ with sys.argv = [SCRIPT, *argv], in
a fork that leads its own process group (a timeout kills the group: its
workers too). Zygote (below) is the other side: a zygote as a subprocess.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path


def serve(script: str) -> None:
    import torch  # noqa: F401 - the import every fork is spared

    for line in sys.stdin:
        req = json.loads(line)
        # Plain files, not a TemporaryDirectory: its finalizer is an atexit
        # handler, which the fork runs (the script's own are among them).
        out, err = (_scratch(name) for name in ("out", "err"))
        # The fork's temporary directory, removed after it: what a peer
        # leaves in it (mosaicml-streaming's lock files, multiprocessing's
        # listener directories) goes with the measurement.
        tmp = tempfile.mkdtemp(prefix="zygote-tmp-")
        try:
            pid = os.fork()
            if pid == 0:
                os.environ.update(req.get("env") or {})
                _child(script, req["argv"], out, err, tmp)
            code = _wait(pid, float(req.get("timeout") or 0))
            answer = {"code": code, "stdout": out.read_text(errors="replace"), "stderr": err.read_text(errors="replace")}
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _scratch(name: str) -> Path:
    fd, path = tempfile.mkstemp(prefix=f"zygote-{name}-")
    os.close(fd)
    return Path(path)


def _child(script: str, argv: list[str], out: Path, err: Path, tmp: str) -> None:
    """In the fork: SCRIPT as __main__, its output in out and err, its
    temporary files (and its children's) in tmp; never returns."""
    code = 1
    try:
        os.setsid()
        os.environ["TMPDIR"] = tmp
        tempfile.tempdir = tmp
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        sys.argv = [script, *argv]
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exit_:
            if exit_.code is None or isinstance(exit_.code, int):
                code = exit_.code or 0
            else:  # a message, as the interpreter would print it
                print(exit_.code, file=sys.stderr)
                code = 1
        # The script's atexit handlers (a peer's clean-up of its shared
        # memory) run as they would at its interpreter's exit.
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - reported as the script's failure
        traceback.print_exc()
    finally:
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    """The fork's exit code; past timeout (0: none) its group is killed."""
    deadline = time.monotonic() + timeout if timeout else None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            # What the fork left running (a worker it did not join) goes with it.
            _kill_group(pid, signal.SIGTERM)
            return os.waitstatus_to_exitcode(status)
        if deadline is not None and time.monotonic() > deadline:
            _kill_group(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -int(signal.SIGKILL)
        time.sleep(0.02)


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Zygote:
    """A zygote of SCRIPT in the interpreter python, started on first use."""

    def __init__(self, python: str, script: str):
        self.python, self.script = python, script
        self.proc: subprocess.Popen[str] | None = None

    def run(self, argv: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """argv run as SCRIPT's command line in a fork, as subprocess.run
        would, with env added to its environment."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([self.python, __file__, self.script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"argv": [str(a) for a in argv], "timeout": timeout, "env": env or {}}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the zygote of {self.script} exited ({self.proc.wait()})")
        answer = json.loads(line)
        if answer["code"] == -int(signal.SIGKILL) and timeout:
            raise subprocess.TimeoutExpired([self.script, *argv], timeout, answer["stdout"], answer["stderr"])
        return subprocess.CompletedProcess([self.script, *argv], answer["code"], answer["stdout"], answer["stderr"])

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    serve(sys.argv[1])
