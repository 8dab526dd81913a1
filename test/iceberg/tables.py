"""Writes the Iceberg test tables of shardfeed with pyiceberg, and reads
them back as pyiceberg and pyarrow do: the oracle of the Iceberg tests.

    tables.py write --catalog sql --uri sqlite:///CAT.db --warehouse s3://B/wh --s3 http://HOST:PORT KEY SECRET
    tables.py append TABLE ...same catalog flags...
    tables.py read TABLE SNAPSHOT ...same catalog flags...

write makes these tables in namespace ml (or those --tables names), each
with an int "id" and a string "text" (id i has text "t<i>", or
"<prefix><i>" with --text-prefix), in several data files of several row
groups, and prints {table: snapshot id} as JSON:

- plain: two appends of 250 rows.
- evolved: 200 rows; "text" renamed "body"; a column "score" (double)
  added; 100 more rows with scores; a column "extra" added then dropped.
- posdel: 300 rows, then a position delete file deleting ids 0, 1, 2,
  17, 100-149 and 299 (committed as Spark's merge-on-read delete does:
  pyiceberg deletes by rewriting files).
- eqdel: 300 rows, then an equality delete file on "id" deleting 5, 6,
  77 and 200-209.
- moving: 100 rows; `append moving` adds 100 more after the test indexed it.

read prints the table's rows at a snapshot, deletes applied, as JSON
lines {"id": …, "text": …, …} in the order pyiceberg's scan returns them
(equality deletes, which pyiceberg does not apply, by an anti-join in
pyarrow).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, LongType

ROW_GROUP_ROWS = "64"  # several row groups per data file
TEXT_PREFIX = "t"


def catalog(args: argparse.Namespace) -> Catalog:
    props = {
        "type": args.catalog,
        "uri": args.uri,
        "warehouse": args.warehouse,
        "s3.endpoint": args.s3[0],
        "s3.access-key-id": args.s3[1],
        "s3.secret-access-key": args.s3[2],
        "s3.region": "us-east-1",
        "s3.path-style-access": "true",
    }
    return load_catalog("default", **props)


def rows(lo: int, hi: int, **extra: Any) -> pa.Table:
    cols: dict[str, Any] = {
        "id": pa.array(range(lo, hi), pa.int64()),
        "text": pa.array([f"{TEXT_PREFIX}{i}" for i in range(lo, hi)], pa.string()),
    }
    cols.update(extra)
    return pa.table(cols)


def create(cat: Catalog, name: str, data: pa.Table) -> Table:
    t = cat.create_table(f"ml.{name}", schema=data.schema, properties={"write.parquet.row-group-limit": ROW_GROUP_ROWS})
    t.append(data)
    return cat.load_table(f"ml.{name}")


class DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files (pyiceberg writes data manifests only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def commit_delete_file(cat: Catalog, t: Table, content: DataFileContent, data: pa.Table, equality_ids: list[int] | None) -> None:
    """Writes data as a delete file of the table and commits it in a new
    snapshot, the way an engine's merge-on-read delete does."""
    md = t.metadata
    parent = t.current_snapshot()
    assert parent is not None
    snap_id = random.randrange(1, 2**62)
    seq = md.last_sequence_number + 1
    path = f"{md.location}/data/{uuid.uuid4()}-deletes.parquet"
    with t.io.new_output(path).create(overwrite=True) as f:
        pq.write_table(data, f)
    size = len(t.io.new_input(path).open().read())
    df = DataFile.from_args(
        _table_format_version=2,
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=data.num_rows,
        file_size_in_bytes=size,
        equality_ids=equality_ids,
    )
    manifest = f"{md.location}/metadata/{uuid.uuid4()}-m0.avro"
    with DeleteManifestWriter(t.spec(), t.schema(), t.io.new_output(manifest), snap_id, "null") as w:
        w.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snap_id, data_file=df))
    mf = w.to_manifest_file()
    manifest_list = f"{md.location}/metadata/snap-{snap_id}-{uuid.uuid4()}.avro"
    with write_manifest_list(2, t.io.new_output(manifest_list), snap_id, parent.snapshot_id, seq, "null") as lw:
        lw.add_manifests(parent.manifests(t.io) + [mf])
    snap = Snapshot(
        snapshot_id=snap_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=seq,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=manifest_list,
        summary=Summary(operation=Operation.DELETE),
        schema_id=md.current_schema_id,
    )
    cat.commit_table(
        t,
        requirements=(AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id),),
        updates=(AddSnapshotUpdate(snapshot=snap), SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snap_id)),
    )


def field(name: str, typ: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, typ, nullable=False, metadata={b"PARQUET:field_id": str(field_id).encode()})


