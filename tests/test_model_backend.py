"""The Conv-family models of the ONNX backend test data shipped inside the onnx package
(``pytorch-converted``, ``pytorch-operator``, ``light``, and the ``node`` tests of releases that
ship them): every weight-bearing layer packs or is reported with a true reason; packed weights
read back as the NumPy quantiser of docs/nvdla.md §2.3 gives them, and onnxruntime run with the
unpacked, dequantised weights reproduces the test's expected output within the precision's
error bound."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")  # the musllinux wheels' tests run without onnx
ort = pytest.importorskip("onnxruntime")
from onnx import numpy_helper  # noqa: E402

from npupack.model import load_onnx  # noqa: E402
from tests.model_check import (BACKEND_DATA, dequantised, kernel_axis, onnx_weight, pack,  # noqa: E402
                               reference_quantize, run, tensor_values, with_weights)

_FAMILY = ("conv", "linear", "gemm", "matmul", "qlinearconv", "convinteger", "qlinearmatmul")
_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul", "QLinearConv", "ConvInteger", "QLinearMatMul", "MatMulInteger")
_WEIGHT_INPUT = {"QLinearConv": 3, "QLinearMatMul": 3}  # 1 for the others
_INTEGER = {"QLinearConv": (4, 5), "QLinearMatMul": (4, 5), "ConvInteger": (None, 3), "MatMulInteger": (None, 3)}


def _node_cases() -> dict:
    """The ``node`` tests of the Conv family. Wheels from onnx 1.18 on no longer ship their files,
    so they are made here by onnx's own generators (importing a case module runs its exports)."""
    import importlib

    try:
        cases = importlib.import_module("onnx.backend.test.case.node")
        for mod in ("conv", "convtranspose", "gemm", "matmul", "qlinearconv", "convinteger", "qlinearmatmul",
                    "matmulinteger"):
            importlib.import_module(f"onnx.backend.test.case.node.{mod}")
    except ImportError:
        return {}
    return {c.name: c for c in cases._NodeTestCases if c.model.graph.node[0].op_type in _OPS and c.data_sets}


NODE_CASES = _node_cases()


def _cases():
    cases = [pytest.param(("node", name), id=f"node/{name}") for name in sorted(NODE_CASES)]
    for group in ("pytorch-converted", "pytorch-operator", "node"):
        for d in sorted((BACKEND_DATA / group).glob("test_*")) if (BACKEND_DATA / group).is_dir() else []:
            stem = d.name[len("test_"):].lower().replace("operator_", "")
            if group == "node" and d.name in NODE_CASES:
                continue
            if stem.startswith(_FAMILY) and (d / "model.onnx").is_file() and (d / "test_data_set_0").is_dir():
                cases.append(pytest.param((group, d), id=f"{group}/{d.name}"))
    return cases


