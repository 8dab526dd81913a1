"""Writes the figures of `make bench` into docs/benchmarks.md and its plots.

  bin/venv-oracle/bin/python hack/bench/report.py [--go bin/bench/go.txt]
      [--loaders bin/bench/loaders.json] [--egress bin/bench/egress.json]
      [--doc docs/benchmarks.md] [--img docs/img]

docs/benchmarks.md is prose written by hand with generated blocks between
`<!-- bench:NAME -->` and `<!-- /bench:NAME -->`: this script replaces each
block whose input is there (Go benchmarks, loaders, egress) and leaves the
others as they are, so a partial run updates only what it measured. Every
figure is the median of the runs, with [min–max]. Plots go to --img as PNG.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = "github.com/shardfeed/shardfeed/"
PEERS = ("LitData", "mosaicml-streaming", "lancedb", "Ray Data", "torch-dataloader-utils")
# loaders.py's row of the machine's limit: each batch copied once, the same loop.
LIMIT = "one copy of each batch + the loop (the limit)"
# The decoded images' limit, as loaders.py and formats.py name it.
DECODE_LIMIT = "the limit: libjpeg-turbo's decode alone on every core (no resize, no loader)"
# …and its row for a shuffled epoch: each batch's rows gathered in plan order.
LIMIT_GATHER = "one gathered copy of each shuffled batch + the loop"
# …and for the variant shuffled in runs (loaders.py's RUN).
RUN = 16
LIMIT_GATHER_RUNS = f"one gathered copy of each batch shuffled in runs of {RUN} + the loop"
RUNS = f"shardfeed, shuffled in runs of {RUN} samples"


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# --- reading `go test -bench` output -----------------------------------------------------------


def parse_go(text: str) -> dict[str, list[dict[str, float]]]:
    """{"pkg/BenchmarkName/sub": [{unit: value} per run]}; the package is
    relative to the module, the GOMAXPROCS suffix dropped."""
    out: dict[str, list[dict[str, float]]] = {}
    pkg = ""
    for line in text.splitlines():
        if line.startswith("pkg: "):
            pkg = line[5:].strip().removeprefix(MODULE)
            continue
        fields = line.split()
        if not fields or not fields[0].startswith("Benchmark") or len(fields) < 4 or not fields[1].isdigit():
            continue
        name = re.sub(r"-\d+$", "", fields[0])
        metrics = {}
        for value, unit in zip(fields[2::2], fields[3::2]):
            try:
                metrics[unit] = float(value)
            except ValueError:
                break
        out.setdefault(f"{pkg}/{name}", []).append(metrics)
    return out


class Stat:
    """Median, min and max of one metric over the runs."""

    def __init__(self, values: list[float]):
        self.values = values
        self.median = statistics.median(values)
        self.min, self.max = min(values), max(values)

    @classmethod
    def of(cls, d: dict) -> "Stat":
        s = cls([d["median"]])
        s.min, s.max = d["min"], d["max"]
        return s

    def scaled(self, k: float) -> "Stat":
        s = Stat([v * k for v in self.values])
        s.min, s.max, s.median = self.min * k, self.max * k, self.median * k
        return s

    def fmt(self, spec: str = ",.0f", bold: bool = False, unit: str = "") -> str:
        """ "median unit [min–max]", the range left out when it rounds to
        one value."""
        def f(v: float) -> str:
            return format(v, spec).replace(",", " ")

        m = f"{f(self.median)} {unit}".rstrip()
        m = f"**{m}**" if bold else m
        if f(self.min) == f(self.max):
            return m
        return f"{m} [{f(self.min)}–{f(self.max)}]"


class GoResults:
    def __init__(self, text: str):
        self.runs = parse_go(text)

    def stat(self, name: str, unit: str) -> Stat | None:
        values = [r[unit] for r in self.runs.get(name, []) if unit in r]
        return Stat(values) if values else None

    def count(self) -> int:
        return max((len(v) for v in self.runs.values()), default=0)


def dur(ns: float) -> tuple[float, str]:
    """A duration in ns as (value, unit) readable at a glance."""
    for unit, k in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= k:
            return ns / k, unit
    return ns, "ns"


def fmt_ns(s: Stat, bold: bool = False) -> str:
    """A duration stat in ns as "3.06 ms [2.93–3.09]"."""
    v, unit = dur(s.median)
    spec = ".2f" if v < 10 else ".1f" if v < 100 else ".0f"
    return s.scaled(v / s.median).fmt(spec, bold, unit)


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# --- the blocks ---------------------------------------------------------------------------------


def machine_block(go: GoResults | None, loaders: dict | None, cmd: str) -> str:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        kb = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal")))
        mem = f"{kb / (1 << 20):.0f} GiB"
    except (OSError, StopIteration):
        pass
    gov = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.split()
    runs = f"{go.count() if go else '?'} runs of each Go benchmark"
    if loaders:
        runs += f", {loaders['runs']} of each loader measurement ({loaders.get('short_runs', 2 * loaders['runs'])} of one whose runs read for under a second each)"
    lines = [f"- Machine: {os.cpu_count()} cores ({cpu}), {mem}, Linux {platform.release()}.",
             f"- Command: `{cmd}`; {runs}. Figures are medians, [min–max] over the runs."]
    if len(gov) >= 3:
        lines.append(f"- Go {gov[2].removeprefix('go')}.")
    if loaders:
        v = loaders["versions"]
        peers = ", ".join(f"{p} {v[p]}" for p in ("mosaicml-streaming", "litdata", "lancedb", "ray", "torch-dataloader-utils") if p in v)
        lines.append(f"- Python {v['python']}, torch {v['torch']}, pyarrow {v['pyarrow']}; the peers, from PyPI in one venv: {peers}.")
    return "\n".join(lines)


def build_series(go: GoResults, name_of) -> list[tuple[int, Stat, Stat]]:
    """(exponent, time, memory) of a build benchmark at 1e6 … 1e10 samples,
    for the sizes that ran."""
    out = []
    for exp in range(6, 11):
        t, m = go.stat(name_of(exp), "ns/op"), go.stat(name_of(exp), "B/op")
        if t and m:
            out.append((exp, t, m))
    return out


def planner_block(go: GoResults, img: Path) -> str:
    plan = build_series(go, lambda e: f"planner/BenchmarkPlanBuild/samples=1e+{e:02d}/shards=1e+{e - 4:02d}")
    base = build_series(go, lambda e: f"planner/BenchmarkMaterializedPermutation/build/samples=1e+{e:02d}")
    rows = [["plan build", f"1e{e} samples, 1e{e - 4} shards", fmt_ns(t, e == 10), m.scaled(1e-6).fmt(".1f", e == 10, "MB")]
            for e, t, m in plan]
    rows += [["baseline build: a shuffled `[]int64` of every sample", f"1e{e} samples", fmt_ns(t), m.scaled(1e-6).fmt(".0f", unit="MB")]
             for e, t, m in base]
    # Issue 24's plans: the same size with stratified batching, and with a
    # filter, stratified batching and a 3-phase schedule (goal: < 1 s, < 100 MB).
    for name, label in (("planner/BenchmarkPlanBuildStratified", "plan build, stratified batching"),
                        ("planner/BenchmarkPlanBuildPacked", "plan build, packed (spec.packing: a sample is a pack)"),
                        ("planner/BenchmarkPlanBuildBucketed", "plan build, bucketed in 4 buckets (spec.bucketing: a plan per bucket)"),
                        ("planner/BenchmarkPlanBuildScheduled", "plan build, filter + stratified + 3-phase schedule (and each stream's first pass)")):
        t, m = go.stat(name, "ns/op"), go.stat(name, "B/op")
        if t and m:
            rows.append([label, "1e10 samples, 1e6 shards", fmt_ns(t, True), m.scaled(1e-6).fmt(".1f", True, "MB")])
    for name, label, size in (("planner/BenchmarkPlanSeek", "plan seek: random split, random position → sample", "1e10 samples"),
                              ("planner/BenchmarkPlanSequential", "plan sequential: one split's positions in order", "1e10 samples"),
                              ("planner/BenchmarkPlanSeekScheduled", "scheduled plan seek: random step of any phase, random split → sample", "1e10 samples"),
                              ("planner/BenchmarkMaterializedPermutation/seek/samples=1e+08", "baseline seek: array lookup", "1e8 samples")):
        t = go.stat(name, "ns/op")
        if t:
            rows.append([label, size, fmt_ns(t, "Seek" in name), "–"])
    if plan:
        import matplotlib.pyplot as plt

        fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6))
        for series, style, label in ((plan, "o-", "shardfeed plan"), (base, "s--", "materialised permutation")):
            a.loglog([10**e for e, _, _ in series], [t.median / 1e9 for _, t, _ in series], style, label=label)
            b.loglog([10**e for e, _, _ in series], [m.median / 1e6 for _, _, m in series], style, label=label)
        a.set(xlabel="samples", ylabel="build time (s)", title="Plan build time")
        b.set(xlabel="samples", ylabel="memory (MB)", title="Plan memory")
        for ax in (a, b):
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        save(fig, img / "plan-build.png")
    return table(["benchmark", "size", "time", "memory"], rows) + "\n\n![Plan build time and memory vs samples](img/plan-build.png)"


def packing_block(packing: dict, go: GoResults | None) -> str:
    """Issue 54's padding: shardfeed's packers against Grain's and LanceDB's
    on the same documents (hack/bench/packing.py), and the sidecar's cost
    of packing a shard (BenchmarkPackShard)."""
    out = []
    for d in packing["distributions"]:
        out.append(f"**{d['name']}**, sequences of {d['seqLength']} tokens, {packing['docs']:,} documents "
                   f"(mean {d['meanLength']:.0f} tokens):\n")
        rows = []
        for r in d["rows"]:
            dropped = f"{r['dropped']:,}" if r["dropped"] else "0"
            pad = f"{100 * r['padding']:.2f}%"
            sep = f"{100 * r.get('separators', 0):.2f}%" if r.get("separators") else "–"
            rows.append([r["packer"], r["window"], f"{r['packs']:,}", f"**{pad}**" if r["packer"].startswith("shardfeed bestFit") else pad, sep,
                         f"{r.get('cut', 0):,}", dropped])
        out.append(table(["packer", "window", "packs", "padding", "separators", "documents cut", "tokens left out"], rows))
        verdicts = []
        for bins in packing["bins"]:
            grain = next(r for r in d["rows"] if r["packer"] == "Grain bestFit" and r["window"] == f"{bins} bins")
            ours = next(r for r in d["rows"] if r["packer"] == "shardfeed bestFit" and r["window"].endswith(f"(= {bins} bins)"))
            ok = ours["padding"] <= grain["padding"]
            verdicts.append(f"{bins} bins: {100 * ours['padding']:.2f}% against {100 * grain['padding']:.2f}% ({'met' if ok else 'NOT met'})")
        out.append("\nshardfeed's best fit at most Grain's best fit's padding at an equal window: " + "; ".join(verdicts) + ".\n")
        if d.get("layouts"):
            out.append(layouts_block(d["layouts"]))
    rate = packing.get("rate")
    if rate:
        modes = {m["mode"]: Stat(m["tokensPerSecond"]) for m in rate["modes"]}
        p, u = modes["packed"], modes["unpacked"]
        ratio = p.median / u.median
        out.append(f"Into a PyTorch loop that reads every value (the {rate['distribution']} documents, ten passes an epoch, "
                   f"{len(p.values)} runs): packed in sequences of {rate['seqLength']}, {p.scaled(1e-6).fmt('.0f')} M tokens/s; "
                   f"the same documents unpacked, a tensor each, {u.scaled(1e-6).fmt('.0f')} M tokens/s: "
                   f"**{ratio:.2f}×** (≥ 0.8×: {'met' if ratio >= 0.8 else 'NOT met'}).\n")
    if go:
        t = go.stat("sidecar/source/BenchmarkPackShard", "ns/pack")
        if t:
            out.append(f"A sidecar packs a decoded shard (8192 documents, mean about 400 tokens, into 4096-token best-fit packs, "
                       f"with the packed record) in {t.scaled(1e-3).fmt('.1f')} µs a pack, once per shard: a batch of 64 packs "
                       f"(256 Ki tokens) costs {t.scaled(64e-6).fmt('.2f')} ms of one core.")
    return "\n".join(out)


def layouts_block(layouts: list[dict]) -> str:
    """Packs across shards: per layout (documents a shard) and window, the
    padding of best-fit decreasing over each window of the stream (the
    oracle), of shardfeed packing per shard, and across shards."""
    windows = sorted({r["window"] for r in layouts})
    rows, worse = [], []
    for per in sorted({r["docsPerShard"] for r in layouts}):
        cells = [f"{per:,} documents a shard"]
        for w in windows:
            r = next(x for x in layouts if x["docsPerShard"] == per and x["window"] == w)
            pad = r["padding"]
            cells.append(f"**{100 * pad['across']:.2f}%** / {100 * pad['oracle']:.2f}% / {100 * pad['shard']:.2f}%")
            if pad["across"] > pad["oracle"]:
                worse.append(f"{per} a shard at window {w}")
        rows.append(cells)
    head = ["shards of", *(f"window {w:,}" for w in windows)]
    verdict = "met at every layout and window" if not worse else "NOT met at " + ", ".join(worse)
    return ("Across shards (row groups of a Parquet file), each cell **across shards** / best-fit decreasing over each window "
            "of the stream (the oracle) / per shard:\n\n" + table(head, rows) +
            f"\n\nPadding across shards at most the oracle's: {verdict}.\n")


# The shard formats benchmark's kinds (hack/bench/formats.py), each with
# its title and the target against the best peer.
SHARD_FORMAT_KINDS = (("images", "WebDataset images, their bytes", 3), ("images-decoded", "WebDataset images decoded to 224×224", 3),
                      ("tokens", "Megatron documents (2048 tokens each)", None),
                      ("sequences", "Megatron sequences of 2048 tokens (shardfeed: spec.packing, concatenate; GPTDataset's columns)", 10))


def shard_formats_block(data: dict) -> str:
    """Issue 55's formats: shardfeed serving WebDataset tars and a Megatron
    indexed dataset beside those formats' own loaders (formats.py)."""
    v = data["versions"]
    out = [f"Command: `{data['command']}` (part of `make bench`), data sets at scale {data['scale']:g} "
           f"({data['datasets']['images']['rows']:,} images, {data['datasets']['tokens']['rows']:,} token documents), {data['runs']} runs "
           f"of each measurement, interleaved, each reading one shuffled epoch or {data['time_box']:g} s after its first batch († the time box "
           f"ended it); webdataset {v['webdataset']}, LitData {v['litdata']}, megatron-core {v['megatron-core']}; {data['machine']}. "
           f"The whole run took {data['seconds'] / 60:.1f} minutes.\n"]
    for kind, title, target in SHARD_FORMAT_KINDS:
        rows = [r for r in data["rows"] if r["kind"] == kind]
        if not rows:
            continue
        out.append(f"**{title}**, samples/s after the first batch, median [min–max]:\n")
        lines, verdicts = [], []
        limit = next((r for r in rows if r["workers"] < 0), None)
        for workers in sorted({r["workers"] for r in rows if r["workers"] >= 0}):
            at = [r for r in rows if r["workers"] == workers]
            ours = next(r for r in at if r["loader"] == "shardfeed")
            peers = [r for r in at if not r["loader"].startswith("shardfeed")]
            best = max(peers, key=lambda r: r["rate"]["median"])
            for r in at:
                st = Stat([r["rate"]["median"], r["rate"]["min"], r["rate"]["max"]])
                st.median, st.min, st.max = r["rate"]["median"], r["rate"]["min"], r["rate"]["max"]
                dagger = "" if r.get("complete", True) else " †"
                epoch = f"{r['epoch_rate']['median']:,.0f}".replace(",", " ") if "epoch_rate" in r else "–"
                if r.get("passes", 1) > 1:
                    epoch += f" ({r['passes']} passes ‡)"
                if r.get("once"):
                    epoch += " ¹"
                lines.append([r["loader"], str(workers), st.fmt(",.0f", r["loader"] == "shardfeed") + dagger,
                              f"{r['first']['median']:.2f} s", epoch, f"{r['rate']['median'] / best['rate']['median']:.2f}×" if r is ours else ""])
            ratio, low = ours["rate"]["median"] / best["rate"]["median"], ours["rate"]["min"] / best["rate"]["max"]
            verdict = f"{workers} workers: {ratio:.1f}× {best['loader']} ({low:.1f}× its best run against our worst)"
            if target:
                verdict += f", ≥ {target}×: {'met' if ratio >= target else 'NOT met'}"
            if limit:
                bound = limit["rate"]["median"] / best["rate"]["median"]
                verdict += (f"; shardfeed at {ours['rate']['median'] / limit['rate']['median']:.2f}× the decode limit, which is itself "
                            f"{bound:.2f}× {best['loader']}")
                if target and bound < target:
                    verdict += f" (≥ {target}× is out of any loader's reach on these cores)"
            verdicts.append(verdict)
        if limit:
            st = Stat([limit["rate"]["median"], limit["rate"]["min"], limit["rate"]["max"]])
            st.median, st.min, st.max = limit["rate"]["median"], limit["rate"]["min"], limit["rate"]["max"]
            lines.append([limit["loader"], "every core", st.fmt(",.0f", False), "–", "–", ""])
        out.append(table(["loader", "workers", "samples/s", "first batch", "samples/s from the constructor (‡: a peer's longer epoch)",
                          "shardfeed ÷ best peer"], lines))
        out.append("\n" + "; ".join(verdicts) + ".\n")
    return "\n".join(out)


