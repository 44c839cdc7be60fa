"""Pack every Conv layer of an ONNX model for NVDLA nv_full as int8 direct-convolution weights,
from Python rather than the command line, and check each surface unpacks to its quantised weights.

    python examples/pack_onnx_for_nvdla.py MODEL.onnx
"""
import sys

import numpy as np

from npupack.model import load_onnx
from npupack.nvdla import NV_FULL, pack_weights, quantize_weights, unpack_weights

total = 0
for layer in load_onnx(sys.argv[1]):
    if layer.op_type != "Conv" or layer.weights is None:
        print(f"skip {layer.name} ({layer.op_type})")
        continue
    q, scales = quantize_weights(layer.weights, precision="int8", mode="per_filter")
    ws = pack_weights(q, config=NV_FULL, groups=layer.group)
    assert np.array_equal(unpack_weights(ws), q)
    total += ws.weight.size
    print(f"{layer.name:24s} {str(layer.weights.shape):18s} -> {ws.weight.size:8d} bytes, "
          f"{ws.kernel_groups} kernel groups, {ws.bytes_per_kernel} bytes per kernel")
print(f"{total} bytes of weight surfaces")
