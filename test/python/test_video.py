"""shardfeed.video.decode_clips refuses times that do not fit its clips
before it needs torchcodec (the clips themselves are decoded against
LeRobot's frames by sidecar/format/lerobot's TestClipsDecodeWithTorchcodec,
in LeRobot's venv, which has torchcodec)."""

from __future__ import annotations

import pytest
import torch

from shardfeed.video import decode_clips


@pytest.mark.parametrize(
    ("clips", "times"),
    [
        ([b"a", b"b"], [0.0]),  # one time for two clips
        ([b"a"], [[0.0, 0.1], [0.2, 0.3]]),  # two rows for one clip
        ([b"a"], torch.zeros(1, 2, 3)),  # a time per what?
    ],
)
def test_times_that_do_not_fit_the_clips_are_refused(clips: list[bytes], times: object) -> None:
    with pytest.raises(ValueError, match="give one time per clip, or one row per clip"):
        decode_clips(clips, times)  # type: ignore[arg-type]  # the wrong shapes are the point
