"""NVDLA image-input weights (docs/nvdla.md §8): pre-extension, post-extension (intended layout), the
automatic factor, the worked examples 8.6 / 16.6, the hardware documentation's 5x5x3 figure, errors."""
import itertools

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from npupack import LayoutError, UnsupportedError
from npupack.nvdla import (NV_FULL, NV_SMALL, PIXEL_FORMATS, pack_weights, post_extension_factor, to_fp16,
                           unpack_weights)
from tests.reference import nvdla as ref


def test_worked_examples():
    w = np.zeros((1, 3, 1, 2), np.int8)
    for c, s in itertools.product(range(3), range(2)):
        w[0, c, 0, s] = 2 * c + s
    ws = pack_weights(w, kind="image", pixel_format="T_A8B8G8R8")
    assert ws.weight[:8].tolist() == [0, 2, 4, 0, 1, 3, 5, 0] and ws.packed_shape == (1, 8, 1, 1)
    assert ws.kind == "image" and ws.post_extension == 1 and ws.bytes_per_kernel == 8
    ws = pack_weights(np.arange(6, dtype=np.int8).reshape(1, 1, 2, 3), kind="image", pixel_format="T_R8")
    assert ws.weight[:6].tolist() == [0, 1, 2, 3, 4, 5] and ws.packed_shape == (1, 3, 2, 1)
    assert pack_weights(w, kind="image", pixel_format="T_Y8___U8V8_N444").weight[:6].tolist() == [0, 2, 4, 1, 3, 5]


def coded(K, C, R, S):
    """int16 weights whose value encodes (k, c, r, s)."""
    k, c, r, s = np.indices((K, C, R, S))
    return (((k * 8 + c) * 16 + r) * 16 + s).astype(np.int16)


def test_post_extension_examples_4_and_5():
    w = coded(2, 4, 8, 4).astype(np.int16)
    ws = pack_weights(w, kind="image", pixel_format="T_A16B16G16R16", precision="int16")
    assert ws.post_extension == 4
    vals = ws.weight[:ws.meaningful_bytes].view(np.int16)
    pre = ref.image_pre_extend(w, 4)
    # element positions of example 4 (int8 byte offsets = element indices)
    assert vals[229] == pre[1, 5, 6, 0] and vals[128] == pre[0, 0, 4, 0] and vals[64] == pre[1, 0, 0, 0]
    w9 = np.ones((2, 4, 9, 4), np.int8)
    ws9 = pack_weights(w9, kind="image", pixel_format="T_A8B8G8R8")
    assert ws9.post_extension == 4 and ws9.meaningful_bytes == 288 and ws9.weight.size == 384


def test_auto_factor_table():
    cases = {(4, 4, 8, 1): 4, (4, 5, 5, 1): 2, (4, 7, 7, 2): 2, (3, 7, 7, 2): 2, (4, 8, 8, 1): 2, (1, 11, 11, 4): 4,
             (3, 3, 3, 1): 1, (4, 4, 4, 1): 1, (4, 4, 7, 1): 1, (1, 7, 7, 2): 1}
    for (cdata, s, r, sx), f in cases.items():
        assert post_extension_factor(cdata, s, r, sx, NV_FULL.mac_atomic_c) == f, (cdata, s, r, sx)
    assert post_extension_factor(1, 3, 3, 1, NV_SMALL.mac_atomic_c) == 1


def test_nvdla_sw_bug_case_gives_intended_rows():
    """K=1, 4-channel 5x5 stride 1 (C' = 20, f = 2): rows 0,1,2,3,4 in order (nvdla/sw: 0,1,3,4,4)."""
    w = coded(1, 4, 5, 5)
    ws = pack_weights(w, kind="image", pixel_format="T_A16B16G16R16", precision="int16", stride=(1, 1))
    assert ws.post_extension == 2
    vals = ws.weight[:ws.meaningful_bytes].view(np.int16).reshape(5, 20)
    pre = ref.image_pre_extend(w, 4)
    for r in range(5):
        assert np.array_equal(vals[r], pre[0, :, r, 0])


