"""unpack_weights and unpack_sdp trust no field of a WeightSurfaces or SdpOperand built by hand
(from a manifest, say). The fields that describe a weight mapping (docs/nvdla.md §5.4: packed_shape,
kernel_groups, bytes_per_kernel, meaningful_bytes, post_extension) must be what pack_weights
gives for the logical shape and options the surface records, and the options must be ones
pack_weights takes; an SDP operand's components, elements per atom, shape rank, strides and
surface size must be those of its use, mode, precision and config (docs/nvdla.md §12.1, 12.2). A field
that does not match used to unpack to other values, or to raise ZeroDivisionError or a NumPy
reshape error, without naming the field."""
import dataclasses

import numpy as np
import pytest

from npupack import LayoutError
from npupack.nvdla import (NV_FULL, NV_SMALL, SdpOperand, WeightSurfaces, pack_batchnorm, pack_bias, pack_eltwise,
                           pack_weights, unpack_sdp, unpack_weights)

RNG = np.random.default_rng(5)
FIELDS = ("packed_shape", "kernel_groups", "bytes_per_kernel", "meaningful_bytes", "post_extension")


def _int8(shape):
    return RNG.integers(-128, 128, size=shape, dtype=np.int8)


def _sparse(shape):
    w = _int8(shape)
    w[RNG.random(shape) < 0.7] = 0
    return w


# name -> (logical weights, pack_weights options, unpack logical?)
CASES = {
    "dc grouped": (_int8((8, 2, 3, 3)), dict(groups=4), True),
    "dc compressed": (_sparse((40, 70, 3, 3)), dict(compress=True), True),
    "image post-extended": (_int8((16, 3, 7, 7)), dict(kind="image", pixel_format="T_A8B8G8R8", post_extension=2),
                            True),
    "winograd stride 2": (RNG.standard_normal((4, 5, 5, 5)).astype(np.float16), dict(kind="winograd", stride=(2, 2)),
                          False),
    "deconv set": (_int8((4, 3, 4, 3)), dict(kind="deconv", stride=(2, 2)), False),
}


def _packed(case):
    w, options, _ = CASES[case]
    ws = pack_weights(w, **options)
    return ws[3] if isinstance(ws, tuple) else ws


def _unpack(case, ws):
    return unpack_weights(ws, logical=CASES[case][2])


def _wrong(value):
    """Another value of the field's type: one dimension or the count one larger."""
    return (*value[:-1], value[-1] + 1) if isinstance(value, tuple) else value + 1


@pytest.mark.parametrize("case", list(CASES))
def test_the_fields_pack_weights_gives_unpack(case):
    ws = _packed(case)
    rebuilt = WeightSurfaces(**{f.name: getattr(ws, f.name) for f in dataclasses.fields(ws)})
    assert np.array_equal(_unpack(case, rebuilt), _unpack(case, ws))
    as_list = dataclasses.replace(ws, packed_shape=list(ws.packed_shape))  # as read from JSON
    with pytest.raises(TypeError, match=r"surfaces.packed_shape: expected a tuple, got \["):
        _unpack(case, as_list)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_mapping_field_that_does_not_match_is_named(case, field):
    ws = _packed(case)
    if field == "post_extension" and ws.kind != "image":
        bad = dataclasses.replace(ws, post_extension=2)  # other kinds take 1 only (docs/nvdla.md §5.1)
        with pytest.raises(ValueError, match="surfaces: post_extension"):
            _unpack(case, bad)
        return
    bad = dataclasses.replace(ws, **{field: _wrong(getattr(ws, field))})
    name = f"surfaces: {field}" if field == "post_extension" else f"surfaces.{field}"
    with pytest.raises(ValueError, match=name):
        _unpack(case, bad)


@pytest.mark.parametrize("change, error, match", [
    (dict(kind="conv"), ValueError, r"surfaces: kind: 'conv' is not one of"),
    (dict(precision="int4"), ValueError, r"surfaces: precision: 'int4'"),
    (dict(groups=0), ValueError, r"surfaces: groups"),
    (dict(groups=3), ValueError, r"surfaces: groups"),
    (dict(shape=(8, 2, 3)), ValueError, r"surfaces: shape"),
    (dict(shape=[8, 2, 3, 3]), TypeError, r"surfaces.shape: expected a tuple, got \[8, 2, 3, 3\]"),
    (dict(stride=[1, 1]), TypeError, r"surfaces.stride: expected a tuple"),
    (dict(config="nv_full"), TypeError, r"surfaces: config"),
    (dict(pixel_format="T_R8"), ValueError, r"surfaces: pixel_format"),
    (dict(phase=(0, 1)), LayoutError, r"surfaces.phase: \(0, 1\) is not a set"),
    (dict(shape=(8 * 10**6, 2, 3, 3)), LayoutError, r"surfaces: weight: holds 640 bytes, but dc weights of shape"),
])
def test_options_pack_weights_refuses(change, error, match):
    """The recorded options are checked as pack_weights checks them; a shape far larger than the
    bytes given is refused before anything of its size is allocated."""
    ws = dataclasses.replace(_packed("dc grouped"), **change)
    with pytest.raises(error, match=match):
        unpack_weights(ws)