def _stat(r: dict, key: str) -> "Stat":
    st = Stat([r[key]["median"], r[key]["min"], r[key]["max"]])
    st.median, st.min, st.max = r[key]["median"], r[key]["min"], r[key]["max"]
    return st


def video_block(data: dict) -> str:
    """Issue 92's rows: a LeRobot dataset's frames into torch, shardfeed's
    sidecar beside LeRobotDataset's pyav and torchcodec backends, and the
    decode limit (video.py). The targets are on the epoch's rate (from
    the constructor to the last batch): a loader that prefetches while
    its first batch is awaited would otherwise be credited with that."""
    v, d = data["versions"], data["dataset"]
    out = [f"Command: `{data['command']}` (part of `make bench`): LeRobot's own writer's dataset, {d['episodes']} episodes, "
           f"{d['frames']:,} frames at {d['fps']} fps, {d['cameras']} cameras of {d['size']} ({d['codec']}, {d['videos']} video files, "
           f"{d['video_bytes'] / 1e6:.1f} MB); a sample is a frame index with both cameras' frames (uint8, 3 × H × W), state, action, "
           f"task and indexes; batches of {d['batch']}, shuffled; {data['runs']} runs of each measurement, interleaved, each reading one "
           f"epoch or {data['time_box']:g} s after its first batch († the time box ended it); lerobot {v['lerobot']}, torch {v['torch']}, "
           f"torchcodec {v['torchcodec']}, PyAV {v['av']}; {data['machine']}; the sidecar's peak heap "
           f"{data.get('sidecar_peak_anon_mib', 0):,.0f} MiB. The whole run took {data['seconds'] / 60:.1f} minutes.\n"]
    rows = data["rows"]
    limit = next(r for r in rows if r["workers"] < 0)
    lines = []
    for r in sorted((r for r in rows if r["workers"] >= 0), key=lambda r: ("Lance" in r["loader"], r["workers"], not r["loader"].startswith("shardfeed"), r["loader"])):
        dagger = "" if r.get("complete", True) else " †"
        ours = r["loader"].startswith("shardfeed")
        lines.append([r["loader"], str(r["workers"]), _stat(r, "epoch_rate").fmt(",.0f", ours) + dagger, _stat(r, "rate").fmt(",.0f", False),
                      f"{r['first']['median']:.2f} s", f"{r['epoch_rate']['median'] / limit['rate']['median']:.2f}×"])
    lines.append([limit["loader"], "every core", _stat(limit, "rate").fmt(",.0f", False), "–", "–", "1.00×"])
    out.append(table(["loader", "workers", "samples/s, the epoch's (from the constructor)", "samples/s after the first batch",
                      "first batch", "÷ the limit"], lines))
    ours = max((r for r in rows if r["loader"] == "shardfeed"), key=lambda r: r["epoch_rate"]["median"])
    peers = [r for r in rows if r["workers"] >= 0 and not r["loader"].startswith("shardfeed") and "Lance" not in r["loader"]]
    best = max(peers, key=lambda r: r["epoch_rate"]["median"])
    to_limit = ours["epoch_rate"]["median"] / limit["rate"]["median"]
    to_peer = ours["epoch_rate"]["median"] / best["epoch_rate"]["median"]
    bound = limit["rate"]["median"] / best["epoch_rate"]["median"]
    verdict = (f"\nshardfeed at its best ({ours['workers']} workers): {to_limit:.2f}× the decode limit (≥ 0.8×: "
               f"{'met' if to_limit >= 0.8 else 'NOT met'}) and {to_peer:.1f}× the best peer, {best['loader']} at {best['workers']} workers "
               f"(≥ 3×: {'met' if to_peer >= 3 else 'NOT met'}); the limit is {bound:.1f}× that peer.\n")
    lance_ours = [r for r in rows if r["loader"].startswith("shardfeed") and "Lance" in r["loader"]]
    lance_peer = [r for r in rows if not r["loader"].startswith("shardfeed") and "Lance" in r["loader"]]
    if lance_ours and lance_peer:
        lo = max(lance_ours, key=lambda r: r["epoch_rate"]["median"])
        lp = max(lance_peer, key=lambda r: r["epoch_rate"]["median"])
        verdict += (f"The same data set in LeRobot's Lance layout (lerobot-lancedb {v.get('lerobot-lancedb', '?')}'s converter, "
                    f"pylance {v.get('pylance', '?')}): shardfeed at its best ({lo['workers']} workers) "
                    f"{lo['epoch_rate']['median'] / lp['epoch_rate']['median']:.1f}× lerobot-lancedb's LanceDBDataset at its best "
                    f"({lp['workers']} workers), and {lo['epoch_rate']['median'] / ours['epoch_rate']['median']:.2f}× shardfeed on the "
                    f"Parquet and MP4 files.\n")
    out.append(verdict)
    return "\n".join(out)


