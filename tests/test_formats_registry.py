"""The format registry (docs/formats.md): one table-driven sweep over every registered format and
every example call of it, and one table of bad arguments.

The sweep checks each format against itself in three independent ways: the round trip, the size,
and ``offset_of`` against the packed bytes (distinct values, so a wrong offset finds another
element's bytes). Which bytes an element has comes from NumPy (little-endian, Kneron's big-endian
and high/low rules written here from docs/kneron.md §7.4), never from npupack. Winograd weights,
which have no inverse, are compared with the NumPy reference of docs/nvdla.md §9.
"""
import itertools

import numpy as np
import pytest

from npupack import LayoutError, UnsupportedError, formats
from tests.reference import nvdla as ref_nvdla

ALL = formats.names()
# Resolved on request, not listed: the older OpenVINO names (docs/openvino.md §6).
OLDER = [f"openvino:{n}" for n in __import__("npupack.openvino").openvino.older_names()]


def test_every_vendor_and_kind_is_registered():
    assert {formats.get(n).vendor for n in ALL} == set(formats.VENDORS)
    assert {"nvdla:feature", "nvdla:dc", "nvdla:grouped", "nvdla:image", "nvdla:winograd", "nvdla:pixel:T_R8",
            "openvino:b_fs_yx_fsv16", "onednn:nChw16c", "onednn:OIhw16i16o", "kneron:4W4C8B", "kneron:1W16C8B",
            "horizon:NHWC", "horizon:NCHW"} <= set(ALL)
    from npupack import kneron, openvino
    from npupack.nvdla import PIXEL_FORMATS

    assert {f"openvino:{f.name}" for f in openvino.formats() if f.supported} <= set(ALL)
    assert {f"kneron:{m.vendor_name}" for m in kneron.DataLayout if m.value} <= set(ALL)
    assert {f"nvdla:pixel:{n}" for n in PIXEL_FORMATS} <= set(ALL)
    assert formats.names(vendor="horizon") == ["horizon:NCHW", "horizon:NHWC", "horizon:NV12", "horizon:Y"]
    assert all(formats.get(n).kind == "weights" for n in formats.names(vendor="nvdla", kind="weights"))


