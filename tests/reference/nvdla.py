"""Independent NumPy/Python oracles for NVDLA formats, written from spec/nvdla.md (not from the
C++ core). Each format has a scalar loop-nest version that follows the spec's pseudo-code line by
line (used on small shapes) and, where larger shapes need it, a vectorised version whose inner
loops are NumPy slices; the tests check the two against each other."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

# ---------------------------------------------------------------- section 2.2: fp16 conversion


def fp16_bits(x: float, rounding: str = "nearest_even", saturate: bool = True) -> int:
    """binary16 bits of the real value ``x`` by the definition of nvdla.md 2.2.1 (exact rational
    arithmetic, no bit tricks)."""
    if math.isnan(x):
        raise ValueError("NaN has no single expected pattern here")
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    over = sign | (0x7BFF if saturate else 0x7C00)
    if math.isinf(x):
        return over
    if x == 0:
        return sign
    ax = Fraction(abs(x))
    e = max(math.floor(math.log2(ax)) if ax >= 1 else -_ceil_log2_inv(ax), -14)
    # Guard against log2 rounding: make sure 2^e <= |x| < 2^(e+1) for normals.
    while e > -14 and Fraction(2) ** e > ax:
        e -= 1
    while Fraction(2) ** (e + 1) <= ax:
        e += 1
    q = Fraction(2) ** (e - 10)
    ratio = ax / q
    n = math.floor(ratio)
    frac = ratio - n
    if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and (rounding == "nearest_away" or n % 2 == 1)):
        n += 1
    mag = n * q
    if mag >= 65536:
        return over
    return sign | int(np.float16(float(mag)).view(np.uint16))


def _ceil_log2_inv(ax: Fraction) -> int:
    # For |x| < 1: floor(log2(x)) = -ceil(log2(1/x)) when 1/x is not a power of two.
    k = 0
    while Fraction(2) ** (-k) > ax:
        k += 1
    return k


# ---------------------------------------------------------------- section 2.3: quantisation


def quantize(w: np.ndarray, precision: str, mode: str):
    """nvdla.md 2.3, every step a separate float32 NumPy scalar operation."""
    qmax, qmin = (127, -128) if precision == "int8" else (32767, -32768)
    w = np.asarray(w, dtype=np.float32)
    k = w.shape[0]
    blocks = [w] if mode == "per_kernel" else [w[i] for i in range(k)]
    qs, scales = [], []
    for b in blocks:
        m = np.float32(np.max(np.abs(b)))
        if m == 0:
            qs.append(np.zeros(b.shape, dtype=np.int64))
            scales.append(np.float32(0))
            continue
        scale = np.float32(m / np.float32(qmax))
        inv = np.float32(np.float32(1.0) / scale)
        q = np.empty(b.shape, dtype=np.int64)
        for idx, v in np.ndenumerate(b):
            p = np.float32(v * inv)
            h = np.float32(p + np.float32(0.5))
            q[idx] = min(max(math.floor(h), qmin), qmax)
        qs.append(q)
        scales.append(scale)
    dtype = np.int8 if precision == "int8" else np.int16
    if mode == "per_kernel":
        return qs[0].astype(dtype), np.array(scales * k, dtype=np.float32)
    return np.stack(qs).astype(dtype), np.array(scales, dtype=np.float32)


# ---------------------------------------------------------------- section 3: feature data


def feature_address(n, c, h, w, *, A, es, line_stride, surface_stride, batch_stride):
    """The address formula of nvdla.md 3.1."""
    return n * batch_stride + (c // A) * surface_stride + h * line_stride + w * A * es + (c % A) * es


def feature_strides(shape, *, atom_bytes, es, line_stride=None, surface_stride=None, batch_stride=None):
    n, c, h, w = shape
    A = atom_bytes // es
    G = -(-c // A)
    ls = line_stride if line_stride is not None else w * atom_bytes
    ss = surface_stride if surface_stride is not None else h * ls
    bs = batch_stride if batch_stride is not None else G * ss
    nbytes = (n - 1) * bs + (G - 1) * ss + (h - 1) * ls + w * atom_bytes
    return ls, ss, bs, nbytes


def pack_feature_loops(x: np.ndarray, *, atom_bytes, line_stride=None, surface_stride=None, batch_stride=None):
    """Scalar loops over every element (nvdla.md 3.1/3.2): zero buffer, each element at its
    address, little-endian."""
    es = x.dtype.itemsize
    ls, ss, bs, nbytes = feature_strides(x.shape, atom_bytes=atom_bytes, es=es, line_stride=line_stride,
                                         surface_stride=surface_stride, batch_stride=batch_stride)
    buf = bytearray(nbytes)
    A = atom_bytes // es
    le = x.astype(x.dtype.newbyteorder("<"))
    for (n, c, h, w) in np.ndindex(*le.shape):
        a = feature_address(n, c, h, w, A=A, es=es, line_stride=ls, surface_stride=ss, batch_stride=bs)
        buf[a:a + es] = le[n, c, h, w].tobytes()
    return np.frombuffer(bytes(buf), dtype=np.uint8)


def pack_feature_vectorised(x: np.ndarray, *, atom_bytes, line_stride=None, surface_stride=None, batch_stride=None):
    """Same as pack_feature_loops with NumPy: pad C to whole atoms, reorder to
    (N, G, H, W, A) and place every atom through a strided byte view."""
    es = x.dtype.itemsize
    n, c, h, w = x.shape
    A = atom_bytes // es
    G = -(-c // A)
    ls, ss, bs, nbytes = feature_strides(x.shape, atom_bytes=atom_bytes, es=es, line_stride=line_stride,
                                         surface_stride=surface_stride, batch_stride=batch_stride)
    padded = np.zeros((n, G * A, h, w), dtype=x.dtype.newbyteorder("<"))
    padded[:, :c] = x
    atoms = padded.reshape(n, G, A, h, w).transpose(0, 1, 3, 4, 2)
    atom_bytes_view = np.ascontiguousarray(atoms).view(np.uint8).reshape(n, G, h, w, atom_bytes)
    buf = np.zeros(nbytes, dtype=np.uint8)
    dst = np.lib.stride_tricks.as_strided(buf, shape=(n, G, h, w, atom_bytes), strides=(bs, ss, ls, atom_bytes, 1))
    dst[...] = atom_bytes_view
    return buf


# ---------------------------------------------------------------- sections 6 and 7: DC weights


def dc_order_loops(K, C, R, S, kpg, cb):
    """The (k, c, r, s) emitted at each position, by the loop nest of nvdla.md 6.1."""
    out = []
    for k0 in range(0, K, kpg):
        kn = min(kpg, K - k0)
        for c0 in range(0, C, cb):
            cn = min(cb, C - c0)
            for r in range(R):
                for s in range(S):
                    for k in range(k0, k0 + kn):
                        for c in range(c0, c0 + cn):
                            out.append((k, c, r, s))
    return out


def dc_closed_form(k, c, r, s, K, C, R, S, kpg, cb):
    """Element index by the closed form of nvdla.md 6.1."""
    k0 = (k // kpg) * kpg
    kn = min(kpg, K - k0)
    c0 = (c // cb) * cb
    cn = min(cb, C - c0)
    return k0 * C * R * S + kn * c0 * R * S + ((r * S + s) * kn + (k - k0)) * cn + (c - c0)


def pack_dc_loops(w: np.ndarray, *, kpg, cb, tail):
    K, C, R, S = w.shape
    le = w.astype(w.dtype.newbyteorder("<"))
    stream = b"".join(le[k, c, r, s].tobytes() for (k, c, r, s) in dc_order_loops(K, C, R, S, kpg, cb))
    size = -(-len(stream) // tail) * tail
    return np.frombuffer(stream + bytes(size - len(stream)), dtype=np.uint8)


def pack_dc_vectorised(w: np.ndarray, *, kpg, cb, tail):
    """nvdla.md 6.1 with the group and block loops in Python and the r, s, k, c loops as one
    NumPy transpose per block."""
    K, C, R, S = w.shape
    le = w.astype(w.dtype.newbyteorder("<"))
    parts = []
    for k0 in range(0, K, kpg):
        for c0 in range(0, C, cb):
            parts.append(le[k0:k0 + kpg, c0:c0 + cb].transpose(2, 3, 0, 1).reshape(-1))
    stream = np.concatenate(parts).view(np.uint8)
    size = -(-stream.size // tail) * tail
    return np.concatenate([stream, np.zeros(size - stream.size, dtype=np.uint8)])


def densify_groups(w: np.ndarray, groups: int) -> np.ndarray:
    """nvdla.md 7.1: dense (K, G*Cg, R, S) with zeros outside each group's channel range."""
    K, Cg, R, S = w.shape
    Kg = K // groups
    dense = np.zeros((K, groups * Cg, R, S), dtype=w.dtype)
    for k in range(K):
        g = k // Kg
        dense[k, g * Cg:(g + 1) * Cg] = w[k]
    return dense