def tokenize_block(data: dict) -> str:
    """The Go tokenizer beside tokenizers' encode_batch (tokenizer_speed.py)."""
    out = [f"Command: `{data['command']}` (part of `make bench`): {data['texts']:,} texts ({data['bytes'] / 1e6:.1f} MB), {data['runs']} runs of "
           f"each measurement, each from a fresh tokenizer; tokenizers {data['tokenizers']}; {data['machine']}. "
           f"The whole run took {data['seconds'] / 60:.1f} minutes.\n"]
    lines, verdicts = [], []
    for kind in dict.fromkeys(r["tokenizer"] for r in data["rows"]):
        rows = [r for r in data["rows"] if r["tokenizer"] == kind]
        for cores in sorted({r["cores"] for r in rows}):
            at = [r for r in rows if r["cores"] == cores]
            ours = next(r for r in at if r["loader"].startswith("shardfeed"))
            theirs = next(r for r in at if not r["loader"].startswith("shardfeed"))
            for r in at:
                mb = Stat(r["mb_per_s"])
                tok = Stat([t / 1e6 for t in r["tokens_per_s"]])
                ratio = statistics.median(ours["mb_per_s"]) / statistics.median(theirs["mb_per_s"])
                lines.append([kind, r["loader"], str(cores), mb.fmt(".1f", r is ours), tok.fmt(".2f"), f"{ratio:.2f}×" if r is ours else ""])
            if cores == 1:
                verdicts.append(f"{kind}: {statistics.median(ours['mb_per_s']) / statistics.median(theirs['mb_per_s']):.1f}× tokenizers on one core "
                                f"(≥ 1×: {'met' if statistics.median(ours['mb_per_s']) >= statistics.median(theirs['mb_per_s']) else 'NOT met'})")
    out.append(table(["tokenizer.json", "encoder", "cores", "MB/s, median [min–max]", "M tokens/s", "shardfeed ÷ tokenizers"], lines))
    out.append("\n" + "; ".join(verdicts) + ".\n")
    return "\n".join(out)


def rawtext_block(data: dict) -> str:
    """Raw JSON Lines to packed input_ids, shardfeed's sidecar beside
    datasets' streaming map (rawtext.py)."""
    out = [f"Command: `{data['command']}` (part of `make bench`): {data['texts']:,} texts ({data['bytes'] / 1e6:.1f} MB) in JSON Lines, "
           f"sequences of {data['seqLength']} tokens, {data['batch']} a batch; {data['runs']} runs of at most {data['timeBox']:.0f} s each; "
           f"datasets {data['datasets']}; {data['machine']}. The whole run took {data['seconds'] / 60:.1f} minutes.\n"]
    rows = data["rows"]
    peer = statistics.median(rows[-1]["tokensPerSecond"])
    lines = []
    for r in rows:
        st = Stat([v / 1e6 for v in r["tokensPerSecond"]])
        ratio = statistics.median(r["tokensPerSecond"]) / peer
        lines.append([r["loader"], st.fmt(".2f", r is rows[0]), f"{ratio:.1f}×"])
    out.append(table(["loader", "M tokens/s, median [min–max]", "÷ datasets"], lines))
    uncached, cached = (statistics.median(r["tokensPerSecond"]) for r in rows[:2])
    out.append(f"\nshardfeed from raw text: {uncached / peer:.1f}× datasets' streaming map (≥ 3×: {'met' if uncached >= 3 * peer else 'NOT met'}); "
               f"an epoch from the cache of tokenized shards: {cached / uncached:.1f}× an uncached one.\n")
    return "\n".join(out)


