"""NVDLA DC weights' descriptors, sizes and plans (docs/nvdla.md §5, 6 and 7): the descriptor each
weight kind is mapped with, which gives :func:`weights_nbytes` its size, grouped weights' address
loop (checked against the DC descriptor of the densified weights in the tests), and the cached
plans of :func:`npupack.nvdla.pack_weights` for DC layers. The entry points are in ``weights``.
"""
from __future__ import annotations

import numpy as np

from npupack import _core
from npupack.formats.aliases import registry_words
from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import check_out, empty_lines, remember
from npupack.nvdla.config import NV_FULL, Config, check_config, element_size
from npupack.nvdla.convert import _TARGET_DTYPE, _pack_if_finite_fp16, convert_elements, infer_precision
from npupack.nvdla.deconv import check_deconv_stride
from npupack.nvdla.image_weights import image_layout
from npupack.nvdla.surfaces import (WeightSurfaces, _dc_layout, check_no_pixel_format, check_single_group,
                                    check_stride, kcrs, roundup)
from npupack.nvdla.winograd import winograd_descriptor

_KINDS = ("dc", "image", "winograd", "deconv")
_new = object.__new__


@registry_words("nvdla.weights_nbytes")
def weights_nbytes(shape, *, precision: str, config: Config = NV_FULL, groups: int = 1, kind: str = "dc",
                   stride=(1, 1), pixel_format=None) -> int:
    """Size in bytes of the uncompressed weight surface ``pack_weights`` would produce, without
    packing (docs/nvdla.md §5.3, 5.4).

    ``shape`` is the logical input shape of ``kind``: DC ``(K, C, R, S)`` (grouped:
    ``(K, C/groups, R, S)``), image ``(K, C, R, S)`` with ``pixel_format``, Winograd
    ``(K, C, R, S)`` with ``stride``, deconvolution ``(C_in, K_out, R, S)`` with ``stride`` (the
    size of *each* set; all sets have the same size). The result is the ``nbytes`` of the
    descriptor ``pack_weights`` maps with (the meaningful bytes ``K' * C' * R' * S' * es`` of
    ``packed_shape``) rounded up to ``config.weight_size_alignment`` (Winograd: at least 128). Raises LayoutError / UnsupportedError / TypeError as
    :func:`pack_weights` does for the same arguments (``groups`` other than 1 outside DC, a
    ``pixel_format`` outside image weights, more channels than the pixel format gives, a bad
    ``stride``, Winograd on a config without it), so no size is given for weights it refuses.
    """
    check_config(config)
    if kind not in _KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {_KINDS} (docs/nvdla.md §5.1)")
    config.require_precision(precision)
    k, c, r, s = kcrs(shape, "shape")
    tail = config.weight_size_alignment
    # The option checks of pack_weights, so that a size is never given for weights it refuses.
    if kind == "dc":
        check_stride(stride)
        check_no_pixel_format(pixel_format)
        layout = _dense_dc_layout((k, c, r, s), _check_groups(groups, k), precision, config)
    elif kind == "image":
        from npupack.nvdla.pixel import _format

        if pixel_format is None:
            raise ValueError("pixel_format: image-input weights need the pixel format (docs/nvdla.md §8.1)")
        fmt = _format(pixel_format)
        check_single_group(groups, kind)
        check_stride(stride)
        if c > fmt.comps:
            raise LayoutError(f"shape: {c} input channels, but {fmt.name} gives the convolution only {fmt.comps} "
                              "(docs/nvdla.md §8.1)")
        layout = image_layout(k, fmt.comps * s, r, 1, precision, config)
    elif kind == "winograd":
        check_no_pixel_format(pixel_format)
        if not config.winograd:
            raise UnsupportedError(f"kind: config {config.name!r} has no Winograd mode (docs/nvdla.md §9.1; NV_FULL has it)")
        check_single_group(groups, kind)
        layout = winograd_descriptor((k, c, r, s), stride, precision, config)
        tail = max(128, tail)
    else:
        check_single_group(groups, kind)
        check_no_pixel_format(pixel_format)
        sy, sx = check_deconv_stride(stride)
        layout = _dc_layout((k, c, -(-r // sy), -(-s // sx)), precision, config)  # each set: (K_out, C_in, ...)
    return roundup(layout.nbytes, tail)


def _dense_dc_layout(shape, groups: int, precision: str, config: Config):
    """The DC descriptor of logical (grouped) weights ``(K, C/groups, R, S)``: that of the dense
    ``(K, C, R, S)`` (docs/nvdla.md §6.1, 7.1); pack_weights and weights_nbytes both take it."""
    k, cg, r, s = shape
    return _dc_layout((k, cg * groups, r, s), precision, config)


def _check_groups(groups, k: int) -> int:
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"groups: expected an integer, got {groups!r}")
    if groups < 1:
        raise LayoutError(f"groups: must be >= 1, got {groups}")
    if k % groups:
        raise LayoutError(f"groups: K = {k} is not divisible by groups = {groups} (docs/nvdla.md §7.1)")
    return int(groups)


def _pack_dc(layout, elems: np.ndarray, groups: int, kpg: int, config: Config, buf: np.ndarray,
             zeroed: bool = False) -> None:
    """DC mapping of (grouped) weights into ``buf``: the engine with the DC descriptor for dense
    weights; grouped ones go straight into a zeroed surface (the whole ``buf``; ``zeroed``: it
    already is) by an address loop, never densified (docs/nvdla.md §7.1). The DC descriptor of
    the densified ``(K, C, R, S)`` is the rule; the tests check the loop against it."""
    if groups == 1:
        layout._pack_into(elems, buf)
    else:
        _core.grouped_pack(elems, buf, groups, kpg, config.channels_per_block, zeroed)


# Plans of uncompressed DC packing by (shape, dtype, precision argument, config, groups): a model
# packs the same few layer shapes again and again, and a layer of (16,16,3,3) takes a few
# microseconds of checks for about one of packing.
_DC_PLANS: dict = {}
_MAX_PLANS = 4096


def _plan_key(w, precision, config, groups):
    """The plan cache key of a call, or None when its arguments are not of the exact types a key
    may stand for (a bool ``groups`` equals 1, an unhashable ``precision`` cannot be looked up)."""
    if type(w) is np.ndarray and type(groups) is int and type(config) is Config and \
            (precision is None or type(precision) is str):
        return (w.shape, w.dtype, precision, config, groups)
    return None


def _remember(key, plan):
    """Caches ``plan`` under ``key`` (None: not cacheable); returns it."""
    return remember(_DC_PLANS, key, plan, _MAX_PLANS)


def _dc_plan(arr: np.ndarray, precision, config: Config, groups) -> "_DcPlan":
    """The plan of a DC layer packed without options: cached, or validated (shape, groups,
    precision) and made."""
    key = _plan_key(arr, precision, config, groups)
    plan = _DC_PLANS.get(key) if key is not None else None
    if plan is None:
        k, cg, r, s = kcrs(arr.shape, "w")
        g = _check_groups(groups, k)
        plan = _remember(key, _DcPlan((k, cg, r, s), g, infer_precision(arr.dtype, precision, config, "w"), config))
    return plan


class _DcPlan:
    """Everything about packing one validated DC layer shape except the values (docs/nvdla.md §6, 7)."""

    __slots__ = ("layout", "surface", "meaningful", "groups", "kpg", "precision", "config", "fields", "direct",
                 "grouped", "tail", "core")

    def __init__(self, shape, groups: int, precision: str, config: Config):
        k, cg, r, s = shape
        self.layout = _dense_dc_layout(shape, groups, precision, config)
        self.core = self.layout._core
        packed_shape = self.layout.shape
        self.meaningful = self.layout.nbytes
        self.surface = roundup(self.meaningful, config.weight_size_alignment)
        self.groups = groups
        self.kpg = config.kernels_per_group(precision)
        self.precision = precision
        self.config = config
        # Dense integer weights already of the target dtype pack as they are: no conversion call.
        self.direct = _TARGET_DTYPE[precision] if groups == 1 and precision != "fp16" else None
        # Grouped weights of the target dtype go to the address loop as they are; float16 ones
        # only when C-contiguous, aligned and free of INF and NaN (the binding scans the whole
        # tensor first), else they take the converting path.
        self.grouped = _TARGET_DTYPE[precision] if groups > 1 else None
        # Dense surfaces get their zero tail after packing; grouped ones are zeroed whole.
        self.tail = self.surface > self.meaningful and groups == 1
        self.fields = dict(kind="dc", precision=precision, shape=tuple(shape), packed_shape=packed_shape,
                           kernel_groups=-(-k // self.kpg),
                           bytes_per_kernel=cg * groups * r * s * element_size(precision),
                           meaningful_bytes=self.meaningful, config=config, groups=groups)

    def pack(self, arr: np.ndarray, out, rounding: str, saturate: bool, allow_nan: bool) -> WeightSurfaces:
        surface, g = self.surface, self.groups
        if out is not None:
            buf = check_out(out, surface)
            if buf.size != surface:
                buf = buf[:surface]
        else:  # grouped: zero pages from the OS, touched only where a weight lands
            buf = empty_lines(surface) if g == 1 else np.zeros(surface, dtype=np.uint8)
        # float16 weights: the INF/NaN check runs per kernel group as it is packed (dense) or
        # over the whole tensor first (grouped); only a tensor with INF or NaN takes the full
        # conversion (which raises or saturates) and is packed again.
        # Dense surfaces: the engine zeroes the tail past the layout's bytes itself.
        if arr.dtype is self.direct:
            self.core.pack(arr, buf, b"", False, True)
        elif arr.dtype is self.grouped and _core.grouped_pack(arr, buf, g, self.kpg, self.config.channels_per_block,
                                                              out is None, self.precision == "fp16"):
            pass
        elif not (g == 1 and self.precision == "fp16" and _pack_if_finite_fp16(self.layout, arr, buf, True)):
            elems = convert_elements(arr, self.precision, what="w", rounding=rounding, saturate=saturate,
                                     allow_nan=allow_nan)
            _pack_dc(self.layout, elems, g, self.kpg, self.config, buf, zeroed=out is None)
            if self.tail:
                buf[self.meaningful:] = 0
        # WeightSurfaces._with_weight, inline: one call less for every small layer.
        result = _new(WeightSurfaces)
        d = result.__dict__
        d.update(self.fields)
        d["weight"] = buf
        return result
