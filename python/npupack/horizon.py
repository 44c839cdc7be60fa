"""Horizon Robotics BPU tensors (hb_dnn): validShape, alignedShape, byte strides, NV12 planes and
quantisation (docs/horizon.md).

A tensor of ``valid_shape`` (in its ``tensorLayout`` order, NHWC or NCHW) lives in a buffer where
element ``idx`` is at byte ``sum(idx[d] * stride[d])``; ``stride`` comes from the model (authoritative)
or from ``alignedShape`` (row-major). :func:`aligned_shape` predicts ``alignedShape`` with the
published X3/X5 rule (a parameter: :class:`AlignmentRule`). Padding is always 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

import numpy as np

from npupack._gate import gate
from npupack.errors import LayoutError, UnsupportedError
from npupack.formats.aliases import registry_words
from npupack.layout import (_BIG_ENDIAN, Dim, check_bool, check_dims, check_int, check_no_nan, check_out, check_whole,
                            empty_lines, little_endian, remember, strided_layout)

__all__ = ["AlignmentRule", "ALIGNMENT_RULES", "register_alignment_rule", "TensorProperties", "ELEMENT_SIZE",
           "numpy_dtype", "align_bpu_bytes", "aligned_shape", "strides", "nbytes", "pad", "strip", "pack_nv12",
           "unpack_nv12", "quantize", "dequantize", "tensor_layout"]

# hbDNNDataType names (docs/horizon.md §2), identified by name, never by number.
_NUMPY = {"S8": np.int8, "U8": np.uint8, "S16": np.int16, "U16": np.uint16, "F16": np.float16, "S32": np.int32,
          "U32": np.uint32, "F32": np.float32, "S64": np.int64, "U64": np.uint64, "F64": np.float64}
ELEMENT_SIZE = {name: np.dtype(t).itemsize for name, t in _NUMPY.items()}  # bytes per element
_IMAGE_TYPES = ("IMG_TYPE_Y", "IMG_TYPE_NV12", "IMG_TYPE_NV12_SEPARATE", "Y", "NV12", "NV12_SEPARATE")


@dataclass(frozen=True)
class AlignmentRule:
    """An alignedShape rule (docs/horizon.md §4.3). Defaults are the published X3/X5 rule: byte
    extents rounded to ``256*k + r``, r in ``steps``; NHWC inputs with C <= ``small_c`` align H to
    ``small_c_h`` and W to ``small_c_w`` instead; NCHW aligns W. ``per_axis`` ({letter: ("elements"
    | "bytes", multiple)}), when given, replaces all of that with plain per-axis multiples."""

    name: str
    block: int = 256
    steps: tuple = (16, 32, 64, 128)
    small_c: int = 4
    small_c_h: int = 2
    small_c_w: int = 32
    small_c_pad_c: Optional[int] = None
    nchw_axis: str = "W"
    image_w_align: int = 16
    per_axis: Optional[dict] = field(default=None, hash=False)


ALIGNMENT_RULES = {"x3": AlignmentRule("x3"), "x5": AlignmentRule("x5")}


def register_alignment_rule(rule: AlignmentRule) -> None:
    """Make ``rule`` available by name to :func:`aligned_shape` (a generation's real rule, once
    known). Raises TypeError for anything but an AlignmentRule."""
    if not isinstance(rule, AlignmentRule):
        raise TypeError(f"rule: expected an AlignmentRule, got {type(rule).__name__}")
    ALIGNMENT_RULES[rule.name] = rule


def _rule(rule) -> AlignmentRule:
    if isinstance(rule, AlignmentRule):
        return rule
    try:
        return ALIGNMENT_RULES[rule]
    except (KeyError, TypeError):
        raise ValueError(f"rule: unknown alignment rule {rule!r}; registered: {sorted(ALIGNMENT_RULES)}") from None


def numpy_dtype(value, arg: str = "dtype") -> np.dtype:
    """The NumPy dtype of an element type (docs/horizon.md §2), as every function here reads one.

    ``value`` is an hbDNNDataType name ("S8", "U8", "F16", ..., with or without the
    ``HB_DNN_TENSOR_TYPE_`` prefix, any case; read before NumPy would take "S8" for an 8-byte
    string and "U8" for unicode) or a NumPy integer or float dtype ("int8", ``np.float16``).
    Returns a ``numpy.dtype`` of 1, 2, 4 or 8 bytes. Raises UnsupportedError for 4-bit types
    (S4, U4); ValueError for any other string that names neither; TypeError for None or a
    dtype that is not integer or float. ``arg`` names the argument in the messages."""
    # hbDNNDataType names first: NumPy would read "S8" as an 8-byte string and "U8" as unicode.
    if isinstance(value, str):
        key = value.upper().replace("TENSOR_TYPE_", "").replace("HB_DNN_", "")
        if key in ("S4", "U4"):
            raise UnsupportedError(f"{arg}: {value} (4-bit) tensors are not supported (docs/horizon.md §2)")
        if key in _NUMPY:
            return np.dtype(_NUMPY[key])
    if value is None:  # np.dtype(None) would be float64
        raise TypeError(f"{arg}: an element type is required (an hbDNNDataType name or a NumPy dtype)")
    try:
        dt = np.dtype(value)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.kind not in "iuf":
        kind = ValueError if isinstance(value, str) else TypeError
        raise kind(f"{arg}: {value!r} is neither an hbDNNDataType name {sorted(ELEMENT_SIZE)} nor a NumPy integer "
                   "or float dtype") from None
    return dt


def _elem_size(value, arg: str = "dtype") -> int:
    return numpy_dtype(value, arg).itemsize


def align_bpu_bytes(n: int, *, block: int = 256, steps=(16, 32, 64, 128)) -> int:
    """Round a byte extent up to the smallest ``block*k + r`` with r in ``steps`` or 0
    (docs/horizon.md §4.1): 16, 32, 64, 128, 256, 272, 288, 320, 384, 512, ... (bytes). Raises ValueError for n < 1,
    a ``block`` < 1 or a step outside 1..block-1; TypeError for a non-integer n, block or step."""
    n = check_int(n, "n")
    if n < 1:
        raise ValueError(f"n: a byte extent must be >= 1, got {n}")
    if check_int(block, "block") < 1:
        raise ValueError(f"block: must be >= 1, got {block}")
    steps = [check_int(s, "steps") for s in steps]
    if any(not 1 <= s < block for s in steps):
        raise ValueError(f"steps: each must be in 1..{block - 1} (below block), got {steps}")
    k, rem = divmod(n, block)
    if rem == 0:
        return n
    for s in sorted(steps):
        if rem <= s:
            return block * k + s
    return block * (k + 1)


def tensor_layout(layout) -> str:
    """Normalise a tensorLayout (docs/horizon.md §4.2): "NHWC" / "NCHW", any case, or the
    HB_DNN_LAYOUT_* names; returns "NHWC" or "NCHW". Raises UnsupportedError for NONE or anything
    else (the alignment rule is defined for those two layouts only)."""
    key = str(layout).upper().replace("HB_DNN_LAYOUT_", "")
    if key in ("NHWC", "NCHW"):
        return key
    raise UnsupportedError(f"layout: {layout!r}; the alignment rule is defined for NHWC and NCHW tensors only "
                           "(docs/horizon.md §4.2)")


@registry_words("horizon.aligned_shape")
def aligned_shape(valid_shape, dtype, *, layout: str = "NHWC", role: str = "input", tensor_type=None,
                  rule="x3") -> tuple:
    """Predict ``alignedShape`` from ``validShape`` (docs/horizon.md §4.2).

    Parameters
    ----------
    valid_shape : 4 ints, in ``layout`` order
    dtype : NumPy dtype or hbDNNDataType name ("S8", "S32", ...)
    layout : "NHWC" or "NCHW"
    role : "input" or "output"
    tensor_type : optional; NV12 / Y image types are not aligned by shape (use :func:`pack_nv12`)
    rule : a registered name ("x3", "x5") or an :class:`AlignmentRule`
        Also given as ``target=``, the registry's word (docs/formats.md §3.1); ``rule`` is the older
        spelling, kept as an alias for one release.

    Returns
    -------
    tuple of 4 ints (elements). A predictor: when the model reports ``stride``/``alignedShape``,
    use those.

    Raises
    ------
    UnsupportedError
        Rank != 4, layout NONE, 4-bit types, image types.
    ValueError
        Unknown rule, role or type name; dims < 1.
    TypeError
        ``dtype`` / ``tensor_type`` neither a type name nor a NumPy integer or float dtype.
    """
    if tensor_type is not None and str(tensor_type).upper().replace("HB_DNN_", "") in _IMAGE_TYPES:
        raise UnsupportedError(f"tensor_type: {tensor_type} images are laid out by row stride only; use pack_nv12 "
                               "(docs/horizon.md §5)")
    es = _elem_size(tensor_type, "tensor_type") if tensor_type is not None else _elem_size(dtype)
    layout = tensor_layout(layout)
    if role not in ("input", "output"):
        raise ValueError(f"role: 'input' or 'output', got {role!r}")
    a = list(check_dims(valid_shape, "valid_shape"))
    if len(a) != 4:
        raise UnsupportedError(f"valid_shape: the rule is defined for 4-D tensors, got {len(a)} dims (docs/horizon.md §4.2)")
    r = _rule(rule)

    def bytes_aligned(e):
        return align_bpu_bytes(e * es, block=r.block, steps=r.steps) // es

    if r.per_axis:
        for letter, (unit, m) in r.per_axis.items():
            i = layout.index(letter.upper())
            if unit == "elements":
                a[i] = -(-a[i] // m) * m
            else:
                e = a[i]
                while (e * es) % m:
                    e += 1
                a[i] = e
        return tuple(a)
    if layout == "NHWC":
        c = a[3]
        if role == "output" or c > r.small_c:
            a[3] = bytes_aligned(c)
        else:
            a[1] = -(-a[1] // r.small_c_h) * r.small_c_h
            a[2] = -(-a[2] // r.small_c_w) * r.small_c_w
            if r.small_c_pad_c:
                a[3] = -(-c // r.small_c_pad_c) * r.small_c_pad_c
    else:
        i = layout.index(r.nchw_axis)
        a[i] = bytes_aligned(a[i])
    return tuple(a)


def strides(shape, dtype) -> tuple:
    """Row-major byte strides of ``shape`` (elements, any rank) for ``dtype`` (NumPy dtype or
    hbDNNDataType name): the strides of an alignedShape (docs/horizon.md §3). Returns a tuple of ints,
    bytes. Raises UnsupportedError for 4-bit types, ValueError for unknown type names, TypeError
    for a dtype that is not integer or float."""
    es = _elem_size(dtype)
    out, acc = [], es
    for v in reversed(check_dims(shape, "shape")):
        out.append(acc)
        acc *= v
    return tuple(reversed(out))


@dataclass(frozen=True)
class TensorProperties:
    """The parts of ``hbDNNTensorProperties`` npupack uses (docs/horizon.md §2). Only ``valid_shape`` is
    required; ``stride`` (bytes) wins over ``aligned_shape``."""

    valid_shape: tuple
    tensor_type: str = "S8"
    tensor_layout: Optional[str] = "NHWC"
    aligned_shape: Optional[tuple] = None
    stride: Optional[tuple] = None
    aligned_byte_size: Optional[int] = None
    quanti_type: str = "NONE"
    shift: Optional[tuple] = None
    scale: Optional[tuple] = None
    zero_point: Optional[tuple] = None
    quantize_axis: Optional[int] = None


def _plain_ints(v) -> bool:
    return v is None or (type(v) is tuple and _INT.issuperset(map(type, v)))


_INT = frozenset((int,))


def _byte_strides(valid_shape, es, stride, aligned):
    # The same tensor is padded or stripped on every inference: its checks are cached, but only
    # for plain int tuples (a float 32.0 hashes like 32 and must still be refused).
    if _plain_ints(valid_shape) and _plain_ints(stride) and _plain_ints(aligned):
        return _checked_strides(valid_shape, es, stride, aligned)
    return _check_strides(valid_shape, es, stride, aligned)


@lru_cache(maxsize=1024)
def _checked_strides(valid_shape, es, stride, aligned):
    return _check_strides(valid_shape, es, stride, aligned)


def _check_strides(valid_shape, es, stride, aligned):
    valid = check_dims(valid_shape, "valid_shape")
    if stride is not None:
        st = tuple(check_int(v, "stride") for v in stride)
        if len(st) != len(valid):
            raise LayoutError(f"stride: {len(st)} entries for a {len(valid)}-d validShape {valid}")
        if any(s < 0 for s in st):
            raise LayoutError(f"stride: {st} has a negative entry; replace the runtime's -1 (dynamic dims) with "
                              "actual byte strides first (docs/horizon.md §6)")
    elif aligned is not None:
        al = check_dims(aligned, "aligned_shape")
        if len(al) != len(valid) or any(a < v for a, v in zip(al, valid)):
            raise LayoutError(f"aligned_shape: {al} must have the rank of and be >= validShape {valid}")
        st = strides(al, np.dtype(f"u{es}") if es in (1, 2, 4, 8) else np.uint8)
    else:
        raise ValueError("stride / aligned_shape: one of them is required (the model's byte strides, or its "
                         "alignedShape; aligned_shape() predicts the latter)")
    # docs/horizon.md §3: stride[k] >= stride[k+1] * valid[k+1] over the axes of extent > 1 (no overlap)
    axes = [d for d in range(len(valid)) if valid[d] > 1]
    for a, b in zip(axes, axes[1:]):
        if st[a] < st[b] * valid[b]:
            raise LayoutError(f"stride: {st} overlaps: stride[{a}] = {st[a]} < stride[{b}] * validShape[{b}] = "
                              f"{st[b] * valid[b]} (docs/horizon.md §3)")
    if axes and st[axes[-1]] < es:
        raise LayoutError(f"stride: innermost stride {st[axes[-1]]} is smaller than the element size {es}")
    return valid, st


def nbytes(valid_shape, dtype, *, stride=None, aligned_shape=None, aligned_byte_size=None) -> int:
    """Bytes of the aligned buffer: ``aligned_byte_size`` when given (the model's figure), else
    ``max_d stride[d] * validShape[d]`` (docs/horizon.md §3). ``stride`` in bytes, ``aligned_shape`` in
    elements, one of them required. Raises LayoutError for bad/overlapping strides or an
    ``aligned_byte_size`` smaller than the strides address, TypeError for a non-integer one,
    ValueError when neither is given."""
    es = _elem_size(dtype)
    valid, st = _byte_strides(valid_shape, es, stride, aligned_shape)
    return _buffer_bytes(valid, st, es, aligned_byte_size)


def _buffer_bytes(valid, st, es: int, aligned_byte_size) -> int:
    """The buffer's bytes: the model's ``aligned_byte_size`` when given (an integer, at least the
    bytes the strides address), else the bytes the strides address (docs/horizon.md §3)."""
    addressed = max(max((s * v for s, v in zip(st, valid)), default=es), es)
    if aligned_byte_size is None:
        return addressed
    aligned_byte_size = check_int(aligned_byte_size, "aligned_byte_size")
    if aligned_byte_size < addressed:
        raise LayoutError(f"aligned_byte_size: {aligned_byte_size} is smaller than the {addressed} bytes the strides "
                          "address")
    return aligned_byte_size


@lru_cache(maxsize=1024)
def _descriptor(valid, st, dtype):
    # Cached: the same tensor is padded or stripped on every inference.
    names = [f"d{i}" for i in range(len(valid))]
    return strided_layout([Dim(n, v) for n, v in zip(names, valid)],
                          {(n, 0): s for n, s in zip(names, st)}, dtype)


@gate("x")
def pad(x, *, stride=None, aligned_shape=None, aligned_byte_size=None, out=None) -> np.ndarray:
    """Write ``x`` (validShape, any numeric dtype) into the padded BPU buffer (docs/horizon.md §6):
    element ``idx`` at ``sum(idx * stride)`` bytes, zeros everywhere else (the BPU requires 0).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    ``stride`` (bytes, the model's) wins over ``aligned_shape``; one is required. Returns 1-D uint8
    of :func:`nbytes` bytes (or fills the first that many bytes of ``out``). Raises LayoutError for
    overlapping/negative strides, a too-small ``out`` or an ``aligned_byte_size`` smaller than the
    strides address, TypeError for a non-integer ``aligned_byte_size``, ValueError when neither
    ``stride`` nor ``aligned_shape`` is given."""
    arr = x if type(x) is np.ndarray and x.dtype.byteorder not in _BIG_ENDIAN else little_endian(np.asarray(x))
    dtype = arr.dtype
    if dtype.kind not in "biuf" or dtype.itemsize not in (1, 2, 4, 8):
        raise TypeError(f"x: dtype {dtype} cannot be padded")
    plan = None
    if aligned_byte_size is None or type(aligned_byte_size) is int:
        key = (arr.shape, dtype, stride, aligned_shape, aligned_byte_size)
        try:
            plan = _PAD_PLANS.get(key)
        except TypeError:  # an unhashable stride or aligned_shape: refused by the checks below
            key = None
        if plan is None or not (plan[0] is stride and plan[1] is aligned_shape):
            # Equal floats share a key (32.0 == 32): a plan made from other objects serves plain
            # int tuples only.
            if key is None or not (_plain_ints(stride) and _plain_ints(aligned_shape)):
                plan = None
            elif plan is None:
                plan = remember(_PAD_PLANS, key, _pad_plan(arr.shape, dtype, stride, aligned_shape,
                                                           aligned_byte_size), _MAX_PAD_PLANS)
    if plan is None:
        plan = _pad_plan(arr.shape, dtype, stride, aligned_shape, aligned_byte_size)
    _, _, total, core, meaningful = plan
    if out is None:
        buf = empty_lines(total)
    else:
        buf = check_out(out, total)
        if buf.size != total:
            buf = buf[:total]
    core.pack(arr, buf)
    if total > meaningful:
        buf[meaningful:] = 0
    return buf


# pad's plans: the same tensor is padded on every inference, and the checks and the size cost
# as much as the copy of a small tensor.
_PAD_PLANS: dict = {}
_MAX_PAD_PLANS = 1024


def _pad_plan(shape, dtype, stride, aligned_shape, aligned_byte_size) -> tuple:
    """``(stride, aligned_shape, buffer bytes, the descriptor's engine layout, bytes it
    addresses)`` of pad, after every check of the arguments."""
    valid, st = _byte_strides(shape, dtype.itemsize, stride, aligned_shape)
    desc = _descriptor(valid, st, dtype)
    return stride, aligned_shape, _buffer_bytes(valid, st, dtype.itemsize, aligned_byte_size), desc._core, desc.nbytes


@gate("buf")
def strip(buf, valid_shape, dtype, *, stride=None, aligned_shape=None) -> np.ndarray:
    """Read the valid tensor out of an aligned BPU buffer: the inverse of :func:`pad` (docs/horizon.md §3, 6).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    buf : numpy.ndarray of uint8
        The aligned buffer, at least the bytes the strides address (bytes outside the valid
        elements are ignored). Not modified.
    valid_shape : sequence of int
        ``validShape`` in elements, in the tensor's layout order (e.g. N,H,W,C for NHWC).
    dtype : hbDNNDataType name or NumPy dtype
        Element type, read by :func:`numpy_dtype` ("S8", "HB_DNN_TENSOR_TYPE_F16", "int8", ...).
    stride : sequence of int, optional
        The model's byte strides, one per axis; wins over ``aligned_shape``.
    aligned_shape : sequence of int, optional
        ``alignedShape`` in elements (row-major strides of it); one of the two is required.

    Returns
    -------
    numpy.ndarray
        A new C-contiguous array of ``valid_shape`` and ``dtype`` (``prod(valid_shape) *
        itemsize`` bytes).

    Raises
    ------
    LayoutError
        A buffer shorter than the strides address; negative or overlapping strides; an
        ``aligned_shape`` of another rank than or smaller than ``valid_shape``.
    TypeError
        ``buf`` not uint8; a ``dtype`` that is None or not integer / float; non-integer strides.
    ValueError
        Neither ``stride`` nor ``aligned_shape``; an unknown type name.
    UnsupportedError
        4-bit types (S4, U4).
    """
    dtype = numpy_dtype(dtype)
    valid, st = _byte_strides(valid_shape, dtype.itemsize, stride, aligned_shape)
    data = np.asarray(buf)
    if data.dtype != np.uint8:
        raise TypeError(f"buf: expected uint8 bytes, got {data.dtype}")
    desc = _descriptor(valid, st, dtype)
    return desc.unpack(np.ascontiguousarray(data).reshape(-1))


def _row_stride(w: int, w_align, rule) -> int:
    """Bytes per NV12 row: W rounded up to ``w_align`` (an integer >= 1) or the rule's."""
    if w_align is None:
        a = _rule(rule).image_w_align
    else:
        a = check_int(w_align, "w_align")
        if a < 1:
            raise ValueError(f"w_align: the row alignment must be >= 1 byte, got {a}")
    return -(-w // a) * a


@registry_words("horizon.pack_nv12")
@gate("y", "uv")
def pack_nv12(y, uv, *, w_align=None, rule="x3", separate=False):
    """NV12 planes (docs/horizon.md §5): ``y`` (H, W) and ``uv`` (H/2, W/2, 2) uint8 -> one buffer of
    ``H*Ws*3/2`` bytes (Y rows of ``Ws`` bytes, then interleaved UV rows), or ``(y_buf, uv_buf)``
    with ``separate=True``. ``Ws = align(W, w_align or rule.image_w_align)`` (16 on X3/X5, pass
    32 for J6/S100); row tails are 0; ``target=`` is the registry's word for ``rule`` (docs/formats.md
    §3.1). Raises LayoutError for odd H/W or mismatched planes,
    TypeError for planes that are not uint8, a ``separate`` that is not a bool or a ``w_align``
    that is not an integer, ValueError for a ``w_align`` < 1.

    An input changed by another thread during the call gives undefined values in the result, never a crash.
    """
    separate = check_bool(separate, "separate")
    y, uv = np.asarray(y), np.asarray(uv)
    if y.dtype != np.uint8 or uv.dtype != np.uint8:
        raise TypeError(f"y, uv: NV12 planes are uint8, got {y.dtype}, {uv.dtype}")
    if y.ndim != 2:
        raise LayoutError(f"y: expected (H, W), got shape {y.shape}")
    h, w = y.shape
    if h % 2 or w % 2:
        raise LayoutError(f"y: NV12 needs even H and W, got {h}x{w} (docs/horizon.md §5)")
    if uv.shape != (h // 2, w // 2, 2):
        raise LayoutError(f"uv: expected ({h // 2}, {w // 2}, 2) for a {h}x{w} image, got {uv.shape}")
    ws = _row_stride(w, w_align, rule)
    ybuf = pad(y, stride=(ws, 1), aligned_byte_size=h * ws)
    uvbuf = pad(uv, stride=(ws, 2, 1), aligned_byte_size=(h // 2) * ws)
    if separate:
        return ybuf, uvbuf
    return np.concatenate([ybuf, uvbuf])


@registry_words("horizon.unpack_nv12")
@gate("buf", "uv_buf")
def unpack_nv12(buf, height: int, width: int, *, w_align=None, rule="x3", uv_buf=None):
    """Inverse of :func:`pack_nv12`: returns ``(y, uv)``, uint8 ``(H, W)`` and ``(H/2, W/2, 2)``
    (docs/horizon.md §5). Give the UV plane as ``uv_buf`` for NV12_SEPARATE buffers; ``target=`` is the
    registry's word for ``rule`` (docs/formats.md §3.1). Raises LayoutError
    for odd sizes, sizes < 2 or buffers shorter than their planes, TypeError for a height, width
    or ``w_align`` that is not an integer, ValueError for a ``w_align`` < 1.

    An input changed by another thread during the call gives undefined values in the result, never a crash.
    """
    height, width = check_int(height, "height"), check_int(width, "width")
    if height < 2 or width < 2:
        raise LayoutError(f"height/width: an NV12 image is at least 2x2, got {height}x{width}")
    if height % 2 or width % 2:
        raise LayoutError(f"height/width: NV12 needs even sizes, got {height}x{width}")
    ws = _row_stride(width, w_align, rule)
    data = np.asarray(buf).reshape(-1)
    y = strip(data, (height, width), np.uint8, stride=(ws, 1))
    uv_src = np.asarray(uv_buf).reshape(-1) if uv_buf is not None else data[height * ws:]
    uv = strip(uv_src, (height // 2, width // 2, 2), np.uint8, stride=(ws, 2, 1))
    return y, uv


_RANGES = {np.dtype(t): (np.iinfo(t).min, np.iinfo(t).max) for t in (np.int8, np.uint8, np.int16, np.uint16,
                                                                       np.int32, np.uint32, np.int64, np.uint64)}


def _params(properties, quanti_type, shift, scale, zero_point, axis):
    if properties is not None:
        if not isinstance(properties, TensorProperties):
            raise TypeError(f"properties: expected an npupack.horizon.TensorProperties, got "
                            f"{type(properties).__name__}")
        return (properties.quanti_type, properties.shift, properties.scale, properties.zero_point,
                properties.quantize_axis)
    return quanti_type, shift, scale, zero_point, axis


def _quanti_type(qt) -> str:
    """hbDNNQuantiType by name (docs/horizon.md §2, 9: names only, not the enum numbers); None is NONE."""
    if qt is None:
        return "NONE"
    if not isinstance(qt, str):
        raise TypeError(f"quanti_type: expected the name 'NONE', 'SHIFT' or 'SCALE' (not the enum number; "
                        f"docs/horizon.md §2, 9), got {qt!r}")
    if qt.upper() not in ("NONE", "SHIFT", "SCALE"):
        raise ValueError(f"quanti_type: {qt!r} is not NONE, SHIFT or SCALE (docs/horizon.md §2)")
    return qt.upper()


def _along(values, ndim, axis, name):
    if values is None:
        raise ValueError(f"{name}: required by this quanti_type (docs/horizon.md §7)")
    if axis is not None:
        check_int(axis, "axis")
    v = np.asarray(values, dtype=np.float64)
    if v.size <= 1:
        return v.reshape(())
    if axis is None or axis < 0:
        raise ValueError(f"{name}: {v.size} values need a non-negative quantize axis")
    if axis >= ndim:
        raise ValueError(f"axis: {axis} is out of range for a {ndim}-d tensor")
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def _shift(shift, ndim, axis):
    """SHIFT parameters: whole numbers in 0..255 (``uint8 *shiftData``, docs/horizon.md §2)."""
    return check_whole(_along(shift, ndim, axis, "shift"), "shift", " (docs/horizon.md §7)", 0, 255)


def _scale_zero_point(scale, zp, ndim, axis):
    """SCALE parameters: scales finite and nonzero, zero points whole numbers of int32."""
    sc = _along(scale, ndim, axis, "scale")
    if not np.all(np.isfinite(sc) & (sc != 0)):
        raise ValueError(f"scale: must be finite and nonzero, got {scale!r} (docs/horizon.md §7)")
    z = check_whole(_along(zp if zp is not None else 0, ndim, axis, "zero_point"), "zero_point", " (docs/horizon.md §7)",
                    -2**31, 2**31 - 1)
    return sc, z


@gate("q")
def dequantize(q, *, quanti_type=None, shift=None, scale=None, zero_point=None, axis=None, properties=None):
    """int -> float32 (docs/horizon.md §7): SHIFT ``q / 2**shift[k]``, SCALE ``(q - zp[k]) * scale[k]``
    (subtraction in integers), NONE: float32(q). ``k`` runs along ``axis`` when the parameters
    have more than one value. Parameters may come from ``properties`` (TensorProperties).
    Returns float32 of ``q``'s shape. Raises ValueError for an unknown quanti_type, a missing
    parameter, per-axis parameters without a valid axis, a shift that is not a whole number in
    0..255, a scale that is zero or not finite, a zero point that is not a whole int32; TypeError
    for a ``q`` that is not numbers, an ``axis`` that is not an integer or a ``quanti_type``
    that is not a name (None means NONE).

    An input changed by another thread during the call gives undefined values in the result, never a crash.
    """
    qt, shift, scale, zp, axis = _params(properties, quanti_type, shift, scale, zero_point, axis)
    arr = np.asarray(q)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"q: expected numbers, got {arr.dtype}")
    qt = _quanti_type(qt)
    if qt == "NONE":
        return arr.astype(np.float32)
    if qt == "SHIFT":
        s = _shift(shift, arr.ndim, axis)
        return (arr.astype(np.float32) * np.exp2(-s).astype(np.float32)).astype(np.float32)
    sc, z = _scale_zero_point(scale, zp, arr.ndim, axis)  # SCALE
    return ((arr.astype(np.int64) - z.astype(np.int64)).astype(np.float32) * sc.astype(np.float32)).astype(
        np.float32)


@gate("x")
def quantize(x, *, dtype=None, quanti_type=None, shift=None, scale=None, zero_point=None, axis=None,
             rounding="nearest_even", properties=None):
    """float -> int of ``dtype`` (docs/horizon.md §7): SHIFT ``sat(round(x * 2**shift[k]))``, SCALE
    ``sat(round(x / scale[k] + zp[k]))``; computed in float64, rounded half to even (or
    "nearest_away"), always saturated to the type's range (+-inf too). Returns ``dtype`` of
    ``x``'s shape. Raises ValueError for a missing dtype or parameter, bad rounding or
    quanti_type, a shift that is not a whole number in 0..255, a scale that is zero or not finite,
    a zero point that is not a whole int32, and a NaN in ``x`` (it has no integer; casting would
    give an arbitrary one); TypeError for a non-integer dtype or ``axis`` and a ``quanti_type``
    that is not a name (None means NONE).

    An input changed by another thread during the call gives undefined values in the result, never a crash.
    """
    qt, shift, scale, zp, axis = _params(properties, quanti_type, shift, scale, zero_point, axis)
    if dtype is None and properties is not None:
        dtype = properties.tensor_type
    if dtype is None:
        raise ValueError("dtype: the integer type to produce is required")
    dtype = numpy_dtype(dtype)
    if dtype not in _RANGES:
        raise TypeError(f"dtype: quantize produces integers, got {dtype}")
    if rounding not in ("nearest_even", "nearest_away"):
        raise ValueError(f"rounding: {rounding!r} is not 'nearest_even' or 'nearest_away'")
    arr = np.asarray(x, dtype=np.float64)
    qt = _quanti_type(qt)
    if qt == "SHIFT":
        v = arr * np.exp2(_shift(shift, arr.ndim, axis))
    elif qt == "SCALE":
        sc, z = _scale_zero_point(scale, zp, arr.ndim, axis)
        v = arr / sc + z
    else:  # NONE
        v = arr
    check_no_nan(arr, "x")
    v = np.rint(v) if rounding == "nearest_even" else np.sign(v) * np.floor(np.abs(v) + 0.5)
    lo, hi = _RANGES[dtype]
    return np.clip(v, lo, hi).astype(dtype)