def requests_block(data: dict) -> str:
    """Requests and time per epoch through the latency proxy (store_requests.py):
    shardfeed beside mosaicml-streaming and LitData on small objects, and
    shardfeed on small row groups of one object."""
    o = data["objects"]
    def n(x: int) -> str:
        return f"{x:,}".replace(",", " ")

    layouts = {"mds": f"MDS shards of 64 KiB ({n(o['mdsShards'])} objects)",
               "litdata": f"LitData chunks of 64 KB ({n(o['litdataChunks'])} objects)",
               "parquet": f"one Parquet file of {n(o['parquetRowGroups'])} row groups"}
    groups: dict[tuple, list[dict]] = {}
    for r in data["runs"]:
        groups.setdefault((r["loader"], r["layout"], r["shuffle"]), []).append(r)
    mib = data["samples"] * data["sampleBytes"] / 2**20
    lines, epochs = [], {}
    for (loader, layout, shuffle), rs in groups.items():
        epoch = Stat([r["epoch"] for r in rs])
        epochs[(loader, layout, shuffle)] = epoch.median
        lines.append([loader, layouts[layout] + (", shuffled" if shuffle else ", in order"),
                      Stat([r["requests"] for r in rs]).fmt(",.0f"),
                      Stat([r["counts"].get("bytesOut", 0) / 2**20 for r in rs]).fmt(".1f"),
                      Stat([r["first"] for r in rs]).fmt(".2f"), epoch.fmt(".1f", loader == "shardfeed"),
                      Stat([mib / r["epoch"] for r in rs]).fmt(".1f")])
    delay = data["delay"].replace("ms", " ms")
    out = [f"{n(data['samples'])} samples of {data['sampleBytes'] // 1024} KiB ({mib:.0f} MiB), one epoch at one rank, each loader "
           f"in a process of its own from an empty cache at its defaults, MinIO behind the latency proxy ({delay} before every "
           f"request); the requests and bytes are the proxy's counts. {max((len(rs) for rs in groups.values()), default=0)} runs "
           "(one for a loader whose epoch passed a minute: one request at a time, its time is its requests' delays).\n",
           table(["loader", "objects", "requests an epoch", "MiB through the proxy", "first batch (s)", "epoch (s)", "samples' MiB/s over the epoch"], lines)]
    sf = epochs.get(("shardfeed", "mds", True))
    peers = {k[0]: v for k, v in epochs.items() if k[0] != "shardfeed"}
    if sf and peers:
        best, t = min(peers.items(), key=lambda kv: kv[1])
        out.append(f"\nshardfeed's epoch of small objects: {t / sf:.1f}× the speed of the fastest peer's ({best}, {t:.1f} s against {sf:.1f} s; "
                   f"≥ 1: {'met' if sf <= t else 'NOT met'}).\n")
    return "\n".join(out)


def decode_block(go: GoResults) -> str:
    """One image decoded and resized on one core, in each build, at full
    size and in draft mode (the DCT's reduced sizes; the cgo build only)."""
    rows = []
    for name, build in (("BenchmarkDecodeResizeCropLibjpeg", "libjpeg-turbo (cgo: the image's sidecar)"),
                        ("BenchmarkDecodeResizeCrop", "Go's image/jpeg (the portable binary)")):
        for size, mode in (("448x360", "full"), ("1024x768", "full"), ("1024x768/draft", "draft")):
            if mode == "draft" and "Libjpeg" not in name:
                continue  # the portable build decodes at full size
            st = go.stat(f"sidecar/images/{name}/{size}", "ns/op")
            if st:
                rows.append([build, size.split("/")[0].replace("x", " × "), mode, st.scaled(1e-6).fmt(".2f"),
                             f"{1e9 / st.median:,.0f}".replace(",", " ")])
    if not rows:
        return "(not measured in the last run)"
    return ("`BenchmarkDecodeResizeCrop` in `sidecar/images` (`-tags libjpeg` for the cgo build): a noisy JPEG (448 × 360 "
            "as the data set's, and 1024 × 768), decoded, resized to 256 and centre-cropped to 224 × 224 on one core; "
            "draft: `image.draft: true`, decoded at 1/2 of its size by the DCT first.\n\n" +
            table(["JPEG decoder", "image", "decode", "ms an image", "images/s a core (median)"], rows))


def formats_block(go: GoResults) -> str:
    rows = []
    for pkg, name, label, data in (
            ("mds", "tokens/compression=", "MDS, raw", "tokens (`ndarray:int32:2048`)"),
            ("mds", "tokens/compression=zstd:3", "MDS, zstd:3", "tokens"),
            ("mds", "images/compression=", "MDS, raw", "images (`jpeg` bytes)"),
            ("mds", "images/compression=zstd:3", "MDS, zstd:3", "images"),
            ("parquet", "tokens", "Parquet (zstd, one row group)", "tokens (`fixed_size_list<int32>[2048]`)"),
            ("parquet", "images", "Parquet (zstd, one row group)", "images (`binary`)")):
        key = f"sidecar/format/{pkg}/BenchmarkDecode/{name}"
        mb, sps = go.stat(key, "MB/s"), go.stat(key, "samples/s")
        if mb and sps:
            rows.append([label, data, mb.fmt(",.0f"), sps.fmt(",.0f")])
    mb, sps = go.stat("sidecar/format/text/BenchmarkDecodeJSONL", "MB/s"), go.stat("sidecar/format/text/BenchmarkDecodeJSONL", "samples/s")
    if mb and sps:
        rows.append(["JSON Lines", "tokens (a list of 2048 integers per line)", mb.fmt(",.1f"), sps.fmt(",.0f")])
    out = table(["format", "data", "MB/s", "samples/s"], rows)
    dl = []
    for p in (1, 4, 16):
        s = go.stat(f"sidecar/cache/BenchmarkDownload/parallel={p}", "MB/s")
        if s:
            dl.append([f"{p} parallel download{'s' if p > 1 else ''}", s.fmt(",.0f")])
    if dl:
        out += "\n\n" + table(["MinIO (loopback) → cache, 32 shards of 8 MiB, xxh3 checked, renamed into place", "MB/s"], dl)
    return out


def socket_block(go: GoResults) -> str:
    rows = []
    for data in ("tokens", "blobs"):
        ceiling = go.stat(f"test/sidecar/BenchmarkServeSocket/{data}/raw-socket", "MB/s")
        for reader, label, unit in (("go-client", "Go client", "MB/s"), ("pyarrow", "pyarrow", "reader-MB/s"),
                                    ("raw-socket", "raw socket copy (ceiling)", "MB/s")):
            key = f"test/sidecar/BenchmarkServeSocket/{data}/{reader}"
            mb, bps = go.stat(key, unit), go.stat(key, "batches/s")
            if mb and bps:
                ratio = f"{mb.median / ceiling.median:.2f}" if ceiling else "–"
                rows.append([data, label, mb.fmt(",.0f"), bps.fmt(",.0f"), ratio])
    return table(["data", "reader", "MB/s", "batches/s", "× raw ceiling"], rows)


def first_batch_block(go: GoResults) -> str:
    rows = []
    for splits, block, label in ((1, 4096, "1 split, blockSize 4096 (32 MiB)"), (8, 256, "8 splits, blockSize 256 (2 MiB per split)"),
                                 (8, 4096, "8 splits, blockSize 4096 (= the split, 16 MiB)")):
        key = f"test/sidecar/BenchmarkServeFirstBatch/splits={splits}/block={block}"
        ms, mib = go.stat(key, "ms/first-batch"), go.stat(key, "MiB-fetched")
        if ms and mib:
            rows.append([label, f"{mib.median:.0f} MiB", ms.fmt(",.0f", splits == 1, "ms")])
    key = "test/sidecar/BenchmarkServeFirstBatchLance"
    ms, mib = go.stat(key, "ms/first-batch"), go.stat(key, "MiB-fetched")
    if ms and mib:
        rows.append(["the same tokens as a Lance table (format: lance, shards of about 8 MiB), 1 split, blockSize 4096",
                     f"{mib.median:.0f} MiB", ms.fmt(",.0f", True, "ms")])
    return table(["tokens, 128 MiB in 16 shards of 8 MiB", "fetched first", "first batch"], rows)


def control_plane_block(go: GoResults) -> str:
    rows = []
    key = "controllers/BenchmarkPodAdmission"
    p50, p99, rate = go.stat(key, "p50-ms"), go.stat(key, "p99-ms"), go.stat(key, "pods/s")
    requests = go.stat(key, "api-requests/pod")
    if p50 and p99 and rate:
        cost = f"; {requests.fmt(',.3f')} API requests per admission beside the webhook's cache" if requests else ""
        rows.append(["1000 labelled pods of an Indexed Job created in a burst (16 at a time) through the API server, which calls "
                     "the pod webhook over TLS", f"p50 {p50.fmt(',.0f', True, 'ms')}, p99 {p99.fmt(',.0f', True, 'ms')} per pod as the "
                     f"client sees it; {rate.fmt(',.0f')} pods/s{cost}; every pod injected"])
    key = "controllers/BenchmarkReconcile100kShards"
    t, size = go.stat(key, "ns/op"), go.stat(key, "plan-configmap-bytes")
    if t and size:
        rows.append(["one reconcile of a dataset whose index lists 100 000 shards in MinIO (read the index, plan, apply the plan "
                     "ConfigMap, write the status)", f"{fmt_ns(t, True)}; the plan ConfigMap stays {size.median / 1e3:.1f} KB "
                     "(parameters and index digests, not the index)"])
    return table(["benchmark", "result"], rows)


