"""SDP operands of a model's layers for the pack job (docs/nvdla.md §12): a convolution's bias (fp16),
or its int16 bias with the per-channel output rescale (INT8/INT16 pipelines, as NVIDIA's compiler
derives them), and batch-norm pairs. Integer pipelines need the scales of the activation
tensors, read from a calibration table in NVIDIA's JSON schema
(``{"tensor": {"scale": s}}`` or ``{"tensor": {"min": a, "max": b}}``).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from npupack.nvdla import factorize_scales, pack_batchnorm, pack_bias, quantize_bias
from npupack.nvdla.sdp import ALU_SHIFT_MAX

__all__ = ["load_calibration", "conv_operand", "batchnorm_operand"]


def load_calibration(path, precision: str = "int8") -> dict:
    """``{tensor name: scale}`` from a calibration table (NVIDIA's JSON schema: per tensor a
    ``scale``, or ``min``/``max`` giving ``max(|min|, |max|) / qmax``, qmax 127 for int8 and
    32767 for int16). Raises FileNotFoundError, ValueError for malformed entries."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"calibration: {path} must hold a JSON object of tensors")
    qmax = 127.0 if precision == "int8" else 32767.0
    scales = {}
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise ValueError(f"calibration: entry {name!r} is not an object")
        if "scale" in entry:
            s = float(entry["scale"])
        elif "min" in entry and "max" in entry:
            s = max(abs(float(entry["min"])), abs(float(entry["max"]))) / qmax
        else:
            raise ValueError(f"calibration: entry {name!r} has neither scale nor min/max")
        if not (np.isfinite(s) and s > 0):
            raise ValueError(f"calibration: entry {name!r} gives scale {s}; scales must be finite and > 0")
        scales[name] = s
    return scales


def _scale_of(scales: dict, tensor: str, what: str) -> float:
    if tensor not in scales:
        raise ValueError(f"calibration: no scale for the {what} tensor {tensor!r}")
    return scales[tensor]


def conv_operand(layer, precision: str, config, weight_scales, scales):
    """The SDP operand after a convolution: ``(operand or None, manifest fields)``.

    fp16: the bias (per channel), none without a bias. int8/int16 (needs ``scales``): the
    int16 bias ``b / (Si * Sw[k])`` with its left shift, paired with the per-channel rescale
    ``Si * Sw[k] / So`` as int16 numerators with one right shift (nvdla/sw's per-filter flow).
    Without scales an integer layer gets no operand and a note. ``layer`` is a
    :class:`npupack.model.ConvLayer` (bias ``(K,)`` float32), ``weight_scales`` ``(K,)`` float32.
    Raises ValueError when the table lacks the layer's input or output tensor or a bias does not
    fit (see :func:`npupack.nvdla.quantize_bias`)."""
    if precision == "fp16":
        if layer.bias is None:
            return None, {}
        return pack_bias(layer.bias, precision="fp16", config=config), {"use": "bias"}
    if scales is None:
        return None, {"status": "skipped", "reason": "integer bias and rescale need activation scales "
                                                     "(--calibration)"}
    si = _scale_of(scales, layer.input_name, "input")
    so = _scale_of(scales, layer.output_name, "output")
    sw = np.asarray(weight_scales, dtype=np.float32)
    bias = layer.bias if layer.bias is not None else np.zeros(sw.size, np.float32)
    q, left = quantize_bias(bias, input_scale=si, weight_scales=sw, max_shift=ALU_SHIFT_MAX)
    n, right = factorize_scales((np.float32(si) * sw / np.float32(so)).astype(np.float32))
    return pack_bias(q, mul=n, precision=precision, config=config), {
        "use": "bias_rescale", "bias_left_shift": left, "rescale_truncate": right}


def batchnorm_operand(bn, precision: str, config, scales):
    """A ``BatchNormalization`` as one SDP pair (docs/nvdla.md §12.5): ``y = (x + alu) * mul`` with
    ``mul = scale / sqrt(var + eps)`` and ``alu = bias / mul - mean`` (float32), which equals
    ONNX's ``(x - mean) * mul + bias``. int8/int16 (needs ``scales``): ``alu`` as int16 in
    units of the input scale with a left shift, ``mul * Si / So`` factorised into int16
    numerators and a right shift. Returns ``(operand or None, manifest fields)``; raises
    ValueError for channels with ``scale == 0`` (no pair can express them)."""
    if bn.note:
        return None, {"status": "skipped", "reason": bn.note}
    mul = (bn.scale / np.sqrt(bn.var + np.float32(bn.epsilon))).astype(np.float32)
    if (mul == 0).any():
        raise ValueError(f"{bn.name}: channels with scale 0 cannot be one ALU/MUL pair")
    alu = (bn.bias / mul - bn.mean).astype(np.float32)
    if precision == "fp16":
        return pack_batchnorm(alu, mul, precision="fp16", config=config), {"use": "batchnorm"}
    if scales is None:
        return None, {"status": "skipped", "reason": "integer batch-norm operands need activation scales "
                                                     "(--calibration)"}
    si = _scale_of(scales, bn.input_name, "input")
    so = _scale_of(scales, bn.output_name, "output")
    q, left = quantize_bias(alu, input_scale=si, weight_scales=1.0, max_shift=ALU_SHIFT_MAX)
    n, right = factorize_scales((mul * np.float32(si) / np.float32(so)).astype(np.float32))
    return pack_batchnorm(q, n, precision=precision, config=config), {
        "use": "batchnorm", "alu_left_shift": left, "mul_truncate": right}
