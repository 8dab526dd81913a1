"""The LeRobot oracle: datasets written by LeRobot's own writer and what
LeRobot's own reader (LeRobotDataset, delta_timestamps) returns of them,
recorded for shardfeed's lerobot format (sidecar/format/lerobot).

    bin/venv-lerobot/bin/python test/oracle/lerobot_oracle.py record DIR

record writes into DIR:
  - NAME/: each dataset of lerobot_datasets.SPECS, as LeRobot writes it
    (meta/, data/, videos/);
  - CASE.jsonl: for each case (a dataset, delta_timestamps, an episode
    selection), one line per item of LeRobotDataset in its order: index,
    episode_index, frame_index, task, the data keys' values (windows
    flattened) and shapes, the KEY_is_pad masks, and per camera the
    dataset index of the frame each window slot shows (the item's frames
    matched, byte for byte, to the frames of NAME.frames; an image
    feature is a camera here, its float32 values bytes divided by 255);
  - NAME.frames/KEY.u8: every FRAME_STRIDE-th frame of the dataset (dataset
    indexes 0, FRAME_STRIDE, ...) of camera KEY as LeRobot decodes it
    (torchcodec, its default backend; return_uint8): C x H x W bytes each,
    in index order (every frame would be megabytes; which frame each
    window slot shows is recorded for every item);
  - CASE.frames/KEY.u8, for a case of FRAMES: the same frames resized
    and cropped by torchvision as a user's transform does;
  - NAME-lance/, for NAME of LANCE: the dataset converted to LeRobot's
    Lance layout by lerobot-lancedb's converter, and for each case of
    LANCE_CASES its items as lerobot-lancedb's LanceDBDataset reads them
    (checked equal to LeRobotDataset's of NAME, but for the types of
    float64 and int32 features, which LanceDBDataset gives as stored:
    manifest.json's lance_vs_lerobot_dtypes);
  - deltas.jsonl: check_delta_timestamps and get_delta_indices over a
    spread of deltas and frame rates (whole frames, half frames, either
    side of the tolerance);
  - manifest.json: the cases, the datasets, the cameras' shapes (an
    image feature's among them, and listed under images), the versions, and the largest
    difference between the pyav and torchcodec backends' frames.
hack/golden.sh records it (make golden) and checks it (make test-golden:
a fresh recording's answers must be the committed ones).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

# LeRobot writes stats.json from a dict built out of a set of keys: the
# same hash seed on every run keeps its key order, so the same bytes.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("SVT_LOG", "1")
_HF_HOME = None
if "HF_HOME" not in os.environ:
    _HF_HOME = tempfile.mkdtemp(prefix="lerobot-hf-")
    os.environ["HF_HOME"] = _HF_HOME

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lerobot_datasets  # noqa: E402

# The cases: a dataset, its windows (seconds per key) and an episode
# selection (LeRobotDataset's episodes=, "" for all).
CASES = {
    "multicam-windows": (
        "multicam",
        {
            "observation.state": [-0.2, -0.1, 0.0],
            "action": [0.0, 0.1, 0.2, 0.3, 0.4],
            "observation.images.front": [-0.1, 0.0],
            "observation.images.wrist": [0.0, 0.2],
        },
        "",
    ),
    "multicam-plain": ("multicam", {}, ""),
    "fps30-windows": (
        "fps30",
        {"observation.state": [-2 / 30, -1 / 30, 0.0], "action": [0.0, 1 / 30, 0.1, 0.5], "observation.images.front": [-1 / 30, 0.0, 1 / 30]},
        "",
    ),
    "rollover-episodes": (
        "rollover",
        {"action": [-0.1, 0.0, 0.1], "observation.images.wrist": [0.0, 0.1]},
        "1,3,4,5,7",
    ),
    "multicam-resized": ("multicam", {"observation.images.front": [-0.1, 0.0]}, "1,2"),
    "h264-windows": (
        "h264",
        {"observation.state": [-1 / 15, 0.0], "observation.images.front": [-2 / 15, 0.0, 1 / 15], "observation.images.side": [0.0, 0.2]},
        "",
    ),
    "hevc-windows": ("hevc", {"action": [0.0, 0.1], "observation.images.front": [-0.1, 0.0, 0.3]}, ""),
    "images-windows": (
        "images",
        {
            "observation.state": [-0.05, 0.0],
            "observation.joints": [-0.05, 0.0, 0.1],
            "observation.effort": [0.0, 0.05],
            "observation.contacts": [-0.05, 0.0],
            "observation.images.gripper": [-0.1, 0.0, 0.05],
            "observation.images.top": [0.0, 0.15],
        },
        "",
    ),
    "images-resized": ("images", {"observation.images.top": [-0.05, 0.0]}, "1,3"),
}

# The datasets converted to LeRobot's Lance layout by lerobot-lancedb's
# converter (NAME-lance/), and the cases read from them by its
# LanceDBDataset (a copy of LeRobot's own Lance reader): each a case of
# CASES on the converted dataset, whose items must be, and are checked to
# be, LeRobotDataset's of the original.
LANCE = ("multicam", "rollover", "fps30")
LANCE_CASES = {"multicam-lance-windows": "multicam-windows", "multicam-lance-plain": "multicam-plain", "rollover-lance-episodes": "rollover-episodes",
               "fps30-lance-windows": "fps30-windows"}


def same_items(lance: list[dict], lerobot: list[dict]) -> dict:
    """Checks LanceDBDataset's items are LeRobotDataset's but for the
    types of features stored in others than float32 and int64, which
    LanceDBDataset gives as stored and LeRobotDataset as float32 and int64
    (the values then equal once rounded to float32); returns those
    features' types, {key: [LanceDBDataset's, LeRobotDataset's]}."""
    differ: dict = {}
    if len(lance) != len(lerobot):
        raise SystemExit(f"LanceDBDataset has {len(lance)} items, LeRobotDataset {len(lerobot)}")
    for i, (a, b) in enumerate(zip(lance, lerobot)):
        a, b = json.loads(json.dumps(a)), json.loads(json.dumps(b))
        for k, ta in a["dtypes"].items():
            tb = b["dtypes"].get(k)
            if ta == tb:
                continue
            if (ta, tb) not in (("float64", "float32"), ("int32", "int64")):
                raise SystemExit(f"item {i}: {k} is {ta} in LanceDBDataset's, {tb} in LeRobotDataset's")
            differ[k] = [ta, tb]
            cast = np.array(a["values"][k], dtype=np.float32 if tb == "float32" else np.int64).tolist()
            if cast != b["values"][k]:
                raise SystemExit(f"item {i}: {k}'s values differ beyond their types")
            a["values"][k], a["dtypes"][k] = b["values"][k], tb
        if a != b:
            raise SystemExit(f"item {i}: LanceDBDataset's is not LeRobotDataset's")
    return differ

