"""Read a directory written by :func:`npupack.job.pack_model` back: every surface's bytes checked
against the sha256 the manifest gives, the weights of each layer as :class:`WeightSurfaces`, and
a verification of the whole directory (``npupack verify``) that also unpacks every layer.

What a consumer of packed weights needs before loading them onto hardware, or after copying a
model zoo's packed weights around: that no byte changed and that every surface still decodes
with the mapping its manifest entry describes (docs/nvdla.md §5.4, 11.1, 15). Weights packed in
another vendor's format (``npupack pack --format openvino:...``) are read back through that
format's ``unpack`` and, given the model, checked value for value against it (docs/manifest.md §6).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from npupack.files import read_inside
from npupack.layout import is_int
from npupack.nvdla import Config, SdpOperand, WeightSurfaces, unpack_sdp, unpack_weights

__all__ = ["load_packed", "verify_packed", "PackedLayers"]


def _plain_name(name) -> bool:
    """A name of an entry of the directory itself: no path separator, not "." or ".." (a manifest
    is data; it must not make the reader open files elsewhere)."""
    return isinstance(name, str) and Path(name).name == name and name not in ("", ".", "..")


class _Reader:
    """The manifest of ``out_dir`` and the checked bytes of the parts it lists."""

    def __init__(self, out_dir):
        self.out = Path(out_dir)
        path = self.out / "manifest.json"
        try:
            self.manifest = json.loads(read_inside(self.out, "manifest.json", "out_dir"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"out_dir: {path} is not JSON ({e})") from None
        fmt = self.manifest.get("format") if isinstance(self.manifest, dict) else None
        # Another vendor's weights: the manifest names the weight format instead of a config.
        self.vendor = isinstance(fmt, str) and fmt != "nvdla" and isinstance(self.manifest.get("weight_format"), str)
        if fmt != "nvdla" and not self.vendor:
            raise ValueError(f"out_dir: {path} is not a manifest written by npupack pack (format 'nvdla', or a "
                             "weight_format)")
        try:
            cfg = self.manifest["config"] if not self.vendor else None
            self.config = None if self.vendor else Config(**{**cfg, "precisions": tuple(cfg["precisions"])})
            for key, rows in (("layers", self.manifest["layers"]), ("batchnorms", self.manifest.get("batchnorms", []))):
                if not (isinstance(rows, list) and all(isinstance(r, dict) and isinstance(r.get("name"), str)
                                                       for r in rows)):
                    raise TypeError(f"{key} is not a list of entries with a name")
            if not isinstance(self.manifest.get("image", {}), dict):
                raise TypeError("image is not an object")
        except (KeyError, TypeError) as e:
            raise ValueError(f"out_dir: {path} is not a valid pack manifest ({type(e).__name__}: {e})") from None
        self.parts = 0
        self.bytes = 0

    def read(self, part: dict, what: str) -> np.ndarray:
        """The ``size`` bytes at ``offset`` of the part's file; ValueError when the file is not
        inside the directory, is too short, or its bytes do not have the manifest's sha256."""
        name, offset, size, sha = (part.get(k) for k in ("file", "offset", "size", "sha256"))
        if not _plain_name(name):
            raise ValueError(f"{what}: file {name!r} is not a file name inside the directory")
        if not (is_int(offset) and is_int(size) and 0 <= offset and 0 <= size and isinstance(sha, str)):
            raise ValueError(f"{what}: the manifest gives no valid offset, size and sha256 for {name}")
        # Regular files inside the folder only, opened without blocking: a manifest is data and
        # must not make the reader follow a link out of the folder or wait on a FIFO.
        data = np.frombuffer(read_inside(self.out, name, what, offset, size), dtype=np.uint8)
        digest = hashlib.sha256(memoryview(data)).hexdigest()
        if digest != sha:
            raise ValueError(f"{what}: the {size} bytes at offset {offset} of {name} have sha256 {digest}, the "
                             f"manifest says {sha}")
        self.parts += 1
        self.bytes += size
        return data

    def operand(self, sdp: dict, label: str) -> SdpOperand:
        """The SdpOperand of a packed ``sdp`` entry (the job's operands live in memory: per
        channel or per element; elements per atom are the config's for the precision)."""
        if not isinstance(sdp, dict):
            raise ValueError(f"{label}: the manifest entry is not an object")
        data = self.read(sdp, label)
        try:
            return SdpOperand(data=data, registers=None, use=sdp["use"], mode=sdp["mode"], precision=sdp["precision"],
                              components=sdp["components"], data_size=sdp["data_size"],
                              elements_per_atom=self.config.atom_elements(sdp["precision"]),
                              shape=tuple(sdp["shape"]), config=self.config, line_stride=sdp.get("line_stride"),
                              surface_stride=sdp.get("surface_stride"))
        except KeyError as e:
            raise ValueError(f"{label}: the manifest entry has no {e}") from None
        except TypeError as e:
            raise ValueError(f"{label}: the manifest entry is malformed ({e})") from None

    def surfaces(self, entry: dict):
        """WeightSurfaces of a packed layer entry (a tuple of sets for deconvolution), or the
        PackedWeights of another vendor's format; errors name the layer."""
        label = f"layer {entry.get('key', entry.get('name'))!r}"
        if self.vendor:
            return self._vendor(entry, label)
        if "sets" in entry and not (isinstance(entry["sets"], list) and entry["sets"]):
            raise ValueError(f"{label}: the manifest entry lists no weight sets")
        try:
            sets = tuple(self._one(entry, part, label + (f" set {i}" if "phase" in part else ""))
                         for i, part in enumerate(entry.get("sets", [entry])))
        except KeyError as e:
            raise ValueError(f"{label}: the manifest entry has no {e}") from None
        except (TypeError, AttributeError) as e:  # a field of the wrong JSON type
            raise ValueError(f"{label}: the manifest entry is malformed ({type(e).__name__}: {e})") from None
        return sets if entry["kind"] == "deconv" else sets[0]

    def _vendor(self, entry: dict, label: str) -> "PackedWeights":
        try:
            parts = entry.get("group_surfaces") or [entry]
            data = tuple(self.read(p, f"{label} weight" + (f" group {p['group']}" if "group" in p else ""))
                         for p in parts)
            bias = entry.get("bias")
            bias_arr = None if bias is None else self.read(bias, f"{label} bias").view(
                "<i4" if bias["dtype"] == "int32" else "<f4")
            return PackedWeights(data=data, weight_formats=tuple(p.get("weight_format", entry["weight_format"])
                                                                 for p in parts),
                                 format_shapes=tuple(tuple(p["format_shape"]) for p in parts),
                                 logical_shape=tuple(entry["logical_shape"]), precision=entry["precision"],
                                 scales=entry["scales"], bias=bias_arr)
        except KeyError as e:
            raise ValueError(f"{label}: the manifest entry has no {e}") from None
        except (TypeError, AttributeError) as e:
            raise ValueError(f"{label}: the manifest entry is malformed ({type(e).__name__}: {e})") from None

    def _one(self, entry: dict, part: dict, label: str) -> WeightSurfaces:
        kind = entry["kind"]
        compressed = part["encoding"] == "compressed"
        return WeightSurfaces(
            weight=self.read(part, f"{label} weight"), kind=kind, precision=entry["precision"],
            shape=tuple(entry["logical_shape"]), packed_shape=tuple(entry["packed_shape"]),
            kernel_groups=entry["kernel_groups"], bytes_per_kernel=entry["bytes_per_kernel"],
            meaningful_bytes=entry["meaningful_bytes"], config=self.config,
            groups=entry["group"] if kind == "dc" else 1, post_extension=entry["post_extension"],
            wmb=self.read(part["wmb"], f"{label} WMB") if compressed else None,
            wgs=self.read(part["wgs"], f"{label} WGS") if compressed else None,
            phase=tuple(part["phase"]) if "phase" in part else None,
            stride=tuple(entry["strides"]) if kind in ("winograd", "deconv") else None,
            pixel_format=entry["pixel_format"], nonzero=part.get("nonzero"))


