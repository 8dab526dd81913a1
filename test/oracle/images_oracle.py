"""Pillow's side of shardfeed's image decoding tests.

Runs in bin/venv-oracle, whose Pillow (from PyPI, with its libjpeg-turbo)
is what training code decodes images with.

  images_oracle.py OUT RESIZE HEIGHT WIDTH [draft]
      writes test images (photo-like gradients with noise and edges, in
      JPEG at several chroma subsamplings and qualities, greyscale, CMYK, PNG
      with alpha) as OUT/NAME.img, and beside each OUT/NAME.rgb: the bytes
      of torchvision's Resize(RESIZE) then CenterCrop((HEIGHT, WIDTH)) on
      the image opened by Pillow and converted to RGB (bilinear,
      antialiased), height x width x 3 uint8. Prints the names. With
      draft, each RGB or grey JPEG is first opened with
      Image.draft("RGB", resized size): libjpeg-turbo decodes it at 1/2,
      1/4 or 1/8 of its size where the resize allows (CMYK ones stay whole,
      as shardfeed decodes them).
"""

import io
import random
import sys
from pathlib import Path

from PIL import Image


def photo(w: int, h: int, seed: int) -> Image.Image:
    """A smooth image with noise and a few hard edges, like a photo."""
    rnd = random.Random(seed)
    img = Image.new("RGB", (w, h))
    px = img.load()
    assert px is not None
    cx, cy = rnd.uniform(0, w), rnd.uniform(0, h)
    for y in range(h):
        for x in range(w):
            r = int(128 + 100 * ((x - cx) / w) + rnd.randint(-12, 12))
            g = int(100 + 120 * (y / h) + rnd.randint(-12, 12))
            b = int(60 + 150 * (((x + y) // 11) % 2) + rnd.randint(-8, 8))
            px[x, y] = (max(0, min(255, r)), max(0, min(255, g)), max(0, min(255, b)))
    return img


def reference(data: bytes, resize: int, height: int, width: int, draft: bool = False) -> bytes:
    img = Image.open(io.BytesIO(data))
    w, h = img.size
    # torchvision.transforms.Resize(resize) on a PIL image.
    if w <= h:
        size = (resize, int(resize * h / w))
    else:
        size = (int(resize * w / h), resize)
    if draft and img.format == "JPEG" and img.mode in ("RGB", "L"):
        img.draft("RGB", size)
    img = img.convert("RGB").resize(size, Image.Resampling.BILINEAR)
    # torchvision.transforms.CenterCrop((height, width)).
    top = int(round((size[1] - height) / 2.0))
    left = int(round((size[0] - width) / 2.0))
    return img.crop((left, top, left + width, top + height)).tobytes()


def main() -> None:
    out = Path(sys.argv[1])
    resize, height, width = (int(a) for a in sys.argv[2:5])
    draft = sys.argv[5:] == ["draft"]
    out.mkdir(parents=True, exist_ok=True)
    cases = []
    for i, (w, h) in enumerate([(96, 96), (160, 120), (121, 203), (640, 427), (57, 300)]):
        img = photo(w, h, i)
        for sub, q in [(2, 90), (0, 95), (1, 75)]:  # 4:2:0, 4:4:4, 4:2:2
            b = io.BytesIO()
            img.save(b, "JPEG", quality=q, subsampling=sub)
            cases.append((f"jpeg-{w}x{h}-s{sub}-q{q}", b.getvalue()))
        b = io.BytesIO()
        img.convert("L").save(b, "JPEG", quality=90)
        cases.append((f"grey-{w}x{h}", b.getvalue()))
        b = io.BytesIO()
        img.convert("CMYK").save(b, "JPEG", quality=95)
        cases.append((f"cmyk-{w}x{h}", b.getvalue()))
        b = io.BytesIO()
        rgba = img.copy()
        rgba.putalpha(Image.linear_gradient("L").resize((w, h)))
        rgba.save(b, "PNG")
        cases.append((f"png-{w}x{h}", b.getvalue()))
    for name, data in cases:
        (out / f"{name}.img").write_bytes(data)
        (out / f"{name}.rgb").write_bytes(reference(data, resize, height, width, draft))
        print(name)


if __name__ == "__main__":
    main()
