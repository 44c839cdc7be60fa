"""The generic blocked-layout engine, as seen from Python.

A :class:`BlockedLayout` describes where every element of a logical tensor lives in a packed
byte buffer: logical dims, each split into an outer count and inner tiles, a loop nest over those
parts (slowest first), optional byte strides per loop, and ragged (unpadded) last blocks. Every
dense format of npupack (NVDLA feature cubes and direct-convolution weight groups today) is one of
these descriptors handed to the same C++ engine. See docs/design.md §2.
"""
from __future__ import annotations

import collections.abc
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from typing import Mapping, Optional, Sequence

import numpy as np

from npupack._gate import gate, numeric_dtype
from npupack import _core
from npupack._core import LayoutError

__all__ = ["Dim", "BlockedLayout", "strided_layout"]


@dataclass(frozen=True)
class Dim:
    """One logical dimension: ``extent`` elements, split into an outer count and ``tiles``
    (inner tile sizes, outer to inner; a later tile takes lower digits).

    ``ragged=True`` (one tile only) stores the last block with just ``extent % tile`` elements
    instead of padding it (NVDLA DC weights). ``pad_lo`` / ``pad_hi`` add padding before blocking
    and ``align`` rounds the padded extent up to a multiple (clDNN ``__aiN``): logical index ``i``
    sits at padded coordinate ``i + pad_lo`` and the outer count is
    ``ceil(align_up(pad_lo + extent + pad_hi, align) / product(tiles))``. ``divisors`` gives an
    explicit digit divisor per tile (clDNN swizzles; default: the product of the later tiles).
    All in elements."""

    name: str
    extent: int
    tiles: tuple[int, ...] = field(default_factory=tuple)
    ragged: bool = False
    pad_lo: int = 0
    pad_hi: int = 0
    align: int = 1
    divisors: Optional[tuple[int, ...]] = None

    @property
    def storage(self) -> int:
        """Padded and aligned extent before tile rounding (elements)."""
        p = self.pad_lo + self.extent + self.pad_hi
        return -(-p // self.align) * self.align


class BlockedLayout:
    """A dense packed layout on the C++ engine.

    Parameters
    ----------
    dims : sequence of Dim
        Logical dimensions in the order of the logical tensor's axes.
    order : sequence of (dim name, level)
        The loop nest, slowest first. Level 0 is a dim's outer count, level j its j-th tile.
        Each part appears once; a dim's parts appear outer to inner. A later tile takes the
        lower digits of the logical index.
    dtype : numpy dtype
        Element type; its itemsize (1, 2, 4 or 8 bytes) is the element size. Packed elements are
        little-endian (docs/design.md §6.1): a big-endian dtype stands for its little-endian twin, which
        ``self.dtype`` holds and ``unpack`` returns.
    byte_strides : mapping (dim name, level) -> int, optional
        Explicit byte strides for some loops; the others are packed against the loops inside
        them. Not allowed together with ragged dims.

    Raises
    ------
    TypeError
        A ``dtype`` that is not a plain number (object, string, bytes, void / structured,
        datetime / timedelta): the engine moves raw bytes, and object elements are pointers.
    LayoutError
        Extents or tiles < 1, a part missing or out of order, a stride that is not a multiple of
        the element size or smaller than the bytes of the loops inside it, or size arithmetic
        that overflows 64 bits.
    """

    def __init__(self, dims: Sequence[Dim], order: Sequence[tuple[str, int]], dtype,
                 byte_strides: Mapping[tuple[str, int], int] | None = None):
        self.dims = tuple(dims)
        # The engine moves bytes: object pointers, strings, records and datetimes are refused here,
        # where every packer's descriptor is made (npupack._gate).
        self.dtype = numeric_dtype(check_dtype(dtype, "dtype"), "dtype").newbyteorder("<")
        names = [d.name for d in self.dims]
        if len(set(names)) != len(names):
            raise LayoutError(f"dims: names must be unique, got {names}")
        strides = dict(byte_strides or {})
        core_order = []
        for name, level in order:
            if name not in names:
                raise LayoutError(f"order: unknown dim {name!r}; dims are {names}")
            core_order.append((names.index(name), int(level), int(strides.pop((name, level), 0))))
        if strides:
            raise LayoutError(f"byte_strides: {sorted(strides)} are not loops of the order")
        self.order = tuple((n, int(lv)) for n, lv in order)
        self.byte_strides = dict(byte_strides or {})
        for d in self.dims:
            if min(d.pad_lo, d.pad_hi) < 0 or d.align < 1:
                raise LayoutError(f"dim {d.name!r}: padding must be >= 0 and align >= 1, got pad_lo={d.pad_lo}, "
                                  f"pad_hi={d.pad_hi}, align={d.align}")
        if any(v >= 2**63 for d in self.dims for v in (d.extent, d.storage, *d.tiles)) or \
                any(s >= 2**63 for _, _, s in core_order):
            raise LayoutError("dims/byte_strides: a value does not fit in 64 bits (size arithmetic overflows)")
        self._core = _core.BlockedLayout(
            [(d.name, int(d.extent), [int(t) for t in d.tiles], bool(d.ragged), int(d.pad_lo), int(d.storage),
              [int(v) for v in d.divisors] if d.divisors is not None else []) for d in self.dims],
            core_order, self.dtype.itemsize)
        self._nbytes = self._core.nbytes  # read on every call of the packers

    @property
    def shape(self) -> tuple[int, ...]:
        """Logical shape (elements)."""
        return tuple(d.extent for d in self.dims)

    @property
    def nbytes(self) -> int:
        """Bytes of the packed buffer: from offset 0 to the end of the last element slot."""
        return self._nbytes

    @property
    def has_holes(self) -> bool:
        """True when some packed bytes hold no element (padded tiles or stride gaps)."""
        return self._core.has_holes

    def offset_of(self, index: Sequence[int]) -> int:
        """Byte offset of the element at logical ``index``. This is the specification the
        packers are tested against. Raises LayoutError for an index out of range, TypeError for
        an entry that is not an integer (1.5 is not truncated)."""
        return self._core.offset_of([check_int(i, "index") for i in index])

    @gate("x")
    def pack(self, x: np.ndarray, *, out: np.ndarray | None = None, pad_value=0,
             reference: bool = False) -> np.ndarray:
        """Pack logical ``x`` (shape ``self.shape``, itemsize of ``self.dtype``; any strides)
        into a 1-D uint8 buffer of ``nbytes`` bytes (or the first ``nbytes`` bytes of ``out``),
        holes filled with ``pad_value``. ``reference=True`` uses the slow offset_of-per-element
        path. Raises LayoutError for a shape/itemsize mismatch or an ``out`` too small,
        read-only or sharing memory with ``x``; TypeError for an ``out`` that is not uint8;
        TypeError / ValueError for a ``pad_value`` that ``self.dtype`` cannot hold as given
        (see :func:`pad_bytes`); TypeError for a ``reference`` that is not a bool.

        An input changed by another thread during the call gives undefined values in the result, never a crash.
        """
        return self._pack(x, out, pad_value, reference)

    def _pack(self, x, out, pad_value, reference=False) -> np.ndarray:
        """:meth:`pack` behind the argument gate: for the vendor packers, which pass the caller's
        arrays through it first."""
        if reference is not False:
            reference = check_bool(reference, "reference")
        n = self._nbytes
        buf = empty_lines(n) if out is None else check_out(out, n)
        if type(x) is not np.ndarray or x.dtype.byteorder in _BIG_ENDIAN:
            x = little_endian(np.asarray(x))
        # An empty pad means zero bytes in the core (the common case; skips a NumPy round trip).
        pad = b"" if type(pad_value) is int and pad_value == 0 else pad_bytes(pad_value, self.dtype)
        self._core.pack(x, buf, pad, reference)
        return buf if buf.size == n else buf[:n]

    def _pack_into(self, x: np.ndarray, buf: np.ndarray) -> None:
        """Pack with zero padding into ``buf`` already validated by the caller (hot path)."""
        self._core.pack(x, buf, b"", False)

    def _pack_finite_fp16_into(self, bits: np.ndarray, buf: np.ndarray) -> bool:
        """Pack binary16 bit patterns ``bits`` (uint16 or float16, C-contiguous, shape
        ``self.shape``) with zero padding into ``buf`` already validated by the caller, unless one
        of them is INF or NaN: then return False, ``buf`` partly written. The check runs slab by
        slab just before each slab is packed, where the layout allows (DC weights: per kernel
        group, prefetched while the previous one is packed), so it reads from the caches instead
        of making a separate pass over memory."""
        return self._core.pack_finite_fp16(bits, buf)

    @gate("buf")
    def unpack(self, buf: np.ndarray, *, out: np.ndarray | None = None, reference: bool = False) -> np.ndarray:
        """Read the logical tensor (shape ``self.shape``, dtype ``self.dtype``) back from the
        packed ``buf`` (uint8, at least ``nbytes`` bytes). Bytes holding no element are ignored.
        Raises TypeError for a non-uint8 ``buf`` or a ``reference`` that is not a bool,
        LayoutError for a short ``buf`` or an ``out`` of the wrong shape/itemsize.

        An input changed by another thread during the call gives undefined values in the result, never a crash.
        """
        if reference is not False:
            reference = check_bool(reference, "reference")
        buf = as_byte_buffer(buf, "buf")
        if buf.size < self.nbytes:  # before the result is allocated: a short buffer is no MemoryError
            raise LayoutError(f"buf: holds {buf.size} bytes, the layout needs {self.nbytes}")
        if out is None:
            out = np.empty(self.shape, dtype=self.dtype)
        self._core.unpack(buf, out, reference)
        return out


def little_endian(x: np.ndarray) -> np.ndarray:
    """``x`` itself when its elements are stored little-endian (or are single bytes); else a
    little-endian copy with the same values. The engine moves bytes, and every packed layout
    stores multi-byte elements little-endian (docs/design.md §6.1), so a big-endian array is converted
    here rather than packed as garbage."""
    order = x.dtype.byteorder
    if order == ">" or (order == "=" and not _HOST_LITTLE):
        return x.astype(x.dtype.newbyteorder("<"))
    return x


_HOST_LITTLE = np.dtype("=u2") == np.dtype("<u2")
_BIG_ENDIAN = (">",) if _HOST_LITTLE else (">", "=")


def check_dims(shape, name: str, note: str = "", minimum: int = 1) -> tuple[int, ...]:
    """``shape`` (a sequence: tuple, list, range or 1-D array) as a tuple of ints >= ``minimum``
    (1 for dimensions, 0 for padding). Raises TypeError naming ``name`` for anything but a
    sequence of integers: a float 3.0 is not a dimension (it would be truncated silently
    elsewhere), and a generator or other one-shot iterator is refused, as NumPy refuses it for a
    shape, because the caches and checks would each read it and see different values.
    LayoutError for a value below ``minimum``; ``note`` ends that message (a spec reference).
    The rank is the caller's to check."""
    if type(shape) is tuple and all(type(v) is int and v >= minimum for v in shape):
        return shape  # the common case, checked without the general path's per-value calls
    if isinstance(shape, np.ndarray):
        sequence = shape.ndim == 1
    else:  # text is a Sequence too, but of characters
        sequence = isinstance(shape, collections.abc.Sequence) and not isinstance(shape, (str, bytes))
    if not sequence:
        raise TypeError(f"{name}: expected a sequence of integers (tuple or list), got {shape!r}")
    dims = tuple(shape)
    for v in dims:
        if not is_int(v):
            raise TypeError(f"{name}: {'dimensions' if minimum == 1 else 'entries'} must be integers, got {dims}")
        if v < minimum:
            what = "every dimension" if minimum == 1 else "every entry"
            raise LayoutError(f"{name}: {what} must be >= {minimum}, got {dims}{note}")
    return tuple(int(v) for v in dims)


def exact_key(value):
    """``value`` with the type of every entry, through tuples: a cache key under which a float or
    bool never finds the entry of the int it equals (2.0 == 2 and True == 1, but a call with
    them must raise, not take the cached result; docs/design.md §5.4)."""
    if isinstance(value, tuple):  # namedtuples too: their entries are compared by value
        return tuple(exact_key(v) for v in value)
    return type(value), value


def exact_cache(maxsize: int):
    """``functools.lru_cache`` keyed by :func:`exact_key` of the arguments, for caches that sit
    in front of the checks of the call they remember (docs/design.md §5.4)."""
    def wrap(f):
        @lru_cache(maxsize=maxsize)
        def cached(key, args, kwargs):
            return f(*args, **dict(kwargs))

        @wraps(f)
        def call(*args, **kwargs):
            items = tuple(kwargs.items())
            return cached(exact_key((args, items)), args, items)

        return call

    return wrap


def remember(cache: dict, key, value, limit: int):
    """Stores ``value`` under ``key`` in one of the packers' bounded per-call caches (docs/design.md
    §5.4), emptied when it holds more than ``limit`` entries; a key of None (arguments a key may
    not stand for) stores nothing. Returns ``value``."""
    if key is not None:
        if len(cache) > limit:
            cache.clear()
        cache[key] = value
    return value


def cache_safe(value, name: str, minimum: int = 1):
    """``value`` unchanged when it is None or a tuple, else :func:`check_dims` of it: the
    descriptor caches build their keys from these arguments before validating them, and a
    key must not be the first to read a one-shot iterator (the checks would then see it
    empty)."""
    return value if value is None or type(value) is tuple else check_dims(value, name, minimum=minimum)


def is_int(v) -> bool:
    """True for a Python or NumPy integer, False for a bool (not a count) and everything else."""
    t = type(v)
    if t is int:
        return True
    return t is not bool and t is not np.bool_ and isinstance(v, (int, np.integer))


def check_int(value, name: str) -> int:
    """``value`` as an int; TypeError naming ``name`` for anything else (a float 2.5 is not
    truncated, a bool is not a count). Ranges are the caller's to check."""
    if not is_int(value):
        raise TypeError(f"{name}: expected an integer, got {value!r}")
    return int(value)


def check_whole(values: np.ndarray, name: str, note: str, lo=None, hi=None) -> np.ndarray:
    """``values`` (a float64 array) when every value is a finite whole number, within [lo, hi]
    where given; else ValueError naming ``name`` (a shift of 1.5 or a radix of NaN is neither
    truncated nor cast to an arbitrary integer). ``note`` ends the message (a spec reference)."""
    ok = np.isfinite(values) & (values == np.round(values))
    if lo is not None:
        ok &= (values >= lo) & (values <= hi)
    if not np.all(ok):
        span = "" if lo is None else f" in {lo}..{hi}"
        raise ValueError(f"{name}: must be whole numbers{span}, got {values.tolist()}{note}")
    return values


def check_bool(value, name: str) -> bool:
    """``value`` as a bool; TypeError naming ``name`` for anything else: a flag is never read by
    truthiness ("no", 1 and None are not False or True)."""
    if value is True or value is False or isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"{name}: expected True or False, got {value!r}")


