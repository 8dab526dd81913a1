"""Arrow record batches to dicts of numpy arrays or torch tensors.

Fixed-width columns become arrays without a loop per sample, viewing the
Arrow buffers where the layout allows (no nulls, byte-sized values): ints,
floats, float16, and fixed-size lists of them (tokens, tensors), reshaped to
(rows, *shape) with the shape an MDS ndarray column records. Booleans are
unpacked from bits. A numeric or boolean column arrives as an array in
every batch, nulls or not: a batch's nulls are filled (NaN for floats, 0
for integers, False for booleans, or the dataset's fill_null), so that a
column's type is the dataset's, never the batch's. Strings become lists of
str; binaries lists of bytes, or with binary_as="array" lists of uint8 arrays
viewing the batch's buffer (no copy: what torchvision.io.decode_jpeg
takes, and io.BytesIO too); variable-length lists of numbers or booleans
become lists of arrays in every batch (None for a null row, fill for a null
value); anything else (structs, maps, nested lists, lists of strings)
becomes Python values, None for a null.
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any, Callable, Literal, Mapping, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import ShardfeedError

log = logging.getLogger("shardfeed")

FillNull = Union[float, int, bool, Mapping[str, Union[float, int, bool]], None]
"""What nulls of numeric and boolean columns become: one value for every
column, a value per column name, or None for the defaults (NaN, 0, False)."""

BinaryAs = Literal["bytes", "array"]
"""What a value of a binary column becomes: bytes (a copy), or a uint8
array viewing the batch (a tensor with output="torch"; no copy)."""
BINARY_AS = ("bytes", "array")


def _default_fill(t: pa.DataType) -> float | int | bool:
    if pa.types.is_floating(t):
        return math.nan
    if pa.types.is_boolean(t):
        return False
    return 0


def _fitted(name: str, fill: float | int | bool, t: pa.DataType) -> float | int | bool:
    """fill as a value of type t, checked when the column's converter is
    made (the first batch), not at its first null mid-epoch: 0 and 1 fill a
    boolean column as False and True; a value no value of t can be is
    refused, naming the column."""
    if pa.types.is_boolean(t) and not isinstance(fill, bool) and isinstance(fill, (int, float)) and fill in (0, 1):
        return bool(fill)
    try:
        got = pa.scalar(fill, type=t).as_py()
        if pa.types.is_integer(t) and got != fill:  # pyarrow truncates 0.5 to 0
            raise TypeError(f"{fill!r} is not an integer")
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
        raise ShardfeedError(f"fill_null={fill!r} cannot fill column {name!r} of type {t} ({e}): give fill_null a dict by column, "
                             f"e.g. fill_null={{{name!r}: ...}}, or leave the column out of it for its default") from None
    return fill


def fill_for(fill: FillNull, name: str) -> float | int | bool | None:
    """The fill of column name: its own, the one for all (not for the
    _shardfeed_ columns, which hold no null), or None."""
    if isinstance(fill, Mapping):
        return fill.get(name)
    return None if name.startswith("_shardfeed_") else fill


_noted: set[str] = set()


def _note_nulls(name: str, fill: float | int | bool) -> None:
    if name not in _noted:
        _noted.add(name)
        log.info("column %s has nulls, delivered as %r (FeedDataset(fill_null=...) chooses the value)", name, fill)


def _leaf(t: pa.DataType) -> pa.DataType:
    while pa.types.is_fixed_size_list(t):
        t = t.value_type
    return t


def _flatten(value: Any, dims: list[int], fill: float | int | bool) -> list[Any]:
    """A fixed-size list's value (lists of sizes dims, outside in) as its
    prod(dims) leaves, a null at any level filled."""
    if not dims:
        return [fill if value is None else value]
    if value is None:
        return [fill] * int(np.prod(dims))
    out: list[Any] = []
    for x in value:
        out.extend(_flatten(x, dims[1:], fill))
    return out


def _filled_fixed(col: pa.Array, dims: list[int], shape: tuple[int, ...], fill: float | int | bool) -> np.ndarray:
    """A fixed-size list column with nulls (rows or values) as one array of
    its leaf type, the nulls filled (a batch with nulls is the rare one: a
    loop over its rows is fine)."""
    dtype = _leaf(col.type).to_pandas_dtype()
    flat = [x for value in col.to_pylist() for x in _flatten(value, dims, fill)]
    return np.asarray(flat, dtype=dtype).reshape((len(col), *shape))


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


def _flat_fixed(col: pa.Array, dims: list[int]) -> np.ndarray | None:
    """The values of col, a (nested) fixed-size list of primitives whose
    list sizes from the outside in are dims, as one flat array; None if
    values are null at some level."""
    values = col
    for size in dims:
        if values.null_count:
            return None
        # The child sliced to this array's rows: flatten() would do the
        # same, a hundred times slower (it goes through a compute kernel).
        values = values.values.slice(values.offset * size, len(values) * size)
    if values.null_count:
        return None
    # Booleans are bits in Arrow: unpacked, so never a view.
    out: np.ndarray = values.to_numpy(zero_copy_only=not pa.types.is_boolean(values.type))
    return out


def _fixed_dims(t: pa.DataType) -> list[int] | None:
    """The list sizes of a (nested) fixed-size list of ints, floats or
    booleans (a lerobot window's KEY_is_pad) from the outside in; None for
    any other type."""
    dims = []
    while pa.types.is_fixed_size_list(t):
        dims.append(t.list_size)
        t = t.value_type
    if dims and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        return dims
    return None


ColumnConverter = Callable[[pa.Array], Any]


class Ragged:
    """Variable-sized values of a column, one per row, as one array of the
    values and the rows' bounds in it: made into a list of arrays (numpy
    output) or of tensors (torch output, by one split) when the batch is
    delivered, not value by value (a batch of 512 packed rows spent more
    on its two ragged columns' slices than on the rest of the batch)."""

    __slots__ = ("values", "bounds", "valid")

    def __init__(self, values: np.ndarray, bounds: list[int], valid: np.ndarray | None):
        self.values, self.bounds, self.valid = values, bounds, valid

    def arrays(self) -> list[np.ndarray | None]:
        v, b = self.values, self.bounds
        out: list[np.ndarray | None] = [v[b[i]:b[i + 1]] for i in range(len(b) - 1)]
        return self._nulls(out)

    def tensors(self) -> list[Any]:
        import torch

        b = self.bounds
        if len(b) < 2:
            return []
        lengths = [b[i + 1] - b[i] for i in range(len(b) - 1)]
        values = torch.from_numpy(self.values[b[0]:b[-1]])
        return self._nulls(list(torch.split(values, lengths)))

    def _nulls(self, out: list[Any]) -> list[Any]:
        """out with None where the column is null."""
        if self.valid is None:
            return out
        return [v if ok else None for v, ok in zip(out, self.valid)]


def _validity(col: pa.Array) -> np.ndarray | None:
    """Each row's validity, or None if no row is null."""
    return col.is_valid().to_numpy(zero_copy_only=False) if col.null_count else None


def _generic(col: pa.Array) -> Any:
    """Anything without a converter of its own (strings, binaries, structs,
    maps, nested lists, nulls) as Python values, None for a null."""
    return col.to_pylist()


def _is_ragged(t: pa.DataType) -> bool:
    """A variable-length list of numbers or booleans."""
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    inner = t.value_type
    return bool(pa.types.is_integer(inner) or pa.types.is_floating(inner) or pa.types.is_boolean(inner))


def _ragged(name: str, fill: float | int | bool) -> ColumnConverter:
    """A variable-length list of numbers as Ragged (a list of arrays, or of
    tensors), whatever the batch: a null row is None, a null value inside a
    row is fill, so that a batch with a null has the type of one without."""
    def ragged(col: pa.Array) -> Ragged:
        # The child as it is, read at the rows' offsets (a view where the
        # layout allows; flatten() would go through a compute kernel).
        child = col.values
        if child.null_count:
            _note_nulls(name, fill)
            child = pc.fill_null(child, pa.scalar(fill, type=child.type))
        offsets = col.offsets.to_numpy()
        return Ragged(child.to_numpy(zero_copy_only=False), offsets.tolist(), _validity(col))
    return ragged


def _uint8(buf: pa.Buffer | None) -> np.ndarray:
    """A buffer's bytes as a uint8 array viewing them (none: empty)."""
    return np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.empty(0, dtype=np.uint8)


def _nulls_as_none(col: pa.Array, values: Any) -> list[Any]:
    """values, one per row of col, with None where col is null."""
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    return [v if ok else None for v, ok in zip(values, valid)]


def _binary_arrays(col: pa.Array) -> Ragged:
    """Each value of a binary column as a uint8 array viewing its data
    buffer (None where null): no bytes copied, so the values keep the
    batch (and its shared-memory slot) alive as a tensor does."""
    large = pa.types.is_large_binary(col.type)
    _, offsets_buf, data_buf = col.buffers()[:3]
    n = len(col)
    offsets = np.frombuffer(offsets_buf, dtype=np.int64 if large else np.int32, count=col.offset + n + 1)[col.offset:]
    return Ragged(_uint8(data_buf), offsets.tolist(), _validity(col))


def _fixed_binary_array(col: pa.Array) -> Any:
    """A fixed-size binary column without nulls as one (rows, width) uint8
    array viewing its data buffer; with nulls, a list as _binary_arrays."""
    width = col.type.byte_width
    rows = _uint8(col.buffers()[1])[col.offset * width:(col.offset + len(col)) * width].reshape(len(col), width)
    return _nulls_as_none(col, rows) if col.null_count else rows


def column_converter(field: pa.Field, fill: float | int | bool | None = None, binary_as: BinaryAs = "bytes") -> ColumnConverter:
    """What turns a column of field into numpy (or a list where values vary
    in size), worked out once per field rather than once per batch. A
    numeric or boolean column (or fixed-size list of numbers) is an array
    of one dtype whatever the batch: nulls become fill (default NaN for
    floats, 0 for integers, False for booleans). Binary columns are bytes,
    or with binary_as="array" uint8 arrays viewing the batch."""
    t = field.type
    name = field.name
    if binary_as == "array":
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return _binary_arrays
        if pa.types.is_fixed_size_binary(t):
            return _fixed_binary_array
    dims = _fixed_dims(t)
    if dims is not None:
        shape = _shape(field)
        if shape is None or int(np.prod(shape)) != dims[0] or len(dims) > 1:
            shape = tuple(dims)
        leaf_fill = _default_fill(_leaf(t)) if fill is None else _fitted(name, fill, _leaf(t))

        def fixed(col: pa.Array) -> Any:
            values = _flat_fixed(col, dims)
            if values is None:
                _note_nulls(name, leaf_fill)
                return _filled_fixed(col, dims, shape, leaf_fill)
            return values.reshape((len(col), *shape))
        return fixed
    if _is_ragged(t):
        return _ragged(name, _default_fill(t.value_type) if fill is None else _fitted(name, fill, t.value_type))
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        value = _default_fill(t) if fill is None else _fitted(name, fill, t)
        copy = pa.types.is_boolean(t)  # bits: unpacked, so never a view

        def numeric(col: pa.Array) -> Any:
            if col.null_count:
                _note_nulls(name, value)
                col = pc.fill_null(col, pa.scalar(value, type=t))
            return col.to_numpy(zero_copy_only=not copy)
        return numeric
    return _generic


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


def _check_names(names: list[str], columns: list[str] | None) -> None:
    """Refuse columns a batch does not have, naming the ones it has."""
    if columns is None:
        return
    missing = [c for c in columns if c not in names]
    if missing:
        have = ", ".join(n for n in names if not n.startswith("_shardfeed_"))
        raise ValueError(f"columns={columns!r}: the dataset has no column {', '.join(map(repr, missing))}; its columns are {have}")


Output = Literal["torch", "numpy", "arrow"]
"""What a batch is: a dict of torch tensors, a dict of numpy arrays, or a
pyarrow.RecordBatch."""


class Converter:
    """convert() for the batches of one schema: which columns to keep and
    what each becomes are worked out once, not for every batch (at small
    batches that Python was a good part of the loop's time per batch)."""

    def __init__(self, schema: pa.Schema, output: Output, columns: list[str] | None, fill: FillNull = None,
                 binary_as: BinaryAs = "bytes"):
        _check_names(schema.names, columns)
        self.schema, self.output, self.columns, self.fill, self.binary_as = schema, output, columns, fill, binary_as
        self._keep = [i for i, f in enumerate(schema) if columns is None or f.name in columns or f.name.startswith("_shardfeed_")]
        self._columns = [(i, schema.field(i).name, column_converter(schema.field(i), fill_for(fill, schema.field(i).name), binary_as))
                         for i in self._keep]
        self._all = len(self._keep) == len(schema)

    def fits(self, batch: pa.RecordBatch) -> bool:
        """Whether batch has this converter's schema."""
        return bool(batch.schema.equals(self.schema))

    def to_numpy(self, batch: pa.RecordBatch) -> dict[str, Any]:
        """The kept columns, ragged ones (Ragged) not yet split by row."""
        return {name: conv(batch.column(i)) for i, name, conv in self._columns}

    def __call__(self, batch: pa.RecordBatch) -> Any:
        """batch as output says, with only the columns kept."""
        if self.output == "arrow":
            return batch if self._all else batch.select(self._keep)
        out = self.to_numpy(batch)
        if self.output == "numpy":
            return Batch(_arrays(out))
        return Batch(_to_torch(out))


def owning(batch: Any) -> Any:
    """batch with each tensor in it (a column's, or in a column's list)
    cloned into memory of its own. For a dataset of the user's in a
    DataLoader worker, whose batches are views of the shared memory: torch
    sends a tensor the worker yields by moving its storage into new shared
    memory, which frees the old one, and an array the user's code took of
    the tensor (t.numpy()) would then read the slot after the sidecar had
    written the next batch there, or crash once it was unmapped. numpy
    arrays and Arrow buffers keep their slot alive: they are left views."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not isinstance(batch, dict):
        return batch

    def own(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return v.clone()
        if isinstance(v, list) and any(isinstance(x, torch.Tensor) for x in v):
            return [x.clone() if isinstance(x, torch.Tensor) else x for x in v]
        return v

    return type(batch)({k: own(v) for k, v in batch.items()})


def project(batch: pa.RecordBatch, columns: list[str] | None) -> pa.RecordBatch:
    """batch with only columns (and the _shardfeed_ ones): what a transform
    is given, so that the columns it adds are delivered too."""
    if columns is None:
        return batch
    _check_names(batch.schema.names, columns)
    keep = [i for i, f in enumerate(batch.schema) if f.name in columns or f.name.startswith("_shardfeed_")]
    return batch if len(keep) == batch.num_columns else batch.select(keep)


_torch_warned = False


def _to_torch(values: dict[str, Any]) -> dict[str, Any]:
    global _torch_warned
    if not _torch_warned:
        _torch_warned = True
        import torch

        with warnings.catch_warnings():
            # The Arrow buffers are read-only views of the batch; torch
            # warns that it cannot mark a tensor read-only, once per
            # process: here, on a read-only array of our own, where it is
            # silenced (a filter per batch costs more than the rest of
            # making its tensors, and the first batch may have no such view).
            warnings.simplefilter("ignore", UserWarning)
            torch.from_numpy(np.frombuffer(b"\0", dtype=np.uint8))
    return _tensors(values)


def _arrays(values: dict[str, Any]) -> dict[str, Any]:
    """values with each Ragged column split into a list of arrays."""
    return {name: v.arrays() if isinstance(v, Ragged) else v for name, v in values.items()}


def _tensors(values: dict[str, Any]) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, np.ndarray):
            out[name] = torch.from_numpy(value)
        elif isinstance(value, Ragged):
            out[name] = value.tensors()
        elif isinstance(value, list) and isinstance(next((v for v in value if v is not None), None), np.ndarray):
            out[name] = [torch.from_numpy(v) if v is not None else None for v in value]
        else:
            out[name] = value
    return out


def to_torch(batch: pa.RecordBatch, columns: list[str] | None = None) -> dict[str, Any]:
    """The batch as tensors, views of the Arrow buffers where the layout allows."""
    return _to_torch(Converter(batch.schema, "numpy", columns).to_numpy(batch))


def convert(batch: pa.RecordBatch, output: Output, columns: list[str] | None) -> Any:
    """A batch as output says, with only columns (and the _shardfeed_ ones).

    Args:
        batch: the batch as the sidecar sent it.
        output: what to make of it.
        columns: the dataset columns to keep; None: all.
    """
    return Converter(batch.schema, output, columns)(batch)


def converter(last: Converter | None, batch: pa.RecordBatch, output: Output, columns: list[str] | None,
              fill: FillNull = None, binary_as: BinaryAs = "bytes") -> Converter:
    """last if it converts batch as asked, else a new converter for it."""
    if (last is not None and last.output == output and last.columns == columns and last.fill == fill
            and last.binary_as == binary_as and last.fits(batch)):
        return last
    return Converter(batch.schema, output, columns, fill, binary_as)


_warmed = False


def warm() -> None:
    """Make a small batch of every kind of column once in this process,
    so that what converting imports on first use (pyarrow imports pandas,
    where installed, the first time it makes an array: 0.2–0.4 s of CPU)
    is imported before DataLoader workers fork: each would import it again
    at every epoch's start (it is the training process's, with workers, that
    never converts a batch itself when a dataset of the user's reads it)."""
    global _warmed
    if _warmed:
        return
    _warmed = True
    ints = pa.array([1, None], pa.int64())
    batch = pa.record_batch({
        "i": pa.array([1, 2], pa.int32()), "n": ints, "f": pa.array([0.5, None], pa.float32()), "b": pa.array([True, None]),
        "s": pa.array(["a", None]), "x": pa.array([b"a", None], pa.binary()),
        "t": pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.int32()), 2),
        "l": pa.array([[1], None], pa.list_(pa.int32())),
    })
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for output in ("numpy", "torch"):
            for binary_as in ("bytes", "array"):
                try:
                    Converter(batch.schema, output, None, None, binary_as)(batch)
                except ImportError:  # output="torch" without torch: workers are torch's, so never here
                    pass