def write(args: argparse.Namespace) -> None:
    tables = args.tables.split(",")
    for name in tables:
        if name not in WRITERS:
            sys.exit(f"tables.py: no test table {name!r} (want some of {','.join(WRITERS)})")
    cat = catalog(args)
    cat.create_namespace_if_not_exists("ml")
    for name in tables:
        WRITERS[name](cat)
    out: dict[str, int] = {}
    for name in tables:
        snap = cat.load_table(f"ml.{name}").current_snapshot()
        assert snap is not None
        out[name] = snap.snapshot_id
    json.dump(out, sys.stdout)


def write_plain(cat: Catalog) -> None:
    t = create(cat, "plain", rows(0, 250))
    t.append(rows(250, 500))


def write_evolved(cat: Catalog) -> None:
    t = create(cat, "evolved", rows(0, 200))
    with t.update_schema() as u:
        u.rename_column("text", "body")
        u.add_column("score", DoubleType())
    t = cat.load_table("ml.evolved")
    more = rows(200, 300).rename_columns(["id", "body"])
    more = more.append_column("score", pa.array([i / 4 for i in range(200, 300)], pa.float64()))
    t.append(more)
    with t.update_schema() as u:
        u.add_column("extra", LongType())
    with t.update_schema() as u:
        u.delete_column("extra")


def write_posdel(cat: Catalog) -> None:
    t = create(cat, "posdel", rows(0, 300))
    files = [task.file.file_path for task in t.scan().plan_files()]
    assert len(files) == 1, files
    dead = [0, 1, 2, 17, *range(100, 150), 299]
    schema = pa.schema([field("file_path", pa.string(), 2147483546), field("pos", pa.int64(), 2147483545)])
    deletes = pa.table({"file_path": [files[0]] * len(dead), "pos": dead}, schema=schema)
    commit_delete_file(cat, t, DataFileContent.POSITION_DELETES, deletes, None)


def write_eqdel(cat: Catalog) -> None:
    t = create(cat, "eqdel", rows(0, 300))
    id_field = t.schema().find_field("id").field_id
    dead = [5, 6, 77, *range(200, 210)]
    deletes = pa.table({"id": dead}, schema=pa.schema([field("id", pa.int64(), id_field)]))
    commit_delete_file(cat, t, DataFileContent.EQUALITY_DELETES, deletes, [id_field])


def write_moving(cat: Catalog) -> None:
    create(cat, "moving", rows(0, 100))


WRITERS: dict[str, Callable[[Catalog], None]] = {
    "plain": write_plain,
    "evolved": write_evolved,
    "posdel": write_posdel,
    "eqdel": write_eqdel,
    "moving": write_moving,
}


def append(args: argparse.Namespace) -> None:
    t = catalog(args).load_table(f"ml.{args.table}")
    t.append(rows(10_000, 10_100).cast(t.schema().as_arrow()))
    snap = t.current_snapshot()
    assert snap is not None
    json.dump({args.table: snap.snapshot_id}, sys.stdout)


def read(args: argparse.Namespace) -> None:
    t = catalog(args).load_table(f"ml.{args.table}")
    snap = t.snapshot_by_id(args.snapshot)
    assert snap is not None
    eq = [
        e.data_file.file_path
        for m in snap.manifests(t.io)
        if m.content == ManifestContent.DELETES
        for e in m.fetch_manifest_entry(t.io)
        if e.data_file.content == DataFileContent.EQUALITY_DELETES
    ]
    if not eq:
        data = t.scan(snapshot_id=args.snapshot).to_arrow()
    else:
        # pyiceberg refuses to plan equality deletes: read the snapshot's
        # data files with pyarrow and take out the rows whose ids a
        # delete file names (the test's delete files are on "id").
        parts, dead = [], set()
        for m in snap.manifests(t.io):
            if m.content != ManifestContent.DATA:
                continue
            for e in m.fetch_manifest_entry(t.io):
                with t.io.new_input(e.data_file.file_path).open() as f:
                    parts.append(pq.read_table(f))
        for path in eq:
            with t.io.new_input(path).open() as f:
                dead.update(pq.read_table(f).column("id").to_pylist())
        data = pa.concat_tables(parts)
        data = data.filter(pc.invert(pc.is_in(data.column("id"), pa.array(sorted(dead), pa.int64()))))
    for row in data.to_pylist():
        print(json.dumps(row, sort_keys=True))


def main() -> None:
    global TEXT_PREFIX
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["write", "append", "read"])
    p.add_argument("table", nargs="?")
    p.add_argument("snapshot", nargs="?", type=int)
    p.add_argument("--catalog", default="sql")
    p.add_argument("--uri", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--s3", nargs=3, metavar=("ENDPOINT", "KEY", "SECRET"), required=True)
    p.add_argument("--tables", default=",".join(WRITERS), help="write: the tables to write, comma-separated")
    p.add_argument("--text-prefix", default=TEXT_PREFIX, help="write, append: the text of id i is PREFIX<i>")
    args = p.parse_args()
    TEXT_PREFIX = args.text_prefix
    {"write": write, "append": append, "read": read}[args.command](args)


if __name__ == "__main__":
    main()