# Cases whose cameras are resized and cropped (spec.streams[].lerobot.frames):
# each recorded frame is torchvision's Resize(resize) then
# CenterCrop((height, width)) of a Pillow image of LeRobot's frame, what a
# user's transform makes of it.
FRAMES = {"multicam-resized": {"resize": 80, "height": 64, "width": 72}, "images-resized": {"resize": 40, "height": 32, "width": 40}}

# The backend each dataset's items and frames are recorded with:
# torchcodec, LeRobot's default, but where it fails. On HEVC from libx265
# (open GOPs: a B-frame follows the keyframe after it in decode order, so
# presentation times are reordered) torchcodec 0.11 in the approximate
# seek mode LeRobot uses returns, from a decoder that has decoded before,
# the frame after the one asked for: LeRobotDataset raises
# FrameTimestampError on windows (manifest.json's backend_failures says
# where). PyAV's backend decodes them right.
BACKENDS = {"hevc": "pyav"}

TOLERANCE_S = 1e-4

# Every FRAME_STRIDE-th frame's pixels are recorded.
FRAME_STRIDE = 8


def frames_of(root: Path, repo_id: str, backend: str) -> dict[str, np.ndarray]:
    """Every frame of each camera (a video's, or an image feature's), by
    dataset index, as LeRobot decodes it, in bytes."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset(repo_id, root=root, video_backend=backend, return_uint8=True)
    out: dict[str, list[np.ndarray]] = {k: [] for k in ds.meta.camera_keys}
    for i in range(len(ds)):
        item = ds[i]
        for k in out:
            out[k].append(as_bytes(item[k].numpy(), k))
    return {k: np.stack(v) for k, v in out.items()}


def as_bytes(a: np.ndarray, key: str) -> np.ndarray:
    """A camera's frames as uint8: a video's are (return_uint8); an image
    feature's are float32 in [0, 1], ToTensor's division of its bytes by
    255, which is checked to be exactly that."""
    if a.dtype == np.uint8:
        return a
    u8 = np.rint(a * 255).astype(np.uint8)
    if a.dtype != np.float32 or not np.array_equal(u8.astype(np.float32) / np.float32(255), a):
        raise SystemExit(f"{key}: LeRobot gave {a.dtype} values that are not bytes divided by 255")
    return u8


def backend(name: str) -> str:
    return BACKENDS.get(name, "torchcodec")


def items(root: Path, repo_id: str, delta: dict, episodes: str, frames: dict[str, np.ndarray], video_backend: str) -> list[dict]:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    sel = [int(e) for e in episodes.split(",")] if episodes else None
    ds = LeRobotDataset(
        repo_id, root=root, episodes=sel, delta_timestamps=delta or None, tolerance_s=TOLERANCE_S, video_backend=video_backend, return_uint8=True
    )
    return lines(ds, delta, frames)


def lance_items(root: Path, delta: dict, episodes: str, frames: dict[str, np.ndarray]) -> list[dict]:
    """items of a dataset in LeRobot's Lance layout, read by
    lerobot-lancedb's LanceDBDataset."""
    from lerobot_lancedb import LanceDBDataset

    sel = [int(e) for e in episodes.split(",")] if episodes else None
    ds = LanceDBDataset(root=str(root), episodes=sel, delta_timestamps=delta or None, tolerance_s=TOLERANCE_S, return_uint8=True)
    return lines(ds, delta, frames)


