"""OpenVINO GPU (clDNN) formats in the registry: ``openvino:<name>`` for every supported name of
:func:`npupack.openvino.formats` (docs/openvino.md §5); the left-out names raise
UnsupportedError with their reason (docs/openvino.md §6); the older names the grammar reads
(``openvino:is_os_yx_isa8_osv8_isv2``) resolve on request without being listed."""
from __future__ import annotations

from npupack import openvino as ov
from npupack.errors import UnsupportedError
from npupack.formats.common import DATA_DTYPES, layout_format, sample_shape
from npupack.formats.registry import Format, refuse, register, register_dynamic

PARAMS = {"pad_lo": "lower padding per logical dim, elements (data formats; docs/openvino.md §4)",
          "pad_hi": "upper padding per logical dim, elements (data formats; docs/openvino.md §4)"}
_KIND = {"data": "feature", "weights": "weights", "grouped_weights": "weights"}


def _entry(name: str, kind: str, logical: str, lay, doc: str) -> Format:

    def nbytes(shape, dtype, pad_lo=None, pad_hi=None):
        return ov.nbytes(name, shape, dtype, pad_lo=pad_lo, pad_hi=pad_hi)

    def pack(x, *, out=None, pad_value=0, pad_lo=None, pad_hi=None):
        return ov.pack(x, name, pad_lo=pad_lo, pad_hi=pad_hi, pad_value=pad_value, out=out)

    def unpack(buf, shape, dtype, pad_lo=None, pad_hi=None):
        return ov.unpack(buf, name, shape, dtype, pad_lo=pad_lo, pad_hi=pad_hi)

    def offset(shape, index, dtype, pad_lo=None, pad_hi=None):
        # openvino.offset_of counts elements (docs/openvino.md §3.2); the registry speaks bytes.
        return ov.offset_of(name, shape, index, pad_lo=pad_lo, pad_hi=pad_hi) * dtype.itemsize

    def layout(shape, dtype, pad_lo=None, pad_hi=None):
        lay, eshape, lo, hi = ov._prepare(name, shape, pad_lo, pad_hi)
        return lay.bind(eshape, dtype, pad_lo=lo, pad_hi=hi)

    def explain(shape, dtype, *, limit=None, pad_lo=None, pad_hi=None):
        from npupack.explain import explain_lines

        lay, eshape, lo, hi = ov._prepare(name, shape, pad_lo, pad_hi)
        return explain_lines(lay, eshape, pad_lo=lo, pad_hi=hi, limit=limit)

    if "yx" in lay.logical:  # merged-yx depthwise formats: (G, 1, 1, Y, X)
        shape = (2, 1, 1, 3, 3)
    else:
        shape = sample_shape(logical)
    return Format(f"openvino:{name}", "openvino", kind, PARAMS, doc, ",".join(logical), DATA_DTYPES, nbytes, pack,
                  unpack, offset, layout, explain,
                  examples=({"shape": shape, "params": {}},))


def _older(rest: str):
    """``openvino:<older name>``: the older and kernel-selector names of docs/openvino.md §6, read
    by the grammar; resolved on request, not listed (as :func:`npupack.openvino.formats` does not)."""
    if rest not in ov.older_names():
        return None  # the registry's own error, with namespaced suggestions
    hit = _older_cache.get(rest)
    if hit is None:
        lay = ov.parse_format(rest)
        if "yx" in lay.logical and "g" not in lay.logical:
            # (o, i, yx): the shape functions merge yx only for grouped shapes, so this one takes
            # the merged (O, I, Y*X) tensor through the engine (docs/openvino.md §6).
            hit = layout_format(f"openvino:{rest}", "openvino", "weights", lay, "docs/openvino.md §6",
                                ({"shape": (5, 3, 9), "params": {}},))
        else:
            hit = _entry(rest, "weights", "".join(lay.logical), lay, "docs/openvino.md §6")
        _older_cache[rest] = hit
    return hit


_older_cache: dict = {}

for _info in ov.formats():
    if _info.supported:
        register(_entry(_info.name, _KIND[_info.kind], _info.logical, _info.layout,
                        f"docs/openvino.md §{ov._section(_info.name)}"))
    else:
        refuse(f"openvino:{_info.name}", UnsupportedError,
               f"format {_info.name!r} is not supported: {_info.reason} (docs/openvino.md §6)")
register_dynamic("openvino", _older)
