"""Integer SDP operands of the pack job (``--calibration``): a pruned (all-zero) filter keeps its
bias, and int16 layers of an ordinary detector get their bias with the ALU's shift. The operand
is read from its file as docs/nvdla.md §12.2 lays it out (per channel: int16 bias, int16 rescale
numerator) and evaluated as the SDP does: ``((acc + (q << left)) * n) >> right``."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")  # the musllinux wheels' tests run without onnx
pytest.importorskip("jsonschema")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.model_check import pack  # noqa: E402


def _conv(path, w, b):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def _operand(out, entry):
    sdp = entry["sdp"]
    assert sdp["status"] == "packed" and sdp["use"] == "bias_rescale" and sdp["data_size"] == 2
    k = entry["logical_shape"][0]
    pairs = np.fromfile(out / sdp["file"], dtype="<i2", count=sdp["size"] // 2, offset=sdp["offset"])
    return pairs.reshape(-1, 2)[:k].astype(np.int64), sdp["bias_left_shift"], sdp["rescale_truncate"]


def _sdp_output(acc, q, left, n, right):
    """The SDP's real output per channel (in units of the output scale) for accumulator ``acc``."""
    return ((acc + (q << left)) * n).astype(np.float64) / 2.0 ** right


@pytest.mark.parametrize("precision", ["int8", "int16"])
def test_zero_filter_keeps_its_bias(tmp_path, rng, precision):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w[2] = 0  # pruned
    w[3] *= np.float32(1e-40)  # dead: quantises to zeros
    b = np.float32([0.5, -1.0, 0.75, -0.25])
    _conv(tmp_path / "m.onnx", w, b)
    si, so = 0.02, 0.05
    (tmp_path / "cal.json").write_text(json.dumps({"x": {"scale": si}, "y": {"scale": so}}))
    manifest, _ = pack(tmp_path / "m.onnx", tmp_path / "out", precision=precision,
                       calibration=tmp_path / "cal.json", pixel_format=None)
    entry = manifest["layers"][0]
    pairs, left, right = _operand(tmp_path / "out", entry)
    q, n = pairs[:, 0], pairs[:, 1]
    # Zero filters accumulate 0: the SDP gives bias / So.
    got = _sdp_output(0, q, left, n, right)
    np.testing.assert_allclose(got[2:], b[2:] / so, rtol=2e-3, atol=2e-3)


def test_int16_detector_biases_use_the_alu_shift(tmp_path, rng):
    """int16 weights and activations make Si * Sw about 2^30 times smaller than the bias: nvdla/sw's
    int32 intermediate overflows, the 6-bit ALU shift holds it."""
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.05).astype(np.float32)
    b = np.float32([12.0, -30.0, 0.4, 7.5])
    _conv(tmp_path / "m.onnx", w, b)
    si, so = 6.0 / 32767, 40.0 / 32767
    (tmp_path / "cal.json").write_text(json.dumps({"x": {"scale": si}, "y": {"scale": so}}))
    manifest, weights = pack(tmp_path / "m.onnx", tmp_path / "out", precision="int16",
                             calibration=tmp_path / "cal.json", pixel_format=None)
    entry = manifest["layers"][0]
    pairs, left, right = _operand(tmp_path / "out", entry)
    assert left > 16
    sw = np.float64(entry["scales"])
    # The bias the SDP adds, back in real units, is the model's bias to within one step of the
    # shifted operand (2^left accumulator units; the shift floors).
    step = 2.0 ** left * si * sw
    assert (np.abs((pairs[:, 0] << left) * si * sw - b) <= step * 1.01).all() and (step < 2.0 ** -9 * 30).all()
    # And the whole layer: an int16 input through the packed weights and the SDP.
    x = rng.integers(-32767, 32767, (3, 6, 6))
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))  # (C, H, W, R, S)
    acc = np.einsum("chwrs,kcrs->khw", win, weights["c"].astype(np.int64))
    got = _sdp_output(acc, pairs[:, 0, None, None], left, pairs[:, 1, None, None], right)
    real = np.einsum("chwrs,kcrs->khw", win * si, w.astype(np.float64)) + b[:, None, None]
    np.testing.assert_allclose(got * so, real, rtol=0, atol=2e-3 * np.abs(real).max())
