"""The registry core: the :class:`Format` record, the name table and the lookup with suggestions
(docs/formats.md §1, 2).

A vendor file (``npupack.formats.nvdla``, ``.openvino``, ``.onednn``, ``.kneron``, ``.horizon``)
builds its entries from the vendor module's own functions and registers them; nothing here knows
a format's rule, so every size, offset and byte comes from the same descriptor the vendor front
uses.
"""
from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import check_dims, check_dtype, check_int

__all__ = ["Format", "get", "names", "register", "VENDORS", "KINDS", "VERBS"]

VENDORS = ("nvdla", "openvino", "onednn", "kneron", "horizon")
KINDS = ("feature", "weights", "pixel", "image", "sdp")
VERBS = ("nbytes", "pack", "unpack", "offset_of", "explain", "layout")


@dataclass(frozen=True, eq=False)
class Format:
    """One registered format (docs/formats.md §1).

    Attributes
    ----------
    name : str
        Namespaced name, ``vendor:format`` (``"openvino:b_fs_yx_fsv16"``, ``"nvdla:pixel:T_R8"``).
    vendor : str
        One of :data:`VENDORS`.
    kind : str
        ``"feature"`` (activations, N,C,H,W or the format's logical order), ``"weights"`` (a
        convolution weight tensor K,C,R,S = OIHW, optionally grouped), ``"pixel"`` (an image
        H,W,comps), ``"image"`` (an encoded frame such as NV12) or ``"sdp"`` (an NVDLA SDP operand).
    params : dict
        Parameter name -> one-line meaning (units included) of every keyword the verbs take
        besides ``out`` and ``pad_value``.
    doc : str
        The docs section the format implements (``"docs/openvino.md §3.2"``).
    verbs : tuple of str
        The verbs that work for this format (a subset of :data:`VERBS`).
    logical : str
        The logical axes, comma-separated (``"N,C,H,W"``, ``"K,C,R,S"``, ``"b,f,y,x"``).
    dtypes : tuple of numpy.dtype
        Element types whose values round-trip exactly through pack and unpack.
    targets : tuple of str
        The ``target`` values the format exists for (empty: the format takes no target).
    examples : tuple of dict
        Small valid calls, one per target: ``{"shape": ..., "params": {...}}``, with ``"dtypes"``
        where a target takes fewer than :attr:`dtypes` (docs and tests); :attr:`example` is the
        first.
    invertible : bool
        False when ``unpack`` cannot give the logical tensor back (NVDLA Winograd weights are
        rounded after a transform); ``unpack`` then raises UnsupportedError.
    byte_order : str
        ``"little"`` (every format but Kneron HW1C16B_BE) or ``"big"``.
    byte_split : int
        0, or for Kneron high/low formats the distance in bytes from an element's low byte (at
        ``offset_of``) to its high byte (docs/kneron.md §7.4).
    drops_lsb : bool
        16-bit scalars keep bits 15..1 only, bit 0 reads back 0 (Kneron high/low formats, and
        8W1C16B / RAW_16B on KL730/KL830 by default; docs/kneron.md §7.4).
    value_max : tuple or None
        Largest value per component (last axis) the format stores, where smaller than the
        dtype's (10-bit pixel formats: colour 1023, alpha 3; docs/nvdla.md §4.3).
    zero_fill : bool
        Every byte without an element is 0 (the hardware needs it); ``pad_value`` must be 0.
    note : str
        Why a verb is missing or what is special, one line.
    """

    name: str
    vendor: str
    kind: str
    params: dict
    doc: str
    logical: str
    dtypes: tuple
    _nbytes: Callable = field(repr=False)
    _pack: Callable = field(repr=False)
    _unpack: Optional[Callable] = field(repr=False)
    _offset: Optional[Callable] = field(repr=False)
    _layout: Optional[Callable] = field(repr=False)
    _explain: Optional[Callable] = field(repr=False)
    targets: tuple = ()
    examples: tuple = ()
    invertible: bool = True
    zero_fill: bool = False
    byte_order: str = "little"
    byte_split: int = 0
    drops_lsb: bool = False
    value_max: Optional[tuple] = None
    note: str = ""

    @property
    def example(self) -> dict:
        """The first of :attr:`examples` (``{"shape": ..., "params": {...}}``)."""
        return self.examples[0]

    # ------------------------------------------------------------------ argument checks
    @property
    def verbs(self) -> tuple:
        have = {"nbytes": True, "pack": True, "unpack": self.invertible and self._unpack is not None,
                "offset_of": self._offset is not None, "explain": True, "layout": self._layout is not None}
        return tuple(v for v in VERBS if have[v])

    def _params(self, params: dict) -> dict:
        if not params:
            return params
        if not params.keys() <= self.params.keys():
            unknown = sorted(set(params) - set(self.params))
            takes = ", ".join(sorted(self.params)) or "none"
            raise TypeError(f"{unknown[0]}: not a parameter of {self.name} (it takes: {takes}; "
                            "docs/formats.md §3)")
        t = params.get("target")
        if t is not None and self.targets and not (type(t) is str and t in self.targets):
            # Anything but a target spelled as listed: checked, and normalised when a name.
            if not isinstance(t, str):
                if self.vendor == "nvdla":  # an nvdla.Config of one's own; the vendor checks it
                    return params
                raise TypeError(f"target: expected a str, got {type(t).__name__}")
            key = t.strip().lower()
            if key not in self.targets:
                close = difflib.get_close_matches(key, self.targets, n=3, cutoff=0.3)
                raise UnsupportedError(f"target: {t!r} is not a target of {self.name}; targets: "
                                       f"{', '.join(self.targets)}" +
                                       (f" (did you mean {', '.join(map(repr, close))}?)" if close else ""))
            params = {**params, "target": key}
        return params

    def _shape(self, shape) -> tuple:
        return check_dims(shape, "shape")

    def _dtype(self, dtype, name: str = "dtype") -> np.dtype:
        dt = check_dtype(dtype, name)
        if dt.kind not in "biuf" or dt.itemsize not in (1, 2, 4, 8):
            raise TypeError(f"{name}: {dt} cannot be packed by {self.name}; it takes "
                            f"{', '.join(map(str, self.dtypes))}")
        return dt

    def _pad_value(self, pad_value) -> None:
        if self.zero_fill and not (isinstance(pad_value, (int, float, np.number)) and pad_value == 0):
            raise UnsupportedError(f"pad_value: {self.name} fills every byte without an element with 0 "
                                   f"({self.doc}); got {pad_value!r}")

    # ------------------------------------------------------------------ the verbs
    def nbytes(self, shape, dtype, **params) -> int:
        """Bytes of the packed buffer of a ``shape`` tensor (logical order :attr:`logical`,
        elements) of ``dtype``. Raises as :meth:`pack`."""
        return int(self._nbytes(self._shape(shape), self._dtype(dtype), **self._params(params)))

    def pack(self, x, *, out=None, pad_value=0, **params) -> np.ndarray:
        """Pack ``x`` (logical order :attr:`logical`; not modified) into a 1-D uint8 array of
        exactly ``nbytes(x.shape, x.dtype, **params)`` bytes (a view of ``out`` when given: a
        writable C-contiguous uint8 array of at least that many bytes). Holes hold ``pad_value``
        (formats whose hardware needs zeros refuse any other value with UnsupportedError).
        Raises TypeError for an unknown parameter or a dtype the format does not take,
        LayoutError for a wrong rank, dims < 1 or an ``out`` too small, UnsupportedError for a
        target or precision the format does not have; otherwise as the vendor function."""
        params = self._params(params)
        if not (type(pad_value) is int and pad_value == 0):
            self._pad_value(pad_value)
        arr = x if isinstance(x, np.ndarray) else np.asarray(x)
        if arr.dtype.kind not in "biuf" or arr.dtype.itemsize not in (1, 2, 4, 8):
            self._dtype(arr.dtype, "x")
        # `out` is checked by the vendor function, which sizes the buffer anyway; sizing it here
        # too would bind the layout twice per call (tests/test_formats_registry.py checks that
        # every format refuses a short or wrong-typed `out`).
        return self._pack(arr, out=out, pad_value=pad_value, **params)

    def unpack(self, buf, shape, dtype, *, out=None, **params) -> np.ndarray:
        """The logical tensor of ``shape`` and ``dtype`` read back from ``buf`` (uint8, at least
        ``nbytes`` bytes; not modified). With ``out`` (an ndarray of ``shape`` and ``dtype``)
        the values are written there and ``out`` is returned. Raises UnsupportedError for a
        format without a logical inverse, LayoutError for a short ``buf`` or an ``out`` of
        another shape, TypeError for an ``out`` of another dtype; otherwise as :meth:`pack`."""
        if not self.invertible or self._unpack is None:
            raise UnsupportedError(f"{self.name}: has no logical inverse ({self.note or self.doc})")
        params = self._params(params)
        shape, dt = self._shape(shape), self._dtype(dtype)
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError(f"out: expected a numpy array, got {type(out).__name__}")
            if out.dtype != dt:
                raise TypeError(f"out: dtype {out.dtype}, expected {dt}")
            if out.shape != shape:
                raise LayoutError(f"out: shape {out.shape}, expected {shape}")
            if not out.flags.writeable:
                raise LayoutError("out: is read-only; pass a writable array")
        got = self._unpack(buf, shape, dt, **params)
        if got.shape != shape:
            got = got.reshape(shape)
        if got.dtype != dt:  # the vendor's element type; another name for the same bytes only, never a cast
            if dt not in self.dtypes or got.dtype.itemsize != dt.itemsize:
                raise TypeError(f"dtype: {self.name} holds {got.dtype} elements here, not {dt}; it reads back "
                                f"{', '.join(map(str, self.dtypes))}")
            got = got.view(dt)
        if out is None:
            return got
        out[...] = got
        return out

    def offset_of(self, shape, index, dtype, **params) -> int:
        """Byte offset, from the start of the packed buffer, of the element at logical ``index``
        (one int per axis of ``shape``). Raises LayoutError for an index of the wrong length or
        out of range, TypeError for a non-integer entry, UnsupportedError where no single
        offset exists (bit fields, transforms); otherwise as :meth:`pack`."""
        if self._offset is None:
            raise UnsupportedError(f"{self.name}: an element has no single byte offset ({self.note or self.doc})")
        params = self._params(params)
        shape, dt = self._shape(shape), self._dtype(dtype)
        index = tuple(check_int(i, "index") for i in index)
        if len(index) != len(shape):
            raise LayoutError(f"index: {index} has {len(index)} entries, shape {shape} has {len(shape)}")
        for i, (v, n) in enumerate(zip(index, shape)):
            if not 0 <= v < n:
                raise LayoutError(f"index: entry {i} is {v}, outside 0..{n - 1} of shape {shape}")
        return int(self._offset(shape, index, dt, **params))

    def layout(self, shape, dtype, **params):
        """The :class:`~npupack.BlockedLayout` descriptor the C++ engine runs for this call
        (docs/design.md §2.1), or None where the format is not one descriptor (pixel planes,
        Winograd transforms)."""
        params = self._params(params)
        shape, dt = self._shape(shape), self._dtype(dtype)
        return None if self._layout is None else self._layout(shape, dt, **params)

    def explain(self, shape, dtype, *, limit=None, **params) -> list:
        """One header line, then where each element goes (at most ``limit`` positions), as
        ``npupack explain`` prints it (docs/openvino.md §10.1)."""
        params = self._params(params)
        shape, dt = self._shape(shape), self._dtype(dtype)
        head = f"{self.name} ({self.vendor} {self.kind}, {self.logical}; {self.doc})"
        if self._explain is not None:
            return [head] + list(self._explain(shape, dt, limit=limit, **params))
        desc = self._layout(shape, dt, **params) if self._layout is not None else None
        if desc is None:
            return [head, f"{self.nbytes(shape, dt, **params)} bytes; no per-element map ({self.note or self.doc})"]
        from npupack.explain import explain_strided_lines

        names = [a.strip() for a in self.logical.split(",")]
        eshape = tuple(d.extent for d in desc.dims)
        if len(names) != len(eshape):
            names = [d.name for d in desc.dims]
        return [head] + list(explain_strided_lines(desc, names, eshape, limit))


