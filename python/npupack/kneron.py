"""Kneron NPU data layouts (docs/kneron.md).

KL520, KL630 and KL720 (shape info v1) use closed formulas: channel blocks of 4 / 16 / 1 scalars
and a width alignment, nested ``[h][c/CB][align(W)][c%CB]`` on KL520 (HCW) and
``[c/CB][h][align(W)][c%CB]`` on KL630/KL720 (CHW); tensors are ``(C, H, W)`` or ``(1, C, H, W)``.
KL730 and KL830 (shape info v2) place scalars by the NEF's ``stride_npu`` (scalars per ONNX axis),
with the outer channel group of 1W16C8B(HL). The 16-bit high/low formats split every 16-scalar
entry into a low and a high byte entry (a C++ pass). Every byte without an element is 0.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Optional

import numpy as np

from npupack._gate import gate
from npupack import _core
from npupack.errors import LayoutError, UnsupportedError
from npupack.formats.aliases import registry_words
from npupack.grammar import Layout, Tile
from npupack.layout import (_BIG_ENDIAN, Dim, cache_safe, check_bool, check_dims, check_dtype, check_int,
                            check_no_nan, check_whole, little_endian, remember, result_buffer, strided_layout)

__all__ = ["DataLayout", "CHIPS", "pack", "unpack", "nbytes", "quantize", "dequantize", "predict_stride_npu",
           "v1_layout"]

V1_CHIPS = ("kl520", "kl630", "kl720")
V2_CHIPS = ("kl730", "kl830")
CHIPS = V1_CHIPS + V2_CHIPS


class DataLayout(IntEnum):
    """``kp_model_tensor_data_layout_t`` of Kneron PLUS 3.2 (docs/kneron.md §3). Members are
    the vendor names with a ``KP_`` prefix; functions also accept the plain names ("4W4C8B")."""

    KP_UNKNOWN = 0
    KP_4W4C8B = 1
    KP_1W16C8B = 2
    KP_16W1C8B = 3
    KP_8W1C16B = 4
    KP_4W4C8BHL = 5
    KP_1W16C8BHL = 6
    KP_16W1C8BHL = 7
    KP_RAW_8B = 8
    KP_RAW_16B = 9
    KP_RAW_FLOAT = 10
    KP_1W16C8B_CH_COMPACT = 11
    KP_1W16C8BHL_CH_COMPACT = 12
    KP_HW4C8B_KEEP_A = 13
    KP_HW4C8B_DROP_A = 14
    KP_HW1C8B = 15
    KP_HW1C16B_LE = 16
    KP_HW1C16B_BE = 17

    @property
    def vendor_name(self) -> str:
        return self.name[3:]

    @classmethod
    def named(cls, layout) -> "DataLayout":
        """A DataLayout from a member, its value or its vendor name ("4W4C8B", case-insensitive)."""
        if isinstance(layout, DataLayout):
            return layout
        if isinstance(layout, str):
            key = "KP_" + layout.strip().upper()
            if key in cls.__members__:
                return cls[key]
            raise ValueError(f"layout: unknown Kneron data layout {layout!r}; known: "
                             f"{[m.vendor_name for m in cls if m.value]}")
        if isinstance(layout, (int, np.integer)) and not isinstance(layout, bool):
            try:
                return cls(int(layout))
            except ValueError:
                raise ValueError(f"layout: {layout} is not a kp_model_tensor_data_layout_t value") from None
        raise TypeError(f"layout: expected a DataLayout, its name or value, got {type(layout).__name__}")

    @classmethod
    def from_firmware_code(cls, code: int, chip: str) -> "DataLayout":
        """Map a per-chip firmware/NEF format code (docs/kneron.md §3) to the PLUS value.
        Raises TypeError for a code that is not an integer, UnsupportedError for codes npupack
        does not know."""
        code = check_int(code, "code")
        table = _FIRMWARE.get(_chip(chip), {})
        if code not in table:
            raise UnsupportedError(f"code: firmware format code {code} is not known for {chip} "
                                   f"(known: {sorted(table)}; docs/kneron.md §3)")
        return cls.named(table[code])


_FIRMWARE = {
    "kl520": {16: "4W4C8B", 8: "16W1C8B"},
    "kl720": {0: "1W16C8B", 4: "4W4C8B", 5: "16W1C8B", 6: "8W1C16B"},
    "kl630": {0: "1W16C8B", 2: "4W4C8B", 4: "16W1C8B", 6: "8W1C16B"},
}

# Scalar type per layout (docs/kneron.md §3): bits, or "f32".
_SCALAR = {1: 8, 2: 8, 3: 8, 4: 16, 5: 16, 6: 16, 7: 16, 8: 8, 9: 16, 10: "f32", 11: 8, 12: 16, 13: 8, 14: 8,
           15: 8, 16: 16, 17: 16}
_HIGHLOW = {DataLayout.KP_4W4C8BHL, DataLayout.KP_1W16C8BHL, DataLayout.KP_16W1C8BHL,
            DataLayout.KP_1W16C8BHL_CH_COMPACT}
_OUTER_GROUP = {DataLayout.KP_1W16C8B, DataLayout.KP_1W16C8BHL}
_INPUT_ONLY = {DataLayout.KP_4W4C8B, DataLayout.KP_HW4C8B_KEEP_A, DataLayout.KP_HW4C8B_DROP_A, DataLayout.KP_HW1C8B,
               DataLayout.KP_HW1C16B_LE, DataLayout.KP_HW1C16B_BE}

# v1 chips (docs/kneron.md §6.4): layout -> (channel block CB, width alignment WB); KL520 nests HCW.
_V1 = {
    "kl520": {DataLayout.KP_4W4C8B: (4, 16), DataLayout.KP_16W1C8B: (1, 16)},
    "kl630": {DataLayout.KP_4W4C8B: (4, 4), DataLayout.KP_1W16C8B: (16, 1), DataLayout.KP_16W1C8B: (1, 16),
              DataLayout.KP_8W1C16B: (1, 8)},
}
_V1["kl720"] = _V1["kl630"]


def _chip(chip) -> str:
    if not isinstance(chip, str):
        raise TypeError(f"chip: expected a str, got {type(chip).__name__}")
    c = chip.strip().lower()
    if c == "kl530":
        raise UnsupportedError("chip: 'kl530' is not decoded by the Kneron host library; if its NEF follows the "
                               "KL630 rules, pass chip='kl630' knowingly (docs/kneron.md §4)")
    if c not in CHIPS:
        raise UnsupportedError(f"chip: unknown Kneron chip {chip!r}; supported: {list(CHIPS)} (docs/kneron.md §4)")
    return c


def _scalar_dtype(layout: DataLayout) -> np.dtype:
    bits = _SCALAR[layout.value]
    return np.dtype(np.float32 if bits == "f32" else np.int8 if bits == 8 else np.int16)


def v1_layout(layout, chip: str) -> Layout:
    """The engine layout of a v1 chip's format (docs/kneron.md §6.4), logical dims (N, C, H, W).
    Raises UnsupportedError for a layout the chip does not have."""
    lay, chip = DataLayout.named(layout), _chip(chip)
    if chip not in V1_CHIPS:
        raise UnsupportedError(f"chip: {chip} uses stride_npu (shape info v2), not a closed formula")
    try:
        cb, wb = _V1[chip][lay]
    except KeyError:
        raise UnsupportedError(f"layout: {lay.vendor_name} is not available on {chip.upper()} "
                               f"(it has {[m.vendor_name for m in _V1[chip]]}; docs/kneron.md §4)") from None
    outer = ("N", "H", "C", "W") if chip == "kl520" else ("N", "C", "H", "W")
    tiles = (Tile("C", cb),) if cb > 1 else ()
    align = (("W", wb),) if wb > 1 else ()
    return Layout(("N", "C", "H", "W"), outer, tiles, align, f"{chip}:{lay.vendor_name}")


def _v1_shape(shape) -> tuple:
    shape = tuple(int(v) for v in shape)
    if len(shape) == 3:
        return (1,) + shape
    if len(shape) == 4:
        if shape[0] != 1:
            raise UnsupportedError(f"shape: batch {shape[0]} != 1; released NEFs for KL520/KL630/KL720 use B = 1 "
                                   "(docs/kneron.md §6)")
        return shape
    raise LayoutError(f"shape: expected (C, H, W) or (1, C, H, W), got {shape}")


def _v2_descriptor(lay: DataLayout, shape, stride_npu, dtype, stride_onnx=None):
    """(engine descriptor, scalar count N) for the stride rule of docs/kneron.md §7; ``shape`` is
    already checked (a tuple of ints >= 1)."""
    if stride_npu is None:
        raise ValueError("stride_npu: required for KL730/KL830 (the NEF's per-axis scalar strides; "
                         "predict_stride_npu() only predicts them; docs/kneron.md §7)")
    strides = check_dims(stride_npu, "stride_npu", minimum=0)
    if len(strides) != len(shape):
        raise LayoutError(f"stride_npu: {len(strides)} entries for a {len(shape)}-d shape {shape} (docs/kneron.md §7.10)")
    if stride_onnx is not None and check_dims(stride_onnx, "stride_onnx", minimum=0) != _row_major(shape):
        raise LayoutError(f"stride_onnx: {tuple(stride_onnx)} is not the row-major stride of {shape} "
                          "(docs/kneron.md §7.1)")
    eb = dtype.itemsize
    names = [f"d{i}" for i in range(len(shape))]
    if lay in _OUTER_GROUP:
        ones = [i for i, s in enumerate(strides) if s == 1]
        if len(ones) != 1:
            raise LayoutError(f"stride_npu: {lay.vendor_name} needs exactly one axis with stride 1 (the channel "
                              f"axis), got {strides} (docs/kneron.md §7.2)")
        ch = ones[0]
        group = max(strides[d] * shape[d] for d in range(len(shape)) if d != ch)
        dims = [Dim(n, shape[i], (16,) if i == ch else ()) for i, n in enumerate(names)]
        byte_strides = {(names[i], 0): strides[i] * eb for i in range(len(shape)) if i != ch}
        byte_strides[(names[ch], 0)] = group * eb
        byte_strides[(names[ch], 1)] = eb
        n_scalars = -(-shape[ch] // 16) * group
    else:
        if lay in (DataLayout.KP_4W4C8B, DataLayout.KP_4W4C8BHL):
            ones = [i for i, s in enumerate(strides) if s == 1 and shape[i] > 1]
            c = shape[ones[0]] if ones else (shape[1] if len(shape) > 1 else shape[0])
            if c > 4:
                raise UnsupportedError(f"layout: {lay.vendor_name} on KL730/KL830 holds at most 4 channels with "
                                       f"linear strides, got C = {c} (docs/kneron.md §7.8)")
        dims = [Dim(n, shape[i]) for i, n in enumerate(names)]
        byte_strides = {(names[i], 0): strides[i] * eb for i in range(len(shape))}
        n_scalars = max(strides[d] * shape[d] for d in range(len(shape)))
    try:
        desc = strided_layout(dims, byte_strides, dtype)
    except LayoutError as e:
        raise LayoutError(f"stride_npu: {strides} maps two elements to one slot for shape {shape} "
                          f"(docs/kneron.md §7.10): {e}") from None
    return desc, max(n_scalars, 1)


def _row_major(shape) -> tuple:
    out, acc = [], 1
    for v in reversed(shape):
        out.append(acc)
        acc *= v
    return tuple(reversed(out))


def _clear_lsb(lay: DataLayout, chip: str, clear_lsb) -> bool:
    if clear_lsb is not None:
        return check_bool(clear_lsb, "clear_lsb") and lay not in (DataLayout.KP_HW1C16B_LE,
                                                                 DataLayout.KP_HW1C16B_BE)
    return chip in V2_CHIPS and lay in (DataLayout.KP_8W1C16B, DataLayout.KP_RAW_16B)


def _plain_int(v) -> int:
    """``v`` when it is exactly an int (a key of _PLANS may hold it); TypeError otherwise."""
    if type(v) is not int:
        raise TypeError(v)
    return v


def _plan(layout, shape, chip, stride_npu, stride_onnx=None):
    """(DataLayout, chip, engine descriptor, engine shape, output bytes, scalar dtype); cached,
    because a model's tensors are re-laid out with the same parameters on every inference."""
    shape = cache_safe(shape, "shape")
    stride_npu, stride_onnx = cache_safe(stride_npu, "stride_npu", 0), cache_safe(stride_onnx, "stride_onnx", 0)
    try:
        # Plain ints only, and type(layout): a float or bool dimension, stride or layout value (True
        # for 1) must not hit the entry of its integer twin (they are errors); other integer types
        # are checked on every call.
        key = (type(layout), layout, tuple(map(_plain_int, shape)), chip,
               None if stride_npu is None else tuple(map(_plain_int, stride_npu)),
               None if stride_onnx is None else tuple(map(_plain_int, stride_onnx)))
        hit = _PLANS.get(key)
    except TypeError:
        key = hit = None
    if hit is not None:
        return hit
    return remember(_PLANS, key, _make_plan(layout, shape, chip, stride_npu, stride_onnx), 1024)


