"""Arrow record batches to dicts of numpy arrays or torch tensors.

Fixed-width columns become arrays without a loop per sample, viewing the
Arrow buffers where the layout allows (no nulls, byte-sized values): ints,
floats, float16, and fixed-size lists of them (tokens, tensors), reshaped to
(rows, *shape) with the shape an MDS ndarray column records. Booleans are
unpacked from bits. Strings and binaries become lists of str and bytes;
variable-length lists become lists of arrays; anything else (structs, maps)
becomes Python values.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import pyarrow as pa

SHAPE_KEY = b"shardfeed.shape"



def _shape(field: pa.Field) -> tuple[int, ...] | None:
    meta = field.metadata or {}
    raw = meta.get(SHAPE_KEY)
    if not raw:
        return None
    try:
        return tuple(int(d) for d in raw.decode().split(","))
    except ValueError:
        return None


def _flat_fixed(col: pa.Array) -> tuple[np.ndarray, list[int]] | None:
    """The values of a (nested) fixed-size list of primitives as one flat
    array, and the list sizes from the outside in; None if not that shape."""
    dims = []
    values = col
    while pa.types.is_fixed_size_list(values.type):
        if values.null_count:
            return None
        size = values.type.list_size
        dims.append(size)
        # The child sliced to this array's rows: flatten() would do the
        # same, a hundred times slower (it goes through a compute kernel).
        values = values.values.slice(values.offset * size, len(values) * size)
    if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)) or values.null_count:
        return None
    return values.to_numpy(zero_copy_only=True), dims


def column_to_numpy(field: pa.Field, col: pa.Array) -> Any:
    """One column as numpy (or a list where values vary in size)."""
    t = col.type
    if pa.types.is_fixed_size_list(t):
        flat = _flat_fixed(col)
        if flat is not None:
            values, dims = flat
            shape = _shape(field)
            if shape is None or int(np.prod(shape)) != dims[0] or len(dims) > 1:
                shape = tuple(dims)
            return values.reshape((len(col), *shape))
    if (pa.types.is_integer(t) or pa.types.is_floating(t)) and not col.null_count:
        return col.to_numpy(zero_copy_only=True)
    if pa.types.is_boolean(t) and not col.null_count:
        return col.to_numpy(zero_copy_only=False)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = t.value_type
        if (pa.types.is_integer(inner) or pa.types.is_floating(inner)) and not col.null_count:
            values = col.flatten().to_numpy(zero_copy_only=False)
            offsets = col.offsets.to_numpy()
            offsets = offsets - offsets[0]
            return [values[offsets[i]:offsets[i + 1]] for i in range(len(col))]
    return col.to_pylist()


class Batch(dict):  # type: ignore[type-arg]
    """One batch of a rank: a dict of its columns. The sidecar sized it
    (the TrainingDataset's globalBatchSize); a DataLoader must not batch
    batches again, so collating a list of them is an error that says so."""


def _refuse_collate(batch: Any, *, collate_fn_map: Any = None) -> Any:
    raise TypeError(
        "a DataLoader with a batch_size is stacking shardfeed batches: FeedDataset yields whole batches, sized by the "
        "TrainingDataset's globalBatchSize; give the DataLoader batch_size=None (shardfeed.FeedLoader does), and split "
        "a batch with FeedLoader(micro_batch_size=...) if you need smaller ones")


def _register_collate() -> None:
    try:
        from torch.utils.data._utils.collate import default_collate_fn_map
    except ImportError:  # no torch, or a torch without the map: nothing batches again
        return
    default_collate_fn_map[Batch] = _refuse_collate


_register_collate()


def check_columns(batch: pa.RecordBatch, columns: list[str] | None) -> None:
    """Refuse columns the batch does not have, naming the ones it has."""
    if columns is None:
        return
    names = batch.schema.names
    missing = [c for c in columns if c not in names]
    if missing:
        have = ", ".join(n for n in names if not n.startswith("_shardfeed_"))
        raise ValueError(f"columns={columns!r}: the dataset has no column {', '.join(map(repr, missing))}; its columns are {have}")


def to_numpy(batch: pa.RecordBatch, columns: list[str] | None = None) -> dict[str, Any]:
    out = {}
    for i, field in enumerate(batch.schema):
        if columns is not None and field.name not in columns and not field.name.startswith("_shardfeed_"):
            continue
        out[field.name] = column_to_numpy(field, batch.column(i))
    return out


def to_torch(batch: pa.RecordBatch, columns: list[str] | None = None) -> dict[str, Any]:
    """The batch as tensors, views of the Arrow buffers where the layout allows."""
    import torch

    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        # The Arrow buffers are read-only views of this batch alone; torch
        # warns that it cannot mark the tensor read-only.
        warnings.simplefilter("ignore", UserWarning)
        for name, value in to_numpy(batch, columns).items():
            if isinstance(value, np.ndarray):
                out[name] = torch.from_numpy(value)
            elif isinstance(value, list) and value and isinstance(value[0], np.ndarray):
                out[name] = [torch.from_numpy(v) for v in value]
            else:
                out[name] = value
    return out


Output = Literal["torch", "numpy", "arrow"]
"""What a batch is: a dict of torch tensors, a dict of numpy arrays, or a
pyarrow.RecordBatch."""


def convert(batch: pa.RecordBatch, output: Output, columns: list[str] | None) -> Any:
    """A batch as output says, with only columns (and the _shardfeed_ ones).

    Args:
        batch: the batch as the sidecar sent it.
        output: what to make of it.
        columns: the dataset columns to keep; None: all.
    """
    check_columns(batch, columns)
    if output == "arrow":
        if columns is None:
            return batch
        keep = [n for n in batch.schema.names if n in columns or n.startswith("_shardfeed_")]
        return batch.select(keep)
    if output == "numpy":
        return Batch(to_numpy(batch, columns))
    return Batch(to_torch(batch, columns))
