"""Streamed plans over an output that does not start on a 64-byte line (docs/design.md §3.8): where
a loop of the walk writes whole contiguous slabs, each slab is packed into a line-aligned buffer
and streamed out. The bytes must be the reference's at every misalignment, on one and two
threads, through the plain pack and the checked fp16 pack, with nothing written outside ``out``."""
import numpy as np
import pytest

import npupack
from npupack import nvdla, plan
from tests.reference import nvdla as ref

RNG = np.random.default_rng(47)
# DC weights of 8 MiB or more (streamed), every channel block and kernel group whole (no peel,
# no holes): 1x1 row copies, 3x3 and 5x5 batched transposes; fp16 goes through the checked pack.
CASES = {
    "1x1 int8": ((2048, 4096, 1, 1), np.int8, 32),
    "3x3 int8": ((1024, 1024, 3, 3), np.int8, 32),
    "5x5 int8": ((256, 1344, 5, 5), np.int8, 32),
    "3x3 int16": ((512, 1024, 3, 3), np.int16, 16),
    "1x1 fp16": ((1024, 4096, 1, 1), np.float16, 16),
}


def _weights(shape, dtype):
    if dtype == np.float16:
        return RNG.standard_normal(shape).astype(np.float16)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape, dtype=dtype)


@pytest.mark.parametrize("case", CASES)
def test_describe_names_the_bounced_slab(case):
    """The slab is one kernel group's channel block: 2 KiB (1x1) and 18 KiB (3x3) bounce; 5x5's
    50 KiB exceed the buffer's 32 KiB and keep plain stores. 3x3 streams (and so bounces) where
    a rotation kernel with a streamed form runs (AVX-512 VBMI or AVX2)."""
    shape, dtype, _ = CASES[case]
    precision = {np.int8: "int8", np.int16: "int16", np.float16: "fp16"}[dtype]
    text = plan.describe(nvdla.dc_layout(shape, precision), shape, dtype)
    vbmi = any(k["name"] == "transpose_x8_64xn_avx512vbmi" and k["runs"] for k in npupack._core.kernel_list())
    avx2 = any(k["name"] == "transpose_x8_32x9_avx2" and k["runs"] for k in npupack._core.kernel_list())
    slab = {1: 2048, 3: 18432 if vbmi or avx2 else None, 5: None}[shape[2]]
    line = f"output not on a 64-byte line: each step of loop 1 ({slab} bytes)"
    assert (line in text) if slab else ("output not on a 64-byte line" not in text), text


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("offset", [0, 16, 1, 47])
@pytest.mark.parametrize("case", CASES)
def test_misaligned_output_packs_the_reference(case, offset, threads):
    shape, dtype, kpg = CASES[case]
    w = _weights(shape, dtype)
    expected = ref.pack_dc_vectorised(w, kpg=kpg, cb=64, tail=128)
    n = expected.size
    raw = npupack.aligned_empty(n + 128)
    raw[:] = 0xA5
    out = raw[offset:offset + n]
    with npupack.num_threads(threads):
        got = nvdla.pack_weights(w, out=out).weight
    assert np.shares_memory(got, raw) and got.ctypes.data % 64 == offset
    assert np.array_equal(got, expected)
    assert (raw[:offset] == 0xA5).all() and (raw[offset + n:] == 0xA5).all()


def test_misaligned_fp16_nan_is_found_in_a_bounced_slab():
    """The checked fp16 pack watches the bounced slabs as it does the streamed ones: a NaN in a
    late kernel group is refused, and with allow_nan it is packed as its bits."""
    shape = (1024, 4096, 1, 1)
    w = _weights(shape, np.float16)
    w[900, 4000, 0, 0] = np.nan
    n = nvdla.weights_nbytes(shape, precision="fp16")
    raw = npupack.aligned_empty(n + 64)
    out = raw[16:16 + n]
    with pytest.raises(ValueError, match="NaN"):
        nvdla.pack_weights(w, out=out)
    got = nvdla.pack_weights(w, out=out, allow_nan=True).weight
    assert np.array_equal(got, ref.pack_dc_vectorised(w, kpg=16, cb=64, tail=128))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("offset", [0, 16])
@pytest.mark.parametrize("shape, pad_value", [((1024, 1024, 3, 3), 0), ((1000, 1030, 3, 3), 0),
                                              ((1000, 1030, 3, 3), 3.5)],
                         ids=["whole blocks", "holes", "holes pad 3.5"])
def test_a_column_group_of_partial_lines_bounces_any_output(shape, pad_value, offset, threads):
    """``os_is_yx_isv16_osv16`` fp16 3x3 writes 32-byte columns, half lines, far apart: streamed,
    each line would be written in parts that the write-combining buffers cannot hold together.
    Its slabs (one input block of 16 channels: 4608 bytes) bounce into a line-aligned output too,
    which then takes whole lines only. Where O and I are not multiples of 16, the holes of a slab
    start as the pad value and are streamed out with it. The bytes are NumPy's at either
    alignment, and nothing outside ``out`` is written."""
    from npupack import openvino as ov
    from tests.reference import blocked as ref_blocked

    lay = ov.layout("os_is_yx_isv16_osv16")
    text = plan.describe(lay, shape, np.float16)  # 18 MiB of output: streamed
    assert "any output: each step of loop 1 (4608 bytes)" in text, text
    w = RNG.standard_normal(shape).astype(np.float16)
    pad = np.float16(pad_value)
    expected = ref_blocked.pack_transpose(w, lay.logical, lay.outer, [(t.dim, t.size, None) for t in lay.tiles], pad)
    n = expected.nbytes
    raw = npupack.aligned_empty(n + 128)
    raw[:] = 0xA5
    with npupack.num_threads(threads):
        got = ov.pack(w, "os_is_yx_isv16_osv16", pad_value=pad_value, out=raw[offset:offset + n])
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))
    assert (raw[:offset] == 0xA5).all() and (raw[offset + n:] == 0xA5).all()