_PLANS: dict = {}
# pack's checked calls by (type(layout), layout, shape, dtype, chip, stride_npu, stride_onnx),
# the default clear_lsb only: (descriptor, engine shape, bytes, view dtype, clear LSB, step
# after the engine pass): see pack.
_CALLS: dict = {}
_PLAIN, _SWAP, _SPLIT = 0, 1, 2  # the step: none, byte swap first (HW1C16B_BE), high/low split after


def _int_tuple(strides) -> bool:
    """True for None or a tuple of exact ints: the strides a key of _CALLS may hold (a float 64.0
    equals 64 and must not find the plan of its integer twin)."""
    return strides is None or (type(strides) is tuple and all(type(v) is int for v in strides))


def _make_plan(layout, shape, chip, stride_npu, stride_onnx):
    lay, chip = DataLayout.named(layout), _chip(chip)
    shape = check_dims(shape, "shape")
    if lay == DataLayout.KP_UNKNOWN:
        raise ValueError("layout: UNKNOWN is not a layout")
    dtype = _scalar_dtype(lay)
    if chip in V1_CHIPS:
        eshape = _v1_shape(shape)
        desc = v1_layout(lay, chip).bind(eshape, dtype)
        return lay, chip, desc, eshape, desc.nbytes, dtype
    desc, n = _v2_descriptor(lay, shape, stride_npu, dtype, stride_onnx)
    total = -(-n // 16) * 32 if lay in _HIGHLOW else n * dtype.itemsize
    return lay, chip, desc, shape, total, dtype


@registry_words("kneron.nbytes")
def nbytes(layout, shape, *, chip: str, stride_npu=None) -> int:
    """Bytes of the NPU buffer (docs/kneron.md §6.1, 6.2, 7.5) for ``shape`` ((C, H, W) / (1, C, H, W)
    on v1 chips, the ONNX shape on v2 chips). ``target=`` is the registry's word for ``chip``
    (docs/formats.md §3.1). Raises as :func:`pack`."""
    return _plan(layout, shape, chip, stride_npu)[4]


def _input_array(x, lay: DataLayout, dtype: np.dtype) -> np.ndarray:
    arr = np.asarray(x)
    if dtype == np.float32:
        if arr.dtype != np.float32:
            raise TypeError(f"x: {lay.vendor_name} stores float32; got {arr.dtype}")
        return arr
    if arr.dtype.kind == "f":
        raise TypeError(f"x: float data ({arr.dtype}) for the integer layout {lay.vendor_name}; quantise explicitly "
                        "with npupack.kneron.quantize (docs/kneron.md §5)")
    if arr.dtype.kind not in "iu" or arr.dtype.itemsize != dtype.itemsize:
        raise TypeError(f"x: {lay.vendor_name} takes {dtype.itemsize * 8}-bit integers (int{dtype.itemsize * 8} or "
                        f"uint{dtype.itemsize * 8}), got {arr.dtype}")
    return arr.view(dtype) if arr.dtype != dtype else arr


@registry_words("kneron.pack")
@gate("x")
def pack(x, layout, *, chip: str, stride_npu=None, stride_onnx=None, clear_lsb=None, out=None) -> np.ndarray:
    """Lay a tensor out for the Kneron NPU (docs/kneron.md §6, 7).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    x : array_like
        v1 chips: ``(C, H, W)`` or ``(1, C, H, W)``; v2 chips: the ONNX shape. int8/uint8 for 8-bit
        layouts, int16/uint16 for 16-bit ones, float32 for RAW_FLOAT. Float input to an integer
        layout is a TypeError (use :func:`quantize`). Not modified.
    layout : DataLayout, vendor name ("4W4C8B") or value
    chip : {"kl520", "kl630", "kl720", "kl730", "kl830"}
        Also given as ``target=``, the registry's word (docs/formats.md §3.1); ``chip`` is the
        older spelling, kept as an alias for one release. Both with different values: TypeError.
    stride_npu : sequence of int, scalars per axis
        Required on KL730/KL830 (from the NEF); ignored on v1 chips.
    stride_onnx : sequence of int, optional
        If given, must be the row-major strides of the shape.
    clear_lsb : bool, optional
        Clear bit 0 of 16-bit scalars (default: on KL730/KL830 for 8W1C16B and RAW_16B).
    out : numpy.ndarray of uint8, optional
        Writable C-contiguous buffer of at least ``nbytes`` bytes; its first ``nbytes`` bytes are
        written, the rest untouched.

    Returns
    -------
    numpy.ndarray
        1-D uint8 of ``nbytes(layout, x.shape, chip=..., stride_npu=...)`` bytes; multi-byte scalars
        little-endian (HW1C16B_BE big-endian); every byte without an element is 0.

    Raises
    ------
    UnsupportedError
        Unknown chip, KL530, a layout marked "-" for the chip (docs/kneron.md §4), batch != 1 on v1
        chips, 4W4C8B with C > 4 on v2 chips.
    ValueError / LayoutError
        Missing or overlapping ``stride_npu``, wrong shape, ``out`` too small, read-only or sharing
        memory with ``x``.
    TypeError
        Float input to an integer layout, a dtype of the wrong width.
    """
    arr = x if type(x) is np.ndarray and x.dtype.byteorder not in _BIG_ENDIAN else little_endian(np.asarray(x))
    # A tensor re-laid out on every inference: the layout, shape, dtype, chip and strides seen
    # before (with the default clear_lsb) skip the plan's checks. type(layout) keeps a float 1.0
    # from matching the entry of layout 1.
    key = (type(layout), layout, arr.shape, arr.dtype, chip, stride_npu, stride_onnx) \
        if clear_lsb is None and type(chip) is str and _int_tuple(stride_npu) and _int_tuple(stride_onnx) else None
    try:
        seen = _CALLS.get(key)
    except TypeError:  # an unhashable layout: the checks below name it
        seen = key = None
    if seen is not None:
        desc, eshape, total, view, lsb, step = seen
        vals = (arr if view is None else arr.view(view)).reshape(eshape)
        if step == _PLAIN and not lsb:  # one engine pass: the common call, without a call more
            return _pack_plain(desc, vals, total, out)
        return _pack_values(desc, vals, total, out, lsb, step)
    lay, chip, desc, eshape, total, dtype = _plan(layout, arr.shape, chip, stride_npu, stride_onnx)
    vals = _input_array(arr, lay, dtype).reshape(eshape)
    lsb = _clear_lsb(lay, chip, clear_lsb)
    step = _SPLIT if lay in _HIGHLOW else _SWAP if lay == DataLayout.KP_HW1C16B_BE else _PLAIN
    remember(_CALLS, key, (desc, eshape, total, dtype if arr.dtype != dtype else None, lsb, step), 1024)
    return _pack_values(desc, vals, total, out, lsb, step)


def _pack_values(desc, vals: np.ndarray, total: int, out, lsb: bool, step: int) -> np.ndarray:
    """The checked values (engine shape, the layout's scalar type) packed into ``out`` or a new
    buffer of ``total`` bytes: LSB cleared, then the layout's step (docs/kneron.md §6, 7)."""
    if lsb:
        vals = vals & np.int16(-2)
    if step == _SWAP:
        vals = vals.byteswap()  # the engine stores little-endian: swapped values give big-endian bytes
    buf = _pack_plain(desc, vals, total, out)
    if step == _SPLIT:  # the ceil(N/16)*16 int16 scalars become their high/low entries in place
        _core.highlow_split(buf)
    return buf


def _pack_plain(desc, vals: np.ndarray, total: int, out) -> np.ndarray:
    """One engine pass of ``vals`` (the engine shape, little-endian) into the first ``total`` bytes
    of ``out`` (checked) or a new buffer; the bytes past the descriptor's are zeroed."""
    buf = result_buffer(out, total)
    desc._pack_into(vals, buf)
    if total > desc.nbytes:
        buf[desc.nbytes:] = 0
    return buf


@registry_words("kneron.unpack")
@gate("buf")
def unpack(buf, layout, shape, *, chip: str, stride_npu=None, stride_onnx=None, clear_lsb=None,
           allow_input_only=False) -> np.ndarray:
    """Read a tensor of ``shape`` (logical NCHW / ONNX order) back from an NPU buffer; width
    padding, channel tails and native order are removed. Returns int8, int16 or float32 (the
    layout's scalar type).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Input-only layouts (4W4C8B, the HW* formats) cannot be NPU outputs: decoding one raises
    UnsupportedError unless ``allow_input_only=True`` (round trips, simulators). Layouts as
    :func:`pack` (docs/kneron.md §3, 7); ``target=`` is the registry's word for ``chip`` (docs/formats.md
    §3.1). Otherwise raises as :func:`pack`, LayoutError when ``buf`` is too short, and TypeError when
    ``allow_input_only`` or ``clear_lsb`` is not a bool."""
    allow_input_only = check_bool(allow_input_only, "allow_input_only")
    lay, chip, desc, eshape, total, dtype = _plan(layout, shape, chip, stride_npu, stride_onnx)
    if lay in _INPUT_ONLY and not allow_input_only:
        raise UnsupportedError(f"layout: {lay.vendor_name} is an input-only layout and cannot be an NPU output "
                               "(docs/kneron.md §3); pass allow_input_only=True to read back a buffer you packed")
    data = np.asarray(buf)
    if data.dtype != np.uint8:
        raise TypeError(f"buf: expected uint8 bytes, got {data.dtype}")
    data = np.ascontiguousarray(data).reshape(-1)
    if data.size < total:
        raise LayoutError(f"buf: holds {data.size} bytes, {lay.vendor_name} on {chip} needs {total}")
    if lay in _HIGHLOW:
        scalars = np.empty(total // 2, dtype=np.int16)
        _core.highlow_merge(data[:total], scalars)
        out = desc.unpack(scalars.view(np.uint8))
    elif lay == DataLayout.KP_HW1C16B_BE:
        out = desc.unpack(data).byteswap()
    else:
        out = desc.unpack(data)
    if _clear_lsb(lay, chip, clear_lsb):
        out &= np.int16(-2)
    return out.reshape(tuple(int(v) for v in shape))


def _per_axis(values, ndim: int, axis: Optional[int], name: str, size: Optional[int]) -> np.ndarray:
    """``values`` as float64, a scalar or shaped to broadcast along ``axis`` (already checked)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    if v.ndim != 1:
        raise ValueError(f"{name}: a scalar or a 1-D array, got shape {v.shape}")
    if axis is None:
        raise ValueError(f"{name}: {v.size} values need axis= (the quantised axis)")
    if size is not None and v.size != size:
        raise ValueError(f"{name}: {v.size} values for an axis of size {size}")
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def _radix_scale(radix, scale, arr: np.ndarray, axis) -> tuple:
    """``radix`` and ``scale`` for ``arr`` as float64 arrays broadcasting along ``axis`` (an
    integer in range, or None), and the float32 factor ``scale * 2**radix``: radix whole numbers
    of int32 (a power-of-two exponent: 1.5 is not truncated), scale finite and > 0, the factor
    finite and nonzero in float32 (docs/kneron.md §5)."""
    ndim, size = arr.ndim, None
    if axis is not None:
        if not -ndim <= check_int(axis, "axis") < ndim:
            raise ValueError(f"axis: {axis} is out of range for a {ndim}-d tensor")
        size = arr.shape[axis]
    r = check_whole(_per_axis(radix, ndim, axis, "radix", size), "radix", " (a power-of-two exponent; docs/kneron.md §5)",
                    -2**31, 2**31 - 1)
    s = _per_axis(scale, ndim, axis, "scale", size)
    if not np.all(np.isfinite(s) & (s > 0)):
        raise ValueError(f"scale: must be finite and > 0, got {scale!r} (docs/kneron.md §5)")
    # dequantize divides by the factor in float32: one that overflows to inf or underflows to 0
    # (a radix of 200, say) would turn every value into 0 or inf without a word.
    with np.errstate(over="ignore", under="ignore"):
        factor = s.astype(np.float32) * np.exp2(r).astype(np.float32)
    if not np.all(np.isfinite(factor) & (factor > 0)):
        raise ValueError(f"radix: scale * 2**radix must be a finite nonzero float32, got radix {radix!r} with "
                         f"scale {scale!r} (docs/kneron.md §5)")
    return r, s, factor


@gate("x")
def quantize(x, radix, scale, *, axis=None, layout=None, bits=None, rounding="nearest_even", dtype=None):
    """Host-side input quantisation (docs/kneron.md §5): ``clip(round(x * scale * 2**radix))``.

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    ``radix`` (int) and ``scale`` (float) are scalars or 1-D arrays along ``axis``. The result is
    int8 or int16 (bits from ``layout``, else ``bits``, else 8) of ``x``'s shape;
    ``dtype=np.float32`` returns the rounded values as float32 without clipping (for RAW_FLOAT
    models that expect scaled inputs). Computed in float64; ``rounding`` "nearest_even" (default)
    or "nearest_away".
    Raises ValueError for bad parameters or rounding, a layout without an element type
    (KP_UNKNOWN), a radix that is not a whole int32, a scale that is not finite and > 0, a
    factor ``scale * 2**radix`` that is 0 or infinite in float32, a
    ``dtype`` other than float32, and a NaN in ``x`` for an integer result (it has no integer
    value); TypeError for non-real input, a non-integer ``bits`` or ``axis``.
    """
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"x: expected real numbers, got {arr.dtype}")
    if rounding not in ("nearest_even", "nearest_away"):
        raise ValueError(f"rounding: {rounding!r} is not 'nearest_even' or 'nearest_away'")
    if layout is not None:
        named = DataLayout.named(layout)
        if named.value not in _SCALAR:
            raise ValueError(f"layout: {named.name} has no element type to quantise to; give a known layout or bits=")
        bits = _SCALAR[named.value]
        if bits == "f32":
            bits = None
    bits = 8 if bits is None else check_int(bits, "bits")
    if bits not in (8, 16):
        raise ValueError(f"bits: 8 or 16, got {bits}")
    if dtype is not None and check_dtype(dtype, "dtype") != np.float32:
        raise ValueError(f"dtype: None (int8 / int16) or float32, got {dtype!r}")
    r, s, _ = _radix_scale(radix, scale, arr, axis)
    v = arr.astype(np.float64) * (s * np.exp2(r))
    v = np.rint(v) if rounding == "nearest_even" else np.sign(v) * np.floor(np.abs(v) + 0.5)
    if dtype is not None:
        return v.astype(np.float32)
    check_no_nan(arr, "x")
    lo, hi = (-128, 127) if bits == 8 else (-32768, 32767)
    return np.clip(v, lo, hi).astype(np.int8 if bits == 8 else np.int16)


@gate("q")
def dequantize(q, radix, scale, *, axis=None) -> np.ndarray:
    """Output dequantisation (docs/kneron.md §5): ``float32(q) / (float32(scale) * float32(2**radix))``,
    bit for bit as the vendor decoder; per tensor or per index of ``axis``. Returns float32 of
    ``q``'s shape. Raises TypeError for non-numeric ``q`` or a non-integer ``axis``, ValueError
    for per-axis parameters without ``axis`` or of the wrong length, a radix that is not a whole
    int32, a scale that is not finite and > 0, a factor ``scale * 2**radix`` that is 0 or
    infinite in float32 (the division would give inf, NaN or 0 everywhere).

    An input changed by another thread during the call gives undefined values in the result, never a crash.
    """
    arr = np.asarray(q)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"q: expected numbers, got {arr.dtype}")
    _, _, factor = _radix_scale(radix, scale, arr, axis)
    return arr.astype(np.float32) / factor


def predict_stride_npu(shape, layout) -> tuple:
    """The ``stride_npu`` a KL730 NEF would *likely* hold for a ``[1, C, H, W]`` tensor
    (docs/kneron.md §7.9), in scalars per axis. Non-authoritative: the NEF's strides win; never used
    implicitly. Raises ValueError for an unknown layout, LayoutError for a non-4-D shape of a
    blocked layout."""
    lay = DataLayout.named(layout)
    shape = check_dims(shape, "shape")
    if len(shape) != 4:
        if lay.vendor_name.startswith(("RAW", "HW1C")):
            return _row_major(shape)
        raise LayoutError(f"shape: predict_stride_npu handles [1, C, H, W], got {shape}")
    _, c, h, w = shape
    al = lambda v, a: -(-v // a) * a  # noqa: E731
    name = lay.vendor_name
    if name in ("16W1C8B", "16W1C8BHL"):
        return (c * h * al(w, 16), h * al(w, 16), al(w, 16), 1)
    if name == "8W1C16B":
        return (c * h * al(w, 8), h * al(w, 8), al(w, 8), 1)
    if name in ("1W16C8B", "1W16C8BHL"):
        return (h * w * 16, 1, w * 16, 16)
    if name.endswith("CH_COMPACT"):
        c16 = al(c, 16)
        return (h * w * c16, 1, w * c16, c16)
    if name in ("4W4C8B", "4W4C8BHL"):
        return (h * al(w, 4) * 4, 1, al(w, 4) * 4, 4)
    if name.startswith("HW4C8B"):
        return (h * w * 4, 1, w * 4, 4)
    return _row_major(shape)
