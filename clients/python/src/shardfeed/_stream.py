"""GET /v1/batches, read straight off the Unix socket.

With handoff, the sidecar writes each batch into a shared-memory segment
(a sealed memfd whose descriptor crosses the socket once, as SCM_RIGHTS)
and sends only where it is: the Arrow buffers, and the numpy arrays and
tensors made of them, are views of the segment, so nothing is copied on
this side. When the training loop drops the last of them, a finalizer
writes the batch's generation into the stream's control segment, which
tells the sidecar the slot is free again; it never writes into a slot
before that. In a DataLoader worker the batch crosses to the training
process as a SharedBatch, a few numbers (and the segment's descriptor the
first time), and is made there, released there.

The stream is HTTP/1.1 chunked; with handoff each chunk starts with its
kind: A (Arrow IPC messages in the chunk), C (the control segment), S (a
slot's segment), B (Arrow IPC messages in a slot). Without it, each chunk
is Arrow IPC messages, as the sidecar sends them when it cannot hand off.
"""

from __future__ import annotations

import array
import ctypes
import json
import mmap
import os
import platform
import socket
import uuid
import weakref
from collections import deque
from multiprocessing.reduction import DupFd
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from .errors import SidecarError, StreamCut

HANDOFF = "memfd"
_RCVBUF = 4 << 20  # batches that cross the socket are MiBs: fewer wake-ups
_ANCILLARY = socket.CMSG_SPACE(16 * 4)  # descriptors that may come with one read
_LINE = 1024  # the longest chunk-size or header line
_HEAD = 64 << 10  # the largest response head or error body read
_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"

# The control segment: a released generation per slot, then these words.
_READ = 0  # descriptors read
_SEQ = 1  # bumped after each release or read: the futex the sidecar waits on
_WAITING = 2  # set while the sidecar waits on it
_WORDS = 3

_LIBC = ctypes.CDLL(None, use_errno=True)
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_WAKE = 1  # not FUTEX_PRIVATE_FLAG: the sidecar waits in its own mapping


def _bump(words: np.ndarray, slots: int) -> None:
    """Tell the sidecar, if it waits for a slot, to look again."""
    words[slots + _SEQ] += 1
    if _SYS_FUTEX is not None and words[slots + _WAITING]:
        _LIBC.syscall(_SYS_FUTEX, ctypes.c_void_p(words.ctypes.data + 8 * (slots + _SEQ)), _FUTEX_WAKE, 1, None, None, 0)


# What a cut stream looks like from here.
CUT_ERRORS = (ConnectionError, pa.ArrowInvalid, OSError, ValueError)


class _Reader:
    """A buffered reader of a Unix socket that keeps, in order, the file
    descriptors that come with the bytes (SCM_RIGHTS): a read that ignored
    them would close them."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = bytearray()
        self._pos = 0
        self.fds: deque[int] = deque()

    def _recv(self, into: memoryview | None = None) -> int:
        if into is None:
            data, anc, flags, _ = self.sock.recvmsg(1 << 16, _ANCILLARY, socket.MSG_CMSG_CLOEXEC)
            if self._pos:
                del self._buf[:self._pos]
                self._pos = 0
            self._buf += data
            n = len(data)
        else:
            n, anc, flags, _ = self.sock.recvmsg_into([into], _ANCILLARY, socket.MSG_CMSG_CLOEXEC)
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
                self.fds.extend(fds)
        if flags & socket.MSG_CTRUNC:
            raise StreamCut("the sidecar's shared-memory descriptors were cut off (MSG_CTRUNC)")
        return n

    def readline(self) -> bytes:
        while True:
            end = self._buf.find(b"\n", self._pos)
            if end >= 0:
                line = bytes(self._buf[self._pos:end + 1])
                self._pos = end + 1
                return line
            if len(self._buf) - self._pos > _LINE:
                raise StreamCut("a line of the response is too long")
            if not self._recv():
                return b""

    def read(self, n: int) -> bytes:
        while len(self._buf) - self._pos < n:
            if not self._recv():
                raise StreamCut(f"the connection closed {n - (len(self._buf) - self._pos)} bytes short")
        out = bytes(self._buf[self._pos:self._pos + n])
        self._pos += n
        return out

    def readinto(self, view: memoryview) -> None:
        have = min(len(self._buf) - self._pos, len(view))
        view[:have] = self._buf[self._pos:self._pos + have]
        self._pos += have
        got = have
        while got < len(view):
            n = self._recv(view[got:])
            if not n:
                raise StreamCut(f"the connection closed {len(view) - got} bytes into a batch")
            got += n

    def close(self) -> None:
        while self.fds:
            os.close(self.fds.popleft())


def request(path: str, target: str, timeout: float | None) -> tuple[socket.socket, _Reader, dict[str, str]]:
    """Send GET target on the socket at path; the connection, its reader
    and the response's headers (lower-case names). A refusal raises
    SidecarError with the sidecar's message."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RCVBUF)
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: shardfeed\r\n\r\n".encode())
        reader = _Reader(sock)
        status_line = reader.readline()
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ConnectionError(f"the sidecar answered {status_line[:80]!r}, not HTTP")
        status = int(parts[1])
        headers: dict[str, str] = {}
        size = 0
        while True:
            line = reader.readline()
            size += len(line)
            if line in (b"\r\n", b"\n", b"") or size > _HEAD:
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if status >= 300:
            length = min(int(headers.get("content-length", "0") or 0), _HEAD)
            raw = reader.read(length) if length else b""
            try:
                doc = json.loads(raw)
            except ValueError:
                raise SidecarError(status, raw.decode(errors="replace").strip()) from None
            raise SidecarError(status, doc.get("error", ""), doc.get("field", ""))
        return sock, reader, headers
    except BaseException:
        sock.close()
        raise


