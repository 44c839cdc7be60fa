"""Where each element of a layout goes, printed the way the OpenVINO wiki does it:
``i = 16 => [b=0; f=0; y=0; x=1] == [b=0; fs=0; y=0; x=1; fsv=0]`` (docs/openvino.md §10.1; NVDLA
addresses: docs/nvdla.md §3.1, §6.1)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from npupack.errors import LayoutError, UnsupportedError
from npupack.grammar import Layout
from npupack.layout import BlockedLayout

__all__ = ["resolve_layout", "explain_lines", "explain_strided_lines", "vendor_explain_lines", "nvdla_explain_lines"]


def resolve_layout(fmt: str) -> Layout:
    """A format argument of the command line: a clDNN format name, a layout text (``NCHW16c``)
    or a oneDNN tag (``nChw16c``, ``ABcd8b16a2b``), tried in that order. Raises
    UnsupportedError for a left-out clDNN format (docs/openvino.md §6), LayoutError for text none
    of them reads, listing the closest clDNN names and each reader's complaint."""
    from npupack import openvino

    errors = []
    for parse in (openvino.parse_format, Layout.parse, Layout.from_onednn):
        try:
            return parse(fmt)
        except UnsupportedError:
            raise
        except LayoutError as e:
            errors.append(str(e).splitlines()[0])
    close = openvino._closest_names(fmt) if isinstance(fmt, str) else []
    hint = f"; closest names: {', '.join(close)}" if close else ""
    raise LayoutError(f"format {fmt!r} is not a clDNN format name, a layout text or a oneDNN tag{hint}:\n  " +
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
    total = bound.nbytes // 8
    extents = lay.packed_shape(shape, pad_lo=pad_lo, pad_hi=pad_hi)
    phys = _physical_names(lay)
    dims = "; ".join(f"{d}:{n}" for d, n in zip(lay.logical, shape))
    buf = "; ".join(f"{d}:{n}" for d, n in zip(phys, extents))
    yield f"{lay} {lay.describe()}: tensor [{dims}] -> buffer [{buf}] = {total} elements"
    for i, idx in enumerate(_slots(bound, shape, limit)):
        if limit is not None and i >= limit:
            yield f"... ({total - limit} more)"
            return
        digits = np.unravel_index(i, extents)
        right = "; ".join(f"{n}={int(v)}" for n, v in zip(phys, digits))
        left = "padding" if idx is None else "[" + "; ".join(f"{d}={int(v)}" for d, v in zip(lay.logical, idx)) + "]"
        yield f"i = {i} => {left} == [{right}];"


def _slots(desc, shape, limit) -> Iterator:
    """The logical index held by each element slot of ``desc``'s buffer (None: padding), in
    memory order. With a ``limit``, only the first ``limit`` slots (and one more, so the caller
    sees there are more) are computed, from their byte offsets, in time and memory that do not
    grow with the tensor; each is checked against ``offset_of`` (docs/design.md §2.2). Without
    one, or for ragged and swizzled descriptors whose digits are not a plain mixed radix, every
    slot comes from packing the tensor's flat indices."""
    if limit is not None and not desc._core.ragged and _mixed_radix(desc._core.axes):
        yield from _first_slots(desc, limit + 1)
        return
    coded = np.arange(1, int(np.prod(shape)) + 1, dtype=np.int64).reshape(shape)
    # Pack the codes into 8-byte slots at the same positions: slot i of the real buffer is slot i here.
    scale = 8 // desc.dtype.itemsize
    wide = BlockedLayout(desc.dims, desc.order, np.int64, {k: v * scale for k, v in desc.byte_strides.items()})
    for code in wide.pack(coded).view(np.int64):  # position -> logical flat index + 1, 0 for padding
        yield np.unravel_index(int(code) - 1, shape) if code else None


def _mixed_radix(axes) -> bool:
    """True when each dim's digit weights (divisors), smallest first, are 1 and then each the
    product of the ones before times their extents: then the padded coordinate is the sum of
    digit * weight, and a slot's digits give back the one coordinate stored there."""
    by_dim: dict = {}
    for dim, _, extent, weight, _ in axes:
        by_dim.setdefault(dim, []).append((weight, extent))
    for parts in by_dim.values():
        parts.sort()
        expect = 1
        for weight, extent in parts:
            if weight != expect:
                return False
            expect = weight * extent
    return True


def _first_slots(desc, count: int) -> Iterator:
    """The first ``count`` slots of :func:`_slots` from their byte offsets: the digit of each
    loop, outer to inner, is what its stride takes of the offset; an offset that no digits
    reach exactly (a stride gap) or a coordinate outside the tensor (padding) holds no element."""
    eb = desc.dtype.itemsize
    axes = [a for a in desc._core.axes if a[2] > 1]  # (dim, level, extent, digit weight, byte stride), outer first
    for i in range(min(count, desc.nbytes // eb)):
        rest, coord, inside = i * eb, [0] * len(desc.dims), True
        for dim, _, extent, weight, stride in axes:
            digit = rest // stride if stride else 0
            if digit >= extent:
                inside = False
                break
            rest -= digit * stride
            coord[dim] += digit * weight
        idx = tuple(c - d.pad_lo for c, d in zip(coord, desc.dims))
        if not (inside and rest == 0 and all(0 <= v < d.extent for v, d in zip(idx, desc.dims))):
            yield None
            continue
        if desc.offset_of(idx) != i * eb:
            raise AssertionError(f"explain: slot {i} inverts to {idx}, which offset_of places elsewhere")
        yield idx


def explain_strided_lines(desc, names, shape, limit=None) -> Iterator[str]:
    """For descriptors given by strides (Kneron KL730 ``stride_npu``, Horizon ``stride``): one line
    per element-sized slot of the buffer, the logical index stored there or ``padding``."""
    shape = tuple(int(v) for v in shape)
    total = desc.nbytes // desc.dtype.itemsize
    yield f"{total} slots of {desc.dtype.itemsize} byte(s), tensor " + \
        "[" + "; ".join(f"{n}:{v}" for n, v in zip(names, shape)) + "]"
    for i, idx in enumerate(_slots(desc, shape, limit)):
        if limit is not None and i >= limit:
            yield f"... ({total - limit} more)"
            return
        if idx is not None:
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


NVDLA_FORMATS = ("nvdla:feature", "nvdla:dc")


def nvdla_explain_lines(fmt: str, shape, *, precision: str = "int8", target: str = "nv_full", line_stride=None,
                        surface_stride=None, batch_stride=None, limit=None) -> Iterator[str]:
    """Where each element of an NVDLA surface goes: one header line, then one line per
    element-sized slot (``i`` counts slots of ``es`` bytes: byte offset ``i * es``).

    ``nvdla:feature``: ``shape`` (N, C, H, W) or (C, H, W), elements; strides in bytes, each
    omitted one derived (docs/nvdla.md §3.2); the slots are the descriptor of docs/nvdla.md §3.6.
    ``nvdla:dc``: ``shape`` (K, C, R, S) of dense DC weights (docs/nvdla.md §6.1); the slots are
    the meaningful bytes, followed by one line for the zero tail up to the surface size
    (docs/nvdla.md §5.3). ``precision`` is int8, int16 or fp16; ``target`` an NVDLA preset name
    (nv_full, nv_small, ...; docs/nvdla.md §1.2).

    Raises LayoutError for an unknown format (naming the NVDLA formats), a bad shape or stride
    (as ``feature_strides`` / ``dc_layout``), strides given for ``nvdla:dc``; ValueError for an
    unknown precision or target; UnsupportedError for a precision the target lacks."""
    from npupack.nvdla import Config, dc_layout, feature_layout, feature_strides
    from npupack.nvdla.weights import weights_nbytes

    try:
        config = Config.named(target)
    except ValueError as e:  # the preset lookup names its own argument "name"
        raise ValueError(str(e).replace("name:", "target:", 1)) from None
    config.require_precision(precision)
    if fmt == "nvdla:feature":
        st = feature_strides(shape, precision, config, line_stride=line_stride, surface_stride=surface_stride,
                             batch_stride=batch_stride)
        desc = feature_layout(shape, precision, config, line_stride=st.line_stride,
                              surface_stride=st.surface_stride, batch_stride=st.batch_stride)
        names = ["N", "C", "H", "W"] if len(tuple(shape)) == 4 else ["C", "H", "W"]
        dims = tuple(d.extent for d in desc.dims)[4 - len(names):]
        a = config.atom_elements(precision)
        yield (f"nvdla:feature {precision} on {config.name}: atom {config.atom_bytes} bytes = {a} channels, "
               f"{st.surfaces} surface(s); line_stride {st.line_stride}, surface_stride {st.surface_stride}, "
               f"batch_stride {st.batch_stride} bytes; {st.nbytes} bytes (docs/nvdla.md §3.2)")
        if len(names) == 3:  # the descriptor is 4-D (N = 1); show the caller's 3-D index
            lines = explain_strided_lines(desc, ["N"] + names, (1,) + dims, limit)
            yield from (line.replace("[N=0; ", "[").replace("[N:1; ", "[") for line in lines)
        else:
            yield from explain_strided_lines(desc, names, dims, limit)
        return
    if fmt == "nvdla:dc":
        if line_stride is not None or surface_stride is not None or batch_stride is not None:
            raise LayoutError("line_stride, surface_stride, batch_stride: only nvdla:feature has strides "
                              "(docs/nvdla.md §3.2)")
        desc = dc_layout(shape, precision, config)
        surface = weights_nbytes(shape, precision=precision, config=config, kind="dc")
        yield (f"nvdla:dc {precision} on {config.name}: kernel groups of {config.kernels_per_group(precision)} "
               f"kernels, channel blocks of {config.channels_per_block} channels (last ones ragged); "
               f"{desc.nbytes} meaningful bytes, surface {surface} bytes (docs/nvdla.md §6.1)")
        yield from explain_strided_lines(desc, ["K", "C", "R", "S"], tuple(d.extent for d in desc.dims), limit)
        if surface > desc.nbytes and limit is None:
            yield f"bytes {desc.nbytes} to {surface - 1} => zero tail (docs/nvdla.md §5.3);"
        return
    import difflib

    from npupack import formats

    known = list(NVDLA_FORMATS) + [n for n in formats.names(vendor="nvdla") if n not in NVDLA_FORMATS]
    close = difflib.get_close_matches(fmt, known, n=2, cutoff=0.3)
    raise LayoutError(f"format {fmt!r}: unknown NVDLA format; the NVDLA formats are {', '.join(NVDLA_FORMATS)} and "
                      "the other nvdla: names of the registry (`npupack formats --vendor nvdla`; docs/formats.md §1)"
                      + (f" (did you mean {', '.join(map(repr, close))}?)" if close else ""))
