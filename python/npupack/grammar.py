"""Shape-independent blocked layouts and their text forms.

A :class:`Layout` names the logical dims (NumPy axis order), the outer nesting, the inner tiles
(outer to inner; a dim may be split more than once and the innermost-listed tile takes the lowest
digits), optional explicit digit divisors and per-dim alignment. Bound to a shape (and optional
padding) it becomes the engine's :class:`~npupack.layout.BlockedLayout`.

Text forms:

* ``Layout.parse("NCHW16c")`` — upper/lower-case outer letters give the outer nesting, then
  ``<n><letter>`` inner tiles: ``NCHW16c``, ``OIHW8i16o2i``, ``gOIHW16i16o``.
* ``Layout.from_onednn("nChw16c")`` / ``Layout.from_onednn("ABcd8b8a4b")`` — oneDNN format tags
  (named aliases and ``abc`` string tags; docs/openvino.md §8).

Offsets follow docs/openvino.md §3.2 (padding before blocking, mixed-radix digits).
"""
from __future__ import annotations

import difflib
import operator
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np

from npupack._gate import gate
from npupack.errors import LayoutError
from npupack.layout import BlockedLayout, Dim, cache_safe, check_dims, check_dtype, remember

__all__ = ["Tile", "Layout", "pack", "unpack"]

MAX_TILE = 2**31  # tile sizes at or above this are rejected when parsing

_MAX_DIMS = 12  # oneDNN's DNNL_MAX_NDIMS
_DATA_ORDER = "NCDHW"
_WEIGHT_ORDER = "GOIDHW"
# Named oneDNN tags offered as suggestions for a refused text (the table's abc tags are added).
_ONEDNN_ALIASES = ("nchw", "nhwc", "nChw8c", "nChw16c", "nCdhw8c", "nCdhw16c", "oihw", "hwio", "OIhw8i8o",
                   "OIhw16i16o", "OIhw8i16o2i", "OIhw4i16o4i", "gOIhw16i16o", "Goihw16g")


@dataclass(frozen=True)
class Tile:
    """One inner tile: ``size`` elements of dim ``dim``; ``divisor`` is an explicit digit divisor
    (None: the product of the later tiles of the same dim)."""

    dim: str
    size: int
    divisor: Optional[int] = None


def _syntax_error(text: str, pos: int, rule: str) -> LayoutError:
    return LayoutError(f"layout {text!r}: {rule} (at character {pos + 1}){_name_hint(text)}\n  {text}\n  "
                       f"{' ' * pos}^")


def _name_hint(text: str) -> str:
    """Where a text the grammar refuses was probably meant to go: an OpenVINO (clDNN) format name
    (docs/openvino.md §5) belongs to npupack.openvino; a near miss of a name or of a oneDNN tag
    of that table gets the closest ones. Empty when nothing is close."""
    from npupack import openvino  # late: openvino builds its layouts with this module

    names = {f.name for f in openvino.formats()}
    if text in names:
        return (f"; {text!r} is an OpenVINO format name, not a layout text: use "
                f"npupack.openvino.pack(x, {text!r}) (docs/openvino.md §5)")
    tags = sorted({f.onednn for f in openvino.formats() if f.onednn} | set(_ONEDNN_ALIASES))
    names = openvino._closest_names(text, 3)
    tags = difflib.get_close_matches(text, tags, n=3)
    close = ([f"the OpenVINO names {', '.join(map(repr, names))} (npupack.openvino)"] if names else []) + \
        ([f"the oneDNN tags {', '.join(map(repr, tags))}"] if tags else [])
    return f"; did you mean {' or '.join(close)}?" if close else ""


