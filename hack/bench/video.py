"""The video benchmark: a LeRobot dataset's frames into torch, shardfeed's
sidecar (cameras decoded by its FFmpeg build, bin/shardfeed-video) beside
LeRobotDataset with its pyav and torchcodec backends, 0 and 2 DataLoader
workers, and the decode limit: every video decoded alone by the same
pinned FFmpeg build (bin/ffmpeg-lgpl, dav1d for AV1) to RGB, one process a
core, no loader. The same data set in LeRobot's Lance layout
(lerobot-lancedb's converter): shardfeed's sidecar reading it beside
lerobot-lancedb's LanceDBDataset, 0 and 2 workers.

  bin/venv/bin/python hack/bench/video.py [--scale S] [--runs R] [--time-box SECONDS] [--out bin/bench/video.json]

Data: LeRobot's own writer (hack/bench/lerobot_peer.py write, in
bin/venv-lerobot): 20·S episodes of 300 frames at 30 fps, two cameras of
240 × 320 (AV1, LeRobot's encoder settings: a keyframe every 2 frames), a
state and an action; a sample is a frame index with both cameras' frames
as uint8 (3, 240, 320) (LeRobotDataset's return_uint8=True) and the
state, action, task and indexes. Written once into .cache/bench-data.

Each loop is loaders.py's: a shuffled epoch, every value read (touch.py),
torch on one thread, the rate after the first batch, the time to the
first batch and the epoch's rate from the constructor, each measurement R
times in its own process, interleaved. shardfeed's sidecar runs with a
decoded-shard memory of 256 MiB (--memory-limit) so that no epoch is
served from frames an earlier one decoded (the data set's frames are
2.8·S GB decoded); its shuffle draws blocks of 1024 frames (about three
episodes decoded at once), LeRobot's DataLoader shuffles every frame.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loaders  # noqa: E402
from loaders import DATA, ROOT, Serve, log, measure_all, run_child, scale_of  # noqa: E402
from zygote import Zygote  # noqa: E402

LEROBOT = ROOT / "bin" / "venv-lerobot" / "bin" / "python"
FFMPEG = ROOT / "bin" / "ffmpeg-lgpl" / "bin" / "ffmpeg"
BATCH = 32
FRAMES, HEIGHT, WIDTH, CAMERAS = 300, 240, 320, 2
SHUFFLE_BLOCK = 1024
MEMORY_LIMIT = "256Mi"
LIMIT = "the limit: the pinned FFmpeg's decode to RGB alone on every core (no loader)"
LANCE_OURS = "shardfeed, Lance layout"
LANCE_PEER = "LanceDBDataset (lerobot-lancedb), Lance layout"
PEER = Zygote(str(LEROBOT), str(HERE / "lerobot_peer.py"))


def dataset(scale: float) -> tuple[Path, dict]:
    """The LeRobot dataset of the scale, written by LeRobot's writer once."""
    episodes = max(2, round(20 * scale))
    out = DATA / f"lerobot-{episodes}x{FRAMES}-{HEIGHT}x{WIDTH}"
    meta = out / "meta.json"
    if not meta.exists():
        log(f"writing the LeRobot dataset ({episodes} episodes of {FRAMES} frames, {CAMERAS} cameras {HEIGHT}x{WIDTH}) with LeRobot's writer")
        tmp = out.with_name(out.name + ".tmp")
        subprocess.run(["rm", "-rf", str(tmp)], check=True)
        done = subprocess.run([str(LEROBOT), str(HERE / "lerobot_peer.py"), "write", str(tmp), str(episodes), str(FRAMES), str(HEIGHT),
                               str(WIDTH)], check=True, capture_output=True, text=True)
        info = json.loads(done.stdout.strip().splitlines()[-1])
        (tmp / "meta.json").write_text(json.dumps(info))
        subprocess.run(["rm", "-rf", str(out)], check=True)
        os.rename(tmp, out)
    os.sync()
    loaders.warm_page_cache(out)
    return out / "bench", json.loads(meta.read_text())


def lance_dataset(root: Path) -> Path:
    """The data set converted to LeRobot's Lance layout once, by
    lerobot-lancedb's converter."""
    out = root.parent / "bench-lance"
    done = out / "converted"
    if not done.exists():
        log("converting the LeRobot dataset to LeRobot's Lance layout with lerobot-lancedb's converter")
        subprocess.run(["rm", "-rf", str(out)], check=True)
        subprocess.run([str(LEROBOT), str(HERE / "lerobot_peer.py"), "convert", str(root), str(out)], check=True, capture_output=True, text=True)
        done.write_text("")
    os.sync()
    loaders.warm_page_cache(out)
    return out


class VideoServe(Serve):
    """`shardfeed-video serve` of the dataset's lerobot stream (indexed
    first, beside the sidecar's work), decoded memory capped."""

    def __init__(self, work: Path, root: Path):
        work.mkdir(parents=True, exist_ok=True)
        manifest = work / "dataset.yaml"
        manifest.write_text(f"""apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {{name: bench}}
spec:
  streams:
  - name: data
    format: lerobot
    source: {{uri: "file://{root}/", indexURI: "file://{work}/index/"}}
  numSplits: 2
  globalBatchSize: {BATCH}
  shuffle: {{seed: 1, blockSize: {SHUFFLE_BLOCK}}}
""")
        self.start(work, manifest, "shardfeed-video", index=True, warm=False, extra=("--memory-limit", MEMORY_LIMIT))


