"""FeedDataset: a PyTorch IterableDataset of the sidecar's ready batches."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator, Iterator, Mapping

import numpy as np
import pyarrow as pa

from . import _convert
from ._client import DEFAULT_WAIT_S, Client
from ._passes import Passes
from ._stream import BatchStream
from ._convert import Output
from ._stats import Counters, Stats, WaitReporter
from ._transform import ON_TRANSFORM_ERRORS, OnTransformError, OrderedTransform, Transform, default_threads
from .errors import ShardfeedError, StreamCut

try:  # torch is optional: without it the dataset is a plain iterable
    import torch
    import torch.utils.data as _tud
except ImportError:  # pragma: no cover - exercised where torch is absent
    torch = None  # type: ignore[assignment]

if TYPE_CHECKING:
    _Base = _tud.IterableDataset[Any]
else:
    _Base = _tud.IterableDataset if torch is not None else object

log = logging.getLogger("shardfeed")

STEP_COLUMN = "_shardfeed_step"

OUTPUTS: tuple[Output, ...] = ("torch", "numpy", "arrow")


def resume_position(epoch: int, step: int, steps: int) -> tuple[int, int]:
    """Where a job reads next from its committed (epoch, step): there, or
    the next epoch's first step when the committed epoch is complete.

    Args:
        epoch: the committed epoch.
        step: the committed step (every rank finished the steps before it).
        steps: the plan's steps per epoch (0: not known, no roll-over).
    """
    if steps and step >= steps:
        return epoch + 1, 0
    return epoch, step


def _rank_and_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """Explicit values, else torch.distributed, else torchrun's RANK and
    WORLD_SIZE, else a single process."""
    if rank is not None and world_size is not None:
        return rank, world_size
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        r, w = torch.distributed.get_rank(), torch.distributed.get_world_size()
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        r, w = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    else:
        r, w = 0, 1
    return (rank if rank is not None else r), (world_size if world_size is not None else w)


def is_data_parallel(name: str) -> bool:
    """Whether a mesh dimension of that name is data-parallel: dp, or dp_*
    (HSDP's dp_replicate and dp_shard). The others (tp, cp, pp, ...) only
    replicate the batches."""
    return name == "dp" or name.startswith("dp_")


def data_parallel_coordinates(device_mesh: Any) -> tuple[int, int]:
    """(dp_rank, dp_size) of this process in a torch DeviceMesh: the
    row-major index of its coordinates in the data-parallel dimensions and
    their product. Ranks that share them form a replication group and
    receive identical batches.

    Args:
        device_mesh: a torch.distributed.device_mesh.DeviceMesh whose
            data-parallel dimensions are named dp or dp_*.
    """
    names = getattr(device_mesh, "mesh_dim_names", None)
    if not names:
        raise ValueError("device_mesh has no mesh_dim_names: name its data-parallel dimension dp (or dp_replicate, dp_shard)")
    coordinate = device_mesh.get_coordinate()
    if coordinate is None:
        raise ValueError("this process is not in device_mesh: pass the mesh this rank belongs to")
    shape = tuple(int(n) for n in device_mesh.mesh.shape)
    dp_rank, dp_size, found = 0, 1, False
    for name, size, c in zip(names, shape, coordinate):
        if is_data_parallel(name):
            dp_rank, dp_size, found = dp_rank * size + int(c), dp_size * size, True
    if not found:
        raise ValueError(f"device_mesh has no data-parallel dimension among {list(names)}: name it dp (or dp_replicate, dp_shard)")
    return dp_rank, dp_size


def batch_step(batch: Any) -> int:
    """The step of a batch in any output form: a dict of tensors or arrays,
    or a record batch."""
    if isinstance(batch, dict):
        steps = batch[STEP_COLUMN]
        if isinstance(steps, (int, np.integer)) or getattr(steps, "ndim", 1) == 0:
            return int(steps)
        return int(steps[0])
    first = batch.column(STEP_COLUMN)[0]
    return int(first.as_py() if hasattr(first, "as_py") else first)


def _sidecar_says(client: Client) -> str:
    """Why the sidecar ended a stream, from its /v1/status, as the trainer's
    exception should say it."""
    try:
        errors = Client(client.socket, timeout=5).status().get("lastErrors") or []
    except Exception as err:  # noqa: BLE001 - the sidecar may be gone: say so
        return f"the sidecar on {client.socket} does not answer /v1/status either ({err})"
    if not errors:
        return f"the sidecar on {client.socket} reports no error (/v1/status)"
    last = errors[-1]
    return f"the sidecar says: {last.get('error', last)}"


def _timed(raw: Iterator[tuple[int, pa.RecordBatch]], c: Counters) -> Iterator[tuple[int, pa.RecordBatch]]:
    """raw, counting the time spent reading it."""
    while True:
        start = time.perf_counter()
        item = next(raw, None)
        c.add("fetch_seconds", time.perf_counter() - start)
        if item is None:
            return
        yield item


# What `shardfeed plan` says of a stream that needs `shardfeed index -f`,
# and whether the index there stays (only the filter's rows selected).
_NEEDS_INDEX = (("no index at", False), ("its index was written with no split chosen", False), ("its index is of split", False),
                ("has no selection for its filter", True), ("packs were not counted", True))


# What `shardfeed plan` warns of a stream whose source changed since its
# index was written (objects added, removed, resized or rewritten), and
# the changes to objects a plan of that index reads.
_SOURCE_CHANGED = "its source changed since it was indexed"
_PLAN_CHANGED = (" removed (", " of another size (", "rewritten in place")


def _index_when_needed(manifest: Path, binary: str | None, state: Path | None = None) -> bool:
    """Indexes the manifest's stream (and selects its filter's rows) when
    shardfeed plan finds no index, or finds that the source changed since
    it was indexed: once, where the manifest says. A job whose state is
    state and has committed progress keeps the plan it started with
    (said, with what it ignores). True when the source was indexed again
    under a job that committed nothing: that job starts afresh."""
    from ._binary import find_binary
    from ._commands import _run, _words

    cmd = find_binary(binary)
    done = subprocess.run([cmd, "plan", "-f", str(manifest)], capture_output=True, text=True, timeout=600)
    changed = [line.removeprefix("warning: ").split(". The plan is of the index")[0] for line in done.stderr.splitlines()
               if _SOURCE_CHANGED in line]
    if changed:
        if state is not None and _committed(state):
            if done.returncode != 0 or any(said in line for line in changed for said in _PLAN_CHANGED):
                # An object of its plan changed: the job cannot go on.
                raise ShardfeedError(f"{'; '.join(changed)}: job {state.parent.name} committed progress on the index before, and its "
                                     "plan can no longer be read; pass fresh=True (or another job=) to index the source again and start a "
                                     "new job, or restore the objects")
            for line in changed:
                log.warning("%s. Job %s resumes the plan it started with and reads none of it: pass fresh=True (or another job=) "
                            "to index the source again and start a new job.", line, state.parent.name)
            return False
        sys.stderr.write("".join(f"shardfeed: {line}: indexing it again\n" for line in changed))
        sys.stderr.write(_run(["index", "-f", str(manifest)], binary=binary))
        return state is not None and state.exists()
    if done.returncode == 0:
        return False
    needs = [over for said, over in _NEEDS_INDEX if said in done.stderr]
    if not needs:
        raise ShardfeedError(f"the data cannot be planned: {_words(done.stderr.strip().removeprefix('shardfeed: '))}")
    args = ["index", "-f", str(manifest)]
    if all(needs):  # the index is there: only the filter's rows, over it
        args.append("--selection-only")
    sys.stderr.write(_run(args, binary=binary))  # what it wrote, as the command says
    return False


def _warnings(text: str) -> list[str]:
    """The warnings of a shardfeed serve log: its "warning: " lines and
    its WARN records' messages."""
    out = []
    for line in text.splitlines():
        if line.startswith("warning: "):
            out.append(line.removeprefix("warning: "))
        elif " level=WARN " in line and (m := re.search(r' msg=("(?:[^"\\]|\\.)*")', line)):
            try:
                out.append(json.loads(m.group(1)))
            except ValueError:
                out.append(m.group(1))
    return out


