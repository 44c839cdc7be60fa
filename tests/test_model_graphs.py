"""Models built here from public exporters' patterns: weights behind constant subgraphs (Cast of
fp16, Reshape, Transpose, Identity, Unsqueeze), convolutions inside If branches, Conv1d, a
Flatten + Gemm head, auto_pad and transposed-convolution output fields, odd node names, dilated
first layers and dead filters. References: NumPy, onnx's reference evaluator, onnxruntime."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")  # the musllinux wheels' tests run without onnx
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from npupack.model import load_onnx  # noqa: E402
from tests.model_check import dequantised, pack, reference_quantize, run, tensor_values  # noqa: E402


def _save(path, nodes, inits, x_shape, opset=13, outputs=("y",)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, path)
    return model


def test_weights_behind_constant_subgraphs(tmp_path, rng):
    """fp16 initializer -> Cast -> Reshape; a transposed initializer -> Transpose -> Identity; a
    Constant -> Unsqueeze: every weight resolves to what onnx's reference evaluator computes."""
    w1 = rng.standard_normal(4 * 3 * 3 * 3).astype(np.float16)
    w2t = rng.standard_normal((3, 3, 4, 4)).astype(np.float32)  # (R, S, C, K)
    w3 = rng.standard_normal((2, 4, 1)).astype(np.float32)
    nodes = [helper.make_node("Cast", ["w1h"], ["w1f"], to=TensorProto.FLOAT),
             helper.make_node("Reshape", ["w1f", "shape"], ["w1"]),
             helper.make_node("Transpose", ["w2t"], ["w2p"], perm=[3, 2, 0, 1]),
             helper.make_node("Identity", ["w2p"], ["w2"]),
             helper.make_node("Constant", [], ["w3c"], value=numpy_helper.from_array(w3)),
             helper.make_node("Unsqueeze", ["w3c", "axis"], ["w3"]),
             helper.make_node("Conv", ["x", "w1"], ["a"], name="cast_reshape", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w2"], ["b"], name="transpose", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["b", "w3"], ["y"], name="unsqueeze")]
    model = _save(tmp_path / "m.onnx", nodes, {"w1h": w1, "shape": np.int64([4, 3, 3, 3]), "w2t": w2t,
                                               "axis": np.int64([3])}, [1, 3, 6, 6])
    layers = load_onnx(tmp_path / "m.onnx")
    expected = tensor_values(model, ["w1", "w2", "w3"], {"x": np.zeros((1, 3, 6, 6), np.float32)})
    assert [layer.name for layer in layers] == ["cast_reshape", "transpose", "unsqueeze"]
    for layer, name in zip(layers, ["w1", "w2", "w3"]):
        assert layer.note is None
        np.testing.assert_array_equal(layer.weights, expected[name])
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "out")
    for entry, name in zip(manifest["layers"], ["w1", "w2", "w3"]):
        np.testing.assert_array_equal(weights[entry["key"]], reference_quantize(expected[name], 127)[0])


def test_weights_from_the_model_input_are_reported(tmp_path, rng):
    nodes = [helper.make_node("Mul", ["x", "x"], ["w"]), helper.make_node("Conv", ["x", "w"], ["y"], name="c")]
    _save(tmp_path / "m.onnx", nodes, {}, [1, 1, 1, 1])
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "out")
    assert manifest["layers"][0]["status"] == "unsupported"
    assert manifest["layers"][0]["reason"] == \
        "weight 'w' is computed at run time from the model's inputs, not stored in the model"


def test_convolutions_inside_if_branches(tmp_path, rng):
    """An exporter that puts convolutions in ``If`` branches: both branches' layers are listed with
    their subgraph path; the then branch reads a weight of the outer graph."""
    w_outer = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w_inner = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    then_g = helper.make_graph([helper.make_node("Conv", ["x", "w_outer"], ["t"], name="conv_a", pads=[1] * 4)],
                               "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Conv", ["x", "w_inner"], ["e"], name="")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
                               [numpy_helper.from_array(w_inner, "w_inner")])
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], keepdims=0),
             helper.make_node("Greater", ["m", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)]
    _save(tmp_path / "m.onnx", nodes, {"w_outer": w_outer, "zero": np.float32(0)}, [1, 3, 5, 5])
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "out", precision="fp16")
    layers = manifest["layers"]
    # Branches in the order of the node's attributes (onnx's helper sorts them by name).
    assert [(e["name"], e["path"], e["status"]) for e in layers] == [
        ("branch/else_branch/Conv_0", "branch/else_branch", "packed"),
        ("branch/then_branch/conv_a", "branch/then_branch", "packed")]
    np.testing.assert_array_equal(weights[layers[0]["key"]], w_inner.astype(np.float16))
    np.testing.assert_array_equal(weights[layers[1]["key"]], w_outer.astype(np.float16))
    assert layers[1]["kind"] == "dc"  # a subgraph's input is not the model's image