def egress_block(go: GoResults | None, egress: dict | None, img: Path) -> str:
    worlds = sorted({int(w) for w in (egress or {}).get("worlds", {})} |
                    {int(k.rsplit("=", 1)[1]) for k in (go.runs if go else {}) if "BenchmarkEgress/world=" in k})
    cols = {"shardfeed": [], "mosaicml-streaming": [], "DistributedSampler": []}
    rows = []
    for w in worlds:
        sf = go.stat(f"test/sidecar/BenchmarkEgress/world={w}", "shardfeed-egress-x") if go else None
        e = (egress or {}).get("worlds", {}).get(str(w), {})
        ms, ds = e.get("mosaicml-streaming"), e.get("DistributedSampler")
        cols["shardfeed"].append(sf.median if sf else None)
        cols["mosaicml-streaming"].append(ms)
        cols["DistributedSampler"].append(ds)
        req = go.stat(f"test/sidecar/BenchmarkEgress/world={w}", "shardfeed-requests/epoch") if go else None
        # Cold starts side by side at one pod only: mosaicml-streaming's
        # ranks start together (one torch.distributed group) on the
        # machine's two cores, shardfeed's pods one after the other.
        cold = go.stat(f"test/sidecar/BenchmarkEgress/world={w}", "shardfeed-cold-first-batch-s") if go and w == 1 else None
        mcold = e.get("cold_first_batch_s", {}).get("mosaicml-streaming") if w == 1 else None
        rows.append([str(w), f"{sf.median:.3f}" if sf else "–", f"{req.median:,.0f}".replace(",", " ") if req else "–",
                     f"{ms:.3f}" if ms is not None else "–", f"{ds:.2f}" if ds is not None else "–",
                     cold.fmt(".2f") if cold else "–", f"{mcold:.2f}" if mcold is not None else "–"])
    if worlds:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for name, style, size in (("shardfeed", "o-", 9), ("mosaicml-streaming", "^:", 6), ("DistributedSampler", "s--", 6)):
            pts = [(w, v) for w, v in zip(worlds, cols[name]) if v is not None]
            if pts:
                ax.plot(*zip(*pts), style, label=name, markersize=size)
        ax.set(xscale="log", yscale="log", xlabel="world size (one rank per pod)", ylabel="bytes fetched / dataset bytes",
               title="Egress per epoch")
        ax.set_xticks(worlds, [str(w) for w in worlds])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        save(fig, img / "egress.png")
    return table(["world size (pods)", "shardfeed", "shardfeed: requests to the store, all pods", "mosaicml-streaming (over MinIO)",
                  "torch DistributedSampler", "shardfeed: first batch from an empty cache (s)", "mosaicml-streaming: the same (s)"], rows) + \
        "\n\n![Egress ratio vs world size](img/egress.png)" + resume_block(go, egress)


def resume_block(go: GoResults | None, egress: dict | None) -> str:
    """One pod from MinIO with an empty cache: its cold start, and a resume
    on a new node at 90 % of its epoch; shardfeed (BenchmarkEgress) beside
    mosaicml-streaming and LitData (egress.py)."""
    key = "test/sidecar/BenchmarkEgress/world=1"
    e = egress or {}
    at = e.get("resume", {}).get("at", 0.9)

    def go_stat(metric: str) -> Stat | None:
        return go.stat(key, metric) if go else None

    rows = []
    for name, prefix in (("shardfeed, shuffle blocks of 1024 samples (8 shards)", "shardfeed-"),
                         ("shardfeed, shuffle blocks of 128 samples (about 1 shard)", "shardfeed-block128-")):
        cold = go_stat("shardfeed-cold-first-batch-s") if prefix == "shardfeed-" else None
        first, fetched = go_stat(prefix + "cold-resume-first-batch-s"), go_stat(prefix + "cold-resume-egress-x")
        if first and fetched:
            rows.append([name, cold.fmt(".2f") if cold else "–", first.fmt(".2f"), f"{fetched.median:.3f}"])
    for name in ("mosaicml-streaming", "LitData"):
        cold = e.get("worlds", {}).get("1", {}).get("cold_first_batch_s", {}).get(name)
        cold = cold if cold is not None else e.get("cold", {}).get(name, {}).get("first_s")
        r = e.get("resume", {}).get(name)
        if r or cold is not None:
            rows.append([name, f"{cold:.2f}" if cold is not None else "–", f"{r['first_s']:.2f}" if r else "–",
                         f"{r['egress_x']:.3f}" if r else "–"])
    if not rows:
        return ""
    return (f"\n\nOne pod from MinIO, its cache empty: the first batch of an epoch, and the rest of an epoch resumed at {at:.0%} "
            "on a new node:\n\n" +
            table(["loader", "first batch from an empty cache (s)", f"first batch after a resume at {at:.0%} (s)",
                   "bytes fetched for the rest / dataset bytes"], rows))


# --- loaders ------------------------------------------------------------------------------------


def gbps(row: dict, ds: dict) -> Stat:
    return Stat.of(row["rate"]).scaled(ds["sample_bytes"] / 1e9)


def loaders_block(data: dict, kind: str) -> str:
    ds = data["datasets"][kind]
    rows = [r for r in data["rows"] if r["kind"] == kind]
    if not rows:
        return "(not measured in the last run)"
    limit = next((r["rate"]["median"] for r in rows if r["loader"] in (LIMIT, DECODE_LIMIT)), None)
    out = []
    for r in rows:
        rate = Stat.of(r["rate"])
        # Decoding, shardfeed's sidecar takes the cores the peers' workers
        # would: it is set against the best peer at any number of workers
        # (the user's own decode in workers, at the same workers).
        best = best_peer(rows, None if kind == "images-decoded" and r["loader"] != USER_DECODE_ROW else r["workers"])
        mine = r["loader"].startswith("shardfeed")
        vs_peer = f"{rate.median / best[1]:.1f} ({best[0]})" if mine and best and "resumed" not in r["loader"] else "–"
        # Decoded images are set against the decode limit at any number of
        # workers: it is every core's.
        vs_limit = (f"{rate.median / limit:.2f}" if limit and "resumed" not in r["loader"] and (r["workers"] == 0 or kind == "images-decoded")
                    else "–")
        boxed = "" if r["complete"] else " †"
        steady = Stat.of(r["steady"]).fmt(",.0f") if "steady" in r else "–"
        out.append([r["loader"], "every core" if r["workers"] < 0 else str(r["workers"]), rate.fmt(",.0f", mine and r["workers"] == 0 and "resumed" not in r["loader"]) + boxed, steady,
                    f"{gbps(r, ds).median:.2f}",
                    vs_peer, vs_limit, Stat.of(r["first"]).fmt(".2f"),
                    f"{r['epoch_rate']['median']:,.0f}".replace(",", " ") + (f" ({r['passes']} passes ‡)" if r.get("passes", 1) > 1 else "")
                    + (" ¹" if r.get("once") else ""),
                    f"{r['rss_mib']:.0f}" if r["rss_mib"] else "–", f"{r['worker_rss_mib']:.0f}" if r["workers"] > 0 else "–"])
    anon = ds.get("sidecar_anon_mib", {})
    sidecar = ", ".join(f"{v:.0f} MiB of which {anon[b]:.0f} MiB heap (batches of {b})" if b in anon else f"{v:.0f} MiB (batches of {b})"
                        for b, v in ds.get("sidecar_rss_mib", {}).items())
    mb = ds["bytes"]
    rows_n = f"{ds['rows']:,}".replace(",", " ")
    litdata = f", {mb['litdata'] / 1e9:.2f} GB as LitData chunks" if "litdata" in mb else ""
    head = (f"{rows_n} samples ({mb['mds'] / 1e9:.2f} GB as MDS, {mb['parquet'] / 1e9:.2f} GB as Parquet, "
            f"{mb['lance'] / 1e9:.2f} GB as Lance{litdata}), batches of {ds['batch']}, "
            f"{ds['sample_bytes']:.0f} bytes a sample. Peak memory of the shardfeed sidecar: {sidecar}. "
            "† marks a measurement the time box ended before the epoch did; ‡ a peer whose first batch took more than a tenth of "
            "its epoch, measured over an epoch of that many passes over the data (one loader built, iterated again), so that its "
            "start is at most a tenth of it; ¹ such an epoch of a minute or more, measured once, its range over the thirds of it. \"samples/s\" is the rate after the first batch; \"samples/s from the constructor\" the "
            "epoch's samples over the time from building the loader to its last batch (to the time box's end where † ends it).")
    return head + "\n\n" + table(["loader", "workers", "samples/s", "steady samples/s (second half)", "GB/s", "× the best peer (same workers)", "× the limit", "first batch (s)",
                                  "samples/s from the constructor", "trainer peak RSS (MiB)", "largest worker peak RSS (MiB)"], out)


def num(x: float) -> str:
    """x to the unit, thousands apart by a space."""
    return f"{x:,.0f}".replace(",", " ")


def peer_rate(r: dict) -> float:
    """A peer row's figure: its rate after the first batch, or the rate of
    the second half of its window where that is higher (a peer still
    ramping up is set against at its steady rate)."""
    return max(r["rate"]["median"], r.get("steady", {}).get("median", 0.0))


def best_peer(rows: list[dict], workers: int | None) -> tuple[str, float] | None:
    """The fastest peer's (name, samples/s) with that many workers (None:
    any), each at its best (peer_rate)."""
    rates = [(peer_rate(r), r["loader"]) for r in rows if r["loader"] in PEERS and (workers is None or r["workers"] == workers)]
    if not rates:
        return None
    rate, name = max(rates)
    return name, rate


LANCE = "shardfeed, on the Lance table (format: lance)"
BYTES_ROW = 'shardfeed, values copied to bytes (binary_as="bytes")'