def load_packed(out_dir) -> dict:
    """The weights of every packed layer of a :func:`npupack.job.pack_model` output directory.

    Parameters
    ----------
    out_dir : path
        A directory with ``manifest.json`` and the surface files it names (one file per surface,
        or ``image.bin`` with ``--image``).

    Returns
    -------
    dict
        A :class:`PackedLayers`: layer key (the manifest's unique ``key``: the layer name, or
        ``name#2``, ... for repeated names) -> :class:`npupack.nvdla.WeightSurfaces`
        (deconvolution: the tuple of its stride-phase sets), in manifest order, for the layers
        with status ``"packed"``; an int looks a layer up by its position in the manifest. Each
        ``weight`` (``wmb``, ``wgs``) is a uint8 array of the surface's ``size`` bytes, read from
        its file at its offset; :func:`npupack.nvdla.unpack_weights` gives the weights back.

    Raises
    ------
    FileNotFoundError
        ``manifest.json`` or a surface file is missing.
    ValueError
        The manifest is not JSON or not an NVDLA pack manifest; a surface's file name leaves the
        directory or is not a regular file there (a symbolic link, FIFO, device or a file with a
        second hard link is never read), its file is too short, or its bytes do not have the
        manifest's sha256.
    """
    reader = _Reader(out_dir)
    layers = PackedLayers()
    for index, (key, e) in enumerate(zip(_keys(reader.manifest["layers"]), reader.manifest["layers"])):
        if e.get("status") == "packed":
            layers[key] = reader.surfaces(e)
            layers.indices[index] = key
    return layers


