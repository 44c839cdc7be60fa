"""Quantised models as onnxruntime.quantization makes them from a float model (QDQ,
QOperator with QLinearConv / QGemm / QLinearMatMul, dynamic ConvInteger / MatMulInteger): their
int8 weights pack as stored, with the model's scales; onnxruntime run with the unpacked integers
in place of the model's gives the quantised model's own output, bit for bit."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")  # the musllinux wheels' tests run without onnx
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.model_check import pack, run  # noqa: E402


def _float_model(path, rng):
    """x (1,3,8,8) -> Conv 3x3 s2 -> Relu -> Flatten -> Gemm (transB) -> MatMul: the classifier
    head pattern of public exporters."""
    arrays = {"w1": rng.standard_normal((8, 3, 3, 3)), "b1": rng.standard_normal(8),
              "w2": rng.standard_normal((10, 8 * 4 * 4)), "b2": rng.standard_normal(10),
              "w3": rng.standard_normal((10, 6))}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
             helper.make_node("Flatten", ["r1"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["g"], name="fc", transB=1),
             helper.make_node("MatMul", ["g", "w3"], ["y"], name="proj")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])],
                              [numpy_helper.from_array(a.astype(np.float32), n) for n, a in arrays.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


class _Reader:
    def __init__(self, rng):
        self.data = iter([{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.data, None)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    rng = np.random.default_rng(7)
    d = tmp_path_factory.mktemp("quantised")
    _float_model(d / "float.onnx", rng)
    q = quantization
    out = {}
    for fmt in ("QDQ", "QOperator"):
        out[fmt] = d / f"{fmt}.onnx"
        q.quantize_static(str(d / "float.onnx"), str(out[fmt]), _Reader(rng), quant_format=getattr(q.QuantFormat, fmt),
                          per_channel=True, weight_type=q.QuantType.QInt8, activation_type=q.QuantType.QInt8)
    out["dynamic"] = d / "dynamic.onnx"
    q.quantize_dynamic(str(d / "float.onnx"), str(out["dynamic"]), weight_type=q.QuantType.QInt8,
                       op_types_to_quantize=["Conv", "MatMul", "Gemm"])
    return out


def _stored_weights(model):
    """{weight-bearing node output: (integer weight initializer name, its array)}: the int8
    tensor behind each layer, found by reading the graph here (QDQ: the DequantizeLinear input)."""
    producers = {o: n for n in model.graph.node for o in n.output}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    found = {}
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm", "MatMul", "QLinearConv", "QGemm", "QLinearMatMul", "ConvInteger",
                                "MatMulInteger"):
            continue
        out, name = node.output[0], node.input[3 if node.op_type.startswith("Q") else 1]
        if name in producers and producers[name].op_type == "DequantizeLinear":
            name = producers[name].input[0]
        if name in inits and inits[name].dtype == np.int8:
            found[out] = (name, inits[name])
    return found


def _as_model_shape(entry, w4, like):
    if "fc" in entry:
        m = w4.reshape(w4.shape[0], -1)
        return m if entry["fc"]["weight_order"] == "KC" else m.T
    return w4.reshape(like.shape)


@pytest.mark.parametrize("fmt, ops", [("QDQ", ["Conv", "Gemm", "MatMul"]),
                                      ("QOperator", ["QLinearConv", "QGemm", "QLinearMatMul"]),
                                      ("dynamic", ["ConvInteger", "MatMulInteger", "MatMulInteger"])])
@pytest.mark.parametrize("precision", ["int8", "int16"])
def test_quantised_weights_pack_as_stored(models, fmt, ops, precision, tmp_path):
    path = models[fmt]
    model = onnx.load(str(path))
    manifest, weights = pack(path, tmp_path / "out", precision=precision)
    layers = manifest["layers"]
    assert [e["op_type"] for e in layers] == ops
    assert all(e["status"] == "packed" and e["quantization"] == "model" for e in layers), layers
    stored = _stored_weights(model)
    assert len(stored) == 3
    replace = {}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for entry, (name, q) in zip(layers, stored.values()):
        w4 = weights[entry["key"]]
        assert w4.dtype == np.dtype(precision)
        back = _as_model_shape(entry, w4, q)
        np.testing.assert_array_equal(back, q)  # as stored, not re-quantised
        replace[name] = back.astype(np.int8)
        if fmt == "dynamic":
            assert entry["scale_origin"] == "none" and entry["scales"] is None
        else:
            assert entry["scale_origin"] == "model"
            scale_name = next(n.input[1] for n in model.graph.node if n.op_type == "DequantizeLinear" and
                              n.input[0] == name) if fmt == "QDQ" else \
                next(n.input[4] for n in model.graph.node if len(n.input) > 3 and n.input[3] == name)
            np.testing.assert_array_equal(np.float32(entry["scales"]),
                                          np.broadcast_to(inits[scale_name], (len(entry["scales"]),)))
    assert layers[1]["fc"]["folded_rs"] == [4, 4] and layers[1]["logical_shape"] == [10, 8, 4, 4]
    # onnxruntime with the unpacked integers in place of the model's: the same output.
    x = {"x": np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    swapped = onnx.ModelProto()
    swapped.CopyFrom(model)
    for t in swapped.graph.initializer:
        if t.name in replace:
            t.CopyFrom(numpy_helper.from_array(replace[t.name], t.name))
    np.testing.assert_array_equal(run(swapped, x)[0], run(model, x)[0])


def _qdq_conv(path, zero_point, dtype=np.int8, top=9):
    """One QDQ Conv whose integer weights (up to ``top``) have the given zero point."""
    q = np.arange(-8, 10, dtype=np.int64).reshape(2, 1, 3, 3)
    q[1, 0, 2, 2] = top
    q = np.clip(q + zero_point, np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype)
    inits = [numpy_helper.from_array(q, "wq"), numpy_helper.from_array(np.float32([0.5, 0.25]), "ws"),
             numpy_helper.from_array(np.full(2, zero_point, dtype), "wz")]
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0),
             helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return q


def test_weight_zero_point_is_reported_for_integer_targets(tmp_path):
    _qdq_conv(tmp_path / "m.onnx", 3)
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "int8")
    (entry,) = manifest["layers"]
    assert entry["status"] == "unsupported"
    assert entry["reason"] == "weight zero point 3 (NVDLA weights are symmetric)"


def test_weight_zero_point_dequantises_for_fp16(tmp_path):
    q = _qdq_conv(tmp_path / "m.onnx", 3)
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "fp16", precision="fp16")
    (entry,) = manifest["layers"]
    assert entry["status"] == "packed" and entry["quantization"] is None
    real = (q.astype(np.float32) - 3) * np.float32([0.5, 0.25]).reshape(2, 1, 1, 1)
    np.testing.assert_array_equal(weights["conv"], real.astype(np.float16))


def test_uint8_weights_with_zero_point_0(tmp_path):
    """uint8 weights (zero point 0) above 127 do not fit int8; int16 holds them exactly."""
    q = _qdq_conv(tmp_path / "m.onnx", 0, np.uint8, top=200)
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "int8")
    assert manifest["layers"][0]["status"] == "unsupported"
    assert manifest["layers"][0]["reason"] == "the model's uint8 weights (0..200) do not fit int8"
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "int16", precision="int16")
    assert manifest["layers"][0]["status"] == "packed"
    np.testing.assert_array_equal(weights["conv"], q)
