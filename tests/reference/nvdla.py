"""Independent NumPy/Python oracles for NVDLA formats, written from docs/nvdla.md (not from the
C++ core). Each format has a scalar loop-nest version that follows the spec's pseudo-code line by
line (used on small shapes) and, where larger shapes need it, a vectorised version whose inner
loops are NumPy slices; the tests check the two against each other."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

# ---------------------------------------------------------------- section 2.2: fp16 conversion


def fp16_bits(x: float, rounding: str = "nearest_even", saturate: bool = True) -> int:
    """binary16 bits of the real value ``x`` by the definition of docs/nvdla.md §2.2.1 (exact rational
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
    """docs/nvdla.md §2.3, every step a separate float32 NumPy scalar operation."""
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
    """The address formula of docs/nvdla.md §3.1."""
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
    """Scalar loops over every element (docs/nvdla.md §3.1/3.2): zero buffer, each element at its
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
    """The (k, c, r, s) emitted at each position, by the loop nest of docs/nvdla.md §6.1."""
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
    """Element index by the closed form of docs/nvdla.md §6.1."""
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
    """docs/nvdla.md §6.1 with the group and block loops in Python and the r, s, k, c loops as one
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
    """docs/nvdla.md §7.1: dense (K, G*Cg, R, S) with zeros outside each group's channel range."""
    K, Cg, R, S = w.shape
    Kg = K // groups
    dense = np.zeros((K, groups * Cg, R, S), dtype=w.dtype)
    for k in range(K):
        g = k // Kg
        dense[k, g * Cg:(g + 1) * Cg] = w[k]
    return dense


# ---------------------------------------------------------------- section 8: image-input weights


def image_pre_extend(w, cdata):
    """docs/nvdla.md §8.2 / 8.3 as loops: zp pads channels to Cdata; pre[k][s*Cdata + c][r][0] = zp[k][c][r][s]."""
    K, C, R, S = w.shape
    pre = np.zeros((K, cdata * S, R, 1), dtype=w.dtype)
    for k in range(K):
        for c in range(cdata):
            for r in range(R):
                for s in range(S):
                    pre[k, s * cdata + c, r, 0] = w[k, c, r, s] if c < C else 0
    return pre


def image_post_extension_order(K, C_ext, R, f, kpg):
    """The (k, c', r) emitted at each position by the loop nest of docs/nvdla.md §8.4."""
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


# ---------------------------------------------------------------- section 9: Winograd weights

WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)


def winograd_extend(w: np.ndarray, sy: int, sx: int, c_pad: int) -> np.ndarray:
    """Steps 1 and 2 of docs/nvdla.md §9.2/9.3 as the spec's loops: float64 g of (K, C_pad*sy*sx, 3, 3)."""
    K, C, R, S = w.shape
    g = np.zeros((K, c_pad * sy * sx, 3, 3), dtype=np.float64)
    for py in range(sy):
        for px in range(sx):
            for c in range(C):
                ce = (py * sx + px) * c_pad + c
                for r in range(3):
                    for s in range(3):
                        rr, ss = r * sy + py, s * sx + px
                        if rr < R and ss < S:
                            g[:, ce, r, s] = w[:, c, rr, ss].astype(np.float64)
    return g


def winograd_transform(g: np.ndarray) -> np.ndarray:
    """t = G g G^T for every 3x3 slice (docs/nvdla.md §9.4), float64 matrix products; zero results as +0
    (npupack's rule for the sign of a computed zero)."""
    return WINOGRAD_G @ g @ WINOGRAD_G.T + 0.0


def winograd_round(t: np.ndarray, precision: str, *, rounding="nearest_even", saturate=True, scale=1.0):
    """Step 4 (docs/nvdla.md §9.5, 2.4): fp16 by the rational fp16 oracle, integers by NumPy's rint /
    round-away / trunc and clipping."""
    if precision == "fp16":
        bits = [fp16_bits(float(v), rounding, saturate) for v in t.reshape(-1)]
        return np.array(bits, dtype=np.uint16).view(np.float16).reshape(t.shape)
    v = t * scale
    if rounding == "nearest_even":
        q = np.rint(v)
    elif rounding == "nearest_away":
        q = np.sign(v) * np.floor(np.abs(v) + 0.5)
    else:
        q = np.trunc(v)
    info = np.iinfo(np.int8 if precision == "int8" else np.int16)
    return np.clip(q, info.min, info.max).astype(info.dtype)


