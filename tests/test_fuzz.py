"""Fuzzing every public entry point with hypothesis: random shapes, dtypes, strides, option
values, layout texts and raw bytes. The only acceptable outcomes are a result (which must then
round-trip where the format allows) or a ValueError / TypeError naming the problem: never a
crash, a hang or another exception. CI also runs this file under AddressSanitizer and
UndefinedBehaviorSanitizer (.ci/run), which turns any out-of-bounds access into a failure."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npupack
from npupack import horizon, kneron, openvino
from npupack import nvdla

OK_ERRORS = (ValueError, TypeError)
fuzz = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.float16, np.float32, np.float64, np.bool_,
          np.complex64]
SMALL = st.integers(0, 6)


def arrays(draw, ndim=None, max_dim=6):
    nd = draw(st.integers(0, 5)) if ndim is None else ndim
    shape = tuple(draw(st.integers(0, max_dim)) for _ in range(nd))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dtype.itemsize, dtype=np.uint8)
    a = raw.view(dtype).reshape(shape) if dtype != np.bool_ else (raw % 2).astype(bool).reshape(shape)
    if nd and draw(st.booleans()):  # non-contiguous: a reversed or strided view
        a = a[..., ::-1] if draw(st.booleans()) else np.asfortranarray(a)
    return a


@st.composite
def any_array(draw, ndim=None):
    return arrays(draw, ndim)


def attempt(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except OK_ERRORS:
        return None


@fuzz
@given(text=st.text(alphabet="NCHWOIGabcdeghwxyz0123456789_ ()!", max_size=16), x=any_array())
def test_layout_grammar(text, x):
    for grammar, parse in (("npupack", npupack.Layout.parse), ("onednn", npupack.Layout.from_onednn)):
        layout = attempt(parse, text)
        if layout is None:
            continue
        if grammar == "npupack":
            assert npupack.Layout.parse(str(layout)) == layout
        size = attempt(layout.nbytes, x.shape, x.dtype)
        packed = attempt(npupack.pack, x, layout) if size is not None and size < 1 << 26 else None
        if packed is not None:
            assert np.array_equal(npupack.unpack(packed, layout, x.shape, x.dtype).view(np.uint8),
                                  np.ascontiguousarray(x).view(np.uint8))


@fuzz
@given(name=st.sampled_from(openvino.formats() + ["bogus", ""]), x=any_array(),
       pad=st.lists(st.integers(-1, 2), max_size=5))
def test_openvino(name, x, pad):
    packed = attempt(openvino.pack, x, name, pad_lo=pad or None)
    if packed is not None:
        back = openvino.unpack(packed, name, x.shape, x.dtype, pad_lo=pad or None)
        assert np.array_equal(back.view(np.uint8), np.ascontiguousarray(x).view(np.uint8))


@fuzz
@given(layout=st.sampled_from([d.name for d in kneron.DataLayout] + ["NOPE"]),
       chip=st.sampled_from(list(kneron.CHIPS) + ["kl999"]), x=any_array())
def test_kneron(layout, chip, x):
    packed = attempt(kneron.pack, x, layout, chip=chip)
    if packed is not None:
        attempt(kneron.unpack, packed, layout, x.shape, chip=chip)
    attempt(kneron.unpack, np.zeros(7, np.uint8), layout, x.shape, chip=chip)


@fuzz
@given(x=any_array(), role=st.sampled_from(["input", "output", "weird"]),
       layout=st.sampled_from(["NHWC", "NCHW", "NC"]))
def test_horizon(x, role, layout):
    aligned = attempt(horizon.aligned_shape, x.shape, x.dtype, layout=layout, role=role)
    if aligned is None:
        return
    buf = attempt(horizon.pad, x, aligned_shape=aligned)
    if buf is not None:
        assert np.array_equal(horizon.strip(buf, x.shape, x.dtype, aligned_shape=aligned).view(np.uint8),
                              np.ascontiguousarray(x).view(np.uint8))


@fuzz
@given(w=any_array(), kind=st.sampled_from(["dc", "image", "winograd", "deconv", "x"]),
       precision=st.sampled_from([None, "int8", "int16", "fp16", "int4"]), groups=st.integers(-1, 3),
       stride=st.tuples(st.integers(0, 3), st.integers(0, 3)), compress=st.sampled_from([False, True, "auto", 1]),
       config=st.sampled_from(list(nvdla.Config.presets().values())))
def test_pack_weights(w, kind, precision, groups, stride, compress, config):
    kw = dict(kind=kind, precision=precision, groups=groups, stride=stride, compress=compress, config=config)
    if kind == "image":
        kw["pixel_format"] = "T_A8B8G8R8"
    result = attempt(nvdla.pack_weights, w, **kw)
    if result is None:
        return
    sets = result if isinstance(result, tuple) else (result,)
    if kind == "winograd":
        attempt(nvdla.unpack_weights, result, logical=False)
    else:
        back = nvdla.unpack_weights(result)
        assert back.shape == w.shape
    # Corrupted surfaces: truncated weight, WMB or WGS must raise, not read out of bounds.
    for ws in sets:
        fields = dict(ws.__dict__)
        fields["weight"] = ws.weight[: ws.weight.size // 3]
        if ws.wmb is not None:
            fields["wmb"] = ws.wmb[:1]
        attempt(nvdla.unpack_weights, type(ws)._fast(**fields), logical=kind != "winograd")


@fuzz
@given(data=st.binary(max_size=300), wmb=st.binary(max_size=60), wgs=st.binary(max_size=40),
       n=st.integers(-2, 500), group=st.integers(-1, 70), precision=st.sampled_from(["int8", "int16", "fp16"]))
def test_decompress_random_bytes(data, wmb, wgs, n, group, precision):
    d, m, g = (np.frombuffer(b, np.uint8) for b in (data, wmb, wgs))
    out = attempt(nvdla.decompress_weights, d, m, precision=precision, n_elements=n, wgs=g,
                  kernel_group_elements=group)
    if out is not None:
        assert out.size == n
    attempt(nvdla.decompress_weights, d, m, precision=precision, n_elements=n)
    attempt(nvdla.compress_weights, d, precision=precision, kernel_group_elements=group)
    attempt(nvdla.analyze_sparsity, d, precision=precision, kernel_group_elements=group)


@fuzz
@given(x=st.one_of(any_array(), any_array(ndim=3), any_array(ndim=4)),
       line=st.one_of(st.none(), st.integers(-64, 4096), st.integers(1, 64).map(lambda k: 32 * k)),
       surface=st.one_of(st.none(), st.integers(-64, 1 << 16), st.integers(1, 512).map(lambda k: 32 * k)),
       config=st.sampled_from(list(nvdla.Config.presets().values())))
def test_feature(x, line, surface, config):
    buf = attempt(nvdla.pack_feature, x, config=config, line_stride=line, surface_stride=surface)
    if buf is not None:
        # What was packed reads back: integers unchanged, floats as to_fp16 gives them.
        want = nvdla.to_fp16(x) if x.dtype.kind == "f" else x
        back = nvdla.unpack_feature(buf, x.shape, want.dtype, config=config, line_stride=line, surface_stride=surface)
        assert np.array_equal(back.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
        attempt(nvdla.unpack_feature, buf[: buf.size // 2], x.shape, np.int8, config=config, line_stride=line)


@fuzz
@given(img=any_array(), fmt=st.sampled_from(list(nvdla.PIXEL_FORMATS) + ["T_NOPE"]), x_offset=st.integers(-1, 40),
       line=st.one_of(st.none(), st.integers(-32, 2048)))
def test_pixels(img, fmt, x_offset, line):
    planes = attempt(nvdla.pack_pixels, img, fmt, x_offset=x_offset, line_stride=line)
    if planes is not None:
        attempt(nvdla.unpack_pixels, planes, img.shape[:2] if img.ndim >= 2 else (1, 1))


@fuzz
@given(v=any_array(), mode=st.sampled_from(["per_layer", "per_channel", "per_element", "x"]),
       precision=st.sampled_from(["int8", "int16", "fp16", None]), data_size=st.sampled_from([None, 1, 2, 3]),
       line=st.one_of(st.none(), st.integers(-32, 512)))
def test_sdp_operands(v, mode, precision, data_size, line):
    op = attempt(nvdla.pack_bias, v, precision=precision, mode=mode, data_size=data_size,
                 line_stride=line if mode == "per_element" else None)
    if op is not None:  # what was packed reads back: integers unchanged, floats as to_fp16 gives them
        back = nvdla.unpack_sdp(op)
        assert back.shape == v.shape
        want = nvdla.to_fp16(v) if op.precision == "fp16" else v.astype(back.dtype)
        assert np.array_equal(back.reshape(-1).view(np.uint8), np.ascontiguousarray(want).reshape(-1).view(np.uint8)) \
            or \
            (op.precision == "fp16" and np.isnan(back.astype(np.float32)).any())
    attempt(nvdla.pack_eltwise, v, v, precision=precision, data_size=data_size)
    attempt(nvdla.pack_batchnorm, v, v, precision=precision)
    attempt(nvdla.pack_prelu, v, precision=precision, data_size=data_size)


@fuzz
@given(shape=st.lists(st.integers(-1, 2**40), min_size=0, max_size=5),
       precision=st.sampled_from(["int8", "int16", "fp16"]))
def test_size_queries_never_overflow(shape, precision):
    """Size-only queries on absurd shapes: a number or a clear error, never a wrapped size."""
    for fn, args, kw in [(nvdla.weights_nbytes, (shape,), {"precision": precision}),
                         (nvdla.feature_strides, (shape, precision), {}),
                         (openvino.nbytes, ("b_fs_yx_fsv16", shape, np.int8), {}),
                         (npupack.Layout.parse("NCHW16c").nbytes, (shape, np.int16), {})]:
        got = attempt(fn, *args, **kw)
        size = getattr(got, "nbytes", got)
        if size is not None:
            assert 0 <= size < 2**63


@fuzz
@given(ops=st.lists(st.tuples(st.text(max_size=3), st.sampled_from(["weight", "wmb", "bias", "feature", "zz"]),
                              st.binary(max_size=300)), max_size=12), base=st.integers(-256, 1024))
def test_memory_plan(ops, base):
    plan = attempt(nvdla.MemoryPlan, base_address=base)
    if plan is None:
        return
    for name, kind, data in ops:
        attempt(plan.add, name, data, kind=kind)
    image = plan.image()
    for p in plan.placements:
        assert plan.view(image, p.name).size == p.size


@fuzz
@given(w=any_array(), precision=st.sampled_from(["int8", "int16", "int4"]),
       mode=st.sampled_from(["per_kernel", "per_filter", "x"]), axis=st.integers(-5, 5))
def test_quantize(w, precision, mode, axis):
    q = attempt(nvdla.quantize_weights, w, precision=precision, mode=mode, kernel_axis=axis)
    if q is not None:
        assert q[0].shape == w.shape


def test_entry_points_are_covered():
    """Every public packer of the nvdla namespace is exercised above (keeps this file honest
    when new entry points appear)."""
    covered = {"pack_weights", "unpack_weights", "pack_weights_many", "decompress_weights", "compress_weights",
               "analyze_sparsity", "pack_feature", "unpack_feature", "pack_pixels", "unpack_pixels", "pack_bias",
               "pack_eltwise", "pack_batchnorm", "pack_prelu", "unpack_sdp", "weights_nbytes", "feature_strides",
               "MemoryPlan", "quantize_weights"}
    packers = {n for n in nvdla.__all__ if n.startswith(("pack", "unpack", "compress", "decompress"))}
    assert packers <= covered, packers - covered
    with pytest.raises(OK_ERRORS, match="layer 0"):
        nvdla.pack_weights_many([object()])
