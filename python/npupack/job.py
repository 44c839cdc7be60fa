"""The main job: pack every convolution layer of an ONNX model into NVDLA weight surfaces (DC,
image input, Winograd, deconvolution sets; optionally compressed), or into any registered weight
format of another vendor (``weight_format="openvino:os_is_yx_isv16_osv16"``, through
:mod:`npupack.job_vendor`), and write one file per surface plus ``manifest.json``.

The output folder is written whole: every file goes into a new folder beside the target, which
replaces the target in one step only when it is complete, so a reader (or a run that is killed)
sees the old output or the new one, never a mix and never a stale file. The target must be
missing, empty or an earlier npupack output (its manifest), unless ``force``.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from npupack import __version__
from npupack.files import check_output_dir, sha256_file, staging_dir, swap_in, write_atomic
from npupack.model import load_batchnorms, load_onnx, model_files
from npupack.operands import batchnorm_operand, conv_operand, load_calibration
from npupack.layout import check_bool
from npupack.manifest import MANIFEST_VERSION, layer_fields
from npupack.nvdla import PIXEL_FORMATS, Config, pack_weights, quantize_weights
from npupack.nvdla.config import check_config
from npupack.nvdla.convert import QUANTIZE_MODES
from npupack.weight_format import NVDLA_DEFAULT, resolve

__all__ = ["pack_model", "model_record"]

_NAME_CHARS = 48


def _safe(name: str) -> str:
    """A file-name part for a layer name: its safe characters, at most _NAME_CHARS of them, plus
    a short hash of the whole name when it was shortened or changed (node names may be
    thousands of characters long; file names are limited to 255 bytes)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "layer"
    if safe == name and len(safe) <= _NAME_CHARS:
        return safe
    return f"{safe[:_NAME_CHARS].rstrip('._-')}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _unique_keys(names) -> list:
    """One manifest key per layer: its name, and ``name#2``, ``name#3``, ... for the repeats of a
    name (ONNX allows duplicate node names)."""
    seen: dict = {}
    keys = []
    taken = set(names)
    for name in names:
        n = seen.get(name, 0) + 1
        seen[name] = n
        key = name
        while n > 1 and (key == name or key in taken):
            key = f"{name}#{n}"
            n += 1
        taken.add(key)
        keys.append(key)
    return keys


def model_record(model_path) -> dict:
    """The ``model`` entry of a manifest: the model file's name and sha256 and those of every
    external-data file it names (``external_data``: ``[{"file", "sha256"}]``), computed before
    the model is read, so that a model changed while it is packed is packed again next time.
    Raises FileNotFoundError / ValueError as :func:`npupack.model.load_onnx`."""
    path = Path(model_path)
    names = model_files(path)  # also checks that the file is a model and its data lies inside its folder
    return {"file": path.name, "sha256": sha256_file(path),
            "external_data": [{"file": f, "sha256": sha256_file(path.parent / f)} for f in names]}


DEFAULT_PIXEL_FORMAT = {"int8": "T_A8B8G8R8", "int16": "T_A16B16G16R16", "fp16": "T_A16B16G16R16_F"}


def _is_image_layer(layer, pixel_format) -> bool:
    """A first layer NVDLA runs in image-input mode: it reads the model's input, has at most as
    many channels as the pixel format gives, and is neither grouped nor dilated: image mode folds
    a row's taps into adjacent channels, where no dilation can apply (docs/nvdla.md §8)."""
    return (pixel_format is not None and layer.op_type == "Conv" and layer.reads_graph_input and layer.group == 1
            and all(d == 1 for d in layer.dilations) and layer.weights.shape[1] <= PIXEL_FORMATS[pixel_format].comps)


WINOGRAD_MODES = ("off", "auto")
COMPRESS_MODES = {"off": False, "on": True, "auto": "auto"}