# ---------------------------------------------------------------------- the table
_TABLE: dict = {}
_DYNAMIC: dict = {}  # namespace -> callable(rest) -> Format, for open-ended names (onednn:<tag>)
_REFUSED: dict = {}  # namespaced name -> (exception type, message): names that exist but are left out
_LOADED = False


def register(fmt: Format) -> None:
    """Add ``fmt`` to the table. Raises ValueError when its name is taken or not namespaced by
    its vendor."""
    if not fmt.name.startswith(fmt.vendor + ":"):
        raise ValueError(f"name: {fmt.name!r} must start with its vendor {fmt.vendor!r}")
    if fmt.name in _TABLE:
        raise ValueError(f"name: {fmt.name!r} is registered already")
    _TABLE[fmt.name] = fmt


def register_dynamic(namespace: str, make: Callable) -> None:
    """``make(rest)`` builds the Format of ``namespace:rest`` for names outside the table, or
    returns None for a name it does not know (the lookup then lists the closest names)."""
    _DYNAMIC[namespace] = make


def refuse(name: str, error: type, message: str) -> None:
    """``get(name)`` raises ``error(message)``: a name the vendor has and npupack leaves out."""
    _REFUSED[name] = (error, message)


_LOCK = threading.Lock()


def _load() -> None:
    # The vendor files register on import; the first lookup imports them (they import the vendor
    # modules, which import this one). The lock keeps a second thread from seeing a half table.
    global _LOADED
    if _LOADED:
        return
    with _LOCK:
        if not _LOADED:
            from npupack.formats import horizon, kneron, nvdla, onednn, openvino  # noqa: F401  (they register)
            _LOADED = True