def _committed(state: Path) -> bool:
    """Whether the job whose state file is state committed progress."""
    try:
        data = json.loads(state.read_text())
    except (OSError, ValueError):
        return False
    return bool(data.get("committed") or data.get("step") or data.get("epoch"))


class FeedDataset(_Base):
    """The batches of this rank, ready: iterate it, or give it to a DataLoader
    with batch_size=None (a FeedLoader does that and counts progress).

    In a DataLoader with num_workers=n, worker w reads steps s, s+n, … so the
    DataLoader yields the steps in order (design §3 step 7). Every batch is a
    dict of the projected columns and _shardfeed_index, _shardfeed_stream,
    _shardfeed_step and _shardfeed_pad (a pyarrow.RecordBatch with
    output="arrow").

    Args:
        socket: the sidecar's Unix socket; default $SHARDFEED_SOCKET, else
            the first that exists of /var/run/shardfeed/feed.sock (in a pod)
            and .shardfeed/feed.sock (where `shardfeed serve` listens).
        rank: this process's rank; default torch.distributed's, else $RANK,
            else 0.
        world_size: the number of ranks; default torch.distributed's, else
            $WORLD_SIZE, else 1. Without replication groups it must divide
            the dataset's numSplits.
        dp_rank: this rank's data-parallel rank, with dp_size, when the job's
            ranks form replication groups (tensor, context or pipeline
            parallelism): ranks of one dp_rank receive identical batches,
            and dp_size (not the world size) must divide numSplits. The pod
            declares dp_size with the annotation
            shardfeed.io/data-parallel-size.
        dp_size: the job's data-parallel size, with dp_rank.
        device_mesh: a torch DeviceMesh to take dp_rank and dp_size from:
            its dimensions named dp or dp_* are data-parallel.
        columns: the dataset's columns to deliver (the _shardfeed_ columns
            come always); default all. With a transform, the columns it
            is given: it returns what is delivered, columns it adds too.
        output: "torch" (default with torch installed), "numpy" or "arrow".
        epoch: the epoch to read; default the committed one (the next one
            when the committed epoch is complete).
        wait: seconds to wait for the sidecar to be ready.
        transform: a function from a pyarrow.RecordBatch to a
            pyarrow.RecordBatch of the same rows (e.g. tokenize, decode,
            augment), run on a thread pool ahead of the training loop,
            batches kept in order; the _shardfeed_ columns it drops are
            put back. With DataLoader workers, each worker has its pool.
        transform_threads: the pool's threads; default the CPUs this
            process may use.
        on_transform_error: "raise" (default) ends the stream with a
            TransformError; "skip_batch" hands the batch out as pad rows
            (the shape of the transformed batches, _shardfeed_pad true,
            the failed batch's ids), so every DDP rank stays in step and
            the ids still count every planned sample once.
        fill_null: what nulls of numeric and boolean columns (and of
            fixed-size lists of numbers) become, so that a column arrives
            as one array type in every batch: a value for all such
            columns, a dict of values by column, or None for NaN (floats),
            0 (integers) and False (booleans). 0 and 1 fill booleans as
            False and True; a value a column cannot hold (0.5 for
            integers) is refused at the first batch, naming the column.
        binary_as: what a value of a binary column becomes: "bytes" (default;
            a copy of the value), or "array": a uint8 tensor (numpy array
            with output="numpy") viewing the batch, no copy made. Images go
            straight to torchvision.io.decode_jpeg (or PIL through
            io.BytesIO); like every tensor of a batch, the arrays hold its
            shared memory until they are dropped. Fixed-size binary
            columns become one (rows, width) array.
        handoff: take the batches in the sidecar's shared memory (default):
            the sidecar writes each batch once, the tensors are views of
            it, and DataLoader workers hand batches to the training process
            without copying or pickling them. False: through the socket.
            Read inside a dataset of your own in DataLoader workers (to
            decode or augment there), the batches are dicts of columns as
            everywhere, views of the shared memory each worker releases
            when it drops them, and what your dataset yields crosses to
            the training process as any DataLoader's.
    """

    def __init__(self, socket: str | None = None, *, rank: int | None = None, world_size: int | None = None,
                 dp_rank: int | None = None, dp_size: int | None = None, device_mesh: Any = None,
                 columns: list[str] | None = None, output: Output | None = None, epoch: int | None = None,
                 wait: float = DEFAULT_WAIT_S, transform: Transform | None = None, transform_threads: int | None = None,
                 on_transform_error: OnTransformError = "raise", handoff: bool = True, fill_null: _convert.FillNull = None,
                 binary_as: _convert.BinaryAs = "bytes"):
        if device_mesh is not None:
            if dp_rank is not None or dp_size is not None:
                raise ValueError("give device_mesh or dp_rank and dp_size, not both")
            dp_rank, dp_size = data_parallel_coordinates(device_mesh)
        if (dp_rank is None) != (dp_size is None):
            raise ValueError("dp_rank and dp_size go together: give both (this rank's data-parallel coordinates) or neither")
        if dp_size is not None and dp_rank is not None and not 0 <= dp_rank < dp_size:
            raise ValueError(f"dp_rank={dp_rank} is outside dp_size={dp_size} data-parallel ranks")
        self._dp: tuple[int, int] | None = (int(dp_rank), int(dp_size)) if dp_rank is not None and dp_size is not None else None
        if transform is not None and not callable(transform):
            raise ValueError(f"transform={transform!r} is not callable: pass a function from a pyarrow.RecordBatch to a RecordBatch")
        if on_transform_error not in ON_TRANSFORM_ERRORS:
            raise ValueError(f"on_transform_error={on_transform_error!r}: use one of {', '.join(map(repr, ON_TRANSFORM_ERRORS))}")
        if binary_as not in _convert.BINARY_AS:
            raise ValueError(f"binary_as={binary_as!r}: use one of {', '.join(map(repr, _convert.BINARY_AS))}")
        if transform_threads is not None and transform_threads < 1:
            raise ValueError(f"transform_threads must be at least 1, got {transform_threads}")
        self.transform = transform
        self.transform_threads = transform_threads or default_threads()
        self.on_transform_error: OnTransformError = on_transform_error
        self._counters = Counters()
        # A FeedLoader reports the loop's waits itself (its workers' waits
        # are not the loop's); a dataset iterated directly reports its own.
        self.report_waits = True
        if output is None:
            output = "torch" if torch is not None else "numpy"
        if output not in OUTPUTS:
            raise ValueError(f"output={output!r}: use one of {', '.join(OUTPUTS)}")
        if output == "torch" and torch is None:
            raise ValueError('output="torch" needs torch installed; use output="numpy" or "arrow"')
        self.socket = socket
        self.handoff = handoff
        self.columns = list(columns) if columns is not None else None
        self.fill_null = dict(fill_null) if isinstance(fill_null, Mapping) else fill_null
        self.binary_as: _convert.BinaryAs = binary_as
        self.output: Output = output
        self.wait = wait
        self._rank, self._world = rank, world_size
        # The epochs of this dataset's passes, agreed with its DataLoader
        # workers: each new pass is the next epoch unless one is set.
        self._passes = Passes()
        self._epoch = epoch
        if epoch is not None:
            self._passes.request(epoch, None)
        # Where this process's pass started: k0 for every worker (worker w
        # at k0 + w), and this worker's next step; _restored: they are a
        # StatefulDataLoader's restored state, for the next pass.
        self._start: int | None = None
        self._next: int | None = None
        self._restored = False
        self._reading = False
        self._fingerprint: str | None = None
        self._stream: BatchStream | None = None
        # A FeedLoader's table of counters, a row per DataLoader worker.
        self._stats_table: torch.Tensor | None = None
        # The TrainingDataset served, where this process started the server.
        self._manifest_text: str | None = None

    @classmethod
    def from_manifest(cls, manifest: str | os.PathLike[str], *, job: str = "local", fresh: bool = False,
                      directory: str | os.PathLike[str] | None = None, binary: str | None = None,
                      serve_args: list[str] | None = None, **kwargs: Any) -> FeedDataset:
        """A dataset served by a `shardfeed serve` this process starts and
        owns: the local path, no Kubernetes. The server stops when the
        process exits; the other ranks of a torchrun on this machine use
        the one the first started. Everything else is as in a pod: the
        same batches, commits, state_dict() and resume.

        Args:
            manifest: the TrainingDataset manifest (file:// or s3:// streams).
            job: the job whose progress to resume or start (serve --job).
            fresh: start a new job from the beginning (serve --fresh).
            directory: where .shardfeed/ (the jobs' state and the server's
                log) lives; default the working directory.
            binary: the shardfeed command; default the wheel's own, else
                $SHARDFEED_BINARY, else the one on PATH.
            serve_args: more flags for serve (e.g. ["--cache-limit", "20Gi"]).
            **kwargs: FeedDataset's arguments (columns, output, transform, …).
        """
        from ._local import serve_manifest

        server = serve_manifest(manifest, job=job, fresh=fresh, directory=directory, binary=binary, args=serve_args)
        server.wait_ready(kwargs.get("wait", DEFAULT_WAIT_S))
        if server.proc is not None:  # started here: what it warned of at start, in this process's log
            for said in _warnings(server.log()):
                log.warning("shardfeed serve: %s", said)
        ds = cls(server.socket, **kwargs)
        ds._manifest_text = Path(manifest).read_text()
        return ds

    @classmethod
    def from_uri(cls, uri: str | os.PathLike[str], *, batch_size: int, format: str | None = None,
                 shuffle_seed: int | None = None, shuffle_block: int | None = None, columns: list[str] | None = None,
                 filter: str | None = None, num_splits: int | None = None, drop_last: bool = True, name: str | None = None,
                 endpoint: str | None = None, region: str | None = None, insecure: bool = False,
                 credentials_secret: str | None = None, index_uri: str | None = None, pack_length: int | None = None,
                 pack_column: str = "tokens", pack_across_shards: bool = False, split: str | None = None,
                 hive: bool = False, block_size: int | None = None, iceberg: dict[str, Any] | None = None, job: str | None = None,
                 fresh: bool = False, directory: str | os.PathLike[str] | None = None, binary: str | None = None,
                 serve_args: list[str] | None = None, **kwargs: Any) -> FeedDataset:
        """A dataset of the data at uri, with no manifest to write: the
        stream is indexed where it has no index yet (and its filter's
        rows selected), then served as from_manifest serves it. The
        TrainingDataset it describes is to_manifest(), which a cluster
        takes unchanged.

        A source that changed since it was indexed (objects added,
        removed, resized or rewritten, as `shardfeed plan` says) is indexed
        again, unless the job committed progress on the index before: that
        job keeps the plan it started with, and a warning names what it
        does not read (fresh=True indexes again and starts anew).

        Args:
            uri: the data's prefix (s3://bucket/prefix/, gs://…, az://…) or
                local directory.
            batch_size: the global batch: samples per step over every rank.
            format: one of the formats the shardfeed command reads
                (shardfeed.formats() lists them, as `shardfeed formats`
                does); a local directory's is read from its files (a Lance
                dataset by its _versions/, MDS and LitData by their
                index.json, Hugging Face by its dataset_info.json or
                dataset_dict.json, the others by their suffixes).
            shuffle_seed: shuffle the samples with this seed (none: the
                TrainingDataset's default, shuffled with seed 0; the manifest
                then names no shuffle); shuffle_block: how many consecutive
                samples of a split are shuffled together.
            columns: the columns to deliver (default all).
            filter: a row filter, a CEL expression over the columns.
            num_splits: how many splits the epoch is cut into; every world
                size the job runs at must divide it (default up to 8).
            drop_last: drop the tail of a split that does not fill a batch
                (False: pad it from the split's start, pad rows marked).
                Either way the splits have equal lengths, so the samples
                beyond a multiple of num_splits are in none: a warning says
                how many when drop_last is False; a num_splits dividing the
                sample count serves every one.
            name: the TrainingDataset's name (default the path's last part).
            endpoint, region, insecure: an S3-compatible store's (MinIO's).
            credentials_secret: the Secret a cluster reads the store with
                (source.credentialsSecretRef); here the environment's
                credentials are used.
            index_uri: where the index goes when the data's prefix is not
                yours to write (a prefix of the same store).
            pack_length: pack the documents of pack_column (lists of token
                ids) into sequences of this many tokens (spec.packing, best
                fit): each row is then a pack, with position_ids,
                loss_mask, cu_seqlens and doc_ids, and batch_size counts
                packs. The packs are counted with the index, once.
            pack_column: the column of token ids to pack.
            pack_across_shards: pack documents of consecutive shards
                together (spec.packing.acrossShards), where shards hold
                too few documents for the packer to fill sequences well
                (small row groups): the units of shards are chosen with
                the index, once.
            split: the split of a Hugging Face dataset whose folder holds
                several (a DatasetDict's, or a datasets cache folder): one
                is served, never several together; such a folder without
                a split is refused, naming its splits.
            hive: read uri as a tree of key=value folders of parquet or
                orc files, the folders' values as columns (--hive).
            block_size: the tokens of a sample of a litdata dataset written
                with LitData's TokensLoader (its block_size).
            iceberg: an Iceberg table's section, {"catalog": {...},
                "table": "db.name"} (spec.streams[].iceberg); format is
                then iceberg, and uri where its index goes.
            job: the job whose progress to resume or start; default one of
                this very dataset ("local-" and its manifest's hash), so
                that other arguments (another filter, seed or batch size)
                start a new job instead of refusing the old one's progress.
            fresh, directory, binary, serve_args, **kwargs: as in
                from_manifest.
        """
        from ._commands import dataset_manifest, to_yaml
        from ._local import STATE_DIR

        manifest = dataset_manifest(uri, batch_size=batch_size, format=format, name=name, num_splits=num_splits,
                                    shuffle_seed=shuffle_seed, shuffle_block=shuffle_block, columns=columns, filter=filter,
                                    drop_last=drop_last, endpoint=endpoint, region=region, insecure=insecure,
                                    credentials_secret=credentials_secret, index_uri=index_uri, pack_length=pack_length,
                                    pack_column=pack_column, pack_across_shards=pack_across_shards, split=split, hive=hive, block_size=block_size,
                                    iceberg=iceberg, binary=binary)
        text = to_yaml(manifest) + "\n"
        folder = Path(directory or os.getcwd()) / STATE_DIR / "datasets"
        folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        path = folder / f"{manifest['metadata']['name']}-{digest}.yaml"
        if not path.exists():
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, path)
        job = job or f"local-{digest[:8]}"
        state = Path(directory or os.getcwd()) / STATE_DIR / manifest["metadata"]["name"] / job / "state.json"
        if _index_when_needed(path, binary, None if fresh else state):
            fresh = True  # its state was of the index before, with nothing committed
        return cls.from_manifest(path, job=job, fresh=fresh, directory=directory, binary=binary, serve_args=serve_args, **kwargs)

    def to_manifest(self) -> str:
        """The TrainingDataset this dataset serves, as YAML: what
        from_uri made of its arguments, or from_manifest's file. kubectl
        apply -f takes it as it is (with the Secret it names, if any)."""
        if self._manifest_text is None:
            raise ShardfeedError("this dataset reads a sidecar's socket: its TrainingDataset is the cluster's (kubectl get tds -o yaml)")
        return self._manifest_text

    @property
    def rank(self) -> int:
        return _rank_and_world(self._rank, self._world)[0]

    @property
    def world_size(self) -> int:
        return _rank_and_world(self._rank, self._world)[1]

    @property
    def dp_rank(self) -> int:
        """The data-parallel rank whose batches this rank receives (the
        rank without replication groups)."""
        return self._dp[0] if self._dp is not None else self.rank

    @property
    def dp_size(self) -> int:
        """The data-parallel size: each batch is globalBatchSize / dp_size
        rows (the world size without replication groups)."""
        return self._dp[1] if self._dp is not None else self.world_size

    @property
    def fingerprint(self) -> str | None:
        """The plan's fingerprint the batches were read under, once known."""
        return self._fingerprint

    def client(self) -> Client:
        """A client of this dataset's sidecar."""
        return Client(self.socket)

    def stats(self) -> Stats:
        """What this process's iteration counted so far (with DataLoader
        workers, read a FeedLoader's stats(), which sums its workers')."""
        return self._counters.stats()

    def use_stats_table(self, table: torch.Tensor | None) -> None:
        """Count into row w of a shared table in DataLoader worker w (a
        FeedLoader's; None: in this process)."""
        self._stats_table = table

    def __len__(self) -> int:
        """The steps left in the epoch this dataset reads next: from where
        its pass is (while one is read in this process), else where the next
        pass starts (a restored state, the epoch set, the epoch after the
        last pass, else the job's committed step), to the epoch's end."""
        client = self.client()
        steps = int(client.status().get("steps", 0))
        if self._reading and self._next is not None:
            start = self._next
        elif self._restored:
            start = self._next if self._next is not None else self._start or 0
        else:
            upcoming = self._passes.peek()
            if upcoming is not None and upcoming[1] is not None:
                start = upcoming[1]
            else:
                state = client.state()
                epoch, step = resume_position(int(state.get("epoch", 0)), int(state.get("step", 0)), steps)
                start = step if upcoming is None or upcoming[0] == epoch else 0
        return max(steps - start, 0)

    @property
    def epoch(self) -> int | None:
        """The epoch of the latest pass over this dataset (in this process
        or its DataLoader workers), or the one set for the first; None
        before either."""
        latest = self._passes.latest()
        return latest.epoch if latest is not None else self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Read epoch next, from its first step: the next pass over the
        dataset (in this process or in DataLoader workers, persistent ones
        too) reads it, whatever the passes before.

        Args:
            epoch: the epoch to read.
        """
        self._epoch = int(epoch)
        self._start, self._next, self._restored = None, None, False
        self._passes.request(self._epoch, 0)

    def resume(self, epoch: int, step: int, fingerprint: str | None = None) -> None:
        """Start the next pass at (epoch, step): worker w at step + w.

        Args:
            epoch: the epoch to read.
            step: the first step to read.
            fingerprint: the plan the position is in; the sidecar refuses
                another (None: not checked).
        """
        self._epoch, self._start, self._next, self._restored = int(epoch), int(step), None, False
        self._fingerprint = fingerprint
        self._passes.request(self._epoch, self._start)

    def resolve_epoch(self, client: Client) -> int:
        """The epoch the job resumes in: the committed one (the next one
        when the committed epoch is complete).

        Args:
            client: a client of the sidecar, to ask for the committed state.
        """
        state = client.state()
        steps = int(client.status().get("steps", 0))
        return resume_position(int(state.get("epoch", 0)), int(state.get("step", 0)), steps)[0]

    # The Stateful protocol of torchdata's StatefulDataLoader: a worker's
    # state is the next step it will produce.
    def state_dict(self) -> dict[str, Any]:
        """This worker's position: the epoch, the next step it produces."""
        return {"epoch": self._epoch, "next_step": self._next, "start": self._start, "fingerprint": self._fingerprint}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at a position state_dict() returned.

        Args:
            state: a worker's state_dict().
        """
        self._epoch = state.get("epoch")
        self._next = state.get("next_step")
        self._start = state.get("start")
        self._fingerprint = state.get("fingerprint")
        # The next pass continues there (a state taken before any pass has
        # no epoch: the next pass is then chosen as any other).
        self._restored = self._epoch is not None

    def __iter__(self) -> Iterator[Any]:
        worker, workers = 0, 1
        in_worker, wrapped = False, False
        if torch is not None:
            info = _tud.get_worker_info()
            if info is not None:
                worker, workers, in_worker = info.id, info.num_workers, True
                # Inside a dataset of the user's (their IterableDataset
                # reads this one in the worker, to decode or augment): their
                # code sees the batch as documented, a dict of columns read
                # from the batch in shared memory, its tensors the worker's
                # own (torch moves a tensor the worker yields, which would
                # leave what viewed it on a slot the sidecar reuses): the
                # slot goes back when the batch is made, or when the last
                # numpy array or Arrow buffer of it goes (past the slots, the
                # next batches come in the stream), and what the user's
                # dataset yields crosses as any DataLoader's batches do.
                wrapped = info.dataset is not self
        if in_worker and self._stats_table is not None:
            self._counters = Counters(self._stats_table[worker].numpy())
        c = self._counters
        # A worker hands the training process where each batch is in shared
        # memory, which makes and releases it there; a transform's output is
        # new memory, which the DataLoader shares itself.
        shared = in_worker and not wrapped and self.transform is None and self.handoff
        client = self.client()
        raw = self._raw(client, worker, workers, release_here=not shared, handoff=self.handoff)
        items: Iterator[tuple[int, pa.RecordBatch]]
        # columns= chooses what the transform is given; what it returns is
        # delivered whole, the columns it adds included.
        delivered = self.columns
        if self.transform is not None:
            wanted = self.columns
            items = OrderedTransform(self.transform, self.transform_threads, self.on_transform_error, c).run(
                (k, _convert.project(rb, wanted)) for k, rb in raw)
            delivered = None
        else:
            items = _timed(raw, c)
        reporter = None
        if self.report_waits and not in_worker:
            reporter = WaitReporter(Client(client.socket, timeout=2), _rank_and_world(self._rank, self._world)[0])
        conv: _convert.Converter | None = None
        self._reading = True
        try:
            while True:
                start = time.perf_counter()
                item = next(items, None)
                if item is None:
                    break
                k, rb = item
                stream = self._stream
                conv = _convert.converter(conv, rb, self.output, delivered, self.fill_null, self.binary_as)  # checks the columns
                if shared and stream is not None and stream.placement is not None:
                    batch = stream.shared(delivered, self.output, self.fill_null, self.binary_as)
                else:
                    batch = conv(rb)
                    if wrapped and self.handoff:
                        batch = _convert.owning(batch)
                waited = time.perf_counter() - start
                c.batch(rb.num_rows, waited)
                if reporter is not None:
                    reporter.add(waited)
                # The state is what this worker handed out: set before
                # yielding, so a snapshot taken after the item sees it.
                self._next = k + workers
                yield batch
        finally:
            self._reading = False
            if reporter is not None:
                reporter.flush()
            close = getattr(items, "close", None)
            if close is not None:
                close()
            raw.close()

    def _begin_pass(self, client: Client, worker: int, workers: int) -> int | None:
        """Start this worker's next pass (its epoch agreed with the pass's
        other workers, see _passes) and return its first step (None: the
        job's committed step, where the sidecar counts it)."""
        restored: tuple[int, int | None] | None = None
        if self._restored and self._epoch is not None:
            own = self._next if self._next is not None else (self._start + worker if self._start is not None else None)
            restored = (int(self._epoch), own)
        pos = self._passes.begin(worker, workers, lambda: self.resolve_epoch(client), restored)
        self._restored = False
        self._epoch = pos.epoch
        if pos.source == "state":
            return restored[1] if restored is not None else None
        self._start, self._next = pos.start, None
        if pos.source == "next" and pos.number > 0:
            log.info("pass %d over the dataset reads epoch %d from its first step (each new pass reads the next epoch; "
                     "set_epoch(e) chooses one)", pos.number, pos.epoch)
        return None if pos.start is None else pos.start + worker

    def _raw(self, client: Client, worker: int, workers: int, release_here: bool,
             handoff: bool) -> Generator[tuple[int, pa.RecordBatch], None, None]:
        """(step, record batch) of this worker's stream, reconnecting once
        at the step it expected when the stream is cut; self._stream is the
        stream being read."""
        rank, world = _rank_and_world(self._rank, self._world)
        client.wait_ready(self.wait)
        step = self._begin_pass(client, worker, workers)
        cut: StreamCut | None = None
        while True:
            if cut is not None:
                # A restarted sidecar (a pod's sidecar container restarts by
                # itself) takes a moment to come back.
                client.wait_ready(self.wait)
            stream = client.batches(rank=rank, world=world, worker=worker, workers=workers, data_parallel=self._dp,
                                    epoch=self._epoch, step=step, fingerprint=self._fingerprint,
                                    handoff=handoff, release_here=release_here)
            self._stream = stream
            expected = stream.start_step
            self._fingerprint = stream.fingerprint
            try:
                for batch in stream:
                    k = batch_step(batch)
                    expected = k + workers
                    cut = None
                    yield k, batch
                return
            except StreamCut as err:
                if cut is not None:
                    raise StreamCut(f"rank {rank} worker {worker}: the stream of epoch {self._epoch} was cut twice at step "
                                    f"{expected}: {err}; {_sidecar_says(client)}") from err
                cut = err
                step = expected  # reconnect once, exactly where the stream stopped