def test_seed_figure_5x5x3_int16_pre_extension():
    """Seed "Channel extension for image weight": a 5x5x3 kernel becomes 1x5x15, blocks by s."""
    w = coded(1, 3, 5, 5)
    ws = pack_weights(w, kind="image", pixel_format="T_Y16___U16V16_N444", precision="int16", post_extension=1)
    assert ws.packed_shape == (1, 15, 5, 1) and ws.bytes_per_kernel == 15 * 5 * 2
    vals = ws.weight[:ws.meaningful_bytes].view(np.int16).reshape(5, 15)  # r, then s*3 + c
    for r, s, c in itertools.product(range(5), range(5), range(3)):
        assert vals[r, s * 3 + c] == w[0, c, r, s]


@pytest.mark.parametrize("fmt", ["T_R8", "T_A8B8G8R8", "T_Y8___U8V8_N444", "T_A16B16G16R16"])
def test_exhaustive_against_loop_reference(fmt):
    cdata = PIXEL_FORMATS[fmt].comps
    rng = np.random.default_rng(1)
    precision = "int16" if "16" in fmt else "int8"
    dt = np.int16 if precision == "int16" else np.int8
    kpg = NV_FULL.kernels_per_group(precision)
    for K, C, R, S, sx in itertools.product((1, 2, kpg + 1), range(1, cdata + 1), (1, 2, 3, 5, 7, 8, 9), (1, 3, 4, 7),
                                            (1, 2)):
        w = rng.integers(-100, 100, (K, C, R, S)).astype(dt)
        for pe in ("auto", 1, 2, 4):
            f = post_extension_factor(cdata, S, R, sx, 64) if pe == "auto" else pe
            if f > 1 and (cdata * S > 64 // f or R // f < 2):
                with pytest.raises(UnsupportedError):
                    pack_weights(w, kind="image", pixel_format=fmt, stride=(1, sx), post_extension=pe)
                continue
            ws = pack_weights(w, kind="image", pixel_format=fmt, stride=(1, sx), post_extension=pe)
            assert ws.post_extension == f
            expected = ref.pack_image_weights(w, cdata, f, kpg=kpg, cb=64, tail=128)
            assert np.array_equal(ws.weight, expected), (fmt, K, C, R, S, sx, pe)
            assert np.array_equal(unpack_weights(ws), w)


@given(st.sampled_from(sorted(PIXEL_FORMATS)), st.sampled_from([NV_FULL, NV_SMALL]), st.data())
def test_every_pixel_format_on_random_shapes(fmt, config, data):
    """Every pixel format of Table 33, both configs, each precision the format and config take,
    drawn K (across kernel groups), C <= Cdata, R, S, x stride and post-extension factor: the loop
    reference of docs/nvdla.md §8 byte for byte, the unsupported factors refused, and unpacked back."""
    info = PIXEL_FORMATS[fmt]
    precisions = [p for p in (("fp16",) if info.kind == "fp16" else ("int8", "int16")) if p in config.precisions]
    assume(precisions)  # nv_small has no fp16
    precision = data.draw(st.sampled_from(precisions), label="precision")
    kpg = config.kernels_per_group(precision)
    K = data.draw(st.sampled_from([kpg, kpg + 1]) | st.integers(1, 2 * kpg + 1), label="K")
    C = data.draw(st.integers(1, info.comps), label="C")
    R, S = data.draw(st.integers(1, 11), label="R"), data.draw(st.integers(1, 11), label="S")
    sx = data.draw(st.integers(1, 4), label="sx")
    pe = data.draw(st.sampled_from(["auto", 1, 2, 4]), label="post_extension")
    rng = np.random.default_rng(K * 1000 + R * 10 + S)
    if precision == "fp16":
        w = to_fp16(rng.standard_normal((K, C, R, S)))
    else:
        w = rng.integers(-100, 100, (K, C, R, S)).astype(np.int8 if precision == "int8" else np.int16)
    atomic_c = config.mac_atomic_c
    f = post_extension_factor(info.comps, S, R, sx, atomic_c) if pe == "auto" else pe
    if f > 1 and (info.comps * S > atomic_c // f or R // f < 2):
        with pytest.raises(UnsupportedError):
            pack_weights(w, kind="image", pixel_format=fmt, config=config, stride=(1, sx), post_extension=pe)
        return
    ws = pack_weights(w, kind="image", pixel_format=fmt, config=config, stride=(1, sx), post_extension=pe)
    assert ws.post_extension == f
    expected = ref.pack_image_weights(w, info.comps, f, kpg=kpg, cb=config.channels_per_block,
                                        tail=config.weight_size_alignment)
    assert np.array_equal(ws.weight, expected), (K, C, R, S, sx, pe)
    assert np.array_equal(unpack_weights(ws).view(np.uint8), w.view(np.uint8))


def test_fp16_image_and_closed_form():
    w = np.random.default_rng(2).standard_normal((3, 4, 4, 4)).astype(np.float32)
    ws = pack_weights(w, kind="image", pixel_format="T_A16B16G16R16_F")
    assert ws.precision == "fp16" and np.array_equal(unpack_weights(ws), to_fp16(w))
    K, C_ext, R, f, kpg = 20, 16, 9, 4, 16
    order = ref.image_post_extension_order(K, C_ext, R, f, kpg)
    for pos, (k, c, r) in enumerate(order):  # closed form of 8.4
        k0 = (k // kpg) * kpg
        kn = min(kpg, K - k0)
        rfg, rp = R // f, R % f
        base = k0 * C_ext * R
        idx = base + (r // f) * kn * f * C_ext + (k - k0) * f * C_ext + (r % f) * C_ext + c if r < rfg * f else \
            base + rfg * kn * f * C_ext + (k - k0) * rp * C_ext + (r - rfg * f) * C_ext + c
        assert idx == pos


@pytest.mark.parametrize("call, exc, match", [
    (lambda: pack_weights(np.ones((1, 4, 3, 3), np.int8), kind="image", pixel_format="T_Y8___U8V8_N444"),
     LayoutError, "only 3"),
    (lambda: pack_weights(np.ones((1, 3, 3, 3), np.int8), kind="image"), ValueError, "pixel_format"),
    (lambda: pack_weights(np.ones((1, 4, 5, 5), np.int8), kind="image", pixel_format="T_A8B8G8R8",
                          post_extension=4), UnsupportedError, "20 > |<= mac_atomic_c // 4"),
    (lambda: pack_weights(np.ones((1, 4, 3, 3), np.int8), kind="image", pixel_format="T_A8B8G8R8",
                          post_extension=2), UnsupportedError, "two full row groups"),
    (lambda: pack_weights(np.ones((1, 4, 3, 3), np.int8), kind="dc", post_extension=2), UnsupportedError,
     "image-input"),
    (lambda: pack_weights(np.ones((1, 4, 3, 3), np.float16), kind="image", pixel_format="T_A16B16G16R16_F",
                          precision="int8"), UnsupportedError, "fp16 weights"),  # I11
    (lambda: pack_weights(np.ones((1, 4, 3, 3), np.float32), kind="image", pixel_format="T_A8B8G8R8",
                          precision="int8"), TypeError, "quantize_weights"),
    (lambda: pack_weights(np.ones((1, 4, 3, 3), np.int8), kind="image", pixel_format="T_A16B16G16R16_F"),
     UnsupportedError, "fp16 weights"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="image", pixel_format="T_A8B8G8R8", groups=2),
     UnsupportedError, "groups"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