def lance_block(data: dict) -> str:
    """The Lance issue's targets: shardfeed reading the Lance table natively
    against lancedb's StreamingDataset on the same table (≥ 10×) and
    against shardfeed on the same data as MDS (≥ 0.8×), no workers."""
    lines = []
    for kind in ("tokens", "images", "tabular"):
        rows = {(r["loader"], r["workers"]): r for r in data["rows"] if r["kind"] == kind}
        lance, mds = rows.get((LANCE, 0)), rows.get(("shardfeed", 0))
        peer = [peer_rate(r) for (name, _), r in rows.items() if name == "lancedb"]
        if not lance or not mds:
            continue
        x = Stat.of(lance["rate"])
        parts = [f"{num(x.median)} samples/s [{num(x.min)}–{num(x.max)}], first batch {Stat.of(lance['first']).fmt('.2f')} s"]
        if peer:
            y = x.median / max(peer)
            parts.append(f"**{y:.1f}×** lancedb's StreamingDataset at its best worker count ({num(max(peer))}; "
                         f"≥ 10×: {'met' if y >= 10 else 'NOT met'})")
        limit = rows.get((LIMIT, 0))
        if limit:
            parts.append(f"{x.median / limit['rate']['median']:.2f}× the machine's one-copy limit ({num(limit['rate']['median'])})")
        z = x.median / mds["rate"]["median"]
        parts.append(f"**{z:.2f}×** shardfeed on the same data as MDS ({num(mds['rate']['median'])}; ≥ 0.8×: {'met' if z >= 0.8 else 'NOT met'})")
        bytes_row = rows.get((BYTES_ROW, 0))
        if bytes_row:  # images: both shardfeed rows hand the values over as uint8 tensors
            parts.append(f'each image a uint8 tensor viewing the batch (`binary_as="array"`; shardfeed on MDS copying them '
                         f"to bytes as the peers do: {num(bytes_row['rate']['median'])})")
        lines.append(f"- {kind.capitalize()}: " + ", ".join(parts) + ".")
    return "\n".join(lines) or "(the Lance rows were not measured in the last run)"


def epoch_rates_line(rows: list[dict]) -> str:
    """shardfeed (no workers) against the best peer by the epoch's rate
    from the constructor to the last batch (a peer of a long start over
    its longer epoch)."""
    ours = next((r for r in rows if r["loader"] == "shardfeed" and r["workers"] == 0), None)
    peers = [r for r in rows if r["loader"] in PEERS and "epoch_rate" in r]
    if not ours or not peers:
        return ""
    best = max(peers, key=lambda r: r["epoch_rate"]["median"])
    e = ours["epoch_rate"]["median"]
    passes = f", an epoch of {best['passes']} passes" if best.get("passes", 1) > 1 else ""
    return (f"; from the constructor to the last batch, {num(e)} samples/s against the best peer's {num(best['epoch_rate']['median'])} "
            f"({best['loader']}, {best['workers']} workers{passes}): **{e / best['epoch_rate']['median']:.1f}×**")


def targets_block(data: dict, go: GoResults | None = None) -> str:
    """The performance issue's targets (tokens, no workers), checked against this run."""
    listed = [r for r in data["rows"] if r["kind"] == "tokens"]
    rows = {(r["loader"], r["workers"]): r for r in listed}
    ds = data["datasets"].get("tokens")
    if not ds or ("shardfeed", 0) not in rows:
        return "(tokens not measured in the last run)"
    sf = Stat.of(rows[("shardfeed", 0)]["rate"])
    lines = []
    if (LIMIT, 0) in rows:
        limit = rows[(LIMIT, 0)]["rate"]["median"]
        x = sf.median / limit
        lines.append(f"- ≥ 0.8× the one-copy limit ({num(limit)} samples/s in this run): **{x:.2f}×** "
                     f"[{sf.min / limit:.2f}–{sf.max / limit:.2f}] ({'met' if x >= 0.8 else 'NOT met'}).")
    if (LIMIT_GATHER, 0) in rows:
        gather = rows[(LIMIT_GATHER, 0)]["rate"]["median"]
        lines.append(f"- Against the one-copy gather of the same shuffled rows ({num(gather)} samples/s in this run; "
                     f"no target): **{sf.median / gather:.2f}×** [{sf.min / gather:.2f}–{sf.max / gather:.2f}].")
    best = best_peer(listed, None)
    if best:
        x = sf.median / best[1]
        bound = ""
        if x < 10 and (LIMIT, 0) in rows:
            # What a loader that copies each batch once can reach at most.
            b = rows[(LIMIT, 0)]["rate"]["median"] / best[1]
            bound = f"; the one-copy limit itself is {b:.1f}× that peer"
        lines.append(f"- ≥ 10× the best peer ({best[0]}, {num(best[1])} samples/s at its best worker count): **{x:.1f}×** "
                     f"({'met' if x >= 10 else 'NOT met'}{bound}). Rates after the first batch (a peer's steady rate where higher)"
                     + epoch_rates_line(listed) + ".")
    runs = rows.get((RUNS, 0))
    if runs and (LIMIT, 0) in rows:
        r = Stat.of(runs["rate"])
        limit = rows[(LIMIT, 0)]["rate"]["median"]
        x = r.median / limit
        parts = [f"**{x:.2f}×** [{r.min / limit:.2f}–{r.max / limit:.2f}] the one-copy limit ({'met' if x >= 0.8 else 'NOT met'})"]
        if (LIMIT_GATHER_RUNS, 0) in rows:
            g = rows[(LIMIT_GATHER_RUNS, 0)]["rate"]["median"]
            parts.append(f"{r.median / g:.2f}× its gathered copy ({num(g)} samples/s)")
        if best:
            y = r.median / best[1]
            parts.append(f"**{y:.1f}×** the best peer ({'met' if y >= 10 else 'NOT met'})")
        lines.append(f"- Shuffled in runs of {RUN} samples (`shuffle.runLength: {RUN}`, [planner.md](planner.md#runs)), "
                     f"{num(r.median)} samples/s: " + ", ".join(parts) + ".")
    sock = rows.get(("shardfeed, through the socket", 0))
    if sock:
        lines.append(f"- The hand-off through shared memory against the socket: **{sf.median / sock['rate']['median']:.2f}×**.")
    first, rerun = rows.get((FIRST_EPOCH_ROW, 0)), rows.get((FIRST_EPOCH_RERUN_ROW, 0))
    if first and (LIMIT, 0) in rows:
        limit = rows[(LIMIT, 0)]["rate"]["median"]
        f = Stat.of(first["rate"])
        x, y = f.median / limit, sf.median / limit
        line = (f"- From local files, the first epoch of a new sidecar (every shard verified and mapped in place as it is first "
                f"read) against a later epoch: **{x:.2f}×** [{f.min / limit:.2f}–{f.max / limit:.2f}] and **{y:.2f}×** the one-copy "
                f"limit (≥ 0.8× each: {'met' if min(x, y) >= 0.8 else 'NOT met'})")
        if rerun:
            r = Stat.of(rerun["rate"])
            line += (f"; the first epoch of the next run's sidecar (files verified before, not hashed again): "
                     f"**{r.median / limit:.2f}×** [{r.min / limit:.2f}–{r.max / limit:.2f}]")
        lines.append(line + "." + first_epoch_bound(go, ds, sf.median, f.median, limit))
    return "\n".join(lines + workers_lines(data) + tabular_lines(data) + decoded_lines(data))


def first_epoch_bound(go: GoResults | None, ds: dict, later: float, first: float, limit: float) -> str:
    """The first epoch's bound: a later epoch's reading, plus verifying
    every byte of the data set by its hash through the mapping that serves
    it (BenchmarkInPlaceFirstRead/verify, one core), in series."""
    verify = go.stat("sidecar/cache/BenchmarkInPlaceFirstRead/verify", "MB/s") if go else None
    if not verify:
        return ""
    data, n = ds["bytes"]["mds"], ds["rows"]
    bound = 1 / (1 / later + data / (verify.median * 1e6) / n)
    return (f" Its bound: a later epoch's reading ({num(later)} samples/s) and the verification of the data set's "
            f"{data / 1e9:.2f} GB by its hash through the mapping that serves it ({verify.median / 1e3:.1f} GB/s on one core, "
            f"`BenchmarkInPlaceFirstRead`), one after the other, is {num(bound)} samples/s, {bound / limit:.2f}× the one-copy limit: "
            f"the first epoch is at **{first / bound:.2f}×** that bound; 0.8× the limit needs the hash off the epoch's path "
            f"(verified ahead on the other core) and a later epoch itself at 0.8×.")


FIRST_EPOCH_ROW = "shardfeed, first epoch of a new sidecar (files verified and read in place)"
FIRST_EPOCH_RERUN_ROW = "shardfeed, first epoch of the next run's sidecar (files verified before)"


RELAY_ROW = "shardfeed, batches passed on by the workers (a worker_init_fn)"


def workers_lines(data: dict) -> list[str]:
    """Round three's workers target: with 2 DataLoader workers, ≥ 0.8× the
    rate with none, on tokens, images and tabular; and what workers that
    run (a worker_init_fn) and pass each batch on cost."""
    lines = []
    for kind in ("tokens", "images", "tabular"):
        rows = {(r["loader"], r["workers"]): r for r in data["rows"] if r["kind"] == kind}
        none, two, relay = rows.get(("shardfeed", 0)), rows.get(("shardfeed", 2)), rows.get((RELAY_ROW, 2))
        if not none or not two:
            continue
        x = two["rate"]["median"] / none["rate"]["median"]
        line = (f"- {kind.capitalize()}, `FeedLoader(num_workers=2)` against no workers: **{x:.2f}×** "
                f"({num(two['rate']['median'])} against {num(none['rate']['median'])} samples/s; ≥ 0.8×: {'met' if x >= 0.8 else 'NOT met'})")
        if relay:
            line += f"; with the workers started and passing each batch on: {relay['rate']['median'] / none['rate']['median']:.2f}×"
        lines.append(line + ".")
    return lines


