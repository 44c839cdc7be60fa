"""The memory planner: alignment of every start and size, no overlaps (hypothesis over random
surface lists), zero gaps, the image round-trips every surface, manifests and errors."""
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack import LayoutError
from npupack.nvdla import (NV_FULL, NV_SMALL, Config, MemoryPlan, check_alignment, pack_batchnorm, pack_bias,
                           pack_weights, unpack_sdp, unpack_weights)
from npupack.nvdla.rules import alignment_rules

KINDS = tuple(alignment_rules(NV_FULL))


@given(surfaces=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(1, 700)), min_size=1, max_size=25),
       config=st.sampled_from(list(Config.presets().values())), seed=st.integers(0, 2**32 - 1))
def test_random_plans_are_aligned_and_disjoint(surfaces, config, seed):
    rng = np.random.default_rng(seed)
    plan = MemoryPlan(config, base_address=256 * int(rng.integers(0, 5)))
    datas = []
    for i, (kind, size) in enumerate(surfaces):
        data = rng.integers(0, 256, size, dtype=np.uint8)
        datas.append(data)
        plan.add(f"s{i}", data, kind=kind)
    rules = alignment_rules(config)
    spans = []
    for p in plan.placements:
        rule = rules[p.kind]
        assert p.address % rule.address == 0 and p.offset % rule.address == 0
        assert p.reserved % (rule.size or 1) == 0 and p.size <= p.reserved < p.size + (rule.size or 1)
        check_alignment(p.kind, config=config, address=p.address, **({"size": p.reserved} if rule.size else {}))
        spans.append((p.offset, p.offset + p.reserved))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # never overlap
    img = plan.image()
    assert img.size == plan.nbytes == spans[-1][1]
    covered = np.zeros(img.size, bool)
    for p, data in zip(plan.placements, datas):
        assert np.array_equal(plan.view(img, p.name), data)
        covered[p.offset:p.offset + p.size] = True
    assert not img[~covered].any()  # gaps and padding are zero


def test_layer_surfaces_round_trip_through_the_image(tmp_path):
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, (40, 30, 3, 3)).astype(np.int8)
    w[rng.random(w.shape) < 0.7] = 0
    plan = MemoryPlan()
    plain = pack_weights(w)
    comp = pack_weights(w, compress=True)
    sets = pack_weights(rng.integers(-9, 9, (6, 5, 4, 4)).astype(np.int8), kind="deconv", stride=(2, 2))
    bias = pack_bias(np.arange(40, dtype=np.int16), precision="int8")
    bn = pack_batchnorm(np.ones(40, np.float16), np.full(40, 0.5, np.float16), precision="fp16")
    plan.add_weights("conv0", plain)
    plan.add_weights("conv1", comp)
    plan.add_weights("up", sets)
    plan.add_operand("conv0/bias", bias)
    plan.add_operand("bn", bn)
    assert plan.add_operand("scalar", pack_bias(3, precision="int8", mode="per_layer")) is None
    names = [p.name for p in plan.placements]
    assert names[:4] == ["conv0/weight", "conv1/weight", "conv1/wmb", "conv1/wgs"] and "up/set3/weight" in names
    manifest = plan.write(tmp_path, extra={"model": "test"})
    img = np.fromfile(tmp_path / "image.bin", np.uint8)
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest and manifest["model"] == "test"

    def read(name):
        entry = next(s for s in manifest["image"]["surfaces"] if s["name"] == name)
        return img[entry["offset"]:entry["offset"] + entry["size"]]

    again = type(comp)._fast(**{**comp.__dict__, "weight": read("conv1/weight"), "wmb": read("conv1/wmb"),
                                "wgs": read("conv1/wgs")})
    assert np.array_equal(unpack_weights(again), w)
    assert np.array_equal(unpack_weights(type(plain)._fast(**{**plain.__dict__, "weight": read("conv0/weight")})), w)
    got_sets = tuple(type(s)._fast(**{**s.__dict__, "weight": read(f"up/set{i}/weight")}) for i, s in enumerate(sets))
    assert np.array_equal(unpack_weights(got_sets), unpack_weights(sets))
    assert np.array_equal(unpack_sdp(bias, read("conv0/bias")), np.arange(40))
    assert manifest["image"]["surfaces"][0]["address"] % 256 == 0


def test_errors():
    plan = MemoryPlan(NV_SMALL)
    plan.add("a", b"\x01", kind="wmb")
    with pytest.raises(ValueError, match="already"):
        plan.add("a", b"\x01", kind="bias")
    with pytest.raises(ValueError, match="kind"):
        plan.add("b", b"\x01", kind="texture")
    with pytest.raises(TypeError):
        plan.add("c", np.zeros(3, np.int16), kind="bias")
    with pytest.raises(LayoutError, match="base_address"):
        MemoryPlan(base_address=100)
    with pytest.raises(LayoutError, match="needed"):
        plan.image(out=np.zeros(2, np.uint8))
    with pytest.raises(KeyError):
        plan["zz"]
    assert plan["a"].reserved == 128 and plan.nbytes == 128
