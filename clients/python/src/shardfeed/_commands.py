"""The shardfeed commands as Python functions (index, convert), and the
TrainingDataset a URI and a few arguments describe: what
FeedDataset.from_uri serves and to_manifest() returns, a manifest a
cluster takes unchanged.

The functions run the shardfeed command (the wheel's own), show its
progress on stderr, and raise ShardfeedError with its message, in the words
of a Python caller."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._binary import find_binary
from .errors import ShardfeedError

__all__ = ["convert", "dataset_manifest", "formats", "index", "to_yaml"]

# A suffix several formats index, and the one a folder of such files is
# guessed to be (the others have files of their own to tell them: see
# guess_format).
_SUFFIX_OWNER = {".arrow": "arrow"}
_formats_cache: dict[str, list[dict[str, Any]]] = {}


def formats(binary: str | None = None) -> list[dict[str, Any]]:
    """The formats the shardfeed command reads, as it lists them itself
    (shardfeed formats --json): [{"name", "index", "suffixes"}], "index"
    being how a stream is indexed: "objects" (its files with those
    suffixes), "table" (a table at one version) or "own" (its own index)."""
    cmd = find_binary(binary)
    if cmd not in _formats_cache:
        done = subprocess.run([cmd, "formats", "--json"], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ShardfeedError(f"{cmd} formats --json failed: {done.stderr.strip()} (a shardfeed older than this client?)")
        _formats_cache[cmd] = list(json.loads(done.stdout))
    return _formats_cache[cmd]


def format_names(binary: str | None = None) -> list[str]:
    """The names of the formats the shardfeed command reads."""
    return [f["name"] for f in formats(binary)]
# How long a command may take: indexing and converting read every object.
_TIMEOUT_S = 24 * 3600


# The command's flags and the arguments that set them here.
_FLAGS = {"--index-uri": "index_uri", "--filter": "filter", "--format": "format", "--endpoint": "endpoint",
          "--shard-size": "shard_size", "--split": "split"}
_FLAG_VALUE = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, _FLAGS)) + r")(?:[ =]('[^']*'|\"[^\"]*\"|[^\s,;()]*[^\s,;():.]))?")


def _words(text: str) -> str:
    """The command's message with flags named as this module's arguments:
    `--format parquet` as format="parquet", `--hive` as hive=True."""
    def arg(m: re.Match[str]) -> str:
        name, value = _FLAGS[m.group(1)], m.group(2)
        if value is None:
            return f"{name}="
        if value[0] in "'\"":
            return f"{name}={value}"
        return f'{name}="{value}"'
    return _FLAG_VALUE.sub(arg, text).replace("--hive", "hive=True")


def _run(args: list[str], *, binary: str | None, env: dict[str, str] | None = None) -> str:
    """Runs the shardfeed command: its progress goes to stderr as it comes,
    its result is returned; a failure raises with what it said."""
    cmd = [find_binary(binary), *args]
    err_lines: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        for line in proc.stderr:  # progress lines, shown as they come
            err_lines.append(line)
            sys.stderr.write(line)
        out = proc.stdout.read()
        code = proc.wait(timeout=_TIMEOUT_S)
    if code != 0:
        said = "".join(err_lines).strip().removeprefix("shardfeed: ")
        raise ShardfeedError(f"shardfeed {args[0]} failed: {_words(said)}")
    return out


def _uri(path_or_uri: str | os.PathLike[str]) -> str:
    """A store URI: a local path becomes an absolute file:// URI, ending in /."""
    s = os.fspath(path_or_uri)
    if re.match(r"^[a-z][a-z0-9+]*://", s):
        return s if s.endswith("/") else s + "/"
    return Path(s).expanduser().resolve().as_uri() + "/"


def _store_flags(endpoint: str | None, region: str | None, insecure: bool) -> list[str]:
    flags = []
    if endpoint:
        flags += ["--endpoint", endpoint]
    if region:
        flags += ["--region", region]
    if insecure:
        flags.append("--insecure")
    return flags


def index(uri: str | os.PathLike[str], *, format: str = "parquet", filter: str | None = None, hive: bool = False,
          index_uri: str | None = None, endpoint: str | None = None, region: str | None = None, insecure: bool = False,
          split: str | None = None, binary: str | None = None) -> str:
    """Writes the shardfeed index of a stream (shardfeed index): its shards,
    sample counts, byte ranges and hashes, under _shardfeed/ in the
    stream's prefix (or under index_uri), and with filter the rows the
    filter matches in each shard. Returns what the command printed.

    Args:
        uri: the stream's prefix (s3://bucket/prefix/, gs://…, az://…) or a
            local directory.
        format: parquet, orc, arrow, jsonl, csv or tsv (mds with filter:
            MDS keeps its own index).
        filter: a row filter (a CEL expression over the stream's columns).
        hive: read key=value directories as partition columns.
        index_uri: where the index goes when not beside the data: a prefix
            of the same store, for data you may not write to.
        endpoint, region, insecure: an S3-compatible store's (MinIO's).
        split: a Hugging Face dataset's split, where uri holds several (a
            DatasetDict's folder, a datasets cache folder).
        binary: the shardfeed command; default the wheel's own.
    """
    args = ["index", _uri(uri), "--format", format, *_store_flags(endpoint, region, insecure)]
    if split:
        args += ["--split", split]
    if filter:
        args += ["--filter", filter]
    if hive:
        args.append("--hive")
    if index_uri:
        args += ["--index-uri", _uri(index_uri)]
    return _run(args, binary=binary)


