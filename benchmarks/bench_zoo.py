"""A zoo of real models (PP-OCRv4 detector, recognizer and classifier from
rapidocr-onnxruntime==1.4.4; the ONNX models of ddddocr==1.6.1) packed as NVDLA int8 weights:
layers per second and GB/s with 1 and 2 threads, against a per-layer NumPy implementation and
memcpy of the same bytes. Run: python -m pytest benchmarks -k zoo"""
import numpy as np
import pytest

import npupack
from npupack.model import load_onnx
from npupack.nvdla import pack_weights, pack_weights_many, quantize_weights
from npupack.zoo import fetch_model
from tests.reference import nvdla as ref

ZOO = ("ppocr-det", "ppocr-rec", "ppocr-cls", "ddddocr-ocr", "ddddocr-old", "ddddocr-det")
IMPLS = ("npupack", "numpy", "memcpy")


@pytest.fixture(scope="module")
def zoo():
    """Quantised int8 weights and groups of every packable Conv layer of the zoo (ddddocr-old's
    layers are ConvInteger: listed, not packable)."""
    layers = []
    for name in ZOO:
        for layer in load_onnx(fetch_model(name)):
            if layer.op_type == "Conv" and layer.note is None and layer.weights.ndim == 4:
                layers.append((quantize_weights(layer.weights, mode="per_filter")[0], layer.group))
    return layers


def _numpy(layers):
    return lambda: [ref.pack_dc_vectorised(ref.densify_groups(w, g), kpg=32, cb=64, tail=128) for w, g in layers]


def _copy(nbytes):
    dst, src = np.empty(nbytes, np.uint8), np.ones(nbytes, np.uint8)
    return lambda: np.copyto(dst, src)


def _run(measure, impl, case, layers, threads):
    weights, groups = [w for w, _ in layers], [g for _, g in layers]
    nbytes = sum(s.weight.size for s in pack_weights_many(weights, groups=groups))

    def ours():
        with npupack.num_threads(threads):
            return pack_weights_many(weights, groups=groups)

    fn = {"npupack": ours, "numpy": _numpy(layers), "memcpy": _copy(nbytes)}[impl]
    measure(case, impl, nbytes, fn, items=len(layers))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("threads", [1, 2])
def bench_zoo_all_layers(measure, impl, threads, zoo):
    _run(measure, impl, f"zoo int8, {len(zoo)} layers, {threads} thread(s)", zoo, threads)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("threads", [1, 2])
def bench_zoo_large_layers(measure, impl, threads, zoo):
    """The 16 largest dense layers (a batch of 1 MiB or more is shared out to threads by layer;
    large grouped layers are a zero fill plus a scatter, bound by memory bandwidth)."""
    dense = sorted(((w, g) for w, g in zoo if g == 1), key=lambda wg: -wg[0].size)
    large = dense[:16]
    _run(measure, impl, f"zoo int8 large dense layers ({len(large)}), {threads} thread(s)", large, threads)


@pytest.mark.parametrize("threads", [1, 2])
def bench_zoo_one_by_one(measure, threads, zoo):
    """The same layers through pack_weights one call at a time (the per-layer overhead)."""
    nbytes = sum(pack_weights(w, groups=g).weight.size for w, g in zoo)

    def loop():
        with npupack.num_threads(threads):
            return [pack_weights(w, groups=g) for w, g in zoo]

    measure(f"zoo int8 one call per layer, {threads} thread(s)", "npupack", nbytes, loop, items=len(zoo))
