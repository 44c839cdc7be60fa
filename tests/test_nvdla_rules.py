"""NVDLA precision-conversion tables, FP16 rules and alignment (docs/nvdla.md §13-15; examples
A1-A10 of 16.10, every row of the four tables valid and invalid, every alignment rule)."""
import itertools

import pytest

from npupack import LayoutError, UnsupportedError
from npupack.nvdla import ALIGNMENT, NV_FULL, NV_LARGE, NV_SMALL, Config, check_alignment, check_precision
from npupack.nvdla.pixel import PIXEL_FORMATS
from npupack.nvdla.rules import FP16_INF_AS, FP16_RULES, PRECISION_TABLES, alignment_rules

P = ("int8", "int16", "fp16")
# The hardware documentation's four tables, transcribed independently (input class, output) -> pipeline or None.
SEED_CONV = {**{("integer image", o): o for o in P}, ("fp16 image", "fp16"): "fp16",
             **{(f"{i} feature", i): i for i in P}}
SEED_SDP = {("int8", "int8"): "int32", ("int8", "int16"): "int32", ("int16", "int8"): "int32",
            ("int16", "int16"): "int32", ("int16", "fp16"): "int32", ("fp16", "int16"): "fp32",
            ("fp16", "fp16"): "fp32"}
SEED_SAME = {(p, p): p for p in P}


@pytest.mark.parametrize("unit, inp, out, want", [
    ("conv", "T_A8R8G8B8", "fp16", ("fp16", "fp16")),   # A1
    ("sdp", "int16", "fp16", ("int32", None)),            # A4
    ("cdp", "fp16", "fp16", ("fp16", None)),              # A5
])
def test_A_valid_examples(unit, inp, out, want):
    row = check_precision(unit, inp, out)
    assert (row.pipeline, row.weights) == want


@pytest.mark.parametrize("unit, inp, out", [
    ("conv", "T_A16B16G16R16_F", "int8"),  # A2
    ("conv", "int8", "int16"),             # A3
    ("sdp", "int8", "fp16"),               # A4
    ("pdp", "int8", "fp16"),               # A5
])
def test_A_invalid_examples_quote_the_row(unit, inp, out):
    with pytest.raises(UnsupportedError, match="invalid"):
        check_precision(unit, inp, out)


@pytest.mark.parametrize("unit, table", [("sdp", SEED_SDP), ("cdp", SEED_SAME), ("pdp", SEED_SAME)])
def test_every_row_of_the_feature_tables(unit, table):
    assert len(PRECISION_TABLES[unit]) == 9
    for i, o in itertools.product(P, P):
        if (i, o) in table:
            assert check_precision(unit, i, o).pipeline == table[(i, o)]
        else:
            with pytest.raises(UnsupportedError, match=f"{unit}: {i} -> {o}: invalid"):
                check_precision(unit, i, o)


def test_every_row_of_the_convolution_table():
    for name, fmt in PIXEL_FORMATS.items():
        cls = "fp16 image" if fmt.kind == "fp16" else "integer image"
        for o in P:
            if (cls, o) in SEED_CONV:
                row = check_precision("conv", name, o)
                assert row.pipeline == row.weights == SEED_CONV[(cls, o)]
            else:
                with pytest.raises(UnsupportedError):
                    check_precision("conv", name, o)
    for i, o in itertools.product(P, P):
        if i == o:
            assert check_precision("conv", i, o).weights == i
        else:
            with pytest.raises(UnsupportedError):
                check_precision("conv", i, o)


@pytest.mark.parametrize("call, exc", [
    (lambda: check_precision("gpu", "int8", "int8"), ValueError),
    (lambda: check_precision("conv", "T_NOPE", "int8"), ValueError),
    (lambda: check_precision("sdp", "T_R8", "int8"), ValueError),
    (lambda: check_precision("sdp", "int8", "int4"), ValueError),
    (lambda: check_precision("sdp", 8, "int8"), TypeError),
])
def test_bad_queries(call, exc):
    with pytest.raises(exc):
        call()


def test_fp16_rules_as_data():
    assert FP16_INF_AS["conv_dc"] == 65536 and FP16_INF_AS["conv_winograd"] == 65504
    assert FP16_INF_AS["pdp_max_min"] == float("inf") and FP16_RULES["nan_generated"] is False


# ---------------------------------------------------------------- alignment

def test_seed_table():
    assert ALIGNMENT["feature"].address == 32 and ALIGNMENT["weight"].address == 256
    assert ALIGNMENT["wmb"].size == 128 and ALIGNMENT["eltwise"].size == 32 and ALIGNMENT["pixel"].line_stride == 32
    assert alignment_rules(NV_SMALL)["bias"].line_stride == 8 and alignment_rules(NV_SMALL)["pixel"].address == 32


@pytest.mark.parametrize("call, ok", [
    (lambda: check_alignment("feature", line_stride=100), False),                                   # A6
    (lambda: check_alignment("feature", config=NV_SMALL, line_stride=16), True),                   # A7
    (lambda: check_alignment("weight", address=4224), False),                                       # A8
    (lambda: check_alignment("weight", config=NV_LARGE, size=192), False),                          # A9
    (lambda: check_alignment("weight", config=Config("x", 32, 64, 32, 64, 64), size=192), True),   # A9
    (lambda: check_alignment("wmb", size=130), False),                                               # A10
    (lambda: check_alignment("wgs", address=512, size=128), True),
    (lambda: check_alignment("prelu", line_stride=32), False),
    (lambda: check_alignment("feature", surface_stride=64, shape=(64, 1, 1)), False),
    (lambda: check_alignment("feature", surface_stride=32, shape=(64, 1, 1)), True),
    (lambda: check_alignment("eltwise", surface_stride=48), False),
])
def test_A6_to_A10_and_more(call, ok):
    if ok:
        call()
    else:
        with pytest.raises(LayoutError):
            call()


def test_every_rule_rejects_misalignment():
    for config in Config.presets().values():
        for kind, rule in alignment_rules(config).items():
            for field in ("address", "line_stride", "surface_stride", "batch_stride", "size"):
                align = getattr(rule, field)
                if align is None:
                    continue
                check_alignment(kind, config=config, **{field: 3 * align})
                if align > 1:
                    with pytest.raises(LayoutError, match=field):
                        check_alignment(kind, config=config, **{field: 3 * align + 1})
    with pytest.raises(ValueError, match="kind"):
        check_alignment("texture", address=0)
    with pytest.raises(TypeError):
        check_alignment("weight", address="0")
    assert check_alignment("weight", config=NV_FULL, address=256, size=128).address == 256
