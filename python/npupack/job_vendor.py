"""The pack job for weight formats other than NVDLA's (OpenVINO, oneDNN, ... through
:mod:`npupack.weight_format`): every layer's weights in the chosen precision, one file per
surface, plain bias vectors, and the manifest entries that describe them (docs/manifest.md §6).

:func:`layer_tensor` is the one definition of the values a layer is packed with; the read-back
(:mod:`npupack.readback`) calls it again to check packed weights against the model.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from npupack import __version__
from npupack.errors import UnsupportedError
from npupack.manifest import MANIFEST_VERSION
from npupack.weight_format import PRECISION_DTYPES, grouped_form, to_precision

__all__ = ["quantize_symmetric", "layer_tensor", "unsupported_reason", "pack_into", "VENDOR_PRECISIONS"]

#: Precisions of non-NVDLA weight formats.
VENDOR_PRECISIONS = ("fp16", "fp32", "int8", "int16")
_QMAX = {"int8": 127, "int16": 32767}


def quantize_symmetric(w, precision: str = "int8", mode: str = "per_filter"):
    """Symmetric quantisation of float weights ``w`` ``(K, ...)`` (docs/manifest.md §6.2).

    ``scale = fl32(max|w| / qmax)`` per output channel (``mode="per_filter"``) or for the whole
    tensor (``"per_kernel"``, repeated per channel), qmax 127 (int8) or 32767 (int16);
    ``q = clip(round_half_even(fl32(w / scale)), -qmax, qmax)``. A channel whose scale is 0
    (all zero, or underflowing) gets q = 0 and scale 0. Real weight = q x scale.

    Returns ``(q, scales)``: int8/int16 of ``w``'s shape, float32 ``(K,)``. Raises ValueError
    for NaN / inf, an unknown precision or mode, TypeError for non-float ``w``."""
    if precision not in _QMAX:
        raise ValueError(f"precision: {precision!r} is not 'int8' or 'int16'")
    if mode not in ("per_filter", "per_kernel"):
        raise ValueError(f"quantize: {mode!r} is not 'per_filter' or 'per_kernel'")
    arr = np.asarray(w)
    if arr.dtype.kind != "f":
        raise TypeError(f"w: expected float weights, got {arr.dtype}")
    w32 = to_precision(arr, "fp32")  # refuses NaN / inf
    qmax = np.float32(_QMAX[precision])
    peak = np.abs(w32).reshape(w32.shape[0], -1).max(axis=1)
    if mode == "per_kernel":
        peak = np.full_like(peak, peak.max(initial=np.float32(0)))
    scales = (peak / qmax).astype(np.float32)
    shape = (-1,) + (1,) * (w32.ndim - 1)
    safe = np.where(scales > 0, scales, np.float32(1)).reshape(shape)
    q = np.clip(np.rint(w32 / safe), -qmax, qmax)
    q[np.broadcast_to((scales == 0).reshape(shape), q.shape)] = 0
    return q.astype(PRECISION_DTYPES[precision]), scales


def unsupported_reason(layer, wf, precision: str):
    """Why ``layer`` cannot be packed in ``wf`` at ``precision``, or None."""
    if layer.note:
        return layer.note
    if layer.op_type == "ConvTranspose":
        return (f"{wf.name} has no transposed-convolution weight order: ConvTranspose weights "
                "(C_in, K_out/group, R, S) pack as NVDLA deconvolution sets only (nvdla:dc)")
    if layer.qweights is not None and precision in _QMAX:
        zp = layer.weight_zero_point
        if zp is not None and (zp != 0).any():
            values = sorted({int(z) for z in zp[zp != 0]})
            return (f"weight zero point {values[0] if len(values) == 1 else values} (integer weights are packed "
                    "symmetric; --precision fp16 or fp32 packs the dequantised weights)")
        info = np.iinfo(PRECISION_DTYPES[precision])
        lo, hi = int(layer.qweights.min()), int(layer.qweights.max())
        if lo < info.min or hi > info.max:
            return f"the model's {layer.qweights.dtype} weights ({lo}..{hi}) do not fit {precision}"
    return None


def layer_tensor(layer, precision: str, quantize: str = "per_filter"):
    """The values a layer is packed with (docs/manifest.md §6.2): ``(t, scales, quantization,
    scale_origin)``. ``t`` is ``(K, C/group, R, S)`` in the precision's dtype (fully connected
    layers ``(K, C*R*S, 1, 1)``); fp16 / fp32 convert the float (dequantised) weights, int8 /
    int16 keep a quantised model's integers as stored with its scales (``"model"``) or quantise
    with :func:`quantize_symmetric` (``quantize``). Raises ValueError / TypeError as those."""
    if precision in _QMAX:
        if layer.qweights is not None:
            t = layer.qweights.astype(PRECISION_DTYPES[precision])
            scales, quantization, origin = layer.weight_scales, "model", layer.scale_origin
        else:
            t, scales = quantize_symmetric(layer.weights, precision, quantize)
            quantization, origin = quantize, "computed"
    else:
        t, scales, quantization, origin = to_precision(layer.weights, precision), None, None, None
    if layer.fc_fold is not None:  # Gemm / MatMul: the ONNX (c, h, w) flattening as one 1x1 kernel
        t = t.reshape(t.shape[0], -1, 1, 1)
    return t, scales, quantization, origin


def surfaces_of(wf, t: np.ndarray, group: int) -> list:
    """``[(format, group index or None, tensor)]``: one surface in ``wf`` or its grouped form, or
    one per group (``(K/group, C/group, R, S)`` slices) when ``wf`` has no grouped form."""
    if group == 1:
        return [(wf, None, t.reshape(wf.tensor_shape(t.shape, 1)))]
    g = grouped_form(wf)
    if g is not None:
        return [(g, None, t.reshape(g.tensor_shape(t.shape, group)))]
    k = t.shape[0] // group
    return [(wf, i, t[i * k:(i + 1) * k].reshape(wf.tensor_shape((k,) + t.shape[1:], 1))) for i in range(group)]


def _bias(layer, precision: str, scales, calibration_scales):
    """The layer's bias as a plain vector: int32 in accumulator units (``round_half_even(b /
    (s_in x s_w[k]))``) for integer precisions when the calibration table has the input's scale,
    float32 otherwise. Returns ``(array, fields)`` or ``(None, None)``."""
    if layer.bias is None:
        return None, None
    b = np.asarray(layer.bias, dtype=np.float32)
    s_in = (calibration_scales or {}).get(layer.input_name)
    if precision in _QMAX and scales is not None and s_in is not None:
        from npupack.job import _sdp_weight_scales

        acc = b.astype(np.float64) / (np.float64(s_in) * _sdp_weight_scales(scales).astype(np.float64))
        q = np.rint(acc)
        if not (np.all(np.isfinite(q)) and np.abs(q).max(initial=0) <= np.iinfo(np.int32).max):
            raise ValueError(f"bias: does not fit int32 in accumulator units (input scale {s_in})")
        return q.astype("<i4"), {"dtype": "int32", "units": "accumulator", "input_scale": float(s_in)}
    return b.astype("<f4"), {"dtype": "float32", "units": "real"}


def pack_into(out: Path, layers, record, t0, *, wf, precision, quantize, calibration, calibration_scales, progress,
              manifest_extra) -> dict:
    """Every layer of ``layers`` packed in ``wf`` into the folder ``out``; returns the manifest
    (also written there). Per-layer problems go into the manifest, not raised."""
    from npupack.job import _FileSink, _progress, _safe, _unique_keys, layer_entry

    sink = _FileSink(out)
    entries, bytes_in, bytes_out = [], 0, 0
    keys = _unique_keys([layer.name for layer in layers])
    dtype = PRECISION_DTYPES[precision]
    for index, layer in enumerate(_progress(layers, progress)):
        entry = layer_entry(layer, keys[index], lambda lay: unsupported_reason(lay, wf, precision))
        entries.append(entry)
        if "status" in entry:
            continue
        stem = f"{index:03d}_{_safe(layer.name)}"
        try:
            t, scales, quantization, origin = layer_tensor(layer, precision, quantize)
            parts = [(f, i, list(x.shape), f.pack(x, precision=precision))
                     for f, i, x in surfaces_of(wf, t, layer.group)]
            bias, bias_fields = _bias(layer, precision, scales, calibration_scales)
        except UnsupportedError as e:  # the format cannot hold this layer (a ValueError too: test first)
            entry.update(status="unsupported", reason=str(e))
            continue
        except (ValueError, TypeError) as e:
            entry.update(status="error", reason=f"{type(e).__name__}: {e}")
            continue
        entry.update(status="packed", weight_format=parts[0][0].name, vendor=wf.vendor, precision=precision,
                     dtype=str(dtype), logical_shape=list(t.shape), quantization=quantization,
                     scale_origin=origin, scales=None if scales is None else [float(s) for s in scales],
                     nbytes=sum(int(p.size) for *_, p in parts))
        if parts[0][1] is None:
            entry.update(format_shape=parts[0][2], **sink._file(f"{stem}.weight", parts[0][3]))
        else:
            entry["group_surfaces"] = [{"group": i, "format_shape": s, **sink._file(f"{stem}.g{i}.weight", p)}
                                       for _, i, s, p in parts]
        if bias is not None:
            entry["bias"] = {**bias_fields, "shape": list(bias.shape),
                             **sink._file(f"{stem}.bias", bias.view(np.uint8))}
            bytes_out += bias.nbytes
        bytes_in += layer.weights.nbytes
        bytes_out += entry["nbytes"]
    counts = {s: sum(e["status"] == s for e in entries) for s in ("packed", "unsupported", "error")}
    manifest = {
        "manifest_version": MANIFEST_VERSION, "npupack_version": __version__, "format": wf.vendor,
        "weight_format": wf.name, "precision": precision, "quantize": quantize if precision in _QMAX else None,
        "model": record, "calibration": None if calibration is None else Path(calibration).name,
        "layers": entries, "batchnorms": [],
        "summary": {"layers": len(entries), **counts, "bytes_in": bytes_in, "bytes_out": bytes_out,
                    "seconds": round(time.perf_counter() - t0, 3)},
        **(manifest_extra or {}),
    }
    return sink.finish(manifest)
