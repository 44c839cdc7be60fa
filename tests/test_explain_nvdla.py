"""`npupack explain nvdla:feature` and `nvdla:dc`: every printed position checked against the worked
examples of docs/nvdla.md §3.6 and §6.2 and against the address formulas of docs/nvdla.md §3.2 and
§6.1, written here in NumPy; `npupack formats` lists both names."""
import re

import numpy as np
import pytest

from npupack.cli import main

SLOT = re.compile(r"^i = (\d+) => (?:\[(.*)\]|padding);$")


def explain(capsys, *argv):
    """Run `npupack explain`; return (header lines, {slot: logical index or None})."""
    assert main(["explain", *argv]) == 0, capsys.readouterr().err
    lines = capsys.readouterr().out.splitlines()
    header, slots = [], {}
    for line in lines:
        m = SLOT.match(line)
        if m is None:
            header.append(line)
            continue
        idx = None if m.group(2) is None else tuple(int(p.split("=")[1]) for p in m.group(2).split("; "))
        assert int(m.group(1)) not in slots
        slots[int(m.group(1))] = idx
    assert sorted(slots) == list(range(len(slots))), "slots are printed once each, in memory order"
    return header, slots


def where(slots):
    """{logical index: slot} for the slots that hold an element."""
    return {idx: i for i, idx in slots.items() if idx is not None}


# ---------------------------------------------------------------- docs/nvdla.md §3.6, feature data

def test_feature_example_1_nv_full_int8(capsys):
    header, slots = explain(capsys, "nvdla:feature", "--shape", "40,2,3")
    assert "line_stride 96, surface_stride 192" in header[0] and "384 bytes" in header[0]
    at = where(slots)
    assert len(slots) == 384
    assert at[(35, 1, 2)] == 355 and at[(31, 0, 0)] == 31 and at[(0, 1, 0)] == 96 and at[(32, 0, 0)] == 192
    for atom in range(192, 384, 32):  # surface 1: channels 40 to 63 are padding
        assert all(slots[atom + b] is None for b in range(8, 32))
        assert all(slots[atom + b] is not None for b in range(8))


def test_feature_example_2_nv_full_fp16(capsys):
    header, slots = explain(capsys, "nvdla:feature", "--shape", "20,1,2", "--precision", "fp16")
    assert "line_stride 64, surface_stride 64" in header[0] and "128 bytes" in header[0]
    assert len(slots) == 128 // 2
    assert where(slots)[(17, 0, 1)] * 2 == 98  # bytes 98 and 99


def test_feature_example_3_nv_small(capsys):
    header, slots = explain(capsys, "nvdla:feature", "--shape", "1,10,1,2", "--target", "nv_small")
    assert "line_stride 16" in header[0] and "32 bytes" in header[0]
    assert len(slots) == 32 and where(slots)[(0, 9, 0, 1)] == 25


def test_feature_example_4_given_strides(capsys):
    header, slots = explain(capsys, "nvdla:feature", "--shape", "2,40,2,3", "--line-stride", "128",
                            "--surface-stride", "320", "--batch-stride", "704")
    assert len(slots) == 1248 and where(slots)[(1, 35, 1, 2)] == 1219


def test_feature_example_5_one_by_one(capsys):
    _, slots = explain(capsys, "nvdla:feature", "--shape", "70,1,1")
    assert len(slots) == 96
    assert [slots[c] for c in range(70)] == [(c, 0, 0) for c in range(70)]
    assert all(slots[b] is None for b in range(70, 96))


