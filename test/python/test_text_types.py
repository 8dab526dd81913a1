"""CSV's inferred column types, against pyarrow's CSV reader: what
`shardfeed convert` writes from a CSV has the types pyarrow reads it with."""

import subprocess

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from conftest import SHARDFEED_BIN

CSV = """id,flag,shout,small,ratio,word
1,True,TRUE,1,0.5,yes
2,False,FALSE,0,1.5,no
3,true,false,1,2,maybe
"""


def test_csv_columns_have_the_types_pyarrow_reads_them_with(tmp_path):
    src, out = tmp_path / "csv", tmp_path / "parquet"
    src.mkdir()
    (src / "part-0.csv").write_text(CSV)
    done = subprocess.run([str(SHARDFEED_BIN), "convert", str(src), "--from", "csv", "--to", "parquet", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ours = pq.read_table(sorted(out.glob("*.parquet"))[0])
    theirs = pacsv.read_csv(src / "part-0.csv")
    def kind(t):
        return str(t).replace("large_string", "string")

    for name in theirs.column_names:
        assert kind(ours.schema.field(name).type) == kind(theirs.schema.field(name).type), \
            f"{name}: ours {ours.schema.field(name).type}, pyarrow's {theirs.schema.field(name).type}"
        assert ours.column(name).to_pylist() == theirs.column(name).to_pylist(), name


JSONL = """{"id": 1, "meta": {"lang": "en", "score": 1, "tags": ["a", "b"]}, "spans": [{"start": 0, "end": 4}], "grid": [[1, 2], [3]], "flags": [true, false]}
{"id": 2, "meta": {"score": 2.5, "source": {"url": "https://x", "n": 7}}, "spans": [], "grid": [], "flags": [null]}
{"id": 3, "meta": null, "spans": [{"end": 9, "label": "x"}, null], "grid": [[]], "flags": null}
"""


def test_nested_json_has_the_types_and_values_pyarrow_reads_it_with(tmp_path):
    """Objects are structs (fields in the order first seen, merged over the
    records), arrays of objects lists of structs, nested arrays nested lists:
    as pyarrow.json infers them, values and all."""
    import pyarrow.json as pajson

    src, out = tmp_path / "jsonl", tmp_path / "parquet"
    src.mkdir()
    (src / "part-0.jsonl").write_text(JSONL)
    done = subprocess.run([str(SHARDFEED_BIN), "convert", str(src), "--from", "jsonl", "--to", "parquet", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ours = pq.read_table(sorted(out.glob("*.parquet"))[0])
    theirs = pajson.read_json(src / "part-0.jsonl")
    assert ours.column_names == theirs.column_names
    for name in theirs.column_names:
        mine, pyarrows = ours.schema.field(name).type, theirs.schema.field(name).type
        assert mine == pyarrows, f"{name}: ours {mine}, pyarrow's {pyarrows}"
        assert ours.column(name).to_pylist() == theirs.column(name).to_pylist(), name
    assert pa.types.is_struct(ours.schema.field("meta").type)
