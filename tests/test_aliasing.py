"""``out=`` sharing memory with any array a packer reads is a LayoutError, checked on the caller's
own arrays before anything is converted or written (npupack._gate). The configurations are the
ones where a packer makes an internal copy first (byte order, fp16 conversion, densified groups,
Winograd, compression, image weights, Kneron KL730/KL830, Horizon, SDP operands), after which a
check on the copy would see no overlap: the input would be overwritten and the output garbage."""
import inspect

import numpy as np
import pytest

import npupack
from npupack import LayoutError, grammar, horizon, kneron, layout, nvdla
from npupack import openvino as ov

RNG = np.random.default_rng(42)
START = 1024  # where the input sits in its raw allocation


def _ints(shape, dtype, lo=-100, hi=100):
    return RNG.integers(lo, hi, shape).astype(dtype)


def _floats(shape, dtype=np.float32):
    w = RNG.standard_normal(shape).astype(dtype)
    w[w < -0.8] = 0  # zeros for the compressing cases
    return w


def _bytes(result) -> bytes:
    """The bytes a packer wrote to ``out``, whatever object it returned."""
    if isinstance(result, tuple):
        result = result[0]
    for field in ("weight", "data"):
        if hasattr(result, field):
            return bytes(np.asarray(getattr(result, field)))
    if hasattr(result, "planes"):
        return bytes(result.planes[0])
    return bytes(np.asarray(result))