class _Mapped:
    """One shared-memory segment this process maps, with its descriptor
    (kept to hand to the training process from a DataLoader worker)."""

    __slots__ = ("fd", "map", "serial", "addr", "__weakref__")

    def __init__(self, fd: int, size: int, serial: int):
        self.fd, self.serial = fd, serial
        try:
            self.map = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                                 prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self.addr = int(np.frombuffer(self.map, dtype=np.uint8).ctypes.data) if size else 0
        weakref.finalize(self, os.close, fd)
        _LIVE.add(self)


# Every segment this process maps, while it does: where a tensor's bytes
# are, for the device hand-off (which page-locks the segments it copies from).
_LIVE: weakref.WeakSet[_Mapped] = weakref.WeakSet()


def segment_of(address: int) -> _Mapped | None:
    """The mapped segment holding the byte at address, if any."""
    for seg in list(_LIVE):
        if seg.addr <= address < seg.addr + len(seg.map):
            return seg
    return None


_DESCRIPTOR_KEYS = {"gen", "size", "slot"}


def _descriptor(body: bytes) -> dict[str, Any]:
    """A batch's descriptor, {"gen":G,"size":N,"slot":S} as the sidecar
    writes it, parsed without the json module (a third of the time, once a
    batch); any other form goes through json."""
    parts = body[1:-1].split(b",")
    if body[:1] == b"{" and body[-1:] == b"}" and len(parts) == 3:
        try:
            out = {k.strip()[1:-1].decode(): int(v) for k, _, v in (p.partition(b":") for p in parts)}
        except (ValueError, UnicodeDecodeError):
            out = {}
        if out.keys() == _DESCRIPTOR_KEYS:
            return out
    doc = json.loads(body)
    if not isinstance(doc, dict):
        raise StreamCut(f"a batch's descriptor is not an object: {body[:80]!r}")
    return doc


def _release(words: np.ndarray, slot: int, gen: int) -> None:
    words[slot] = gen
    _bump(words, len(words) - _WORDS)


def view(seg: _Mapped, size: int, release: tuple[np.ndarray, int, int] | None) -> pa.Buffer:
    """The first size bytes of seg as an Arrow buffer; with release
    (control words, slot, generation), the slot is released once nothing
    views the bytes any more."""
    if size > len(seg.map):
        raise StreamCut(f"a batch of {size} bytes does not fit its segment of {len(seg.map)}")
    owner = np.frombuffer(seg.map, dtype=np.uint8, count=size)
    if release is not None:
        weakref.finalize(owner, _release, *release)
    return pa.py_buffer(owner)


class Placement:
    """Where the batch just read is: its slot and generation in this
    stream's shared memory."""

    __slots__ = ("slot", "gen", "size", "seg")

    def __init__(self, slot: int, gen: int, size: int, seg: _Mapped):
        self.slot, self.gen, self.size, self.seg = slot, gen, size, seg


