"""Nothing a caller passes in is modified (docs/design.md §6.4): every public
function that takes arrays is called with read-only inputs (contiguous, and strided views of a
read-only base), must accept them, and must leave every byte of them as it was. A read-only
array makes NumPy refuse an in-place write and pybind11 refuse a mutable buffer, so an attempt
fails loudly here instead of corrupting a caller's weights; the byte comparison catches the
rest."""
import numpy as np
import pytest

import npupack
from npupack import horizon as hz
from npupack import kneron as kn
from npupack import nvdla as nv
from npupack import openvino as ov

RNG = np.random.default_rng(7)


def _weights(shape=(5, 6, 3, 3), dtype=np.float32):
    w = RNG.standard_normal(shape).astype(dtype)
    w[w < -1] = 0  # compression has zeros to skip
    return w


def _ints(shape, dtype, lo=-100, hi=100):
    return RNG.integers(lo, hi, shape).astype(dtype)


# name -> (inputs, call): `inputs` makes the arrays, `call(*arrays)` uses them.
CASES = {
    "npupack.pack": (lambda: [_ints((2, 20, 3, 5), np.int16)], lambda x: npupack.pack(x, "NCHW16c", pad_value=-3)),
    "npupack.unpack": (lambda: [npupack.pack(_ints((2, 20, 3, 5), np.int8), "NCHW16c")],
                       lambda b: npupack.unpack(b, "NCHW16c", (2, 20, 3, 5), np.int8)),
    "openvino.pack": (lambda: [_weights((20, 17, 3, 3), np.float16)],
                      lambda w: ov.pack(w, "os_is_yx_isv16_osv16")),
    "openvino.unpack": (lambda: [ov.pack(_ints((2, 20, 3, 5), np.int8), "b_fs_yx_fsv16", pad_lo=(0, 1, 1, 0))],
                        lambda b: ov.unpack(b, "b_fs_yx_fsv16", (2, 20, 3, 5), np.int8, pad_lo=(0, 1, 1, 0),
                                            check_padding=True)),
    "nvdla.to_fp16": (lambda: [_weights()], lambda w: nv.to_fp16(w, rounding="nearest_away", saturate=False)),
    "nvdla.quantize_weights": (lambda: [_weights()], lambda w: nv.quantize_weights(w, mode="per_filter")),
    "nvdla.pack_feature": (lambda: [_weights((2, 40, 3, 5))], lambda x: nv.pack_feature(x, precision="fp16")),
    "nvdla.unpack_feature": (lambda: [nv.pack_feature(_ints((2, 40, 3, 5), np.int8))],
                             lambda b: nv.unpack_feature(b, (2, 40, 3, 5), np.int8)),
    "nvdla.pack_weights dc fp16": (lambda: [_weights()], lambda w: nv.pack_weights(w, precision="fp16")),
    "nvdla.pack_weights dc int8 grouped": (lambda: [_ints((6, 2, 3, 3), np.int8)],
                                           lambda w: nv.pack_weights(w, groups=3)),
    "nvdla.pack_weights compressed": (lambda: [_weights()],
                                      lambda w: nv.pack_weights(w, precision="fp16", compress=True)),
    "nvdla.pack_weights winograd": (lambda: [_weights((5, 6, 5, 5))],
                                    lambda w: nv.pack_weights(w, kind="winograd", stride=(2, 2), precision="fp16")),
    "nvdla.pack_weights deconv": (lambda: [_weights((6, 5, 4, 4))],
                                  lambda w: nv.pack_weights(w, kind="deconv", stride=(2, 2), precision="fp16")),
    "nvdla.pack_weights image": (lambda: [_ints((8, 3, 3, 3), np.int8)],
                                 lambda w: nv.pack_weights(w, kind="image", pixel_format="T_R8G8B8A8",
                                                           precision="int8", stride=(1, 1))),
    "nvdla.pack_weights_many": (lambda: [_weights(), _weights((4, 3, 1, 1))],
                                lambda a, b: nv.pack_weights_many([a, b], precision="fp16")),
    "nvdla.compress_weights": (lambda: [nv.pack_weights(_weights(), precision="fp16").weight],
                               lambda s: nv.compress_weights(s, precision="fp16", kernel_group_elements=64)),
    "nvdla.decompress_weights": (
        lambda: list(nv.compress_weights(_ints(500, np.int8, -2, 3).view(np.uint8), precision="int8",
                                         kernel_group_elements=128)),
        lambda d, m, g: nv.decompress_weights(d, m, wgs=g, precision="int8", n_elements=500,
                                              kernel_group_elements=128)),
    "nvdla.analyze_sparsity": (lambda: [_ints(500, np.int8, -2, 3)],
                               lambda s: nv.analyze_sparsity(s, precision="int8", kernel_group_elements=128)),
    "nvdla.prune": (lambda: [_weights()], lambda w: nv.prune(w, 0.5)),
    "nvdla.pack_pixels": (lambda: [_ints((5, 7, 4), np.uint8, 0, 256)],
                          lambda img: nv.pack_pixels(img, "T_A8B8G8R8", x_offset=1)),
    "nvdla.unpack_pixels": (lambda: [nv.pack_pixels(_ints((5, 7, 3), np.uint8, 0, 256), "T_Y8___U8V8_N444").planes[0],
                                     nv.pack_pixels(_ints((5, 7, 3), np.uint8, 0, 256), "T_Y8___U8V8_N444").planes[1]],
                            lambda y, uv: nv.unpack_pixels((y, uv), "T_Y8___U8V8_N444", (5, 7))),
    "nvdla.convert_pixel_precision": (lambda: [_ints((5, 7, 4), np.uint8, 0, 256), np.array([1, 2, 3, 4])],
                                      lambda img, off: nv.convert_pixel_precision(img, "T_A8B8G8R8", "fp16",
                                                                                  offset=off, scale=3)),
    "nvdla.pack_bias": (lambda: [_ints(40, np.int16), _ints(40, np.int16)],
                        lambda b, m: nv.pack_bias(b, mul=m, precision="int8")),
    "nvdla.pack_prelu": (lambda: [_weights((40,))], lambda s: nv.pack_prelu(s, precision="fp16")),
    "nvdla.pack_batchnorm": (lambda: [_weights((40,)), _weights((40,))],
                             lambda a, m: nv.pack_batchnorm(a, m, precision="fp16")),
    "nvdla.pack_eltwise": (lambda: [_weights((40, 3, 5)), _weights((40, 3, 5))],
                           lambda a, m: nv.pack_eltwise(a, m, precision="fp16")),
    "nvdla.quantize_bias": (lambda: [_weights((40,)), np.abs(_weights((40,))) + 0.01],
                            lambda b, s: nv.quantize_bias(b, input_scale=0.05, weight_scales=s)),
    "nvdla.factorize_scales": (lambda: [np.abs(_weights((40,))) + 0.01], lambda s: nv.factorize_scales(s)),
    "kneron.pack": (lambda: [_ints((1, 20, 3, 5), np.int8)],
                    lambda x: kn.pack(x, "1W16C8B", chip="kl730", stride_npu=[240, 1, 80, 16])),
    "kneron.unpack": (lambda: [kn.pack(_ints((20, 3, 5), np.int8), "16W1C8B", chip="kl720")],
                      lambda b: kn.unpack(b, "16W1C8B", (20, 3, 5), chip="kl720")),
    "kneron.quantize": (lambda: [_weights((1, 3, 4, 5)), np.array([1, 2, 3]), np.array([0.5, 1.0, 2.0])],
                        lambda x, r, s: kn.quantize(x, r, s, axis=1)),
    "kneron.dequantize": (lambda: [_ints((1, 3, 4, 5), np.int8), np.array([1, 2, 3]), np.array([0.5, 1.0, 2.0])],
                          lambda q, r, s: kn.dequantize(q, r, s, axis=1)),
    "horizon.pad": (lambda: [_ints((1, 13, 13, 425), np.int32)], lambda x: hz.pad(x, aligned_shape=(1, 13, 13, 448))),
    "horizon.strip": (lambda: [hz.pad(_ints((1, 3, 4, 5), np.int8), aligned_shape=(1, 3, 4, 16))],
                      lambda b: hz.strip(b, (1, 3, 4, 5), np.int8, aligned_shape=(1, 3, 4, 16))),
    "horizon.pack_nv12": (lambda: [_ints((4, 6), np.uint8, 0, 256), _ints((2, 3, 2), np.uint8, 0, 256)],
                          lambda y, uv: hz.pack_nv12(y, uv)),
    "horizon.unpack_nv12": (lambda: [np.asarray(hz.pack_nv12(_ints((4, 6), np.uint8, 0, 256),
                                                             _ints((2, 3, 2), np.uint8, 0, 256)))],
                            lambda b: hz.unpack_nv12(b, 4, 6)),
    "horizon.quantize": (lambda: [_weights((1, 2, 2, 3)), np.array([0.5, 0.25, 2.0])],
                         lambda x, s: hz.quantize(x, dtype="S8", quanti_type="SCALE", scale=s, axis=3)),
    "horizon.dequantize": (lambda: [_ints((1, 2, 2, 3), np.int8), np.array([8, 7, 6])],
                           lambda q, sh: hz.dequantize(q, quanti_type="SHIFT", shift=sh, axis=3)),
}


