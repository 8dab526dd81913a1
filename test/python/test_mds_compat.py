"""MDS written by the real mosaicml-streaming decodes in shardfeed sample for
sample: a fixture writes datasets with MDSWriter (bin/venv-oracle), shardfeed
decodes them (shardfeed convert --from mds --to parquet), and real pyarrow
reads shardfeed's output for the comparison."""

import base64
import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
ORACLE_PY = ROOT / "bin" / "venv-oracle" / "bin" / "python"
ORACLE = ROOT / "test" / "oracle" / "mds_oracle.py"
SHARDFEED = ROOT / "bin" / "shardfeed"

COLUMNS = {
    "b": "bytes", "s": "str", "i": "int", "u16": "uint16", "f32": "float32", "f64": "float64",
    "si": "str_int", "sf": "str_float", "sd": "str_decimal", "j": "json", "img": "jpeg",
    "tok": "ndarray:int32:8", "dyn": "ndarray:float32", "any": "ndarray", "imgs": "list[png]",
}

CONFIGS = {
    "raw-sha1-md5": ["--hashes", "md5,sha1"],
    "zstd-small-shards": ["--compression", "zstd:5", "--size-limit", "4096", "--hashes", "xxh64"],
    "gz-sha256": ["--compression", "gz", "--hashes", "sha256"],
    "snappy-xxh3": ["--compression", "snappy", "--hashes", "xxh3_64", "--size-limit", "8192"],
}


@pytest.fixture(params=sorted(CONFIGS), scope="module")
def mds_dataset(request, tmp_path_factory):
    """(directory, expected samples) of a dataset written by mosaicml-streaming."""
    out = tmp_path_factory.mktemp(request.param) / "mds"
    cols = ";".join(f"{k}={v}" for k, v in COLUMNS.items())
    res = subprocess.run(
        [str(ORACLE_PY), str(ORACLE), "write", str(out), "--columns", cols, "--samples", "80", "--seed", "11", *CONFIGS[request.param]],
        capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return out, [json.loads(line) for line in res.stdout.splitlines()]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def check(name: str, got, want):
    enc = COLUMNS[name].split(":")[0]
    if enc in ("bytes", "jpeg"):
        assert b64(got) == want["b64"]
    elif enc == "json":
        assert json.loads(got) == want
    elif enc == "list[png]":
        assert [b64(x) for x in got] == [w["b64"] for w in want]
    elif COLUMNS[name] == "ndarray:int32:8":
        assert got == np.frombuffer(base64.b64decode(want["b64"]), dtype=want["dtype"]).tolist()
    elif COLUMNS[name] == "ndarray:float32":
        assert got["shape"] == want["shape"]
        assert got["data"] == np.frombuffer(base64.b64decode(want["b64"]), dtype="<f4").tolist()
    elif COLUMNS[name] == "ndarray":
        assert (got["dtype"], got["shape"], b64(got["data"])) == (want["dtype"], want["shape"], want["b64"])
    else:
        assert got == want, name


def test_shardfeed_decodes_mosaicml_streaming_datasets(mds_dataset, tmp_path):
    src, expected = mds_dataset
    out = tmp_path / "parquet"
    res = subprocess.run(
        [str(SHARDFEED), "convert", f"file://{src}/", "--from", "mds", "--to", "parquet", "--out", f"file://{out}/"],
        capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    table = pq.read_table(sorted(out.glob("*.parquet")))
    assert table.num_rows == len(expected)
    rows = table.to_pylist()
    for i, (got, want) in enumerate(zip(rows, expected)):
        for name in COLUMNS:
            try:
                check(name, got[name], want[name])
            except AssertionError as err:
                raise AssertionError(f"sample {i} column {name}: shardfeed {str(got[name])[:200]} != mosaicml {str(want[name])[:200]}") from err