def test_conv1d_is_a_2d_convolution_with_h_1(tmp_path, rng):
    """Conv1d (K, C, L) packs as (K, C, 1, L); onnxruntime's 2-D convolution over an H = 1 input
    with the unpacked weights gives the 1-D model's output."""
    w = rng.standard_normal((6, 4, 5)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c1d", strides=[2], auto_pad="SAME_UPPER")]
    model = _save(tmp_path / "m.onnx", nodes, {"w": w}, [1, 4, 21])
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "out", precision="fp16")
    (entry,) = manifest["layers"]
    assert entry["status"] == "packed" and entry["spatial_rank"] == 1 and entry["logical_shape"] == [6, 4, 1, 5]
    assert entry["strides"] == [1, 2] and entry["dilations"] == [1, 1] and entry["auto_pad"] == "SAME_UPPER"
    # SAME_UPPER: out = ceil(21 / 2) = 11, total pad = (11 - 1) * 2 + 5 - 21 = 4
    assert entry["pads"] == [0, 2, 0, 2] and entry["onnx_weight_shape"] == [6, 4, 5]
    x = rng.standard_normal((1, 4, 21)).astype(np.float32)
    as2d = _save(tmp_path / "m2.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], strides=entry["strides"],
                                                         dilations=entry["dilations"], pads=entry["pads"])],
                 {"w": dequantised(entry, weights["c1d"])}, [1, 4, 1, 21])
    np.testing.assert_allclose(run(as2d, {"x": x[:, :, None, :]})[0][:, :, 0, :], run(model, {"x": x})[0],
                               rtol=0, atol=2.0 ** -11 * np.abs(w).max() * np.abs(x).sum(axis=(0, 2)).max() * 2)


@pytest.mark.parametrize("auto_pad, kernel, stride, expected", [
    ("SAME_UPPER", 2, 1, [0, 0, 1, 1]), ("SAME_LOWER", 2, 1, [1, 1, 0, 0]), ("VALID", 3, 2, [0, 0, 0, 0]),
    ("SAME_UPPER", 4, 3, [1, 0, 1, 1])])
def test_auto_pad_is_resolved(tmp_path, rng, auto_pad, kernel, stride, expected):
    """The manifest's pads are what onnxruntime pads: the same model with explicit pads gives the
    auto_pad model's output."""
    w = rng.standard_normal((2, 3, kernel, kernel)).astype(np.float32)
    shape = [1, 3, 5, 6]
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c", auto_pad=auto_pad, strides=[stride, stride])
    model = _save(tmp_path / "m.onnx", [node], {"w": w}, shape)
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "out", pixel_format=None)
    entry = manifest["layers"][0]
    assert entry["auto_pad"] == auto_pad and entry["pads"] == expected
    explicit = _save(tmp_path / "e.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], pads=entry["pads"],
                                                            strides=[stride, stride])], {"w": w}, shape)
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(run(explicit, {"x": x})[0], run(model, {"x": x})[0])


def test_same_padding_without_an_input_size_is_not_guessed(tmp_path, rng):
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c", auto_pad="SAME_UPPER")
    _save(tmp_path / "m.onnx", [node], {"w": rng.standard_normal((2, 3, 3, 3)).astype(np.float32)},
          [1, 3, "H", "W"])
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "out")
    assert manifest["layers"][0]["status"] == "packed" and manifest["layers"][0]["pads"] is None


