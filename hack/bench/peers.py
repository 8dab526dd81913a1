"""The peers' side of the loader benchmark; runs in bin/venv-oracle, which
has every peer from PyPI (hack/requirements-oracle.txt). The data sets are
datasets.py's (MDS in DIR/mds, a Lance table in DIR/lance, LitData's chunks
in DIR/litdata, Parquet in DIR/parquet). Each peer is used as its docs show.

  peers.py read-mosaic DIR WORKERS BATCH EPOCH TIME_BOX     StreamingDataset in a DataLoader
  peers.py read-lance  DIR WORKERS BATCH EPOCH TIME_BOX     lancedb's StreamingDataset in a DataLoader
  peers.py read-litdata DIR WORKERS BATCH EPOCH TIME_BOX    LitData's StreamingDataset in its StreamingDataLoader
  peers.py read-ray DIR WORKERS BATCH EPOCH TIME_BOX        Ray Data: read_parquet, streaming_split, iter_torch_batches
  peers.py read-tdu DIR WORKERS BATCH EPOCH TIME_BOX        torch-dataloader-utils: StructuredDataset.create_dataloader
  peers.py resume-mosaic DIR WORKERS BATCH EPOCH TIME_BOX   the rest of an epoch, restored at 90 % (state_dict/load_state_dict)
  peers.py resume-litdata DIR WORKERS BATCH EPOCH TIME_BOX  the same with LitData's StreamingDataLoader
  peers.py decode-mosaic DIR WORKERS BATCH EPOCH TIME_BOX   images decoded and resized in the workers (decode_image)
  peers.py decode-litdata DIR WORKERS BATCH EPOCH TIME_BOX  the same with LitData
  peers.py decode-shardfeed SOCKET WORKERS BATCH EPOCH TIME_BOX  the same in a dataset of the user's around shardfeed's FeedDataset
  peers.py read-wds DIR WORKERS BATCH EPOCH TIME_BOX        webdataset: WebDataset (shard and sample shuffles) in its WebLoader
  peers.py decode-wds DIR WORKERS BATCH EPOCH TIME_BOX      the same, images decoded and resized in the workers
  peers.py decode-limit DIR WORKERS BATCH EPOCH TIME_BOX    the limit: every image decoded alone by libjpeg-turbo, a process a core
  peers.py read-megatron DIR WORKERS BATCH EPOCH TIME_BOX   megatron-core's IndexedDataset in a DataLoader, shuffled
  peers.py read-gpt DIR WORKERS BATCH EPOCH TIME_BOX        megatron-core's GPTDataset (sequences of 2048 tokens) in a DataLoader
  peers.py prepare-formats IMAGES TOKENS                    write IMAGES/wds/ (tars, webdataset's ShardWriter) and
                                                            TOKENS/megatron/ (megatron-core's builder) from their Parquet

A read takes an optional last argument, a JSON object of the peer's
throughput knobs (peer_knobs.py: what peer_sweep.py found fastest; its
defaults without it).

A read prints touch.touch_loop's timing as JSON: the time from building the
loader to its first batch, and the rate after it, of a training loop that
reads every value.
"""

import fcntl
import io
import json
import os
import sys
from pathlib import Path

import torch
from touch import touch_loop

WIDTH = 2048
# The decode benchmark's transform: torchvision's Resize(RESIZE) then
# CenterCrop(CROP) on the image opened by Pillow, as uint8 HWC.
RESIZE, CROP = 256, 224


def decode_image(data: bytes) -> torch.Tensor:
    """What a training script's transform does to an image's bytes (with
    Pillow's calls, which torchvision's transforms make on a PIL image)."""
    import numpy as np
    from PIL import Image

    img = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = img.size
    size = (RESIZE, int(RESIZE * h / w)) if w <= h else (int(RESIZE * w / h), RESIZE)
    img = img.resize(size, Image.Resampling.BILINEAR)
    left, top = int(round((size[0] - CROP) / 2.0)), int(round((size[1] - CROP) / 2.0))
    return torch.from_numpy(np.array(img.crop((left, top, left + CROP, top + CROP))))


def _pick(knobs, *names):
    """The knobs of those names that were given, as keyword arguments."""
    return {n: knobs[n] for n in names if n in knobs}


