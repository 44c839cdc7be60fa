"""NVDLA image-input weights: zero-pad channels to the pixel format's channel count, channel
pre-extension ``c' = s*Cdata + c`` and the optional post-extension (docs/nvdla.md §8).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from npupack import _core
from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import BlockedLayout, Dim, check_int, is_int, remember, result_buffer
from npupack.nvdla.config import Config, check_config, element_size
from npupack.nvdla.convert import _TARGET_DTYPE, _check_rounding, convert_elements, infer_precision
from npupack.nvdla.pixel import _format
from npupack.nvdla.surfaces import (WeightSurfaces, _dc_layout, check_compress, check_single_group,
                                    check_stride, check_unit_scale, kcrs, roundup, write_surfaces)

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


# Checked plans by (shape, dtype, options), as for DC and Winograd weights (docs/design.md §5.4): a
# layer shape packed before skips every check that does not depend on the values. Options enter
# a key only as the exact types the checks accept, so 2.0 or True never finds the plan of 2 or 1.
_PLANS: dict = {}
_MAX_PLANS = 1024


def _plan_key(w, precision, config, groups, stride, pixel_format, post_extension, compress, rounding, saturate,
              scale, allow_nan):
    if (type(w) is np.ndarray and compress is False and type(groups) is int and groups == 1
            and type(config) is Config and (precision is None or type(precision) is str)
            and type(stride) is tuple and len(stride) == 2 and type(stride[0]) is int and type(stride[1]) is int
            and type(pixel_format) is str
            and (type(post_extension) is str or type(post_extension) is int) and type(rounding) is str
            and type(saturate) is bool and type(scale) is float and type(allow_nan) is bool):
        return (w.shape, w.dtype, precision, config, stride, pixel_format, post_extension, rounding, saturate,
                scale, allow_nan)
    return None


def pack_image(w, *, precision, config, groups, stride, pixel_format, post_extension, compress, rounding,
               saturate, scale, allow_nan, out) -> WeightSurfaces:
    """kind="image" of :func:`pack_weights` (docs/nvdla.md §8)."""
    key = _plan_key(w, precision, config, groups, stride, pixel_format, post_extension, compress, rounding, saturate,
                    scale, allow_nan)
    plan = _PLANS.get(key) if key is not None else None
    if plan is not None:
        return plan(w, out)
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
    layout = image_layout(k, c_ext, r, f, precision, config)
    meaningful = layout.nbytes
    es = element_size(precision)
    kpg = config.kernels_per_group(precision)
    result = dict(kind="image", precision=precision, shape=(k, c, r, s), packed_shape=(k, c_ext, r, 1),
                  kernel_groups=-(-k // kpg), bytes_per_kernel=c_ext * r * es, meaningful_bytes=meaningful,
                  config=config, post_extension=f, pixel_format=fmt.name)

    desc, cpb, surface = layout._core, config.channels_per_block, roundup(meaningful, config.weight_size_alignment)

    # Integer weights already of the target type go to the pass as they are: no conversion call.
    direct = _TARGET_DTYPE[precision] if precision != "fp16" else None

    def run(arr: np.ndarray, out) -> WeightSurfaces:
        elems = arr if arr.dtype is direct else convert_elements(arr, precision, what="w", rounding=rounding,
                                                                 saturate=saturate, allow_nan=allow_nan)
        if compress is not False:
            fields = write_surfaces(lambda buf: _core.image_weights_pack(elems, buf, cdata, f, kpg, cpb, desc),
                                    meaningful, precision=precision, config=config,
                                    kernel_group_elements=kpg * c_ext * r, compress=compress,
                                    tail=config.weight_size_alignment, out=out)
            return WeightSurfaces._fast(**result, **fields)
        # Uncompressed: straight to the surface, its zero tail written by the pass (a small
        # layer's call is mostly Python).
        buf = result_buffer(out, surface)
        _core.image_weights_pack(elems, buf, cdata, f, kpg, cpb, desc, "auto", True)
        return WeightSurfaces._with_weight(result, buf)

    remember(_PLANS, key, run, _MAX_PLANS)
    return run(arr, out)


def unpack_image(surfaces: WeightSurfaces, data: np.ndarray, logical: bool) -> np.ndarray:
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
