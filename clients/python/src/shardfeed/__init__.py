"""shardfeed: read a shardfeed sidecar's ready batches in PyTorch.

    dataset = shardfeed.FeedDataset()          # $SHARDFEED_SOCKET, rank and world from torch.distributed or torchrun
    dataset = shardfeed.FeedDataset(device_mesh=mesh)  # tensor/pipeline parallel: batches by the mesh's dp coordinates
    loader = shardfeed.FeedLoader(dataset, num_workers=2)
    for batch in loader: ...
    loader.state_dict(); loader.load_state_dict(d); loader.commit()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._client import SOCKET_ENV, Client
    from ._convert import Output
    from ._stats import Stats
    from ._stream import BatchStream
    from .dataset import FeedDataset, data_parallel_coordinates
    from .errors import ShardfeedError, SidecarError, SidecarNotReady, StreamCut, TransformError
    from .loader import FeedLoader
    from .packing import batch_cu_seqlens
    from .video import decode_clips

# Each name's module, imported on first use (PEP 562): `import shardfeed`
# and the wheel's `shardfeed` command then cost no torch or pyarrow import.
_LAZY = {
    "SOCKET_ENV": "._client", "Client": "._client", "BatchStream": "._stream", "Output": "._convert", "Stats": "._stats",
    "FeedDataset": ".dataset", "data_parallel_coordinates": ".dataset", "FeedLoader": ".loader",
    "ShardfeedError": ".errors", "SidecarError": ".errors", "SidecarNotReady": ".errors", "StreamCut": ".errors",
    "TransformError": ".errors", "index": "._commands", "convert": "._commands", "formats": "._commands", "batch_cu_seqlens": ".packing",
    "decode_clips": ".video",
}

__all__ = ["SOCKET_ENV", "BatchStream", "Client", "FeedDataset", "FeedLoader", "Output", "ShardfeedError", "SidecarError",
           "SidecarNotReady", "Stats", "StreamCut", "TransformError", "batch_cu_seqlens", "convert", "data_parallel_coordinates",
           "decode_clips", "formats", "index"]
# The release this source is (or precedes); an installed wheel says its own
# version, which make dist and the Go binary share.
_BASE_VERSION = "0.1.0"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("shardfeed")
    except PackageNotFoundError:  # a source checkout on PYTHONPATH
        return _BASE_VERSION


__version__ = _version()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shardfeed' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
