"""NVDLA precision-conversion validity, FP16 INF/NaN rules and alignment rules, as data
(docs/nvdla.md §13, 14, 15).

Every table is a plain tuple of rows so that callers (compilers, docs, tests) can read it; the
check functions only look rows up and quote the row they reject.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import check_dims
from npupack.nvdla.config import NV_FULL, PRECISIONS, Config, check_config

__all__ = ["PrecisionRule", "PRECISION_TABLES", "check_precision", "FP16_INF_AS", "FP16_RULES", "AlignmentRule",
           "ALIGNMENT", "alignment_rules", "check_alignment"]

INVALID = None


@dataclass(frozen=True)
class PrecisionRule:
    """One row of a precision-conversion table. ``pipeline`` (and ``weights`` for the
    convolution) is None when the pair is invalid."""

    unit: str
    input: str
    output: str
    pipeline: Optional[str]
    weights: Optional[str] = None

    def __str__(self) -> str:
        got = "invalid" if self.pipeline is None else f"pipeline {self.pipeline}" + (
            f", weights {self.weights}" if self.weights else "")
        return f"{self.unit}: {self.input} -> {self.output}: {got}"


def _conv_rows():
    rows = []
    for out in PRECISIONS:  # integer image: any output, pipeline = output (docs/nvdla.md §13.1)
        rows.append(PrecisionRule("conv", "integer image", out, out, out))
    for out in PRECISIONS:
        ok = out == "fp16"
        rows.append(PrecisionRule("conv", "fp16 image", out, "fp16" if ok else None, "fp16" if ok else None))
    for inp in PRECISIONS:
        for out in PRECISIONS:
            ok = inp == out
            rows.append(PrecisionRule("conv", f"{inp} feature", out, inp if ok else None, inp if ok else None))
    return tuple(rows)


_SDP = {("int8", "int8"): "int32", ("int8", "int16"): "int32", ("int8", "fp16"): None,
        ("int16", "int8"): "int32", ("int16", "int16"): "int32", ("int16", "fp16"): "int32",
        ("fp16", "int8"): None, ("fp16", "int16"): "fp32", ("fp16", "fp16"): "fp32"}

#: The four tables of NVDLA's "Precision Conversion" section (docs/nvdla.md §13.1-13.3), every row,
#: valid and invalid. Units: "conv" (DC, Winograd, image), "sdp" (offline mode), "cdp" (LRN),
#: "pdp" (pooling). The pooling table's duplicated int16 row is read as fp16 (docs/nvdla.md §13.3).
PRECISION_TABLES = {
    "conv": _conv_rows(),
    "sdp": tuple(PrecisionRule("sdp", i, o, p) for (i, o), p in _SDP.items()),
    "cdp": tuple(PrecisionRule("cdp", i, o, i if i == o else None) for i in PRECISIONS for o in PRECISIONS),
    "pdp": tuple(PrecisionRule("pdp", i, o, i if i == o else None) for i in PRECISIONS for o in PRECISIONS),
}

_FP16_IMAGES = ("T_R16_F", "T_A16B16G16R16_F", "T_A16Y16U16V16_F")


def _input_class(unit: str, value: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"input: expected a precision or pixel format name, got {value!r}")
    if value in PRECISIONS:
        return f"{value} feature" if unit == "conv" else value
    if unit == "conv":
        from npupack.nvdla.pixel import PIXEL_FORMATS

        if value in PIXEL_FORMATS:
            return "fp16 image" if value in _FP16_IMAGES else "integer image"
        raise ValueError(f"input: {value!r} is neither a precision {PRECISIONS} nor a pixel format "
                         "(docs/nvdla.md §13.1)")
    raise ValueError(f"input: {value!r} is not one of {PRECISIONS} (docs/nvdla.md §13)")


def check_precision(unit: str, input: str, output: str) -> PrecisionRule:
    """Look up a precision conversion (docs/nvdla.md §13).

    Parameters
    ----------
    unit : {"conv", "sdp", "cdp", "pdp"}
        Convolution pipeline (DC, Winograd, image input), SDP (offline mode), LRN, pooling.
    input : str
        Input precision ("int8", "int16", "fp16"); for "conv" also a pixel format name (every
        integer format is an "integer image", ``T_R16_F``, ``T_A16B16G16R16_F``,
        ``T_A16Y16U16V16_F`` are "fp16 image").
    output : str
        Output precision.

    Returns
    -------
    PrecisionRule
        The valid row: ``pipeline`` is the real processing precision (SDP: "int32"/"fp32"),
        ``weights`` the weight precision for "conv".

    Raises
    ------
    UnsupportedError
        The pair is invalid; the message quotes the table row.
    ValueError
        Unknown unit, input or output.
    """
    if unit not in PRECISION_TABLES:
        raise ValueError(f"unit: {unit!r} is not one of {tuple(PRECISION_TABLES)} (docs/nvdla.md §13)")
    if output not in PRECISIONS:
        raise ValueError(f"output: {output!r} is not one of {PRECISIONS} (docs/nvdla.md §13)")
    cls = _input_class(unit, input)
    for row in PRECISION_TABLES[unit]:
        if row.input == cls and row.output == output:
            if row.pipeline is None:
                raise UnsupportedError(f"precision: {unit} cannot convert {input} to {output}; table row "
                                       f"'{row}' (docs/nvdla.md §13)")
            return row
    raise AssertionError("every pair has a row")  # the tables are complete


#: How each sub-module treats a +-INF fp16 input (docs/nvdla.md §14.1).
FP16_INF_AS = {
    "conv_dc": 65536.0, "conv_image": 65536.0, "conv_winograd": 65504.0,
    "sdp": 3.40282e38, "cdp": 4292870144.0, "pdp_average": 4292870144.0, "pdp_max_min": float("inf"),
}

#: The NaN / overflow / denormal rules of the hardware and npupack's policy (docs/nvdla.md §14).
FP16_RULES = {
    "inf_output": "never: on overflow every unit saturates (fp16 +-65504, int16 32767/-32768, int8 127/-128)",
    "nan_generated": False,
    "nan_propagates": True,
    "nan_flush_register": "a register flag flushes input NaNs to zero; NaN counters report them per layer",
    "denormals": "supported on input and output as IEEE 754; internal fp17/fp32 paths flush them",
    "rounding": "round to nearest; overflow saturates",
    "npupack_weights_nan": "ValueError unless pack_weights(allow_nan=True)",
    "npupack_feature_nan": "converted (fp16 bits kept; float input becomes a quiet NaN)",
    "npupack_padding": "always zero bytes",
}


@dataclass(frozen=True)
class AlignmentRule:
    """Alignment of one data format, bytes; None where the rule does not apply (docs/nvdla.md §15)."""

    kind: str
    address: int
    line_stride: Optional[int] = None
    surface_stride: Optional[int] = None
    batch_stride: Optional[int] = None
    size: Optional[int] = None


def alignment_rules(config: Config = NV_FULL) -> dict:
    """The alignment table for ``config`` (docs/nvdla.md §15.2): the hardware documentation's table with the 32-byte
    entries of feature, bias, PReLU, batch-norm and element-wise rows replaced by
    ``config.atom_bytes``; weights start at 256 bytes, their size aligns to
    ``config.weight_size_alignment`` (compressed DATA, WMB, WGS: 128). Returns ``{kind: AlignmentRule}``."""
    a = config.atom_bytes
    return {
        "feature": AlignmentRule("feature", a, a, a, a),
        "weight": AlignmentRule("weight", 256, size=config.weight_size_alignment),
        "weight_compressed": AlignmentRule("weight_compressed", 256, size=128),
        "wmb": AlignmentRule("wmb", 256, size=128),
        "wgs": AlignmentRule("wgs", 256, size=128),
        "pixel": AlignmentRule("pixel", 32, 32),
        "bias": AlignmentRule("bias", a, a, a),
        "prelu": AlignmentRule("prelu", a),
        "batchnorm": AlignmentRule("batchnorm", a),
        "eltwise": AlignmentRule("eltwise", a, a, a, size=a),
    }


#: The hardware documentation's table (NV_FULL values; docs/nvdla.md §15.1).
ALIGNMENT = alignment_rules(NV_FULL)


def check_alignment(kind: str, *, config: Config = NV_FULL, address=None, line_stride=None, surface_stride=None,
                    batch_stride=None, size=None, shape=None) -> AlignmentRule:
    """Check addresses, strides and sizes against the alignment table (docs/nvdla.md §15.2).

    Parameters
    ----------
    kind : str
        One of ``alignment_rules()``: "feature", "weight", "weight_compressed", "wmb", "wgs",
        "pixel", "bias", "prelu", "batchnorm", "eltwise".
    config : Config
        Atom size and weight size alignment.
    address, line_stride, surface_stride, batch_stride, size : int, optional, bytes
        The values to check; omitted ones are not checked.
    shape : (C, H, W) or (N, C, H, W), optional, elements
        For "feature" / "eltwise" / "bias": a 1x1 cube must have ``surface_stride`` equal to its
        atom (the surface-packed case, docs/nvdla.md §3.3). Checked like any shape: 3 or 4 integers
        >= 1.

    Returns
    -------
    AlignmentRule
        The rule that was applied.

    Raises
    ------
    LayoutError
        The first value that breaks its rule, naming it, the value and the alignment; a
        ``shape`` that is not 3 or 4 dimensions >= 1.
    ValueError
        Unknown ``kind``.
    TypeError
        A value or a ``shape`` entry that is not an integer; a ``config`` that is not a Config.
    """
    check_config(config)
    if shape is not None:
        shape = check_dims(shape, "shape")
        if len(shape) not in (3, 4):
            raise LayoutError(f"shape: (C, H, W) or (N, C, H, W), got {shape}")
    rules = alignment_rules(config)
    if kind not in rules:
        raise ValueError(f"kind: {kind!r} is not one of {tuple(rules)} (docs/nvdla.md §15)")
    rule = rules[kind]
    for name, value, align in (("address", address, rule.address), ("line_stride", line_stride, rule.line_stride),
                               ("surface_stride", surface_stride, rule.surface_stride),
                               ("batch_stride", batch_stride, rule.batch_stride), ("size", size, rule.size)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
            raise TypeError(f"{name}: expected an integer number of bytes, got {value!r}")
        value = int(value)
        if value < 0:
            raise LayoutError(f"{name}: {value} bytes is negative")
        if align is None:
            raise LayoutError(f"{name}: {kind} data has no {name.replace('_', ' ')} (docs/nvdla.md §15.1)")
        if value % align:
            raise LayoutError(f"{name}: {value} bytes is not a multiple of {align} for {kind} data on "
                              f"{config.name} (docs/nvdla.md §15)")
    if shape is not None and surface_stride is not None and kind in ("feature", "eltwise", "bias"):
        dims = tuple(shape)[-2:]
        if dims == (1, 1) and int(surface_stride) != config.atom_bytes:
            raise LayoutError(f"surface_stride: a 1x1 cube is surface-packed; its surface stride must be the "
                              f"{config.atom_bytes}-byte atom, got {surface_stride} (docs/nvdla.md §3.3)")
    return rule
