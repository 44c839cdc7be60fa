"""NVDLA SDP auxiliary data: bias, PReLU, batch-norm and element-wise operands (docs/nvdla.md §12),
and nvdla/sw's int16 quantisation of bias and rescale factors.

All four formats are one operand layout. An operand has 1 or 2 components (ALU and/or MUL) of
``data_size`` bytes each; ``E = atom_elements(precision)`` elements share an atom:

* per layer: no memory, the register value of each component;
* per channel ``(C,)``: component ``j`` of channel ``c`` at byte ``c*eb + j*data_size``,
  ``eb = components * data_size``, zero-padded to ``roundup(C, E) * eb`` bytes;
* per element ``(C, H, W)``: the feature layout with ``A = E`` and element size ``eb``,
  ``address = (c//E)*surface_stride + h*line_stride + w*E*eb + (c%E)*eb``.

The pair order is ALU first, then MUL.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import numpy as np

from npupack._gate import gate
from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import BlockedLayout, Dim, as_byte_buffer, check_bool, check_out, is_int, little_endian
from npupack.nvdla.config import NV_FULL, PRECISIONS, Config, check_config
from npupack.nvdla.convert import _TARGET_DTYPE, _check_rounding, convert_elements

__all__ = ["USES", "bytes_per_atom", "SdpOperand", "pack_bias", "pack_prelu", "pack_batchnorm", "pack_eltwise",
           "unpack_sdp", "quantize_bias", "factorize_scales"]

#: Components of each operand use (docs/nvdla.md §12.1).
USES = {"bias": 1, "prelu": 1, "scale": 1, "eltwise_alu": 1, "eltwise_mul": 1, "batchnorm": 2, "eltwise_both": 2,
        "bias_rescale": 2}
MODES = ("per_layer", "per_channel", "per_element")


def _data_size(data_size, precision: str, default: int) -> int:
    if data_size is None:
        data_size = 2 if precision == "fp16" else default
    if data_size not in (1, 2) or isinstance(data_size, bool):
        raise ValueError(f"data_size: 1 or 2 bytes, got {data_size!r} (docs/nvdla.md §12.1)")
    if precision == "fp16" and data_size != 2:
        raise ValueError("data_size: fp16 operands are 2 bytes (docs/nvdla.md §12.1)")
    return int(data_size)


def bytes_per_atom(precision: str, use: str, data_size: int, config: Config = NV_FULL) -> int:
    """BytesPerAtom of NVDLA's hardware documentation: ``E * components(use) * data_size`` (docs/nvdla.md §12.1).

    ``precision`` is the SDP processing precision ("int8", "int16", "fp16"; E =
    ``config.atom_elements(precision)``), ``use`` one of :data:`USES`, ``data_size`` 1 or 2
    bytes per component. Returns bytes. Raises ValueError for an unknown use or precision or a
    bad data size, UnsupportedError for a precision the config lacks."""
    if use not in USES:
        raise ValueError(f"use: {use!r} is not one of {tuple(USES)} (docs/nvdla.md §12.1)")
    _check_precision(precision, config)
    return config.atom_elements(precision) * USES[use] * _data_size(data_size, precision, 2)


def _pipeline(precision, pipeline) -> str:
    """``pipeline=`` is another name for the processing precision ``precision=``."""
    if pipeline is None:
        if precision is None:
            raise TypeError("precision: give the SDP processing precision (precision= or pipeline=)")
        return precision
    if precision is not None and precision != pipeline:
        raise ValueError(f"pipeline: {pipeline!r} contradicts precision={precision!r}; both name the processing "
                         "precision")
    return pipeline


def _check_precision(precision, config: Config) -> None:
    check_config(config)
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {PRECISIONS} (the SDP processing precision)")
    config.require_precision(precision)


@dataclass(frozen=True, eq=False)
class SdpOperand:
    """One packed SDP operand (docs/nvdla.md §12.2).

    Attributes
    ----------
    data : numpy.ndarray or None
        uint8 surface (``nbytes`` bytes); None for per-layer operands.
    registers : tuple of int or None
        Per-layer operands: the raw 16-bit register value of each component (two's complement
        for integers, fp16 bits), ALU first; None otherwise.
    use, mode, precision : str
    components, data_size, elements_per_atom : int
        ``eb = components * data_size`` bytes per element; ``E = elements_per_atom``.
    shape : tuple
        ``()``, ``(C,)`` or ``(C, H, W)``.
    line_stride, surface_stride : int or None
        Per-element operands, bytes.
    config : Config
    """

    data: Optional[np.ndarray]
    registers: Optional[tuple]
    use: str
    mode: str
    precision: str
    components: int
    data_size: int
    elements_per_atom: int
    shape: tuple
    config: Config
    line_stride: Optional[int] = None
    surface_stride: Optional[int] = None

    @property
    def element_bytes(self) -> int:
        return self.components * self.data_size

    @property
    def nbytes(self) -> int:
        """Bytes of the surface (0 for per-layer operands)."""
        return 0 if self.data is None else int(self.data.size)

    @property
    def alignment_kind(self) -> str:
        """The alignment table row of this operand (docs/nvdla.md §15)."""
        return {"prelu": "prelu", "batchnorm": "batchnorm"}.get(self.use, "eltwise" if self.use.startswith(
            "eltwise") else "bias")


def _element_precision(precision: str, data_size: int) -> str:
    return "fp16" if precision == "fp16" else ("int8" if data_size == 1 else "int16")


def _convert(values, precision, data_size, name, rounding, saturate) -> np.ndarray:
    arr = little_endian(values if type(values) is np.ndarray else np.asarray(values))
    target = _element_precision(precision, data_size)
    if arr.dtype is _TARGET_DTYPE[target] and target != "fp16":  # the per-call fast path: nothing to convert
        return arr
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name}: expected a real array, got dtype {arr.dtype}")
    if target != "fp16" and arr.dtype.kind == "f":
        raise TypeError(f"{name}: float operands for an integer ({precision}) pipeline must be quantised first "
                        "(npupack.nvdla.quantize_bias / factorize_scales, or pass integers; docs/nvdla.md §12.1)")
    if arr.dtype.kind in "iu" and arr.dtype.itemsize > 2:
        info = np.iinfo(_TARGET_DTYPE[target]) if target != "fp16" else None
        if info is not None and arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise ValueError(f"{name}: values outside [{info.min}, {info.max}] do not fit {data_size}-byte "
                             f"{target} components (docs/nvdla.md §12.1)")
        arr = arr.astype(np.int64 if target == "fp16" else _TARGET_DTYPE[target])
        if target == "fp16":
            arr = arr.astype(np.float64)
    return convert_elements(arr, target, what=name, rounding=rounding, saturate=saturate)


def _components(parts, precision, data_size, rounding, saturate) -> list:
    """Convert the given components (ALU first); all must have one shape."""
    conv = [_convert(v, precision, data_size, name, rounding, saturate) for name, v in parts]
    shape = conv[0].shape
    for (name, _), c in zip(parts, conv):
        if c.shape != shape:
            raise LayoutError(f"{name}: shape {c.shape} differs from {parts[0][0]}'s {shape}")
    return conv


_SHAPES = {"per_layer": (0, "()"), "per_channel": (1, "(C,)"), "per_element": (3, "(C, H, W)")}


@lru_cache(maxsize=256)
def _element_layout(c, h, w, k, e, dtype, line_stride, surface_stride) -> BlockedLayout:
    return BlockedLayout(
        [Dim("C", c, (e,)), Dim("H", h), Dim("W", w), Dim("K", k)],
        [("C", 0), ("H", 0), ("W", 0), ("C", 1), ("K", 0)], dtype,
        {("C", 0): surface_stride, ("H", 0): line_stride})


def element_strides(shape, *, e: int, eb: int, config: Config, line_stride=None, surface_stride=None):
    """``(line_stride, surface_stride, nbytes)`` in bytes of a per-element operand of logical
    shape ``(C, H, W)`` with ``e`` elements per atom of ``eb`` bytes each (docs/nvdla.md §12.2).
    Default line stride ``roundup(W*e*eb, atom)``, surface stride ``H*line``. Raises
    LayoutError for a stride that is not a positive multiple of the atom or is too small."""
    c, h, w = shape
    atom = config.atom_bytes
    row = w * e * eb
    for name, v in (("line_stride", line_stride), ("surface_stride", surface_stride)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0 or v % atom):
            raise LayoutError(f"{name}: {v!r} is not a positive multiple of the {atom}-byte atom (docs/nvdla.md §12.2)")
    ls = -(-row // atom) * atom if line_stride is None else int(line_stride)
    if ls < row:
        raise LayoutError(f"line_stride: {ls} bytes is smaller than W*E*eb = {w}*{e}*{eb} = {row} (docs/nvdla.md §12.2)")
    ss = h * ls if surface_stride is None else int(surface_stride)
    if ss < h * ls:
        raise LayoutError(f"surface_stride: {ss} bytes is smaller than H*line_stride = {h * ls} (docs/nvdla.md §12.2)")
    g = -(-c // e)
    return ls, ss, (g - 1) * ss + (h - 1) * ls + -(-row // atom) * atom


def _operand(parts, *, use, mode, precision, data_size, config, line_stride=None, surface_stride=None,
             rounding="nearest_even", saturate=True, out=None) -> SdpOperand:
    _check_precision(precision, config)
    if rounding != "nearest_even":
        _check_rounding(rounding)
    saturate = check_bool(saturate, "saturate")
    if mode not in _SHAPES:
        raise ValueError(f"mode: {mode!r} is not one of {MODES} (docs/nvdla.md §12.2)")
    comps = _components(parts, precision, data_size, rounding, saturate)
    shape = comps[0].shape
    k = len(comps)
    e = config.atom_elements(precision)
    eb = k * data_size
    ndim, text = _SHAPES[mode]
    if len(shape) != ndim:
        raise LayoutError(f"{parts[0][0]}: {mode} operands have shape {text}, got {shape} (docs/nvdla.md §12.2)")
    if 0 in shape:
        raise LayoutError(f"{parts[0][0]}: every dimension must be >= 1, got {shape}")
    if (line_stride is not None or surface_stride is not None) and mode != "per_element":
        raise LayoutError("line_stride / surface_stride: only per-element operands have strides (docs/nvdla.md §12.2)")
    fields = dict(use=use, mode=mode, precision=precision, components=k, data_size=data_size, elements_per_atom=e,
                  config=config, shape=shape, data=None, registers=None, line_stride=None, surface_stride=None)
    if mode == "per_layer":
        if out is not None:
            raise LayoutError("out: per-layer operands live in registers, not memory (docs/nvdla.md §12.2)")
        bits = [int(c.reshape(1).view(np.uint8 if data_size == 1 else np.uint16)[0]) for c in comps]
        if data_size == 1:  # sign-extended into the 16-bit register field
            bits = [b | 0xFF00 if b >= 0x80 else b for b in bits]
        fields["registers"] = tuple(bits)
    elif mode == "per_channel":
        c = shape[0]
        size = -(-c // e) * e * eb
        buf = check_out(out, size)[:size] if out is not None else np.empty(size, dtype=np.uint8)
        view = buf[:c * eb].view(comps[0].dtype).reshape(c, k)
        for j, comp in enumerate(comps):
            view[:, j] = comp
        buf[c * eb:] = 0
        fields["data"] = buf
    else:
        c, h, w = shape
        ls, ss, size = element_strides(shape, e=e, eb=eb, config=config, line_stride=line_stride,
                                       surface_stride=surface_stride)
        layout = _element_layout(c, h, w, k, e, comps[0].dtype, ls, ss)
        buf = check_out(out, size)[:size] if out is not None else np.empty(size, dtype=np.uint8)
        layout._pack_into(np.stack(comps, axis=-1), buf)
        if size > layout.nbytes:
            buf[layout.nbytes:] = 0
        fields.update(data=buf, line_stride=ls, surface_stride=ss)
    obj = object.__new__(SdpOperand)  # frozen: fields set once, without the generated __init__'s cost
    obj.__dict__.update(fields)
    return obj


@gate("data")
def unpack_sdp(operand: SdpOperand, data=None):
    """Read an SDP operand back (docs/nvdla.md §12.2).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    operand : SdpOperand
        As returned by a packer (its layout parameters are used).
    data : uint8 array or bytes, optional
        Bytes read back from memory instead of ``operand.data`` (at least ``nbytes``).

    Returns
    -------
    numpy.ndarray or tuple of numpy.ndarray
        One array per component (a tuple, ALU first, for pairs) of ``operand.shape``; int8,
        int16 or float16 by precision and data size. Per-layer operands are decoded from the
        register values.

    Raises
    ------
    TypeError
        ``operand`` is not an SdpOperand.
    ValueError
        An operand built by hand (from a manifest, say) whose fields do not describe one layout:
        a use, mode, precision or data size the packers refuse, ``components`` other than the
        use's, ``elements_per_atom`` other than the config's, a shape of the wrong rank, strides
        or a surface size other than the layout's (naming the field).
    LayoutError
        ``data`` shorter than ``operand.nbytes``.
    """
    if not isinstance(operand, SdpOperand):
        raise TypeError(f"operand: expected SdpOperand, got {type(operand).__name__}")
    _check_fields(operand)
    dtype = _TARGET_DTYPE[_element_precision(operand.precision, operand.data_size)]
    k = operand.components
    if operand.mode == "per_layer":
        regs = np.array(operand.registers, dtype=np.uint16)
        vals = regs.astype(np.uint8).view(np.int8) if operand.data_size == 1 else regs.view(dtype)
        vals = vals.astype(dtype)
        comps = [vals[j].reshape(()) for j in range(k)]
    else:
        buf = as_byte_buffer(operand.data if data is None else data, "data")
        if buf.size < operand.nbytes:
            raise LayoutError(f"data: holds {buf.size} bytes, {operand.nbytes} are needed")
        if operand.mode == "per_channel":
            c = operand.shape[0]
            arr = buf[:c * operand.element_bytes].view(dtype).reshape(c, k)
        else:
            c, h, w = operand.shape
            layout = _element_layout(c, h, w, k, operand.elements_per_atom, np.dtype(dtype), operand.line_stride,
                                     operand.surface_stride)
            arr = layout.unpack(buf)
        comps = [np.ascontiguousarray(arr[..., j]) for j in range(k)]
    return comps[0] if k == 1 else tuple(comps)


def _check_fields(op: SdpOperand) -> None:
    """ValueError naming the first field of ``op`` that is not what the packers give for its use,
    mode, precision, data size, shape, config and strides (docs/nvdla.md §12.1, 12.2): an operand
    rebuilt by hand with one of them wrong would unpack to other values without a word."""
    try:
        _check_precision(op.precision, op.config)
        if op.use not in USES:
            raise ValueError(f"use: {op.use!r} is not one of {tuple(USES)} (docs/nvdla.md §12.1)")
        if op.mode not in _SHAPES:
            raise ValueError(f"mode: {op.mode!r} is not one of {MODES} (docs/nvdla.md §12.2)")
        _data_size(op.data_size, op.precision, 2)
    except (ValueError, TypeError) as e:
        raise type(e)(f"operand.{e}") from None
    e = op.config.atom_elements(op.precision)
    ndim, text = _SHAPES[op.mode]
    expected = {"components": USES[op.use], "elements_per_atom": e}
    for name, value in expected.items():
        if getattr(op, name) != value:
            raise LayoutError(f"operand.{name}: {getattr(op, name)!r}, but {op.use} operands at {op.precision} on "
                              f"{op.config.name} have {value} (docs/nvdla.md §12.1)")
    if not isinstance(op.shape, tuple) or len(op.shape) != ndim or not all(
            is_int(d) and d >= 1 for d in op.shape):
        raise LayoutError(f"operand.shape: {op.mode} operands have shape {text} of dimensions >= 1, got "
                          f"{op.shape!r} (docs/nvdla.md §12.2)")
    if op.mode != "per_element" and (op.line_stride is not None or op.surface_stride is not None):
        raise LayoutError("operand.line_stride: only per-element operands have strides (docs/nvdla.md §12.2)")
    eb = op.components * op.data_size
    if op.mode == "per_layer":
        if op.data is not None or not isinstance(op.registers, tuple) or len(op.registers) != op.components or \
                not all(is_int(r) and 0 <= r <= 0xFFFF for r in op.registers):
            raise LayoutError(f"operand.registers: per-layer operands hold {op.components} 16-bit register values "
                              f"and no data, got registers={op.registers!r} (docs/nvdla.md §12.2)")
        return
    if op.mode == "per_channel":
        strides, size = (None, None), -(-op.shape[0] // e) * e * eb
    else:
        try:
            ls, ss, size = element_strides(op.shape, e=e, eb=eb, config=op.config, line_stride=op.line_stride,
                                           surface_stride=op.surface_stride)
        except ValueError as err:
            raise LayoutError(f"operand.{err}") from None
        strides = (ls, ss)
    if (op.line_stride, op.surface_stride) != strides:
        raise LayoutError(f"operand.line_stride: per-element operands record their strides, got "
                          f"{(op.line_stride, op.surface_stride)} (docs/nvdla.md §12.2)")
    if op.data is not None and as_byte_buffer(op.data, "operand.data").size != size:
        raise LayoutError(f"operand.data: {op.nbytes} bytes, but a {op.mode} {op.use} operand of shape {op.shape} is "
                          f"{size} (docs/nvdla.md §12.2)")


@gate("bias", "mul")
def pack_bias(bias, *, precision: Optional[str] = None, pipeline: Optional[str] = None, mode: str = "per_channel",
              data_size: Optional[int] = None, mul=None,
              config: Config = NV_FULL, line_stride=None, surface_stride=None, rounding: str = "nearest_even",
              saturate: bool = True, out=None) -> SdpOperand:
    """Pack a bias operand (ALU), or a bias + rescale pair with ``mul`` (docs/nvdla.md §12.3).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    bias : array_like
        ``()`` per layer, ``(C,)`` per channel, ``(C, H, W)`` per element. Integers for the
        int8/int16 pipelines (fitting ``data_size`` bytes; see :func:`quantize_bias`), any real
        dtype for fp16 (converted with ``to_fp16``). Not modified.
    precision, pipeline : {"int8", "int16", "fp16"}
        SDP processing precision (PROC_PRECISION; sets E = ``config.atom_elements(precision)``);
        either keyword (``pipeline="int8"`` reads as "the INT8 pipeline").
    mode : {"per_layer", "per_channel", "per_element"}
    data_size : 1 or 2, optional
        Bytes per component; default 2 (int16 operands also in the INT8 pipeline, as nvdla/sw).
    mul : array_like, optional
        Per-channel rescale factors (same shape): the operand becomes ``[b0, s0, b1, s1, ...]``.
    config : Config
    line_stride, surface_stride : int, optional, bytes
        Per-element strides (multiples of the atom).
    rounding, saturate
        fp16 conversion.
    out : numpy.ndarray of uint8, optional
        Buffer for the surface (at least ``nbytes``).

    Returns
    -------
    SdpOperand
        Per channel: ``roundup(C, E) * eb`` bytes, ``eb = components * data_size``; per element:
        ``(G-1)*surface_stride + (H-1)*line_stride + roundup(W*E*eb, atom)`` bytes; per layer:
        ``registers`` only.

    Raises
    ------
    TypeError
        Float operands for an integer pipeline; non-real dtypes.
    ValueError
        Integers that do not fit ``data_size``; bad mode, precision or data size.
    LayoutError
        Shape not matching ``mode``; bad strides; ``out`` too small.
    UnsupportedError
        A precision the config lacks.
    """
    precision = _pipeline(precision, pipeline)
    parts = [("bias", bias)] + ([("mul", mul)] if mul is not None else [])
    return _operand(parts, use="bias_rescale" if mul is not None else "bias", mode=mode, precision=precision,
                    data_size=_data_size(data_size, precision, 2), config=config, line_stride=line_stride,
                    surface_stride=surface_stride, rounding=rounding, saturate=saturate, out=out)


@gate("slope")
def pack_prelu(slope, *, precision: Optional[str] = None, pipeline: Optional[str] = None,
               data_size: Optional[int] = None, config: Config = NV_FULL,
               rounding: str = "nearest_even", saturate: bool = True, out=None) -> SdpOperand:
    """Pack PReLU slopes (docs/nvdla.md §12.4): always per channel, one MUL component.

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    ``slope`` is ``(C,)`` (integers for int8/int16 pipelines, fitting ``data_size``; any real
    dtype for fp16). Returns an SdpOperand of ``roundup(C, E) * data_size`` bytes. Errors as
    :func:`pack_bias`."""
    precision = _pipeline(precision, pipeline)
    return _operand([("slope", slope)], use="prelu", mode="per_channel", precision=precision,
                    data_size=_data_size(data_size, precision, 2), config=config, rounding=rounding,
                    saturate=saturate, out=out)


@gate("alu", "mul")
def pack_batchnorm(alu, mul, *, precision: Optional[str] = None, pipeline: Optional[str] = None,
                   mode: str = "per_channel", data_size: Optional[int] = None,
                   config: Config = NV_FULL, rounding: str = "nearest_even", saturate: bool = True,
                   out=None) -> SdpOperand:
    """Pack batch-norm operands as pairs, ALU first (docs/nvdla.md §12.5).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    ``alu`` and ``mul`` are ``(C,)`` (per channel: ``[alu0, mul0, alu1, mul1, ...]``, each
    ``data_size`` bytes, zero-padded to ``roundup(C, E) * 2 * data_size`` bytes) or scalars
    (``mode="per_layer"``: register values). nvdla/sw's fp16 values are ``alu = -mean`` and
    ``mul = 1 / sqrt(var + eps)``. A per-element pair is :func:`pack_eltwise` with both.
    Errors as :func:`pack_bias`."""
    precision = _pipeline(precision, pipeline)
    if mode == "per_element":
        raise UnsupportedError("mode: per-element batch-norm operands are element-wise pairs; use "
                               "pack_eltwise(alu=..., mul=...) (docs/nvdla.md §12.5)")
    return _operand([("alu", alu), ("mul", mul)], use="batchnorm", mode=mode, precision=precision,
                    data_size=_data_size(data_size, precision, 2), config=config, rounding=rounding,
                    saturate=saturate, out=out)


@gate("alu", "mul")
def pack_eltwise(alu=None, mul=None, *, precision: Optional[str] = None, pipeline: Optional[str] = None,
                 data_size: Optional[int] = None, config: Config = NV_FULL,
                 line_stride=None, surface_stride=None, rounding: str = "nearest_even", saturate: bool = True,
                 out=None) -> SdpOperand:
    """Pack element-wise operands, always per element (docs/nvdla.md §12.6).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    ``alu`` and/or ``mul`` are ``(C, H, W)``; both give pairs (ALU first). The default
    ``data_size`` is the element size of ``precision`` (1 for int8): with one component the
    bytes equal :func:`pack_feature` of the same tensor. Returns an SdpOperand with the
    per-element strides. Errors as :func:`pack_bias`; ValueError when neither is given."""
    precision = _pipeline(precision, pipeline)
    parts = [(n, v) for n, v in (("alu", alu), ("mul", mul)) if v is not None]
    if not parts:
        raise ValueError("pack_eltwise: give alu=, mul= or both (docs/nvdla.md §12.6)")
    use = "eltwise_both" if len(parts) == 2 else f"eltwise_{parts[0][0]}"
    default = 1 if precision == "int8" else 2
    return _operand(parts, use=use, mode="per_element", precision=precision,
                    data_size=_data_size(data_size, precision, default), config=config, line_stride=line_stride,
                    surface_stride=surface_stride, rounding=rounding, saturate=saturate, out=out)


# ---------------------------------------------------------------- nvdla/sw's int16 quantisation

SDP_LEFT_SHIFT_MAX = 16  # nvdla/sw SDP_LEFT_SHIFT_MAX_PLACES
# The ALU operand's shift register field (BS_ALU_SHIFT_VALUE and its BN / EW twins) has 6 bits.
# Biases that nvdla/sw's 16 places cannot hold (int16 accumulators are 2^15 times finer than
# int8 ones) take the larger shifts the hardware has, as the compiler factors bias and scale.
ALU_SHIFT_MAX = 63


def quantize_bias(bias, *, input_scale: float, weight_scales,
                  max_shift: int = SDP_LEFT_SHIFT_MAX) -> tuple[np.ndarray, int]:
    """nvdla/sw's int16 bias for the INT8 pipeline (``scaleBiasToInt16``): bias in units of the
    convolution's accumulator, with one common left shift.

    For each output channel ``k``, in float32: ``m[k] = floor(bias[k] / (Si * Sw[k]) + 0.5)``
    (int32); ``bits = ceil(log(max|m|) / log(2)) + 1`` (double, as nvdla/sw);
    ``shift = min(16, max(0, bits - 16))``; ``q[k] = m[k] >> shift`` (arithmetic). The hardware
    adds ``q << shift``. With ``max_shift`` above 16 (at most :data:`ALU_SHIFT_MAX`, the ALU's
    63), rescaled biases beyond nvdla/sw's int32 intermediate (common with int16 weights and
    activations) take the shift that makes q fit int16.

    Parameters
    ----------
    bias : array_like, (K,)
        Real bias values (float32 arithmetic).
    input_scale : float
        Si, the input tensor's scale (real = Si * int8).
    weight_scales : float or array_like (K,)
        Sw[k] from :func:`quantize_weights` (per filter), or one value (per kernel).
    max_shift : int
        Largest left shift: 16 (nvdla/sw, default) to 63.

    Returns
    -------
    (numpy.ndarray int16 of shape (K,), int)
        The bias operand values and the left shift (register).

    Raises
    ------
    ValueError
        Non-finite or non-positive scales; ``max_shift`` outside 16..63; a rescaled bias that
        int16 with a shift of at most ``max_shift`` cannot hold (with 16: one beyond int32).

    npupack decision: where nvdla/sw's ``bits`` under-counts (max|m| an exact power of two) and
    its int16 cast would wrap, npupack takes the next shift instead, so the values always fit.
    """
    if isinstance(max_shift, bool) or not is_int(max_shift) or not SDP_LEFT_SHIFT_MAX <= max_shift <= ALU_SHIFT_MAX:
        raise ValueError(f"max_shift: expected an integer in {SDP_LEFT_SHIFT_MAX}..{ALU_SHIFT_MAX}, got {max_shift!r}")
    b = np.asarray(bias, dtype=np.float32).reshape(-1)
    sw = np.broadcast_to(np.asarray(weight_scales, dtype=np.float32), b.shape)
    si = np.float32(input_scale)
    if not (np.isfinite(si) and si > 0) or not (np.isfinite(sw).all() and (sw > 0).all()):
        raise ValueError("input_scale, weight_scales: scales must be finite and > 0")
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = (b / (si * sw)).astype(np.float32)
        m = np.floor((scaled + np.float32(0.5)).astype(np.float32))
    ceiling = 2**31 if max_shift == SDP_LEFT_SHIFT_MAX else 2**62
    if not np.isfinite(m).all() or np.abs(m).max(initial=0) >= ceiling:
        raise ValueError("bias: a rescaled bias bias/(Si*Sw) does not fit int32 (nvdla/sw's intermediate)"
                         if max_shift == SDP_LEFT_SHIFT_MAX else
                         f"bias: a rescaled bias bias/(Si*Sw) of 2^62 or more cannot be an int16 operand with a left "
                         f"shift of at most {max_shift}")
    m = m.astype(np.int64)
    peak = int(np.abs(m).max(initial=0))
    bits = math.ceil(math.log(peak) / math.log(2)) + 1 if peak else 0
    shift = min(SDP_LEFT_SHIFT_MAX, max(0, bits - 16))
    limit = SDP_LEFT_SHIFT_MAX if peak < 2**31 else max_shift  # nvdla/sw's range where it has one
    while shift < limit and ((m >> shift).max(initial=0) > 32767 or (m >> shift).min(initial=0) < -32768):
        shift += 1
    q = m >> shift
    if q.size and (q.min() < -32768 or q.max() > 32767):
        raise ValueError(f"bias: rescaled values up to {peak} need a left shift above {limit}")
    return q.astype(np.int16), shift


def factorize_scales(scales) -> tuple[np.ndarray, int]:
    """nvdla/sw's factorisation of real rescale factors into int16 numerators with one common
    right shift (``calculateScaleAndShiftFromScalar`` / ``factorizeScalars``): ``s ~ n * 2^-t``.

    ``t = 15 - (floor(log(max|s|) / log(2)) + 1)`` from the largest magnitude, then for every
    value ``n = trunc(2^t * |s|)`` with the sign of ``s``.

    Parameters
    ----------
    scales : array_like, any shape
        Real factors (e.g. ``Si * Sw[k] / So`` per output channel), float32.

    Returns
    -------
    (numpy.ndarray int16 of the same shape, int)
        Numerators and the truncate (right shift) value, 0..63.

    Raises
    ------
    ValueError
        Non-finite values; the largest magnitude is 2^15 or more (nvdla/sw: beyond int16);
        a shift of 64 or more (values too small to represent).

    npupack decision: nvdla/sw treats a common shift of 0 as "none given" and lets each value
    pick its own shift; npupack applies the common shift to every value.
    """
    s = np.asarray(scales, dtype=np.float32)
    if not np.isfinite(s).all():
        raise ValueError("scales: values must be finite")
    peak = float(np.abs(s).max(initial=0))
    if peak == 0:
        return np.zeros(s.shape, np.int16), 1
    bits = math.floor(math.log(peak) / math.log(2)) + 1
    if bits > 15:
        raise ValueError(f"scales: {peak} is beyond the int16 numerator range (nvdla/sw)")
    shift = 15 - bits
    if shift >= 64:
        raise ValueError(f"scales: {peak} needs a right shift of {shift} (at most 63)")
    n = np.trunc(np.abs(s).astype(np.float64) * 2.0**shift)
    return (np.sign(s) * np.minimum(n, 32767)).astype(np.int16), shift