def run_lerobot(backend: str, root: Path, workers: int, epoch: int, box: float) -> dict:
    done = PEER.run([f"read-{backend}", str(root), str(workers), str(BATCH), str(epoch), str(box)], timeout=1800)
    out = done.stdout.strip().splitlines()
    if done.returncode or not out:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise SystemExit(f"{backend} failed (exit {done.returncode}):\n{tail}")
    return json.loads(out[-1])


def run_limit(videos: list[Path], cameras: int) -> dict:
    """Every video decoded to RGB by the pinned ffmpeg command, one thread
    each, as many at once as there are cores: its frames over the cameras
    are the samples a loader could at most serve a second."""
    frames = 0

    def decode(path: Path) -> int:
        done = subprocess.run([str(FFMPEG), "-v", "error", "-threads", "1", "-i", str(path), "-vf", "format=rgb24", "-f", "null",
                               "-progress", "pipe:1", "-nostats", "-"], check=True, capture_output=True, text=True)
        return max(int(line.split("=", 1)[1]) for line in done.stdout.splitlines() if line.startswith("frame="))

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        frames = sum(pool.map(decode, videos))
    took = time.monotonic() - start
    samples = frames // cameras
    return {"first": 0.0, "rest": took, "samples": samples, "rest_samples": samples, "steady": samples / took, "complete": True,
            "rss_mib": 0.0, "worker_rss_mib": 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default=os.environ.get("BENCH_SCALE", "1"))
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    ap.add_argument("--time-box", type=float, default=float(os.environ.get("BENCH_TIME_BOX", "3")))
    ap.add_argument("--out", default=str(ROOT / "bin" / "bench" / "video.json"))
    args = ap.parse_args()
    for need in (LEROBOT, FFMPEG, ROOT / "bin" / "shardfeed-video"):
        if not need.exists():
            raise SystemExit(f"{need} is missing: make tools-lerobot tools-video build-video")
    scale = scale_of(args.scale)
    started = time.monotonic()
    root, meta = dataset(scale)
    lance = lance_dataset(root)
    videos = sorted(root.glob("videos/**/*.mp4"))
    versions = json.loads(subprocess.run([str(LEROBOT), "-c", "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) "
                                          "for p in ('lerobot', 'torch', 'torchcodec', 'av', 'lerobot-lancedb', 'pylance')}))"],
                                         check=True, capture_output=True, text=True).stdout)
    codec = sorted(set(meta["codecs"].values()))
    result = {"command": " ".join(["bin/venv/bin/python", "hack/bench/video.py", *sys.argv[1:]]), "scale": scale, "runs": args.runs,
              "time_box": args.time_box, "machine": f"{platform.machine()}, {os.cpu_count()} cores", "versions": versions,
              "dataset": {"episodes": meta["episodes"], "frames": meta["frames"], "fps": meta["fps"], "cameras": CAMERAS,
                          "size": f"{HEIGHT}x{WIDTH}", "codec": ",".join(codec), "batch": BATCH, "videos": len(videos),
                          "video_bytes": sum(v.stat().st_size for v in videos)},
              "rows": []}
    with tempfile.TemporaryDirectory(prefix="shardfeed-video-", dir=ROOT / "bin") as tmp:
        serve = VideoServe(Path(tmp) / "serve", root)
        lance_serve = VideoServe(Path(tmp) / "serve-lance", lance)
        try:
            jobs = []
            for workers in (0, 2):
                # Each run an epoch of its own: one the sidecar read before
                # would find some of its frames still decoded.
                jobs.append(("shardfeed", workers, lambda e, b, w=workers: run_child("read-shardfeed", serve.socket, w, 2 * e + w // 2, b),
                             "shardfeed"))
                for backend in ("pyav", "torchcodec"):
                    jobs.append((f"LeRobotDataset ({backend})", workers,
                                 lambda e, b, k=backend, w=workers: run_lerobot(k, root, w, e, b), f"LeRobotDataset ({backend})"))
                jobs.append((LANCE_OURS, workers, lambda e, b, w=workers: run_child("read-shardfeed", lance_serve.socket, w, 2 * e + w // 2, b),
                             LANCE_OURS))
                jobs.append((LANCE_PEER, workers, lambda e, b, w=workers: run_lerobot("lancedb", lance, w, e, b), LANCE_PEER))
            jobs.append((LIMIT, loaders.EVERY_CORE, lambda e, b: run_limit(videos, CAMERAS), "the decode limit"))
            result["rows"] = measure_all(jobs, args.runs, args.time_box)
            result["sidecar_peak_anon_mib"] = serve.peak_anon_mib()
        finally:
            serve.stop()
            lance_serve.stop()
    loaders.MINE.close()
    PEER.close()
    result["seconds"] = time.monotonic() - started
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    log(f"video: {len(result['rows'])} rows in {result['seconds']:.0f} s, written to {out}")


if __name__ == "__main__":
    main()
