"""NVDLA image-input weights: zero-pad channels to the pixel format's channel count, channel
pre-extension ``c' = s*Cdata + c`` and the optional post-extension (docs/nvdla.md §8).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import BlockedLayout, Dim, check_int, is_int
from npupack.nvdla.config import Config, check_config, element_size
from npupack.nvdla.convert import _TARGET_DTYPE, _check_rounding, convert_elements, infer_precision
from npupack.nvdla.surfaces import (WeightSurfaces, _dc_layout, check_compress, check_single_group,
                                    check_stride, check_unit_scale, kcrs, write_surfaces)

__all__ = ["post_extension_factor"]


def post_extension_factor(cdata: int, s: int, r: int, stride_x: int, mac_atomic_c: int) -> int:
    """nvdla/sw's automatic post-extension choice (docs/nvdla.md §8.4): 4, 2 or 1 for a kernel of width
    ``s`` and height ``r`` (elements) on a ``cdata``-component image read at x stride
    ``stride_x``, with ``mac_atomic_c`` channels per MAC atom (``Config.mac_atomic_c``).
    Raises TypeError for an argument that is not an integer, LayoutError for one < 1."""
    args = dict(cdata=cdata, s=s, r=r, stride_x=stride_x, mac_atomic_c=mac_atomic_c)
    for name, value in args.items():
        if check_int(value, name) < 1:
            raise LayoutError(f"{name}: must be >= 1, got {value}")
    cdata, s, r, stride_x, mac_atomic_c = (int(v) for v in args.values())
    c_ext = cdata * s
    if stride_x > s:
        f = 1
    elif cdata * stride_x * 3 + c_ext <= mac_atomic_c and c_ext <= mac_atomic_c // 4:
        f = 4
    elif cdata * stride_x + c_ext <= mac_atomic_c and c_ext <= mac_atomic_c // 2:
        f = 2
    else:
        f = 1
    if f > 1 and (c_ext > mac_atomic_c or r // f <= 1):
        f = 1  # declined; nvdla/sw does not retry with 2
    return f


@lru_cache(maxsize=1024)
def _post_ext_layout(k: int, c_ext: int, r: int, f: int, precision: str, config: Config) -> BlockedLayout:
    """Post-extended weights (docs/nvdla.md §8.4): kernel groups (ragged), full row groups of f rows
    (the last group short, not padded), then each kernel's f rows of C' channels."""
    return BlockedLayout(
        [Dim("K", k, (config.kernels_per_group(precision),), ragged=True), Dim("C", c_ext),
         Dim("R", r, (f,), ragged=True), Dim("S", 1)],
        [("K", 0), ("R", 0), ("K", 1), ("R", 1), ("C", 0), ("S", 0)], _TARGET_DTYPE[precision])


def image_layout(k, c_ext, r, f, precision, config) -> BlockedLayout:
    """DC mapping for f = 1, the post-extension descriptor otherwise (docs/nvdla.md §8.4, 8.5)."""
    return _dc_layout((k, c_ext, r, 1), precision, config) if f == 1 else \
        _post_ext_layout(k, c_ext, r, f, precision, config)


@lru_cache(maxsize=1024)
def _planes_layout(k: int, c: int, cdata: int, taps: int, dtype: np.dtype) -> BlockedLayout:
    """(K, C, R*S) weights to Cdata channel planes of K*R*S taps each, planes C..Cdata-1 zero."""
    return BlockedLayout([Dim("K", k), Dim("C", c, pad_hi=cdata - c), Dim("P", taps)], [("C", 0), ("K", 0), ("P", 0)],
                         dtype)


@lru_cache(maxsize=1024)
def _interleave_layout(cdata: int, m: int, dtype: np.dtype) -> BlockedLayout:
    """Cdata planes of ``m`` taps to ``m`` pixels of Cdata channels: one wide transpose, after which
    each kernel row holds the C' = Cdata*S channels of the pre-extension (docs/nvdla.md §8.3) in
    order."""
    return BlockedLayout([Dim("C", cdata), Dim("M", m)], [("M", 0), ("C", 0)], dtype)


@lru_cache(maxsize=1024)
def _rows_layout(groups: int, q: int, full: int, f: int, x: int, r: int, dtype: np.dtype) -> BlockedLayout:
    """The first ``full`` rows (whole row groups of f rows) of ``groups`` kernel groups of ``q``
    kernels of a (K, R, C') pixel tensor, as they sit in the image mapping (docs/nvdla.md §8.4,
    8.5: kernel group, row group, kernel, row, C'; the DC mapping at f = 1 and one channel block).
    A short last row group is left out: as a ragged dim it would take the engine's slow path."""
    es = np.dtype(dtype).itemsize
    return BlockedLayout([Dim("G", groups), Dim("Q", q), Dim("A", full // f), Dim("B", f), Dim("X", x)],
                         [("G", 0), ("A", 0), ("Q", 0), ("B", 0), ("X", 0)], dtype,
                         byte_strides={("G", 0): q * r * x * es})


def _pre_extend_into(elems: np.ndarray, cdata: int, f: int, precision: str, config: Config,
                     buf: np.ndarray) -> None:
    """Write the image mapping of (K,C,R,S) ``elems`` into ``buf`` (docs/nvdla.md §8.3-8.5), a slab
    of whole kernel groups at a time: the slab's channels are zero-padded to ``cdata`` planes,
    interleaved into pixels (each row of R then holds C' = Cdata*S channels in pre-extension
    order) and its rows copied to their places (by :func:`image_layout` on the pixels seen as the pre-extended
    tensor where C' spans more than one channel block). Each step is a wide transpose or a
    row copy in the engine, where mapping straight from (K,C,R,S) moves bytes one at a time, and
    the temporaries stay the size of a slab, in the caches."""
    k, c, r, s = elems.shape
    es = elems.dtype.itemsize
    x = cdata * s
    kpg = config.kernels_per_group(precision)
    kernel_bytes = x * r * es
    slab = max(1, _SLAB_BYTES // (kernel_bytes * kpg)) * kpg
    planes = np.empty(min(slab, k) * kernel_bytes, dtype=np.uint8)
    pixels = np.empty(min(slab, k) * kernel_bytes, dtype=np.uint8)
    full = r // f * f
    for k0 in range(0, k, slab):
        n = min(slab, k - k0)
        _planes_layout(n, c, cdata, r * s, elems.dtype)._pack_into(elems[k0:k0 + n].reshape(n, c, r * s),
                                                                   planes)
        _interleave_layout(cdata, n * r * s, elems.dtype)._pack_into(
            planes[:n * kernel_bytes].view(elems.dtype).reshape(cdata, n * r * s), pixels)
        rows = pixels[:n * kernel_bytes].view(elems.dtype).reshape(n, r, x)
        out = buf[k0 * kernel_bytes:(k0 + n) * kernel_bytes]
        if f == 1 and x > config.channels_per_block:
            image_layout(n, x, r, 1, precision, config)._pack_into(rows.transpose(0, 2, 1)[..., None], out)
            continue
        # The whole kernel groups, then a short last one.
        for g0, groups, q in ((0, n // kpg, kpg), (n // kpg * kpg, 1, n % kpg)):
            if groups * q == 0:
                continue
            block = rows[g0:g0 + groups * q].reshape(groups, q, r, x)
            dst = out[g0 * kernel_bytes:(g0 + groups * q) * kernel_bytes]
            _rows_layout(groups, q, full, f, x, r, elems.dtype)._pack_into(
                block[:, :, :full].reshape(groups, q, full // f, f, x), dst)
            # A short last row group goes in after the engine pass, which zero-fills its slots
            # (they lie between the whole row groups of consecutive kernel groups); its rows are
            # one run per kernel.
            if full < r:
                tail = dst.view(elems.dtype).reshape(groups, q * r, x)[:, q * full:]
                np.copyto(tail.reshape(groups, q, r - full, x), block[:, :, full:])


_SLAB_BYTES = 256 << 10  # a slab's output and its two temporaries stay together in a 1 MiB L2


def pack_image(w, *, precision, config, groups, stride, pixel_format, post_extension, compress, rounding,
                saturate, scale, allow_nan, out) -> WeightSurfaces:
    """kind="image" of :func:`pack_weights` (docs/nvdla.md §8)."""
    from npupack.nvdla.pixel import _format

    check_config(config)
    if pixel_format is None:
        raise ValueError("pixel_format: image-input weights need the pixel format of the input image (docs/nvdla.md §8.1)")
    fmt = _format(pixel_format)
    check_single_group(groups, "image")
    _, sx = check_stride(stride)
    check_unit_scale(scale, "image")
    compress = check_compress(compress, config)
    arr = np.asarray(w)
    k, c, r, s = kcrs(arr.shape, "w")
    cdata = fmt.comps
    if c > cdata:
        raise LayoutError(f"w: {c} input channels, but {fmt.name} gives the convolution only {cdata} (docs/nvdla.md §8.1)")
    precision = infer_precision(arr.dtype, precision, config, "w")
    if fmt.kind == "fp16" and precision != "fp16":
        raise UnsupportedError(f"precision: an fp16 image ({fmt.name}) needs fp16 weights, got {precision!r} "
                               "(docs/nvdla.md §13.1)")
    _check_rounding(rounding)
    c_ext = cdata * s
    atomic_c = config.mac_atomic_c
    if post_extension == "auto":
        f = post_extension_factor(cdata, s, r, sx, atomic_c)
    elif is_int(post_extension) and post_extension in (1, 2, 4):  # 2.0 is not a factor
        f = int(post_extension)
        if f > 1 and c_ext > atomic_c // f:
            raise UnsupportedError(f"post_extension: {f} needs C' = Cdata*S = {c_ext} <= mac_atomic_c // {f} = "
                                   f"{atomic_c // f} (docs/nvdla.md §8.4)")
        if f > 1 and r // f < 2:
            raise UnsupportedError(f"post_extension: {f} needs at least two full row groups, but R = {r} gives "
                                   f"{r // f} (docs/nvdla.md §8.4)")
    else:
        raise ValueError(f"post_extension: 'auto', 1, 2 or 4, got {post_extension!r}")
    elems = convert_elements(arr, precision, what="w", rounding=rounding, saturate=saturate, allow_nan=allow_nan)
    layout = image_layout(k, c_ext, r, f, precision, config)
    meaningful = layout.nbytes
    es = element_size(precision)
    kpg = config.kernels_per_group(precision)
    fields = write_surfaces(lambda buf: _pre_extend_into(elems, cdata, f, precision, config, buf), meaningful,
                            precision=precision, config=config, kernel_group_elements=kpg * c_ext * r,
                            compress=compress, tail=config.weight_size_alignment, out=out)
    return WeightSurfaces._fast(
        kind="image", precision=precision, shape=(k, c, r, s), packed_shape=(k, c_ext, r, 1),
        kernel_groups=-(-k // config.kernels_per_group(precision)), bytes_per_kernel=c_ext * r * es,
        meaningful_bytes=meaningful, config=config, post_extension=f, pixel_format=fmt.name, **fields)


def unpack_image(surfaces: WeightSurfaces, data: np.ndarray, logical: bool) -> np.ndarray:
    from npupack.nvdla.pixel import _format

    k, c_ext, r, _ = surfaces.packed_shape
    layout = image_layout(k, c_ext, r, surfaces.post_extension, surfaces.precision, surfaces.config)
    if data.size < layout.nbytes:
        raise LayoutError(f"surfaces.weight: holds {data.size} bytes, {layout.nbytes} are needed")
    pre = layout.unpack(data)
    if not logical:
        return pre
    cdata = _format(surfaces.pixel_format).comps
    k, c, r, s = surfaces.shape
    return np.ascontiguousarray(pre.reshape(k, s, cdata, r).transpose(0, 2, 3, 1)[:, :c])