def check_dtype(dtype, name: str) -> np.dtype:
    """``np.dtype(dtype)``, with a TypeError naming ``name`` instead of NumPy's bare message;
    None is a TypeError too (NumPy reads it as float64, which no caller means)."""
    if dtype is None:
        raise TypeError(f"{name}: a dtype is required, got None")
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: {dtype!r} is not a NumPy dtype") from None


def check_no_nan(arr: np.ndarray, name: str) -> None:
    """ValueError naming ``name`` and the first NaN's index when a float ``arr`` holds one: a
    NaN has no integer value, and casting it gives an arbitrary one."""
    if arr.dtype.kind in "fc" and np.isnan(arr).any():
        index = tuple(int(i) for i in np.argwhere(np.isnan(arr))[0])
        raise ValueError(f"{name}: NaN at index {index} cannot be quantised (it has no integer value)")


def pad_bytes(value, dtype: np.dtype, name: str = "pad_value") -> bytes:
    """The bytes of one element of ``dtype`` (little-endian) holding ``value``; b"" for a
    Python 0 (the engine's zero fill). A pad value is stored, never rounded or wrapped:
    TypeError for anything but a real (or, for complex dtypes, complex) scalar; ValueError
    for a non-integer or out-of-range value for an integer dtype and for a finite value that
    overflows a float dtype."""
    if type(value) is int:
        if value == 0:
            return b""
        if dtype.kind in "iu":  # the common nonzero case, without NumPy scalars (a tenth of the time)
            lo, hi = _int_range(dtype)
            if not lo <= value <= hi:
                raise ValueError(f"{name}: {value!r} does not fit {dtype} elements ({lo}..{hi})")
            return value.to_bytes(dtype.itemsize, "little", signed=dtype.kind == "i")
    v = np.asarray(value)
    allowed = "biufc" if dtype.kind == "c" else "biuf"
    if v.ndim != 0 or v.dtype.kind not in allowed:
        raise TypeError(f"{name}: expected a {'number' if dtype.kind == 'c' else 'real number'} for {dtype} "
                        f"elements, got {value!r}")
    if dtype.kind in "iub":
        lo, hi = (0, 1) if dtype.kind == "b" else _int_range(dtype)
        if v.dtype.kind == "f" and not (np.isfinite(v) and v == np.floor(v)):
            raise ValueError(f"{name}: {value!r} is not an integer, and {dtype} elements hold integers")
        if not lo <= int(v) <= hi:
            raise ValueError(f"{name}: {value!r} does not fit {dtype} elements ({lo}..{hi})")
    with np.errstate(over="ignore"):
        cast = np.asarray(value, dtype=dtype)
    if dtype.kind in "fc" and np.all(np.isfinite(v)) and not np.all(np.isfinite(cast)):
        raise ValueError(f"{name}: {value!r} overflows {dtype} elements")
    return cast.astype(dtype.newbyteorder("<")).tobytes()