class PackedWeights:
    """One layer packed in a non-NVDLA weight format, as read back (docs/manifest.md §6).

    Attributes
    ----------
    data : tuple of numpy.ndarray
        uint8, one per surface (one per group when the format has no grouped form), each the
        ``size`` bytes of its file, sha256-checked.
    weight_formats : tuple of str
        The format of each surface (a grouped layer's may be the ``g_`` form).
    format_shapes : tuple of tuple
        Each surface's tensor shape in its format's logical order.
    logical_shape : tuple
        ``(K, C/group, R, S)`` (fully connected ``(K, C*R*S, 1, 1)``).
    precision : str
        ``"fp16"``, ``"fp32"``, ``"int8"`` or ``"int16"``.
    scales : list of float or None
        Per output channel: real weight = integer x scale (integer precisions).
    bias : numpy.ndarray or None
        float32 or int32 ``(K,)``.
    """

    def __init__(self, *, data, weight_formats, format_shapes, logical_shape, precision, scales, bias):
        self.data, self.weight_formats, self.format_shapes = data, weight_formats, format_shapes
        self.logical_shape, self.precision, self.scales, self.bias = logical_shape, precision, scales, bias

    def unpack(self) -> np.ndarray:
        """The layer's weights ``logical_shape`` in the precision's dtype, read through each
        surface's format (groups concatenated along K). Raises ValueError (LayoutError) for a
        surface the format cannot read (too short, unknown format, unknown precision)."""
        from npupack.weight_format import PRECISION_DTYPES, resolve

        if self.precision not in PRECISION_DTYPES:
            raise ValueError(f"precision: {self.precision!r} is not one of {tuple(PRECISION_DTYPES)}")
        dt = PRECISION_DTYPES[self.precision]
        parts = [resolve(name).unpack(buf, shape, dt)
                 for buf, name, shape in zip(self.data, self.weight_formats, self.format_shapes)]
        k = self.logical_shape[0] // len(parts)
        return np.concatenate([p.reshape((k,) + tuple(self.logical_shape[1:])) for p in parts], axis=0)

    def repack(self) -> tuple:
        """Each surface packed again from :meth:`unpack`: equal to ``data`` byte for byte when
        every element and every zero-filled byte is as the format writes it."""
        from npupack.weight_format import resolve

        values = self.unpack()
        k = values.shape[0] // len(self.data)
        return tuple(resolve(name).pack(values[i * k:(i + 1) * k].reshape(shape), precision=self.precision)
                     for i, (name, shape) in enumerate(zip(self.weight_formats, self.format_shapes)))


class PackedLayers(dict):
    """The packed layers of an output folder: layer key -> surfaces, in manifest order; also
    indexed by the layer's position in the manifest's ``layers`` list (an int). Keys are the
    manifest's unique ``key`` (the layer name; ``name#2``, ... for repeated names)."""

    def __init__(self):
        super().__init__()
        self.indices: dict = {}

    def __getitem__(self, key):
        if isinstance(key, int) and not isinstance(key, bool):
            if key not in self.indices:
                raise KeyError(f"layer {key} of the manifest is not a packed layer")
            key = self.indices[key]
        return super().__getitem__(key)


def _keys(entries) -> list:
    """Each entry's unique ``key`` (manifests from before keys: the name, ``name#n`` for repeats)."""
    seen: dict = {}
    keys = []
    for e in entries:
        key = e.get("key")
        if not isinstance(key, str):
            n = seen[e["name"]] = seen.get(e["name"], 0) + 1
            key = e["name"] if n == 1 else f"{e['name']}#{n}"
        keys.append(key)
    return keys