# ---------------------------------------------------------------- section 8: image-input weights


def image_pre_extend(w, cdata):
    """nvdla.md 8.2 / 8.3 as loops: zp pads channels to Cdata; pre[k][s*Cdata + c][r][0] = zp[k][c][r][s]."""
    K, C, R, S = w.shape
    pre = np.zeros((K, cdata * S, R, 1), dtype=w.dtype)
    for k in range(K):
        for c in range(cdata):
            for r in range(R):
                for s in range(S):
                    pre[k, s * cdata + c, r, 0] = w[k, c, r, s] if c < C else 0
    return pre


def image_post_extension_order(K, C_ext, R, f, kpg):
    """The (k, c', r) emitted at each position by the loop nest of nvdla.md 8.4."""
    out = []
    rfg, rp = R // f, R % f
    for k0 in range(0, K, kpg):
        kn = min(kpg, K - k0)
        for rg in range(rfg):
            for k in range(k0, k0 + kn):
                for r in range(rg * f, rg * f + f):
                    for c in range(C_ext):
                        out.append((k, c, r))
        if rp > 0:
            for k in range(k0, k0 + kn):
                for r in range(rfg * f, R):
                    for c in range(C_ext):
                        out.append((k, c, r))
    return out


def pack_image_weights(w, cdata, f, *, kpg, cb, tail):
    pre = image_pre_extend(w, cdata)
    if f == 1:
        return pack_dc_loops(pre, kpg=kpg, cb=cb, tail=tail)
    le = pre.astype(pre.dtype.newbyteorder("<"))
    K, C_ext, R, _ = pre.shape
    stream = b"".join(le[k, c, r, 0].tobytes() for (k, c, r) in image_post_extension_order(K, C_ext, R, f, kpg))
    size = -(-len(stream) // tail) * tail
    return np.frombuffer(stream + bytes(size - len(stream)), dtype=np.uint8)
