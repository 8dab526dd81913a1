#!/usr/bin/env python3
"""The README's measured figures, read from the tables of docs/benchmarks.md
that each links to: so they are always the figures of the run those tables
show, whichever part of `make bench` ran last.

  readme_figures.py --write   rewrite the README's bench:readme block (report.py does)
  readme_figures.py --check   fail when the README's block is not what the tables give (make lint)

Standard library only: the check runs before any venv exists.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = "docs/benchmarks.md"


def block(text: str, name: str) -> str:
    m = re.search(rf"<!-- bench:{re.escape(name)} -->\n(.*?)<!-- /bench:{re.escape(name)} -->", text, re.S)
    return m.group(1) if m else ""


def rows(body: str) -> list[dict[str, str]]:
    """The first markdown table of body, as dicts by header."""
    out: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in body.splitlines():
        if not line.startswith("|"):
            if header is not None and out:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not all(set(c) <= set("-: ") for c in cells):
            out.append(dict(zip(header, cells)))
    return out


def number(cell: str) -> float | None:
    """The median of a cell ("**355 241** [279 644–416 113] †" is 355241)."""
    m = re.search(r"[\d][\d  ]*(?:\.\d+)?", cell.replace("*", ""))
    return float(m.group(0).replace(" ", "").replace("\u202f", "")) if m else None


def find(table: list[dict[str, str]], loader: str, workers: str = "0") -> dict[str, str] | None:
    return next((r for r in table if r.get("loader") == loader and r.get("workers") == workers), None)


def figures(doc: str) -> str:
    """The README's block, from the doc's tables."""
    out = [f"On this project's 2-core machines, side by side in one run ([{DOC}]({DOC}), `make bench`):", ""]
    tok = rows(block(doc, "loaders-tokens"))
    sf = find(tok, "shardfeed")
    if sf:
        limits = []
        if sf["× the limit"] not in ("", "–"):
            limits.append(f"{sf['× the limit']}× the machine's one-copy limit")
        gather = find(tok, "one gathered copy of each shuffled batch + the loop")
        if gather and number(gather["samples/s"]):
            limits.append(f"{number(sf['samples/s']) / number(gather['samples/s']):.2f}× its one-copy gather of shuffled rows")
        line = f"- Into a PyTorch loop, tokens: **{sf['GB/s']} GB/s** with no DataLoader workers"
        if limits:
            line += f" ({', '.join(limits)})"
        line += f", {peer(sf)}"
        runs = next((r for r in tok if r["loader"].startswith("shardfeed, shuffled in runs of") and r["workers"] == "0"), None)
        if runs:
            run = re.search(r"runs of (\d+)", runs["loader"])
            line += f"; shuffled in runs of {run.group(1) if run else '?'} samples, **{runs['GB/s']} GB/s**"
            if runs["× the limit"] not in ("", "–"):
                line += f" ({runs['× the limit']}× the limit)"
        out.append(line + f" ([tokens table]({DOC}#tokens)).")
    for kind in ("images", "tabular"):
        r = find(rows(block(doc, f"loaders-{kind}")), "shardfeed")
        if r:
            out.append(f"- {kind.capitalize()}: {peer(r)} with no workers ([{kind} table]({DOC}#{kind})).")
    # The sidecar's decoding builds; the user's own decode in workers has a
    # block of its own (loaders-user-decode).
    decoded = [r for r in rows(block(doc, "loaders-images-decoded"))
               if r["loader"].startswith("shardfeed, ") and r["workers"] == "0" and "the user's code" not in r["loader"]]
    if decoded:
        out.append("- Images decoded and resized to 224 × 224 in the sidecar: " + ", ".join(
            f"**{cell(r)}×** the best peer with the {r['loader'].removeprefix('shardfeed, ')}" for r in decoded) +
            f" ({best_name(decoded[0])}, decoding with Pillow in its workers on the same cores; "
            f"[images, decoded]({DOC}#images-decoded-and-resized)).")
    a, b = find(tok, "shardfeed, resumed at 90 %"), find(tok, "mosaicml-streaming, resumed at 90 %")
    if a and b:
        out.append(f"- Resume at 90 % of an epoch: the first batch in {number(a['first batch (s)']):.2f} s, against "
                   f"{number(b['first batch (s)']):.2f} s for mosaicml-streaming ([tokens table]({DOC}#tokens)).")
    egress = next((r for r in rows(block(doc, "egress")) if r.get("world size (pods)") == "16"), None)
    if egress:
        out.append(f"- What 16 pods fetch per epoch: **{number(egress['shardfeed']):.2f}×** the dataset (mosaicml-streaming: "
                   f"{number(egress['mosaicml-streaming (over MinIO)']):.2f}×), against {number(egress['torch DistributedSampler']):.0f}× "
                   f"for a per-sample `DistributedSampler` ([egress]({DOC}#egress-bytes-fetched-per-epoch--dataset-bytes)).")
    plan = next((r for r in rows(block(doc, "planner")) if r.get("benchmark") == "plan build" and r.get("size") == "1e10 samples, 1e6 shards"), None)
    admission = next((r for r in rows(block(doc, "control-plane")) if "pods of an Indexed Job" in r.get("benchmark", "")), None)
    if plan and admission:
        p99 = re.search(r"p99 \*\*([\d.]+ ms)\*\*", admission["result"])
        out.append(f"- Plans of 1e10 samples built in {plain(plan['time'])} with {plain(plan['memory'])} "
                   f"([planner]({DOC}#planner)); 1000 training pods admitted at p99 {p99.group(1) if p99 else '?'} "
                   f"([control plane]({DOC}#control-plane-admission-and-reconcile)).")
    return "\n".join(out) + "\n"


def cell(r: dict[str, str]) -> str:
    return r["× the best peer (same workers)"].split(" ")[0]


def best_name(r: dict[str, str]) -> str:
    m = re.search(r"\((.*)\)", r["× the best peer (same workers)"])
    return m.group(1) if m else "no peer"


def peer(r: dict[str, str]) -> str:
    return f"{cell(r)}× the best peer ({best_name(r)})"


def plain(cell: str) -> str:
    """A cell's median as written ("**202 ms** [201–209]" is "202 ms")."""
    return re.sub(r"\s*\[.*", "", cell).replace("*", "").strip()


def readme_with(readme: str, body: str) -> str:
    pattern = re.compile(r"(<!-- bench:readme -->\n)(.*?)(<!-- /bench:readme -->)", re.S)
    if not pattern.search(readme):
        raise SystemExit("README.md has no block '<!-- bench:readme -->' … '<!-- /bench:readme -->': restore it")
    return pattern.sub(lambda m: m.group(1) + body + m.group(3), readme, count=1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    ap.add_argument("--doc", default=str(ROOT / DOC))
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    a = ap.parse_args()
    readme = Path(a.readme).read_text()
    want = readme_with(readme, figures(Path(a.doc).read_text()))
    if a.write:
        Path(a.readme).write_text(want)
        return 0
    if want != readme:
        sys.stderr.write(f"README.md's measured figures are not those of {DOC}'s tables (the run they link): "
                         "run python3 hack/bench/readme_figures.py --write\n")
        sys.stderr.writelines(difflib.unified_diff(readme.splitlines(True), want.splitlines(True), "README.md", "from the tables"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
