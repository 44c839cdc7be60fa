"""Pixel-format oracle built from the text of spec/nvdla.md section 4: the format table's
"memory order of one pixel" column and the 10-bit bit-field table are parsed from the spec, and
every byte is placed by the line/plane formula of 4.4 with explicit loops."""
import re
from pathlib import Path

import numpy as np

SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "nvdla.md"
_LETTER = {"R": 0, "Y": 0, "G": 1, "U": 1, "B": 2, "V": 2, "A": 3, "X": 3}


def _table():
    text = SPEC.read_text(encoding="utf-8")
    sec = text[text.index("### 4.2 Format table"):text.index("### 4.4 Lines")]
    rows = {}
    for m in re.finditer(r"^\| `(T_\w+)` \| (\d) \| ([\d +]+) \| (\d)[^|]*\| [^|]+\| ([^|]+)\|", sec, re.M):
        name, bpp, comps, order = m.group(1), m.group(3), int(m.group(4)), m.group(5)
        bpps = [int(v) for v in bpp.replace(" ", "").split("+")]
        if "bit fields" in order or "LE u32" in order:
            rows[name] = ("10bit", bpps, comps, None)
            continue
        same = re.search(r"same as `?(T_\w+)", order)
        if same:
            rows[name] = rows[same.group(1)][:2] + (comps, rows[same.group(1)][3])
            continue
        plane_orders = []
        for part in order.split(";"):
            part = re.sub(r"plane \d: ", "", part)
            letters = re.findall(r"\b([RGBAXYUV])\b", part.split("(")[0])
            plane_orders.append([_LETTER[c] for c in letters])
        rows[name] = ("plain", bpps, comps, plane_orders)
    fields = {}
    bit_sec = sec[sec.index("### 4.3"):]
    for m in re.finditer(r"^\| ((?:`T_\w+`(?:, )?)+) \| (\d+):(\d+) \| (\d+):(\d+) \| (\d+):(\d+) \| (\d+):(\d+) \|",
                         bit_sec, re.M):
        lows = [int(m.group(i)) for i in (3, 5, 7, 9)]
        for name in re.findall(r"`(T_\w+)`", m.group(1)):
            fields[name] = lows
    return rows, fields


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
