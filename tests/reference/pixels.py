"""Pixel-format oracle built from the NVDLA pixel-format tables (docs/nvdla.md §4.2, §4.3), kept as
data in tests/data/nvdla_pixel_formats.json: each format's planes, bytes per pixel and component
order, and the 10-bit bit fields; every byte is placed by the line/plane formula of §4.4 with
explicit loops."""
import json
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "nvdla_pixel_formats.json"


def _table():
    data = json.loads(DATA.read_text(encoding="utf-8"))
    rows = {name: (kind, bpps, comps, orders) for name, (kind, bpps, comps, orders) in data["formats"].items()}
    return rows, data["bit_fields"]


ROWS, FIELDS = _table()


def pack(img, name, x_offset=0, line_strides=None):
    """img: (H, W, comps) component containers (uint8 / uint16 bits / 10-bit ints)."""
    kind, bpps, comps, orders = ROWS[name]
    h, w = img.shape[:2]
    out = []
    for p, bpp in enumerate(bpps):
        pre = x_offset * bpp if p == 0 else (x_offset * bpp) % 32
        ls = line_strides[p] if line_strides else -(-(pre + w * bpp) // 32) * 32
        buf = bytearray(h * ls)
        for y in range(h):
            for x in range(w):
                at = y * ls + pre + x * bpp
                if kind == "10bit":
                    word = sum(int(img[y, x, c]) << FIELDS[name][c] for c in range(4))
                    buf[at:at + 4] = word.to_bytes(4, "little")
                    continue
                size = bpp // len(orders[p])
                for i, c in enumerate(orders[p]):
                    buf[at + i * size:at + (i + 1) * size] = int(img[y, x, c]).to_bytes(size, "little")
        out.append(np.frombuffer(bytes(buf), np.uint8))
    return out
