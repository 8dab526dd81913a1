"""shardfeed: read a shardfeed sidecar's ready batches in PyTorch.

    dataset = shardfeed.FeedDataset()          # $SHARDFEED_SOCKET, rank and world from torch.distributed or torchrun
    dataset = shardfeed.FeedDataset(device_mesh=mesh)  # tensor/pipeline parallel: batches by the mesh's dp coordinates
    loader = shardfeed.FeedLoader(dataset, num_workers=2)
    for batch in loader: ...
    loader.state_dict(); loader.load_state_dict(d); loader.commit()
"""

from ._client import SOCKET_ENV, Client
from ._stream import BatchStream
from ._convert import Output
from ._stats import Stats
from .dataset import FeedDataset, data_parallel_coordinates
from .errors import ShardfeedError, SidecarError, SidecarNotReady, StreamCut, TransformError
from .loader import FeedLoader

__all__ = ["SOCKET_ENV", "BatchStream", "Client", "FeedDataset", "FeedLoader", "Output", "ShardfeedError", "SidecarError",
           "SidecarNotReady", "Stats", "StreamCut", "TransformError", "data_parallel_coordinates"]
__version__ = "0.1.0"