def convert(source: str | os.PathLike[str], out: str | os.PathLike[str], *, from_format: str, to_format: str = "parquet",
            shard_size: str | None = None, endpoint: str | None = None, region: str | None = None, insecure: bool = False,
            binary: str | None = None) -> str:
    """Converts a stream's records into shards shardfeed serves (shardfeed
    convert): JSON Lines, CSV, TSV, Parquet, ORC, Arrow or MDS into Parquet
    or MDS, indexed as written. Returns what the command printed.

    Args:
        source: the records' prefix or local directory.
        out: where the shards go (a prefix or a local directory).
        from_format: the records' format.
        to_format: parquet or mds.
        shard_size: about how large a shard is, e.g. "64MiB".
        endpoint, region, insecure: an S3-compatible store's (MinIO's).
        binary: the shardfeed command; default the wheel's own.
    """
    args = ["convert", _uri(source), "--from", from_format, "--to", to_format, "--out", _uri(out),
            *_store_flags(endpoint, region, insecure)]
    if shard_size:
        args += ["--shard-size", shard_size]
    return _run(args, binary=binary)


def _own_index(path: Path) -> str | None:
    """The format whose own index path is: "litdata" (litdata.optimize's
    chunks), "mds" (MDS's shards), or None (none there, or shardfeed's
    own, where an earlier release wrote it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    if b'"shardfeed"' in head:
        return None
    if b'"chunks"' in head or any(path.parent.glob("chunk-*.bin")):
        return "litdata"
    return "mds"


def guess_format(uri: str, binary: str | None = None) -> str:
    """The format of a local directory's files; a remote stream's format is
    given (format=)."""
    names = format_names(binary)
    if not uri.startswith("file://"):
        raise ShardfeedError(f"give the format of {uri} (format=, one of {', '.join(map(repr, names))})")
    root = Path(uri.removeprefix("file://"))
    if not root.is_dir():
        raise ShardfeedError(f"{root} is not a directory: give the directory of the stream's files")
    if (root / "_versions").is_dir() and any((root / "_versions").glob("*.manifest")):
        return "lance"  # a Lance dataset: its versions' manifests
    if (root / "metadata").is_dir() and any((root / "metadata").glob("*.metadata.json")):
        raise ShardfeedError(f"{root} is an Iceberg table: give format='iceberg' and iceberg={{'catalog': {{...}}, 'table': 'db.name'}} "
                             "(spec.streams[].iceberg)")
    own = _own_index(root / "index.json")
    if own is not None:
        return own
    if (root / "dataset_info.json").is_file() or (root / "dataset_dict.json").is_file():
        return "huggingface"  # save_to_disk's Arrow stream files, a DatasetDict's, or the datasets cache's
    if any(p.is_file() for p in root.glob("*/state.json")) and any(p.is_file() for p in root.glob("*/dataset_info.json")):
        return "huggingface"  # splits saved side by side, each by its own save_to_disk
    by_suffix: dict[str, str] = dict(_SUFFIX_OWNER)
    for f in formats(binary):
        for suffix in f.get("suffixes") or []:
            by_suffix.setdefault(suffix, f["name"])
    seen: dict[str, int] = {}
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if p.is_file() and rel != Path("index.json") and not any(part.startswith(("_", ".")) for part in rel.parts):
            name = p.name.lower()
            fmt = next((f for suffix, f in sorted(by_suffix.items(), key=lambda x: -len(x[0])) if name.endswith(suffix)), None)
            if fmt and fmt != "litdata":  # litdata's chunks are told by its index.json, above
                seen[fmt] = seen.get(fmt, 0) + 1
    if len(seen) != 1:
        found = ", ".join(f"{n} {f}" for f, n in sorted(seen.items())) or "no file of a format shardfeed reads"
        raise ShardfeedError(f"{root} holds {found}: give format=")
    return next(iter(seen))


def _name(uri: str) -> str:
    """A DNS label from the last part of the URI's path."""
    last = [p for p in uri.rstrip("/").split("/") if p][-1]
    name = re.sub(r"[^a-z0-9-]+", "-", last.lower()).strip("-")[:63].strip("-")
    return name or "data"


