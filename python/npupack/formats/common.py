"""Small helpers the vendor entries share (docs/formats.md §3)."""
from __future__ import annotations

import numpy as np

from npupack.layout import check_out

__all__ = ["into", "sample_shape", "layout_format", "DATA_DTYPES", "LAYOUT_PARAMS"]

LAYOUT_PARAMS = {"pad_lo": "lower padding per logical dim, elements (docs/openvino.md §3.2)",
                 "pad_hi": "upper padding per logical dim, elements (docs/openvino.md §3.2)"}

# Dtypes the generic engine moves unchanged: every numeric width it has.
DATA_DTYPES = tuple(np.dtype(t) for t in ("int8", "uint8", "int16", "uint16", "float16", "int32", "float32",
                                          "float64"))


def into(buf: np.ndarray, out) -> np.ndarray:
    """``buf`` itself, or copied into the first ``buf.size`` bytes of the caller's ``out`` (for
    vendor functions without an ``out`` argument)."""
    if out is None:
        return buf
    dst = check_out(out, buf.size)[: buf.size]
    dst[...] = buf
    return dst


# Small extents per axis letter for examples: odd ones so that every block has a tail.
_EXTENT = {"b": 3, "n": 1, "f": 5, "c": 5, "o": 5, "i": 3, "g": 2, "y": 3, "x": 2, "h": 3, "w": 2, "z": 2,
           "k": 5, "r": 3, "s": 3}


def sample_shape(letters) -> tuple:
    """A small shape for logical axes ``letters`` (examples and tests)."""
    return tuple(_EXTENT.get(str(a).lower()[:1], 2) for a in letters)


def layout_format(name: str, vendor: str, kind: str, lay, doc: str, examples: tuple):
    """A Format packed by the generic engine straight from a :class:`npupack.Layout` (oneDNN
    tags, grammar-only names): the verbs of :func:`npupack.pack` and ``Layout``."""
    from npupack import grammar
    from npupack.formats.registry import Format

    def nbytes(shape, dtype, pad_lo=None, pad_hi=None):
        return lay.nbytes(shape, dtype, pad_lo=pad_lo, pad_hi=pad_hi)

    def pack(x, *, out=None, pad_value=0, pad_lo=None, pad_hi=None):
        return grammar.pack(x, lay, out=out, pad_value=pad_value, pad_lo=pad_lo, pad_hi=pad_hi)

    def unpack(buf, shape, dtype, pad_lo=None, pad_hi=None):
        return grammar.unpack(buf, lay, shape, dtype, pad_lo=pad_lo, pad_hi=pad_hi)

    def offset(shape, index, dtype, pad_lo=None, pad_hi=None):
        # Layout.offset_of counts elements (docs/openvino.md §3.2); the registry speaks bytes.
        return lay.offset_of(shape, index, pad_lo=pad_lo, pad_hi=pad_hi) * dtype.itemsize

    def layout(shape, dtype, pad_lo=None, pad_hi=None):
        return lay.bind(shape, dtype, pad_lo=pad_lo, pad_hi=pad_hi)

    def explain(shape, dtype, *, limit=None, pad_lo=None, pad_hi=None):
        from npupack.explain import explain_lines

        return explain_lines(lay, shape, pad_lo=pad_lo, pad_hi=pad_hi, limit=limit)

    return Format(name, vendor, kind, LAYOUT_PARAMS, doc, ",".join(lay.logical), DATA_DTYPES, nbytes, pack, unpack,
                  offset, layout, explain, examples=examples)
