"""Pure-NumPy oracle for blocked layouts, written from docs/openvino.md §3.2 only (no engine code):

    P[a] = L[a] + D[a] + U[a];  E[a] = align(P[a]);  T[a] = product of a's tiles;  Q[a] = ceil(E[a]/T[a])
    digit of tile j = ((idx[a_j] + L[a_j]) // div_j) % n_j   (default div_j: product of later tiles of a_j)
    offset = mixed-radix value of [outer digits (p // T) in outer order] ++ [tile digits] over
             extents [Q in outer order] ++ [tile sizes]

A layout is given as plain data: logical (dim names), outer (names), tiles [(dim, size, divisor or
None)], align {dim: n}."""
from __future__ import annotations

import numpy as np


def _divisors(tiles):
    out = []
    for j, (d, _size, div) in enumerate(tiles):
        if div is None:
            div = 1
            for d2, n2, _ in tiles[j + 1:]:
                if d2 == d:
                    div *= n2
        out.append(div)
    return out


def extents(logical, outer, tiles, align, shape, pad_lo, pad_hi):
    T = {d: 1 for d in logical}
    for d, n, _ in tiles:
        T[d] *= n
    Q = {}
    for i, d in enumerate(logical):
        P = pad_lo[i] + shape[i] + pad_hi[i]
        a = align.get(d, 1)
        E = -(-P // a) * a
        Q[d] = -(-E // T[d])
    return [Q[d] for d in outer] + [n for _, n, _ in tiles], T


def offsets(logical, outer, tiles, align, shape, pad_lo=None, pad_hi=None):
    """Element offset of every logical index: an int64 array of `shape`."""
    rank = len(logical)
    pad_lo = pad_lo or (0,) * rank
    pad_hi = pad_hi or (0,) * rank
    ext, T = extents(logical, outer, tiles, align, shape, pad_lo, pad_hi)
    idx = np.indices(shape, dtype=np.int64)
    p = {d: idx[i] + pad_lo[i] for i, d in enumerate(logical)}
    digits = [p[d] // T[d] for d in outer]
    for (d, n, _), div in zip(tiles, _divisors(tiles)):
        digits.append((p[d] // div) % n)
    off = np.zeros(shape, dtype=np.int64)
    for dig, e in zip(digits, ext):
        off = off * e + dig
    return off, int(np.prod(ext))


def pack(x, logical, outer, tiles, align=None, pad_lo=None, pad_hi=None, pad_value=0):
    """Buffer (1-D uint8) with every element at its offset and pad_value elsewhere."""
    off, size = offsets(logical, outer, tiles, align or {}, x.shape, pad_lo, pad_hi)
    buf = np.full(size, pad_value, dtype=x.dtype)
    buf[off.reshape(-1)] = x.reshape(-1)
    return buf.view(np.uint8)


def pack_transpose(x, logical, outer, tiles, pad_value=0):
    """The NumPy way (the benchmarks' baseline): pad every blocked dim to whole blocks, reshape
    each dim into (outer count, tile sizes...), transpose into the nesting, copy. Default divisors
    and no padding/alignment only."""
    T = {d: 1 for d in logical}
    for d, n, _ in tiles:
        T[d] *= n
    widths = [(0, -(-s // T[d]) * T[d] - s) for d, s in zip(logical, x.shape)]
    padded = np.pad(x, widths, constant_values=pad_value) if any(w for _, w in widths) else x
    axes, shape = {}, []
    for d, s in zip(logical, padded.shape):
        axes[(d, 0)] = len(shape)
        shape.append(s // T[d])
        for j, (d2, n, _) in enumerate(tiles):
            if d2 == d:
                axes[(d, j + 1)] = len(shape)
                shape.append(n)
    perm = [axes[(d, 0)] for d in outer] + [axes[(d, j + 1)] for j, (d, _, _) in enumerate(tiles)]
    return np.ascontiguousarray(padded.reshape(shape).transpose(perm)).reshape(-1).view(np.uint8)
