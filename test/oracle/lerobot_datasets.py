"""Writes small LeRobot v3.0 datasets with LeRobot's own writer
(LeRobotDataset.create, add_frame, save_episode, finalize), the inputs of
shardfeed's LeRobot reader and of its oracle (lerobot_oracle.py beside
this file, which writes them through this module).
Run it with the venv hack/tools.sh makes (make tools-lerobot):

    bin/venv-lerobot/bin/python test/oracle/lerobot_datasets.py OUT [--vcodec h264] [--only multicam,rollover]

Each dataset is a folder OUT/NAME:

- multicam: fps 10, five episodes of 3 to 60 frames, three cameras of
  different sizes, a float32 state (6) and action (7), two tasks;
- fps30: fps 30, three episodes (5, 40, 90 frames), one camera, three tasks,
  and vectors LeRobotDataset gives in other types than stored:
  observation.effort, float64 (3,), and observation.count, int32 (2,);
- rollover: fps 10, eight episodes, two cameras, with data, episode and
  video files capped at a few kB and two files a chunk, so that the
  episodes land in several data/ and videos/ files and chunks, each
  camera's videos roll over apart from the data's, and most video files
  hold several episodes (non-zero from_timestamp);
- h264: fps 15, three episodes, two cameras, H.264 (libx264);
- hevc: fps 10, three episodes, one camera declared channels first
  (3, H, W), HEVC (libx265);
- images: fps 20, four episodes, one camera as video and two stored as
  PNG images in the data files (dtype image; LeRobotDataset decodes them
  to float32 (3, H, W) in [0, 1]), one of odd size, one declared channels
  first, a 2-D float32 feature, observation.joints (2, 3), and features
  LeRobotDataset gives in other types than stored: observation.effort,
  float64 (3,), and observation.contacts, int32 (2, 2) (float32 and
  int64 in its items).

Everything is a function of the episode, frame and --seed: images are
gradients with a moving square, and state[0], state[1] are the episode and
frame index (action's are offset by 1000), so a window the reader returns
names the rows it came from. The default codec is LeRobot's, libsvtav1 (AV1);
--vcodec h264 or hevc picks libx264 or libx265 through PyAV (PyAV 15.1's
wheel has both, --list-codecs says). Every camera is at least 64 pixels
wide: the libx265 of that wheel corrupts the heap on narrower frames
(48 wide: "free(): invalid next size", or a crash later in pyarrow). Nothing
here reaches the network. With libsvtav1 (and hevc, in the runs tried) the
same arguments write the same bytes; with h264 a few frames of a video can
encode differently from run to run (libx264 of PyAV 15.1's wheel, even with
one thread), so an oracle must be recorded from the very files a test reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Camera:
    name: str
    height: int
    width: int


@dataclass
class Spec:
    name: str
    fps: int
    lengths: list[int]
    cameras: list[Camera]
    tasks: list[str]
    state_dim: int = 6
    action_dim: int = 7
    # LeRobotDatasetMetadata.update_chunk_settings: files a chunk folder
    # holds, and the sizes (MB) past which a data/episodes parquet file or a
    # video file is closed and the next one started.
    chunk_settings: dict[str, float] = field(default_factory=dict)
    # Episodes' metadata rows buffered before meta/episodes is written (1
    # makes that file roll over with chunk_settings too).
    metadata_buffer_size: int = 10
    # The encoder (None: LeRobot's default, libsvtav1); --vcodec overrides.
    vcodec: str | None = None
    # Cameras declared and given channels first, (3, H, W), which LeRobot's
    # writer accepts beside (H, W, 3).
    channels_first: bool = False
    # The encoder's pixel format (None: LeRobot's default, yuv420p).
    pix_fmt: str | None = None
    # Cameras stored as PNG images in the data files (dtype image); the
    # names of those given channels first.
    images: list[Camera] = field(default_factory=list)
    images_channels_first: tuple[str, ...] = ()
    # The shape of a 2-D float32 feature, observation.joints (None: none).
    joints: tuple[int, int] | None = None
    # observation.effort, float64 (3,), and observation.contacts, int32
    # (2, 2): stored in types LeRobotDataset's items do not have.
    other_dtypes: bool = False
    # observation.effort, float64 (3,), and observation.count, int32 (2,):
    # such types in vectors alone (LeRobot's Lance layout reads vectors).
    flat_dtypes: bool = False


SPECS = [
    Spec(
        name="multicam",
        fps=10,
        lengths=[3, 60, 25, 4, 58],
        cameras=[Camera("front", 96, 128), Camera("wrist", 48, 64), Camera("top", 72, 72)],
        tasks=["pick the red cube", "push the blue block to the left"],
    ),
    Spec(
        name="fps30",
        fps=30,
        lengths=[5, 40, 90],
        cameras=[Camera("front", 64, 80)],
        tasks=["open the drawer", "close the drawer", "wave"],
        state_dim=3,
        action_dim=3,
        flat_dtypes=True,
    ),
    Spec(
        name="rollover",
        fps=10,
        lengths=[12, 30, 5, 22, 40, 3, 18, 27],
        cameras=[Camera("front", 64, 64), Camera("wrist", 32, 64)],
        tasks=["stack", "unstack"],
        state_dim=4,
        action_dim=2,
        chunk_settings={"chunks_size": 2, "data_files_size_in_mb": 0.0035, "video_files_size_in_mb": 0.02},
        metadata_buffer_size=1,
    ),
    Spec(
        name="h264",
        fps=15,
        lengths=[6, 31, 20],
        cameras=[Camera("front", 72, 96), Camera("side", 64, 64)],
        tasks=["pour the water"],
        state_dim=3,
        action_dim=2,
        vcodec="h264",
    ),
    Spec(
        name="hevc",
        fps=10,
        lengths=[5, 22, 18],
        cameras=[Camera("front", 64, 96)],
        tasks=["fold the towel", "hang the towel"],
        state_dim=2,
        action_dim=2,
        vcodec="hevc",
        channels_first=True,
    ),
    Spec(
        name="images",
        fps=20,
        lengths=[7, 26, 3, 15],
        cameras=[Camera("front", 64, 80)],
        images=[Camera("gripper", 45, 61), Camera("top", 40, 56)],
        images_channels_first=("top",),
        joints=(2, 3),
        other_dtypes=True,
        tasks=["grasp the handle", "release"],
        state_dim=3,
        action_dim=3,
    ),
]


def image(cam: Camera, cam_index: int, episode: int, frame: int, seed: int) -> np.ndarray:
    """A deterministic HxWx3 uint8 frame: gradients that drift with the
    frame (far enough that neighbouring frames stay apart after lossy
    encoding), tinted by the camera, episode and seed, with a square that
    moves."""
    h, w = cam.height, cam.width
    y, x = np.mgrid[0:h, 0:w].astype(np.int64)
    s = seed * 31 + episode * 17 + cam_index * 7
    r = (x * 200 // max(w - 1, 1) + 23 * frame + s) % 256
    g = (y * 200 // max(h - 1, 1) + 13 * frame + 2 * s) % 256
    b = ((x + y) * 120 // max(h + w - 2, 1) + 40 * cam_index + 3 * s) % 256
    img = np.stack([r, g, b], axis=-1).astype(np.uint8)
    side = max(4, min(h, w) // 4)
    px = (4 * frame + 13 * episode + s) % (w - side)
    py = (2 * frame + 7 * cam_index + s) % (h - side)
    img[py : py + side, px : px + side] = ((255 - 60 * cam_index) % 256, (90 + s) % 256, (30 * episode) % 256)
    return img


def vector(dim: int, episode: int, frame: int, seed: int, offset: float) -> np.ndarray:
    """[offset + episode, offset + frame, then smooth seeded values]."""
    v = np.empty(dim, dtype=np.float32)
    v[0] = offset + episode
    if dim > 1:
        v[1] = offset + frame
    for j in range(2, dim):
        v[j] = np.float32(np.sin(0.1 * frame + 0.7 * j + 0.3 * episode + seed))
    return v


def features(spec: Spec) -> dict:
    f: dict = {
        "observation.state": {
            "dtype": "float32",
            "shape": (spec.state_dim,),
            "names": [f"s{j}" for j in range(spec.state_dim)],
        },
        "action": {"dtype": "float32", "shape": (spec.action_dim,), "names": [f"a{j}" for j in range(spec.action_dim)]},
    }
    for cam in spec.cameras:
        f[f"observation.images.{cam.name}"] = {
            "dtype": "video",
            "shape": (3, cam.height, cam.width) if spec.channels_first else (cam.height, cam.width, 3),
            "names": ["channels", "height", "width"] if spec.channels_first else ["height", "width", "channels"],
        }
    if spec.joints:
        f["observation.joints"] = {"dtype": "float32", "shape": spec.joints, "names": None}
    if spec.other_dtypes or spec.flat_dtypes:
        f["observation.effort"] = {"dtype": "float64", "shape": (3,), "names": ["e0", "e1", "e2"]}
    if spec.other_dtypes:
        f["observation.contacts"] = {"dtype": "int32", "shape": (2, 2), "names": None}
    if spec.flat_dtypes:
        f["observation.count"] = {"dtype": "int32", "shape": (2,), "names": ["c0", "c1"]}
    for cam in spec.images:
        first = cam.name in spec.images_channels_first
        f[f"observation.images.{cam.name}"] = {
            "dtype": "image",
            "shape": (3, cam.height, cam.width) if first else (cam.height, cam.width, 3),
            "names": ["channels", "height", "width"] if first else ["height", "width", "channels"],
        }
    return f


def write(spec: Spec, out: Path, seed: int, vcodec: str | None, threads: int | None) -> dict:
    from lerobot.configs import RGBEncoderConfig
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    import av

    # Quiet FFmpeg's notes (the remux of each concatenated video says it
    # moves the moov atom).
    av.logging.set_level(av.logging.ERROR)
    vcodec = vcodec or spec.vcodec
    root = out / spec.name
    if root.exists():
        shutil.rmtree(root)
    # x265 prints its settings and a summary per video unless told not to.
    extra = {"x265-params": "log-level=error"} if vcodec == "hevc" else {}
    options: dict = {}
    if vcodec:
        options["vcodec"] = vcodec
    if spec.pix_fmt:
        options["pix_fmt"] = spec.pix_fmt
    rgb = RGBEncoderConfig(**options, extra_options=extra) if options else None
    start = time.monotonic()
    ds = LeRobotDataset.create(
        repo_id=f"shardfeed/{spec.name}",
        fps=spec.fps,
        features=features(spec),
        root=root,
        robot_type="synthetic",
        use_videos=True,
        rgb_encoder=rgb,
        encoder_threads=threads,
        metadata_buffer_size=spec.metadata_buffer_size,
    )
    if spec.chunk_settings:
        ds.meta.update_chunk_settings(**spec.chunk_settings)
    for ep, length in enumerate(spec.lengths):
        task = spec.tasks[ep % len(spec.tasks)]
        for t in range(length):
            frame = {
                "observation.state": vector(spec.state_dim, ep, t, seed, 0.0),
                "action": vector(spec.action_dim, ep, t, seed, 1000.0),
                "task": task,
            }
            if spec.joints:
                rows, cols = spec.joints
                frame["observation.joints"] = vector(rows * cols, ep, t, seed, 2000.0).reshape(rows, cols)
            if spec.other_dtypes or spec.flat_dtypes:
                # Values a float32 cannot hold exactly, and ints.
                frame["observation.effort"] = np.array([0.1 * t + 1e-9, ep + 1 / 3, np.sin(t + 0.5)], dtype=np.float64)
            if spec.other_dtypes:
                frame["observation.contacts"] = np.array([[ep, t], [t % 2, -t]], dtype=np.int32)
            if spec.flat_dtypes:
                frame["observation.count"] = np.array([ep * 1000 + t, -t], dtype=np.int32)
            for i, cam in enumerate(spec.cameras):
                img = image(cam, i, ep, t, seed)
                frame[f"observation.images.{cam.name}"] = img.transpose(2, 0, 1).copy() if spec.channels_first else img
            for i, cam in enumerate(spec.images, start=len(spec.cameras)):
                img = image(cam, i, ep, t, seed)
                frame[f"observation.images.{cam.name}"] = img.transpose(2, 0, 1).copy() if cam.name in spec.images_channels_first else img
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()
    info = json.loads((root / "meta" / "info.json").read_text())
    codecs = {k: v.get("info", {}).get("video.codec") for k, v in info["features"].items() if v["dtype"] == "video"}
    return {
        "name": spec.name,
        "root": str(root),
        "fps": spec.fps,
        "episodes": len(spec.lengths),
        "frames": sum(spec.lengths),
        "codecs": codecs,
        "files": sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()),
        "seconds": round(time.monotonic() - start, 2),
    }


def list_codecs() -> None:
    import av

    from lerobot.datasets import detect_available_encoders_pyav

    wanted = ["libsvtav1", "libaom-av1", "h264", "libx264", "hevc", "libx265", "libopenh264"]
    print(f"PyAV {av.__version__}, FFmpeg {av.library_versions.get('libavcodec')}")
    for name in wanted:
        ok = name in av.codecs_available
        enc = ""
        if ok:
            try:
                enc = av.codec.Codec(name, "w").name
            except Exception as e:  # no encoder of that name
                enc = f"no encoder ({type(e).__name__})"
        print(f"  {name:12} available={ok} encoder={enc}")
    print("  lerobot detect_available_encoders_pyav:", detect_available_encoders_pyav(wanted))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", type=Path, help="folder the datasets are written into (one subfolder each)")
    ap.add_argument("--only", default="", help="comma-separated dataset names (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vcodec", default=None, help="libsvtav1 (LeRobot's default), h264, hevc, libaom-av1")
    ap.add_argument(
        "--threads", type=int, default=1, help="encoder threads (1, the default, keeps the encoded bytes reproducible)"
    )
    ap.add_argument("--list-codecs", action="store_true", help="print the encoders PyAV offers and exit")
    args = ap.parse_args()
    if args.list_codecs:
        list_codecs()
        return 0
    if args.out is None:
        ap.error("OUT is required")
    only = {s for s in args.only.split(",") if s}
    unknown = only - {s.name for s in SPECS}
    if unknown:
        ap.error(f"unknown dataset(s) {sorted(unknown)}; have {[s.name for s in SPECS]}")
    args.out.mkdir(parents=True, exist_ok=True)
    summary = []
    for spec in SPECS:
        if only and spec.name not in only:
            continue
        s = write(spec, args.out, args.seed, args.vcodec, args.threads)
        print(f"{s['name']}: {s['episodes']} episodes, {s['frames']} frames, {s['codecs']}, {s['seconds']} s",
              file=sys.stderr)
        summary.append(s)
    (args.out / "datasets.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


def run() -> int:
    """main in the environment it needs, set before lerobot is imported
    (lerobot, huggingface_hub and datasets read it once, on import)."""
    # LeRobot writes stats.json from a dict built out of a set of keys: the
    # same hash seed on every run keeps its key order, so the same bytes.
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    # Offline, no progress bars, and Hugging Face's caches in a folder of
    # this run rather than the user's home.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    # SVT-AV1 prints its configuration for every video it encodes, unless
    # told to log errors only.
    os.environ.setdefault("SVT_LOG", "1")
    if "HF_HOME" in os.environ:
        return main()
    with tempfile.TemporaryDirectory(prefix="lerobot-hf-") as home:
        os.environ["HF_HOME"] = home
        return main()


if __name__ == "__main__":
    sys.exit(run())