def lines(ds, delta: dict, frames: dict[str, np.ndarray]) -> list[dict]:
    """Each item of ds as a line of a case's answers."""
    import torch

    # Frames are matched to dataset indexes by their bytes.
    lookup = {k: {f.tobytes(): i for i, f in enumerate(v)} for k, v in frames.items()}
    out = []
    for i in range(len(ds)):
        item = ds[i]
        line: dict = {"values": {}, "shapes": {}, "dtypes": {}, "pads": {}, "frames": {}}
        for k, v in item.items():
            if k in frames:
                a = as_bytes(v.numpy(), k)
                slots = a if k in delta else a[None]
                line["frames"][k] = [lookup[k][s.tobytes()] for s in slots]
            elif k.endswith("_is_pad"):
                line["pads"][k[: -len("_is_pad")]] = [bool(b) for b in v.tolist()]
            elif k == "task":
                line["task"] = v
            elif k in ("index", "episode_index", "frame_index", "task_index"):
                line[k] = int(v.item())
            elif isinstance(v, torch.Tensor):
                a = v.numpy()
                line["shapes"][k] = list(a.shape)
                line["dtypes"][k] = str(v.dtype).removeprefix("torch.")
                line["values"][k] = [float(x) for x in a.reshape(-1).tolist()]
            else:
                raise SystemExit(f"item {i}: key {k} of type {type(v)} is not recorded")
        out.append(line)
    return out


def resized(frames: np.ndarray, size: dict) -> np.ndarray:
    """torchvision's Resize then CenterCrop of each (C, H, W) frame, as a
    Pillow image."""
    from PIL import Image
    from torchvision import transforms

    t = transforms.Compose([transforms.Resize(size["resize"]), transforms.CenterCrop((size["height"], size["width"]))])
    out = [np.asarray(t(Image.fromarray(np.ascontiguousarray(f.transpose(1, 2, 0))))).transpose(2, 0, 1) for f in frames]
    return np.stack(out)


def deltas() -> list[dict]:
    from lerobot.datasets.feature_utils import check_delta_timestamps, get_delta_indices

    out = []
    for fps in (10, 15, 30, 50, 60):
        for k in range(-12, 13):
            for eps in (0.0, 0.5, -0.5, 0.49, 1.5, 2.5):
                for off in (0.0, 0.9e-4, -0.9e-4, 1.1e-4, 5e-5):
                    d = (k + eps) / fps + off
                    ok = check_delta_timestamps({"k": [d]}, fps, TOLERANCE_S, raise_value_error=False)
                    out.append({"fps": fps, "delta": d, "ok": ok, "index": get_delta_indices({"k": [d]}, fps)["k"][0]})
    return out


