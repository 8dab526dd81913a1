"""pyarrow's and Pillow's side of shardfeed's sample lengths (index --lengths).

Runs in bin/venv-oracle.

  lengths_oracle.py OUT
      writes OUT/good/part-{0,1}.parquet (several row groups each): an id,
      a lang ("en" or "de"), tokens (a list of int32 of random lengths,
      empty and null lists among them), an image (JPEG, progressive JPEG,
      greyscale, CMYK and PNG of random sizes, made by Pillow) and a text;
      and OUT/bad/part-0.parquet, whose image at row 5 is cut short. Prints
      one JSON line per row of OUT/good, in file and row order: its lang,
      its tokens' length as pyarrow counts it (0 for a null list) and its
      image's height and width as Pillow reads them.
"""

import io
import json
import random
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image


def image(rnd: random.Random) -> bytes:
    w, h = rnd.randint(1, 96), rnd.randint(1, 96)
    kind = rnd.choice(["jpeg", "progressive", "grey", "cmyk", "png"])
    mode = {"grey": "L", "cmyk": "CMYK"}.get(kind, "RGB")
    img = Image.new(mode, (w, h), color=rnd.randint(0, 255) if mode == "L" else None)
    out = io.BytesIO()
    if kind == "png":
        img.save(out, format="PNG")
    else:
        img.save(out, format="JPEG", quality=80, progressive=kind == "progressive")
    return out.getvalue()


def table(rnd: random.Random, first: int, n: int) -> pa.Table:
    tokens = [None if rnd.random() < 0.05 else list(range(rnd.choice([0, rnd.randint(1, 40), rnd.randint(100, 700)]))) for _ in range(n)]
    return pa.table({
        "id": pa.array(range(first, first + n), pa.int64()),
        "lang": [rnd.choice(["en", "de"]) for _ in range(n)],
        "tokens": pa.array(tokens, pa.list_(pa.int32())),
        "image": pa.array([image(rnd) for _ in range(n)], pa.binary()),
        "text": [f"text {first + i}" for i in range(n)],
    })


def main() -> None:
    out = Path(sys.argv[1])
    rnd = random.Random(7)
    (out / "good").mkdir(parents=True)
    first = 0
    for i, n in enumerate([230, 170]):
        t = table(rnd, first, n)
        pq.write_table(t, out / "good" / f"part-{i}.parquet", row_group_size=64)
        lengths = pc.fill_null(pc.list_value_length(t.column("tokens")), 0).to_pylist()
        for lang, length, data in zip(t.column("lang").to_pylist(), lengths, t.column("image").to_pylist()):
            w, h = Image.open(io.BytesIO(data)).size
            print(json.dumps({"lang": lang, "tokens": length, "height": h, "width": w}))
        first += n
    bad = table(rnd, 0, 20)
    images = bad.column("image").to_pylist()
    images[5] = images[5][:6]
    bad = bad.set_column(bad.schema.get_field_index("image"), "image", pa.array(images, pa.binary()))
    (out / "bad").mkdir()
    pq.write_table(bad, out / "bad" / "part-0.parquet", row_group_size=8)


if __name__ == "__main__":
    main()
