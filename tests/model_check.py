"""Checks shared by the tests/test_model_*.py files: pack a model, validate its manifest against
the shipped JSON Schema, read every packed layer back, compare the integers with a NumPy
quantiser written from docs/nvdla.md §2.3, and give the dequantised weights in the model's own
shape for a reference run with onnxruntime."""
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

pytest.importorskip("jsonschema")  # every manifest written here is validated

from npupack.job import pack_model
from npupack.manifest import validate_manifest
from npupack.nvdla import NV_FULL, unpack_weights
from npupack.readback import load_packed

BACKEND_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"


def pack(model_path, out, precision="int8", **kw):
    """Pack, validate the manifest (returned and written) and read every packed layer back:
    ``(manifest, {key: logical weights as unpacked})``."""
    kw.setdefault("progress", False)
    manifest = pack_model(model_path, out, config=NV_FULL, precision=precision, **kw)
    validate_manifest(manifest)
    validate_manifest(__import__("json").loads((Path(out) / "manifest.json").read_text()))
    packed = load_packed(out)
    return manifest, {key: unpack_weights(s) for key, s in packed.items()}


def reference_quantize(w, qmax, axis=0):
    """docs/nvdla.md §2.3 in NumPy: per filter, scale = fl32(max|w| / qmax), inv = fl32(1 / scale),
    q = clamp(floor(fl32(fl32(w * inv) + 0.5))); zero filters (and scales whose inverse is no
    float32) give q = 0, scale 0."""
    w = np.moveaxis(np.asarray(w, np.float32), axis, 0)
    peak = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    scale = (peak / np.float32(qmax)).astype(np.float32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = (np.float32(1) / scale).astype(np.float32)
        dead = ~np.isfinite(inv)
        inv[dead] = 0
        prod = (w * inv.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)
        q = np.floor((prod + np.float32(0.5)).astype(np.float32))
    q = np.clip(q, -qmax, qmax)
    scale[dead] = 0
    return np.moveaxis(q, 0, axis), scale


def kernel_axis(entry):
    return 1 if entry["op_type"] == "ConvTranspose" else 0


def dequantised(entry, w4):
    """The packed weights as real values: integers times the manifest's scales (per kernel)."""
    w = np.asarray(w4).astype(np.float32)
    if entry["scales"] is not None:
        shape = [1] * w.ndim
        shape[kernel_axis(entry)] = -1
        w = w * np.asarray(entry["scales"], np.float32).reshape(shape)
    return w


def onnx_weight(entry, w4):
    """Logical (K, C, R, S) weights back in the model's shape (Conv1d, FC weight order)."""
    if "fc" in entry:
        m = w4.reshape(w4.shape[0], -1)
        return m if entry["fc"]["weight_order"] == "KC" else m.T
    if entry["spatial_rank"] == 1:
        return w4[:, :, 0, :]
    return w4


def tensor_values(model, names, feeds):
    """The values of tensors ``names`` of ``model`` for inputs ``feeds``, by onnx's reference
    evaluator (initializers directly)."""
    from onnx.reference import ReferenceEvaluator

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    todo = [n for n in names if n not in inits]
    if todo:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        del m.graph.output[:]
        m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in todo)
        inits.update(zip(todo, ReferenceEvaluator(m).run(None, feeds)))
    return {n: inits[n] for n in names}


def with_weights(model, replace: dict):
    """A copy of ``model`` in which each tensor named in ``replace`` is an initializer holding the
    given array (its producer nodes, if any, are dropped by onnxruntime as unused)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    kept = [t for t in m.graph.initializer if t.name not in replace]
    del m.graph.initializer[:]
    m.graph.initializer.extend(kept + [numpy_helper.from_array(np.asarray(v, np.float32), n)
                                       for n, v in replace.items()])
    listed = {i.name for i in m.graph.input}
    if m.ir_version < 4:  # before IR 4 every initializer is also a graph input
        m.graph.input.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, np.shape(v))
                             for n, v in replace.items() if n not in listed)
    for node in m.graph.node:  # a producer of a replaced tensor writes a dead copy instead
        node.output[:] = [o + "__replaced" if o in replace else o for o in node.output]
    return m


def run(model, feeds):
    """onnxruntime's outputs; models of opsets older than onnxruntime implements (the backend
    data's opset 6) are converted to opset 13 with onnx's version converter first."""
    import onnxruntime as ort

    if min(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) < 7:
        model = onnx.version_converter.convert_version(model, 13)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)