def _values(f, shape, dtype, rng) -> np.ndarray:
    """Seeded, pairwise distinct where the dtype has room, within what the format stores."""
    n = int(np.prod(shape))
    codes = rng.permutation(n).reshape(shape)
    if f.value_max is not None:
        return (codes % (np.array(f.value_max[: shape[-1]]) + 1)).astype(dtype)
    if dtype.kind == "f":
        span = 2048 if dtype.itemsize == 2 else 2**20  # integers a float16 holds exactly
        return ((codes % span) - span // 2).astype(dtype)
    info = np.iinfo(dtype)
    step = 2 if f.drops_lsb else 1  # bit 0 reads back 0 (docs/kneron.md §7.4)
    span = min((int(info.max) - int(info.min) + 1) // step, 2**31)
    return ((codes % span) * step + int(info.min)).astype(dtype)


def _element_bytes(f, value, dtype) -> bytes:
    order = ">" if f.byte_order == "big" else "<"
    return np.asarray(value).astype(dtype.newbyteorder(order)).tobytes()


def _indices(shape, rng):
    corners = list(itertools.product(*[sorted({0, n - 1}) for n in shape]))[:16]
    rand = [tuple(int(rng.integers(0, n)) for n in shape) for _ in range(8)]
    return corners + rand


def _cases():
    for name in ALL:
        f = formats.get(name)
        for i, ex in enumerate(f.examples):
            for dt in ex.get("dtypes", f.dtypes):
                yield name, i, np.dtype(dt)


def test_every_format_has_an_example_and_verbs():
    for name in ALL:
        f = formats.get(name)
        assert f.examples, name
        assert {"nbytes", "pack", "explain"} <= set(f.verbs), name
        assert f.doc.startswith("docs/"), name


@pytest.mark.parametrize("name", ALL + OLDER)
def test_sweep(name):
    f = formats.get(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    for i, ex in enumerate(f.examples):
        shape, params = tuple(ex["shape"]), ex["params"]
        for dt in map(np.dtype, ex.get("dtypes", f.dtypes)):
            where = f"{name} example {i} {dt}"
            x = _values(f, shape, dt, rng)
            before = x.copy()
            buf = f.pack(x, **params)
            assert np.array_equal(x, before), where
            assert buf.dtype == np.uint8 and buf.ndim == 1, where
            assert buf.size == f.nbytes(shape, dt, **params), where
            if dt.itemsize > 1:  # the same bytes from an array one byte off its element alignment
                odd = np.frombuffer(bytearray(x.nbytes + 1), np.uint8)[1:].view(dt).reshape(shape)
                odd[...] = x
                assert np.array_equal(f.pack(odd, **params), buf), where

            out = np.full(buf.size + 7, 0xA5, np.uint8)
            got = f.pack(x, out=out, **params)
            assert np.shares_memory(got, out) and np.array_equal(got, buf), where
            assert (out[buf.size:] == 0xA5).all(), where
            # A short or non-uint8 `out` is refused before a byte is written (docs/formats.md §2).
            short = np.full(buf.size - 1, 0xA5, np.uint8)
            with pytest.raises(LayoutError, match="out"):
                f.pack(x, out=short, **params)
            assert (short == 0xA5).all(), where
            for wrong in (np.zeros(buf.size, np.int8), bytearray(buf.size), [0] * buf.size):
                with pytest.raises(TypeError, match="out"):
                    f.pack(x, out=wrong, **params)

            if f.invertible:
                back = f.unpack(buf, shape, dt, **params)
                assert back.dtype == dt and back.shape == shape, where
                assert np.array_equal(back, x), where
                dst = np.zeros(shape, dt)
                assert f.unpack(buf, shape, dt, out=dst, **params) is dst and np.array_equal(dst, x), where
            else:
                with pytest.raises(UnsupportedError):
                    f.unpack(buf, shape, dt, **params)

            if "offset_of" in f.verbs:
                seen = {}
                for idx in _indices(shape, rng):
                    at = f.offset_of(shape, idx, dt, **params)
                    assert seen.setdefault(at, idx) == idx, f"{where}: {idx} and {seen[at]} share byte {at}"
                    if f.byte_split:  # docs/kneron.md §7.4: bits 7..1 low, 15..8 high, 16 bytes apart
                        u = int(np.asarray(x[idx]).astype(np.int16).view(np.uint16))
                        assert (buf[at], buf[at + f.byte_split]) == ((u >> 1) & 0x7F, (u >> 8) & 0xFF), (where, idx)
                    else:
                        es = dt.itemsize
                        assert buf[at:at + es].tobytes() == _element_bytes(f, x[idx], dt), (where, idx, at)
            else:
                with pytest.raises(UnsupportedError):
                    f.offset_of(shape, (0,) * len(shape), dt, **params)

            lines = f.explain(shape, dt, limit=4, **params)
            assert lines and all(isinstance(s, str) for s in lines), where
            desc = f.layout(shape, dt, **params)
            if desc is not None:
                assert desc.nbytes <= buf.size, where


def test_winograd_bytes_match_the_numpy_reference():
    f = formats.get("nvdla:winograd")
    w = np.random.default_rng(1).integers(-8, 8, size=(5, 3, 3, 3)).astype(np.float16)
    from npupack.nvdla import NV_FULL

    expect, _ = ref_nvdla.pack_winograd(w.astype(np.float64), "fp16", atom=NV_FULL.atom_elements("fp16"),
                                     kpg=NV_FULL.kernels_per_group("fp16"))
    assert f.pack(w).tobytes() == bytes(expect)


def test_sdp_operand_sizes_come_from_the_formulas_without_packing():
    # docs/nvdla.md §12.2: per channel roundup(C, E) * eb bytes; per element
    # (G-1)*surface_stride + (H-1)*line_stride + roundup(W*E*eb, atom), line = roundup(W*E*eb, atom),
    # surface = H*line. Shapes far past memory: sizing must neither allocate nor pack.
    from npupack.nvdla import NV_FULL

    f = formats.get("nvdla:sdp:bias")
    e, atom = NV_FULL.atom_elements("int8"), NV_FULL.atom_bytes
    c = 2 ** 40 + 3
    assert f.nbytes((c,), np.int8) == -(-c // e) * e
    ch, h, w, e16 = 2 ** 20 + 1, 2 ** 11, 2 ** 9 + 1, NV_FULL.atom_elements("int16")
    line = -(-(w * e16 * 2) // atom) * atom
    assert f.nbytes((ch, h, w), np.int16, precision="int16") == (-(-ch // e16) - 1) * h * line + (h - 1) * line + line
    with pytest.raises(LayoutError, match="buf"):
        f.unpack(np.zeros(16, np.uint8), (c,), np.int8)


_IMAGE = {"pixel_format": "T_A8B8G8R8"}


@pytest.mark.parametrize("name, shape, dtype, verb, good, bad", [
    ("nvdla:grouped", (6, 2, 3, 3), np.int8, "unpack", {"groups": 3}, {"groups": 3.0}),
    ("nvdla:dc", (5, 3, 3, 3), np.int8, "unpack", {"groups": 1}, {"groups": True}),
    ("nvdla:image", (5, 3, 3, 3), np.int8, "unpack", {**_IMAGE, "post_extension": 1}, {**_IMAGE, "post_extension": 1.0}),
    ("nvdla:image", (5, 3, 3, 3), np.int8, "offset_of", {**_IMAGE, "post_extension": 1},
     {**_IMAGE, "post_extension": True}),
    ("nvdla:image", (5, 3, 3, 3), np.int8, "nbytes", {**_IMAGE, "post_extension": 1}, {**_IMAGE, "post_extension": 1.0}),
    ("nvdla:winograd", (5, 3, 3, 3), np.int8, "nbytes", {"stride": (1, 1)}, {"stride": (1.0, 1)}),
    ("nvdla:deconv", (3, 5, 3, 3), np.int8, "unpack", {"stride": (2, 2)}, {"stride": (2, 2.0)}),
    ("nvdla:sdp:bias", (5, 2, 3), np.int16, "nbytes", {"line_stride": 384}, {"line_stride": 384.0}),
    ("nvdla:sdp:bias", (5, 2, 3), np.int16, "unpack", {"line_stride": 384}, {"line_stride": 384.0}),
    ("nvdla:sdp:bias", (5,), np.int8, "nbytes", {"data_size": 1}, {"data_size": True}),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_value_equal_to_a_cached_one_is_still_checked(name, shape, dtype, verb, good, bad):
    # The entries remember their layouts per argument set; a float or bool equal to an int seen
    # before (2.0 == 2, True == 1) is refused as it is on a first call, never served from it.
    f = formats.get(name)
    buf = f.pack(np.ones(shape, dtype), **good)
    call = {"nbytes": lambda p: f.nbytes(shape, dtype, **p), "unpack": lambda p: f.unpack(buf, shape, dtype, **p),
            "offset_of": lambda p: f.offset_of(shape, (0,) * len(shape), dtype, **p),
            "layout": lambda p: f.layout(shape, dtype, **p)}[verb]
    call(good)
    with pytest.raises((TypeError, ValueError)):
        call(bad)


def test_offsets_are_bytes_where_the_vendor_counts_elements():
    # openvino.offset_of and Layout.offset_of count elements (docs/openvino.md §3.2).
    from npupack import Layout, openvino

    shape, idx = (2, 20, 3, 3), (1, 17, 2, 1)
    assert formats.get("openvino:b_fs_yx_fsv16").offset_of(shape, idx, np.float32) == \
        4 * openvino.offset_of("b_fs_yx_fsv16", shape, idx)
    assert formats.get("onednn:nChw16c").offset_of(shape, idx, np.int16) == \
        2 * Layout.from_onednn("nChw16c").offset_of(shape, idx)


def test_target_names_are_not_case_sensitive():
    x = np.arange(30, dtype=np.int8).reshape(1, 5, 3, 2)
    f = formats.get("kneron:1W16C8B")
    assert np.array_equal(f.pack(x, target="KL720"), f.pack(x, target="kl720"))
    h = formats.get("horizon:NHWC")
    assert h.nbytes((1, 3, 5, 3), np.int8, target="X5") == h.nbytes((1, 3, 5, 3), np.int8, target="x5")


def test_bare_and_dynamic_names():
    assert formats.get("b_fs_yx_fsv16") is formats.get("openvino:b_fs_yx_fsv16")
    assert formats.get("1w16c8b") is formats.get("kneron:1W16C8B")
    assert formats.get("kneron:1w16c8b") is formats.get("kneron:1W16C8B")
    f = formats.get("onednn:ABcd8b16a2b")  # not listed: read by the grammar
    assert f.nbytes((3, 5, 2, 2), np.int8) == 16 * 16 * 2 * 2  # A and B each padded to 16


def test_generic_pack_points_at_the_registered_name():
    import npupack

    with pytest.raises(LayoutError, match="registered format openvino:b_fs_yx_fsv16") as e:
        npupack.pack(np.zeros((1, 2, 3, 4), np.int8), "b_fs_yx_fsv16")
    assert "unexpected character" in str(e.value)  # the grammar's own complaint stays
    with pytest.raises(LayoutError, match="closest registered formats: .*kneron:4W4C8B"):
        npupack.pack(np.zeros((1, 2, 3, 4), np.int8), "4W4C8")


X4 = np.zeros((1, 5, 3, 2), np.int8)
W4 = np.zeros((5, 3, 3, 3), np.int8)

# (call, error type, the argument the message must name)
BAD = [
    (lambda: formats.get("openvino:b_fs_yx_fsv61"), LayoutError, "openvino:b_fs_yx_fsv16"),
    (lambda: formats.get("bfyx_fsv16"), LayoutError, "b_fs_yx_fsv16"),
    (lambda: formats.get("nvdla:feture"), LayoutError, "nvdla:feature"),
    (lambda: formats.get("kneron:1W16C8"), LayoutError, "kneron:1W16C8B"),
    (lambda: formats.get(16), TypeError, "format"),
    (lambda: formats.get("openvino:winograd_2x3_s1_data"), UnsupportedError, "not supported"),
    (lambda: formats.get("onednn:nChw16q"), LayoutError, "nChw16q"),
    (lambda: formats.names(vendor="intel"), ValueError, "vendor"),
    # wrong ndim, non-positive dims
    (lambda: formats.get("openvino:b_fs_yx_fsv16").pack(np.zeros((2, 3, 4), np.int8)), LayoutError, "shape"),
    (lambda: formats.get("nvdla:dc").pack(np.zeros((2, 3, 4), np.int8)), LayoutError, "w"),
    (lambda: formats.get("horizon:NHWC").nbytes((1, 0, 2, 2), np.int8), LayoutError, "shape"),
    (lambda: formats.get("nvdla:feature").nbytes((1, -2, 2, 2), np.int8), LayoutError, "shape"),
    (lambda: formats.get("onednn:nchw").nbytes((1, 2.0, 2, 2), np.int8), TypeError, "shape"),
    # wrong dtype
    (lambda: formats.get("kneron:1W16C8B").pack(X4.astype(np.float32), target="kl720"), TypeError, "x"),
    (lambda: formats.get("nvdla:feature").pack(X4.astype(np.int32)), TypeError, "dtype"),
    (lambda: formats.get("openvino:bfyx").pack(X4.astype(object)), TypeError, "x"),
    (lambda: formats.get("openvino:bfyx").nbytes((1, 2, 2, 2), "U8"), TypeError, "dtype"),
    (lambda: formats.get("kneron:1W16C8B").unpack(np.zeros(4096, np.uint8), (1, 5, 3, 2), np.int16, target="kl720"),
     TypeError, "dtype"),
    (lambda: formats.get("nvdla:feature").unpack(np.zeros(4096, np.uint8), (1, 5, 3, 2), np.float32,
                                                 precision="fp16"), TypeError, "dtype"),
    # out too small, of the wrong dtype, of the wrong shape
    (lambda: formats.get("openvino:b_fs_yx_fsv16").pack(X4, out=np.zeros(8, np.uint8)), LayoutError, "out"),
    (lambda: formats.get("nvdla:dc").pack(W4, out=np.zeros(4096, np.int8)), TypeError, "out"),
    (lambda: formats.get("horizon:NHWC").unpack(np.zeros(4096, np.uint8), (1, 2, 2, 2), np.int8,
                                                out=np.zeros((1, 2, 2), np.int8)), LayoutError, "out"),
    (lambda: formats.get("horizon:NHWC").unpack(np.zeros(4096, np.uint8), (1, 2, 2, 2), np.int8,
                                                out=np.zeros((1, 2, 2, 2), np.uint8)), TypeError, "out"),
    (lambda: formats.get("openvino:b_fs_yx_fsv16").unpack(np.zeros(8, np.uint8), (1, 5, 3, 2), np.int8),
     LayoutError, "buf"),
    # bad target
    (lambda: formats.get("kneron:1W16C8B").pack(X4, target="kl999"), UnsupportedError, "target"),
    (lambda: formats.get("kneron:1W16C8B").pack(X4), ValueError, "target"),
    (lambda: formats.get("kneron:RAW_8B").nbytes((1, 5, 3, 2), np.int8, target="kl720"), UnsupportedError,
     "target"),
    (lambda: formats.get("nvdla:feature").pack(X4, target="nv_huge"), ValueError, "target"),
    (lambda: formats.get("horizon:NHWC").pack(X4, target="x9"), UnsupportedError, "target"),
    # bad precision
    (lambda: formats.get("nvdla:feature").nbytes((1, 5, 3, 2), np.int8, precision="int4"), ValueError,
     "precision"),
    (lambda: formats.get("nvdla:dc").pack(W4.astype(np.float16), target="nv_small"), UnsupportedError,
     "precision"),
    # parameters, padding, indices
    (lambda: formats.get("kneron:1W16C8B").pack(X4, chip="kl720"), TypeError, "chip"),
    (lambda: formats.get("nvdla:feature").pack(X4, pad_value=3), UnsupportedError, "pad_value"),
    (lambda: formats.get("nvdla:grouped").pack(W4), ValueError, "groups"),
    (lambda: formats.get("onednn:nChw16c").offset_of((1, 5, 3, 2), (0, 5, 0, 0), np.int8), LayoutError, "index"),
    (lambda: formats.get("onednn:nChw16c").offset_of((1, 5, 3, 2), (0, 1, 0), np.int8), LayoutError, "index"),
    (lambda: formats.get("nvdla:winograd").offset_of((5, 3, 3, 3), (0, 0, 0, 0), np.int8), UnsupportedError,
     "nvdla:winograd"),
]


@pytest.mark.parametrize("call, error, word", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_arguments(call, error, word):
    with pytest.raises(error) as info:
        call()
    assert word in str(info.value)


# ---------------------------------------------------------------- the command line over the registry

def _cli_params(params):
    out = []
    for key, value in params.items():
        if key == "target":
            out += ["--target", value]
        else:
            text = ",".join(map(str, value)) + ("," if len(value) == 1 else "") if isinstance(value, tuple) \
                else str(value)
            out += ["--param", f"{key}={text}"]
    return out


def test_cli_formats_lists_every_name(capsys):
    import json

    from npupack.cli import main

    assert main(["formats"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line and not line[0].isspace()}
    assert set(ALL) <= listed
    assert main(["formats", "--vendor", "kneron", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == formats.names(vendor="kneron")
    assert all(r["vendor"] == "kneron" and "pack" in r["verbs"] and r["targets"] for r in rows)


def test_cli_explain_works_for_every_name(capsys):
    from npupack.cli import main

    for name in ALL:
        f = formats.get(name)
        ex = f.example
        dtype = np.dtype(ex.get("dtypes", f.dtypes)[0])
        plan = ["--plan"] if "layout" in f.verbs else []
        argv = ["explain", name, "--shape", ",".join(map(str, ex["shape"])), "--dtype", dtype.name, "--limit", "3",
                *_cli_params(ex["params"]), *plan]
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        out = capsys.readouterr().out
        assert out.strip(), name
        if plan:  # the engine's plan for the descriptor the format packs with (npupack.plan)
            desc = f.layout(ex["shape"], dtype, **ex["params"])
            assert f"into {desc.nbytes} packed bytes" in out and "\nstrategy: " in out, name


@pytest.mark.parametrize("argv, message", [
    (["explain", "openvino:b_fs_yx_fsv61", "--shape", "1,2,3,4"], "did you mean 'openvino:b_fs_yx_fsv16'"),
    (["explain", "kneron:1W16C8", "--target", "kl720", "--shape", "1,2,3,4"], "did you mean 'kneron:1W16C8B'"),
    (["explain", "nvdla:pixel:T_R9", "--shape", "2,3"], "nvdla:pixel:T_R8"),
    (["explain", "openvino:bfyx", "--shape", "1,2,3,4", "--target", "kl720"], "target: not a parameter"),
    (["explain", "kneron:1W16C8B", "--target", "kl720", "--chip", "kl520", "--shape", "1,2,3,4"], "--chip"),
    (["explain", "nvdla:pixel:T_R8", "--shape", "2,3", "--plan"], "not one descriptor"),
])
def test_cli_explain_refuses(capsys, argv, message):
    from npupack.cli import main

    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


# ---------------------------------------------------------------- the registry's words on the vendor fronts

def test_vendor_fronts_take_the_registry_words_and_keep_the_old_ones():
    from npupack import horizon, kneron

    x = np.arange(40, dtype=np.int8).reshape(1, 5, 2, 4)
    old = kneron.pack(x, "1W16C8B", chip="kl720")
    assert np.array_equal(kneron.pack(x, "1W16C8B", target="kl720"), old)
    assert kneron.nbytes("1W16C8B", x.shape, target="kl720") == old.size == kneron.nbytes("1W16C8B", x.shape,
                                                                                        chip="kl720")
    assert np.array_equal(kneron.unpack(old, "1W16C8B", x.shape, target="kl720"), x)
    assert np.array_equal(kneron.pack(x, "1W16C8B", target="kl720", chip="kl720"), old)  # agreeing: fine
    with pytest.raises(TypeError, match="target / chip"):
        kneron.pack(x, "1W16C8B", target="kl720", chip="kl520")
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'chip'"):
        kneron.pack(x, "1W16C8B")  # neither the word nor the parameter it stands for
    assert horizon.aligned_shape((1, 3, 5, 3), "S8", target="x5") == horizon.aligned_shape((1, 3, 5, 3), "S8",
                                                                                            rule="x5")
    y, uv = np.zeros((2, 4), np.uint8), np.ones((1, 2, 2), np.uint8)
    assert np.array_equal(horizon.pack_nv12(y, uv, target="x3"), horizon.pack_nv12(y, uv, rule="x3"))


def test_nvdla_fronts_take_target_for_config():
    from npupack import nvdla

    w = np.arange(-24, 24, dtype=np.int8).reshape(4, 12, 1, 1)  # two channel blocks on nv_small, one on nv_full
    old = nvdla.pack_weights(w, config=nvdla.NV_SMALL)
    assert old.weight.tobytes() != nvdla.pack_weights(w).weight.tobytes()  # so the word is not ignored
    for target in ("nv_small", nvdla.NV_SMALL):
        assert nvdla.pack_weights(w, target=target).weight.tobytes() == old.weight.tobytes()
    assert nvdla.weights_nbytes(w.shape, precision="int8", target="nv_small") == old.weight.size
    x = np.arange(2 * 5 * 3 * 3, dtype=np.int8).reshape(2, 5, 3, 3)
    fs = nvdla.pack_feature(x, target="nv_small")
    assert fs.tobytes() == nvdla.pack_feature(x, config=nvdla.NV_SMALL).tobytes()
    assert np.array_equal(nvdla.unpack_feature(fs, x.shape, np.int8, target="nv_small"), x)
    assert nvdla.feature_strides(x.shape, "int8", target="nv_small") == nvdla.feature_strides(x.shape, "int8",
                                                                                             nvdla.NV_SMALL)
    with pytest.raises(ValueError, match="target: unknown NVDLA configuration 'nv_tiny'"):
        nvdla.pack_weights(w, target="nv_tiny")
    with pytest.raises(TypeError, match="target: expected an NVDLA configuration name"):
        nvdla.pack_feature(x, target=3)
    with pytest.raises(TypeError, match="target / config"):
        nvdla.pack_weights(w, target="nv_small", config=nvdla.NV_FULL)
