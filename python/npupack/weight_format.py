"""The pack job's view of a weight format: resolve a namespaced name (``openvino:os_is_yx_isv16_osv16``,
``onednn:OIhw16i16o``, ``nvdla:dc``) to the shape the format packs for a convolution layer and to
its ``nbytes`` / ``pack`` / ``unpack`` verbs (docs/design.md §5.6).

The formats themselves live in the registry, ``npupack.formats`` (``formats.get(name)``, entries
of kind ``"weights"``); this module only adapts them to the job: which tensor shape a
``(K, C/group, R, S)`` layer becomes (grouped ``(G, K/G, C/G, R, S)``, fully connected
``(K, C*R*S)``), the grouped form of a format, and the element type of each precision. Every
byte comes from the registry's ``pack``; there is no second list of formats here.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from npupack.errors import LayoutError, UnsupportedError

__all__ = ["WeightFormat", "resolve", "NVDLA_DEFAULT", "PRECISION_DTYPES", "is_nvdla"]

#: The job's default weight format: NVDLA direct-convolution weights (docs/nvdla.md).
NVDLA_DEFAULT = "nvdla:dc"

#: Element type of each precision a non-NVDLA weight format is packed in.
PRECISION_DTYPES = {"fp16": np.dtype("<f2"), "fp32": np.dtype("<f4"), "int8": np.dtype("i1"),
                    "int16": np.dtype("<i2")}


def is_nvdla(name) -> bool:
    """True for the NVDLA weight format the job packs by its own rules (``nvdla:dc``, the default)."""
    return name is None or name == NVDLA_DEFAULT


@dataclass(frozen=True)
class WeightFormat:
    """A weight format as the pack job uses it (docs/design.md §5.6).

    Attributes
    ----------
    name : str
        Namespaced name (``"openvino:os_is_yx_isv16_osv16"``).
    vendor : str
        ``"openvino"``, ``"onednn"``, ... (never ``"nvdla"``: NVDLA weights go through
        :func:`npupack.nvdla.pack_weights`).
    doc : str
        The docs section of the format.
    axes : tuple of str
        The format's logical axes: ``("o", "i", "y", "x")``, grouped ``("g", "o", "i", "y", "x")``,
        fully connected ``("o", "i")``.
    """

    name: str
    vendor: str
    doc: str
    axes: tuple
    _nbytes: Callable
    _pack: Callable
    _unpack: Callable

    @property
    def grouped(self) -> bool:
        """True when the logical tensor is ``(G, K/G, C/G, R, S)``."""
        return self.axes[0] == "g"

    def tensor_shape(self, shape, group: int = 1) -> tuple:
        """The shape this format packs for layer weights ``shape = (K, C/group, R, S)``:
        ``(group, K/group, C/group, R, S)`` for a grouped format, ``(K, C*R*S)`` for a fully
        connected one, ``shape`` otherwise. Raises UnsupportedError for ``group > 1`` with a
        format that has no group axis (pack each group's slice instead)."""
        k, c, r, s = (int(v) for v in shape)
        if self.grouped:
            return (group, k // group, c, r, s)
        if group != 1:
            raise UnsupportedError(f"{self.name} has no group axis; a layer with group={group} needs a grouped "
                                   "format or one surface per group")
        return (k, c * r * s) if len(self.axes) == 2 else (k, c, r, s)

    def nbytes(self, shape, dtype) -> int:
        """Bytes of the packed tensor of ``shape`` (the format's logical order,
        :meth:`tensor_shape`) and ``dtype``. Raises as the registry's ``Format.nbytes``."""
        return int(self._nbytes(tuple(int(v) for v in shape), np.dtype(dtype)))

    def pack(self, w, *, precision: str, out=None) -> np.ndarray:
        """Pack ``w`` (the format's logical order; not modified) as ``precision`` elements into
        a 1-D uint8 array of exactly ``nbytes(w.shape, PRECISION_DTYPES[precision])`` bytes;
        every byte without an element is 0. ``w`` must already have the precision's dtype for
        int8 / int16 (the job quantises, :func:`npupack.job.layer_tensor`); float weights are
        converted for fp16 / fp32 (round to nearest even, fp16 saturating at +-65504).
        Raises ValueError for an unknown precision or NaN / inf weights, TypeError for integer
        precisions given another dtype, LayoutError for a wrong rank or a short ``out``."""
        arr = to_precision(w, precision)
        return self._pack(arr, out)

    def unpack(self, buf, shape, dtype) -> np.ndarray:
        """The ``shape`` tensor of ``dtype`` read back from ``buf`` (uint8, at least ``nbytes``
        bytes). Raises LayoutError for a short ``buf``."""
        return self._unpack(buf, tuple(int(v) for v in shape), np.dtype(dtype))


def to_precision(w, precision: str) -> np.ndarray:
    """``w`` as the element type of ``precision`` (:data:`PRECISION_DTYPES`): fp16 / fp32 round
    float weights to nearest even (fp16 saturates at +-65504, as the NVDLA path); int8 / int16
    require integer weights of that type. Raises ValueError for an unknown precision or NaN / inf,
    TypeError for integer precisions given another dtype."""
    if not isinstance(precision, str) or precision not in PRECISION_DTYPES:
        raise ValueError(f"precision: expected one of {tuple(PRECISION_DTYPES)}, got {precision!r}")
    arr = np.asarray(w)
    dt = PRECISION_DTYPES[precision]
    if dt.kind == "i":
        if arr.dtype != dt:
            raise TypeError(f"w: {precision} weights must be {dt} (quantise them first), got {arr.dtype}")
        return arr
    if arr.dtype.kind != "f":
        raise TypeError(f"w: {precision} weights must be float, got {arr.dtype}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"w: NaN or inf at index {tuple(int(i) for i in np.argwhere(bad)[0])}; weights must be "
                         f"finite to be packed as {precision}")
    if precision == "fp16":
        arr = np.clip(arr, -65504.0, 65504.0)
    return arr.astype(dt)


# ---------------------------------------------------------------------- resolving names

def _onednn_axes(tag: str) -> tuple:
    """A oneDNN weight tag's axes (``OIhw16i16o`` -> o,i,y,x; ``gOIhw16i16o`` -> g,o,i,y,x): the
    registry names a tag's dims A, B, C, ... (docs/openvino.md §8.1)."""
    letters = re.match(r"^[a-zA-Z]*", tag).group(0).lower()
    if not set(letters) & set("oi"):
        raise LayoutError(f"format 'onednn:{tag}' is not a weight format: oneDNN weight tags name o and i "
                          "(OIhw16i16o, gOIhw16i16o; docs/openvino.md §8.1)")
    spatial = tuple({"d": "z", "h": "y", "w": "x"}[c] for c in "dhw" if c in letters)
    return (("g",) if "g" in letters else ()) + ("o", "i") + spatial


def _check_axes(name: str, axes: tuple) -> tuple:
    """Refuse formats whose tensor is not 2-D convolution or fully connected weights."""
    if "z" in axes:
        raise UnsupportedError(f"format {name!r} holds 3-D convolution weights ({','.join(axes)}); the job packs "
                               "2-D layers (K, C, R, S): use the format's yx form")
    if axes not in (("o", "i"), ("o", "i", "y", "x"), ("g", "o", "i", "y", "x")):
        raise UnsupportedError(f"format {name!r} has logical axes {','.join(axes)}, not o,i[,y,x] or g,o,i,y,x")
    return axes


def resolve(name: str) -> Optional[WeightFormat]:
    """The weight format ``name`` (docs/design.md §5.6): None for ``nvdla:dc`` (the job's NVDLA
    path), else a :class:`WeightFormat`. Names are namespaced (``openvino:<name>``,
    ``onednn:<tag>``; a bare name that is unambiguous is accepted, as ``npupack.formats.get``).

    Raises TypeError when ``name`` is not a str; LayoutError (a ValueError) for an unknown name
    (listing the closest names), a feature-map format, or another NVDLA name; UnsupportedError
    for a format npupack leaves out (with its reason) and for 3-D weight formats."""
    if not isinstance(name, str):
        raise TypeError(f"weight_format: expected a str, got {type(name).__name__}")
    if is_nvdla(name):
        return None
    if name.startswith("nvdla:"):
        raise LayoutError(f"weight_format: {name!r}: the job packs NVDLA weights as 'nvdla:dc' and chooses image, "
                          "Winograd and deconvolution surfaces itself (--image, --winograd; docs/nvdla.md)")
    from npupack import formats

    fmt = formats.get(name)  # LayoutError with the closest names for a typo
    if fmt.vendor == "nvdla":
        return resolve(fmt.name)
    if fmt.kind != "weights":
        close = difflib.get_close_matches(fmt.name, formats.names(vendor=fmt.vendor, kind="weights"), n=3, cutoff=0.5)
        raise LayoutError(f"format {fmt.name!r} is a {fmt.kind} format, not a weight format" +
                          (f"; weight formats close to it: {', '.join(close)}" if close else "") +
                          " (`npupack formats` lists them)")
    rest = fmt.name.split(":", 1)[1]
    axes = _onednn_axes(rest) if fmt.vendor == "onednn" else tuple(a.strip().lower() for a in fmt.logical.split(","))
    wf = WeightFormat(fmt.name, fmt.vendor, fmt.doc, axes,
                      lambda shape, dt: fmt.nbytes(shape, dt),
                      lambda x, out: fmt.pack(x, out=out),
                      lambda buf, shape, dt: fmt.unpack(buf, shape, dt))
    _check_axes(wf.name, wf.axes)
    return wf


def grouped_form(wf: WeightFormat) -> Optional[WeightFormat]:
    """The grouped format of the same blocking (``openvino:os_is_yx_isv16_osv16`` ->
    ``openvino:g_os_is_yx_isv16_osv16``, ``oiyx`` -> ``goiyx``, ``onednn:OIhw16i16o`` ->
    ``onednn:gOIhw16i16o``), ``wf`` itself when it is grouped, or None when the vendor has none
    (docs/openvino.md §5.7)."""
    if wf.grouped:
        return wf
    rest = wf.name.split(":", 1)[1]
    candidates = {"openvino": ("g_" + rest, "g" + rest), "onednn": ("g" + rest,)}.get(wf.vendor, ())
    for cand in candidates:
        try:
            g = resolve(f"{wf.vendor}:{cand}")
        except (ValueError, TypeError):
            continue
        if g is not None and g.grouped:
            return g
    return None