def verify_packed(out_dir, model=None) -> dict:
    """Check a :func:`npupack.job.pack_model` output directory: the sha256 of every surface the
    manifest lists (weights, WMB/WGS, SDP operands; with ``--image`` also the whole image), and
    that every packed layer unpacks with its manifest's mapping (:func:`unpack_weights`: fields
    consistent with the logical shape, compressed surfaces decodable; Winograd as the
    transformed ``(K, C_ext, 4, 4)`` tensor) and every SDP operand with its use, mode,
    precision, components and shape (:func:`unpack_sdp`: a surface of the layout's size).
    A :func:`npupack.bulk.pack_many` output directory (``summary.json`` and one directory per
    model) is checked model by model. Layers in another vendor's weight format
    (:class:`PackedWeights`) are unpacked through their format and packed again, which must
    give every byte back (elements and zero fill); with ``model`` their values must equal the
    model's weights after the same conversion or quantisation, bit for bit, and their scales
    the manifest's (:func:`npupack.job_vendor.layer_tensor`; docs/manifest.md §6.3).

    Parameters
    ----------
    out_dir : path
        The directory (``manifest.json`` and the files it names), or a pack-many directory.
    model : path, optional
        The ONNX model the directory was packed from (its sha256 must be the manifest's);
        non-NVDLA manifests only, ignored for NVDLA ones.

    Returns
    -------
    dict
        ``{"layers": packed layers checked, "parts": surfaces read, "bytes": bytes read,
        "problems": ["<layer>: <what is wrong>", ...], "not_packed": [(status, "<what>: <reason>"),
        ...]}``; no problems means every byte is as written, every layer decodes and the folder
        holds no file the manifest does not list. ``not_packed`` is what the manifest itself
        records as left out (kind "error", "unsupported", or "calibration" for integer operands
        skipped for lack of a calibration table). A pack-many directory adds ``"models"`` (models
        checked); its problems start with the model's directory name, and a model the summary
        lists as failed is a problem too.

    Raises
    ------
    FileNotFoundError
        Neither ``manifest.json`` nor ``summary.json`` is there.
    ValueError
        The manifest or summary is not JSON or not one npupack writes. Problems of single
        surfaces or models (missing or changed files) are listed in ``problems``, not raised.
    """
    out = Path(out_dir)
    if not (out / "manifest.json").exists() and (out / "summary.json").is_file():
        return _verify_many(out)
    reader = _Reader(out)
    problems, layers = [], 0
    not_packed = _not_packed(reader.manifest)
    expected = _model_layers(reader.manifest, model, problems) if reader.vendor and model is not None else None
    for entry in reader.manifest["layers"]:
        if entry.get("status") != "packed":
            continue
        layers += 1
        try:
            surfaces = reader.surfaces(entry)
        except (ValueError, OSError) as e:
            problems.append(str(e))
            continue
        if reader.vendor:
            problems += _check_vendor_layer(entry, surfaces, reader.manifest, expected)
            continue
        try:
            unpack_weights(surfaces, logical=entry["kind"] != "winograd")
        except (ValueError, TypeError) as e:
            problems.append(f"layer {entry.get('key', entry['name'])!r} does not unpack: {e}")
    operands = [(e["name"], e["sdp"]) for e in reader.manifest["layers"] + reader.manifest.get("batchnorms", [])
                if not isinstance(e.get("sdp", {}), dict) or e.get("sdp", {}).get("status") == "packed"]
    for name, sdp in operands:
        try:
            operand = reader.operand(sdp, f"{name!r} SDP operand")
        except (ValueError, OSError) as e:
            problems.append(str(e))
            continue
        try:
            unpack_sdp(operand)
        except (ValueError, TypeError) as e:
            problems.append(f"{name!r} SDP operand does not unpack: {e}")
    image = reader.manifest.get("image")
    if image is not None:
        try:
            reader.read({**image, "offset": 0, "size": image.get("nbytes")}, "image")
        except (ValueError, OSError) as e:
            problems.append(str(e))
    listed = {"manifest.json"} | _files_named(reader.manifest)
    if not problems:  # a damaged entry already explains a file it no longer names
        problems += [f"{p.name}: a file the manifest does not list (stale or foreign)"
                     for p in sorted(out.iterdir()) if p.name not in listed]
    return {"layers": layers, "parts": reader.parts, "bytes": reader.bytes, "problems": problems,
            "not_packed": not_packed}


