"""NVDLA Winograd weights (docs/nvdla.md §9).

Steps: pad C to the atom (``C_pad``); for strides > 1 extend channels by stride phase,
``c' = (py*sx + px)*C_pad + c`` with ``g[k][c'][r][s] = w[k][c][r*sy+py][s*sx+px]`` (zero outside
the kernel), which needs ``ceil(R/sy) == ceil(S/sx) == 3``; transform every 3x3 slice
``t = G g Gᵀ`` in float64; round to the target precision; map 4x4x4 cubes (c fastest, then s,
then r), inside a kernel group cube 0 of every kernel, then cube 1, ...; tail to 128 bytes. One
C++ pass does it all, writing each cube where the descriptor of :func:`winograd_layout` (the one
rule of the mapping) places it.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from npupack import _core
from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import BlockedLayout, Dim, result_buffer
from npupack.nvdla.config import Config, check_config, element_size
from npupack.nvdla.convert import (_ROUNDINGS, _TARGET_DTYPE, _first_nan, _fp16_all_finite, _fp16_has_inf,
                                   convert_elements, infer_precision)
from npupack.nvdla.surfaces import (WeightSurfaces, check_compress, check_single_group, check_stride, kcrs,
                                    roundup, write_surfaces)

__all__ = ["winograd_layout", "winograd_shape", "WINOGRAD_G"]

WINOGRAD_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
INT_ROUNDINGS = ("nearest_even", "nearest_away", "truncate")
_TARGET_CODE = {"int8": 0, "int16": 1, "fp16": 2}


def winograd_shape(shape, stride, precision: str, config: Config) -> tuple[int, int, int, int]:
    """``(K, C_ext, 4, 4)`` for logical weights ``(K, C, R, S)`` at ``stride = (sy, sx)``:
    ``C_ext = roundup(C, atom_elements) * sy * sx`` (docs/nvdla.md §9.2, 9.3). Raises
    UnsupportedError when the kernel does not become 3x3 (docs/nvdla.md §9.1)."""
    k, c, r, s = kcrs(shape, "w")
    sy, sx = check_stride(stride)
    ry, rx = -(-r // sy), -(-s // sx)
    if ry != 3 or rx != 3:
        raise UnsupportedError(
            f"w: Winograd needs a kernel that becomes 3x3 after channel extension: ceil(R/sy) = ceil({r}/{sy}) = "
            f"{ry}, ceil(S/sx) = ceil({s}/{sx}) = {rx} (docs/nvdla.md §9.1)")
    return k, roundup(c, config.atom_elements(precision)) * sy * sx, 4, 4


def winograd_descriptor(shape, stride, precision: str, config: Config) -> BlockedLayout:
    """The descriptor of the Winograd surface of logical weights ``(K, C, R, S)`` at ``stride``:
    :func:`winograd_layout` of :func:`winograd_shape`. The one source of the surface's size for
    packing and :func:`npupack.nvdla.weights_nbytes` (docs/nvdla.md §9.6). Raises as those two."""
    return _winograd_layout(winograd_shape(shape, stride, precision, config), precision, config)


def winograd_layout(packed_shape, precision: str, config: Config) -> BlockedLayout:
    """Engine descriptor of the mapped Winograd tensor ``(K, C_ext, 4, 4)`` (docs/nvdla.md §9.6):
    ragged kernel groups of ``kpg``, 4-channel blocks, nest ``K/kpg, C/4, kpg, R, S, 4``.
    ``nbytes`` = ``K * C_ext * 16 * es`` bytes. Used to pack (the C++ pass takes each cube
    row's offset from it and checks its cube order) and to unpack. Raises LayoutError for a shape that is not
    ``(K, C_ext, 4, 4)`` with ``C_ext % 4 == 0``, ValueError for an unknown precision, TypeError
    for a ``config`` that is not a Config."""
    check_config(config)
    return _winograd_layout(kcrs(packed_shape, "packed_shape"), precision, config)


@lru_cache(maxsize=1024)
def _winograd_layout(shape, precision, config) -> BlockedLayout:
    k, c_ext, r, s = shape
    if (r, s) != (4, 4) or c_ext % 4:
        raise LayoutError(f"packed_shape: Winograd weights are (K, C_ext, 4, 4) with C_ext % 4 == 0, got {shape}")
    return BlockedLayout(
        [Dim("K", k, (config.kernels_per_group(precision),), ragged=True), Dim("C", c_ext, (4,)),
         Dim("R", 4), Dim("S", 4)],
        [("K", 0), ("C", 0), ("K", 1), ("R", 0), ("S", 0), ("C", 1)], _TARGET_DTYPE[precision])


# Checked plans by (shape, dtype, options): every check that does not depend on the values has
# passed for the key, so a layer shape packed before skips them (a few microseconds of a small
# layer's call). Values are still checked on every call.
_PLANS: dict = {}
_MAX_PLANS = 1024


def pack_winograd(w, *, precision, config, groups, stride, post_extension, compress, rounding, saturate, scale,
                  allow_nan, out) -> WeightSurfaces:
    """kind="winograd" of :func:`npupack.nvdla.pack_weights` (docs/nvdla.md §9)."""
    key = None
    # Options enter a key only as the exact types the checks accept: (1.0, 1.0) or True never
    # finds the plan of (1, 1) or 1.
    if (type(w) is np.ndarray and compress is False and type(groups) is int and groups == 1
            and type(post_extension) is str and post_extension == "auto" and type(config) is Config
            and (precision is None or type(precision) is str) and type(stride) is tuple
            and len(stride) == 2 and type(stride[0]) is int and type(stride[1]) is int
            and type(rounding) is str and type(saturate) is bool
            and type(scale) is float and type(allow_nan) is bool):
        key = (w.shape, w.dtype, precision, config, stride, rounding, saturate, scale, allow_nan)
        plan = _PLANS.get(key)
        if plan is not None:
            return plan(w, out)
    check_config(config)
    if not config.winograd:
        raise UnsupportedError(f"kind: config {config.name!r} has no Winograd mode (docs/nvdla.md §9.1; NV_FULL has it)")
    check_single_group(groups, "winograd")
    if post_extension not in ("auto", 1):
        raise UnsupportedError(f"post_extension: {post_extension!r}; Winograd weights take 'auto' or 1")
    compress = check_compress(compress, config)
    arr = np.asarray(w)
    precision = infer_precision(arr.dtype, precision, config, "w")
    layout = winograd_descriptor(arr.shape, stride, precision, config)
    packed_shape = layout.shape
    sy, sx = check_stride(stride)
    k, c_ext = packed_shape[:2]
    if precision == "fp16":
        if rounding not in _ROUNDINGS:
            raise ValueError(f"rounding: {rounding!r} is not one of {_ROUNDINGS} for fp16 Winograd weights "
                             "('truncate' is for int8/int16; docs/nvdla.md §9.5)")
        if scale != 1.0:
            raise ValueError(f"scale: {scale!r}; fp16 Winograd weights need no scale (docs/nvdla.md §9.5)")
    else:
        if rounding not in INT_ROUNDINGS:
            raise ValueError(f"rounding: {rounding!r} is not one of {INT_ROUNDINGS} for {precision} Winograd "
                             "weights (docs/nvdla.md §2.4)")
        if not saturate:
            raise ValueError("saturate: integer Winograd weights always saturate to the type's range "
                             "(docs/nvdla.md §9.5); saturate=False is only for fp16")
        try:
            scale = float(scale)
        except (TypeError, ValueError):
            raise TypeError(f"scale: expected a number, got {scale!r}") from None
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"scale: must be finite and > 0, got {scale} (docs/nvdla.md §9.5)")
    kpg = config.kernels_per_group(precision)
    args = (sy, sx, c_ext // (sy * sx), kpg, layout._core,
            _TARGET_CODE[precision], INT_ROUNDINGS.index(rounding) if precision != "fp16" else 0,
            rounding == "nearest_away", bool(saturate), float(scale))
    meaningful = layout.nbytes
    tail = max(128, config.weight_size_alignment)
    result = dict(kind="winograd", precision=precision, shape=tuple(arr.shape), packed_shape=packed_shape,
                  kernel_groups=-(-k // kpg), bytes_per_kernel=c_ext * 16 * element_size(precision),
                  meaningful_bytes=meaningful, config=config, stride=(sy, sx))

    surface = roundup(meaningful, tail)

    direct = _TARGET_DTYPE[precision] if precision != "fp16" else None

    def run(arr: np.ndarray, out) -> WeightSurfaces:
        src = arr if arr.dtype is direct else _checked_values(arr, precision, allow_nan)
        if compress is False:
            # Straight to the surface, its zero tail written by the pass: a small layer's call is mostly Python.
            buf = result_buffer(out, surface)
            _core.winograd_pack(src, buf, *args, "auto", True)
            return WeightSurfaces._with_weight(result, buf)
        fields = write_surfaces(lambda buf: _core.winograd_pack(src, buf, *args), meaningful, precision=precision,
                                config=config, kernel_group_elements=kpg * c_ext * 16, compress=compress, tail=tail,
                                out=out)
        return WeightSurfaces._fast(**result, **fields)

    if key is not None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = run
    return run(arr, out)


def _checked_values(arr: np.ndarray, precision: str, allow_nan: bool) -> np.ndarray:
    """The weights the C++ pass reads: float weights for fp16 as they are, after the NaN / INF
    check; integers converted to the target (range-checked)."""
    if precision != "fp16":
        return convert_elements(arr, precision, what="w")  # integers only; range-checked
    if arr.dtype.kind == "f" and not allow_nan and not _fp16_all_finite(arr):
        bad = _first_nan(arr)
        has_inf = _fp16_has_inf(arr) if arr.dtype == np.float16 else not np.isfinite(arr).all()
        if bad is None and has_inf:
            raise ValueError("w: INF in Winograd weights (the transform of INF gives NaN); pass finite "
                             "weights or allow_nan=True (docs/nvdla.md §9.5)")
        if bad is not None:
            raise ValueError(f"w: NaN at index {bad}; NaN weights are rejected unless allow_nan=True "
                             "(docs/nvdla.md §2.2.4)")
    return arr