class BatchStream:
    """The record batches of one response, in order; raises StreamCut if cut.

    Args:
        sock, reader, headers: the response (request()).
        release_here: release each batch's slot when this process drops it
            (False in a DataLoader worker: the training process does).
    """

    def __init__(self, sock: socket.socket, reader: _Reader, headers: dict[str, str], release_here: bool = True):
        self._sock, self._reader = sock, reader
        self.epoch = int(headers.get("shardfeed-epoch", "0"))
        self.start_step = int(headers.get("shardfeed-start-step", "0"))
        self.steps = int(headers.get("shardfeed-steps", "0"))
        self.fingerprint = headers.get("shardfeed-fingerprint", "")
        self.handoff = headers.get("shardfeed-handoff") == HANDOFF
        self._chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        self.schema: pa.Schema | None = None
        self.id = uuid.uuid4().hex
        self.release_here = release_here
        self.control: _Mapped | None = None
        self.words: np.ndarray | None = None
        self.slots: list[_Mapped | None] = []
        self._serial = 0
        self._read = 0
        # Where the last batch yielded is (None: in the stream).
        self.placement: Placement | None = None

    def _chunk(self) -> tuple[str, pa.Buffer | dict[str, Any]] | None:
        """The next chunk: ("A", IPC bytes) or (kind, its JSON); None at the end."""
        line = self._reader.readline()
        if not line:
            raise StreamCut("the connection closed before the end of the stream")
        size = int(line.split(b";", 1)[0].strip() or b"x", 16)
        if size == 0:
            return None
        if self.handoff and size <= _LINE + 1:
            # A small chunk (a batch's descriptor, most of them): its kind,
            # body and end in one read.
            raw = self._reader.read(size + 2)
            kind, body = chr(raw[0]), raw[1:-2]
            if raw[-2:] != b"\r\n":
                raise StreamCut("a chunk of the stream is malformed")
            if kind == "B":
                return kind, _descriptor(body)
            if kind in "CS":
                return kind, json.loads(body)
            if kind == "A":
                return kind, pa.py_buffer(body)
            raise StreamCut(f"a chunk of kind {kind!r} and {size - 1} bytes is not part of the protocol")
        kind = "A"
        if self.handoff:
            kind = self._reader.read(1).decode("latin-1")
            size -= 1
        if kind != "A":
            raise StreamCut(f"a chunk of kind {kind!r} and {size} bytes is not part of the protocol")
        buf = pa.allocate_buffer(size)
        self._reader.readinto(memoryview(buf).cast("B"))
        if self._reader.read(2) != b"\r\n":
            raise StreamCut("a chunk of the stream is malformed")
        return kind, buf

    def _fd(self) -> int:
        if not self._reader.fds:
            raise StreamCut("a shared-memory segment came without its descriptor")
        return self._reader.fds.popleft()

    def _buffers(self) -> Iterator[pa.Buffer]:
        """The IPC bytes of each batch (or of the schema, the end)."""
        if not self._chunked:
            raise StreamCut("the sidecar's answer is not a chunked stream")
        while True:
            chunk = self._chunk()
            if chunk is None:
                return
            kind, body = chunk
            self.placement = None
            if kind == "A":
                assert isinstance(body, pa.Buffer)
                yield body
            elif kind == "C":
                assert isinstance(body, dict)
                slots = int(body["slots"])
                self.control = _Mapped(self._fd(), 8 * (slots + _WORDS), 0)
                self.words = np.frombuffer(self.control.map, dtype=np.int64, count=slots + _WORDS)
                self.slots = [None] * slots
            elif kind == "S":
                assert isinstance(body, dict)
                self._serial += 1
                self.slots[int(body["slot"])] = _Mapped(self._fd(), int(body["size"]), self._serial)
            else:  # B
                assert isinstance(body, dict) and self.words is not None
                slot, gen, size = int(body["slot"]), int(body["gen"]), int(body["size"])
                seg = self.slots[slot]
                if seg is None:
                    raise StreamCut(f"a batch in slot {slot}, which has no segment")
                self._read += 1
                self.words[len(self.slots) + _READ] = self._read
                _bump(self.words, len(self.slots))
                self.placement = Placement(slot, gen, size, seg)
                yield view(seg, size, (self.words, slot, gen) if self.release_here else None)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            ended = False
            for buf in self._buffers():
                for msg in self._messages(buf):
                    if msg.type == "schema":
                        self.schema = pa.ipc.read_schema(msg)
                    elif msg.type == "record batch":
                        if self.schema is None:
                            raise StreamCut("a batch came before the stream's schema")
                        yield pa.ipc.read_record_batch(msg, self.schema)
                # A batch in a slot never ends the stream (_messages).
                ended = self.placement is None and buf.size >= 8 and buf[buf.size - 8:].to_pybytes() == _EOS
            if not ended:
                raise StreamCut("the stream ended without the Arrow end-of-stream marker")
        except CUT_ERRORS as err:
            if isinstance(err, StreamCut):
                raise
            raise StreamCut(f"the batch stream was cut: {err!r}") from err
        finally:
            self.close()

    def _messages(self, buf: pa.Buffer) -> Iterator[pa.ipc.Message]:
        """The IPC messages in buf: a slot's (a batch's, which ends with it)
        read one after the other, the stream's chunks through a reader that
        knows the end-of-stream marker."""
        if self.placement is not None:
            reader = pa.BufferReader(buf)
            while reader.tell() < buf.size:
                try:
                    msg = pa.ipc.read_message(reader)
                except EOFError:
                    raise StreamCut("a batch in shared memory holds the end-of-stream marker") from None
                yield msg
            return
        messages = pa.ipc.MessageReader.open_stream(pa.BufferReader(buf))
        while True:
            try:
                msg = messages.read_next_message()
            except StopIteration:
                return
            if msg is None:
                return
            yield msg

    def shared(self, columns: list[str] | None, output: str, fill: Any = None, binary_as: str = "bytes") -> SharedBatch:
        """The batch just read, for a DataLoader worker to hand over: the
        training process makes it from the segment (and releases it)."""
        p = self.placement
        assert p is not None and self.control is not None and self.schema is not None
        return SharedBatch(self, p, columns, output, fill, binary_as)

    def close(self) -> None:
        self._reader.close()
        self._sock.close()