def tabular_lines(data: dict) -> list[str]:
    """Round three's tabular target, no workers: ≥ 0.8× the one-copy limit
    and ≥ 3× the best peer."""
    listed = [r for r in data["rows"] if r["kind"] == "tabular"]
    rows = {(r["loader"], r["workers"]): r for r in listed}
    # The limit makes the same Python strings every loader here hands
    # over: what no loader can beat with that output.
    return target_line("Tabular", rows.get(("shardfeed", 0)), rows.get((LIMIT, 0)), best_peer(listed, None),
                       "the one-copy limit", "", "that hands strings over as Python objects", limit_first=True)


def decoded_lines(data: dict) -> list[str]:
    """Round three's decoded images target, in the libjpeg-turbo build:
    ≥ 3× the best peer and ≥ 0.8× the decode limit."""
    listed = [r for r in data["rows"] if r["kind"] == "images-decoded"]
    rows = {r["loader"]: r for r in listed}
    # Decoding each JPEG in full is what no loader here skips.
    return target_line("Images decoded and resized in the sidecar (libjpeg-turbo build)", rows.get("shardfeed, libjpeg-turbo build (cgo)"),
                       rows.get(DECODE_LIMIT), best_peer(listed, None), "the decode limit",
                       "libjpeg-turbo's decode alone on every core, ", "that decodes each image in full")


USER_DECODE_ROW = "shardfeed, JPEG decoded by the user's code in the DataLoader workers (Pillow)"
USER_DECODE_LIMIT = "the user's decode limit: JPEG bytes in memory, the same decode in the same DataLoader workers (no loader)"


def user_decode_block(data: dict) -> str:
    """Issue 94's user-decode rows: the JPEG bytes decoded and resized by
    the user's own code in the DataLoader workers, shardfeed (a dataset of
    the user's around the FeedDataset) beside the peers' decode rows at the
    same workers; the target: at least the best peer; with the sidecar's
    CPU a served image."""
    ours = [r for r in data["rows"] if r["kind"] in ("images-decoded", "images") and r["loader"] == USER_DECODE_ROW]
    peers = [r for r in data["rows"] if r["kind"] == "images-decoded" and r["loader"] in PEERS]
    limits = {r["workers"]: r for r in data["rows"] if r["kind"] in ("images-decoded", "images") and r["loader"] == USER_DECODE_LIMIT}
    if not ours:
        return "(not measured in the last run)"
    rows, lines = [], []
    for r in sorted(ours, key=lambda r: r["workers"]):
        same = [p for p in peers if p["workers"] == r["workers"]]
        x = Stat.of(r["rate"])
        cpu = Stat.of(r["sidecar_cpu_per_sample"]).scaled(1e3).fmt(".2f") if "sidecar_cpu_per_sample" in r else "–"
        rows.append(["shardfeed (the user's decode)", str(r["workers"]), x.fmt(",.0f", True), Stat.of(r["first"]).fmt(".2f"),
                     f"{r['epoch_rate']['median']:,.0f}".replace(",", " "), cpu])
        for p in same:
            rows.append([p["loader"], str(p["workers"]), Stat.of(p["rate"]).fmt(",.0f"), Stat.of(p["first"]).fmt(".2f"),
                         f"{p['epoch_rate']['median']:,.0f}".replace(",", " "), "–"])
        limit = limits.get(r["workers"])
        if limit:
            rows.append(["the limit: the bytes in memory, the same decode in the same workers (no loader)", str(r["workers"]),
                         Stat.of(limit["rate"]).fmt(",.0f"), Stat.of(limit["first"]).fmt(".2f"),
                         f"{limit['epoch_rate']['median']:,.0f}".replace(",", " "), "–"])
        if same:
            best = max(same, key=peer_rate)
            y = x.median / peer_rate(best)
            line = (f"- {r['workers']} workers: {num(x.median)} images/s, **{y:.2f}×** the best peer ({best['loader']}, "
                    f"{num(peer_rate(best))}; ≥ 1×: {'met' if y >= 1 else 'NOT met'}), the sidecar {cpu} ms of CPU an image")
            if limit:
                lim = limit["rate"]["median"]
                line += (f"; the limit (the bytes in memory, the same decode in the same workers) {num(lim)}: shardfeed at "
                         f"{x.median / lim:.2f}× it, {best['loader']} at {peer_rate(best) / lim:.2f}×")
            lines.append(line + ".")
    return (table(["loader", "workers", "images/s after the first batch", "first batch (s)", "images/s from the constructor",
                   "sidecar CPU an image (ms)"], rows) + "\n\nTarget (at least the best peer at the same workers; rates after the first "
            "batch, a peer's steady rate where higher):\n\n" + "\n".join(lines))


def target_line(title: str, sf: dict | None, limit: dict | None, best: tuple[str, float] | None, limit_name: str, limit_what: str,
                bound_why: str, limit_first: bool = False) -> list[str]:
    """A round three target line: shardfeed's row against its limit
    (≥ 0.8×) and the best peer (≥ 3×), saying where the limit itself puts
    3× out of reach (no loader passes it in the way bound_why says)."""
    if not sf:
        return []
    x = Stat.of(sf["rate"])
    parts = []
    if limit:
        lim = limit["rate"]["median"]
        y = x.median / lim
        parts.append(f"**{y:.2f}×** [{x.min / lim:.2f}–{x.max / lim:.2f}] {limit_name} "
                     f"({limit_what}{num(lim)}; ≥ 0.8×: {'met' if y >= 0.8 else 'NOT met'})")
    if best:
        y = x.median / best[1]
        verdict = f"**{y:.1f}×** the best peer ({best[0]}, {num(best[1])} at its best worker count; ≥ 3×: {'met' if y >= 3 else 'NOT met'}"
        if limit and y < 3:
            bound = limit["rate"]["median"] / best[1]
            verdict += f"; {limit_name} itself is {bound:.1f}× that peer" + (
                f", so ≥ 3× is out of reach of any loader {bound_why}" if bound < 3 else "")
        parts.insert(len(parts) if limit_first else 0, verdict + ")")
    return [f"- {title}, {num(x.median)} samples/s: " + ", ".join(parts) + "."] if parts else []


def loader_plots(data: dict, img: Path) -> None:
    import matplotlib.pyplot as plt

    names = ("shardfeed", "LitData", "mosaicml-streaming", "lancedb", "torch-dataloader-utils")
    kinds = [k for k in ("tokens", "images", "tabular") if any(r["kind"] == k for r in data["rows"])]
    if kinds:
        fig, axes = plt.subplots(1, len(kinds), figsize=(4 * len(kinds), 3.6), squeeze=False)
        for ax, kind in zip(axes[0], kinds):
            for name, style in zip(names, ("o-", "v-", "^-", "s-", "x-")):
                pts = sorted((r["workers"], r["rate"]["median"]) for r in data["rows"] if r["kind"] == kind and r["loader"] == name)
                if pts:
                    ax.plot(*zip(*pts), style, label=name)
            ax.set(yscale="log", xlabel="DataLoader workers", ylabel="samples/s", title=f"{kind} (batch {data['datasets'][kind]['batch']})")
            ax.set_xticks(sorted({r["workers"] for r in data["rows"] if r["kind"] == kind}))
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].legend()
        save(fig, img / "loaders-workers.png")
    sweep = data.get("sweep", [])
    if sweep:
        ds = data["datasets"]["tokens"]
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for name, style in zip((*names[:4], "pyarrow (Parquet, in order)"), ("o-", "v-", "^-", "s-", "d--")):
            pts = sorted({(r["batch"], r["rate"]["median"] * ds["sample_bytes"] / 1e9) for r in sweep if r["loader"] == name})
            if pts:
                ax.plot(*zip(*pts), style, label=name.split(" (")[0])
        ax.set(xscale="log", yscale="log", xlabel="batch size (samples of 8 KiB)", ylabel="GB/s into torch",
               title="tokens, 0 workers")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        save(fig, img / "loaders-batch.png")


def sweep_block(data: dict) -> str:
    ds = data["datasets"].get("tokens")
    sweep = data.get("sweep", [])
    if not ds or not sweep:
        return "(not measured in the last run)"
    batches = sorted({r["batch"] for r in sweep})
    loaders = [n for n in ("shardfeed", "LitData", "mosaicml-streaming", "lancedb", "pyarrow (Parquet, in order)") if any(r["loader"] == n for r in sweep)]
    rows = []
    for name in loaders:
        cells = [name]
        for b in batches:
            r = next((r for r in sweep if r["loader"] == name and r["batch"] == b), None)
            cells.append(f"{r['rate']['median']:,.0f} ({gbps(r, ds).median:.2f} GB/s)".replace(",", " ") if r else "–")
        rows.append(cells)
    return table(["loader (0 workers), samples/s (GB/s)", *[f"batch {b}" for b in batches]], rows) + \
        "\n\n![Throughput vs batch size](img/loaders-batch.png)"


