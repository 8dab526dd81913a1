"""Decodes the clips shardfeed serves (a lerobot stream with cameras:
Clips) with the Python client's decode_clips, torchcodec on the CPU, and
compares them with the frames the sidecar decodes (cameras: Frames, which
equal LeRobotDataset's): run by sidecar/format/lerobot's
TestClipsDecodeWithTorchcodec.

    PYTHONPATH=clients/python/src bin/venv-lerobot/bin/python test/oracle/lerobot_clips.py DIR

DIR/cases.json lists, per case and camera, the clips' files, their times
and the frames' file (uint8, rows × slots × 3 × H × W). Prints the largest
difference in levels and fails above the allowed one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from shardfeed.video import decode_clips


def main() -> int:
    root = Path(sys.argv[1])
    spec = json.loads((root / "cases.json").read_text())
    worst = 0
    for case in spec["cases"]:
        clips = [(root / f).read_bytes() for f in case["clips"]]
        times = case["times"]
        shape = case["shape"]
        want = np.frombuffer((root / case["frames"]).read_bytes(), dtype=np.uint8).reshape(len(clips), -1, *shape)
        got = decode_clips(clips, times).numpy()
        if got.ndim == 4:
            got = got[:, None]
        if got.shape != want.shape:
            print(f"{case['name']}: decoded {got.shape}, the sidecar's frames are {want.shape}", file=sys.stderr)
            return 1
        d = int(np.abs(got.astype(int) - want.astype(int)).max())
        worst = max(worst, d)
        if d > spec["allowed"]:
            print(f"{case['name']}: torchcodec's decode of the clips differs from the sidecar's frames by up to {d} levels", file=sys.stderr)
            return 1
    print(json.dumps({"largest_difference": worst, "cases": len(spec["cases"])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
