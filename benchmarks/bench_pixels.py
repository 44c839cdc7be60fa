"""NVDLA pixel packing: npupack vs a NumPy implementation (component reorder, pad lines to the
32-byte stride) vs np.copyto of the output bytes, single thread, in one run (issue target: >= 5x
NumPy and >= 0.5x memcpy for 8-bit formats)."""
import numpy as np
import pytest

from npupack.nvdla import PIXEL_FORMATS, pack_pixels

IMPLS = ("npupack", "numpy", "memcpy")
FORMATS = ["T_A8B8G8R8", "T_R8", "T_Y8___U8V8_N444", "T_A2B10G10R10"]


def _numpy_pack(img, fmt):
    planes = []
    h, w = img.shape[:2]
    for order in fmt.planes:
        if fmt.kind == "10bit":
            a = img.astype(np.uint32)
            s = fmt.shifts
            data = ((a[..., 0] << s[0]) | (a[..., 1] << s[1]) | (a[..., 2] << s[2]) | (a[..., 3] << s[3]))
            row = data.view(np.uint8).reshape(h, -1)
        else:
            row = np.ascontiguousarray(img[:, :, list(order)]).reshape(h, -1)
        ls = -(-row.shape[1] // 32) * 32
        plane = np.zeros((h, ls), np.uint8)
        plane[:, :row.shape[1]] = row
        planes.append(plane.reshape(-1))
    return planes


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("size", [(1080, 1920), (224, 224)], ids=lambda s: f"{s[1]}x{s[0]}")
@pytest.mark.parametrize("name", FORMATS)
def bench_pack_pixels(measure, name, size, impl):
    fmt = PIXEL_FORMATS[name]
    rng = np.random.default_rng(0)
    h, w = size
    if fmt.kind == "10bit":
        img = np.concatenate([rng.integers(0, 1024, (h, w, 3)), rng.integers(0, 4, (h, w, 1))], 2).astype(np.uint16)
    else:
        img = rng.integers(0, 256, (h, w, fmt.comps)).astype(np.uint8)
    ref_planes = pack_pixels(img, name).planes
    nbytes = sum(p.size for p in ref_planes)
    if impl == "npupack":
        outs = tuple(np.empty_like(p) for p in ref_planes)
        fn = lambda: pack_pixels(img, name, out=outs)  # noqa: E731
    elif impl == "numpy":
        fn = lambda: _numpy_pack(img, fmt)  # noqa: E731
    else:
        dst, src = np.empty(nbytes, np.uint8), np.ones(nbytes, np.uint8)
        fn = lambda: np.copyto(dst, src)  # noqa: E731
    measure(f"pixels {name} {w}x{h}", impl, nbytes, fn)
