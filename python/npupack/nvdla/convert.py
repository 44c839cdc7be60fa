"""Element conversion: fp16 rounding, weight quantisation, and the dtype -> precision rules.

Spec: docs/nvdla.md §2 (Element conversion): 2.1 accepted input dtypes, 2.2 ``to_fp16``,
2.3 ``quantize_weights``; section 14.2 (INF/NaN policy).
"""
from __future__ import annotations

import numpy as np

from npupack import _core
from npupack.errors import UnsupportedError
from npupack.layout import check_bool, check_int, little_endian
from npupack.nvdla.config import PRECISIONS, Config

__all__ = ["to_fp16", "quantize_weights", "infer_precision", "convert_elements"]

_ROUNDINGS = ("nearest_even", "nearest_away")
_INPUT_DTYPES = tuple(np.dtype(t) for t in ("int8", "uint8", "int16", "uint16", "float16", "float32", "float64"))
_TARGET_DTYPE = {"int8": np.dtype(np.int8), "int16": np.dtype(np.int16), "fp16": np.dtype(np.float16)}


def _check_rounding(rounding: str) -> bool:
    if rounding not in _ROUNDINGS:
        raise ValueError(f"rounding: {rounding!r} is not one of {_ROUNDINGS} for an fp16 target "
                         "('truncate' is only for int8/int16 Winograd weights; docs/nvdla.md §2.2.4)")
    return rounding == "nearest_away"


def to_fp16(x, *, rounding: str = "nearest_even", saturate: bool = True) -> np.ndarray:
    """Convert real values to IEEE binary16 the way NVDLA software needs (docs/nvdla.md §2.2).

    Parameters
    ----------
    x : array_like, any shape
        float16 (copied; INF saturated when ``saturate``), float32, float64 (rounded once from
        the float64 value) or an integer dtype (converted exactly, then rounded).
    rounding : {"nearest_even", "nearest_away"}
        Ties to even (IEEE default, the hardware documentation's rule) or ties away from zero (NVIDIA's compiler).
    saturate : bool
        Overflow (|x| >= 65520) and INF give +-65504 when True, +-inf when False.
        ``rounding="nearest_away", saturate=False`` reproduces nvdla/sw's half.h for every
        non-NaN input. NaN always becomes a quiet NaN (payload truncated).

    Returns
    -------
    numpy.ndarray
        float16, same shape as ``x`` (2 bytes per element). ``x`` is not modified.

    Raises
    ------
    ValueError
        ``rounding`` is not one of the two modes.
    TypeError
        ``x`` has a dtype that is not real (complex, object, bool); ``saturate`` is not a bool.
    """
    saturate = check_bool(saturate, "saturate")
    nearest_away = _check_rounding(rounding)
    arr = little_endian(np.asarray(x))
    if arr.dtype == np.float16:
        bits = arr.view(np.uint16).copy()
        if saturate:
            inf = _fp16_inf_mask(bits)
            bits[inf] = (bits[inf] & 0x8000) | 0x7BFF
        return bits.view(np.float16)
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.float64)
    elif arr.dtype not in (np.float32, np.float64):
        raise TypeError(f"x: expected a real (integer or float) array, got dtype {arr.dtype}")
    src = arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
    out = np.empty(src.shape, dtype=np.uint16)
    conv = _core.to_fp16_f32 if src.dtype == np.float32 else _core.to_fp16_f64
    conv(src.reshape(-1), out.reshape(-1), nearest_away, bool(saturate))
    return out.view(np.float16)


# The modes of quantize_weights (see its docstring), also checked by the pack job before it
# reads a model, so that a typo is one error instead of one per layer.
QUANTIZE_MODES = ("per_kernel", "per_filter")