def test_deconv_sets_are_each_checked():
    sets = pack_weights(_int8((4, 3, 4, 3)), kind="deconv", stride=(2, 2))
    assert np.array_equal(unpack_weights(sets), unpack_weights(tuple(sets)))
    wrong = (*sets[:2], dataclasses.replace(sets[2], bytes_per_kernel=sets[2].bytes_per_kernel * 2), sets[3])
    with pytest.raises(LayoutError, match="surfaces.bytes_per_kernel"):
        unpack_weights(wrong)


def test_a_direct_convolution_keeps_its_layer_stride():
    """The pack job's manifest records the convolution stride of every layer; for DC and image
    weights it does not enter the mapping and is not checked."""
    ws = _packed("dc grouped")
    assert np.array_equal(unpack_weights(dataclasses.replace(ws, stride=(2, 2))), unpack_weights(ws))
    assert ws.config is NV_FULL


OPERANDS = {
    "bias per channel": pack_bias(np.arange(5, dtype=np.int16), precision="int8"),
    "bias + rescale per layer": pack_bias(np.int16(-3), mul=np.int16(2), precision="int8", mode="per_layer"),
    "batchnorm fp16": pack_batchnorm(alu=np.ones(40, np.float16), mul=np.ones(40, np.float16), precision="fp16"),
    "eltwise per element": pack_eltwise(alu=np.arange(60, dtype=np.int8).reshape(5, 3, 4), precision="int8",
                                        config=NV_SMALL),
}


@pytest.mark.parametrize("case", list(OPERANDS))
def test_an_operand_rebuilt_from_its_fields_unpacks(case):
    op = OPERANDS[case]
    rebuilt = SdpOperand(**{f.name: getattr(op, f.name) for f in dataclasses.fields(op)})
    got, want = unpack_sdp(rebuilt), unpack_sdp(op)
    assert all(np.array_equal(a, b) for a, b in zip(got if isinstance(got, tuple) else (got,),
                                                    want if isinstance(want, tuple) else (want,)))


def _operand_changes(op):
    """(field, wrong value, error, message) for every field a packer derives."""
    e = op.elements_per_atom
    yield "use", "bias2", ValueError, r"operand.use: 'bias2' is not one of"
    yield "mode", "per_tensor", ValueError, r"operand.mode: 'per_tensor' is not one of"
    yield "precision", "int4", ValueError, r"operand.precision: 'int4'"
    yield "data_size", 4, ValueError, r"operand.data_size: 1 or 2 bytes, got 4"
    yield "config", "nv_full", TypeError, r"operand.config"
    yield "components", op.components + 1, LayoutError, r"operand.components: \d, but .* have \d"
    yield "elements_per_atom", e * 2, LayoutError, rf"operand.elements_per_atom: {e * 2}, but .* have {e}"
    yield "shape", op.shape + (1,), LayoutError, r"operand.shape: per_\w+ operands have shape"
    if op.mode != "per_element":
        yield "line_stride", 64, LayoutError, r"operand.line_stride: only per-element operands have strides"
    else:
        yield "line_stride", None, LayoutError, r"operand.line_stride: per-element operands record their strides"
        yield "surface_stride", op.line_stride, LayoutError, r"operand.surface_stride: \d+ bytes is smaller"
    if op.mode == "per_layer":
        yield "registers", op.registers[:1], LayoutError, r"operand.registers: per-layer operands hold 2"
        yield "registers", (0x10000, 0), LayoutError, r"operand.registers"
    else:
        yield "data", op.data[:-32], LayoutError, rf"operand.data: {op.nbytes - 32} bytes, but .* is {op.nbytes}"


@pytest.mark.parametrize("case, change", [(case, change) for case, op in OPERANDS.items()
                                          for change in _operand_changes(op)],
                         ids=lambda v: v if isinstance(v, str) else f"{v[0]}={v[1]!r:.12}")
def test_an_operand_field_that_does_not_match_is_named(case, change):
    field, value, error, match = change
    with pytest.raises(error, match=match):
        unpack_sdp(dataclasses.replace(OPERANDS[case], **{field: value}))