@dataclass(frozen=True)
class Layout:
    """A blocked layout independent of the tensor's sizes.

    Attributes
    ----------
    logical : tuple of str
        Dim names in the order of the NumPy axes.
    outer : tuple of str
        The outer nesting, slowest first (a permutation of ``logical``).
    tiles : tuple of Tile
        Inner tiles, outer to inner.
    align : tuple of (dim, n)
        Dims whose padded extent is rounded up to a multiple of n before blocking.
    text : str or None
        The text or format name the layout was made from (``str()`` returns it).
    """

    logical: tuple
    outer: tuple
    tiles: tuple = ()
    align: tuple = ()
    text: Optional[str] = None

    def __post_init__(self):
        if not self.logical:
            raise LayoutError("layout: needs at least one dimension")
        if len(set(self.logical)) != len(self.logical):
            raise LayoutError(f"layout: dims {self.logical} repeat a name")
        if sorted(self.outer) != sorted(self.logical):
            raise LayoutError(f"layout: the outer nesting {self.outer} must list every dim of {self.logical} once")
        for t in self.tiles:
            if t.dim not in self.logical:
                raise LayoutError(f"layout: tile {t.size}{t.dim} names a dim that is not in {self.logical}")
            if t.size < 1:
                raise LayoutError(f"layout: tile sizes must be >= 1, got {t.size} for {t.dim}")
        for d, n in self.align:
            if d not in self.logical or n < 1:
                raise LayoutError(f"layout: bad alignment {n} for dim {d!r}")

    # ------------------------------------------------------------------ text forms
    @classmethod
    def parse(cls, text: str, *, logical: Optional[Sequence[str]] = None) -> "Layout":
        """Parse the layout grammar of docs/openvino.md §13: outer letters (each dim once, any case), then inner tiles
        ``<n><letter>`` (``NCHW16c``, ``OIHW8i16o2i``, ``gOIHW16i16o``).

        The NumPy axis order is ``logical`` if given, else the field's default for the letters:
        ``N C D H W`` for data letters, ``G O I D H W`` for weight letters, alphabetical for
        ``abc`` letters, and otherwise the outer order as written. Dims are named by their
        upper-case letter.

        Raises
        ------
        LayoutError
            The message quotes the text and points at the offending character: a character that
            is not a letter or digit, a repeated outer letter, a tile without a letter or with
            size 0, a tile on a dim that is not an outer letter.
            Also a ``logical`` order that does not list each outer letter once.
        TypeError
            ``text`` is not a str; ``logical`` is not a str or a list / tuple of letters.
        """
        if not isinstance(text, str):
            raise TypeError(f"text: expected a str, got {type(text).__name__}")
        if not text:
            raise LayoutError("layout '': empty text")
        outer, tiles, pos = [], [], 0
        while pos < len(text) and text[pos].isalpha():
            letter = text[pos].upper()
            if letter in outer:
                raise _syntax_error(text, pos, f"dimension {letter} appears twice in the outer letters")
            outer.append(letter)
            pos += 1
        if not outer:
            raise _syntax_error(text, 0, "a layout starts with its outer dimension letters")
        for m in re.finditer(r"(\d+)([A-Za-z]?)|(.)", text[pos:]):
            at = pos + m.start()
            if m.group(3) is not None:
                rule = "outer letters must come before the tiles" if m.group(3).isalpha() else \
                    f"unexpected character {m.group(3)!r}"
                raise _syntax_error(text, at, rule)
            size, letter = int(m.group(1)), m.group(2).upper()
            if not letter:
                raise _syntax_error(text, pos + m.end(), "a tile needs a dimension letter after its size")
            if size < 1:
                raise _syntax_error(text, at, "a tile size must be >= 1")
            if size >= MAX_TILE:
                raise _syntax_error(text, at, f"a tile size must be < 2^31, got {size}")
            if letter not in outer:
                raise _syntax_error(text, at + len(m.group(1)), f"tile on {letter}, which is not an outer dimension")
            tiles.append(Tile(letter, size))
        if logical is None:
            order = _default_logical(outer)
        elif isinstance(logical, (str, list, tuple)) and all(isinstance(c, str) for c in logical):
            order = tuple(c.upper() for c in logical)
        else:
            raise TypeError(f"logical: expected the dimension letters in NumPy axis order (\"NHWC\" or a list of "
                            f"letters), got {logical!r}")
        return cls(order, tuple(outer), tuple(tiles), (), text)

    @classmethod
    def from_onednn(cls, tag: str) -> "Layout":
        """A oneDNN format tag: a named alias (``nChw16c``, ``OIhw8i16o2i``, ``gOIhw16i16o``,
        ``hwio``) or an ``abc`` string tag (``aBcd16b``, ``ABcd8b8a4b``); docs/openvino.md §8.1.

        Dims are named ``A``, ``B``, ... in logical order (``a`` = logical dim 0). Raises
        LayoutError for a letter used twice or missing, an upper-case letter without an inner
        block, an inner block on a lower-case dim, a block size < 2, or more than 12 dims.
        """
        if not isinstance(tag, str):
            raise TypeError(f"tag: expected a str, got {type(tag).__name__}")
        m = re.fullmatch(r"([A-Za-z]+)((?:\d+[A-Za-z])*)", tag)
        if not m:
            raise LayoutError(f"tag {tag!r}: not a oneDNN format tag (outer letters, then <n><letter> blocks)")
        outer_txt, blocks_txt = m.group(1), m.group(2)
        blocks = re.findall(r"(\d+)([A-Za-z])", blocks_txt)
        abc = _to_abc(tag, outer_txt, blocks)
        outer_abc, blocks_abc = abc
        n = len(outer_abc)
        if n > _MAX_DIMS:
            raise LayoutError(f"tag {tag!r}: {n} dims, oneDNN allows at most {_MAX_DIMS}")
        folded = outer_abc.lower()
        if sorted(folded) != [chr(ord("a") + i) for i in range(n)]:
            raise LayoutError(f"tag {tag!r}: a letter is used twice or missing; the outer letters must name each of "
                          f"the first {n} dims once")
        blocked = {b.lower() for _, b in blocks_abc}
        for c in outer_abc:
            if c.isupper() and c.lower() not in blocked:
                raise LayoutError(f"tag {tag!r}: {c} is upper-case (blocked) but has no inner block")
            if c.islower() and c in blocked:
                raise LayoutError(f"tag {tag!r}: dim {c} has an inner block but is lower-case in the outer letters")
        tiles = []
        for size, b in blocks_abc:
            if b.lower() not in folded:
                raise LayoutError(f"tag {tag!r}: block on dim {b}, which is not an outer letter")
            if int(size) < 2:
                raise LayoutError(f"tag {tag!r}: block size {size} < 2")
            if int(size) >= MAX_TILE:
                raise LayoutError(f"tag {tag!r}: block size {size} is not below 2^31")
            tiles.append(Tile(b.upper(), int(size)))
        logical = tuple(chr(ord("A") + i) for i in range(n))
        return cls(logical, tuple(c.upper() for c in outer_abc), tuple(tiles), (), tag)

    def to_onednn(self) -> Optional[str]:
        """The ``abc`` string tag of this layout (docs/openvino.md §8.2), or None when a tag cannot
        express it (explicit divisors, alignment, more than 12 dims). Never raises."""
        if any(t.divisor is not None for t in self.tiles) or self.align or len(self.logical) > _MAX_DIMS:
            return None
        letter = {d: chr(ord("a") + i) for i, d in enumerate(self.logical)}
        blocked = {t.dim for t in self.tiles}
        return "".join(letter[d].upper() if d in blocked else letter[d] for d in self.outer) + \
            "".join(f"{t.size}{letter[t.dim]}" for t in self.tiles)

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        if any(t.divisor is not None for t in self.tiles) or self.align or \
                any(len(d) != 1 for d in self.logical):
            return self.describe()
        return "".join(self.outer) + "".join(f"{t.size}{t.dim.lower()}" for t in self.tiles)

    def describe(self) -> str:
        """The nesting, outer to inner, in spec notation: ``[b][f/16][y][x][f%16]``,
        ``[o/16][i/16][y][x][(i/2)%8][o%16][i%2]``, ``[o/32][align32(I)][y][x][o%32]``."""
        total = self._tile_products()
        align = dict(self.align)
        parts = []
        for d in self.outer:
            if total[d] > 1:
                parts.append(f"[{d}/{total[d]}]")
            elif d in align and align[d] > 1:
                parts.append(f"[align{align[d]}({d.upper()})]")
            else:
                parts.append(f"[{d}]")
        for t, div in zip(self.tiles, self._divisors()):
            parts.append(f"[{t.dim}%{t.size}]" if div == 1 else f"[({t.dim}/{div})%{t.size}]")
        return "".join(parts)

    # ------------------------------------------------------------------ binding to a shape
    @property
    def rank(self) -> int:
        return len(self.logical)

    def _tile_products(self) -> dict:
        total = {d: 1 for d in self.logical}
        for t in self.tiles:
            total[t.dim] *= t.size
        return total

    def _divisors(self) -> list:
        """The digit divisor of each tile (explicit, or the product of the later same-dim tiles)."""
        # One pass from the innermost tile with a running product per dim (a product per tile
        # is quadratic in the tile count); it is capped at 2^62, past which it is refused anyway.
        out = [0] * len(self.tiles)
        later = {d: 1 for d in self.logical}
        for j in range(len(self.tiles) - 1, -1, -1):
            t = self.tiles[j]
            if t.divisor is not None:
                out[j] = t.divisor
            else:
                if later[t.dim] >= 2**62:
                    raise LayoutError(f"layout {self}: the tiles of {t.dim} multiply to more than 2^62")
                out[j] = later[t.dim]
            later[t.dim] = min(later[t.dim] * t.size, 2**62)
        return out

    def _padding(self, shape, pad_lo, pad_hi):
        shape = check_dims(shape, "shape")
        if len(shape) != self.rank:
            raise LayoutError(f"shape: {shape} has {len(shape)} dimensions, layout {self} has {self.rank} "
                              f"({', '.join(self.logical)})")
        pads = []
        for name, p in (("pad_lo", pad_lo), ("pad_hi", pad_hi)):
            p = (0,) * self.rank if p is None else check_dims(p, name, minimum=0)
            if len(p) != self.rank:
                raise LayoutError(f"{name}: needs {self.rank} entries (one per dim of {self.logical}), got {p}")
            pads.append(p)
        return shape, pads[0], pads[1]

    def bind(self, shape, dtype, *, pad_lo=None, pad_hi=None) -> BlockedLayout:
        """The engine descriptor for a tensor of ``shape`` (logical order, elements) and
        ``dtype``, with optional lower/upper padding per dim (elements, applied before blocking).
        Raises LayoutError for a rank mismatch, dims < 1, negative padding or overflow;
        TypeError for a shape or padding that is not a sequence of integers (a generator is
        refused: it can be read only once) and for an unknown ``dtype`` or one that is not a
        number (object, string, structured, datetime: the engine moves raw bytes).
        Descriptors are cached per (layout, shape, dtype, padding): packing the same shape again
        costs a dictionary lookup."""
        shape = cache_safe(shape, "shape")
        pad_lo, pad_hi = cache_safe(pad_lo, "pad_lo", 0), cache_safe(pad_hi, "pad_hi", 0)
        try:
            # operator.index: a float dimension must not hit the entry of its integer twin (it is an error).
            key = (self, tuple(map(operator.index, shape)), np.dtype(dtype),
                   None if pad_lo is None else tuple(map(operator.index, pad_lo)),
                   None if pad_hi is None else tuple(map(operator.index, pad_hi)))
            hit = _BIND_CACHE.get(key)
        except TypeError:  # unhashable arguments: validated (and reported) below
            key = hit = None
        if hit is not None:
            return hit
        return remember(_BIND_CACHE, key, self._bind(shape, dtype, pad_lo, pad_hi), 4096)

    def __hash__(self) -> int:
        # Layouts key the descriptor cache; hash the (nested, immutable) fields once.
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.logical, self.outer, self.tiles, self.align, self.text))
            object.__setattr__(self, "_hash", h)
        return h

    def _bind(self, shape, dtype, pad_lo, pad_hi) -> BlockedLayout:
        shape, lo, hi = self._padding(shape, pad_lo, pad_hi)
        divs = self._divisors()
        align = dict(self.align)
        dims = []
        for i, d in enumerate(self.logical):
            mine = [(t, dv) for t, dv in zip(self.tiles, divs) if t.dim == d]
            explicit = any(t.divisor is not None for t, _ in mine)
            dims.append(Dim(d, shape[i], tuple(t.size for t, _ in mine), pad_lo=lo[i], pad_hi=hi[i],
                            align=align.get(d, 1), divisors=tuple(dv for _, dv in mine) if explicit else None))
        order = [(d, 0) for d in self.outer]
        level = {d: 0 for d in self.logical}
        for t in self.tiles:
            level[t.dim] += 1
            order.append((t.dim, level[t.dim]))
        return BlockedLayout(tuple(dims), tuple(order), check_dtype(dtype, "dtype"))

    def packed_shape(self, shape, *, pad_lo=None, pad_hi=None) -> tuple:
        """The extents of the nesting (outer counts, then tile sizes), elements: the shape of the
        packed buffer viewed as a dense array (docs/openvino.md §3.2). ``shape`` is in logical
        order. Raises LayoutError for a rank mismatch, dims < 1 or negative padding."""
        shape, lo, hi = self._padding(shape, pad_lo, pad_hi)
        total = self._tile_products()
        align = dict(self.align)
        q = {}
        for i, d in enumerate(self.logical):
            a = align.get(d, 1)
            e = -(-(lo[i] + shape[i] + hi[i]) // a) * a
            q[d] = -(-e // total[d])
        return tuple(q[d] for d in self.outer) + tuple(t.size for t in self.tiles)

    def nbytes(self, shape, dtype, *, pad_lo=None, pad_hi=None) -> int:
        """Size of the packed buffer in bytes: product of ``packed_shape`` times the itemsize of
        ``dtype``. Raises as :meth:`bind` (LayoutError, including 64-bit overflow)."""
        return self.bind(shape, dtype, pad_lo=pad_lo, pad_hi=pad_hi).nbytes

    def offset_of(self, shape, index, *, pad_lo=None, pad_hi=None) -> int:
        """Offset in **elements** of logical ``index`` (one int per logical dim) in the packed
        buffer of a ``shape`` tensor; kept in elements for compatibility, while the registry's
        ``Format.offset_of`` gives bytes (docs/formats.md §3.2). Raises LayoutError for an index out of range or a bad shape,
        TypeError for an index entry that is not an integer."""
        return self.bind(shape, np.uint8, pad_lo=pad_lo, pad_hi=pad_hi).offset_of(index)


def _default_logical(outer: list) -> tuple:
    letters = set(outer)
    if letters <= set(_DATA_ORDER):
        return tuple(c for c in _DATA_ORDER if c in letters)
    if letters <= set(_WEIGHT_ORDER):
        return tuple(c for c in _WEIGHT_ORDER if c in letters)
    if sorted(letters) == [chr(ord("A") + i) for i in range(len(letters))]:
        return tuple(sorted(letters))
    return tuple(outer)


def _to_abc(tag: str, outer: str, blocks: list):
    """Translate a named oneDNN alias (n c d h w / g o i d h w letters) to abc letters, keeping
    each letter's case (docs/openvino.md §8.1). abc tags pass through."""
    n = len(outer)
    if all(c < chr(ord("a") + n) for c in outer.lower()):  # abc letters (repeats are reported later)
        return outer, blocks
    low = outer.lower()
    if "g" in low or "o" in low or "i" in low:
        first = [c for c in "goi" if c in low]
    else:
        first = [c for c in "nc" if c in low]
    names = first + [c for c in "dhw" if c in low]
    if sorted(names) != sorted(low):
        raise LayoutError(f"tag {tag!r}: letters {outer!r} are neither abc letters nor a named alias "
                          "(n c d h w for data, g o i d h w for weights)")
    mapping = {c: chr(ord("a") + i) for i, c in enumerate(names)}

    def tr(c):
        if c.lower() not in mapping:
            raise LayoutError(f"tag {tag!r}: block letter {c!r} is not one of the tag's dims")
        m = mapping[c.lower()]
        return m.upper() if c.isupper() else m

    return "".join(tr(c) for c in outer), [(s, tr(b)) for s, b in blocks]


# (layout, shape, dtype, pad_lo, pad_hi) -> BlockedLayout. Descriptors are immutable; compilers
# and benchmark loops pack the same shapes again and again.
_BIND_CACHE: dict = {}


_PACKABLE_KINDS = "biufc"


@lru_cache(maxsize=256)
def _parsed(text: str) -> Layout:
    # Layouts are immutable: pack(x, "NCHW16c") in a loop parses the text once (parsing cost
    # three times the rest of a small call). Errors are not cached and are raised every time.
    return Layout.parse(text)


def _as_layout(layout) -> Layout:
    if isinstance(layout, Layout):
        return layout
    if isinstance(layout, str):
        try:
            return _parsed(layout)
        except LayoutError as e:
            hint = _registry_hint(layout)
            if not hint:
                raise
            first, nl, rest = str(e).partition("\n")
            raise LayoutError(f"{first}; {hint}{nl}{rest}") from None
    raise TypeError(f"layout: expected a npupack.Layout or its text, got {type(layout).__name__}")


def _registry_hint(text: str) -> str:
    """For text the grammar refuses: the registered format it names (``"b_fs_yx_fsv16"`` is
    ``openvino:b_fs_yx_fsv16``), else the closest registered names (docs/formats.md §1)."""
    from npupack import formats

    try:
        f = formats.get(text)
    except (ValueError, TypeError):
        close = formats.closest(text, 3)
        return f"closest registered formats: {', '.join(close)}" if close else ""
    return f"{text!r} is the registered format {f.name}: use npupack.formats.get({f.name!r}).pack(x)"


def _check_dtype(dtype, what: str) -> np.dtype:
    dtype = check_dtype(dtype, what)
    if dtype.kind not in _PACKABLE_KINDS or dtype.itemsize not in (1, 2, 4, 8):
        raise TypeError(f"{what}: dtype {dtype} cannot be packed; use a numeric dtype of 1, 2, 4 or 8 bytes")
    return dtype


@gate("x")
def pack(x, layout, *, out=None, pad_value=0, pad_lo=None, pad_hi=None) -> np.ndarray:
    """Pack ``x`` into a blocked layout (generic engine; docs/openvino.md §3.2 and 4).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    x : array_like
        Logical tensor in the layout's logical order (``layout.logical``), any numeric dtype of
        1, 2, 4 or 8 bytes (int8, uint8, int16, uint16, float16, float32, ...), any strides.
        Elements are moved, never converted (a big-endian array is read by value and stored
        little-endian, like every packed element). Not modified.
    layout : Layout or str
        A :class:`Layout` or its text (``"NCHW16c"``).
    out : numpy.ndarray of uint8, optional
        Writable C-contiguous buffer of at least ``nbytes`` bytes; its first ``nbytes`` bytes
        are written (every one of them).
    pad_value : scalar
        Value of every position that holds no element (tails, padding, alignment), in x's dtype.
    pad_lo, pad_hi : sequence of int, optional
        Lower/upper padding per dim (elements), applied before blocking.

    Returns
    -------
    numpy.ndarray
        1-D uint8 of ``layout.nbytes(x.shape, x.dtype)`` bytes (a view of ``out`` when given).

    Raises
    ------
    TypeError
        A non-numeric dtype; ``out`` not uint8; ``layout`` of the wrong type; a ``pad_value``
        that is not a number.
    ValueError
        A ``pad_value`` that x's dtype cannot hold as given (a fraction or out of range for an
        integer dtype, an overflow for a float one): it is stored, never rounded or wrapped.
    LayoutError
        Bad layout text; ``x.ndim`` != the layout's rank; negative padding; ``out`` too small,
        read-only or sharing memory with ``x``; size overflow.
    """
    arr = np.asarray(x)
    # The same layout (object or text), shape and dtype packed before, unpadded: its descriptor.
    key = (layout, arr.shape, arr.dtype) if pad_lo is None and pad_hi is None else None
    try:
        bound = _PACK_PLANS.get(key)
    except TypeError:  # an unhashable layout: _as_layout names it
        bound = key = None
    if bound is None:
        lay = _as_layout(layout)
        dtype = _check_dtype(arr.dtype, "x")
        if arr.ndim != lay.rank:
            raise LayoutError(f"x: has {arr.ndim} dimensions, layout {lay} has {lay.rank} "
                              f"({', '.join(lay.logical)})")
        bound = remember(_PACK_PLANS, key, lay.bind(arr.shape, dtype, pad_lo=pad_lo, pad_hi=pad_hi), 4096)
    return bound._pack(arr, out, pad_value)


_PACK_PLANS: dict = {}


@gate("buf")
def unpack(buf, layout, shape, dtype, *, pad_lo=None, pad_hi=None) -> np.ndarray:
    """Read the logical tensor back from a buffer packed in a blocked layout: the inverse of
    :func:`pack` (generic engine; docs/openvino.md §3.2 and 4).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    buf : numpy.ndarray of uint8
        Packed bytes, at least ``layout.nbytes(shape, dtype)`` of them (any further bytes are
        not read). Positions that hold no element (tails, padding, alignment) are ignored.
        Not modified.
    layout : Layout or str
        A :class:`Layout` or its text (``"NCHW16c"``).
    shape : sequence of int
        The logical shape in the layout's logical order (``layout.logical``; e.g. N,C,H,W for
        ``NCHW16c``, O,I,H,W for ``OIHW8i16o2i``), in elements, before padding.
    dtype : numpy dtype
        Element type of 1, 2, 4 or 8 bytes, as given to :func:`pack`.
    pad_lo, pad_hi : sequence of int, optional
        The padding given to :func:`pack` (elements per dim); the padded positions are skipped.

    Returns
    -------
    numpy.ndarray
        A new C-contiguous array of ``shape`` and ``dtype`` (``prod(shape) * itemsize`` bytes).

    Raises
    ------
    TypeError
        As :func:`pack`; ``buf`` not a uint8 array.
    ValueError, LayoutError
        As :func:`pack` for the layout, shape and padding; LayoutError when ``buf`` is shorter
        than ``layout.nbytes(shape, dtype)`` bytes.
    """
    lay = _as_layout(layout)
    dtype = _check_dtype(dtype, "dtype")
    bound = lay.bind(shape, dtype, pad_lo=pad_lo, pad_hi=pad_hi)
    return bound.unpack(buf)