def _loader_knobs(knobs, workers):
    """The DataLoader's share of a peer's knobs (prefetch_factor needs workers)."""
    return _pick(knobs, "prefetch_factor") if workers else {}


def read_mosaic(path, workers, batch, epoch, time_box, knobs):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    # mosaicml-streaming names its shared memory per process tree: one
    # reader at a time on this machine (the compatibility tests take it too).
    lock = open(Path(__file__).resolve().parents[2] / "bin" / ".mds-oracle-read.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    clean_stale_shared_memory()

    def make():
        ds = StreamingDataset(local=f"{path}/mds", batch_size=batch, shuffle=True, shuffle_seed=epoch + 1, **_pick(knobs, "shuffle_algo"))
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers, **_loader_knobs(knobs, workers))

    return touch_loop(make, time_box)


def decode_mosaic(path, workers, batch, epoch, time_box, knobs):
    """mosaicml-streaming with the image decoded in __getitem__, as its
    docs show for transforms (a subclass), in the DataLoader's workers."""
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    lock = open(Path(__file__).resolve().parents[2] / "bin" / ".mds-oracle-read.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    clean_stale_shared_memory()

    class Decoded(StreamingDataset):
        def __getitem__(self, idx):
            sample = super().__getitem__(idx)
            sample["image"] = decode_image(sample["image"])
            return sample

    def make():
        ds = Decoded(local=f"{path}/mds", batch_size=batch, shuffle=True, shuffle_seed=epoch + 1, **_pick(knobs, "shuffle_algo"))
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers, **_loader_knobs(knobs, workers))

    return touch_loop(make, time_box)