def record(dst: Path) -> None:
    import av
    import lerobot
    import torch
    import torchcodec

    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    datasets = {}
    for spec in lerobot_datasets.SPECS:
        s = lerobot_datasets.write(spec, dst, seed=0, vcodec=None, threads=1)
        datasets[spec.name] = {"fps": s["fps"], "episodes": s["episodes"], "frames": s["frames"], "codecs": s["codecs"]}
    from lerobot.datasets.video_utils import FrameTimestampError

    frames, backends, failures = {}, {}, {}
    for name in datasets:
        root = dst / name
        frames[name] = frames_of(root, f"shardfeed/{name}", backend(name))
        other = frames_of(root, f"shardfeed/{name}", "pyav" if backend(name) == "torchcodec" else "torchcodec")
        backends[name] = {k: int(np.abs(frames[name][k].astype(int) - other[k].astype(int)).max()) for k in other}
        fdir = dst / f"{name}.frames"
        fdir.mkdir()
        for k, a in frames[name].items():
            (fdir / f"{k}.u8").write_bytes(np.ascontiguousarray(a[::FRAME_STRIDE]).tobytes())
    for name in LANCE:  # LeRobot's Lance layout, as lerobot-lancedb's converter writes it
        from lerobot_lancedb.convert import convert

        out = dst / f"{name}-lance"
        convert(out, root=dst / name)
        for table in out.glob("*.lance"):
            shutil.rmtree(table / "_transactions", ignore_errors=True)  # the readers never open them
        datasets[f"{name}-lance"] = {**datasets[name], "source": name}
        frames[f"{name}-lance"] = frames[name]
    cases, lance_dtypes = {}, {}
    for case, original in LANCE_CASES.items():
        name, delta, episodes = CASES[original]
        got = lance_items(dst / f"{name}-lance", delta, episodes, frames[name])
        want = items(dst / name, f"shardfeed/{name}", delta, episodes, frames[name], backend(name))
        lance_dtypes[case] = same_items(got, want)
        with open(dst / f"{case}.jsonl", "w") as f:
            for line in got:
                f.write(json.dumps(line, sort_keys=True) + "\n")
        cases[case] = {"dataset": f"{name}-lance", "source": name, "delta": delta, "episodes": episodes, "items": len(got)}
    for case, (name, delta, episodes) in CASES.items():
        for other in {"torchcodec", "pyav"} - {backend(name)}:
            try:
                items(dst / name, f"shardfeed/{name}", delta, episodes, frames[name], other)
            except FrameTimestampError as e:
                failures[case] = {"backend": other, "error": f"FrameTimestampError: {str(e).splitlines()[0]}"}
        lines = items(dst / name, f"shardfeed/{name}", delta, episodes, frames[name], backend(name))
        with open(dst / f"{case}.jsonl", "w") as f:
            for line in lines:
                f.write(json.dumps(line, sort_keys=True) + "\n")
        cases[case] = {"dataset": name, "delta": delta, "episodes": episodes, "items": len(lines)}
        if case in FRAMES:
            cases[case]["frames"] = FRAMES[case]
            fdir = dst / f"{case}.frames"
            fdir.mkdir()
            for k, a in frames[name].items():
                (fdir / f"{k}.u8").write_bytes(np.ascontiguousarray(resized(a[::FRAME_STRIDE], FRAMES[case])).tobytes())
    with open(dst / "deltas.jsonl", "w") as f:
        for line in deltas():
            f.write(json.dumps(line, sort_keys=True) + "\n")
    manifest = {
        "tolerance_s": TOLERANCE_S,
        "frame_stride": FRAME_STRIDE,
        "datasets": datasets,
        "cameras": {n: {k: list(a.shape[1:]) for k, a in fr.items()} for n, fr in frames.items()},
        "images": {s.name: [f"observation.images.{c.name}" for c in s.images] for s in lerobot_datasets.SPECS if s.images},
        "cases": cases,
        "pyav_vs_torchcodec_max_difference": backends,
        "backends": {name: backend(name) for name in datasets},
        "backend_failures": failures,
        "lance_vs_lerobot_dtypes": lance_dtypes,
        "versions": {"lerobot": lerobot.__version__, "torch": torch.__version__, "torchcodec": torchcodec.__version__, "av": av.__version__,
                 "lerobot-lancedb": importlib.metadata.version("lerobot-lancedb"), "pylance": importlib.metadata.version("pylance")},
    }
    (dst / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] != "record":
        print(__doc__, file=sys.stderr)
        return 2
    record(Path(sys.argv[2]))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        if _HF_HOME is not None:
            shutil.rmtree(_HF_HOME, ignore_errors=True)
