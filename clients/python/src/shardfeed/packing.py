"""Packed sequences (spec.packing): what a trainer does with a packed
batch's columns. The sidecar packs; these only reshape its boundaries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def batch_cu_seqlens(batch: Mapping[str, Any], tokens: str = "tokens") -> tuple[Any, int]:
    """The boundaries of every piece of a packed batch flattened to one
    sequence of rows × L tokens, as flash-attention's variable-length
    kernels take them (`cu_seqlens_q`, `cu_seqlens_k`), and the longest
    piece (`max_seqlen`). Each row's padding is a segment of its own, so
    the boundaries cover every token and no piece attends across a
    document or into padding (the loss mask leaves the padding out).

    Returns a torch int32 tensor where the batch holds tensors, else a
    numpy array."""
    rows = batch[tokens]
    n, seq_len = int(rows.shape[0]), int(rows.shape[1])
    per_row: Sequence[Any] = batch["cu_seqlens"]
    bounds = [np.zeros(1, dtype=np.int64)]
    longest = 0
    for r in range(n):
        cu = np.asarray(per_row[r], dtype=np.int64)
        ends = cu[1:]
        if ends.size == 0 or ends[-1] < seq_len:
            ends = np.append(ends, seq_len)  # the padding, a segment of its own
        starts = np.concatenate(([0], ends[:-1]))
        if ends.size:
            longest = max(longest, int((ends - starts).max()))
        bounds.append(ends + r * seq_len)
    out = np.concatenate(bounds).astype(np.int32)
    if hasattr(rows, "device"):  # a torch tensor
        import torch

        return torch.from_numpy(out).to(rows.device), longest
    return out, longest