def decode_shardfeed(socket, workers, batch, epoch, time_box, knobs):
    """shardfeed handing a `shardfeed serve`'s JPEG bytes (at socket) to
    the user's own code, which decodes and resizes each image
    (decode_image, as the peers' rows do) in the DataLoader's workers: a
    dataset of the user's around the FeedDataset, in a FeedLoader
    (docs/python-client.md). Runs here, beside the peers, for Pillow."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python" / "src"))
    import shardfeed

    class Decoded(torch.utils.data.IterableDataset):
        def __init__(self, source):
            self.source = source

        def __iter__(self):
            for b in self.source:
                out = dict(b)
                # default_collate, as the peers' DataLoaders stack their
                # samples: in a worker it stacks straight into shared
                # memory, where torch.stack's tensor would be copied there.
                out["image"] = torch.utils.data.default_collate([decode_image(x) for x in b["image"]])
                yield out

    def make():
        loader = shardfeed.FeedLoader(Decoded(shardfeed.FeedDataset(socket, rank=0, world_size=1, binary_as="bytes")), num_workers=workers)
        loader.set_epoch(epoch)
        return loader

    return touch_loop(make, time_box)


def decode_user_limit(path, workers, batch, epoch, time_box, knobs):
    """The limit of a user's own decode in DataLoader workers: the JPEG
    bytes already in this process's memory (read from the Parquet files
    before the clock starts, one buffer the workers share after fork), each
    worker decoding its share of a shuffled order with the same code
    (decode_image, default_collate) into batches: no loader reads, waits or
    hands anything over but the decoded batch. What any loader that gives
    the user's code JPEG bytes in these workers can reach on these cores."""
    import numpy as np
    import pyarrow.parquet as pq

    blobs = [b for part in sorted(Path(path, "parquet").glob("*.parquet"))
             for b in pq.read_table(part, columns=["image"]).column(0).to_pylist()]
    ends = np.cumsum([len(b) for b in blobs])
    starts = ends - [len(b) for b in blobs]
    buf = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    del blobs
    order = np.random.default_rng(epoch + 1).permutation(len(ends))
    batches = [order[i:i + batch] for i in range(0, len(order), batch)]

    class InMemory(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            k, n = (info.id, info.num_workers) if info else (0, 1)
            for idx in batches[k::n]:
                # bytes of each image, as the peers' datasets give them.
                images = [decode_image(buf[starts[i]:ends[i]].tobytes()) for i in idx]
                yield {"id": torch.from_numpy(idx.astype(np.int64)), "image": torch.utils.data.default_collate(images)}

    def make():
        return torch.utils.data.DataLoader(InMemory(), batch_size=None, num_workers=workers)

    return touch_loop(make, time_box)


def resume_mosaic(path, workers, batch, epoch, time_box, knobs):
    """Time from building a StreamingDataset restored at 90 % of an epoch to
    its first batch."""
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    lock = open(Path(__file__).resolve().parents[2] / "bin" / ".mds-oracle-read.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    clean_stale_shared_memory()
    probe = StreamingDataset(local=f"{path}/mds", batch_size=batch, shuffle=True, shuffle_seed=epoch + 1)
    n = probe.num_samples
    state = probe.state_dict(int(0.9 * n) // batch * batch, True)
    state["epoch"] = 0  # a fresh dataset's state names epoch -1; the restored one iterates epoch 0
    del probe
    clean_stale_shared_memory()

    def make():
        ds = StreamingDataset(local=f"{path}/mds", batch_size=batch, shuffle=True, shuffle_seed=epoch + 1)
        ds.load_state_dict(state)
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers)

    return touch_loop(make, time_box)


def lance_token_rows(b):
    """Tokens: a dict of tensors per row, cut from the batch without a loop
    per value (faster than lancedb's default of plain Python rows)."""
    ids = torch.from_numpy(b.column("id").to_numpy())
    tokens = torch.from_numpy(b.column("tokens").flatten().to_numpy().reshape(-1, WIDTH))
    return [{"id": i, "tokens": t} for i, t in zip(ids, tokens)]


def read_lance(path, workers, batch, epoch, time_box, knobs):
    import lancedb
    from lancedb.streaming import StreamingDataset

    # lancedb sorts its permutation table in a 100 MB budget by default,
    # which 4 million rows (tabular) exceed ("Not enough memory to continue
    # external sort"); lancedb reads this variable for that budget.
    os.environ.setdefault("LANCEDB_PERM_BUILDER_MEMORY_LIMIT", str(1 << 30))

    def make():
        db = lancedb.connect(f"{path}/lance")
        table = db.open_table(db.list_tables().tables[0])
        # Tokens get a transform to tensors; other data sets lancedb's
        # default, a Python dict per row, which the DataLoader collates.
        transform = lance_token_rows if "tokens" in table.schema.names else None
        ds = StreamingDataset(table, num_splits=knobs.get("num_splits", max(1, workers)), shuffle=True, shuffle_seed=1, epoch=epoch,
                              read_batch_size=knobs.get("read_batch_size", batch), transform=transform)
        # lancedb's runtime does not survive fork (it warns, and its workers
        # die here): spawn them, as it recommends.
        context = "spawn" if workers else None
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers, multiprocessing_context=context)

    return touch_loop(make, time_box)


def read_litdata(path, workers, batch, epoch, time_box, knobs):
    import litdata

    where, extra = f"{path}/litdata", {}
    if knobs.get("item_loader") == "tokens":
        # LitData's recipe for LLM pretraining: the tokens written as one
        # stream (optimize with a TokensLoader) and read back in blocks.
        from litdata.streaming.item_loader import TokensLoader

        where, extra = str(litdata_tokens(Path(path))), {"item_loader": TokensLoader(block_size=WIDTH)}

    def make():
        ds = litdata.StreamingDataset(where, shuffle=True, seed=epoch + 1, **_pick(knobs, "max_pre_download"), **extra)
        return litdata.StreamingDataLoader(ds, batch_size=batch, num_workers=workers, **_loader_knobs(knobs, workers))

    return touch_loop(make, time_box)


class _LitdataTokenRows:
    """optimize's function (picklable: optimize runs it in worker
    processes): a row group's token rows as 1-D tensors."""

    def __init__(self, source):
        self.source = source

    def __call__(self, group):
        import pyarrow.parquet as pq

        col = pq.ParquetFile(self.source).read_row_group(group, columns=["tokens"]).column(0).combine_chunks()
        for row in col.values.to_numpy().reshape(len(col), -1):
            yield torch.from_numpy(row.copy())


def litdata_tokens(tokens: Path) -> Path:
    """TOKENS/litdata-tokens: the tokens data set as LitData's token stream
    (litdata.optimize with a TokensLoader, chunks of 8 MiB), written once."""
    import litdata
    import pyarrow.parquet as pq
    from litdata.streaming.item_loader import TokensLoader

    out = tokens / "litdata-tokens"
    if not (out / ".complete").exists():
        source = str(tokens / "parquet" / "part-00000.parquet")
        litdata.optimize(fn=_LitdataTokenRows(source), inputs=list(range(pq.ParquetFile(source).num_row_groups)),
                         output_dir=str(out), chunk_size=WIDTH * 1024, item_loader=TokensLoader(), num_workers=os.cpu_count() or 1,
                         mode="overwrite")
        (out / ".complete").write_text("done")
    return out


def decode_litdata(path, workers, batch, epoch, time_box, knobs):
    """LitData with the image decoded in __getitem__ (a subclass, as its
    docs show for transforms), in its StreamingDataLoader's workers."""
    import litdata

    class Decoded(litdata.StreamingDataset):
        def __getitem__(self, index):
            sample = super().__getitem__(index)
            sample["image"] = decode_image(sample["image"])
            return sample

    def make():
        ds = Decoded(f"{path}/litdata", shuffle=True, seed=epoch + 1, **_pick(knobs, "max_pre_download"))
        return litdata.StreamingDataLoader(ds, batch_size=batch, num_workers=workers, **_loader_knobs(knobs, workers))

    return touch_loop(make, time_box)


def resume_litdata(path, workers, batch, epoch, time_box, knobs):
    """Time from building a StreamingDataLoader restored at 90 % of an epoch
    (its state_dict after reading that far) to its first batch."""
    import litdata

    def loader():
        ds = litdata.StreamingDataset(f"{path}/litdata", shuffle=True, seed=epoch + 1)
        return litdata.StreamingDataLoader(ds, batch_size=batch, num_workers=workers)

    probe = loader()
    stop = int(0.9 * len(probe.dataset)) // batch
    for i, _ in enumerate(probe):
        if i + 1 == stop:
            break
    state = probe.state_dict()
    del probe

    def make():
        dl = loader()
        dl.load_state_dict(state)
        return dl

    return touch_loop(make, time_box)


def read_ray(path, workers, batch, epoch, time_box, knobs):
    """Ray Data as Ray Train feeds a rank: the Parquet files in a shuffled
    order, streaming_split into one iterator, a local shuffle buffer of a
    few batches. Its workers are Ray's tasks (workers: not used)."""
    import ray

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, configure_logging=False,
             _temp_dir=str(Path(__file__).resolve().parents[2] / "bin" / "ray"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        def make():
            blocks = {"override_num_blocks": knobs["override_num_blocks"]} if knobs.get("override_num_blocks") else {}
            ds = ray.data.read_parquet(f"{path}/parquet/", shuffle="files", **blocks)
            split = ds.streaming_split(1, equal=True)[0]
            return split.iter_torch_batches(batch_size=batch, local_shuffle_buffer_size=4 * batch, local_shuffle_seed=epoch + 1,
                                            collate_fn=_ray_collate(), prefetch_batches=knobs.get("prefetch_batches", 1))

        t = touch_loop(make, time_box)
        # Ray's teardown now and then ends the process from a thread of its
        # own ("the core worker has already been shutdown"): the result
        # goes out first.
        print(json.dumps(t), flush=True)
        return t
    finally:
        ray.shutdown()


def _ray_collate():
    """Ray's numpy batch as tensors, bytes and strings as lists: its default
    collation refuses columns that are not numbers (its docs say to pass a
    NumpyBatchCollateFn then)."""
    from ray.data.collate_fn import NumpyBatchCollateFn

    class Collate(NumpyBatchCollateFn):
        def __call__(self, batch):
            return {k: torch.as_tensor(v) if v.dtype.kind in "biuf" else v.tolist() for k, v in batch.items()}

    return Collate()


def _arrow_to_torch(rb):
    """torch-dataloader-utils' Arrow output as tensors (its own "torch"
    output turns fixed-size lists into Python lists): the collate_fn its
    docs ask for with output_format="arrow"."""
    import pyarrow as pa

    out = {}
    for name, col in zip(rb.schema.names, rb.columns):
        if pa.types.is_fixed_size_list(col.type):
            out[name] = torch.from_numpy(col.values.to_numpy().reshape(len(col), -1))
        elif pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
            out[name] = torch.from_numpy(col.to_numpy())
        else:
            out[name] = col.to_pylist()
    return out


def read_tdu(path, workers, batch, epoch, time_box, knobs):
    from torch_dataloader_utils import StructuredDataset

    split = {"split_bytes": knobs["split_bytes"]} if knobs.get("split_bytes") else {}

    def make():
        loader, ds = StructuredDataset.create_dataloader(path=f"{path}/parquet/", format="parquet", shuffle=True, shuffle_seed=1,
                                                         num_workers=workers, batch_size=batch, output_format="arrow",
                                                         collate_fn=_arrow_to_torch, **split)
        ds.set_epoch(epoch)
        return loader

    return touch_loop(make, time_box)


def _wds_urls(path):
    return sorted(str(p) for p in Path(path, "wds").glob("*.tar"))


def _wds(path, epoch, batch, decode):
    """WebDataset as its docs show for a training loop: shards shuffled,
    a shuffle buffer of samples, split over the loader's workers, batched
    in the workers (its collation: tensors stacked, bytes as lists)."""
    import webdataset as wds

    ds = wds.WebDataset(_wds_urls(path), shardshuffle=100, seed=epoch + 1, workersplitter=wds.split_by_worker, empty_check=False)
    ds = ds.shuffle(1000)
    if decode:
        ds = ds.map_dict(jpg=decode_image)
    return ds.batched(batch, partial=False)


def read_wds(path, workers, batch, epoch, time_box, knobs):
    import webdataset as wds

    return touch_loop(lambda: wds.WebLoader(_wds(path, epoch, batch, False), batch_size=None, num_workers=workers), time_box)


def decode_wds(path, workers, batch, epoch, time_box, knobs):
    import webdataset as wds

    return touch_loop(lambda: wds.WebLoader(_wds(path, epoch, batch, True), batch_size=None, num_workers=workers), time_box)


def decode_limit(path, workers, batch, epoch, time_box, knobs):
    """The machine's limit for decoded images: each image's JPEG decoded by
    libjpeg-turbo (Pillow's build, the library every loader here calls) in
    one process a core, with no resize, no loader and no hand-off: what any
    loader must spend on these images whatever it does next. Each process
    decodes every cores-th image for up to time_box seconds; the rate is
    their images over the slowest one's time."""
    import multiprocessing

    import pyarrow.parquet as pq

    blobs = [b for part in sorted(Path(path, "parquet").glob("*.parquet"))
             for b in pq.read_table(part, columns=["image"]).column(0).to_pylist()]
    cores = os.cpu_count() or 1
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        parts = pool.starmap(_decode_part, [(blobs[k::cores], time_box) for k in range(cores)])
    done, seconds = sum(n for n, _ in parts), max(t for _, t in parts)
    return {"first": 0.0, "rest": seconds, "samples": done, "rest_samples": done, "checksum": 0.0,
            "complete": done == len(blobs), "rss_mib": 0.0, "worker_rss_mib": 0.0}


def _decode_part(blobs, time_box):
    """(images decoded, seconds): blobs decoded in order until time_box."""
    import time

    from PIL import Image

    start = time.perf_counter()
    n = 0
    for b in blobs:
        Image.open(io.BytesIO(b)).load()
        n += 1
        if time_box and time.perf_counter() - start > time_box:
            break
    return n, time.perf_counter() - start


def read_megatron(path, workers, batch, epoch, time_box, knobs):
    """megatron-core's IndexedDataset (memory-mapped .bin/.idx) read a
    document a sample in a shuffled DataLoader: what its GPTDataset reads
    under its sample index (which needs a compiled helper to build)."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    ds = IndexedDataset(str(Path(path, "megatron", "tokens")))

    class Docs(torch.utils.data.Dataset):
        def __len__(self):
            return len(ds)

        def __getitem__(self, i):
            return {"tokens": torch.from_numpy(ds[i])}

    def make():
        g = torch.Generator().manual_seed(epoch + 1)
        return torch.utils.data.DataLoader(Docs(), batch_size=batch, shuffle=True, generator=g, num_workers=workers, drop_last=True)

    return touch_loop(make, time_box)


def read_gpt(path, workers, batch, epoch, time_box, knobs):
    """megatron-core's GPTDataset as Megatron-LM builds it for pretraining
    (BlendedMegatronDatasetBuilder, one data path): sequences of 2048 tokens
    cut across the documents in its shuffled sample index (its compiled
    helpers), with labels, a loss mask and positions, in a DataLoader."""
    import tempfile

    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.megatron_tokenizer import MegatronLegacyTokenizer

    class Tokenizer(MegatronLegacyTokenizer):
        """The special tokens GPTDataset asks of a tokenizer; it tokenizes nothing here."""

        def __init__(self):
            super().__init__(None)

        def tokenize(self, text):
            return []

        def detokenize(self, ids):
            return ""

        vocab = property(lambda self: {})
        inv_vocab = property(lambda self: {})
        vocab_size = property(lambda self: 50257)
        eod = property(lambda self: 0)
        pad = property(lambda self: 1)

    cache = tempfile.mkdtemp(prefix="gpt-")

    def make():
        cfg = GPTDatasetConfig(random_seed=epoch + 1, sequence_length=2048, blend=([str(Path(path, "megatron", "tokens"))], None),
                               split="100,0,0", tokenizer=Tokenizer(), reset_position_ids=False, reset_attention_mask=False,
                               eod_mask_loss=False, path_to_cache=cache, create_attention_mask=False)
        train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [None, None, None], lambda: True, cfg).build()
        return torch.utils.data.DataLoader(train, batch_size=batch, num_workers=workers, drop_last=True)

    return touch_loop(make, time_box)


def prepare_formats(images_dir, tokens_dir):
    """The images as WebDataset tars and the tokens as a Megatron indexed
    dataset, from datasets.py's Parquet, each by its project's writer."""
    import numpy as np
    import pyarrow.parquet as pq

    images, tokens = Path(images_dir), Path(tokens_dir)
    if images.exists() and not (images / "wds" / ".complete").exists():
        import webdataset as wds

        (images / "wds").mkdir(exist_ok=True)
        with wds.ShardWriter(str(images / "wds" / "shards-%06d.tar"), maxsize=64 << 20, verbose=0) as w:
            for part in sorted((images / "parquet").glob("*.parquet")):
                for rb in pq.ParquetFile(part).iter_batches(batch_size=256):
                    for row in rb.to_pylist():
                        w.write({"__key__": f"{row['id']:09d}", "jpg": row["image"], "cls": row["label"]})
        (images / "wds" / ".complete").write_text("done")
    if tokens.exists() and not (tokens / "megatron" / ".complete").exists():
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

        (tokens / "megatron").mkdir(exist_ok=True)
        b = IndexedDatasetBuilder(str(tokens / "megatron" / "tokens.bin"), dtype=np.int32)
        for part in sorted((tokens / "parquet").glob("*.parquet")):
            for rb in pq.ParquetFile(part).iter_batches(batch_size=1024, columns=["tokens"]):
                col = rb.column(0)
                flat = col.values.to_numpy() if hasattr(col, "values") else col.flatten().to_numpy()
                width = len(flat) // len(col)
                for row in flat.reshape(len(col), width):
                    b.add_item(torch.from_numpy(row))
                    b.end_document()
        b.finalize(str(tokens / "megatron" / "tokens.idx"))
        (tokens / "megatron" / ".complete").write_text("done")
    return {"ok": True}


READERS = {"read-wds": read_wds, "decode-wds": decode_wds, "decode-limit": decode_limit, "read-megatron": read_megatron, "read-gpt": read_gpt,
           "read-mosaic": read_mosaic, "read-lance": read_lance, "resume-mosaic": resume_mosaic, "read-litdata": read_litdata,
           "resume-litdata": resume_litdata, "read-ray": read_ray, "read-tdu": read_tdu, "decode-mosaic": decode_mosaic,
           "decode-litdata": decode_litdata, "decode-shardfeed": decode_shardfeed,
           "decode-user-limit": decode_user_limit}


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "prepare-formats":
        print(json.dumps(prepare_formats(sys.argv[2], sys.argv[3])))
        return
    fn = READERS.get(sys.argv[1]) if len(sys.argv) in (7, 8) else None
    if fn is None:
        raise SystemExit(__doc__)
    knobs = json.loads(sys.argv[7]) if len(sys.argv) == 8 else {}
    print(json.dumps(fn(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), knobs)))


if __name__ == "__main__":
    main()