def test_conv_transpose_output_fields(tmp_path, rng):
    """output_padding and output_shape are recorded, and the pads output_shape implies are the
    pads onnxruntime uses (the explicit model gives the same output)."""
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    shape = [1, 3, 4, 5]
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2], output_shape=[8, 10])
    model = _save(tmp_path / "m.onnx", [node], {"w": w}, shape)
    node2 = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up2", strides=[2, 2],
                             output_padding=[1, 0], pads=[0, 1, 0, 0])
    _save(tmp_path / "m2.onnx", [node2], {"w": w}, shape)
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "out")
    entry = manifest["layers"][0]
    assert entry["output_shape"] == [8, 10] and entry["output_padding"] == [0, 0]
    manifest2, _ = pack(tmp_path / "m2.onnx", tmp_path / "out2")
    assert manifest2["layers"][0]["output_padding"] == [1, 0] and manifest2["layers"][0]["output_shape"] is None
    explicit = _save(tmp_path / "e.onnx", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                                                            pads=entry["pads"])], {"w": w}, shape)
    x = rng.standard_normal(shape).astype(np.float32)
    want = run(model, {"x": x})[0]
    got = run(explicit, {"x": x})[0]
    assert want.shape == (1, 2, 8, 10)
    np.testing.assert_array_equal(got[:, :, :8, :10], want)


def test_flatten_gemm_head_folds_to_the_cube(tmp_path, rng):
    """Conv -> Flatten -> Gemm (transB=1) and -> MatMul: each FC is a convolution whose R x S is
    the 4 x 4 cube it reads; the folded weights applied to the cube (NumPy) give onnxruntime's FC
    output."""
    wc = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    wg = rng.standard_normal((7, 5 * 4 * 4)).astype(np.float32)
    wm = rng.standard_normal((5 * 4 * 4, 3)).astype(np.float32)
    bg = rng.standard_normal(7).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "wc"], ["cube"], name="conv", pads=[1] * 4, strides=[2, 2]),
             helper.make_node("Flatten", ["cube"], ["flat"]),
             helper.make_node("Gemm", ["flat", "wg", "bg"], ["y"], name="fc", transB=1, alpha=0.5, beta=2.0),
             helper.make_node("MatMul", ["flat", "wm"], ["z"], name="fc_matmul")]
    model = _save(tmp_path / "m.onnx", nodes, {"wc": wc, "wg": wg, "bg": bg, "wm": wm}, [1, 3, 8, 8],
                  outputs=("y", "z", "cube"))
    layers = load_onnx(tmp_path / "m.onnx")
    np.testing.assert_array_equal(layers[1].bias, 2 * bg)
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "out", precision="fp16")
    fc, mm = manifest["layers"][1:]
    assert fc["fc"] == {"folded_rs": [4, 4], "weight_order": "KC", "input_shape": [1, 80]}
    assert fc["logical_shape"] == [7, 5, 4, 4] and mm["logical_shape"] == [3, 5, 4, 4]
    assert mm["fc"]["weight_order"] == "CK"
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    y, z, cube = run(model, {"x": x})
    for entry, out, extra in ((fc, y, 2 * bg), (mm, z, 0)):
        w4 = weights[entry["key"]].astype(np.float32)
        conv = np.einsum("kchw,chw->k", w4, cube[0]) + extra
        np.testing.assert_allclose(conv, out[0], rtol=0, atol=2.0 ** -9 * np.abs(w4).max() * np.abs(cube).sum())


def test_matmul_roles(tmp_path, rng):
    """A constant left operand is not an FC weight (reported); activations times activations
    (attention) carry no weights (not listed)."""
    nodes = [helper.make_node("MatMul", ["w", "x"], ["a"], name="left"),
             helper.make_node("MatMul", ["a", "a"], ["y"], name="attn")]
    _save(tmp_path / "m.onnx", nodes, {"w": rng.standard_normal((4, 4)).astype(np.float32)}, [4, 4])
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "out")
    assert [(e["name"], e["status"]) for e in manifest["layers"]] == [("left", "unsupported")]
    assert "left operand" in manifest["layers"][0]["reason"]


def test_odd_node_names(tmp_path, rng):
    """300-character, empty and repeated names: every layer packs, under its own file."""
    w = rng.standard_normal((3, 3, 1, 1)).astype(np.float32)
    names = ["n" * 300, "", "dup", "dup"]
    nodes = [helper.make_node("Conv", [i, "w"], [o], name=n)
             for n, i, o in zip(names, ["x", "a", "b", "c"], ["a", "b", "c", "y"])]
    _save(tmp_path / "m.onnx", nodes, {"w": w}, [1, 3, 2, 2])
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "out", pixel_format=None)
    layers = manifest["layers"]
    assert [e["name"] for e in layers] == ["n" * 300, "Conv_1", "dup", "dup"]
    assert all(e["status"] == "packed" for e in layers) and len(weights) == 4
    assert len({e["file"] for e in layers}) == 4 and all(len(e["file"]) < 100 for e in layers)