@pytest.mark.parametrize("shape,precision,target,strides", [
    ((2, 37, 3, 2), "int8", "nv_full", ()),
    ((1, 20, 2, 5), "int16", "nv_full", ("--line-stride", "192")),
    ((2, 9, 2, 3), "int8", "nv_small", ("--surface-stride", "64", "--batch-stride", "256")),
    ((1, 33, 3, 1), "fp16", "nv_full", ()),
    ((2, 40, 1, 3), "int8", "nv_medium_512", ()),
])
def test_feature_every_slot_against_the_formula(capsys, shape, precision, target, strides):
    """docs/nvdla.md §3.2: byte = n*batch + (c // A)*surface + h*line + w*atom + (c % A)*es."""
    atom = {"nv_full": 32, "nv_small": 8, "nv_medium_512": 16}[target]  # docs/nvdla.md §1.2
    es = 1 if precision == "int8" else 2
    n, c, h, w = shape
    a, g = atom // es, -(-c // (atom // es))
    opts = dict(zip(strides[::2], map(int, strides[1::2])))
    line = opts.get("--line-stride", w * atom)
    surface = opts.get("--surface-stride", h * line)
    batch = opts.get("--batch-stride", g * surface)
    header, slots = explain(capsys, "nvdla:feature", "--shape", ",".join(map(str, shape)), "--precision", precision,
                            "--target", target, *strides)
    idx = np.indices(shape).reshape(4, -1).T
    expect = {tuple(map(int, i)): (i[0] * batch + i[1] // a * surface + i[2] * line + i[3] * atom + i[1] % a * es)
              for i in idx}
    assert {k: v * es for k, v in where(slots).items()} == expect
    assert len(slots) * es == (n - 1) * batch + (g - 1) * surface + (h - 1) * line + w * atom
    assert f"{len(slots) * es} bytes" in header[0]


def test_feature_limit_prints_the_first_slots(capsys):
    """--limit takes the fast path (slots from offsets); it must agree with the full listing."""
    _, full = explain(capsys, "nvdla:feature", "--shape", "1,40,2,3")
    assert main(["explain", "nvdla:feature", "--shape", "1,40,2,3", "--limit", "100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"... ({384 - 100} more)"
    got = {int(m.group(1)): m.group(2) for m in map(SLOT.match, out) if m}
    assert sorted(got) == list(range(100))
    for i in range(100):
        assert (got[i] is None) == (full[i] is None)


# ---------------------------------------------------------------- docs/nvdla.md §6.2, DC weights

def test_dc_example_1(capsys):
    header, slots = explain(capsys, "nvdla:dc", "--shape", "2,3,2,2")
    values = [((k * 3 + c) * 2 + r) * 2 + s for k, c, r, s in (slots[i] for i in range(len(slots)))]
    assert values == [0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23]
    assert "24 meaningful bytes, surface 128 bytes" in header[0]
    assert header[-1] == "bytes 24 to 127 => zero tail (docs/nvdla.md §5.3);"


def test_dc_example_2_nv_small(capsys):
    header, slots = explain(capsys, "nvdla:dc", "--shape", "9,10,1,1", "--target", "nv_small")
    at = where(slots)
    assert [at[(k, c, 0, 0)] for k, c in ((7, 7), (0, 8), (3, 9), (8, 0), (8, 9))] == [63, 64, 71, 80, 89]
    assert len(slots) == 90 and "surface 128 bytes" in header[0]


def test_dc_example_3_fp16(capsys):
    header, slots = explain(capsys, "nvdla:dc", "--shape", "17,65,1,1", "--precision", "fp16")
    at = where(slots)
    assert [2 * at[(k, c, 0, 0)] for k, c in ((1, 0), (5, 64), (16, 0), (16, 64))] == [128, 2058, 2080, 2208]
    assert 2 * len(slots) == 2210 and "surface 2304 bytes" in header[0]


@pytest.mark.parametrize("shape,precision,target,kpg,cb", [
    ((33, 70, 3, 2), "int8", "nv_full", 32, 64),
    ((20, 9, 2, 1), "int16", "nv_full", 16, 64),
    ((10, 17, 1, 3), "int8", "nv_small", 8, 8),
    ((9, 40, 2, 2), "int8", "nv_small_256", 8, 32),
])
def test_dc_every_slot_against_the_formula(capsys, shape, precision, target, kpg, cb):
    """docs/nvdla.md §6.1: kernel groups of kpg, channel blocks of cb, both with a ragged last one;
    inside a block the order is r, s, kernel, channel. The offset is counted block by block."""
    K, C, R, S = shape
    expect, pos = {}, 0
    for k0 in range(0, K, kpg):
        for c0 in range(0, C, cb):
            for r in range(R):
                for s in range(S):
                    for k in range(k0, min(k0 + kpg, K)):
                        for c in range(c0, min(c0 + cb, C)):
                            expect[(k, c, r, s)] = pos
                            pos += 1
    _, slots = explain(capsys, "nvdla:dc", "--shape", ",".join(map(str, shape)), "--precision", precision,
                       "--target", target)
    assert where(slots) == expect and len(slots) == pos


# ---------------------------------------------------------------- refusals and the format list

@pytest.mark.parametrize("argv,message", [
    (["nvdla", "--shape", "1,2,3,4"], "the NVDLA formats are nvdla:feature, nvdla:dc"),
    (["nvdla:featur", "--shape", "1,2,3,4"], "did you mean 'nvdla:feature'"),
    (["nvdla:feature", "--shape", "1,8,1,1", "--target", "nv_tiny"], "target: unknown NVDLA configuration"),
    (["nvdla:feature", "--shape", "1,8,1,1", "--target", "nv_small", "--precision", "fp16"], "not supported"),
    (["nvdla:feature", "--shape", "1,8,1,1", "--line-stride", "33"], "line_stride"),
    (["nvdla:feature", "--shape", "1,8,2,1", "--surface-stride", "32"], "surface"),
    (["nvdla:feature", "--shape", "1,2,8,1,1"], "shape"),
    (["nvdla:dc", "--shape", "2,3,1"], "shape"),
    (["nvdla:dc", "--shape", "2,3,1,1", "--line-stride", "32"], "only nvdla:feature has strides"),
    (["b_fs_yx_fsv16", "--shape", "1,2,3,4", "--precision", "fp16"], "only for nvdla:feature and nvdla:dc"),
])
def test_explain_refuses(capsys, argv, message):
    assert main(["explain", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_formats_lists_nvdla_names_with_their_verbs(capsys):
    assert main(["formats"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  nvdla:")}
    assert set(rows) == {"nvdla:feature", "nvdla:dc"}
    for verb in ("pack_feature", "unpack_feature", "feature_strides", "feature_layout", "explain"):
        assert verb in rows["nvdla:feature"]
    for verb in ("pack_weights", "unpack_weights", "weights_nbytes", "dc_layout", "explain"):
        assert verb in rows["nvdla:dc"]
