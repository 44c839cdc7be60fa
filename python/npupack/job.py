"""The main job: pack every convolution layer of an ONNX model into NVDLA weight surfaces and
write one file per surface plus ``manifest.json``.

Writes are atomic (temporary file + rename), so re-running into the same directory is safe and an
interrupted or failed layer never leaves a half-written file; the manifest is written last.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict
from pathlib import Path


from npupack import __version__
from npupack.files import sha256_file, write_atomic
from npupack.model import load_onnx
from npupack.nvdla import Config, pack_weights, quantize_weights

__all__ = ["pack_model"]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "layer"


DEFAULT_PIXEL_FORMAT = {"int8": "T_A8B8G8R8", "int16": "T_A16B16G16R16", "fp16": "T_A16B16G16R16_F"}


def _is_image_layer(layer, pixel_format) -> bool:
    """A first layer NVDLA runs in image-input mode: it reads the model's input, has at most as
    many channels as the pixel format gives, and is not grouped (nvdla.md 8)."""
    from npupack.nvdla import PIXEL_FORMATS

    return (pixel_format is not None and layer.op_type == "Conv" and layer.reads_graph_input and layer.group == 1
            and layer.weights.shape[1] <= PIXEL_FORMATS[pixel_format].comps)


def _pack_layer(layer, config: Config, precision: str, quantize: str, pixel_format):
    """Returns (WeightSurfaces, scales or None) or raises ValueError/TypeError."""
    kw = dict(kind="dc", groups=layer.group)
    if _is_image_layer(layer, pixel_format):
        kw = dict(kind="image", pixel_format=pixel_format, stride=tuple(layer.strides))
    if precision == "fp16":
        return pack_weights(layer.weights, precision="fp16", config=config, **kw), None
    q, scales = quantize_weights(layer.weights, precision=precision, mode=quantize)
    return pack_weights(q, precision=precision, config=config, **kw), scales


def pack_model(model_path, out_dir, *, config: Config, precision: str = "int8", quantize: str = "per_filter",
               pixel_format="auto", progress: bool = True) -> dict:
    """Pack every ``Conv`` layer of an ONNX model as NVDLA direct-convolution weights.

    Parameters
    ----------
    model_path : path to an ``.onnx`` file
    out_dir : output directory (created); one ``<index>_<layer>.weight.bin`` per surface and
        ``manifest.json``.
    config : Config
        Target configuration.
    precision : {"int8", "int16", "fp16"}
        int8/int16 weights are quantised with :func:`quantize_weights` (``quantize`` mode,
        per filter by default); fp16 weights are converted with round-to-nearest-even and
        saturation.
    pixel_format : str, "auto" or None
        First layers that read the model's input with C <= the format's channel count are packed
        as image-input weights for this pixel format ("auto": T_A8B8G8R8 for int8,
        T_A16B16G16R16 for int16, T_A16B16G16R16_F for fp16); None packs them as DC.
    progress : bool
        Show a progress bar (tqdm, on a terminal).

    Returns
    -------
    dict
        The manifest (also written to ``out_dir/manifest.json``). Each layer has ``status``
        ``"packed"``, ``"unsupported"`` (with ``reason``; e.g. ConvTranspose) or ``"error"``
        (with ``reason``); packed layers give logical and packed shapes, precision, scales,
        file, offset, size, alignment and sha256 of the surface.

    Raises
    ------
    FileNotFoundError, ValueError
        The model cannot be read. Per-layer problems are reported in the manifest instead.
    """
    t0 = time.perf_counter()
    model_path = Path(model_path)
    out = Path(out_dir)
    config.require_precision(precision)
    if pixel_format == "auto":
        pixel_format = DEFAULT_PIXEL_FORMAT[precision]
    layers = load_onnx(model_path)
    out.mkdir(parents=True, exist_ok=True)
    bar = _progress(layers, progress)
    entries, bytes_in, bytes_out = [], 0, 0
    for index, layer in enumerate(bar):
        entry = {"name": layer.name, "op_type": layer.op_type, "strides": list(layer.strides),
                 "pads": list(layer.pads), "dilations": list(layer.dilations), "group": layer.group}
        entries.append(entry)
        if layer.weights is not None:
            entry["logical_shape"] = list(layer.weights.shape)
        reason = layer.note or (
            "deconvolution (ConvTranspose) weights are not implemented in this version"
            if layer.op_type == "ConvTranspose" else None)
        if reason:
            entry.update(status="unsupported", reason=reason)
            continue
        try:
            ws, scales = _pack_layer(layer, config, precision, quantize, pixel_format)
        except (ValueError, TypeError) as e:
            entry.update(status="error", reason=f"{type(e).__name__}: {e}")
            continue
        path = out / f"{index:03d}_{_safe(layer.name)}.weight.bin"
        write_atomic(path, ws.weight)
        bytes_in += layer.weights.nbytes
        bytes_out += ws.weight.size
        entry.update(
            status="packed", kind=ws.kind, precision=ws.precision, pixel_format=ws.pixel_format,
            post_extension=ws.post_extension,
            quantization=None if scales is None else quantize,
            scales=None if scales is None else [float(s) for s in scales],
            packed_shape=list(ws.packed_shape), kernel_groups=ws.kernel_groups,
            bytes_per_kernel=ws.bytes_per_kernel, meaningful_bytes=ws.meaningful_bytes,
            file=path.name, offset=0, size=ws.weight.size, alignment=ws.alignment,
            sha256=hashlib.sha256(memoryview(ws.weight)).hexdigest())
    seconds = time.perf_counter() - t0
    counts = {s: sum(e["status"] == s for e in entries) for s in ("packed", "unsupported", "error")}
    manifest = {
        "npupack_version": __version__, "format": "nvdla", "target": config.name,
        "config": {**asdict(config), "precisions": list(config.precisions)},
        "precision": precision, "model": {"file": model_path.name, "sha256": sha256_file(model_path)},
        "layers": entries,
        "summary": {"layers": len(entries), **counts, "bytes_in": bytes_in, "bytes_out": bytes_out,
                    "seconds": round(seconds, 3)},
    }
    write_atomic(out / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def _progress(items, enabled: bool):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc="packing", unit="layer", disable=None, leave=False)