# --- plumbing -----------------------------------------------------------------------------------


def save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    # Fixed metadata so that an unchanged figure gives an unchanged file.
    fig.savefig(path, dpi=110, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    log(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def fill(doc: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- bench:{re.escape(name)} -->\n)(?:.*?\n)?(<!-- /bench:{re.escape(name)} -->)", re.S)
    if not pattern.search(doc):
        raise SystemExit(f"the document has no block '<!-- bench:{name} -->' … '<!-- /bench:{name} -->': "
                         "restore it (git checkout docs/benchmarks.md) or add it where the figures belong")
    return pattern.sub(lambda m: m.group(1) + body.rstrip("\n") + "\n" + m.group(2), doc, count=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--go", default=str(ROOT / "bin" / "bench" / "go.txt"))
    ap.add_argument("--loaders", default=str(ROOT / "bin" / "bench" / "loaders.json"))
    ap.add_argument("--egress", default=str(ROOT / "bin" / "bench" / "egress.json"))
    ap.add_argument("--packing", default=str(ROOT / "bin" / "bench" / "packing.json"))
    ap.add_argument("--formats", default=str(ROOT / "bin" / "bench" / "formats.json"))
    ap.add_argument("--tokenize", default=str(ROOT / "bin" / "bench" / "tokenize.json"))
    ap.add_argument("--rawtext", default=str(ROOT / "bin" / "bench" / "rawtext.json"))
    ap.add_argument("--video", default=str(ROOT / "bin" / "bench" / "video.json"))
    ap.add_argument("--requests", default=str(ROOT / "bin" / "bench" / "requests.json"))
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--img", default=str(ROOT / "docs" / "img"))
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    ap.add_argument("--command", default="make bench", help="the command to name as the one that produced the figures")
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    img = Path(args.img)
    go = GoResults(Path(args.go).read_text()) if Path(args.go).exists() else None
    loaders = json.loads(Path(args.loaders).read_text()) if Path(args.loaders).exists() else None
    egress = json.loads(Path(args.egress).read_text()) if Path(args.egress).exists() else None
    if not (go or loaders or egress):
        raise SystemExit(f"nothing to report: none of {args.go}, {args.loaders}, {args.egress} exists (run make bench)")
    doc = Path(args.doc).read_text()
    doc = fill(doc, "machine", machine_block(go, loaders, args.command))
    if go and go.runs:
        doc = fill(doc, "planner", planner_block(go, img))
        doc = fill(doc, "formats", formats_block(go))
        doc = fill(doc, "images-decode-core", decode_block(go))
        doc = fill(doc, "socket", socket_block(go))
        doc = fill(doc, "first-batch", first_batch_block(go))
        doc = fill(doc, "control-plane", control_plane_block(go))
    if go or egress:
        doc = fill(doc, "egress", egress_block(go, egress, img))
    packing = json.loads(Path(args.packing).read_text()) if Path(args.packing).exists() else None
    if packing:
        doc = fill(doc, "packing", packing_block(packing, go))
    shard_formats = json.loads(Path(args.formats).read_text()) if Path(args.formats).exists() else None
    if shard_formats:
        doc = fill(doc, "shard-formats", shard_formats_block(shard_formats))
    tokenize = json.loads(Path(args.tokenize).read_text()) if Path(args.tokenize).exists() else None
    if tokenize:
        doc = fill(doc, "tokenize", tokenize_block(tokenize))
    rawtext = json.loads(Path(args.rawtext).read_text()) if Path(args.rawtext).exists() else None
    if rawtext:
        doc = fill(doc, "rawtext", rawtext_block(rawtext))
    video = json.loads(Path(args.video).read_text()) if Path(args.video).exists() else None
    if video:
        doc = fill(doc, "video", video_block(video))
    requests = json.loads(Path(args.requests).read_text()) if Path(args.requests).exists() else None
    if requests:
        doc = fill(doc, "requests", requests_block(requests))
    if loaders:
        doc = fill(doc, "loaders-setup", loaders_setup_block(loaders))
        for kind in ("tokens", "images", "images-decoded", "tabular"):
            if kind in loaders["datasets"]:  # a partial run leaves the others as they are
                doc = fill(doc, f"loaders-{kind}", loaders_block(loaders, kind))
        doc = fill(doc, "loaders-batch", sweep_block(loaders))
        doc = fill(doc, "loaders-targets", targets_block(loaders, go))
        doc = fill(doc, "loaders-lance", lance_block(loaders))
        if "images" in loaders["datasets"]:
            doc = fill(doc, "loaders-user-decode", user_decode_block(loaders))
        doc = fill(doc, "peer-settings", peer_settings_block(loaders, PEER_SETTINGS))
        loader_plots(loaders, img)
    Path(args.doc).write_text(doc)
    log(f"wrote {args.doc}")
    # The README's figures are read from the tables just written (whichever
    # blocks this run filled): they are always the linked tables' own.
    import readme_figures

    readme = readme_figures.readme_with(Path(args.readme).read_text(), readme_figures.figures(doc))
    Path(args.readme).write_text(readme)
    log(f"wrote the figures of {args.readme} from {args.doc}'s tables")


# The knobs the last peer sweep found fastest (hack/bench/peer_sweep.py).
PEER_SETTINGS = Path(__file__).resolve().parent / "peer-settings.json"
PEER_CMDS = {"read-litdata": "LitData", "decode-litdata": "LitData (decoding)", "read-mosaic": "mosaicml-streaming",
             "decode-mosaic": "mosaicml-streaming (decoding)", "read-lance": "lancedb", "read-ray": "Ray Data",
             "read-tdu": "torch-dataloader-utils"}


def peer_settings_block(data: dict, settings: Path) -> str:
    """Each peer's knobs in this run (from its rows), and the last sweep:
    every setting tried, its rate, and how much the chosen one gained over
    the peer's defaults."""
    if not settings.exists():
        return "(no peer sweep has run: every peer ran with its defaults; run make bench-peers)"
    sweep = json.loads(settings.read_text())
    lines = []
    for k, v in sweep["chosen"].items():
        kind, cmd, workers = k.split("/")
        gain = f"{v['rate'] / v['default_rate']:.2f}×" if v.get("default_rate") else "–"
        tried = [t for t in sweep["tried"] if (t["kind"], t["peer"], str(t["workers"])) == (kind, cmd, workers)]
        others = "; ".join(f"{knob_label(t['knobs'])}: {num(t['rate']['median'])}" for t in tried if t["knobs"] != v["knobs"])
        lines.append([kind, PEER_CMDS.get(cmd, cmd), workers, knob_label(v["knobs"]), num(v["rate"]), gain, others or "–"])
    head = (f"The last sweep: `{sweep['command']}` ({sweep['machine']}; {sweep['runs']} runs of each setting, "
            f"{sweep['time_box']:g} s windows; {sweep['minutes']} minutes; "
            + ", ".join(f"{p} {v}" for p, v in sweep["versions"].items()) + "). "
            "Each knob tried in turn from the peer's defaults, the others at the best found so far; "
            "the run above used the chosen settings (its rows' rates, not the sweep's, are the figures compared).")
    return head + "\n\n" + table(["data set", "peer", "workers", "chosen", "samples/s in the sweep", "× its defaults",
                                   "the other settings tried (samples/s)"], lines)


def knob_label(knobs: dict) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in knobs.items()) or "its defaults"


def loaders_setup_block(data: dict) -> str:
    return (f"Command: `{data['command']}` (part of `make bench`), data sets at scale {data['scale']:g}, "
            f"{data['runs']} runs of each measurement ({data.get('short_runs', 2 * data['runs'])} where each run reads for under a second), each in its own process (a fork of one that imported torch), reading one shuffled epoch or "
            f"{data['time_box']:g} s after its first batch ({data.get('peer_time_box', data['time_box']):g} s for a peer, long enough for its steady rate), "
            "whichever ends first († in the table: the time box ended it); \"steady\" is the rate over the second half of that time, "
            "and a peer is set against at the higher of its two rates. A peer whose first batch took more than a tenth of its epoch "
            "(Ray Data reads much of the data before its first) is measured again over an epoch of several passes (‡: one loader "
            "built, iterated again) until its start is at most a tenth of it, and its \"samples/s from the constructor\" is over that "
            "epoch: the rate after the first batch alone credits the start's work to nobody. Such an epoch of a minute or more is "
            "measured once, not in every round (¹ in the table): its range is the rates over each third of it, its first batch's "
            "over it and the short run that called for it. Each peer runs with the knobs the last sweep found fastest for it "
            "(\"Peers at their best\" below). "
            "The runs of a data set's measurements are interleaved (each round runs every measurement once, every sidecar serving), "
            "so the machine's slow moments fall on all of a table's rows alike, the limit's included. "
            f"The whole loader run took {data['seconds'] / 60:.1f} minutes.")


if __name__ == "__main__":
    main()