def dataset_manifest(uri: str | os.PathLike[str], *, batch_size: int, format: str | None = None, name: str | None = None,
                     num_splits: int | None = None, shuffle_seed: int | None = None, shuffle_block: int | None = None,
                     columns: list[str] | None = None, filter: str | None = None, drop_last: bool = True,
                     endpoint: str | None = None, region: str | None = None, insecure: bool = False,
                     credentials_secret: str | None = None, index_uri: str | None = None,
                     pack_length: int | None = None, pack_column: str = "tokens", pack_across_shards: bool = False,
                     split: str | None = None, hive: bool = False, block_size: int | None = None, iceberg: dict[str, Any] | None = None,
                     binary: str | None = None) -> dict[str, Any]:
    """The TrainingDataset of one stream at uri, as FeedDataset.from_uri
    takes its arguments."""
    if batch_size < 1:
        raise ShardfeedError(f"batch_size={batch_size}: give the global batch (over every rank), 1 or more")
    src = _uri(uri)
    if iceberg is not None and format is None:
        format = "iceberg"
    fmt = format or guess_format(src, binary)
    names = format_names(binary)
    if fmt not in names:
        raise ShardfeedError(f"format={fmt!r} is not one of {', '.join(names)}")
    if (fmt == "iceberg") != (iceberg is not None):
        raise ShardfeedError("format='iceberg' goes with iceberg={'catalog': {...}, 'table': 'db.name'} (spec.streams[].iceberg), "
                             "and iceberg= with format='iceberg'")
    if hive and fmt not in ("parquet", "orc"):
        raise ShardfeedError(f"hive=True reads a tree of key=value folders of parquet or orc files, and the format is {fmt}")
    if block_size is not None and (fmt != "litdata" or block_size < 1):
        raise ShardfeedError(f"block_size={block_size} is the tokens of a sample of a litdata dataset written with LitData's TokensLoader")
    # Every world size the job runs at must divide numSplits, and numSplits
    # the global batch: up to 8 ranks by default.
    splits = num_splits or math.gcd(batch_size, 8)
    if batch_size % splits:
        raise ShardfeedError(f"batch_size={batch_size} is not a multiple of num_splits={splits}: every step takes the same rows from every split")
    source: dict[str, Any] = {"uri": src}
    if index_uri:
        source["indexURI"] = _uri(index_uri)
    if endpoint:
        source["endpoint"] = endpoint
    if region:
        source["region"] = region
    if insecure:
        source["insecure"] = True
    if credentials_secret:
        source["credentialsSecretRef"] = {"name": credentials_secret}
    stream: dict[str, Any] = {"name": _name(src), "format": fmt, "source": source}
    if columns:
        stream["columns"] = list(columns)
    if filter:
        stream["filter"] = filter
    if hive:
        stream["partitions"] = {}
    if block_size is not None:
        stream["litdata"] = {"blockSize": block_size}
    if iceberg is not None:
        stream["iceberg"] = dict(iceberg)
    if split is not None:
        if fmt != "huggingface":
            raise ShardfeedError(f"split={split!r} chooses a Hugging Face dataset's split, and the format is {fmt}")
        stream["huggingface"] = {"split": split}
    spec: dict[str, Any] = {"streams": [stream], "numSplits": splits, "globalBatchSize": batch_size, "dropLast": drop_last}
    if shuffle_seed is not None or shuffle_block is not None:
        shuffle: dict[str, Any] = {"seed": shuffle_seed if shuffle_seed is not None else 0}
        if shuffle_block is not None:
            shuffle["blockSize"] = shuffle_block
        spec["shuffle"] = shuffle
    if pack_length is not None:
        if not 1 <= pack_length <= 1 << 20:
            raise ShardfeedError(f"pack_length={pack_length}: a sequence of 1 to {1 << 20} tokens")
        spec["packing"] = {"column": pack_column, "sequenceLength": pack_length}
        if pack_across_shards:
            spec["packing"]["acrossShards"] = True
    elif pack_across_shards:
        raise ShardfeedError("pack_across_shards=True packs documents across shards, and goes with pack_length= (the sequence's tokens)")
    return {"apiVersion": "data.shardfeed.io/v1alpha1", "kind": "TrainingDataset",
            "metadata": {"name": name or _name(src)}, "spec": spec}


def to_yaml(value: Any, indent: int = 0) -> str:
    """YAML of plain data (dicts, lists, strings, numbers, booleans), with
    every string quoted as JSON is: kubectl, Helm and shardfeed read it."""
    pad = "  " * indent
    lines = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.append(to_yaml(v, indent + 1))
            else:
                lines.append(f"{pad}{k}: {json.dumps(v)}")
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, (dict, list)) and v:
                body = to_yaml(v, indent + 1).lstrip()
                lines.append(f"{pad}- {body}")
            else:
                lines.append(f"{pad}- {json.dumps(v)}")
    else:
        lines.append(pad + json.dumps(value))
    return "\n".join(lines)
