"""NVDLA deconvolution weights: the set split (docs/nvdla.md §10).

A stride-(sy, sx) transposed convolution runs as ``sy*sx`` stride-1 convolutions ("sets"). Input
weights are in ONNX / Caffe ConvTranspose order ``(C_in, K_out, R, S)``; they are transposed to
``(K_out, C_in, R, S)``; set ``y*sx + x`` (y outer, x inner) holds the taps ``r = y + i*sy``,
``s = x + j*sx``, zero-filled to ``ceil(R/sy) x ceil(S/sx)``, and is mapped like DC weights with
the r and s loops reversed (a spatial flip). Every set is its own surface (own tail, own
compression).
"""
from __future__ import annotations

import numpy as np

from npupack.errors import LayoutError, UnsupportedError
from npupack.nvdla.config import Config, check_config, element_size
from npupack.nvdla.convert import _check_rounding, convert_elements, infer_precision
from npupack.nvdla.surfaces import (WeightSurfaces, _dc_layout, check_compress, check_no_pixel_format,
                                    check_single_group, check_stride, check_unit_scale, kcrs, write_surfaces)

__all__ = ["deconv_sets", "merge_deconv_sets", "check_deconv_stride", "MAX_DECONV_STRIDE"]

# Rubik's contract mode interleaves the sets' outputs; its D_DECONV_STRIDE register holds
# stride - 1 in a 5-bit field per axis (DECONV_X_STRIDE, DECONV_Y_STRIDE), so 32 is the largest
# stride the hardware can assemble. docs/nvdla.md §10 gives no bound; this is the register's.
MAX_DECONV_STRIDE = 32


def check_deconv_stride(stride) -> tuple[int, int]:
    """``(sy, sx)``: two ints in 1..MAX_DECONV_STRIDE (TypeError / LayoutError as
    :func:`check_stride`; UnsupportedError above the largest stride Rubik takes)."""
    sy, sx = check_stride(stride)
    if max(sy, sx) > MAX_DECONV_STRIDE:
        raise UnsupportedError(f"stride: {(sy, sx)}; NVDLA assembles a deconvolution of stride at most "
                               f"{MAX_DECONV_STRIDE} per axis (Rubik D_DECONV_STRIDE: 5-bit fields)")
    return sy, sx


