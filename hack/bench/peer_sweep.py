"""Each peer at its best: sweeps the throughput knobs its maintainers name
(peer_knobs.py) on the loader benchmark's data sets, and writes the
fastest values found to hack/bench/peer-settings.json, which loaders.py
(make bench) runs every peer with.

  bin/venv/bin/python hack/bench/peer_sweep.py [--kinds tokens,images,images-decoded,tabular]
      [--runs 2] [--time-box 8] [--out hack/bench/peer-settings.json]

The sweep is coordinate-wise: from the peer's defaults, one knob at a time
tries each of its values with the others at the best found so far, and
keeps the fastest (the median of --runs runs, each in its own process,
reading one shuffled epoch or --time-box seconds after its first batch).
A step's trials of every peer and worker count are interleaved, as
loaders.py's rows are, so that the machine's slow moments fall on all of
them alike. make bench-peers runs it (about 45 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import loaders
import peer_knobs

# The peers loaders.py runs for each data set, with their worker counts.
READ = [(cmd, w) for _, cmd in loaders.PEER_READERS for w in ((0,) if cmd == "read-ray" else (0, 2))]
SWEPT = {"tokens": READ, "images": READ, "tabular": READ,
         "images-decoded": [(cmd, w) for cmd in ("decode-litdata", "decode-mosaic") for w in (0, 2)]}


def key(kind: str, cmd: str, workers: int) -> str:
    return f"{kind}/{cmd}/{workers}"


def sweep_kind(kind: str, runs: int, box: float, tried: list[dict]) -> dict:
    """{key: the fastest knobs found and their rates} for kind's peers."""
    data, meta = loaders.dataset(loaders.DATA_OF.get(kind, kind), loaders.scale_of("1"))
    batch = loaders.BATCH[kind]
    best: dict[str, dict] = {}
    grids = {}
    for cmd, w in SWEPT[kind]:
        grids[(cmd, w)] = peer_knobs.grid(cmd, kind, w, batch)
        defaults = {name: values[0] for name, values in grids[(cmd, w)]}
        best[key(kind, cmd, w)] = {"knobs": defaults, "rate": None}
    # Step 0 measures every peer's defaults; step i > 0 the other values of
    # each peer's i-th knob (those that have one).
    for step in range(1 + max((len(g) for g in grids.values()), default=0)):
        trials = []
        for (cmd, w), grid in grids.items():
            at = best[key(kind, cmd, w)]
            if step == 0:
                trials.append((cmd, w, dict(at["knobs"])))
            elif step <= len(grid):
                name, values = grid[step - 1]
                trials += [(cmd, w, {**at["knobs"], name: v}) for v in values if v != at["knobs"][name]]
        if not trials:
            continue
        jobs = [(cmd, w, lambda e, b, cmd=cmd, w=w, knobs=knobs: loaders.run_peer(cmd, data, w, batch, e, b, knobs),
                 f"{kind} sweep, step {step}: {cmd} ({peer_knobs.label(knobs)})") for cmd, w, knobs in trials]
        for (cmd, w, knobs), m in zip(trials, loaders.measure_all(jobs, runs, box)):
            rate = m["rate"]["median"]
            tried.append({"kind": kind, "peer": cmd, "workers": w, "knobs": knobs, "rate": m["rate"], "steady": m["steady"],
                          "first": m["first"], "complete": m["complete"]})
            at = best[key(kind, cmd, w)]
            if at["rate"] is None or rate > at["rate"]:
                best[key(kind, cmd, w)] = {"knobs": knobs, "rate": rate, "default_rate": at.get("default_rate", rate)}
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", default="tokens,images,images-decoded,tabular")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--time-box", type=float, default=8.0)
    parser.add_argument("--out", default=str(loaders.PEER_SETTINGS))
    args = parser.parse_args()
    out = Path(args.out)
    old = json.loads(out.read_text()) if out.exists() else {}
    started = time.monotonic()
    chosen, tried = dict(old.get("chosen", {})), [t for t in old.get("tried", []) if t["kind"] not in args.kinds.split(",")]
    try:
        for kind in args.kinds.split(","):
            chosen.update(sweep_kind(kind, args.runs, args.time_box, tried))
    finally:
        loaders.PEERS.close()
    result = {"command": " ".join(["bin/venv/bin/python", "hack/bench/peer_sweep.py", *sys.argv[1:]]),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores", "runs": args.runs, "time_box": args.time_box,
              "versions": loaders.peer_versions(), "minutes": round((time.monotonic() - started) / 60, 1),
              "chosen": dict(sorted(chosen.items())), "tried": tried}
    out.write_text(json.dumps(result, indent=1) + "\n")
    for k, v in result["chosen"].items():
        gain = f", {v['rate'] / v['default_rate']:.2f}× its defaults" if v.get("default_rate") else ""
        loaders.log(f"{k}: {peer_knobs.label(v['knobs'])}: {v['rate']:,.0f} samples/s{gain}")
    loaders.log(f"peer sweep: {len(tried)} settings in {result['minutes']} min, written to {out}")


if __name__ == "__main__":
    main()
