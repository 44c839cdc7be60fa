"""NVDLA sparse weight compression: WMB / DATA / WGS surfaces, their sizes before compressing,
decompression, and a magnitude-pruning helper for experiments (docs/nvdla.md §11).

The input is the uncompressed element stream of one weight surface (after every extension and
mapping step, without tail): ``n`` elements of ``es`` bytes, split into kernel groups of
``kernel_group_elements`` consecutive elements (the last group may be short).

* WMB: bit ``i`` = element ``i`` is non-zero, byte ``i // 8``, bit ``i % 8`` (LSB first), one
  continuous bit stream over all groups.
* DATA: the non-zero elements in stream order, back to back across groups.
* WGS: one little-endian uint32 per kernel group, ``es *`` (non-zero elements of the group).

Each surface is zero-padded to a multiple of 128 bytes and is at least 128 bytes. An element is
zero only when all its bits are zero: fp16 ``-0.0`` (0x8000) is stored.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npupack._gate import gate
from npupack.formats.aliases import registry_words
from npupack import _core
from npupack.errors import LayoutError
from npupack.layout import _U8, check_int, check_out, little_endian, result_buffer
from npupack.nvdla.config import NV_FULL, Config, PRECISIONS, check_config, element_size
from npupack.nvdla.convert import _TARGET_DTYPE

__all__ = ["SparsityReport", "analyze_sparsity", "compress_weights", "decompress_weights", "prune"]

SURFACE_ALIGNMENT = 128


def _surface(nbytes: int) -> int:
    """Compressed surface size: a multiple of 128 bytes, at least 128 (docs/nvdla.md §11.1)."""
    return max(SURFACE_ALIGNMENT, -(-nbytes // SURFACE_ALIGNMENT) * SURFACE_ALIGNMENT)


@dataclass(frozen=True)
class SparsityReport:
    """Sizes of the compressed encoding of one weight stream, computed without building it
    (docs/nvdla.md §11.1, 11.2). All sizes are bytes.

    Attributes
    ----------
    elements, nonzero : int
        Elements of the stream and how many of them are non-zero (all bits).
    data_bytes, wmb_bytes, wgs_bytes : int
        The three compressed surfaces (each a multiple of 128, at least 128).
    compressed_bytes : int
        ``data_bytes + wmb_bytes + wgs_bytes``.
    uncompressed_bytes : int
        The uncompressed surface (stream rounded up to the tail alignment).
    group_nonzero : numpy.ndarray
        int64, non-zero elements per kernel group.
    group_zero_fraction : numpy.ndarray
        float64, fraction of zero elements per kernel group.
    """

    elements: int
    nonzero: int
    data_bytes: int
    wmb_bytes: int
    wgs_bytes: int
    compressed_bytes: int
    uncompressed_bytes: int
    group_nonzero: np.ndarray
    group_zero_fraction: np.ndarray

    @property
    def zero_fraction(self) -> float:
        """Fraction of zero elements over the whole stream."""
        return 1.0 - self.nonzero / self.elements if self.elements else 0.0

    @property
    def pays_off(self) -> bool:
        """True when the compressed encoding is strictly smaller (``compress="auto"`` picks it)."""
        return self.compressed_bytes < self.uncompressed_bytes

    @property
    def ratio(self) -> float:
        """``uncompressed_bytes / compressed_bytes``."""
        return self.uncompressed_bytes / self.compressed_bytes


_ELEMENT_BYTES = {p: element_size(p) for p in PRECISIONS}


def _stream_bytes(stream, precision: str, what: str = "stream") -> tuple[np.ndarray, int]:
    """The stream as flat C-contiguous uint8 bytes and its element size. uint8 arrays and bytes
    objects are raw bytes; int8/int16/float16 arrays are elements of ``precision``."""
    if type(stream) is np.ndarray and stream.dtype is _U8 and stream.ndim == 1 and type(precision) is str:
        es = _ELEMENT_BYTES.get(precision)  # the common call (a packed surface's bytes) in a few reads
        if es is not None and stream.size % es == 0 and stream.flags.c_contiguous:
            return stream, es
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {PRECISIONS}")
    es = element_size(precision)
    if isinstance(stream, (bytes, bytearray, memoryview)):
        stream = np.frombuffer(stream, dtype=np.uint8)
    if not isinstance(stream, np.ndarray):
        raise TypeError(f"{what}: expected a numpy array or bytes, got {type(stream).__name__}")
    if stream.dtype == np.uint8:
        raw = np.ascontiguousarray(stream).reshape(-1)
        if raw.size % es:
            raise LayoutError(f"{what}: {raw.size} bytes is not a whole number of {es}-byte {precision} elements")
        return raw, es
    if stream.dtype != _TARGET_DTYPE[precision]:
        raise TypeError(f"{what}: dtype {stream.dtype} does not match precision {precision!r} "
                        f"(expected {_TARGET_DTYPE[precision]} elements or uint8 bytes)")
    return np.ascontiguousarray(stream).reshape(-1).view(np.uint8), es


def _group_elements(kernel_group_elements) -> int:
    if type(kernel_group_elements) is int and kernel_group_elements >= 1:
        return kernel_group_elements
    if isinstance(kernel_group_elements, (bool, np.bool_)) or not isinstance(kernel_group_elements,
                                                                            (int, np.integer)):
        raise TypeError(f"kernel_group_elements: expected an integer, got {kernel_group_elements!r}")
    if kernel_group_elements < 1:
        raise LayoutError(f"kernel_group_elements: must be >= 1, got {kernel_group_elements}")
    return int(kernel_group_elements)


def _sizes(n: int, nonzero: int, groups: int, es: int) -> tuple[int, int, int]:
    return _surface(nonzero * es), _surface(-(-n // 8)), _surface(4 * groups)


@gate("stream")
def analyze_sparsity(stream, *, precision: str | None = None, kernel_group_elements: int | None = None,
                     tail: int = 128) -> SparsityReport:
    """Sizes of the compressed and uncompressed encodings before compressing (docs/nvdla.md §11.1).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    stream : numpy.ndarray, bytes or WeightSurfaces
        The uncompressed element stream (no tail): uint8 bytes, or an int8 / int16 / float16
        element array of ``precision`` (any shape, read in C order). A WeightSurfaces
        (uncompressed) supplies its stream, precision, group size and tail alignment itself.
    precision : {"int8", "int16", "fp16"}
        Element type of the stream (not needed for a WeightSurfaces).
    kernel_group_elements : int
        Elements of a full kernel group (``kpg * C' * R' * S'``); the last group is the rest.
    tail : int
        Alignment of the uncompressed surface in bytes (``config.weight_size_alignment``).

    Returns
    -------
    SparsityReport

    Raises
    ------
    TypeError
        ``stream`` of another dtype than ``precision``'s elements or uint8.
    LayoutError
        A byte stream that is not whole elements; ``kernel_group_elements`` < 1.
    ValueError
        ``tail`` < 1 (TypeError when it is not an integer).
    """
    from npupack.nvdla.surfaces import WeightSurfaces

    if isinstance(stream, WeightSurfaces):
        ws = stream
        if ws.compressed:
            raise ValueError("stream: the weights are already compressed; analyze the uncompressed surfaces")
        precision, kernel_group_elements, tail = ws.precision, ws.kernel_group_elements, ws.alignment
        stream = ws.weight[:ws.meaningful_bytes]
    elif precision is None or kernel_group_elements is None:
        raise TypeError("analyze_sparsity: precision= and kernel_group_elements= are required for a raw stream")
    else:
        tail = check_int(tail, "tail")
        if tail < 1:
            raise ValueError(f"tail: the surface alignment must be >= 1 byte, got {tail}")
    raw, es = _stream_bytes(stream, precision)
    group = _group_elements(kernel_group_elements)
    n = raw.size // es
    counts = _core.sparse_count(raw, n, es, group)
    nonzero = int(counts.sum())
    data, wmb, wgs = _sizes(n, nonzero, counts.size, es)
    sizes = np.full(counts.size, group, dtype=np.int64)
    if counts.size:
        sizes[-1] = n - group * (counts.size - 1)
    return SparsityReport(
        elements=n, nonzero=nonzero, data_bytes=data, wmb_bytes=wmb, wgs_bytes=wgs,
        compressed_bytes=data + wmb + wgs, uncompressed_bytes=-(-raw.size // tail) * tail if raw.size else 0,
        group_nonzero=counts, group_zero_fraction=1.0 - counts / np.maximum(sizes, 1))


def _compress(raw: np.ndarray, es: int, group: int, out=None, nonzero: int | None = None) -> dict:
    """One pass in C++: WMB and DATA together, the group counts into WGS, every surface's
    padding. Without ``out`` the DATA buffer is allocated for the worst case (every element
    non-zero; untouched pages cost nothing) and ``weight`` is its first ``data_bytes``; with
    ``out`` the pass counts the non-zeros first, so that ``out`` is checked before anything is
    written, and writes only the DATA surface's bytes of it: its SIMD stores run up to 64 bytes
    past the data they keep (overwritten next or by the padding), which must not land in the
    caller's bytes after the surface. ``out`` never overlaps ``raw``: the argument gate refuses a
    caller's stream inside it, and pack_weights' stream is its own new array. A caller that
    has just counted the non-zeros passes ``nonzero`` and the stream is not read a third time
    (if another thread changes it in between, the pass still stops at the surface's end)."""
    n = raw.size // es
    if out is not None and nonzero is None:
        data = check_out(out, 0)
        written, wmb, wgs = _core.sparse_encode_out(raw, n, es, group, data, SURFACE_ALIGNMENT)
        return dict(weight=data[:_surface(written)], wmb=wmb, wgs=wgs, nonzero=written // es)
    if out is not None:
        need = _surface(nonzero * es)
        data = check_out(out, need)[:need]
    else:
        data = np.empty(_surface(n * es), _U8)
    wmb = np.empty(_surface(-(-n // 8)), _U8)
    wgs = np.empty(_surface(4 * -(-n // group)), _U8)
    written = _core.sparse_encode(raw, n, es, group, wmb, data, wgs, SURFACE_ALIGNMENT)
    return dict(weight=data[:_surface(written)], wmb=wmb, wgs=wgs, nonzero=written // es)


def encode_stream(stream: np.ndarray, *, es: int, kernel_group_elements: int, mode, uncompressed_bytes: int,
                  out=None) -> dict:
    """Surface fields for ``pack_weights(compress=True|"auto")``: compressed, or (``"auto"`` when
    compression is not strictly smaller) the uncompressed surface with its zero tail."""
    nonzero = None
    if mode == "auto":
        counts = _core.sparse_count(stream, stream.size // es, es, kernel_group_elements)
        nonzero = int(counts.sum())
        data, wmb, wgs = _sizes(stream.size // es, nonzero, counts.size, es)
        if data + wmb + wgs >= uncompressed_bytes:
            buf = check_out(out, uncompressed_bytes)[:uncompressed_bytes] if out is not None else \
                np.empty(uncompressed_bytes, dtype=np.uint8)
            buf[:stream.size] = stream
            buf[stream.size:] = 0
            return dict(weight=buf)
    return _compress(stream, es, kernel_group_elements, out, nonzero)


@gate("stream")
def compress_weights(stream, *, precision: str, kernel_group_elements: int, out=None):
    """Compress an uncompressed weight stream into DATA, WMB and WGS (docs/nvdla.md §11.1).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    stream : numpy.ndarray or bytes
        ``n`` elements: uint8 bytes (``n * es`` of them) or an int8 / int16 / float16 array of
        ``precision`` (any shape, C order). Not modified.
    precision : {"int8", "int16", "fp16"}
    kernel_group_elements : int
        Elements of a full kernel group; the last group holds the remainder.
    out : numpy.ndarray, optional
        Buffer for DATA: a writable, C-contiguous uint8 array of at least the DATA surface's
        bytes (``analyze_sparsity(...).data_bytes``), not sharing memory with ``stream``. The
        non-zeros are counted first (one more read of the stream), so that ``out`` is checked
        before anything is written; only its first ``data_bytes`` bytes are written, and DATA
        is returned as a view of them. WMB and WGS are new arrays.

    Returns
    -------
    (data, wmb, wgs) : three uint8 arrays
        DATA: non-zero elements (``es`` bytes each, LE) back to back; WMB: ``ceil(n/8)`` bytes of
        LSB-first mask bits; WGS: ``ceil(n / kernel_group_elements)`` LE uint32 byte counts.
        Each is zero-padded to a multiple of 128 bytes, at least 128.

    Raises
    ------
    TypeError
        ``stream`` of another dtype than ``precision``'s elements or uint8; ``out`` not a uint8
        numpy array.
    LayoutError
        A byte stream that is not whole elements; ``kernel_group_elements`` < 1; a kernel group
        with 4 GiB or more of non-zero data (its WGS entry is a uint32 byte count); ``out`` too
        small, read-only, not C-contiguous or sharing memory with ``stream``.
    """
    raw, es = _stream_bytes(stream, precision)
    r = _compress(raw, es, _group_elements(kernel_group_elements), out)
    return r["weight"], r["wmb"], r["wgs"]


@gate("data", "wmb", "wgs")
def decompress_weights(data, wmb, *, precision: str, n_elements: int, wgs=None, kernel_group_elements=None,
                       out=None):
    """Expand compressed weights back to the uncompressed element stream (docs/nvdla.md §11.1).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    For each element ``i < n_elements``: WMB bit ``i`` set takes the next ``es`` bytes of DATA,
    clear gives zero (+0 for fp16). The result does not depend on WGS; when ``wgs`` and
    ``kernel_group_elements`` are given they are checked against the mask.

    Parameters
    ----------
    data, wmb : numpy.ndarray of uint8 or bytes
        The DATA and WMB surfaces (padding allowed).
    precision : {"int8", "int16", "fp16"}
    n_elements : int
        Elements of the uncompressed stream (``meaningful_bytes / es``).
    wgs : numpy.ndarray of uint8 or bytes, optional
        The WGS surface, to verify.
    kernel_group_elements : int, optional
        Needed with ``wgs``.
    out : numpy.ndarray of uint8, optional
        A caller's buffer of at least ``n_elements * es`` bytes (writable, C-contiguous, not
        sharing memory with the inputs) to expand into, instead of a new array: repeated
        decompression of large surfaces then writes straight into memory the caller keeps.

    Returns
    -------
    numpy.ndarray
        int8, int16 or float16 of shape ``(n_elements,)`` (``n_elements * es`` bytes): a view of
        the first bytes of ``out`` when given.

    Raises
    ------
    LayoutError
        The WMB holds fewer than ``n_elements`` bits; DATA is shorter than the mask says; a WGS
        entry disagrees with the mask (or WGS is too short); ``out`` too small, read-only, not
        C-contiguous or sharing memory with an input.
    TypeError
        A surface that is not bytes / uint8; ``wgs`` without ``kernel_group_elements``; ``out``
        not a uint8 numpy array.
    """
    es = _ELEMENT_BYTES.get(precision) if type(precision) is str else None
    if es is None:
        raise ValueError(f"precision: {precision!r} is not one of {PRECISIONS}")
    data = _raw(data, "data")
    wmb = _raw(wmb, "wmb")
    if type(n_elements) is not int and (isinstance(n_elements, (bool, np.bool_))
                                        or not isinstance(n_elements, (int, np.integer))) or n_elements < 0:
        raise TypeError(f"n_elements: expected an integer >= 0, got {n_elements!r}")
    n = int(n_elements)
    if wmb.size * 8 < n:
        raise LayoutError(f"wmb: holds {wmb.size * 8} mask bits, n_elements = {n} are needed (truncated WMB?)")
    if wgs is not None:
        if kernel_group_elements is None:
            raise TypeError("wgs: checking WGS needs kernel_group_elements=")
        group = _group_elements(kernel_group_elements)
        counts = _core.sparse_group_popcount(wmb, n, group)
        wgs = _raw(wgs, "wgs")
        if wgs.size < 4 * counts.size:
            raise LayoutError(f"wgs: holds {wgs.size // 4} entries, {counts.size} kernel groups need one each")
        entries = wgs[:4 * counts.size].view("<u4").astype(np.int64)
        bad = np.flatnonzero(entries != counts * es)
        if bad.size:
            g = int(bad[0])
            raise LayoutError(f"wgs: kernel group {g} says {int(entries[g])} bytes, the WMB marks "
                              f"{int(counts[g]) * es} (corrupted compressed weights)")
    buf = result_buffer(out, n * es)
    _core.sparse_decompress(data, wmb, n, es, buf)
    return buf.view(_TARGET_DTYPE[precision])


def _raw(a, name: str) -> np.ndarray:
    if type(a) is np.ndarray and a.dtype is _U8 and a.ndim == 1 and a.flags.c_contiguous:
        return a  # a surface as packed: a few reads
    if isinstance(a, (bytes, bytearray, memoryview)):
        return np.frombuffer(a, dtype=np.uint8)
    if not isinstance(a, np.ndarray) or a.dtype != np.uint8:
        raise TypeError(f"{name}: expected uint8 bytes, got {getattr(a, 'dtype', type(a).__name__)}")
    return np.ascontiguousarray(a).reshape(-1)


@registry_words("nvdla.prune")
@gate("w")
def prune(w, sparsity: float, *, precision: str | None = None, config: Config = NV_FULL, kernel_axis: int = 0):
    """Magnitude pruning per kernel group, for compression experiments.

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Kernels are taken ``kpg = config.kernels_per_group(precision)`` at a time along
    ``kernel_axis`` (the last group may be short, as in the weight surfaces, docs/nvdla.md §5.2); in
    each group the ``floor(sparsity * n + 0.5)`` elements of smallest magnitude are set to zero
    (``n`` = elements of the group; ties broken by position, first first; existing zeros count).

    Parameters
    ----------
    w : array_like, (K, C, R, S) (deconvolution: (C_in, K_out, R, S) with ``kernel_axis=1``)
        Any real dtype. Not modified.
    sparsity : float
        Fraction of zeros to reach in each group, 0 <= sparsity <= 1.
    precision : {"int8", "int16", "fp16"}, optional
        Decides the group size; inferred like ``pack_weights`` (int8 -> int8, int16 -> int16,
        floats -> fp16) when omitted. Pass the precision the weights will be packed as.
    config : Config
    kernel_axis : int
        Axis of the kernels (output channels).

    Returns
    -------
    numpy.ndarray
        Same shape and dtype as ``w``, a new array. Work memory beside it: one magnitude copy
        of a kernel group at the weights' own element size (the threshold is found by a
        partition, not a sort), so the peak stays within 2.5x of input + output.

    Raises
    ------
    ValueError
        ``sparsity`` outside [0, 1] or not finite; ``kernel_axis`` out of range.
    TypeError
        A non-real dtype; a ``config`` that is not a Config.
    """
    check_config(config)
    from npupack.nvdla.convert import infer_precision

    arr = little_endian(np.asarray(w))
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"w: expected a real array, got dtype {arr.dtype}")
    if isinstance(sparsity, (str, bytes)):  # float("0.5") would read text as a number
        raise TypeError(f"sparsity: expected a number, got {sparsity!r}")
    try:
        sparsity = float(sparsity)
    except (TypeError, ValueError):
        raise TypeError(f"sparsity: expected a number, got {sparsity!r}") from None
    if not 0.0 <= sparsity <= 1.0:
        raise ValueError(f"sparsity: must be in [0, 1], got {sparsity}")
    if not -arr.ndim <= check_int(kernel_axis, "kernel_axis") < arr.ndim:
        raise ValueError(f"kernel_axis: {kernel_axis} is out of range for {arr.ndim} dimensions")
    kpg = config.kernels_per_group(infer_precision(arr.dtype, precision, config, "w"))
    moved = np.moveaxis(arr, kernel_axis, 0)
    k = moved.shape[0]
    out = np.array(moved, order="C")  # the result, and the only full-size copy
    flat = out.reshape(k, -1)
    for k0 in range(0, k, kpg):  # one NumPy pass per kernel group, not per element
        block = flat[k0:k0 + kpg].reshape(-1)
        drop = int(np.floor(sparsity * block.size + 0.5))
        if drop:
            _zero_smallest(block, drop)
    return np.moveaxis(out, 0, kernel_axis)


_CHUNK = 1 << 20  # elements per pass of the temporaries in _zero_smallest


def _magnitude(x: np.ndarray) -> np.ndarray:
    """|x| in an order-preserving type of x's own size (a new array): a signed integer's
    magnitude as the unsigned twin (wrapping negation gives |-128| = 128), a float's in its dtype.
    A float64 copy would take 8 bytes per int8 weight."""
    if x.dtype.kind == "i":
        u = x.view(x.dtype.newbyteorder("=").str.replace("i", "u"))
        return np.where(x < 0, np.negative(u), u)
    return np.abs(x)


def _zero_smallest(block: np.ndarray, drop: int) -> None:
    """Zero the ``drop`` elements of smallest magnitude of the 1-D ``block`` in place, ties
    broken by position (first first) and NaN largest: a stable argsort's first ``drop``, found
    as a threshold (a partition of one magnitude copy) and two passes in chunks, so the work
    memory is one copy of the group at its own element size."""
    if drop >= block.size:
        block[...] = 0
        return
    key = np.empty(block.size, _magnitude(block[:0]).dtype)  # filled in chunks: no full-size temporaries
    for lo in range(0, block.size, _CHUNK):
        key[lo:lo + _CHUNK] = _magnitude(block[lo:lo + _CHUNK])
    key.partition(drop - 1)
    t = key[drop - 1]
    del key
    t_nan = bool(np.isnan(t)) if block.dtype.kind == "f" else False

    def masks(lo):
        m = _magnitude(block[lo:lo + _CHUNK])
        equal = np.isnan(m) if t_nan else m == t
        return (m < t) | (~np.isnan(m) if t_nan else False), equal

    below = sum(int(np.count_nonzero(masks(lo)[0])) for lo in range(0, block.size, _CHUNK))
    ties = drop - below  # the first `ties` elements equal to t go as well
    for lo in range(0, block.size, _CHUNK):
        less, equal = masks(lo)
        chunk = block[lo:lo + _CHUNK]
        if ties > 0:
            at = np.flatnonzero(equal)[:ties]
            ties -= at.size
            chunk[at] = 0
        chunk[less] = 0
