"""Oracles for Kneron (docs/kneron.md §6, 7) and Horizon (docs/horizon.md §3-5), written as explicit loops over
element indices from the specs' formulas (no engine code)."""
import numpy as np


def cdiv(a, b):
    return -(-a // b)


def kneron_v1_offset(chip, layout, c, h, w, C, H, W):
    """The offset formulas of docs/kneron.md §6.1 / 6.2 (scalars)."""
    W16, W8, W4 = cdiv(W, 16) * 16, cdiv(W, 8) * 8, cdiv(W, 4) * 4
    if layout == "4W4C8B":
        if chip == "kl520":
            return h * (cdiv(C, 4) * W16 * 4) + (c // 4) * (W16 * 4) + w * 4 + c % 4
        return (c // 4) * (H * W4 * 4) + h * (W4 * 4) + w * 4 + c % 4
    if layout == "1W16C8B":
        return (c // 16) * (H * W * 16) + h * (W * 16) + w * 16 + c % 16
    if layout == "16W1C8B":
        return (h * C + c) * W16 + w if chip == "kl520" else (c * H + h) * W16 + w
    if layout == "8W1C16B":
        return (c * H + h) * W8 + w
    raise ValueError(layout)


def kneron_v1_size(chip, layout, C, H, W):
    W16, W8, W4 = cdiv(W, 16) * 16, cdiv(W, 8) * 8, cdiv(W, 4) * 4
    return {"4W4C8B": H * cdiv(C, 4) * (W16 if chip == "kl520" else W4) * 4, "1W16C8B": cdiv(C, 16) * H * W * 16,
            "16W1C8B": C * H * W16, "8W1C16B": C * H * W8}[layout]


def kneron_v1_pack(x, chip, layout):
    """Every element at the formula's offset (the formula evaluated on index arrays), zeros elsewhere."""
    C, H, W = x.shape
    buf = np.zeros(kneron_v1_size(chip, layout, C, H, W), dtype=x.dtype)
    c, h, w = np.indices(x.shape)
    buf[kneron_v1_offset(chip, layout, c, h, w, C, H, W)] = x
    return buf.view(np.uint8)


def kneron_v2_index(idx, shape, stride_npu, outer_group):
    """docs/kneron.md §7.1 / 7.2: scalar index of an ONNX index."""
    e = sum(i * s for i, s in zip(idx, stride_npu))
    if outer_group:
        ch = [d for d, s in enumerate(stride_npu) if s == 1][0]
        G = max(stride_npu[d] * shape[d] for d in range(len(shape)) if d != ch)
        e += (idx[ch] // 16) * (G - 16)
    return e


def kneron_v2_pack(x, stride_npu, outer_group=False, highlow=False):
    shape = x.shape
    if outer_group:
        ch = [d for d, s in enumerate(stride_npu) if s == 1][0]
        G = max(stride_npu[d] * shape[d] for d in range(len(shape)) if d != ch)
        n = cdiv(shape[ch], 16) * G
    else:
        n = max(s * v for s, v in zip(stride_npu, shape))
    if highlow:
        out = np.zeros(cdiv(n, 16) * 32, dtype=np.uint8)
        for idx in np.ndindex(*shape):
            e = kneron_v2_index(idx, shape, stride_npu, outer_group)
            u = int(x[idx]) & 0xFFFF
            lo = (e // 16) * 32 + e % 16
            out[lo] = (u >> 1) & 0x7F
            out[lo + 16] = (u >> 8) & 0xFF
        return out
    buf = np.zeros(n, dtype=x.dtype)
    for idx in np.ndindex(*shape):
        buf[kneron_v2_index(idx, shape, stride_npu, outer_group)] = x[idx]
    return buf.view(np.uint8)


def horizon_pad(x, stride, total):
    """docs/horizon.md §3 / 6: element idx at sum(idx * stride) bytes, zeros elsewhere."""
    buf = np.zeros(total, dtype=np.uint8)
    es = x.dtype.itemsize
    for idx in np.ndindex(*x.shape):
        off = sum(i * s for i, s in zip(idx, stride))
        buf[off:off + es] = np.frombuffer(x[idx].tobytes(), np.uint8)
    return buf


def align_bpu_bytes_table(n):
    """docs/horizon.md §4.1 by enumeration: the smallest 256*k + r >= n with r in {0,16,32,64,128}, > 0."""
    best = None
    for k in range(0, n // 256 + 2):
        for r in (0, 16, 32, 64, 128):
            v = 256 * k + r
            if v >= n and v > 0 and (best is None or v < best):
                best = v
    return best
