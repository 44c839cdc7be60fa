"""NVDLA feature data (docs/nvdla.md §3).

A feature cube ``(N, C, H, W)`` is cut into ``G = ceil(C / A)`` surfaces of ``A`` channels
(``A = atom_bytes // es`` elements); within a surface each ``(h, w)`` position is one atom cube
of ``atom_bytes`` bytes, atoms of a line are contiguous, lines follow at the line stride,
surfaces at the surface stride and batches at the batch stride::

    address(n, c, h, w) = n*batch_stride + (c // A)*surface_stride + h*line_stride
                          + w*atom_bytes + (c % A)*es

On the engine this is dims N, C (one padded tile of A), H, W with the nest
``N, C/A, H, W, A`` and explicit line/surface/batch byte strides.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from npupack._gate import gate
from npupack.formats.aliases import registry_words
from npupack.errors import LayoutError
from npupack.layout import (_BIG_ENDIAN, BlockedLayout, Dim, as_byte_buffer, check_bool, check_dims, check_dtype,
                            check_int, check_out, empty_lines, little_endian)
from npupack.nvdla.config import NV_FULL, Config, check_config, element_size
from npupack.nvdla.convert import (_TARGET_DTYPE, _check_rounding, _pack_if_finite_fp16, convert_elements,
                                   infer_precision)

__all__ = ["FeatureStrides", "feature_strides", "feature_layout", "pack_feature", "unpack_feature"]


@dataclass(frozen=True)
class FeatureStrides:
    """Byte strides and size of a packed feature cube (docs/nvdla.md §3.2). All values in bytes."""

    line_stride: int
    surface_stride: int
    batch_stride: int
    nbytes: int
    surfaces: int  # G = ceil(C / A)


def _nchw(shape, name: str = "shape") -> tuple[int, int, int, int]:
    shape = check_dims(shape, name)
    if len(shape) not in (3, 4):
        raise LayoutError(f"{name}: expected (N, C, H, W) or (C, H, W), got {len(shape)} dimensions {shape}")
    return (1,) + shape if len(shape) == 3 else shape


def _stride_arg(value, name: str):
    return None if value is None else check_int(value, name)


@registry_words("nvdla.feature_strides")
def feature_strides(shape, precision: str, config: Config = NV_FULL, *, line_stride=None,
                    surface_stride=None, batch_stride=None) -> FeatureStrides:
    """Strides and size of a feature cube (docs/nvdla.md §3.2), without packing anything.

    Parameters
    ----------
    shape : (N, C, H, W) or (C, H, W)
        Logical cube, elements.
    precision : {"int8", "int16", "fp16"}
        Element precision (sets ``es`` and the atom in elements). May also be a NumPy dtype of
        int8, int16 or float16.
    config : Config
        Hardware configuration (atom size).
    line_stride, surface_stride, batch_stride : int, optional, bytes
        Caller-given strides; each omitted one is derived from the ones inside it:
        ``line = W*atom_bytes``, ``surface = H*line``, ``batch = G*surface``.

    Returns
    -------
    FeatureStrides
        Strides in bytes, ``nbytes = (N-1)*batch + (G-1)*surface + (H-1)*line + W*atom_bytes``.

    Raises
    ------
    LayoutError
        A stride not a multiple of ``config.atom_bytes``, ``line < W*atom``, ``surface < H*line``,
        ``batch < G*surface``, a dimension < 1, or a size that overflows 64 bits.
    """
    if not isinstance(precision, str):
        precision = {np.dtype(np.int8): "int8", np.dtype(np.int16): "int16",
                     np.dtype(np.float16): "fp16"}.get(np.dtype(precision), str(precision))
    es = element_size(precision)
    n, c, h, w = _nchw(shape)
    check_config(config)
    atom = config.atom_bytes
    a = atom // es
    g = -(-c // a)
    given = {"line_stride": _stride_arg(line_stride, "line_stride"),
             "surface_stride": _stride_arg(surface_stride, "surface_stride"),
             "batch_stride": _stride_arg(batch_stride, "batch_stride")}
    for name, v in given.items():
        if v is not None and (v <= 0 or v % atom):
            raise LayoutError(f"{name}: {v} bytes is not a positive multiple of the {atom}-byte atom "
                              f"(docs/nvdla.md §3.2: strides always align to the atom)")
    ls = given["line_stride"] if given["line_stride"] is not None else w * atom
    if ls < w * atom:
        raise LayoutError(f"line_stride: {ls} bytes is smaller than one line of W*atom = {w}*{atom} = {w * atom} "
                          "bytes (docs/nvdla.md §3.2)")
    ss = given["surface_stride"] if given["surface_stride"] is not None else h * ls
    if ss < h * ls:
        raise LayoutError(f"surface_stride: {ss} bytes is smaller than H*line_stride = {h}*{ls} = {h * ls} bytes "
                          "(docs/nvdla.md §3.2)")
    bs = given["batch_stride"] if given["batch_stride"] is not None else g * ss
    if bs < g * ss:
        raise LayoutError(f"batch_stride: {bs} bytes is smaller than G*surface_stride = {g}*{ss} = {g * ss} "
                          "bytes (docs/nvdla.md §3.2)")
    nbytes = (n - 1) * bs + (g - 1) * ss + (h - 1) * ls + w * atom
    if max(nbytes, bs) >= 2**63:
        raise LayoutError(f"shape {tuple(shape)}: the packed size or a stride ({max(nbytes, bs)} bytes) "
                          "overflows 64 bits")
    return FeatureStrides(ls, ss, bs, nbytes, g)


@registry_words("nvdla.feature_layout")
def feature_layout(shape, precision: str, config: Config = NV_FULL, *, line_stride=None, surface_stride=None,
                   batch_stride=None) -> BlockedLayout:
    """The engine descriptor of a feature cube (logical dims N, C, H, W; docs/nvdla.md §3.1).
    Arguments, units and errors (LayoutError for stride rules, shapes and overflow) as
    :func:`feature_strides`. Descriptors are immutable and cached."""
    st = feature_strides(shape, precision, config, line_stride=line_stride, surface_stride=surface_stride,
                         batch_stride=batch_stride)
    return _feature_layout(_nchw(shape), precision, config, st)


@lru_cache(maxsize=1024)
def _feature_layout(nchw, precision: str, config: Config, st: FeatureStrides) -> BlockedLayout:
    n, c, h, w = nchw
    a = config.atom_elements(precision)
    return BlockedLayout(
        [Dim("N", n), Dim("C", c, (a,)), Dim("H", h), Dim("W", w)],
        [("N", 0), ("C", 0), ("H", 0), ("W", 0), ("C", 1)],
        _TARGET_DTYPE[precision],
        {("N", 0): st.batch_stride, ("C", 0): st.surface_stride, ("H", 0): st.line_stride},
    )


@registry_words("nvdla.pack_feature")
@gate("x")
def pack_feature(x, *, config: Config = NV_FULL, precision: str | None = None, line_stride=None,
                 surface_stride=None, batch_stride=None, rounding: str = "nearest_even",
                 saturate: bool = True, out=None) -> np.ndarray:
    """Pack activations into NVDLA feature data (docs/nvdla.md §3).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    x : array_like, (N, C, H, W) or (C, H, W)
        int8, uint8, int16, uint16, float16, float32 or float64 (docs/nvdla.md §2.1). Float data for
        an int8/int16 target must be quantised first. Any strides; not modified.
    config : Config
        Hardware configuration (atom size, supported precisions).
    precision : {"int8", "int16", "fp16"}, optional
        Target precision; inferred from the dtype when omitted.
    line_stride, surface_stride, batch_stride : int, optional, bytes
        Caller-given strides (validated as in :func:`feature_strides`).
    rounding, saturate
        fp16 conversion of float input (see :func:`to_fp16`). NaN is converted, not rejected.
    out : numpy.ndarray of uint8, optional
        Writable C-contiguous buffer of at least ``nbytes`` bytes; its first ``nbytes`` bytes
        are written (every byte: elements, zero padding channels, zero stride gaps).

    Returns
    -------
    numpy.ndarray
        1-D uint8 of ``feature_strides(...).nbytes`` bytes (a view of ``out`` when given).
        Elements little-endian; channels >= C of the last atom and all gaps are zero.

    Raises
    ------
    TypeError
        Unsupported dtype, float input for an int target, ``out`` not uint8, ``saturate`` not
        a bool.
    LayoutError
        Wrong ndim, a dimension < 1, a stride rule broken, ``out`` too small, read-only
        or sharing memory with ``x``.
    UnsupportedError
        The precision is not supported by ``config``.
    ValueError
        Integer values that do not fit the target precision; a bad ``rounding`` (whatever the
        input dtype).
    """
    if type(config) is not Config:
        check_config(config)
    if rounding != "nearest_even":
        _check_rounding(rounding)
    if saturate is not True:
        saturate = check_bool(saturate, "saturate")
    arr = x if type(x) is np.ndarray and x.dtype.byteorder not in _BIG_ENDIAN else little_endian(np.asarray(x))
    if line_stride is None and surface_stride is None and batch_stride is None and type(precision) in (str, type(None)):
        # Default strides: shape, dtype and config decide everything, so the checks and the
        # descriptor are looked up (compilers call this per tensor; it halves the per-call cost).
        precision, layout = _default_layout(arr.shape, arr.dtype, precision, config)
    else:
        _nchw(arr.shape, "x")
        precision = infer_precision(arr.dtype, precision, config, "x")
        layout = feature_layout(arr.shape, precision, config, line_stride=line_stride,
                                surface_stride=surface_stride, batch_stride=batch_stride)
    n = layout.nbytes
    buf = check_out(out, n)[:n] if out is not None else empty_lines(n)
    if precision == "fp16":
        # float16 activations: checked for INF/NaN surface by surface as they are packed; only a
        # tensor with INF or NaN takes the conversion (saturating INF) and is packed again.
        if _pack_if_finite_fp16(layout, arr if arr.ndim == 4 else arr[np.newaxis], buf):
            return buf
    elif arr.dtype is _TARGET_DTYPE[precision]:  # integers of the target dtype: nothing to convert
        layout._pack_into(arr if arr.ndim == 4 else arr[np.newaxis], buf)
        return buf
    elems = convert_elements(arr, precision, what="x", rounding=rounding, saturate=saturate)
    if elems.ndim == 3:
        elems = elems[np.newaxis]
    layout._pack_into(elems, buf)
    return buf


@lru_cache(maxsize=1024)
def _default_layout(shape, dtype, precision, config: Config) -> tuple:
    """(precision, descriptor) of a cube with default strides; errors as pack_feature's (an
    exception is not cached, so bad input is checked again on every call)."""
    _nchw(shape, "x")
    precision = infer_precision(dtype, precision, config, "x")
    return precision, feature_layout(shape, precision, config)


@registry_words("nvdla.unpack_feature")
@gate("buf")
def unpack_feature(buf, shape, dtype=None, *, config: Config = NV_FULL, precision: str | None = None,
                   line_stride=None, surface_stride=None, batch_stride=None) -> np.ndarray:
    """Read a logical cube back from NVDLA feature data (docs/nvdla.md §3.4).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    buf : uint8 array or bytes
        Packed feature data, at least ``nbytes`` bytes. Bytes that hold no element (padding
        channels, gaps) are ignored: hardware output leaves non-zero values there.
    shape : (N, C, H, W) or (C, H, W)
        Logical shape; the result has this shape.
    dtype : int8, int16 or float16, optional
        Element type; or give ``precision`` ("int8" -> int8, "int16" -> int16, "fp16" -> float16).
    config, line_stride, surface_stride, batch_stride
        As for :func:`pack_feature`.

    Returns
    -------
    numpy.ndarray
        ``shape``, dtype int8 / int16 / float16.

    Raises
    ------
    TypeError
        ``buf`` is not bytes; dtype and precision missing or not one of the three.
    LayoutError
        Shape or stride rules broken; ``buf`` shorter than ``nbytes``.
    UnsupportedError
        The precision is not supported by ``config``.
    """
    check_config(config)
    precision = _precision_of(dtype, precision)
    config.require_precision(precision)
    n, c, h, w = _nchw(shape)
    layout = feature_layout(shape, precision, config, line_stride=line_stride, surface_stride=surface_stride,
                            batch_stride=batch_stride)
    data = as_byte_buffer(buf, "buf")
    if data.size < layout.nbytes:
        raise LayoutError(f"buf: holds {data.size} bytes, the feature cube needs {layout.nbytes}")
    out = layout.unpack(data)
    return out if len(tuple(shape)) == 4 else out[0]


def _precision_of(dtype, precision):
    if precision is not None:
        element_size(precision)
        if dtype is not None and check_dtype(dtype, "dtype") != _TARGET_DTYPE[precision]:
            raise TypeError(f"dtype: {np.dtype(dtype)} does not match precision {precision!r}")
        return precision
    if dtype is None:
        raise TypeError("dtype: give the element dtype (int8, int16, float16) or precision=")
    by_dtype = {v: k for k, v in _TARGET_DTYPE.items()}
    try:
        return by_dtype[check_dtype(dtype, "dtype")]
    except KeyError:
        raise TypeError(f"dtype: {np.dtype(dtype)} is not int8, int16 or float16") from None