def _winograd_eligible(layer, config: Config, precision: str, winograd: str) -> bool:
    """``--winograd auto``: fp16/int16 ``Conv`` layers, not grouped or dilated, whose kernel
    becomes 3x3 after channel extension (3x3 stride 1; 5x5/6x6 stride 2; 7x7-9x9 stride 3),
    on a config with Winograd (docs/nvdla.md §9.1). int8 stays DC: the transform's quarter steps do not
    fit int8 without losing precision."""
    if winograd != "auto" or not config.winograd or precision == "int8" or layer.op_type != "Conv":
        return False
    if layer.group != 1 or any(d != 1 for d in layer.dilations) or len(layer.strides) != 2:
        return False
    _, _, r, s = layer.weights.shape
    sy, sx = layer.strides
    return -(-r // sy) == 3 and -(-s // sx) == 3


def _winograd_int16_scale(q) -> float:
    """A power-of-two Winograd ``scale`` for int16 weights that cannot saturate: |G g Gᵀ| is at
    most 2.25 max|g| (the absolute row sums of G are at most 1.5), capped at 4 (exact for integer
    weights)."""
    m = float(abs(q.astype("int32")).max()) if q.size else 0.0
    if m == 0.0:
        return 4.0
    return float(min(4.0, 2.0 ** math.floor(math.log2(32767.0 / (2.25 * m)))))


def _pack_layer(layer, config: Config, precision: str, quantize: str, pixel_format, winograd: str, compress):
    """Returns (WeightSurfaces or tuple of sets, scales or None, extra manifest fields) or raises
    ValueError/TypeError."""
    extra = {}
    kw = dict(kind="dc", groups=layer.group, compress=compress)
    kernel_axis = 0
    if layer.op_type == "ConvTranspose":
        kw.update(kind="deconv", stride=tuple(layer.strides))
        kernel_axis = 1
    elif _is_image_layer(layer, pixel_format):
        kw.update(kind="image", pixel_format=pixel_format, stride=tuple(layer.strides))
    elif _winograd_eligible(layer, config, precision, winograd):
        kw.update(kind="winograd", stride=tuple(layer.strides))
    if kw["kind"] != "dc":
        del kw["groups"]
    if precision == "fp16":
        return pack_weights(layer.weights, precision="fp16", config=config, **kw), None, extra
    if layer.qweights is not None:  # the model's own integers, as stored (its scales with them)
        q, scales = layer.qweights.astype(_INT_DTYPE[precision]), layer.weight_scales
    else:
        q, scales = quantize_weights(layer.weights, precision=precision, mode=quantize, kernel_axis=kernel_axis)
    if kw["kind"] == "winograd":
        kw["scale"] = extra["winograd_scale"] = _winograd_int16_scale(q)
    return pack_weights(q, precision=precision, config=config, **kw), scales, extra


_INT_DTYPE = {"int8": "int8", "int16": "int16"}


def _unsupported_reason(layer, precision: str):
    if layer.note:
        return layer.note
    if layer.qweights is not None and precision != "fp16":
        zp = layer.weight_zero_point
        if zp is not None and (zp != 0).any():
            values = sorted({int(z) for z in zp[zp != 0]})
            shown = values[0] if len(values) == 1 else values
            return f"weight zero point {shown} (NVDLA weights are symmetric)"
        info = np.iinfo(_INT_DTYPE[precision])
        lo, hi = int(layer.qweights.min()), int(layer.qweights.max())
        if lo < info.min or hi > info.max:
            return f"the model's {layer.qweights.dtype} weights ({lo}..{hi}) do not fit {precision}"
    if layer.op_type == "ConvTranspose":
        if layer.group != 1:
            return f"grouped deconvolution (group={layer.group}) has no NVDLA weight format (docs/nvdla.md §10.1)"
        if any(d != 1 for d in layer.dilations):
            return f"dilated deconvolution (dilations={list(layer.dilations)}) is not supported"
    return None


def _sha(arr) -> str:
    return hashlib.sha256(memoryview(arr)).hexdigest()


class _FileSink:
    """One file per surface (``<stem>.weight.bin``, ``.wmb.bin``, ``.wgs.bin``, ``.sdp.bin``)."""

    def __init__(self, out: Path):
        self.out = out

    def _file(self, name: str, arr) -> dict:
        path = self.out / f"{name}.bin"
        write_atomic(path, arr)
        return {"file": path.name, "offset": 0, "size": int(arr.size), "sha256": _sha(arr)}

    def weights(self, stem: str, ws) -> dict:
        fields = {p: self._file(f"{stem}.{p}", a) for p, a in (("weight", ws.weight), ("wmb", ws.wmb), ("wgs", ws.wgs))
                  if a is not None}
        return {"encoding": ws.encoding, **fields.pop("weight"), "alignment": ws.alignment, "nonzero": ws.nonzero,
                **fields}

    def operand(self, stem: str, op) -> dict:
        # stem already ends in ".sdp" (it also names the surface in an image)
        return self._file(stem, op.data)

    def finish(self, manifest: dict) -> dict:
        write_atomic(self.out / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
        return manifest


class _ImageSink:
    """Every surface placed in one ``image.bin`` by a MemoryPlan (docs/nvdla.md §15)."""

    def __init__(self, out: Path, config: Config):
        from npupack.nvdla import MemoryPlan

        self.out = out
        self.plan = MemoryPlan(config)

    @staticmethod
    def _fields(p, arr) -> dict:
        return {"file": "image.bin", "offset": p.offset, "size": p.size, "sha256": _sha(arr)}

    def weights(self, stem: str, ws) -> dict:
        placed = self.plan.add_weights(stem, ws)
        fields = {"encoding": ws.encoding, **self._fields(placed[0], ws.weight), "alignment": placed[0].alignment,
                  "nonzero": ws.nonzero}
        if ws.compressed:
            fields.update(wmb=self._fields(placed[1], ws.wmb), wgs=self._fields(placed[2], ws.wgs))
        return fields

    def operand(self, stem: str, op) -> dict:
        return self._fields(self.plan.add_operand(stem, op), op.data)

    def finish(self, manifest: dict) -> dict:
        return self.plan.write(self.out, extra=manifest)


def _mode(value, modes, name: str, expected: str = "") -> None:
    if not isinstance(value, str) or value not in modes:
        raise ValueError(f"{name}: expected {expected or f'one of {tuple(modes)}'}, got {value!r}")


#: The options that only NVDLA weights have, with the value that means "not asked for".
NVDLA_ONLY = {"config": (None,), "pixel_format": ("auto", None), "winograd": ("off",), "compress": ("off",),
              "image": (False,)}


def check_options(config, *, precision: str, quantize: str, pixel_format, winograd: str, compress: str,
                  image: bool, weight_format: str = NVDLA_DEFAULT) -> bool:
    """Check the options of :func:`pack_model` (also before :func:`npupack.bulk.pack_many` starts,
    so that a typo is one error, not one failed model or layer each); returns ``image`` as a
    bool. Raises TypeError for a ``config`` that is not a :class:`Config` or an ``image`` that is
    not a bool, ValueError for a mode or pixel format name that does not exist and for a
    precision or compression the config lacks (docs/nvdla.md §2.3, 4.2, 11). With a
    ``weight_format`` other than ``nvdla:dc``: LayoutError / UnsupportedError (ValueErrors) for
    a name that is not a weight format (:func:`npupack.weight_format.resolve`), ValueError for
    a precision outside fp16 / fp32 / int8 / int16 and for any NVDLA-only option
    (``config``, ``pixel_format``, ``winograd``, ``compress``, ``image``) given (docs/design.md §5.6)."""
    wf = resolve(weight_format)
    if wf is not None:
        from npupack.job_vendor import VENDOR_PRECISIONS

        for name, value in (("config", config), ("pixel_format", pixel_format), ("winograd", winograd),
                            ("compress", compress), ("image", image)):
            if value not in NVDLA_ONLY[name]:
                raise ValueError(f"{name}: an NVDLA-only option ({value!r}); weight format {wf.name} takes precision, "
                                 "quantize and calibration only")
        _mode(precision, VENDOR_PRECISIONS, "precision")
        _mode(quantize, QUANTIZE_MODES, "quantize")
        return False
    check_config(config)  # NVDLA weights need one (None included: a TypeError naming it)
    config.require_precision(precision)
    image = check_bool(image, "image")
    _mode(quantize, QUANTIZE_MODES, "quantize")
    if pixel_format is not None and pixel_format != "auto":
        _mode(pixel_format, PIXEL_FORMATS, "pixel_format",
              "'auto', None or a name of npupack.nvdla.PIXEL_FORMATS (docs/nvdla.md §4.2)")
    _mode(winograd, WINOGRAD_MODES, "winograd")
    _mode(compress, COMPRESS_MODES, "compress")
    if COMPRESS_MODES[compress] is True and not config.compression:
        raise ValueError(f"compress: config {config.name!r} has no sparse weight compression (docs/nvdla.md §11)")
    return image


def pack_model(model_path, out_dir, *, config: Config = None, precision: str = "int8", quantize: str = "per_filter",
               pixel_format="auto", winograd: str = "off", compress: str = "off", image: bool = False,
               calibration=None, progress: bool = True, force: bool = False, extra: dict = None,
               weight_format: str = NVDLA_DEFAULT) -> dict:
    """Pack every weight-bearing layer of an ONNX model as NVDLA weights (or in another vendor's
    weight format, ``weight_format``): convolutions (1-D as
    H = 1, transposed, grouped), fully connected ``Gemm`` / ``MatMul`` as direct convolution with
    R x S folded from the flattened cube, and quantised layers (QDQ, ``QLinearConv``, ``QGemm``,
    ``QLinearMatMul``, ``ConvInteger``, ``MatMulInteger``) with their integers as stored; layers
    in subgraphs included (docs/manifest.md §3).

    Parameters
    ----------
    model_path : path to an ``.onnx`` file
    out_dir : output directory: missing, empty or an earlier npupack output (``force`` for any
        other); replaced whole when the new output is complete. One
        ``<index>_<layer>[.set<i>].weight.bin`` per surface (plus ``.wmb.bin`` / ``.wgs.bin`` when
        compressed; ``<layer>`` at most 48 characters plus a short hash of long or unusual names)
        and ``manifest.json``.
    config : Config
        Target configuration (NVDLA only; required there, None for other weight formats).
    weight_format : str
        ``"nvdla:dc"`` (default: NVDLA weights, every option below applies) or a registered
        weight format of another vendor (``"openvino:os_is_yx_isv16_osv16"``,
        ``"onednn:OIhw16i16o"``; :func:`npupack.weight_format.resolve`). Then only
        ``precision`` (also "fp32"), ``quantize`` and ``calibration`` apply: fp16 / fp32 store
        the float weights, int8 / int16 quantise symmetric per output channel with round half
        to even (``quantize="per_kernel"``: one scale), a quantised model's integers are kept;
        grouped layers use the format's grouped form (``g_...``) or one surface per group;
        fully connected layers pack as ``(K, C*R*S, 1, 1)``; ConvTranspose is unsupported;
        biases are plain float32 vectors (int32 in accumulator units for integer precisions
        with a calibration table); no SDP or batch-norm operands (docs/manifest.md §6).
    precision : {"int8", "int16", "fp16"}
        int8/int16 weights are quantised with :func:`quantize_weights` (``quantize`` mode,
        per filter by default; deconvolution per output channel, ``kernel_axis=1``; a filter
        whose scale underflows packs as zeros with scale 0); a quantised model's integers are
        packed as stored with its scales (``quantization: "model"``; a weight zero point other
        than 0 is unsupported); fp16 weights (quantised ones dequantised) are converted with
        round-to-nearest-even and saturation.
    pixel_format : str, "auto" or None
        First layers that read the model's input with C <= the format's channel count are packed
        as image-input weights for this pixel format ("auto": T_A8B8G8R8 for int8,
        T_A16B16G16R16 for int16, T_A16B16G16R16_F for fp16); None packs them as DC.
    winograd : {"off", "auto"}
        "auto" packs fp16/int16 layers whose kernel becomes 3x3 after channel extension as
        Winograd weights (int16 with a power-of-two ``winograd_scale`` in the manifest, chosen
        so that no value saturates; the output conversion must divide by it).
    compress : {"off", "on", "auto"}
        Sparse weight compression (docs/nvdla.md §11); "auto" compresses a surface only when that is
        strictly smaller; the manifest's ``encoding`` says which was chosen.
    image : bool
        Place every surface (weights, WMB/WGS, SDP operands) in one ``image.bin`` with each
        surface's start and size alignment (:class:`npupack.nvdla.MemoryPlan`) instead of one
        file per surface; the manifest gives each surface's offset in the image.
    calibration : path, optional
        Calibration table (NVIDIA's JSON schema) with the activation scales that integer bias,
        rescale and batch-norm operands need. fp16 operands need none; integer ones are
        skipped (with a note) without it.
    progress : bool
        Show a progress bar (tqdm, on a terminal).
    force : bool
        Replace ``out_dir`` even when it is a non-empty folder without an npupack manifest.
    extra : dict, optional
        More top-level manifest fields (pack-many records its options so).

    Returns
    -------
    dict
        The manifest (also written to ``out_dir/manifest.json``). Every layer entry has a ``key``
        unique in the manifest (the name; ``name#2``, ... for repeated names). ``model`` gives
        the sha256 of the model and of its external-data files. Layers with a bias or an
        integer rescale have an ``sdp`` entry; ``batchnorms`` lists the BatchNormalization
        operands. Each layer has ``status``
        ``"packed"``, ``"unsupported"`` (with ``reason``) or ``"error"`` (with ``reason``); packed
        layers give kind, logical and packed shapes, precision, scales, and per surface the
        encoding, file, offset, size, alignment and sha256 (``wmb`` / ``wgs`` entries when
        compressed). Deconvolution layers list their stride-phase ``sets`` instead. Every field,
        ``manifest_version`` and the JSON Schema the manifest conforms to
        (:func:`npupack.manifest_schema`) are described in docs/manifest.md; the entries of
        another vendor's weight format (surface, ``format_shape``, ``group_surfaces``, ``bias``)
        in docs/manifest.md §6.1.

    Raises
    ------
    FileNotFoundError, ValueError
        The model cannot be read; ``quantize``, ``winograd`` or ``compress`` not one of the
        modes; ``pixel_format`` not "auto", None or a known name; a precision or compression
        the config lacks; ``out_dir`` exists and is not a directory, or is a non-empty folder
        without an npupack manifest (unless ``force``); a malformed ONNX file. Per-layer problems
        (malformed node fields included, named with the node and attribute) are reported in the
        manifest instead.
    TypeError
        ``config`` is not a :class:`Config`; ``image`` or ``progress`` is not a bool.
    """
    t0 = time.perf_counter()
    model_path = Path(model_path)
    out = Path(out_dir)
    image = check_options(config, precision=precision, quantize=quantize, pixel_format=pixel_format,
                          winograd=winograd, compress=compress, image=image, weight_format=weight_format)
    progress = check_bool(progress, "progress")
    wf = resolve(weight_format)
    if wf is not None:
        return _pack_vendor(model_path, out, wf, t0, precision=precision, quantize=quantize, calibration=calibration,
                            progress=progress, force=force, extra=extra)
    compress_mode = COMPRESS_MODES[compress]
    if pixel_format == "auto":
        pixel_format = DEFAULT_PIXEL_FORMAT[precision]
    force = check_bool(force, "force")
    check_output_dir(out, force)
    record = model_record(model_path)  # before reading: a model replaced meanwhile is repacked next time
    layers = load_onnx(model_path)
    batchnorms = load_batchnorms(model_path)
    scales = None if calibration is None else load_calibration(calibration, precision)
    stage = staging_dir(out)
    try:
        manifest = _pack_into(stage, layers, batchnorms, scales, record, t0, config=config, precision=precision,
                              quantize=quantize, pixel_format=pixel_format, winograd=winograd, compress=compress,
                              compress_mode=compress_mode, image=image, calibration=calibration,
                              progress=progress, manifest_extra=extra)
        check_output_dir(out, force)  # the target may have changed while packing
        swap_in(stage, out)
    except BaseException:  # failed or interrupted: nothing of this run stays
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return manifest


def _pack_vendor(model_path: Path, out: Path, wf, t0, *, precision, quantize, calibration, progress, force,
                 extra) -> dict:
    """:func:`pack_model` for a non-NVDLA weight format (:func:`npupack.job_vendor.pack_into`)."""
    from npupack.job_vendor import pack_into

    force = check_bool(force, "force")
    check_output_dir(out, force)
    record = model_record(model_path)
    layers = load_onnx(model_path)
    scales = None if calibration is None else load_calibration(calibration, precision)
    stage = staging_dir(out)
    try:
        manifest = pack_into(stage, layers, record, t0, wf=wf, precision=precision, quantize=quantize,
                             calibration=calibration, calibration_scales=scales, progress=progress,
                             manifest_extra=extra)
        check_output_dir(out, force)
        swap_in(stage, out)
    except BaseException:  # failed or interrupted: nothing of this run stays
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return manifest


def _pack_into(out: Path, layers, batchnorms, scales, record, t0, *, config, precision, quantize, pixel_format,
               winograd, compress, compress_mode, image, calibration, progress, manifest_extra) -> dict:
    """The body of :func:`pack_model`: every layer and operand packed into the folder ``out``."""
    sink = _ImageSink(out, config) if image else _FileSink(out)
    bar = _progress(layers, progress)
    entries, bytes_in, bytes_out = [], 0, 0
    keys = _unique_keys([layer.name for layer in layers])
    for index, layer in enumerate(bar):
        entry = layer_entry(layer, keys[index], lambda lay: _unsupported_reason(lay, precision))
        entries.append(entry)
        if "status" in entry:
            continue
        try:
            result, scales_used, extra = _pack_layer(layer, config, precision, quantize, pixel_format, winograd,
                                                     compress_mode)
        except (ValueError, TypeError) as e:
            entry.update(status="error", reason=f"{type(e).__name__}: {e}")
            continue
        sets = result if isinstance(result, tuple) else (result,)
        ws = sets[0]
        # Winograd int16 weights carry winograd_scale: the accumulator is that much larger.
        sw = None if scales_used is None else scales_used / extra.get("winograd_scale", 1.0)
        entry.update(
            status="packed", kind=ws.kind, precision=ws.precision, pixel_format=ws.pixel_format,
            post_extension=ws.post_extension,
            quantization=_quantization(layer, ws.precision, quantize), scale_origin=_scale_origin(layer, ws.precision),
            scales=None if scales_used is None else [float(s) for s in scales_used], **extra,
            packed_shape=list(ws.packed_shape), kernel_groups=ws.kernel_groups,
            bytes_per_kernel=ws.bytes_per_kernel, meaningful_bytes=ws.meaningful_bytes)
        stem = f"{index:03d}_{_safe(layer.name)}"
        if ws.kind == "deconv":
            entry["sets"] = [{"phase": list(s.phase), **sink.weights(f"{stem}.set{i}", s)}
                             for i, s in enumerate(sets)]
        else:
            entry.update(sink.weights(stem, ws))
        bytes_in += layer.weights.nbytes
        bytes_out += sum(s.total_bytes for s in sets)
        if sw is None and precision != "fp16":  # ConvInteger / MatMulInteger: later nodes hold the scales
            entry["sdp"] = {"status": "skipped", "reason": "the model applies this layer's weight scales in later "
                                                           f"nodes ({layer.op_type} has none)"}
            continue
        bytes_out += _emit_operand(entry, sink, f"{stem}.sdp", conv_operand, layer, precision, config,
                                   None if sw is None else _sdp_weight_scales(sw), scales)
    bn_entries = []
    for index, bn in enumerate(batchnorms):
        entry = {"name": bn.name, "input": bn.input_name, "output": bn.output_name}
        bn_entries.append(entry)
        if getattr(bn, "error", None):
            entry["sdp"] = {"status": "error", "reason": bn.error}
            continue
        bytes_out += _emit_operand(entry, sink, f"bn{index:03d}_{_safe(bn.name)}.sdp", batchnorm_operand, bn,
                                   precision, config, scales)
    seconds = time.perf_counter() - t0
    counts = {s: sum(e["status"] == s for e in entries) for s in ("packed", "unsupported", "error")}
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "npupack_version": __version__, "format": "nvdla", "weight_format": NVDLA_DEFAULT, "target": config.name,
        "config": {**asdict(config), "precisions": list(config.precisions)},
        "precision": precision, "winograd": winograd, "compress": compress,
        "model": record,
        "calibration": None if calibration is None else Path(calibration).name,
        "layers": entries, "batchnorms": bn_entries,
        "summary": {"layers": len(entries), **counts, "bytes_in": bytes_in, "bytes_out": bytes_out,
                    "seconds": round(seconds, 3)},
        **(manifest_extra or {}),
    }
    return sink.finish(manifest)


def layer_entry(layer, key: str, unsupported) -> dict:
    """A layer's manifest entry before it is packed (docs/manifest.md): with ``status`` "error"
    where the model loader refused it, "unsupported" with the reason ``unsupported(layer)`` gives
    (None: the layer is to be packed)."""
    entry = {"name": layer.name, "key": key, "op_type": layer.op_type, **layer_fields(layer)}
    if getattr(layer, "error", None):
        entry.update(status="error", reason=layer.error)
        return entry
    if layer.weights is not None:
        entry["logical_shape"] = list(layer.weights.shape)
    reason = unsupported(layer)
    if reason:
        entry.update(status="unsupported", reason=reason)
    return entry


def _quantization(layer, precision: str, quantize: str):
    """How the packed integers were obtained: ``quantize`` (npupack quantised float weights),
    ``"model"`` (the model's integers as stored), None for fp16 (docs/manifest.md §4)."""
    if precision == "fp16":
        return None
    return "model" if layer.qweights is not None else quantize


def _scale_origin(layer, precision: str):
    if precision == "fp16":
        return None
    return layer.scale_origin if layer.qweights is not None else "computed"


def _sdp_weight_scales(sw):
    """Weight scales for the integer bias / rescale operand: a zero filter (scale 0) accumulates 0
    whatever its scale, so it takes the layer's largest scale (1 when all are zero) and its bias
    passes through the rescale unchanged instead of dividing by zero (docs/manifest.md §5)."""
    sw = np.asarray(sw, dtype=np.float32)
    if not (sw == 0).any():
        return sw
    peak = float(sw.max(initial=0.0))
    return np.where(sw == 0, np.float32(peak if peak > 0 else 1.0), sw).astype(np.float32)


def _emit_operand(entry: dict, sink, stem: str, make, *args) -> int:
    """Pack an SDP operand with ``make(*args)`` and record it under ``entry["sdp"]``; returns
    the bytes written. Problems are reported in the entry, not raised."""
    try:
        op, fields = make(*args)
    except (ValueError, TypeError) as e:
        entry["sdp"] = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
        return 0
    if op is None:
        if fields:
            entry["sdp"] = fields
        return 0
    entry["sdp"] = {"status": "packed", **fields, "mode": op.mode, "precision": op.precision,
                    "components": op.components, "data_size": op.data_size, "shape": list(op.shape),
                    **sink.operand(stem, op)}
    return op.nbytes


def _progress(items, enabled: bool):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc="packing", unit="layer", disable=None, leave=False)
