"""Datasets in LeRobot's Lance layout that shardfeed refuses, made from a
converted one or converted by lerobot-lancedb's converter (the lerobot
format's integration tests):

    bin/venv-lerobot/bin/python test/oracle/lerobot_lance_cases.py delete DIR ROW
    bin/venv-lerobot/bin/python test/oracle/lerobot_lance_cases.py append DIR
    bin/venv-lerobot/bin/python test/oracle/lerobot_lance_cases.py append-deleted DIR
    bin/venv-lerobot/bin/python test/oracle/lerobot_lance_cases.py convert SRC OUT
    bin/venv-lerobot/bin/python test/oracle/lerobot_lance_cases.py no-images DIR

delete: row ROW of DIR/frames.lance deleted (a deletion file);
append: DIR/frames.lance's last row appended again (a row more than
meta/info.json's total_frames);
append-deleted: a row appended to DIR/frames.lance and deleted, its rows
still a row a frame (LanceDBDataset reads the live rows in order);
convert: the LeRobot v3.0 dataset SRC converted into OUT;
no-images: DIR's image features dropped from meta/info.json (their
columns left in the frames table, unread).
"""

from __future__ import annotations

import sys
from pathlib import Path

import lance


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == "delete":
        lance.dataset(f"{args[1]}/frames.lance").delete(f"index = {int(args[2])}")
    elif len(args) == 2 and args[0] == "append":
        ds = lance.dataset(f"{args[1]}/frames.lance")
        last = ds.to_table().slice(ds.count_rows() - 1)
        lance.write_dataset(last, f"{args[1]}/frames.lance", mode="append")
    elif len(args) == 2 and args[0] == "append-deleted":
        import pyarrow.compute as pc

        uri = f"{args[1]}/frames.lance"
        ds = lance.dataset(uri)
        extra = ds.to_table().slice(0, 1)
        extra = extra.set_column(extra.schema.get_field_index("index"), "index", pc.add(extra.column("index"), 1_000_000))
        lance.write_dataset(extra, uri, mode="append").delete("index >= 1000000")
    elif len(args) == 2 and args[0] == "no-images":
        import json

        info_file = Path(args[1]) / "meta" / "info.json"
        info = json.loads(info_file.read_text())
        info["features"] = {k: v for k, v in info["features"].items() if v["dtype"] != "image"}
        info_file.write_text(json.dumps(info, indent=4))
    elif len(args) == 3 and args[0] == "convert":
        from lerobot_lancedb.convert import convert

        convert(Path(args[2]), root=Path(args[1]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