def quantize_weights(w, *, precision: str = "int8", mode: str = "per_kernel", kernel_axis: int = 0):
    """Quantise float weights to int8/int16 with NVIDIA's compiler formula (docs/nvdla.md §2.3).

    Each block (the whole tensor for ``"per_kernel"``, each slice along ``kernel_axis`` for
    ``"per_filter"``) gets ``scale = fl32(max|w| / qmax)``, ``inv = fl32(1 / scale)`` and
    ``q = clamp(floor(fl32(fl32(w * inv) + 0.5)))``, every step one float32 operation (round
    half up); an all-zero block gets scale 0 and q = 0, and so does a block whose scale
    underflows (``1 / scale`` beyond float32, max|w| around 1e-40). Dequantisation is ``q * scales[k]``.

    Parameters
    ----------
    w : array_like, float16/float32/float64, any shape (weights ``(K, C, R, S)``)
        float16 and float64 are first converted to float32 (float64 rounds to nearest even).
    precision : {"int8", "int16"}
        qmax 127 or 32767.
    mode : {"per_kernel", "per_filter"}
        One scale for the whole tensor (repeated per kernel) or one per output kernel.
    kernel_axis : int
        The output-kernel axis: 0 for ``(K, C, R, S)``, 1 for ConvTranspose ``(C_in, K_out, R, S)``.

    Returns
    -------
    q : numpy.ndarray
        int8 or int16, same shape as ``w``.
    scales : numpy.ndarray
        float32, shape ``(w.shape[kernel_axis],)``.

    Raises
    ------
    TypeError
        ``w`` is not a float array.
    ValueError
        NaN or inf in ``w``, or a float64 value beyond the float32 range; unknown ``precision``
        or ``mode``; ``kernel_axis`` out of range; empty ``w``.
    """
    if precision not in ("int8", "int16"):
        raise ValueError(f"precision: {precision!r} is not 'int8' or 'int16' (docs/nvdla.md §2.3)")
    if not isinstance(mode, str) or mode not in QUANTIZE_MODES:
        raise ValueError(f"mode: {mode!r} is not 'per_kernel' or 'per_filter' (docs/nvdla.md §2.3)")
    arr = little_endian(np.asarray(w))
    if arr.dtype not in (np.float16, np.float32, np.float64):
        raise TypeError(f"w: quantize_weights expects float16/float32/float64 weights, got dtype {arr.dtype}")
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError(f"w: expected a non-empty array with at least one axis, got shape {arr.shape}")
    if not -arr.ndim <= check_int(kernel_axis, "kernel_axis") < arr.ndim:
        raise ValueError(f"kernel_axis: {kernel_axis} is out of range for a {arr.ndim}-d array")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"w: NaN or inf at index {tuple(int(i) for i in np.argwhere(bad)[0])}; "
                         "weights must be finite to be quantised (docs/nvdla.md §2.3)")
    with np.errstate(over="ignore"):
        w32 = arr.astype(np.float32)
    big = ~np.isfinite(w32)
    if big.any():
        raise ValueError(f"w: value at index {tuple(int(i) for i in np.argwhere(big)[0])} exceeds the float32 "
                         "range; the quantiser computes in float32 (docs/nvdla.md §2.3)")
    moved = np.ascontiguousarray(np.moveaxis(w32, kernel_axis, 0))
    k = moved.shape[0]
    blocks = moved.reshape(k, -1) if mode == "per_filter" else moved.reshape(1, -1)
    qdtype = np.int8 if precision == "int8" else np.int16
    q = np.empty(blocks.shape, dtype=qdtype)
    block_scales = np.empty(blocks.shape[0], dtype=np.float32)
    (_core.quantize_int8 if precision == "int8" else _core.quantize_int16)(blocks, q, block_scales)
    # A block whose scale underflows (max|w| near 1e-40: 1/scale is not a float32) is a zero
    # filter; the formula would give it a dense +-qmax pattern, -qmax-1 included.
    with np.errstate(divide="ignore", over="ignore"):
        dead = ~np.isfinite(np.float32(1.0) / block_scales)
    if dead.any():
        q[dead] = 0
        block_scales[dead] = 0
    scales = block_scales if mode == "per_filter" else np.repeat(block_scales, k)
    return np.moveaxis(q.reshape(moved.shape), 0, kernel_axis).copy(), scales


def _fp16_inf_mask(bits: np.ndarray) -> np.ndarray:
    # Bit tests: NumPy's float16 isinf/isnan are emulated and ~10x slower than this.
    return (bits & 0x7FFF) == 0x7C00


def _fp16_has_inf(x: np.ndarray) -> bool:
    if x.flags.c_contiguous:
        return _core.fp16_any_inf(x.reshape(-1).view(np.uint16))
    return bool(_fp16_inf_mask(x.view(np.uint16)).any())


def _fp16_all_finite(x: np.ndarray) -> bool:
    """True when ``x`` is a C-contiguous float16 array with no INF or NaN (one SSE2 pass); False
    also means "not known", and the caller applies its separate NaN / INF rules."""
    return x.dtype == np.float16 and x.flags.c_contiguous and \
        _core.fp16_first_nonfinite(x.reshape(-1).view(np.uint16)) < 0