def _constant_inputs(model, inputs):
    """A node test feeds weights as graph inputs; a deployed model stores them. Inputs after the
    first become initializers (the weights, scales, zero points and bias of the node)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    graph_inputs = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    for name, value in list(zip(graph_inputs, inputs))[1:]:
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    del m.graph.input[1:]
    return m


def _read_set(d):
    load = lambda p: numpy_helper.to_array(onnx.load_tensor(str(p)))  # noqa: E731
    return ([load(p) for p in sorted((d / "test_data_set_0").glob("input_*.pb"))],
            [load(p) for p in sorted((d / "test_data_set_0").glob("output_*.pb"))])


def _load(case):
    group, where = case
    if group == "node" and isinstance(where, str):
        c = NODE_CASES[where]
        model, (inputs, outputs) = c.model, c.data_sets[0]
    else:
        model = onnx.load(str(where / "model.onnx"))
        inputs, outputs = _read_set(where)
    if group == "node":
        model = _constant_inputs(model, inputs)
        inputs = inputs[:1]
    return model, [np.asarray(i) for i in inputs], [np.asarray(o) for o in outputs]


def _true_reason(entry, node, w, precision):
    """What a Conv-family test may leave out, each for the reason the manifest gives."""
    r = entry["reason"]
    if "3-d convolution" in r:
        return w.ndim == 5
    if "zero point" in r or "do not fit" in r:
        return node.op_type in _INTEGER and precision != "fp16"
    if "fully connected layer has a 2-d weight" in r:
        return w.ndim != 2
    if "transA=1" in r:
        return any(a.name == "transA" and a.i == 1 for a in node.attribute)
    if "grouped deconvolution" in r or "dilated deconvolution" in r:
        return node.op_type == "ConvTranspose"
    return False


@pytest.mark.parametrize("precision", ["int8", "fp16"])
@pytest.mark.parametrize("case", _cases())
def test_backend_model(case, precision, tmp_path):
    model, inputs, outputs = _load(case)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    manifest, weights = pack(path, tmp_path / "out", precision=precision)
    entries = manifest["layers"]
    nodes = [n for n in model.graph.node if n.op_type in _OPS]
    feeds = {model.graph.input[0].name: inputs[0]}
    wnames = [n.input[_WEIGHT_INPUT.get(n.op_type, 1)] for n in nodes]
    inits = tensor_values(model, [i for n in nodes for i in n.input if i and i not in feeds], feeds)
    assert [e["op_type"] for e in entries] == [n.op_type for n in nodes]
    replace, steps = {}, []
    for entry, node, wname in zip(entries, nodes, wnames):
        w = np.asarray(inits[wname])
        if entry["status"] != "packed":
            assert entry["status"] == "unsupported" and _true_reason(entry, node, w, precision), entry
            continue
        w4 = weights[entry["key"]]
        assert list(w4.shape) == entry["logical_shape"]
        if node.op_type in _INTEGER:
            # The model's integers as stored (int8 / int16), or (q - zero point) x scale (fp16).
            si, zi = _INTEGER[node.op_type]
            scale = 1.0 if si is None else np.asarray(inits[node.input[si]], np.float64)
            zp = np.asarray(inits[node.input[zi]], np.float64) if len(node.input) > zi and node.input[zi] else 0.0
            if precision == "fp16":
                real = (w.astype(np.float64) - _along_kernel(zp, entry, w)) * _along_kernel(scale, entry, w)
                np.testing.assert_array_equal(w4, _logical(entry, real.astype(np.float32)).astype(np.float16))
            else:
                np.testing.assert_array_equal(w4, _logical(entry, w))
                assert entry["quantization"] == "model"
            continue
        real = w.astype(np.float32)
        alpha = np.float32(next((a.f for a in node.attribute if a.name == "alpha"), 1.0)) if node.op_type == "Gemm" \
            else np.float32(1)
        real = real * alpha  # Gemm's alpha scales the product: the job folds it into the weights
        logical = _logical(entry, real)
        if precision == "int8":
            q, scale = reference_quantize(logical, 127, kernel_axis(entry))
            np.testing.assert_array_equal(w4, q)
            np.testing.assert_array_equal(np.float32(entry["scales"]), scale)
        else:
            np.testing.assert_array_equal(w4, logical.astype(np.float16))
        replace[wname] = onnx_weight(entry, dequantised(entry, w4)) / alpha  # the model applies alpha again
        # Largest error of one output: half a quantisation step (int8) or fp16's relative
        # rounding (2^-11) per weight, times the largest input, over the layer's fan-in.
        fan = int(np.prod(entry["logical_shape"])) // entry["logical_shape"][kernel_axis(entry)]
        steps.append((max(entry["scales"]) / 2 if precision == "int8" else 2.0 ** -11 * float(np.abs(real).max()))
                     * fan)
    if not replace:
        return
    assert len(nodes) == 1, "the Conv-family tests have one weight-bearing node"
    got = run(with_weights(model, replace), feeds)
    bound = steps[0] * float(np.abs(inputs[0]).max()) + 1e-4 * (1 + float(np.abs(outputs[0]).max()))
    np.testing.assert_allclose(got[0], outputs[0], rtol=0, atol=bound)


def _along_kernel(v, entry, w):
    """A per-tensor or per-kernel quantisation parameter broadcast over the model's weight."""
    v = np.asarray(v, np.float64).reshape(-1)
    if v.size == 1:
        return v[0]
    if "fc" in entry:  # per output column of a (C, K) matrix, per row of a (K, C) one
        return v.reshape(-1, 1) if entry["fc"]["weight_order"] == "KC" else v.reshape(1, -1)
    return v.reshape((-1,) + (1,) * (w.ndim - 1))


def _logical(entry, real):
    """The model's float weight in the packed logical shape (the job's folding, written here)."""
    if "fc" in entry:
        m = real if entry["fc"]["weight_order"] == "KC" else real.T
        return m.reshape(entry["logical_shape"])
    return real[:, :, None, :] if real.ndim == 3 else real


def test_light_alexnet_folds_its_classifier():
    """AlexNet (``light``: weights made by ConstantOfShape from shape initializers) is read whole;
    its first FC follows a Reshape of the 256 x 6 x 6 pool output, so it is a 6 x 6 convolution."""
    path = BACKEND_DATA / "light" / "light_bvlc_alexnet.onnx"
    if not path.is_file():
        pytest.skip("this onnx release ships no light models")
    model = onnx.load(str(path))
    layers = load_onnx(path)
    assert [e.op_type for e in layers] == ["Conv"] * 5 + ["Gemm"] * 3
    assert all(e.note is None and e.weights is not None for e in layers)
    gemm = next(n for n in model.graph.node if n.op_type == "Gemm")
    fill = next(n for n in model.graph.node if n.output[0] == gemm.input[1])  # ConstantOfShape
    shape = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == fill.input[0]))
    fc6 = np.full(shape, numpy_helper.to_array(fill.attribute[0].t).reshape(()), np.float32)  # (4096, 9216)
    assert layers[5].fc_fold == (6, 6) and layers[5].weights.shape == (4096, 256, 6, 6)
    np.testing.assert_array_equal(layers[5].weights.reshape(4096, -1), fc6)
    assert [e.fc_fold for e in layers[6:]] == [(1, 1), (1, 1)]
