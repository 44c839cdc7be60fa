"""NVDLA pitch-linear pixel formats for image input (docs/nvdla.md §4).

An image is ``(H, W, comps)`` with components in the hardware's channel order c0 = R/Y, c1 = G/U,
c2 = B/V, c3 = A/X. Each plane is ``H`` lines of ``line_stride`` bytes: ``pre`` padding bytes
(the x offset), ``W`` pixels of ``bpp`` bytes, zero padding. fp16 conversion and 10-bit word
packing (with its range check) are passes before the layout; then one C++ pass writes each line:
interleaved formats with the component order of the format as a byte shuffle, semi-planar formats
split into the Y and UV planes, the x-offset bytes and line tails zeroed next to the pixels.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Optional

import numpy as np

from npupack._gate import _MAY_SHARE, gate
from npupack import _core
from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import as_byte_buffer, check_bool, check_dims, check_int, check_out, little_endian, remember
from npupack.nvdla.config import PRECISIONS
from npupack.nvdla.convert import to_fp16

__all__ = ["PixelFormat", "PIXEL_FORMATS", "PixelPlanes", "pack_pixels", "unpack_pixels", "pixel_line_strides",
           "convert_pixel_precision"]


@dataclass(frozen=True)
class PixelFormat:
    """One row of Table 33 (docs/nvdla.md §4.2).

    Attributes
    ----------
    name : str
    comps : int
        Components the convolution sees (``Cdata``): 1, 3 or 4.
    kind : str
        "8bit", "16bit" (integer containers), "fp16" or "10bit" (one packed 32-bit word per pixel).
    planes : tuple of tuple of int
        Per plane, the components (c-indices) at increasing addresses within one pixel.
    comp_bytes : int
        Bytes per component in memory (1, 2; 4 for the 10-bit word).
    shifts : tuple or None
        10-bit formats: bit position of (c0, c1, c2, alpha) in the 32-bit word.
    has_x : bool
        The fourth component is X (accepted as 3-component input, written as 0).
    """

    name: str
    comps: int
    kind: str
    planes: tuple
    comp_bytes: int
    shifts: Optional[tuple] = None
    has_x: bool = False

    @cached_property
    def bpp(self) -> tuple:
        """Bytes per pixel of each plane."""
        if self.kind == "10bit":
            return (4,)
        return tuple(len(p) * self.comp_bytes for p in self.planes)

    @cached_property
    def line_order(self) -> list:
        """Single-plane formats: the image component stored at each position of a pixel (a
        10-bit word is one element)."""
        return [0] if self.kind == "10bit" else list(self.planes[0])

    @cached_property
    def line_order_no_x(self) -> list:
        """X formats given three components: ``line_order`` with -1 where X is stored (written as 0)."""
        return [-1 if c == A else c for c in self.line_order]

    @cached_property
    def x_offset_max(self) -> int:
        """Largest x offset: all x with x * bpp[0] < 32 (the hardware documentation's range)."""
        return 32 // self.bpp[0] - 1

    @property
    def precision(self) -> str:
        """Precision class of the pixel data: "int8", "int16" or "fp16" (docs/nvdla.md §4.2)."""
        return {"8bit": "int8", "16bit": "int16", "10bit": "int16", "fp16": "fp16"}[self.kind]


def _fmt(name, comps, kind, planes, comp_bytes, shifts=None):
    has_x = "X" in name.split("_")[1]
    return PixelFormat(name, comps, kind, tuple(tuple(p) for p in planes), comp_bytes, shifts, has_x)


R, G, B, A = 0, 1, 2, 3
_ROWS = [
    _fmt("T_R8", 1, "8bit", [[R]], 1),
    _fmt("T_R10", 1, "16bit", [[R]], 2), _fmt("T_R12", 1, "16bit", [[R]], 2), _fmt("T_R16", 1, "16bit", [[R]], 2),
    _fmt("T_R16_I", 1, "16bit", [[R]], 2), _fmt("T_R16_F", 1, "fp16", [[R]], 2),
    _fmt("T_A16B16G16R16", 4, "16bit", [[R, G, B, A]], 2), _fmt("T_X16B16G16R16", 4, "16bit", [[R, G, B, A]], 2),
    _fmt("T_A16B16G16R16_F", 4, "fp16", [[R, G, B, A]], 2),
    _fmt("T_A16Y16U16V16", 4, "16bit", [[B, G, R, A]], 2), _fmt("T_V16U16Y16A16", 4, "16bit", [[A, R, G, B]], 2),
    _fmt("T_A16Y16U16V16_F", 4, "fp16", [[B, G, R, A]], 2),
    _fmt("T_A8B8G8R8", 4, "8bit", [[R, G, B, A]], 1), _fmt("T_A8R8G8B8", 4, "8bit", [[B, G, R, A]], 1),
    _fmt("T_B8G8R8A8", 4, "8bit", [[A, R, G, B]], 1), _fmt("T_R8G8B8A8", 4, "8bit", [[A, B, G, R]], 1),
    _fmt("T_X8B8G8R8", 4, "8bit", [[R, G, B, A]], 1), _fmt("T_X8R8G8B8", 4, "8bit", [[B, G, R, A]], 1),
    _fmt("T_B8G8R8X8", 4, "8bit", [[A, R, G, B]], 1), _fmt("T_R8G8B8X8", 4, "8bit", [[A, B, G, R]], 1),
    _fmt("T_A8Y8U8V8", 4, "8bit", [[B, G, R, A]], 1), _fmt("T_V8U8Y8A8", 4, "8bit", [[A, R, G, B]], 1),
    # 10-bit: bit positions of (R/Y, G/U, B/V, A) in the LE 32-bit word (docs/nvdla.md §4.3)
    _fmt("T_A2B10G10R10", 4, "10bit", [[R, G, B, A]], 4, (0, 10, 20, 30)),
    _fmt("T_A2R10G10B10", 4, "10bit", [[R, G, B, A]], 4, (20, 10, 0, 30)),
    _fmt("T_A2Y10U10V10", 4, "10bit", [[R, G, B, A]], 4, (20, 10, 0, 30)),
    _fmt("T_B10G10R10A2", 4, "10bit", [[R, G, B, A]], 4, (2, 12, 22, 0)),
    _fmt("T_V10U10Y10A2", 4, "10bit", [[R, G, B, A]], 4, (2, 12, 22, 0)),
    _fmt("T_R10G10B10A2", 4, "10bit", [[R, G, B, A]], 4, (22, 12, 2, 0)),
    # semi-planar N444: plane 0 = Y, plane 1 = the UV word's components at increasing addresses
    _fmt("T_Y8___U8V8_N444", 3, "8bit", [[R], [B, G]], 1), _fmt("T_Y8___V8U8_N444", 3, "8bit", [[R], [G, B]], 1),
    _fmt("T_Y10___U10V10_N444", 3, "16bit", [[R], [B, G]], 2),
    _fmt("T_Y10___V10U10_N444", 3, "16bit", [[R], [G, B]], 2),
    _fmt("T_Y12___U12V12_N444", 3, "16bit", [[R], [B, G]], 2),
    _fmt("T_Y12___V12U12_N444", 3, "16bit", [[R], [G, B]], 2),
    _fmt("T_Y16___U16V16_N444", 3, "16bit", [[R], [B, G]], 2),
    _fmt("T_Y16___V16U16_N444", 3, "16bit", [[R], [G, B]], 2),
]
PIXEL_FORMATS = {f.name: f for f in _ROWS}
_DTYPE = {"8bit": np.dtype(np.uint8), "16bit": np.dtype(np.uint16), "fp16": np.dtype(np.uint16),
          "10bit": np.dtype(np.uint32)}


@dataclass(frozen=True)
class PixelPlanes:
    """Packed image planes: ``planes`` (uint8 arrays of ``H * line_stride`` bytes each) and their
    ``line_strides`` (bytes), plus what produced them."""

    planes: tuple
    line_strides: tuple
    pixel_format: str
    shape: tuple
    x_offset: int

    @classmethod
    def _fast(cls, planes, line_strides, pixel_format, shape, x_offset) -> "PixelPlanes":
        # As WeightSurfaces._fast: the frozen __init__ (one object.__setattr__ per field) is a
        # tenth of a 224x224 image's packing time. Instances stay frozen for callers.
        obj = object.__new__(cls)
        d = obj.__dict__
        d["planes"], d["line_strides"], d["pixel_format"], d["shape"], d["x_offset"] = \
            planes, line_strides, pixel_format, shape, x_offset
        return obj


def _format(pixel_format) -> PixelFormat:
    if isinstance(pixel_format, PixelFormat):
        return pixel_format
    try:
        return PIXEL_FORMATS[pixel_format]
    except (KeyError, TypeError):
        raise ValueError(f"pixel_format: unknown NVDLA pixel format {pixel_format!r}; see "
                         "npupack.nvdla.PIXEL_FORMATS (docs/nvdla.md §4.2)") from None


def pixel_line_strides(pixel_format, width: int, *, x_offset: int = 0, line_stride=None) -> tuple:
    """Line stride of each plane of an NVDLA pixel format, in bytes (docs/nvdla.md §4.4, 15).

    Parameters
    ----------
    pixel_format : str or PixelFormat
        A name of :data:`PIXEL_FORMATS`.
    width : int
        Pixels per line (W).
    x_offset : int
        Redundant pixels before the first one (0 .. 32 // bpp - 1); plane 0 starts its lines
        with ``x_offset * bpp`` bytes, a UV plane with ``(x_offset * bpp) % 32``.
    line_stride : int or sequence of int, optional, bytes
        One for every plane or one per plane; default ``roundup(pre + W * bpp, 32)``.

    Returns
    -------
    tuple of int
        One line stride per plane, bytes, each a multiple of 32 and at least ``pre + W * bpp``.

    Raises
    ------
    LayoutError
        W < 1, an x offset out of range, a stride not a multiple of 32 or too small, a wrong
        number of strides.
    TypeError
        An x offset or stride that is not an integer.
    ValueError
        Unknown format.
    """
    fmt = _format(pixel_format)
    x_offset, width = check_int(x_offset, "x_offset"), check_int(width, "width")
    if line_stride is not None and not isinstance(line_stride, (int, np.integer)):
        try:
            line_stride = tuple(line_stride)
        except TypeError:
            raise TypeError(f"line_stride: expected bytes as an int or one int per plane, got {line_stride!r}") \
                from None
        line_stride = tuple(check_int(v, "line_stride") for v in line_stride)
    elif line_stride is not None:
        line_stride = check_int(line_stride, "line_stride")
    # Cached per geometry: an image pipeline asks for the same few again and again.
    return _line_strides(fmt.name, width, x_offset, line_stride)


@lru_cache(maxsize=512)
def _line_strides(name: str, width: int, x_offset: int, line_stride) -> tuple:
    fmt = PIXEL_FORMATS[name]
    if width < 1:
        raise LayoutError(f"width: must be >= 1, got {width}")
    if not 0 <= x_offset <= fmt.x_offset_max:
        raise LayoutError(f"x_offset: {x_offset} is outside {fmt.name}'s range 0-{fmt.x_offset_max} "
                          "(x * bytes per pixel < 32; docs/nvdla.md §4.4)")
    given = line_stride if isinstance(line_stride, tuple) else (line_stride,) * len(fmt.bpp)
    if len(given) != len(fmt.bpp):
        raise LayoutError(f"line_stride: {fmt.name} has {len(fmt.bpp)} planes, got {len(given)} strides")
    out = []
    for p, bpp in enumerate(fmt.bpp):
        pre = _pre(fmt, p, x_offset)
        need = pre + width * bpp
        ls = given[p]
        if ls is None:
            ls = -(-need // 32) * 32
        else:
            ls = int(ls)
            if ls % 32 or ls < need:
                raise LayoutError(f"line_stride: {ls} bytes for plane {p} of {fmt.name} must be a multiple of 32 and "
                                  f">= {need} (x offset bytes + W * {bpp}; docs/nvdla.md §4.4, 15)")
        out.append(ls)
    return tuple(out)


def _pre(fmt: PixelFormat, plane: int, x_offset: int) -> int:
    return x_offset * fmt.bpp[0] if plane == 0 else (x_offset * fmt.bpp[plane]) % 32


def _components(img, fmt: PixelFormat) -> np.ndarray:
    """Validate an image and return it as ``(H, W, comps)`` element containers (``(H, W, 3)``
    for an X format given three): 1- or 2-byte integers as given, float16 bits as uint16,
    C-contiguous uint16 for 10-bit formats."""
    arr = little_endian(img if type(img) is np.ndarray else np.asarray(img))
    if arr.ndim == 2 and fmt.comps == 1:
        arr = arr[:, :, None]
    # X formats take (H, W, 3) as it is: the line kernel writes X as 0 (all of them are 8- or
    # 16-bit single-plane formats).
    x3 = arr.ndim == 3 and fmt.has_x and arr.shape[2] == 3
    if not x3 and (arr.ndim != 3 or arr.shape[2] != fmt.comps):
        raise LayoutError(f"img: {fmt.name} takes (H, W, {fmt.comps})" + (" or (H, W)" if fmt.comps == 1 else "") +
                          (" or (H, W, 3)" if fmt.has_x else "") + f" with components in c0..c3 order, got shape "
                          f"{arr.shape} (docs/nvdla.md §4.1)")
    if min(arr.shape[:2]) < 1:
        raise LayoutError(f"img: H and W must be >= 1, got {arr.shape}")
    kind = fmt.kind
    # dtype.char tests: comparing with NumPy scalar types costs a dtype conversion per call.
    if kind == "8bit":
        if arr.dtype.char not in "Bb":
            raise TypeError(f"img: {fmt.name} stores 8-bit components; pass uint8 or int8, got {arr.dtype}")
        return arr
    if kind == "16bit":
        if arr.dtype.char not in "Hh":
            raise TypeError(f"img: {fmt.name} stores 16-bit containers; pass uint16 or int16, got {arr.dtype}")
        return arr
    if kind == "fp16":
        if arr.dtype.kind != "f":
            raise TypeError(f"img: {fmt.name} is fp16; pass float16 or float32, got {arr.dtype}")
        return to_fp16(arr, saturate=False).view(np.uint16)
    # 10-bit: values are range-checked while packing (see _words); other dtypes are checked here.
    if arr.dtype.kind not in "iu":
        raise TypeError(f"img: {fmt.name} takes integer components (0-1023, alpha 0-3), got {arr.dtype}")
    if arr.dtype != np.uint16:
        _check_10bit(arr, fmt)  # before the cast to uint16 wraps a negative or large value
        arr = arr.astype(np.uint16)
    return np.ascontiguousarray(arr)


def _check_10bit(arr: np.ndarray, fmt: PixelFormat) -> None:
    """ValueError unless the ``(H, W, 4)`` components fit the 10-bit word: colour 0-1023, alpha 0-3."""
    if arr.min() < 0 or arr[..., :3].max() > 1023 or arr[..., 3].max() > 3:
        raise ValueError(f"img: {fmt.name} colour components must be in 0-1023, alpha in 0-3 (docs/nvdla.md §4.3)")


def _words(comps: np.ndarray, fmt: PixelFormat, words: Optional[np.ndarray] = None) -> np.ndarray:
    """10-bit formats: the ``(H, W, 4)`` uint16 components as one little-endian word per pixel,
    ``(H, W, 1)`` uint32, written into ``words`` (``H * W`` uint32) when given. Raises ValueError
    naming the first pixel out of range."""
    h, w = comps.shape[:2]
    if words is None:
        words = np.empty(h * w, dtype=np.uint32)
    bad = _core.pack_10bit(comps.reshape(-1), words, list(fmt.shifts))
    if bad >= 0:
        y, x = divmod(int(bad), w)
        raise ValueError(f"img: {fmt.name} pixel ({y}, {x}) = {comps[y, x].tolist()}: colour components must be in "
                         "0-1023 and alpha in 0-3 (docs/nvdla.md §4.3)")
    return words.reshape(h, w, 1)


@gate("img")
def pack_pixels(img, pixel_format, *, line_stride=None, x_offset: int = 0, out=None) -> PixelPlanes:
    """Lay an image out in an NVDLA pixel format (docs/nvdla.md §4).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    img : array_like, (H, W, comps) with components c0..c3 = R/Y, G/U, B/V, A/X
        ``(H, W)`` for 1-component formats, ``(H, W, 3)`` for X formats (X = 0). uint8/int8 for
        8-bit formats, uint16/int16 for 16-bit containers (10/12-bit values stored as given),
        float16/float32 for fp16 formats (converted with :func:`to_fp16`, nearest even), any
        integer type for 10-bit packed formats (colour 0-1023, alpha 0-3). Not modified.
    pixel_format : str
        A name of :data:`PIXEL_FORMATS` ("T_A8B8G8R8", "T_Y8___U8V8_N444", ...).
    line_stride : int or tuple of int, optional, bytes
        Per plane; default ``roundup(pre + W * bpp, 32)``.
    x_offset : int
        Redundant pixels before the first one (0 .. 32 // bpp - 1).
    out : tuple of numpy.ndarray of uint8, optional
        One writable C-contiguous buffer per plane, each at least ``H * line_stride`` bytes; the
        planes are written (padding included) to their first ``H * line_stride`` bytes. Shapes,
        dtypes and sizes are checked before anything is written; a 10-bit value out of range is
        found while packing, so after that ValueError the buffers' contents are unspecified.

    Returns
    -------
    PixelPlanes
        ``planes``: one uint8 array per plane of ``H * line_stride`` bytes, little-endian
        components in the format's memory order, every padding byte zero; ``line_strides``.

    Raises
    ------
    LayoutError
        Wrong component count or ndim, x offset out of range, bad line stride; an ``out`` with the
        wrong number of buffers, one too small, read-only or not C-contiguous, one that overlaps
        ``img``, or two planes that overlap each other.
    TypeError
        A dtype the format does not take; an ``out`` buffer that is not a uint8 ndarray.
    ValueError
        Unknown format; 10-bit values out of range.
    """
    # An image geometry packed before with the default line strides: the cached plan packs at
    # once (the format, shape, dtype and x offset passed their checks for it).
    key = (img.shape, img.dtype, pixel_format, x_offset) if (
        type(img) is np.ndarray and type(pixel_format) is str and line_stride is None
        and type(x_offset) is int) else None
    plan = _PLANS.get(key) if key is not None else None
    if plan is not None:
        return plan.pack(img, out)
    fmt = _format(pixel_format)
    comps = _components(img, fmt)
    h, w = comps.shape[:2]
    plan = _PixelPlan(fmt, h, w, pixel_line_strides(fmt, w, x_offset=x_offset, line_stride=line_stride),
                      int(x_offset))
    if fmt.kind in ("8bit", "16bit") and (comps is img or (img.ndim == 2 and comps.base is img)):
        remember(_PLANS, key, plan, _MAX_PLANS)  # packed as given: no conversion to redo
    return plan.pack(comps, out)


# Plans of pack_pixels by (shape, dtype, format name, x offset) (docs/design.md §5.4): a camera
# pipeline packs frames of one geometry, and the checks cost more than a small frame's lines.
_PLANS: dict = {}
_MAX_PLANS = 512


class _PixelPlan:
    """One checked image geometry: the format, its line strides and plane sizes (docs/nvdla.md §4.4)."""

    __slots__ = ("fmt", "strides", "sizes", "pre", "shape", "x_offset")

    def __init__(self, fmt: PixelFormat, h: int, w: int, strides: tuple, x_offset: int):
        self.fmt, self.strides, self.x_offset = fmt, strides, x_offset
        self.sizes = tuple(h * ls for ls in strides)
        self.pre = tuple(_pre(fmt, p, x_offset) for p in range(len(strides)))
        self.shape = (h, w, fmt.comps)

    def pack(self, comps: np.ndarray, out) -> PixelPlanes:
        """Packs the validated components ``(H, W, comps)`` (``(H, W, 3)`` for an X format given
        three: X written as 0) into ``out`` or new planes."""
        fmt, strides, sizes, pre = self.fmt, self.strides, self.sizes, self.pre
        if comps.ndim == 2:  # (H, W) of a 1-component format
            comps = comps[:, :, None]
        if out is None:
            bufs = [np.empty(n, np.uint8) for n in sizes]
        elif type(out) is np.ndarray and len(sizes) == 1:  # one plane into one array: the common call
            buf = check_out(out, sizes[0])
            bufs = [buf if buf.size == sizes[0] else buf[:sizes[0]]]
        else:
            out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out) != len(sizes):
                raise LayoutError(f"out: {fmt.name} has {len(sizes)} planes, got {len(out)} buffers")
            bufs = [check_out(o, n)[:n] for o, n in zip(out, sizes)]
            if len(bufs) == 2 and _MAY_SHARE(bufs[0], bufs[1]):
                raise LayoutError(f"out: the two planes of {fmt.name} overlap; each plane needs its own bytes")
        if len(sizes) == 2:
            # Semi-planar: one C++ pass splits the triples straight into both planes.
            _core.split_yuv444(np.ascontiguousarray(comps), bufs[0], strides[0], pre[0], bufs[1], strides[1], pre[1],
                               fmt.planes[1][0] == B)
        else:
            buf = bufs[0]
            if fmt.kind == "10bit":
                if pre[0] == 0 and strides[0] == 4 * self.shape[1] and buf.ctypes.data % 4 == 0:
                    # Lines without padding: the words are the plane.
                    _words(comps, fmt, buf.view(np.uint32))
                    return PixelPlanes._fast(tuple(bufs), strides, fmt.name, self.shape, self.x_offset)
                comps = _words(comps, fmt)
            order = fmt.line_order_no_x if fmt.has_x and comps.shape[2] == 3 else fmt.line_order
            _core.pack_pixel_lines(np.ascontiguousarray(comps), order, buf, strides[0], pre[0])
        return PixelPlanes._fast(tuple(bufs), strides, fmt.name, self.shape, self.x_offset)


@gate("planes")
def unpack_pixels(planes, pixel_format, shape, *, line_stride=None, x_offset: int = 0) -> np.ndarray:
    """Read an image back from its NVDLA pixel planes: the inverse of :func:`pack_pixels`
    (docs/nvdla.md §4).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    planes : PixelPlanes or sequence of uint8 arrays / bytes
        One buffer per plane, each at least ``H * line_stride`` bytes; padding bytes are ignored.
        A PixelPlanes also supplies the line strides.
    pixel_format : str
        A name of :data:`PIXEL_FORMATS`.
    shape : (H, W) or (H, W, comps)
        The image size in pixels (a third entry is ignored).
    line_stride : int or tuple of int, optional, bytes
        As for :func:`pack_pixels`; taken from ``planes`` when it is a PixelPlanes.
    x_offset : int
        Redundant pixels before the first one, as packed.

    Returns
    -------
    numpy.ndarray, (H, W, comps), components c0..c3
        uint8 for 8-bit formats, uint16 for 16-bit containers and 10-bit formats (the 10-bit
        values, alpha 0-3), float16 for fp16 formats; X components read back as stored (0).

    Raises
    ------
    LayoutError
        A wrong plane count, a plane shorter than ``H * line_stride``, a ``shape`` that is not
        (H, W) or (H, W, comps) with H, W >= 1, a bad line stride or x offset.
    TypeError
        A plane that is not uint8 bytes; a ``shape`` that is not a sequence of integers.
    ValueError
        Unknown format.
    """
    fmt = _format(pixel_format)
    if isinstance(planes, PixelPlanes):
        line_stride = planes.line_strides if line_stride is None else line_stride
        planes = planes.planes
    dims = check_dims(shape, "shape")
    if len(dims) not in (2, 3):
        raise LayoutError(f"shape: expected (H, W) or (H, W, comps), got {dims}")
    h, w = dims[:2]
    strides = pixel_line_strides(fmt, w, x_offset=x_offset, line_stride=line_stride)
    if len(planes) != len(fmt.planes):
        raise LayoutError(f"planes: {fmt.name} has {len(fmt.planes)} planes, got {len(planes)}")
    elem = _DTYPE[fmt.kind]
    data = [as_byte_buffer(pl, f"planes[{p}]") for p, pl in enumerate(planes)]
    for p, d in enumerate(data):
        if d.size < h * strides[p]:
            raise LayoutError(f"planes[{p}]: holds {d.size} bytes, {fmt.name} needs H * line_stride = "
                              f"{h * strides[p]}")
    if len(fmt.planes) == 1:
        vals = np.empty((h, w, len(fmt.line_order)), dtype=elem)
        _core.unpack_pixel_lines(data[0], fmt.line_order, vals, strides[0], _pre(fmt, 0, x_offset))
        if fmt.kind == "10bit":
            out = np.empty((h, w, fmt.comps), dtype=np.uint16)
            _core.unpack_10bit(vals.reshape(-1), out.reshape(-1), list(fmt.shifts))
            return out
        return vals.view(np.float16) if fmt.kind == "fp16" else vals
    out = np.empty((h, w, fmt.comps), dtype=elem)
    for p, order in enumerate(fmt.planes):
        vals = np.empty((h, w, len(order)), dtype=elem)
        _core.unpack_pixel_lines(data[p], list(range(len(order))), vals, strides[p], _pre(fmt, p, x_offset))
        out[:, :, list(order)] = vals
    return out


def _register(value, name: str, lo: int, hi: int, what: str, per_component: bool = False) -> np.ndarray:
    """A CVT register value (or, with ``per_component``, a 1-D sequence of them) as int64: an
    integer in [lo, hi]. A float such as 2.5 is an error, not a truncation: the hardware field
    holds integers."""
    v = np.asarray(value)
    if v.dtype.kind not in "iu" or v.ndim > (1 if per_component else 0):
        shape = "an integer or one integer per component" if per_component else "an integer"
        raise TypeError(f"{name}: expected {shape}, got {value!r}")
    if v.size and (v.min() < lo or v.max() > hi):
        raise ValueError(f"{name}: must be in {lo}..{hi} ({what}), got {value!r}")
    return v.astype(np.int64)


@gate("img")
def convert_pixel_precision(img, pixel_format, precision: str, *, cvt: bool = True, offset=0, scale=1,
                            truncate: int = 0, sign_override: bool = False) -> np.ndarray:
    """The image DMA's precision conversion (docs/nvdla.md §4.5).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    ``img`` is ``(H, W, comps)`` as :func:`unpack_pixels` returns it (10-bit formats: the 10-bit
    values; they are widened ``<< 6``, alpha ``<< 14``). With ``cvt``: ``y = round_half_away(
    (v - offset[c]) * scale / 2**truncate)``, saturated to 17 bits, then to int8/int16, or rounded
    to fp16 (nearest even, +-inf from 65520). ``offset`` is a scalar or one value per component;
    ``v`` is unsigned unless ``sign_override``. Without ``cvt`` the raw container passes through
    (8 -> int8 bits, 8 -> int16 sign-extended, 16 -> int16, 16 -> int8 low byte). fp16 formats
    convert to fp16 only. Returns int8, int16 or float16 of the same shape.

    Raises ValueError for an unknown precision, a register value out of range (``offset`` and
    ``scale`` int16, ``truncate`` 0..63; docs/nvdla.md §4.5) or 10-bit components out of range
    (colour 0-1023, alpha 0-3), TypeError for a register value that is not an integer (or, for
    ``offset``, one integer per component), for a ``cvt`` or ``sign_override`` that is not a
    bool and for an ``img`` element type the format does not store (as :func:`pack_pixels`:
    uint8/int8 for 8-bit, uint16/int16 for 16-bit, a float type for fp16, integers for 10-bit
    formats), LayoutError for an ``img`` that is not ``(H, W, comps)`` (``(H, W)`` for one
    component, ``(H, W, 3)`` for X formats) with H, W >= 1, UnsupportedError for a precision
    pair the hardware lacks.
    """
    cvt, sign_override = check_bool(cvt, "cvt"), check_bool(sign_override, "sign_override")
    fmt = _format(pixel_format)
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {PRECISIONS}")
    # The shape and element type checks of pack_pixels: a float image for an integer format
    # would otherwise be truncated, and uint16 values in an 8-bit format masked, silently.
    _components(img, fmt)
    arr = np.asarray(img)
    if fmt.kind == "10bit" and arr.dtype == np.uint16:  # other types were range-checked by _components
        _check_10bit(arr, fmt)  # pack_pixels leaves uint16 to the packing kernel's check
    if fmt.kind == "fp16":
        if precision != "fp16":
            raise UnsupportedError(f"precision: an fp16 image ({fmt.name}) converts to fp16 only (docs/nvdla.md §4.5, 13)")
        return arr.astype(np.float16) if arr.dtype != np.float16 else arr.copy()
    truncate = int(_register(truncate, "truncate", 0, 63, "6-bit register"))
    scale = int(_register(scale, "scale", -32768, 32767, "int16 register D_CVT_SCALE"))
    if fmt.kind == "10bit":
        widen = np.array([6, 6, 6, 14][: arr.shape[-1]], dtype=np.int64)
        p = arr.astype(np.int64) << widen
        bits = 16
    else:
        bits = 8 if fmt.kind == "8bit" else 16
        p = arr.astype(np.int64) & ((1 << bits) - 1)
    if not cvt:
        if precision == "fp16":
            raise UnsupportedError("precision: without CVT integer pixels cannot become fp16 (docs/nvdla.md §4.5)")
        if bits == 8:
            raw = p.astype(np.uint8).view(np.int8)
            return raw if precision == "int8" else raw.astype(np.int16)
        raw = p.astype(np.uint16).view(np.int16)
        return raw if precision == "int16" else (p & 0xFF).astype(np.uint8).view(np.int8)
    v = np.where(p >= (1 << (bits - 1)), p - (1 << bits), p) if sign_override else p
    off = _register(offset, "offset", -32768, 32767, "int16 registers D_CVT_OFFSET / D_MEAN_*", per_component=True)
    if off.ndim and off.size != arr.shape[-1]:
        raise ValueError(f"offset: a scalar or one value per component ({arr.shape[-1]}), got {off.size}")
    t = (v - off) * scale
    if truncate:
        half = 1 << (truncate - 1)
        y = np.sign(t) * ((np.abs(t) + half) >> truncate)
    else:
        y = t
    y = np.clip(y, -65536, 65535)
    if precision == "int8":
        return np.clip(y, -128, 127).astype(np.int8)
    if precision == "int16":
        return np.clip(y, -32768, 32767).astype(np.int16)
    return to_fp16(y.astype(np.float64), saturate=False)
