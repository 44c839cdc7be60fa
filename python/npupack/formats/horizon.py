"""Horizon BPU tensors in the registry: aligned ``horizon:NHWC`` and ``horizon:NCHW``
(docs/horizon.md §3, 4), and the ``horizon:NV12`` / ``horizon:Y`` image inputs (docs/horizon.md §5).
An aligned tensor's buffer is the valid tensor at the model's byte ``stride`` (or the row-major
strides of ``aligned_shape``; when neither is given, of the alignedShape the ``target`` rule
predicts for the ``role``), zeros elsewhere."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from npupack import horizon as hz
from npupack.errors import LayoutError
from npupack.formats.common import into
from npupack.formats.registry import Format, register

PARAMS = {"target": "alignment rule when no stride or aligned_shape is given: x3 (default) or x5 "
                    "(docs/horizon.md §4.3)",
          "role": "input (default) or output: which alignment the rule predicts (docs/horizon.md §4.2)",
          "stride": "the model's byte stride per axis; wins over aligned_shape (docs/horizon.md §3)",
          "aligned_shape": "the model's alignedShape, elements (docs/horizon.md §2)",
          "aligned_byte_size": "the model's alignedByteSize, bytes, at least what the strides address"}
_DTYPES = tuple(np.dtype(t) for t in ("int8", "uint8", "int16", "uint16", "float16", "int32", "uint32", "float32",
                                      "int64", "uint64", "float64"))


@lru_cache(maxsize=1024)
def _predicted(shape, dtype, layout, role, target):
    # The strides of the alignedShape a rule predicts: cached, as the same tensor is padded on
    # every inference (its shape a tuple of ints from an array, its dtype a NumPy dtype).
    aligned = hz.aligned_shape(shape, dtype, layout=layout, role=role or "input", rule=target or "x3")
    return hz._byte_strides(shape, dtype.itemsize, None, aligned)[1]


def _entry(layout: str) -> Format:
    def strides(shape, dtype, target, role, stride, aligned_shape):
        if stride is None and aligned_shape is None:
            if (type(shape) is tuple and all(type(v) is int for v in shape) and isinstance(dtype, np.dtype)
                    and all(v is None or type(v) is str for v in (role, target))):
                return _predicted(shape, dtype, layout, role, target)
            aligned_shape = hz.aligned_shape(shape, dtype, layout=layout, role=role or "input", rule=target or "x3")
        return hz._byte_strides(shape, dtype.itemsize, stride, aligned_shape)[1]

    def nbytes(shape, dtype, target=None, role=None, stride=None, aligned_shape=None, aligned_byte_size=None):
        return hz.nbytes(shape, dtype, stride=strides(shape, dtype, target, role, stride, aligned_shape),
                         aligned_byte_size=aligned_byte_size)

    def pack(x, *, out=None, pad_value=0, target=None, role=None, stride=None, aligned_shape=None,
             aligned_byte_size=None):
        st = strides(x.shape, x.dtype, target, role, stride, aligned_shape)
        return hz.pad(x, stride=st, aligned_byte_size=aligned_byte_size, out=out)

    def unpack(buf, shape, dtype, target=None, role=None, stride=None, aligned_shape=None, aligned_byte_size=None):
        return hz.strip(buf, shape, dtype, stride=strides(shape, dtype, target, role, stride, aligned_shape))

    def layout_of(shape, dtype, target=None, role=None, stride=None, aligned_shape=None, aligned_byte_size=None):
        return hz._descriptor(shape, strides(shape, dtype, target, role, stride, aligned_shape), dtype)

    def offset(shape, index, dtype, target=None, role=None, stride=None, aligned_shape=None,
               aligned_byte_size=None):
        st = strides(shape, dtype, target, role, stride, aligned_shape)
        return sum(i * s for i, s in zip(index, st))  # docs/horizon.md §3

    def explain(shape, dtype, *, limit=None, target=None, role=None, stride=None, aligned_shape=None,
                aligned_byte_size=None):
        from npupack.explain import explain_strided_lines

        st = strides(shape, dtype, target, role, stride, aligned_shape)
        yield f"{layout} {role or 'input'}, stride {st} bytes"
        yield from explain_strided_lines(hz._descriptor(shape, st, dtype), list(layout), shape, limit)

    shape = (1, 3, 5, 3) if layout == "NHWC" else (1, 3, 3, 5)
    examples = ({"shape": shape, "params": {}}, {"shape": shape, "params": {"target": "x5", "role": "output"}})
    return Format(f"horizon:{layout}", "horizon", "feature", PARAMS, "docs/horizon.md §3", ",".join(layout),
                  _DTYPES, nbytes, pack, unpack, offset, layout_of, explain, targets=tuple(hz.ALIGNMENT_RULES),
                  examples=examples, zero_fill=True)


_IMAGE = {"target": "alignment rule giving the row alignment: x3 (default; 16 bytes) or x5 (docs/horizon.md §4.3)",
          "w_align": "row alignment in bytes, overriding the rule's (32 for J6/S100; docs/horizon.md §5)"}


def _image(kind: str) -> Format:
    """``horizon:NV12``: a YUV420 semi-planar frame as one uint8 array (H*3/2, W), the Y rows then
    the interleaved UV rows, as frames are stored in files; ``horizon:Y``: (H, W)."""
    nv12 = kind == "NV12"

    def hw(shape):
        if len(shape) != 2 or (nv12 and shape[0] % 3):
            want = "(H*3/2, W): Y rows, then UV rows" if nv12 else "(H, W)"
            raise LayoutError(f"shape: {kind} frames are {want}, got {shape} (docs/horizon.md §5)")
        return (shape[0] * 2 // 3 if nv12 else shape[0]), shape[1]

    def row(shape, target, w_align):
        return hz._row_stride(hw(shape)[1], w_align, target or "x3")

    def nbytes(shape, dtype, target=None, w_align=None):
        return shape[0] * row(shape, target, w_align)

    def pack(x, *, out=None, pad_value=0, target=None, w_align=None):
        h, w = hw(x.shape)
        if not nv12:  # one plane of H rows of Ws bytes (docs/horizon.md §5)
            ws = row(x.shape, target, w_align)
            return hz.pad(x, stride=(ws, 1), aligned_byte_size=h * ws, out=out)
        uv = np.ascontiguousarray(x[h:]).reshape(h // 2, w // 2, 2) if x.dtype == np.uint8 else x[h:]
        return into(hz.pack_nv12(x[:h], uv, w_align=w_align, rule=target or "x3"), out)

    def unpack(buf, shape, dtype, target=None, w_align=None):
        h, w = hw(shape)
        if not nv12:
            return hz.strip(buf, shape, dtype, stride=(row(shape, target, w_align), 1))
        y, uv = hz.unpack_nv12(buf, h, w, w_align=w_align, rule=target or "x3")
        return np.concatenate([y, uv.reshape(h // 2, w)])

    def offset(shape, index, dtype, target=None, w_align=None):
        # Y(h, w) = h*Ws + w; the UV rows follow with the same stride (docs/horizon.md §5).
        return index[0] * row(shape, target, w_align) + index[1]

    def layout_of(shape, dtype, target=None, w_align=None):
        return hz._descriptor(tuple(shape), (row(shape, target, w_align), 1), np.dtype(np.uint8))

    shape = (6, 6) if nv12 else (4, 6)
    return Format(f"horizon:{kind}", "horizon", "image", _IMAGE, "docs/horizon.md §5",
                  "H*3/2,W" if nv12 else "H,W", (np.dtype(np.uint8),), nbytes, pack, unpack, offset, layout_of, None,
                  targets=tuple(hz.ALIGNMENT_RULES),
                  examples=({"shape": shape, "params": {}}, {"shape": shape, "params": {"w_align": 32}}),
                  zero_fill=True, note="NV12: H and W even" if nv12 else "")


for _layout in ("NHWC", "NCHW"):
    register(_entry(_layout))
register(_image("NV12"))
register(_image("Y"))