def test_dilated_first_layer_is_direct_convolution(tmp_path, rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    for d in (1, 2):
        node = helper.make_node("Conv", ["x", "w"], ["y"], name="stem", dilations=[d, d])
        _save(tmp_path / f"m{d}.onnx", [node], {"w": w}, [1, 3, 9, 9])
        manifest, weights = pack(tmp_path / f"m{d}.onnx", tmp_path / f"out{d}")
        assert manifest["layers"][0]["kind"] == ("image" if d == 1 else "dc")
        np.testing.assert_array_equal(weights["stem"], reference_quantize(w, 127)[0])


@pytest.mark.parametrize("precision, qmax", [("int8", 127), ("int16", 32767)])
def test_dead_filters_quantise_to_zeros(tmp_path, rng, precision, qmax):
    """Filters with max|w| around 1e-40 (trained PaddlePaddle models have them): scale 0 and zero
    weights, never a +-qmax pattern."""
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w[1] *= np.float32(1e-40)
    w[3] = 0
    _save(tmp_path / "m.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], name="c")], {"w": w}, [1, 3, 4, 4])
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "out", precision=precision, pixel_format=None)
    entry = manifest["layers"][0]
    assert entry["scales"][1] == 0 and entry["scales"][3] == 0 and entry["scales"][0] > 0
    assert not weights["c"][1].any() and not weights["c"][3].any()
    q, scale = reference_quantize(w, qmax)
    np.testing.assert_array_equal(weights["c"], q)
    np.testing.assert_array_equal(np.float32(entry["scales"]), scale)


def test_recurrent_layers_are_listed_as_unsupported(tmp_path, rng):
    """An LSTM carries weights NVDLA has no format for: listed with that reason, not left out."""
    w = rng.standard_normal((1, 16, 3)).astype(np.float32)
    r = rng.standard_normal((1, 16, 4)).astype(np.float32)
    nodes = [helper.make_node("LSTM", ["x", "w", "r"], ["y"], name="rnn", hidden_size=4)]
    _save(tmp_path / "m.onnx", nodes, {"w": w, "r": r}, [5, 1, 3])
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "out")
    assert [(e["name"], e["op_type"], e["status"]) for e in manifest["layers"]] == [("rnn", "LSTM", "unsupported")]
    assert "recurrent" in manifest["layers"][0]["reason"]


def test_old_opset_qdq_weights_fold(tmp_path):
    """onnx's reference evaluator implements DequantizeLinear from opset 19 only; an opset-13 QDQ
    weight (int8 -> DequantizeLinear -> Transpose) still resolves, to the NumPy dequantisation."""
    q = np.arange(-12, 12, dtype=np.int8).reshape(3, 2, 2, 2)  # (R, ..) order: transposed below
    nodes = [helper.make_node("DequantizeLinear", ["q", "s"], ["wt"]),
             helper.make_node("Transpose", ["wt"], ["w"], perm=[1, 0, 2, 3]),
             helper.make_node("Conv", ["x", "w"], ["y"], name="c")]
    _save(tmp_path / "m.onnx", nodes, {"q": q, "s": np.float32(0.25)}, [1, 3, 4, 4], opset=13)
    (layer,) = load_onnx(tmp_path / "m.onnx")
    assert layer.note is None
    np.testing.assert_array_equal(layer.weights, q.astype(np.float32).transpose(1, 0, 2, 3) * np.float32(0.25))


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_auto_pad_is_resolved(tmp_path, rng, auto_pad):
    """ConvTranspose SAME padding resolved as the ONNX definition gives it: onnx's reference
    evaluator on the same layer with the manifest's explicit pads gives the same output."""
    from onnx.reference import ReferenceEvaluator

    w = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
    shape = [1, 2, 3, 5]
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2], auto_pad=auto_pad)
    model = _save(tmp_path / "m.onnx", [node], {"w": w}, shape)
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "out", precision="fp16")
    entry = manifest["layers"][0]
    assert entry["auto_pad"] == auto_pad and entry["pads"] is not None
    explicit = _save(tmp_path / "e.onnx", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                                                            pads=entry["pads"])], {"w": w}, shape)
    x = rng.standard_normal(shape).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert want.shape == (1, 3, 6, 10)
    np.testing.assert_allclose(ReferenceEvaluator(explicit).run(None, {"x": x})[0], want, rtol=1e-6, atol=1e-6)
