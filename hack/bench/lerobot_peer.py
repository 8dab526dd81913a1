"""The video benchmark's LeRobot side, in LeRobot's venv (bin/venv-lerobot,
CPython 3.13: make tools-lerobot): the data set written by LeRobot's own
writer, and LeRobotDataset read in a DataLoader as its users read it.

  bin/venv-lerobot/bin/python hack/bench/lerobot_peer.py write OUT EPISODES FRAMES HEIGHT WIDTH
  bin/venv-lerobot/bin/python hack/bench/lerobot_peer.py read-pyav|read-torchcodec|read-lancedb ROOT WORKERS BATCH EPOCH TIME_BOX
  bin/venv-lerobot/bin/python hack/bench/lerobot_peer.py convert ROOT OUT

write: EPISODES episodes of FRAMES frames at 30 fps, two cameras of
HEIGHT x WIDTH (AV1, LeRobot's default encoder settings), a float32 state
and action (test/oracle/lerobot_datasets.py's generator); prints the data
set's summary as JSON.

read-*: one shuffled epoch of LeRobotDataset (its video backend pyav or
torchcodec, frames as uint8 as the sidecar serves them) in a DataLoader
of WORKERS workers, through touch.py's loop; prints its result as JSON.
read-lancedb reads ROOT in LeRobot's Lance layout with lerobot-lancedb's
LanceDBDataset, as its README says to: batched reads (its __getitems__),
lance_mp_context() for the workers.

convert: the data set in ROOT converted to LeRobot's Lance layout in OUT
by lerobot-lancedb's converter.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# This folder's datasets.py would hide Hugging Face's datasets, which
# LeRobot imports: touch.py is loaded by its path instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT / "test" / "oracle"))

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("SVT_LOG", "1")
os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="lerobot-bench-hf-"))

_spec = importlib.util.spec_from_file_location("touch", HERE / "touch.py")
assert _spec is not None and _spec.loader is not None
_touch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_touch)
touch_loop = _touch.touch_loop


def write(out: str, episodes: int, frames: int, height: int, width: int) -> dict:
    from lerobot_datasets import Camera, Spec
    from lerobot_datasets import write as write_dataset

    spec = Spec(name="bench", fps=30, lengths=[frames] * episodes,
                cameras=[Camera("front", height, width), Camera("wrist", height, width)],
                tasks=["pick", "place"])
    return write_dataset(spec, Path(out), seed=1, vcodec=None, threads=None)


def read(backend: str, root: str, workers: int, batch: int, epoch: int, time_box: float) -> dict:
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    def make():
        ds = LeRobotDataset("shardfeed/bench", root=root, video_backend=backend, return_uint8=True)
        g = torch.Generator()
        g.manual_seed(epoch + 1)
        return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, generator=g, num_workers=workers,
                                           persistent_workers=False)

    return touch_loop(make, time_box or None)


def read_lancedb(root: str, workers: int, batch: int, epoch: int, time_box: float) -> dict:
    import torch
    from lerobot_lancedb import LanceDBDataset, lance_mp_context

    def make():
        ds = LanceDBDataset(root=root, return_uint8=True)
        g = torch.Generator()
        g.manual_seed(epoch + 1)
        return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, generator=g, num_workers=workers,
                                           multiprocessing_context=lance_mp_context() if workers else None, persistent_workers=False)

    return touch_loop(make, time_box or None)


def convert(root: str, out: str) -> dict:
    from lerobot_lancedb.convert import convert as to_lance

    to_lance(Path(out), root=Path(root))
    return {"out": out}


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "convert":
        print(json.dumps(convert(args[1], args[2])))
        return
    if len(args) == 6 and args[0] == "read-lancedb":
        print(json.dumps(read_lancedb(args[1], int(args[2]), int(args[3]), int(args[4]), float(args[5]))))
        return
    if len(args) == 6 and args[0] == "write":
        print(json.dumps(write(args[1], *map(int, args[2:]))))
    elif len(args) == 6 and args[0] in ("read-pyav", "read-torchcodec"):
        print(json.dumps(read(args[0].removeprefix("read-"), args[1], int(args[2]), int(args[3]), int(args[4]), float(args[5]))))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