def deconv_sets(w: np.ndarray, stride) -> list[tuple[tuple[int, int], np.ndarray]]:
    """Split ConvTranspose weights ``(C_in, K_out, R, S)`` into ``[((y, x), set), ...]`` in set
    order; each set is ``(K_out, C_in, ceil(R/sy), ceil(S/sx))`` *before* the flip
    (docs/nvdla.md §10.1), same dtype as ``w``. Views where possible; zero-filled copies where the phase lacks
    taps. ``w`` must be 4-d and ``stride`` two ints >= 1 (checked by the caller,
    :func:`npupack.nvdla.pack_weights`)."""
    sy, sx = stride
    c_in, k_out, r, s = w.shape
    kcrs_view = w.transpose(1, 0, 2, 3)
    rs, ss = -(-r // sy), -(-s // sx)
    sets = []
    for y in range(sy):
        for x in range(sx):
            taps = kcrs_view[:, :, y::sy, x::sx]
            if taps.shape[2:] != (rs, ss):
                full = np.zeros((k_out, c_in, rs, ss), dtype=w.dtype)
                full[:, :, :taps.shape[2], :taps.shape[3]] = taps
                taps = full
            sets.append(((y, x), taps))
    return sets


def merge_deconv_sets(sets, shape, stride) -> np.ndarray:
    """Inverse of :func:`deconv_sets` (docs/nvdla.md §10.1): ``sets`` = per-set ``(K_out, C_in, Rs, Ss)``
    tensors in set order (``sy*sx`` of them, one dtype); returns ``(C_in, K_out, R, S)`` of that
    dtype. Raises IndexError/ValueError (NumPy) when the sets do not fit ``shape``; callers
    validate first (:func:`npupack.nvdla.unpack_weights`)."""
    sy, sx = stride
    c_in, k_out, r, s = shape
    out = np.empty((k_out, c_in, r, s), dtype=sets[0].dtype)
    for i, st in enumerate(sets):
        y, x = divmod(i, sx)
        view = out[:, :, y::sy, x::sx]
        view[...] = st[:, :, :view.shape[2], :view.shape[3]]
    return np.ascontiguousarray(out.transpose(1, 0, 2, 3))


def pack_deconv(w, *, precision, config: Config, groups, stride, pixel_format, post_extension, compress, rounding,
                saturate, scale, allow_nan, out) -> tuple[WeightSurfaces, ...]:
    """kind="deconv" of :func:`npupack.nvdla.pack_weights` (docs/nvdla.md §10)."""
    check_config(config)
    check_single_group(groups, "deconv")
    check_no_pixel_format(pixel_format)
    if post_extension not in ("auto", 1):
        raise UnsupportedError(f"post_extension: {post_extension!r}; deconvolution weights take 'auto' or 1")
    check_unit_scale(scale, "deconv")
    compress = check_compress(compress, config)
    sy, sx = check_deconv_stride(stride)
    arr = np.asarray(w)
    c_in, k_out, r, s = kcrs(arr.shape, "w")
    precision = infer_precision(arr.dtype, precision, config, "w")
    if rounding != "nearest_even":
        _check_rounding(rounding)
    elems = convert_elements(arr, precision, what="w", rounding=rounding, saturate=saturate, allow_nan=allow_nan)
    rs, ss = -(-r // sy), -(-s // sx)
    packed_shape = (k_out, c_in, rs, ss)
    layout = _dc_layout(packed_shape, precision, config)
    es = element_size(precision)
    kpg = config.kernels_per_group(precision)
    result = []
    for i, (phase, st) in enumerate(deconv_sets(elems, (sy, sx))):
        flipped = st[:, :, ::-1, ::-1]
        fields = write_surfaces(lambda buf, t=flipped: layout._pack_into(t, buf), layout.nbytes,
                                precision=precision, config=config, kernel_group_elements=kpg * c_in * rs * ss,
                                compress=compress, tail=config.weight_size_alignment, out=out if i == 0 else None)
        result.append(WeightSurfaces._fast(
            kind="deconv", precision=precision, shape=(c_in, k_out, r, s), packed_shape=packed_shape,
            kernel_groups=-(-k_out // kpg), bytes_per_kernel=c_in * rs * ss * es, meaningful_bytes=layout.nbytes,
            config=config, phase=phase, stride=(sy, sx), **fields))
    return tuple(result)


def unpack_deconv(stream_of, surfaces, logical: bool) -> np.ndarray:
    """Unpack deconvolution sets. ``stream_of(ws)`` returns a set's uncompressed stream bytes.
    One set (or ``logical=False``): the set tensors ``(K_out, C_in, Rs, Ss)`` before the flip,
    stacked when several; all sets with ``logical=True``: the ``(C_in, K_out, R, S)`` weights."""
    first = surfaces[0]
    for ws in surfaces:
        if ws.kind != "deconv" or ws.shape != first.shape or ws.stride != first.stride \
                or ws.precision != first.precision:
            raise LayoutError("surfaces: deconvolution sets of one layer expected (same shape, stride, precision)")
    streams = [stream_of(ws) for ws in surfaces]  # checks each set's fields before they are used
    layout = _dc_layout(first.packed_shape, first.precision, first.config)
    sets = []
    for data in streams:
        if data.size < layout.nbytes:
            raise LayoutError(f"surfaces.weight: holds {data.size} bytes, {layout.nbytes} are needed")
        sets.append(layout.unpack(data)[:, :, ::-1, ::-1])
    if not logical:
        return np.ascontiguousarray(sets[0]) if len(sets) == 1 else np.stack(sets)
    sy, sx = first.stride
    if [ws.phase for ws in surfaces] != [(y, x) for y in range(sy) for x in range(sx)]:
        raise LayoutError(f"surfaces: the logical deconvolution weights need all {sy * sx} sets in set order "
                          "(phases (0, 0), (0, 1), ...); pass logical=False for single sets")
    return merge_deconv_sets(sets, first.shape, first.stride)
