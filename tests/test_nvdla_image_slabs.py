"""NVDLA image-input weights packed a slab of kernel groups at a time (docs/nvdla.md §8.3-8.5): the
stream is the same whatever the slab size, across slab boundaries, a short last kernel group in a
later slab, short last row groups and C' of more than one channel block, against the loop
reference of docs/nvdla.md §8."""
import itertools

import numpy as np
import pytest

from npupack.nvdla import NV_FULL, NV_SMALL, PIXEL_FORMATS, pack_weights, to_fp16, unpack_weights
from npupack.nvdla import image_weights
from tests.reference import nvdla as ref


@pytest.mark.parametrize("slab_bytes", [1, 300, 256 << 10])
@pytest.mark.parametrize("fmt, precision", [("T_A8B8G8R8", "int8"), ("T_Y8___U8V8_N444", "int8"),
                                            ("T_A16B16G16R16", "int16"), ("T_A16B16G16R16_F", "fp16"),
                                            ("T_R8", "int8")])
def test_slabs_match_loop_reference(monkeypatch, slab_bytes, fmt, precision):
    # slab_bytes=1: one kernel group per slab; 300: a few groups; the default: one slab.
    monkeypatch.setattr(image_weights, "_SLAB_BYTES", slab_bytes)
    cdata = PIXEL_FORMATS[fmt].comps
    rng = np.random.default_rng(7)
    configs = [NV_FULL] + ([NV_SMALL] if precision in NV_SMALL.precisions else [])
    for config, (R, S), pe in itertools.product(configs, [(3, 3), (5, 5), (9, 4), (2, 7)], ("auto", 1, 2, 4)):
        kpg = config.kernels_per_group(precision)
        K, C = 3 * kpg + 5, max(1, cdata - 1)  # a short last kernel group, channels padded where cdata > 1
        f = pe if pe != "auto" else image_weights.post_extension_factor(cdata, S, R, 1, config.mac_atomic_c)
        if f > 1 and (cdata * S > config.mac_atomic_c // f or R // f < 2):
            continue  # refused; test_nvdla_image_weights covers the errors
        if precision == "fp16":
            w = to_fp16(rng.standard_normal((K, C, R, S)))
        else:
            w = rng.integers(-100, 100, (K, C, R, S)).astype(np.int8 if precision == "int8" else np.int16)
        before = w.copy()
        ws = pack_weights(w, kind="image", pixel_format=fmt, config=config, post_extension=pe)
        expected = ref.pack_image_weights(w, cdata, ws.post_extension, kpg=kpg, cb=config.channels_per_block,
                                          tail=config.weight_size_alignment)
        assert ws.post_extension == f
        assert np.array_equal(ws.weight, expected), (config.name, R, S, pe)
        assert np.array_equal(unpack_weights(ws).view(np.uint8), w.view(np.uint8))
        assert np.array_equal(w.view(np.uint8), before.view(np.uint8))
