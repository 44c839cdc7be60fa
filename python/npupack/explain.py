"""Where each element of a layout goes, printed the way the OpenVINO wiki does it:
``i = 16 => [b=0; f=0; y=0; x=1] == [b=0; fs=0; y=0; x=1; fsv=0]``."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from npupack.errors import LayoutError, UnsupportedError
from npupack.grammar import Layout

__all__ = ["resolve_layout", "explain_lines", "explain_strided_lines", "vendor_explain_lines"]


def resolve_layout(fmt: str) -> Layout:
    """A format argument of the command line: a clDNN format name, a layout text (``NCHW16c``)
    or a oneDNN tag (``nChw16c``, ``ABcd8b16a2b``), tried in that order."""
    from npupack import openvino

    errors = []
    for parse in (openvino.parse_format, Layout.parse, Layout.from_onednn):
        try:
            return parse(fmt)
        except UnsupportedError:
            raise
        except LayoutError as e:
            errors.append(str(e).splitlines()[0])
    raise LayoutError(f"format {fmt!r} is not a clDNN format name, a layout text or a oneDNN tag:\n  " +
                      "\n  ".join(errors))


def _physical_names(lay: Layout) -> list:
    total = {d: 1 for d in lay.logical}
    count = {d: 0 for d in lay.logical}
    for t in lay.tiles:
        total[t.dim] *= t.size
        count[t.dim] += 1
    names = [f"{d}s" if total[d] > 1 else d for d in lay.outer]
    for t in lay.tiles:
        names.append(f"{t.dim}sv" if count[t.dim] == 1 else f"{t.dim}sv{t.size}")
    return names


def explain_lines(lay: Layout, shape, *, pad_lo=None, pad_hi=None, limit=None) -> Iterator[str]:
    """Yield one header line, then one line per element position of the packed buffer (in
    memory order): the logical index stored there (or ``padding``) and the physical digits."""
    shape = tuple(int(v) for v in shape)
    bound = lay.bind(shape, np.int64, pad_lo=pad_lo, pad_hi=pad_hi)
    coded = np.arange(1, int(np.prod(shape)) + 1, dtype=np.int64).reshape(shape)
    where = bound.pack(coded).view(np.int64)  # position -> logical flat index + 1, 0 for padding
    extents = lay.packed_shape(shape, pad_lo=pad_lo, pad_hi=pad_hi)
    phys = _physical_names(lay)
    dims = "; ".join(f"{d}:{n}" for d, n in zip(lay.logical, shape))
    buf = "; ".join(f"{d}:{n}" for d, n in zip(phys, extents))
    yield f"{lay} {lay.describe()}: tensor [{dims}] -> buffer [{buf}] = {where.size} elements"
    for i, code in enumerate(where):
        if limit is not None and i >= limit:
            yield f"... ({where.size - limit} more)"
            return
        digits = np.unravel_index(i, extents)
        right = "; ".join(f"{n}={int(v)}" for n, v in zip(phys, digits))
        if code:
            idx = np.unravel_index(int(code) - 1, shape)
            left = "[" + "; ".join(f"{d}={int(v)}" for d, v in zip(lay.logical, idx)) + "]"
        else:
            left = "padding"
        yield f"i = {i} => {left} == [{right}];"


def explain_strided_lines(desc, names, shape, limit=None) -> Iterator[str]:
    """For descriptors given by strides (Kneron KL730 ``stride_npu``, Horizon ``stride``): one line
    per element-sized slot of the buffer, the logical index stored there or ``padding``."""
    shape = tuple(int(v) for v in shape)
    coded = np.arange(1, int(np.prod(shape)) + 1, dtype=np.int64).reshape(shape)
    # Pack the codes with the same strides scaled to 8-byte slots: slot i of the real buffer is
    # slot i here.
    from npupack.layout import BlockedLayout

    scale = 8 // desc.dtype.itemsize
    wide = BlockedLayout(desc.dims, desc.order, np.int64,
                         {k: v * scale for k, v in getattr(desc, "byte_strides", {}).items()})
    where = wide.pack(coded).view(np.int64)
    yield f"{desc.nbytes // desc.dtype.itemsize} slots of {desc.dtype.itemsize} byte(s), tensor " + \
        "[" + "; ".join(f"{n}:{v}" for n, v in zip(names, shape)) + "]"
    for i, code in enumerate(where):
        if limit is not None and i >= limit:
            yield f"... ({where.size - limit} more)"
            return
        if code:
            idx = np.unravel_index(int(code) - 1, shape)
            yield f"i = {i} => [" + "; ".join(f"{n}={int(v)}" for n, v in zip(names, idx)) + "];"
        else:
            yield f"i = {i} => padding;"


def vendor_explain_lines(fmt: str, shape, *, chip=None, stride=None, dtype="int8", role="input",
                         limit=None) -> Iterator[str]:
    """``kneron:<layout>`` (with ``chip``; ``stride`` = stride_npu on KL730/KL830) or
    ``horizon:NHWC|NCHW`` (``stride`` in bytes, else the X3 alignedShape for ``dtype``/``role``)."""
    vendor, _, name = fmt.partition(":")
    if vendor == "kneron":
        from npupack import kneron

        if chip is None:
            raise ValueError("chip: explaining a Kneron layout needs --chip")
        if kneron._chip(chip) in kneron.V1_CHIPS:
            shp = kneron._v1_shape(shape)
            yield from explain_lines(kneron.v1_layout(name, chip), shp, limit=limit)
            return
        lay, _, desc, eshape, _, _ = kneron._plan(name, shape, chip, stride)
        yield f"{lay.vendor_name} on {chip} (16-bit high/low formats: slots before the byte split)"
        yield from explain_strided_lines(desc, [f"d{i}" for i in range(len(eshape))], eshape, limit)
        return
    if vendor == "horizon":
        from npupack import horizon

        layout = horizon.tensor_layout(name)
        dt = horizon.numpy_dtype(dtype)
        if stride is None:
            aligned = horizon.aligned_shape(shape, dt, layout=layout, role=role)
            stride = horizon.strides(aligned, dt)
            yield f"{layout} {role}, alignedShape {aligned}, stride {stride} bytes"
        valid, st = horizon._byte_strides(shape, dt.itemsize, stride, None)
        yield from explain_strided_lines(horizon._descriptor(valid, st, dt), list(layout), valid, limit)
        return
    raise LayoutError(f"format {fmt!r}: expected kneron:<layout> or horizon:<NHWC|NCHW>")