def winograd_map(T: np.ndarray, kpg: int, tail: int) -> np.ndarray:
    """Step 5 (docs/nvdla.md §9.6): the spec's loop nest over (K, C_ext, 4, 4), zero tail."""
    K, C_ext = T.shape[:2]
    le = T.astype(T.dtype.newbyteorder("<"))
    parts = []
    for k0 in range(0, K, kpg):
        kn = min(kpg, K - k0)
        for cb4 in range(C_ext // 4):
            for k in range(k0, k0 + kn):
                for r in range(4):
                    for s in range(4):
                        parts.append(le[k, 4 * cb4:4 * cb4 + 4, r, s].tobytes())
    stream = b"".join(parts)
    size = -(-len(stream) // tail) * tail
    return np.frombuffer(stream + bytes(size - len(stream)), dtype=np.uint8)


def winograd_closed_form(k, c, r, s, K, C_ext, kpg):
    """Element index of T[k][c][r][s] by the closed form of docs/nvdla.md §9.6."""
    k0 = (k // kpg) * kpg
    kn = min(kpg, K - k0)
    return k0 * C_ext * 16 + (c // 4) * kn * 64 + (k - k0) * 64 + (r * 4 + s) * 4 + c % 4


def pack_winograd(w, precision, *, atom, kpg, stride=(1, 1), rounding="nearest_even", saturate=True, scale=1.0,
                  tail=128):
    sy, sx = stride
    c_pad = -(-w.shape[1] // atom) * atom
    T = winograd_round(winograd_transform(winograd_extend(w, sy, sx, c_pad)), precision, rounding=rounding,
                       saturate=saturate, scale=scale)
    return winograd_map(T, kpg, tail), T


# ---------------------------------------------------------------- section 10: deconvolution sets

def deconv_sets(w: np.ndarray, sy: int, sx: int):
    """docs/nvdla.md §10.1 line by line: [(phase, set tensor (K_out, C_in, Rs, Ss))] before the flip."""
    C_in, K_out, R, S = w.shape
    kcrs = np.zeros((K_out, C_in, R, S), dtype=w.dtype)
    for k in range(K_out):
        for c in range(C_in):
            kcrs[k, c] = w[c, k]
    Rs, Ss = -(-R // sy), -(-S // sx)
    sets = []
    for y in range(sy):
        for x in range(sx):
            st = np.zeros((K_out, C_in, Rs, Ss), dtype=w.dtype)
            for r in range(Rs):
                for s in range(Ss):
                    rr, ss = y + r * sy, x + s * sx
                    if rr < R and ss < S:
                        st[:, :, r, s] = kcrs[:, :, rr, ss]
            sets.append(((y, x), st))
    return sets


def pack_deconv_set(st: np.ndarray, *, kpg, cb, tail):
    """The DC loop nest of docs/nvdla.md §6.1 with r and s running backwards (10.1)."""
    K, C, Rs, Ss = st.shape
    le = st.astype(st.dtype.newbyteorder("<"))
    stream = b"".join(le[k, c, Rs - 1 - r, Ss - 1 - s].tobytes() for (k, c, r, s) in dc_order_loops(K, C, Rs, Ss,
                                                                                                     kpg, cb))
    size = -(-len(stream) // tail) * tail
    return np.frombuffer(stream + bytes(size - len(stream)), dtype=np.uint8)


def conv_transpose(x: np.ndarray, w: np.ndarray, sy: int, sx: int) -> np.ndarray:
    """Transposed convolution by its definition (scatter): x (C_in, H, W), w (C_in, K_out, R, S)
    -> y (K_out, (H-1)*sy + R, (W-1)*sx + S), float64."""
    C_in, H, W = x.shape
    _, K_out, R, S = w.shape
    y = np.zeros((K_out, (H - 1) * sy + R, (W - 1) * sx + S))
    for iy in range(H):
        for ix in range(W):
            y[:, iy * sy:iy * sy + R, ix * sx:ix * sx + S] += np.einsum("c,ckrs->krs", x[:, iy, ix], w)
    return y


def correlate_full(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Stride-1 convolution as a DLA computes it (cross-correlation), x (C, H, W), k (K, C, R, S),
    input zero-padded by R-1 / S-1 on every side -> (K, H+R-1, W+S-1), float64."""
    C, H, W = x.shape
    K, _, R, S = k.shape
    xp = np.zeros((C, H + 2 * (R - 1), W + 2 * (S - 1)))
    xp[:, R - 1:R - 1 + H, S - 1:S - 1 + W] = x
    y = np.zeros((K, H + R - 1, W + S - 1))
    for r in range(R):
        for s in range(S):
            y += np.einsum("kc,chw->khw", k[:, :, r, s], xp[:, r:r + H + R - 1, s:s + W + S - 1])
    return y


# ---------------------------------------------------------------- section 11: compression

def compress_loops(stream: bytes, es: int, group_elems: int):
    """docs/nvdla.md §11.1 element by element: (data, wmb, wgs) bytes, each padded to 128 (min 128)."""
    n = len(stream) // es
    bits = bytearray(-(-n // 8))
    data = bytearray()
    wgs = bytearray()
    for g0 in range(0, n, group_elems):
        count = 0
        for i in range(g0, min(n, g0 + group_elems)):
            e = stream[i * es:(i + 1) * es]
            if any(e):
                bits[i // 8] |= 1 << (i % 8)
                data += e
                count += es
        wgs += count.to_bytes(4, "little")

    def pad(b):
        size = max(128, -(-len(b) // 128) * 128)
        return bytes(b) + bytes(size - len(b))

    return pad(data), pad(bits), pad(wgs)


def compress_numpy(stream: np.ndarray, es: int, group_elems: int):
    """The same with NumPy (boolean mask, packbits, reduceat): the benchmark baseline."""
    elems = stream.view(np.uint8 if es == 1 else np.uint16)
    mask = elems != 0
    data = elems[mask].view(np.uint8)
    wmb = np.packbits(mask, bitorder="little")
    wgs = (np.add.reduceat(mask, np.arange(0, elems.size, group_elems), dtype=np.int64) * es).astype("<u4")

    def pad(b):
        size = max(128, -(-b.nbytes // 128) * 128)
        return np.concatenate([b.view(np.uint8), np.zeros(size - b.nbytes, np.uint8)])

    return pad(data), pad(wmb), pad(wgs)


def decompress_numpy(data: np.ndarray, wmb: np.ndarray, es: int, n: int) -> np.ndarray:
    """The inverse with NumPy (unpackbits, boolean scatter): n elements as bytes, the benchmark
    baseline of decompression."""
    dtype = np.uint8 if es == 1 else np.uint16
    mask = np.unpackbits(wmb, bitorder="little")[:n].astype(bool)
    out = np.zeros(n, dtype)
    out[mask] = data[:int(mask.sum()) * es].view(dtype)
    return out.view(np.uint8)


def pack_winograd_vectorised(w: np.ndarray, precision: str, *, atom: int, kpg: int, tail: int = 128):
    """docs/nvdla.md §9 for stride 1 with NumPy only (the benchmark baseline): channel padding by
    np.pad, the transform as one broadcast matmul, rounding by astype / rint + clip (fp16 without
    saturation: NumPy's cast), the cube mapping as one transpose per kernel group."""
    K, C = w.shape[:2]
    c_pad = -(-C // atom) * atom
    g = np.pad(w.astype(np.float64), ((0, 0), (0, c_pad - C), (0, 0), (0, 0)))
    t = WINOGRAD_G @ g @ WINOGRAD_G.T + 0.0
    if precision == "fp16":
        T = t.astype(np.float16)
    else:
        info = np.iinfo(np.int8 if precision == "int8" else np.int16)
        T = np.clip(np.rint(t), info.min, info.max).astype(info.dtype)
    parts = [T[k0:k0 + kpg].reshape(-1, c_pad // 4, 4, 4, 4).transpose(1, 0, 3, 4, 2).reshape(-1)
             for k0 in range(0, K, kpg)]
    stream = np.concatenate(parts).view(np.uint8)
    size = -(-stream.size // tail) * tail
    return np.concatenate([stream, np.zeros(size - stream.size, np.uint8)])


# ---------------------------------------------------------------- section 12: SDP operands

def sdp_per_channel(components, *, E, data_size):
    """docs/nvdla.md §12.2 per channel: component j of channel c at c*eb + j*data_size, padded to
    roundup(C, E)*eb bytes. ``components``: list of integer or float16 arrays (C,)."""
    C = components[0].size
    eb = len(components) * data_size
    out = bytearray(-(-C // E) * E * eb)
    for c in range(C):
        for j, comp in enumerate(components):
            out[c * eb + j * data_size:c * eb + (j + 1) * data_size] = _le_bytes(comp[c], data_size)
    return bytes(out)


def sdp_per_element(components, *, E, data_size, atom, line_stride=None, surface_stride=None):
    """docs/nvdla.md §12.2 per element, by the address formula, element by element."""
    C, H, W = components[0].shape
    eb = len(components) * data_size
    row = W * E * eb
    ls = line_stride if line_stride is not None else -(-row // atom) * atom
    ss = surface_stride if surface_stride is not None else H * ls
    G = -(-C // E)
    size = (G - 1) * ss + (H - 1) * ls + -(-row // atom) * atom
    out = bytearray(size)
    for c in range(C):
        for h in range(H):
            for w in range(W):
                a = (c // E) * ss + h * ls + w * E * eb + (c % E) * eb
                for j, comp in enumerate(components):
                    out[a + j * data_size:a + (j + 1) * data_size] = _le_bytes(comp[c, h, w], data_size)
    return bytes(out), ls, ss


def _le_bytes(v, data_size):
    if isinstance(v, np.floating) and np.asarray(v).dtype == np.float16:
        return np.asarray(v, np.float16).view(np.uint16).tobytes()
    return int(v).to_bytes(data_size, "little", signed=True)