def names(vendor: Optional[str] = None, kind: Optional[str] = None) -> list:
    """The registered names (namespaced str, e.g. ``"openvino:b_fs_yx_fsv16"``), sorted by vendor
    then name, optionally only those of ``vendor`` and/or ``kind`` (docs/formats.md §1). Raises
    ValueError for a vendor or kind that does not exist."""
    _load()
    if vendor is not None and vendor not in VENDORS:
        raise ValueError(f"vendor: {vendor!r} is not one of {', '.join(VENDORS)}")
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    order = {v: i for i, v in enumerate(VENDORS)}
    return [n for n, f in sorted(_TABLE.items(), key=lambda t: (order[t[1].vendor], t[0]))
            if (vendor is None or f.vendor == vendor) and (kind is None or f.kind == kind)]


def closest(name: str, n: int = 5) -> list:
    """Up to ``n`` registered names closest to ``name`` (also matching the part after the
    namespace), best first: the suggestions of an unknown-name error (docs/formats.md §1). Never
    raises; a ``name`` that is not a str has none."""
    _load()
    if not isinstance(name, str):
        return []
    full = difflib.get_close_matches(name, list(_TABLE), n=n, cutoff=0.5)
    bare = {}
    for k in _TABLE:
        bare.setdefault(k.split(":", 1)[1].lower(), []).append(k)
    short = name.split(":", 1)[-1].lower()
    for m in difflib.get_close_matches(short, list(bare), n=n, cutoff=0.6):
        full += [k for k in bare[m] if k not in full]
    return full[:n]