def _window(o: np.ndarray, a: np.ndarray, n: int) -> np.ndarray:
    """``n`` bytes of ``o``: over ``a`` where ``o`` reaches it (an unpacked tensor is smaller than
    the buffer ``o`` starts at), else its first ``n``."""
    at = a.__array_interface__["data"][0] - o.__array_interface__["data"][0]
    at = max(0, at - n // 2) if 0 <= at < o.size else 0
    return o[at:at + n]


_NCHW16C = npupack.Layout.parse("NCHW16c")
_PACKED = npupack.pack(_ints((1, 20, 3, 5), np.int8), "NCHW16c")

# name -> (the arrays the call reads, call(arrays, out)). Each array is placed in turn inside a
# raw allocation that out then overlaps.
CASES = {
    "npupack.pack": ([_ints((1, 40, 6, 6), np.int8)], lambda a, o: npupack.pack(a[0], "NCHW16c", out=o)),
    "npupack.pack big-endian": ([_ints((1, 40, 6, 6), ">i2")], lambda a, o: npupack.pack(a[0], "NCHW16c", out=o)),
    "BlockedLayout.pack": ([_ints((1, 20, 3, 5), np.int8)],
                           lambda a, o: _NCHW16C.bind((1, 20, 3, 5), np.int8).pack(a[0], out=o)),
    "BlockedLayout.unpack": ([_PACKED], lambda a, o: _NCHW16C.bind((1, 20, 3, 5), np.int8).unpack(
        a[0], out=_window(o, a[0], 300).view(np.int8).reshape(1, 20, 3, 5))),
    "openvino.pack": ([_ints((1, 40, 6, 6), np.int8)], lambda a, o: ov.pack(a[0], "b_fs_yx_fsv16", out=o)),
    "openvino.pack big-endian": ([_floats((1, 40, 6, 6), ">f4")],
                                 lambda a, o: ov.pack(a[0], "b_fs_yx_fsv16", out=o)),
    "openvino.pack weights": ([_floats((20, 17, 3, 3), np.float16)],
                              lambda a, o: ov.pack(a[0], "os_is_yx_isv16_osv16", out=o)),
    "pack_feature": ([_ints((1, 40, 6, 6), np.int8)], lambda a, o: nvdla.pack_feature(a[0], out=o)),
    "pack_feature fp16 conversion": ([_floats((1, 40, 6, 6))],
                                     lambda a, o: nvdla.pack_feature(a[0], precision="fp16", out=o)),
    "pack_feature big-endian": ([_ints((1, 40, 6, 6), ">i2")], lambda a, o: nvdla.pack_feature(a[0], out=o)),
    "pack_weights dc": ([_ints((40, 20, 3, 3), np.int8)], lambda a, o: nvdla.pack_weights(a[0], out=o)),
    "pack_weights dc fp16 conversion": ([_floats((20, 20, 3, 3))],
                                        lambda a, o: nvdla.pack_weights(a[0], precision="fp16", out=o)),
    "pack_weights grouped": ([_ints((8, 3, 3, 3), np.int8)], lambda a, o: nvdla.pack_weights(a[0], groups=4, out=o)),
    "pack_weights winograd": ([_ints((8, 6, 3, 3), np.int8)],
                              lambda a, o: nvdla.pack_weights(a[0], kind="winograd", out=o)),
    "pack_weights compress": ([_ints((40, 20, 3, 3), np.int8) * (RNG.random((40, 20, 3, 3)) < 0.3)],
                              lambda a, o: nvdla.pack_weights(a[0], compress=True, out=o)),
    "pack_weights compress auto": ([_ints((40, 20, 3, 3), np.int8) * (RNG.random((40, 20, 3, 3)) < 0.3)],
                                   lambda a, o: nvdla.pack_weights(a[0], compress="auto", out=o)),
    "pack_weights image": ([_ints((8, 3, 3, 3), np.int8)],
                           lambda a, o: nvdla.pack_weights(a[0], kind="image", pixel_format="T_A8B8G8R8", out=o)),
    "pack_weights deconv": ([_ints((6, 5, 4, 4), np.int8)],
                            lambda a, o: nvdla.pack_weights(a[0], kind="deconv", stride=(2, 2), out=o)),
    "compress_weights": ([_ints(600, np.int8, -2, 3)],
                         lambda a, o: nvdla.compress_weights(a[0], precision="int8", kernel_group_elements=64,
                                                             out=o)),
    "kneron kl720": ([_ints((20, 6, 6), np.int8)], lambda a, o: kneron.pack(a[0], "4W4C8B", chip="kl720", out=o)),
    "kneron kl730": ([_ints((1, 20, 3, 5), np.int8)],
                     lambda a, o: kneron.pack(a[0], "1W16C8B", chip="kl730", stride_npu=[240, 1, 80, 16], out=o)),
    "kneron kl830 high/low": ([_ints((1, 20, 3, 5), np.int16)],
                              lambda a, o: kneron.pack(a[0], "16W1C8BHL", chip="kl830", out=o,
                                                       stride_npu=kneron.predict_stride_npu((1, 20, 3, 5),
                                                                                            "16W1C8BHL"))),
    "horizon.pad": ([_ints((1, 13, 13, 25), np.int8)],
                    lambda a, o: horizon.pad(a[0], aligned_shape=(1, 13, 13, 32), out=o)),
    "horizon.pad big-endian": ([_ints((1, 13, 13, 25), ">i4")],
                               lambda a, o: horizon.pad(a[0], aligned_shape=(1, 13, 13, 32), out=o)),
    "pack_bias": ([_ints(40, np.int16), _ints(40, np.int16)],
                  lambda a, o: nvdla.pack_bias(a[0], mul=a[1], precision="int8", out=o)),
    "pack_prelu": ([_floats((40,))], lambda a, o: nvdla.pack_prelu(a[0], precision="fp16", out=o)),
    "pack_batchnorm": ([_floats((40,)), _floats((40,))],
                       lambda a, o: nvdla.pack_batchnorm(a[0], a[1], precision="fp16", out=o)),
    "pack_eltwise": ([_floats((40, 3, 5)), _floats((40, 3, 5))],
                     lambda a, o: nvdla.pack_eltwise(a[0], a[1], precision="fp16", out=o)),
    "pack_pixels": ([_ints((5, 7, 4), np.uint8, 0, 256)],
                    lambda a, o: nvdla.pack_pixels(a[0], "T_A8B8G8R8", out=[o])),
}


def _place(raw: np.ndarray, start: int, values: np.ndarray) -> np.ndarray:
    a = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    a[...] = values
    return a


@pytest.mark.parametrize("name", list(CASES))
def test_out_overlapping_an_input_is_refused_before_any_work(name):
    arrays, call = CASES[name]
    want = _bytes(call([a.copy() for a in arrays], np.empty(1 << 16, np.uint8)))
    for j, values in enumerate(arrays):
        raw = np.zeros(START + values.nbytes + (1 << 16) + 64, np.uint8)
        args = [a.copy() for a in arrays]
        args[j] = _place(raw, START, values)
        before = raw.copy()
        for start in (0, START - 1, START + values.nbytes - 1):  # ends inside, covers, starts at the last byte
            with pytest.raises(LayoutError, match="out: overlaps the memory"):
                call(args, raw[start:])
            assert np.array_equal(raw, before), f"{name}: bytes changed by a refused call"
        # Side by side in one allocation: as into a separate buffer.
        side = -(-(START + values.nbytes) // 64) * 64
        assert _bytes(call(args, raw[side:])) == want, name


def _public_packers():
    """(name, callable) of every public function and method that takes ``out=``."""
    modules = [npupack, grammar, layout, ov, kneron, horizon, nvdla]
    seen = {}
    for mod in modules:
        for attr in getattr(mod, "__all__", dir(mod)):
            obj = getattr(mod, attr)
            members = [(attr, obj)]
            if inspect.isclass(obj):
                members = [(f"{attr}.{m}", f) for m, f in vars(obj).items() if not m.startswith("_") and callable(f)]
            for name, f in members:
                try:
                    params = inspect.signature(f).parameters
                except (TypeError, ValueError):
                    continue
                if "out" in params:
                    seen[f"{mod.__name__}.{name}"] = f
    return seen


# Writes a plan of arrays that were validated when they were added, not arguments of the call; it
# checks out= against them itself (test below).
_NOT_PACKERS = {"npupack.nvdla.MemoryPlan.image"}


def test_memory_plan_image_refuses_out_over_a_surface():
    ws = nvdla.pack_weights(_ints((16, 8, 3, 3), np.int8))
    plan = nvdla.MemoryPlan()
    plan.add_weights("w", ws)
    with pytest.raises(LayoutError, match="overlaps the memory a surface spans"):
        plan.image(out=ws.weight)
    assert np.array_equal(plan.image(out=np.empty(plan.nbytes, np.uint8)), plan.image())


def test_every_packer_taking_out_goes_through_the_gate():
    packers = _public_packers()
    assert len(packers) >= 12  # the sweep finds them
    ungated = sorted(n for n, f in packers.items() if not hasattr(f, "gated_reads") and n not in _NOT_PACKERS)
    assert not ungated, f"public packers with out= outside npupack._gate: {ungated}"


def test_read_only_misaligned_and_short_out_are_refused():
    x = _ints((1, 20, 3, 5), np.int8)
    ro = np.zeros(4096, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(LayoutError, match="read-only"):
        npupack.pack(x, "NCHW16c", out=ro)
    with pytest.raises(LayoutError, match="needed"):
        nvdla.pack_feature(x, out=np.zeros(10, np.uint8))
    with pytest.raises(TypeError, match="uint8"):
        npupack.pack(x, "NCHW16c", out=np.zeros(4096, np.uint16))
    # A uint8 out at an odd address is fine (bytes have no alignment) and gives the same bytes.
    odd = np.zeros(4097, np.uint8)[1:]
    assert bytes(npupack.pack(x, "NCHW16c", out=odd)) == bytes(npupack.pack(x, "NCHW16c"))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix, on purpose
def test_an_out_of_an_ndarray_subclass_is_written_as_its_bytes():
    # np.matrix stays 2-D when reshaped: `out` is used as a plain view of its bytes, its first
    # nbytes written (Kneron's high/low split runs in place there) and the rest untouched.
    x = (_ints((1, 16, 4, 4), np.int16) & np.int16(-2)).astype(np.int16)
    stride = kneron.predict_stride_npu(x.shape, "1W16C8BHL")
    want = kneron.pack(x, "1W16C8BHL", chip="kl730", stride_npu=stride)
    m = np.matrix(np.full((1, want.size + 40), 0xA5, np.uint8))
    got = kneron.pack(x, "1W16C8BHL", chip="kl730", stride_npu=stride, out=m)
    assert bytes(got) == bytes(want) and (np.asarray(m)[0, want.size:] == 0xA5).all()
    m = np.matrix(np.full((1, 4096), 0xA5, np.uint8))
    x8 = _ints((1, 20, 3, 5), np.int8)
    assert bytes(npupack.pack(x8, "NCHW16c", out=m)) == bytes(npupack.pack(x8, "NCHW16c"))


def test_the_gate_refuses_an_entry_it_cannot_pass_arguments_to_by_name():
    """The gate's wrapper is generated with the entry's own parameters and passes them on by name:
    an entry with ``*args`` / ``**kwargs``, an ``out`` that is not keyword-only, a name that could
    collide with the generated code's, a read that is not a parameter, or a registry word it
    cannot serve is refused when it is decorated, not on some later call."""
    from npupack._gate import gate

    with pytest.raises(TypeError, match="named parameters only"):
        gate("x")(lambda x, *rest: None)
    with pytest.raises(TypeError, match="keyword-only"):
        gate("x")(lambda x, out=None: None)
    with pytest.raises(TypeError, match="cannot be wrapped"):
        gate("x")(lambda x, *, _f=None, out=None: None)  # would shadow the generated code's own name
    with pytest.raises(TypeError, match="cannot be wrapped"):
        gate("y")(lambda x, *, out=None: None)  # a read that is not a parameter
    with pytest.raises(TypeError, match="cannot be wrapped"):
        gate("x", words={"target": "chip"})(lambda x, chip, *, out=None: None)  # an own that is positional
    with pytest.raises(TypeError, match="cannot be wrapped"):
        gate("x", words={"chip": "chip"})(lambda x, *, chip=None, out=None: None)  # a word that is a parameter
    wrapped = gate("x")(lambda x, *, scale=2, out=None: (x, scale, out))
    assert wrapped(1) == (1, 2, None) and wrapped(x=3, scale=4) == (3, 4, None)