def _pack_if_finite_fp16(layout, x: np.ndarray, buf: np.ndarray, zero_tail: bool = False) -> bool:
    """Pack float16 ``x`` (shape ``layout.shape``) into ``buf`` with the INF/NaN check of
    :func:`convert_elements` run slab by slab just before each slab is packed, instead of as a
    separate pass over the whole tensor (see ``BlockedLayout._pack_finite_fp16_into``). False,
    ``buf`` partly written, when ``x`` is not a C-contiguous aligned float16 array or holds INF
    or NaN: the caller then converts (docs/nvdla.md §2.1, 14) and packs. ``zero_tail``: when it
    returns True, the bytes of ``buf`` past the layout's are zeroed too."""
    if x.dtype is not _F16 and x.dtype != _F16:
        return False
    flags = x.flags
    return flags.c_contiguous and flags.aligned and layout._core.pack_finite_fp16(x, buf, zero_tail)


_F16 = np.dtype(np.float16)


def _first_nan(x: np.ndarray):
    """Index tuple of the first NaN of a float array, or None."""
    if x.dtype == np.float16 and x.flags.c_contiguous:
        flat = _core.fp16_first_nan(x.reshape(-1).view(np.uint16))
        return None if flat < 0 else tuple(int(i) for i in np.unravel_index(flat, x.shape))
    nan = (x.view(np.uint16) & 0x7FFF) > 0x7C00 if x.dtype == np.float16 else np.isnan(x)
    return tuple(int(i) for i in np.argwhere(nan)[0]) if nan.any() else None


_PRECISION_OF_DTYPE = {np.dtype(np.int8): "int8", np.dtype(np.int16): "int16", np.dtype(np.float16): "fp16",
                       np.dtype(np.float32): "fp16", np.dtype(np.float64): "fp16"}


def infer_precision(dtype, precision: str | None, config: Config, what: str) -> str:
    """The target precision for input ``dtype`` (docs/nvdla.md §2.1): explicit ``precision`` wins;
    int8 -> int8, int16 -> int16, floats -> fp16; uint8/uint16 need an explicit precision.
    Raises TypeError / ValueError / UnsupportedError (not in ``config.precisions``)."""
    dtype = np.dtype(dtype)
    if precision is None and dtype in _PRECISION_OF_DTYPE:
        precision = _PRECISION_OF_DTYPE[dtype]
        if precision in config.precisions:
            return precision
    if dtype not in _INPUT_DTYPES:
        raise TypeError(f"{what}: dtype {dtype} is not accepted; use one of "
                        f"{[str(d) for d in _INPUT_DTYPES]} (docs/nvdla.md §2.1)")
    if precision is None:
        if dtype in (np.uint8, np.uint16):
            raise TypeError(f"{what}: dtype {dtype} needs an explicit precision= (docs/nvdla.md §2.1)")
        precision = _PRECISION_OF_DTYPE[dtype]
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {PRECISIONS}")
    if precision not in config.precisions:
        raise UnsupportedError(f"precision: {precision!r} is not supported by config {config.name!r}, which "
                               f"supports {list(config.precisions)} (docs/nvdla.md §1.2)")
    return precision


def convert_elements(x: np.ndarray, precision: str, *, what: str, rounding: str = "nearest_even",
                     saturate: bool = True, allow_nan: bool = True) -> np.ndarray:
    """Convert ``x`` to the element type of ``precision`` (int8, int16 or float16 array of the
    same shape) by the table of docs/nvdla.md §2.1: integer -> integer never changes a value (out of
    range is a ValueError), float -> int is a TypeError naming ``quantize_weights``, anything ->
    fp16 goes through :func:`to_fp16`. With ``allow_nan=False`` a NaN is a ValueError naming
    its index. ``x`` is never modified (the result may share memory with it when no
    conversion is needed)."""
    target = _TARGET_DTYPE[precision]
    kind = x.dtype.kind
    if precision == "fp16":
        if _fp16_all_finite(x):
            return x  # every value finite: nothing to reject or saturate (one scan, not two)
        if kind == "f" and not allow_nan:
            nan = _first_nan(x)
            if nan is not None:
                raise ValueError(f"{what}: NaN at index {nan}; NaN weights are rejected unless allow_nan=True "
                                 "(docs/nvdla.md §2.2.4)")
        if x.dtype == np.float16 and not (saturate and _fp16_has_inf(x)):
            return x
        return to_fp16(x, rounding=rounding, saturate=saturate)
    if kind == "f":
        raise TypeError(f"{what}: float data ({x.dtype}) cannot be packed as {precision}; quantise it first "
                        "with npupack.nvdla.quantize_weights or pass integers (docs/nvdla.md §2.1)")
    if x.dtype == target:
        return x
    info = np.iinfo(target)
    if x.size and (x.min() < info.min or x.max() > info.max):
        raise ValueError(f"{what}: values of dtype {x.dtype} outside [{info.min}, {info.max}] do not fit "
                         f"{precision} (docs/nvdla.md §2.1)")
    return x.astype(target)
