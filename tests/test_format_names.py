"""Format names are looked up, never guessed (docs/openvino.md §3.1, §6): a name outside the table of
docs/openvino.md §5 and the older names of §6 is refused with the closest known names; an OpenVINO
name given to the generic grammar (docs/openvino.md §13) points to npupack.openvino."""
import difflib

import numpy as np
import pytest

import npupack
from npupack import LayoutError, UnsupportedError
from npupack import openvino as ov
from npupack.cli import main

TABLE = [f.name for f in ov.formats()]
TYPOS = ["b_fs_yx_fsv61", "bfyx_fsv16", "os_is_yx_isv16_osv61", "b_fs_zyx_fsv17"]

# Each entry point that takes a format name, called with a name and a 4-D shape that fits b_fs_yx_fsv16.
X = np.arange(24, dtype=np.int8).reshape(1, 2, 3, 4)
CALLS = {
    "parse_format": lambda n: ov.parse_format(n),
    "layout": lambda n: ov.layout(n),
    "to_onednn": lambda n: ov.to_onednn(n),
    "nbytes": lambda n: ov.nbytes(n, X.shape, X.dtype),
    "packed_shape": lambda n: ov.packed_shape(n, X.shape),
    "offset_of": lambda n: ov.offset_of(n, X.shape, (0, 1, 2, 3)),
    "pack": lambda n: ov.pack(X, n),
    "pack padded": lambda n: ov.pack(X, n, pad_lo=(0, 1, 0, 0)),
    "unpack": lambda n: ov.unpack(np.zeros(4096, np.uint8), n, X.shape, X.dtype),
}


@pytest.mark.parametrize("call", CALLS, ids=str)
@pytest.mark.parametrize("name", TYPOS)
def test_typo_is_refused_with_the_closest_names(call, name):
    expected = difflib.get_close_matches(name, TABLE, n=5)
    assert expected, "the typo list must hold near misses"
    with pytest.raises(LayoutError, match="unknown clDNN format") as e:
        CALLS[call](name)
    text = str(e.value)
    assert f"did you mean {', '.join(map(repr, expected))}?" in text
    assert "docs/openvino.md §5" in text


def test_the_grammar_would_have_read_the_typos():
    """The refusal is a decision, not a parse failure: the grammar of §3.1 reads these names."""
    for name in ("b_fs_yx_fsv61", "bfyx_fsv16"):
        assert ov.parse_name(name).rank == 4


def test_a_name_nothing_resembles_says_so():
    with pytest.raises(LayoutError, match="no known name is close"):
        ov.parse_format("zzzzzzzzzzzzzz_q")


def test_every_table_name_still_resolves():
    for f in ov.formats():
        if f.supported:
            assert ov.parse_format(f.name) is f.layout
        else:
            with pytest.raises(UnsupportedError, match="is not supported"):
                ov.parse_format(f.name)


# docs/openvino.md §6, the older and kernel-selector-only names: name -> oneDNN tag of that table.
OLDER = {
    "is_os_yx_isa8_osv8_isv2": "BAcd8b8a2b",
    "is_os_yx_isa8_osv8_isv4": "BAcd8b8a4b",
    "os_is_yx_isa8_osv8_isv2": "ABcd8b8a2b",
    "os_is_yx_osa4_isa8_osv8_isv2": "ABcd4a8b8a2b",
    "os_is_yx_osa2_isa8_osv8_isv2": "ABcd2a8b8a2b",
    "is_os_yx_isa2_osa8_isv8_osv2": "BAcd2b8a8b2a",
    "is_os_yx_isa4_osa8_isv8_osv4": "BAcd4b8a8b4a",
    "is_os_yx_osa8_isv16_osv4": "BAcd8a16b4a",
    "g_os_is_yx_isa8_osv8_isv2": "aBCde8c8b2c",  # the g_ variant named in §6
}


@pytest.mark.parametrize("name", OLDER)
def test_older_names_of_section_6_are_still_accepted(name):
    assert name in ov.older_names() and name not in TABLE
    assert ov.to_onednn(name) == OLDER[name]
    assert ov.parse_format(name).to_onednn() == OLDER[name]


