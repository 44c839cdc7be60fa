"""clDNN blocked formats: npupack vs NumPy pad/reshape/transpose vs oneDNN's reorder vs np.copyto of
the output bytes, single thread, in one run (issue targets: >= 5x NumPy, >= 0.6x memcpy on tensors
of 1 MiB and more, not slower than oneDNN)."""
import numpy as np
import pytest

from npupack import openvino as ov
from tests.onednn_oracle import Oracle
from tests.reference import blocked as ref

FORMATS = {"b_fs_yx_fsv16": "aBcd16b", "b_fs_yx_fsv32": "aBcd32b", "os_is_yx_isv16_osv16": "ABcd16b16a"}
SHAPES = [(1, 256, 56, 56), (8, 64, 224, 224), (8, 3, 224, 224), (256, 256, 3, 3)]
IMPLS = ("npupack", "numpy", "onednn", "memcpy")
_ORACLE = Oracle.load()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", ["int8", "float16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(FORMATS))
def bench_format(measure, name, shape, dtype, impl):
    rng = np.random.default_rng(0)
    x = rng.integers(-100, 100, shape).astype(dtype)
    out = np.empty(ov.nbytes(name, shape, dtype), np.uint8)
    lay = ov.parse_format(name)
    if impl == "npupack":
        fn = lambda: ov.pack(x, name, out=out)  # noqa: E731
    elif impl == "numpy":
        tiles = [(t.dim, t.size, None) for t in lay.tiles]
        fn = lambda: ref.pack_transpose(x, lay.logical, lay.outer, tiles)  # noqa: E731
    elif impl == "onednn":
        if _ORACLE is None:
            pytest.skip("oneDNN not installed")
        fn, dst = _ORACLE.prepare(x, FORMATS[name])
        assert dst.size == out.size
    else:
        src = np.ones_like(out)
        fn = lambda: np.copyto(out, src)  # noqa: E731
    measure(f"{name} {shape} {dtype}", impl, out.size, fn)