# What the training process maps of its workers' streams: per stream, the
# control words and each slot's segment; the streams of a worker process
# before its current one are forgotten (its batches arrive in order).
_MAPPED: dict[str, tuple[_Mapped | None, dict[int, _Mapped]]] = {}
_STREAM_OF: dict[int, str] = {}


class SharedBatch:
    """A batch in a worker's shared memory, as the worker hands it to the
    training process: which stream, slot and generation, the segment's
    descriptor the first time, and what to make of it."""

    def __init__(self, stream: BatchStream, p: Placement, columns: list[str] | None, output: str, fill: Any = None,
                 binary_as: str = "bytes"):
        self.stream, self.pid, self.p = stream.id, os.getpid(), p
        self.columns, self.output, self.fill, self.binary_as = columns, output, fill, binary_as
        self.slots = len(stream.slots)
        self.schema = stream.schema
        sent = _SENT.setdefault(stream.id, {})
        self.control = stream.control if "control" not in sent else None
        sent["control"] = 1
        self.seg = p.seg if sent.get(p.slot) != p.seg.serial else None
        sent[p.slot] = p.seg.serial
        if len(_SENT) > 4:  # only the current stream matters
            for key in list(_SENT)[:-4]:
                del _SENT[key]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        ctl = (DupFd(self.control.fd), self.slots) if self.control is not None else None
        seg = (DupFd(self.seg.fd), len(self.seg.map)) if self.seg is not None else None
        return (_rebuild, (self.stream, self.pid, ctl, self.p.slot, self.p.seg.serial, seg, self.p.gen, self.p.size,
                           self.schema, self.columns, self.output, self.fill, self.binary_as))


# The training process's converter of the last batch it made (every
# worker's batches have the same schema).
_converter: Any = None

# A worker's record of what the training process has been sent, per stream.
_SENT: dict[str, dict[Any, int]] = {}


def _rebuild(stream: str, pid: int, ctl: tuple[Any, int] | None, slot: int, serial: int, seg: tuple[Any, int] | None,
             gen: int, size: int, schema: pa.Schema, columns: list[str] | None, output: str, fill: Any = None,
             binary_as: str = "bytes") -> Any:
    """In the training process: a worker's SharedBatch as the batch, made of
    the segment mapped here and released when the loop drops it."""
    from . import _convert

    if _STREAM_OF.get(pid) != stream:
        _MAPPED.pop(_STREAM_OF.get(pid, ""), None)
        _STREAM_OF[pid] = stream
    control, segments = _MAPPED.setdefault(stream, (None, {}))
    if ctl is not None:
        control = _Mapped(ctl[0].detach(), 8 * (ctl[1] + _WORDS), 0)
        _MAPPED[stream] = (control, segments)
    if seg is not None:
        segments[slot] = _Mapped(seg[0].detach(), seg[1], serial)
    mapped = segments.get(slot)
    if control is None or mapped is None or mapped.serial != serial:
        raise StreamCut(f"a worker's batch in slot {slot} of a segment this process does not map")
    words = np.frombuffer(control.map, dtype=np.int64, count=len(control.map) // 8)
    buf = view(mapped, size, (words, slot, gen))
    reader = pa.ipc.MessageReader.open_stream(pa.BufferReader(buf))
    batch = None
    while batch is None:
        msg = reader.read_next_message()
        if msg is None:
            raise StreamCut("a worker's shared batch holds no record batch")
        if msg.type == "record batch":
            batch = pa.ipc.read_record_batch(msg, schema)
    global _converter
    _converter = _convert.converter(_converter, batch, output, columns, fill, binary_as)  # type: ignore[arg-type]
    return _converter(batch)