def get(name: str) -> Format:
    """The Format registered as ``name`` (docs/formats.md §1).

    ``name`` is namespaced (``"nvdla:feature"``, ``"openvino:b_fs_yx_fsv16"``,
    ``"onednn:nChw16c"``, ``"kneron:4W4C8B"``, ``"horizon:NHWC"``). ``onednn:`` takes any oneDNN tag
    the grammar reads (docs/openvino.md §8.1), listed or not, and ``openvino:`` the older names of
    docs/openvino.md §6 (:func:`npupack.openvino.older_names`), which are not listed. A bare name
    (no namespace) is accepted when exactly one registered name ends with it (``"b_fs_yx_fsv16"``,
    ``"1W16C8B"``); Kneron names also match without regard to case.

    Raises TypeError when ``name`` is not a str; UnsupportedError for a name the vendor has
    that npupack leaves out (with the reason); LayoutError (a ValueError) for any other name,
    listing the closest registered names, or the grammar's complaint for a bad ``onednn:`` tag.
    """
    _load()
    if not isinstance(name, str):
        raise TypeError(f"format: expected a str, got {type(name).__name__}")
    hit = _TABLE.get(name)
    if hit is not None:
        return hit
    if name in _REFUSED:
        error, message = _REFUSED[name]
        raise error(message)
    vendor, sep, rest = name.partition(":")
    if sep and vendor == "kneron":
        for k, f in _TABLE.items():
            if k.lower() == name.lower():
                return f
    if sep and vendor in _DYNAMIC:
        hit = _DYNAMIC[vendor](rest)  # raises for text its reader refuses, None for a name it does not know
        if hit is not None:
            return hit
    if not sep:
        ends = [k for k in _TABLE if k.split(":", 1)[1] == name]
        if not ends:
            ends = [k for k in _TABLE if k.startswith("kneron:") and k.split(":", 1)[1].lower() == name.lower()]
        if len(ends) == 1:
            return _TABLE[ends[0]]
        if len(ends) > 1:
            raise LayoutError(f"format {name!r} is ambiguous: {', '.join(ends)}; give the namespace")
    close = closest(name)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise LayoutError(f"format {name!r}: not a registered format{hint} (all names: npupack.formats.names(), "
                      "`npupack formats`)")