def test_older_merged_yx_name_and_zyx_variant():
    # [o/4][i][yx/4][o%4][yx%4] (docs/openvino.md §6): O=5, I=2, YX=6 pads o to 8 and yx to 8.
    assert ov.parse_format("os_i_yxs_osv4_yxsv4").packed_shape((5, 2, 6)) == (2, 2, 2, 4, 4)
    lay = ov.parse_format("os_is_zyx_isa8_osv8_isv2")
    assert lay.logical == ("o", "i", "z", "y", "x")


def test_left_out_and_swizzled_names_keep_their_errors():
    with pytest.raises(UnsupportedError, match="OpenCL"):
        ov.pack(X, "nv12")
    # docs/openvino.md §3.1: a swizzled name outside the table is unsupported, not unknown.
    with pytest.raises(UnsupportedError, match="swizzled formats are defined only by the table"):
        ov.parse_format("is_o32_yx_isv32_swizzled_by_4")
    with pytest.raises(UnsupportedError, match="did you mean 'os_is_yx_osa4_isa8_osv8_isv4_swizzled_by_4'"):
        ov.pack(X, "os_is_yx_osa4_isa8_osv8_isv4_swizzled_by_5")


@pytest.mark.parametrize("bad", [None, 16, b"b_fs_yx_fsv16", ["b_fs_yx_fsv16"]])
def test_a_name_that_is_not_a_str(bad):
    with pytest.raises(TypeError, match="name: expected a str"):
        ov.parse_format(bad)


@pytest.mark.parametrize("call", [lambda n: npupack.pack(X, n),
                                  lambda n: npupack.unpack(np.zeros(4096, np.uint8), n, X.shape, X.dtype),
                                  lambda n: npupack.Layout.parse(n)], ids=["pack", "unpack", "parse"])
def test_openvino_name_given_to_the_generic_grammar(call):
    with pytest.raises(LayoutError) as e:
        call("b_fs_yx_fsv16")
    text = str(e.value)
    assert "is an OpenVINO format name" in text and "npupack.openvino.pack(x, 'b_fs_yx_fsv16')" in text
    assert text.splitlines()[-1].strip() == "^"  # still points at the offending character


def test_grammar_suggests_close_onednn_tags_and_names():
    with pytest.raises(LayoutError, match="did you mean the oneDNN tags 'nChw16c'"):
        npupack.pack(X, "nchw_16c")
    with pytest.raises(LayoutError, match=r"did you mean the OpenVINO names 'b_fs_yx_fsv16', .* \(npupack.openvino\)"):
        npupack.pack(X, "b_fs_yx_fsv61")
    with pytest.raises(LayoutError) as e:  # nothing close: the plain syntax error, no empty hint
        npupack.pack(X, "NCHW16x")
    assert "did you mean" not in str(e.value)


def test_grammar_still_packs_valid_texts():
    expected = np.zeros((1, 1, 3, 4, 16), np.int8)
    expected[..., :2] = np.moveaxis(X, 1, -1)[:, None]
    assert np.array_equal(npupack.pack(X, "NCHW16c"), expected.reshape(-1).view(np.uint8))


@pytest.mark.parametrize("name", ["b_fs_yx_fsv61", "bfyx_fsv16"])
def test_cli_explain_unknown_name_lists_the_closest(name, capsys):
    assert main(["explain", name, "--shape", "1,2,3,4"]) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert "closest names: " + ", ".join(difflib.get_close_matches(name, TABLE, n=5)) in first


def test_cli_explain_known_and_older_names_still_work(capsys):
    assert main(["explain", "b_fs_yx_fsv16", "--shape", "1,2,3,4", "--limit", "2"]) == 0
    assert main(["explain", "is_os_yx_isa8_osv8_isv2", "--shape", "8,16,1,1", "--limit", "2"]) == 0
    assert capsys.readouterr().err == ""