def _model_layers(manifest: dict, model, problems: list):
    """layer key -> ConvLayer of ``model``, or None (with a problem) when it is not the packed model."""
    from npupack.job import _unique_keys, model_record
    from npupack.model import load_onnx

    record = model_record(model)
    if record.get("sha256") != manifest.get("model", {}).get("sha256"):
        problems.append(f"model: {model} has sha256 {record['sha256']}, the manifest's model has "
                        f"{manifest.get('model', {}).get('sha256')}")
        return None
    layers = load_onnx(model)
    return dict(zip(_unique_keys([layer.name for layer in layers]), layers))


def _check_vendor_layer(entry: dict, packed: PackedWeights, manifest: dict, expected) -> list:
    """Problems of one non-NVDLA layer: bytes that its format does not give back, values or
    scales other than the model's after the same conversion."""
    label = f"layer {entry.get('key', entry.get('name'))!r}"
    try:
        values = packed.unpack()
        again = packed.repack()
    except (ValueError, TypeError) as e:
        return [f"{label} does not unpack: {e}"]
    bad = [i for i, (a, b) in enumerate(zip(again, packed.data)) if a.tobytes() != b.tobytes()]
    if bad:
        return [f"{label}: surface {bad[0]} is not what {packed.weight_formats[bad[0]]} packs for its own values "
                "(an element out of place or a fill byte that is not 0)"]
    if expected is None:
        return []
    layer = expected.get(entry.get("key", entry.get("name")))
    if layer is None:
        return [f"{label}: not a layer of the model"]
    from npupack.job_vendor import layer_tensor

    try:
        want, scales, _, _ = layer_tensor(layer, packed.precision, manifest.get("quantize") or "per_filter")
    except (ValueError, TypeError) as e:
        return [f"{label}: the model's weights cannot be converted ({e})"]
    if want.shape != values.shape or np.ascontiguousarray(want).tobytes() != values.tobytes():
        return [f"{label}: the packed values differ from the model's weights as {packed.precision}"]
    if (scales is None) != (packed.scales is None) or \
            (scales is not None and [float(v) for v in scales] != list(packed.scales)):
        return [f"{label}: the manifest's scales differ from the model's"]
    return []


def _files_named(obj) -> set:
    """Every ``file`` name anywhere in a manifest."""
    if isinstance(obj, dict):
        found = {obj["file"]} if isinstance(obj.get("file"), str) else set()
        for v in obj.values():
            if isinstance(v, (dict, list)):
                found |= _files_named(v)
        return found
    if isinstance(obj, list):
        return set().union(*(_files_named(v) for v in obj)) if obj else set()
    return set()


def _not_packed(manifest: dict) -> list:
    """What the manifest itself says was left out: ``(kind, "<what>: <reason>")`` per layer or
    operand not packed, kind "error", "unsupported" or "calibration" (:func:`npupack.coverage.coverage`)."""
    from npupack.coverage import coverage

    return coverage(manifest)["lines"]


def _verify_many(out: Path) -> dict:
    """verify_packed of every model directory a pack-many ``summary.json`` lists."""
    try:
        rows = json.loads(read_inside(out, "summary.json", "out_dir"))["models"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise TypeError("models is not a list of rows")
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"out_dir: {out / 'summary.json'} is not a pack-many summary ({e})") from None
    report = {"models": 0, "layers": 0, "parts": 0, "bytes": 0, "problems": [], "not_packed": []}
    for row in rows:
        name = row.get("dir")
        if not _plain_name(name):
            report["problems"].append(f"summary row {row.get('model')!r}: directory {name!r} is not a name inside "
                                      "the directory")
            continue
        if row.get("status") not in ("packed", "skipped"):
            report["problems"].append(f"{name}: not packed ({row.get('reason', row.get('status'))})")
            continue
        report["models"] += 1
        try:
            one = verify_packed(out / name)
        except (ValueError, OSError) as e:
            report["problems"].append(f"{name}: {e}")
            continue
        for key in ("layers", "parts", "bytes"):
            report[key] += one[key]
        report["problems"] += [f"{name}: {p}" for p in one["problems"]]
        report["not_packed"] += [(status, f"{name}: {what}") for status, what in one["not_packed"]]
    return report