@lru_cache(maxsize=None)
def _int_range(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def as_byte_buffer(buf, name: str) -> np.ndarray:
    """View a bytes-like / uint8 array argument as a 1-D C-contiguous uint8 array (no copy when
    possible). Raises TypeError when it is not made of bytes."""
    arr = np.asarray(buf) if not isinstance(buf, (bytes, bytearray, memoryview)) else np.frombuffer(buf, np.uint8)
    if arr.dtype != np.uint8:
        raise TypeError(f"{name}: expected a uint8 byte buffer, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr).reshape(-1)


def aligned_empty(nbytes) -> np.ndarray:
    """A new, uninitialised output buffer whose first byte starts a 64-byte cache line, for the
    packers' ``out=`` (docs/design.md §3.8).

    NumPy places a large array 16 bytes past a page. The kernels that write whole lines stream an
    output of 8 MiB or more only where it is line-aligned (NVDLA DC weights of 1x1 kernels, and of
    3x3 kernels on CPUs with AVX-512 VBMI; float32 ``nChw16c`` and ``OIhw16i16o``); elsewhere they
    pack slab by slab through a line-aligned buffer where the layout has whole slabs of at most
    32 KiB (docs/performance.md §8), or store plainly. The packers' own results of 1 MiB and more
    are aligned the same way.

    Parameters
    ----------
    nbytes : int
        Size in bytes, >= 0.

    Returns
    -------
    numpy.ndarray
        1-D uint8 of ``nbytes`` bytes: a view into an array 63 bytes longer (it does not own its
        data; ``.base`` is that array).

    Raises
    ------
    TypeError
        ``nbytes`` is not an integer (a float or a bool is refused).
    ValueError
        ``nbytes`` is negative.
    """
    n = check_int(nbytes, "nbytes")
    if n < 0:
        raise ValueError(f"nbytes: must be >= 0, got {n}")
    raw = np.empty(n + 63, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + n]


def empty_lines(nbytes: int) -> np.ndarray:
    """A packer's new result of ``nbytes`` bytes: :func:`aligned_empty` from 1 MiB, where an
    output can be large enough to stream, else ``np.empty`` (reading the address would cost more
    than a small call takes)."""
    # np.empty given the dtype object, not the type: NumPy then skips a conversion a small call feels.
    return _EMPTY(nbytes, _U8) if nbytes < _LINES_FROM else aligned_empty(nbytes)


_LINES_FROM = 1 << 20
_EMPTY = np.empty


def result_buffer(out: np.ndarray | None, nbytes: int) -> np.ndarray:
    """The ``nbytes`` bytes a packer writes its result into: the first bytes of the caller's
    ``out`` (checked by :func:`check_out`) or a new array (:func:`empty_lines`)."""
    if out is None:
        return empty_lines(nbytes)
    buf = check_out(out, nbytes)
    return buf if buf.size == nbytes else buf[:nbytes]


_U8 = np.dtype(np.uint8)


def check_out(out: np.ndarray, nbytes: int) -> np.ndarray:
    """Validate a caller's ``out=`` buffer: a writable, C-contiguous uint8 ndarray of at least
    ``nbytes`` bytes. Returns it flattened (a view). Raises TypeError / LayoutError."""
    if type(out) is np.ndarray and out.dtype is _U8 and out.size >= nbytes:
        flags = out.flags
        if flags.c_contiguous and flags.writeable:  # the per-call fast path
            return out if out.ndim == 1 else out.reshape(-1)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out: expected a numpy uint8 array, got {type(out).__name__}")
    if out.dtype != np.uint8:
        raise TypeError(f"out: expected dtype uint8, got {out.dtype}")
    if not out.flags.c_contiguous:
        raise LayoutError("out: must be C-contiguous")
    if not out.flags.writeable:
        raise LayoutError("out: is read-only; pass a writable buffer")
    if out.size < nbytes:
        raise LayoutError(f"out: holds {out.size} bytes, {nbytes} are needed")
    # A subclass (np.matrix stays 2-D when reshaped) as a plain view of the same bytes.
    return out.view(np.ndarray).reshape(-1)


def strided_layout(dims: Sequence[Dim], byte_strides: Mapping[tuple[str, int], int], dtype) -> BlockedLayout:
    """A descriptor from explicit byte strides in any order (vendor runtimes report strides per
    axis: Kneron ``stride_npu``, Horizon ``stride``). Loops are nested by decreasing stride;
    loops of extent 1 go outermost (their stride never matters). The engine then checks that no
    two elements share a slot (each stride covers the loops inside it).

    ``byte_strides`` maps (dim name, level) to bytes for every loop with extent > 1.
    Raises LayoutError for a missing or negative stride, a stride that is not a multiple of the
    element size, or overlapping strides."""
    parts = []
    for d in dims:
        levels = len(d.tiles) + 1
        prod = int(np.prod(d.tiles)) if d.tiles else 1
        for lv in range(levels):
            extent = -(-d.storage // prod) if lv == 0 else d.tiles[lv - 1]
            parts.append(((d.name, lv), extent))
    ones = [key for key, n in parts if n == 1]
    rest = []
    for key, n in parts:
        if n == 1:
            continue
        if key not in byte_strides:
            raise LayoutError(f"byte_strides: no stride for {key[0]!r} (level {key[1]}), which has extent {n}")
        s = int(byte_strides[key])
        if s < 0:
            raise LayoutError(f"byte_strides: stride of {key[0]!r} is {s}; strides must be >= 0")
        rest.append((s, key))
    rest.sort(key=lambda t: -t[0])
    order = ones + [key for _, key in rest]
    # A dim's parts must stay outer to inner in the nest: reorder levels within each dim's slots.
    for d in dims:
        slots = [i for i, key in enumerate(order) if key[0] == d.name]
        if [order[i][1] for i in slots] != sorted(order[i][1] for i in slots):
            raise LayoutError(f"byte_strides: the parts of {d.name!r} must have decreasing strides (outer count "
                              "first)")
    explicit = {key: s for s, key in rest}
    if not explicit:
        return BlockedLayout(dims, order, dtype)
    # The innermost loop needs a stride too when it is explicit; a zero stride would read as
    # "derived", so strides of 0 with extent > 1 are overlaps.
    for key, s in explicit.items():
        if s == 0:
            raise LayoutError(f"byte_strides: stride 0 for {key[0]!r} maps its elements to one slot")
    return BlockedLayout(dims, order, dtype, explicit)
