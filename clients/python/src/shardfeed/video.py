"""Decoding the clips a lerobot stream serves with ``cameras: Clips``.

Such a stream hands each camera over compressed, for the trainer to
decode where it likes (its GPU's decoder): per sample a clip, a small MP4
of the frames its window shows from the keyframe they decode from, and
``KEY_time``, the second each frame is shown at in it. ``decode_clips``
decodes a batch of them with torchcodec (``pip install torchcodec``):

    frames = decode_clips(batch["observation.images.top"],
                          batch["observation.images.top_time"], device="cuda")

gives uint8 ``(B, T, 3, H, W)`` (``(B, 3, H, W)`` where the camera has no
window), the frames the sidecar would have decoded with ``cameras:
Frames`` (docs/formats.md, LeRobot).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["decode_clips"]


def decode_clips(clips: Sequence[bytes], times: torch.Tensor | Sequence[float] | Sequence[Sequence[float]],
                 device: str | torch.device = "cpu") -> torch.Tensor:
    """Each clip's frames shown at its times, decoded by torchcodec on
    device: uint8 (B, T, 3, H, W), or (B, 3, H, W) where times has one per
    clip."""
    at = torch.as_tensor(times, dtype=torch.float64)
    windowed = at.dim() == 2
    if at.dim() == 1:
        at = at[:, None]
    if at.dim() != 2 or at.shape[0] != len(clips):
        raise ValueError(f"{len(clips)} clips and times of shape {tuple(at.shape)}: give one time per clip, or one row per clip")
    try:
        decoders: Any = importlib.import_module("torchcodec.decoders")
    except ImportError as e:
        raise ImportError("decode_clips decodes with torchcodec: pip install torchcodec (its GPU build to decode on a GPU)") from e
    out = []
    for clip, row in zip(clips, at.tolist()):
        # The exact seek mode scans the clip's few frames: its frames are
        # where their times say, whatever the codec reorders.
        decoder = decoders.VideoDecoder(bytes(clip), device=str(device), seek_mode="exact")
        out.append(decoder.get_frames_played_at(row).data)
    frames = torch.stack(out) if out else torch.empty((0, at.shape[1], 3, 0, 0), dtype=torch.uint8)
    return frames if windowed else frames[:, 0]