def _strided_read_only(a: np.ndarray) -> np.ndarray:
    """The same values as a view with gaps between elements, over a read-only base."""
    base = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype) if a.ndim else np.zeros(2, a.dtype)
    view = base[..., ::2] if a.ndim else base[:1].reshape(())
    view[...] = a
    base.flags.writeable = False
    return view


def _read_only(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("memory", ["contiguous", "strided"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_inputs_are_read_only_and_untouched(name, memory):
    make, call = CASES[name]
    arrays = [np.asarray(a) for a in make()]
    frozen = [(_read_only if memory == "contiguous" else _strided_read_only)(a) for a in arrays]
    before = [f.copy() for f in frozen]
    expected = call(*arrays)
    got = call(*frozen)
    for f, b in zip(frozen, before):
        assert f.dtype == b.dtype and f.tobytes() == b.tobytes()
    # The read-only (and strided) inputs give what writable contiguous ones give.
    assert _flat(got) == _flat(expected)


def _flat(result) -> list:
    """Every array in a result (tuples, dataclasses, lists of them) as bytes, in order."""
    if isinstance(result, np.ndarray):
        return [result.dtype.str, result.shape, result.tobytes()]
    if isinstance(result, (tuple, list)):
        return [x for r in result for x in _flat(r)]
    if hasattr(result, "__dataclass_fields__"):
        return [x for f in result.__dataclass_fields__ for x in _flat(getattr(result, f))]
    return [result]
