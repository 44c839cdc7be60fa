"""NVDLA weights: the common entry point and direct-convolution (DC) weights, including grouped
convolution (spec nvdla.md sections 5, 6 and 7; seed "Weight Format", "Basic Weight for Direct
Convolution").

DC order: kernel groups of ``kpg`` kernels (the last one short, not padded), inside each group
channel blocks of ``cb`` channels (the last one short, not padded), inside each block ``r``, ``s``,
then the group's kernels, then the block's channels (fastest)::

    for k0 in K groups: for c0 in C blocks: for r: for s: for k in group: for c in block: emit w[k][c][r][s]

On the engine this is dims K (one ragged tile of kpg), C (one ragged tile of cb), R, S with the
nest ``K/kpg, C/cb, R, S, kpg, cb``. The surface is then zero-padded to
``config.weight_size_alignment`` bytes (spec 5.3).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

import numpy as np

from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import BlockedLayout, Dim, as_byte_buffer, check_out
from npupack.nvdla.config import NV_FULL, Config, element_size
from npupack.nvdla.convert import _TARGET_DTYPE, _check_rounding, convert_elements, infer_precision

__all__ = ["WeightSurfaces", "pack_weights", "unpack_weights", "weights_nbytes", "dc_layout", "post_extension_factor"]

_KINDS = ("dc", "image", "winograd", "deconv")


@dataclass(frozen=True, eq=False)
class WeightSurfaces:
    """Packed weights of one layer (nvdla.md 5.4). Immutable; compared by identity (compare the
    ``weight`` arrays to compare bytes).

    Attributes
    ----------
    weight : numpy.ndarray
        uint8, the weight surface including its zero tail (``surface_bytes`` bytes).
    wmb, wgs : numpy.ndarray or None
        Compressed-weight mask and group sizes; None when uncompressed.
    kind, precision : str
        ``"dc"``; ``"int8"``, ``"int16"`` or ``"fp16"``.
    shape : tuple
        Logical input shape ``(K, C, R, S)`` (grouped: ``(K, C/groups, R, S)``).
    packed_shape : tuple
        ``(K', C', R', S')`` of the mapped tensor (grouped: C' = total input channels).
    kernel_groups : int
        ``ceil(K' / kpg)``.
    bytes_per_kernel : int
        ``C' * R' * S' * es`` bytes (register BYTE_PER_KERNEL + 1).
    meaningful_bytes : int
        ``K' * bytes_per_kernel``: the mapped stream without tail.
    post_extension : int
        1, 2 or 4 (image-input weights); 1 for DC weights.
    groups : int
        Convolution groups of the logical weights.
    config : Config
        The configuration packed for (needed to unpack).
    phase : tuple or None
        Deconvolution stride phase; None otherwise.
    pixel_format : str or None
        Image-input weights: the pixel format they were extended for.
    """

    weight: np.ndarray
    kind: str
    precision: str
    shape: tuple
    packed_shape: tuple
    kernel_groups: int
    bytes_per_kernel: int
    meaningful_bytes: int
    config: Config = field(repr=False)
    groups: int = 1
    post_extension: int = 1
    wmb: Optional[np.ndarray] = None
    wgs: Optional[np.ndarray] = None
    phase: Optional[tuple] = None
    pixel_format: Optional[str] = None

    @classmethod
    def _fast(cls, **fields) -> "WeightSurfaces":
        # The generated frozen __init__ costs ~3 us (one object.__setattr__ per field), a third
        # of a small layer's packing time. Fields are filled directly; defaults come from the
        # class. Instances stay frozen for callers.
        obj = object.__new__(cls)
        obj.__dict__.update(fields)
        return obj

    @property
    def surface_bytes(self) -> int:
        """Bytes of the weight surface (meaningful bytes rounded up to the tail alignment)."""
        return int(self.weight.size)

    @property
    def alignment(self) -> int:
        """Size alignment of the weight surface, bytes."""
        return self.config.weight_size_alignment


def _kcrs(shape, name: str) -> tuple[int, int, int, int]:
    shape = tuple(shape)
    if len(shape) != 4:
        raise LayoutError(f"{name}: expected weights (K, C, R, S), got {len(shape)} dimensions {shape}")
    for v in shape:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name}: dimensions must be integers, got {shape}")
        if v < 1:
            raise LayoutError(f"{name}: every dimension must be >= 1, got {shape} (nvdla.md 5.1)")
    return tuple(int(v) for v in shape)


def _check_groups(groups, k: int) -> int:
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"groups: expected an integer, got {groups!r}")
    if groups < 1:
        raise LayoutError(f"groups: must be >= 1, got {groups}")
    if k % groups:
        raise LayoutError(f"groups: K = {k} is not divisible by groups = {groups} (nvdla.md 7.1)")
    return int(groups)


def dc_layout(packed_shape, precision: str, config: Config = NV_FULL) -> BlockedLayout:
    """The engine descriptor of DC weights ``(K, C, R, S)`` (dense, i.e. after grouped
    densification): ragged K tiles of ``kpg`` and C tiles of ``cb``, nest ``K/kpg, C/cb, R, S,
    kpg, cb`` (nvdla.md 6.1). Its ``nbytes`` is the meaningful byte count (no tail).
    Descriptors are immutable and cached: compilers call this per layer. Raises LayoutError for
    a shape that is not 4 dims >= 1, ValueError for an unknown precision."""
    return _dc_layout(_kcrs(packed_shape, "shape"), precision, config)


@lru_cache(maxsize=4096)
def _dc_layout(kcrs, precision: str, config: Config) -> BlockedLayout:
    k, c, r, s = kcrs
    return BlockedLayout(
        [Dim("K", k, (config.kernels_per_group(precision),), ragged=True),
         Dim("C", c, (config.channels_per_block,), ragged=True), Dim("R", r), Dim("S", s)],
        [("K", 0), ("C", 0), ("R", 0), ("S", 0), ("K", 1), ("C", 1)],
        _TARGET_DTYPE[precision])


def _roundup(n: int, a: int) -> int:
    return -(-n // a) * a


def weights_nbytes(shape, *, precision: str, config: Config = NV_FULL, groups: int = 1, kind: str = "dc") -> int:
    """Size in bytes of the weight surface ``pack_weights`` would produce, without packing.

    ``shape`` is the logical ``(K, C, R, S)`` (grouped: ``(K, C/groups, R, S)``). The result is
    ``roundup(K * C_total * R * S * es, config.weight_size_alignment)`` (nvdla.md 5.3).
    Raises LayoutError / UnsupportedError as :func:`pack_weights`.
    """
    _check_kind(kind)
    config.require_precision(precision)
    k, c, r, s = _kcrs(shape, "shape")
    g = _check_groups(groups, k)
    meaningful = k * c * g * r * s * element_size(precision)
    if meaningful >= 2**63:
        raise LayoutError(f"shape {tuple(shape)}: the packed size overflows 64 bits")
    return _roundup(meaningful, config.weight_size_alignment)


def _check_kind(kind: str) -> None:
    if kind not in _KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {_KINDS} (nvdla.md 5.1)")
    if kind not in ("dc", "image"):
        raise UnsupportedError(f"kind: {kind!r} weights are not implemented in this version of npupack; "
                               "'dc' (direct convolution, including grouped) and 'image' are")


def _densify(w: np.ndarray, groups: int) -> np.ndarray:
    """Grouped ``(K, C/G, R, S)`` -> dense ``(K, C, R, S)`` with zeros outside each group's
    channels (nvdla.md 7.1)."""
    if groups == 1:
        return w
    k, cg, r, s = w.shape
    kg = k // groups
    dense = np.zeros((groups, kg, groups, cg, r, s), dtype=w.dtype)
    g = np.arange(groups)
    dense[g, :, g] = w.reshape(groups, kg, cg, r, s)
    return dense.reshape(k, groups * cg, r, s)


def pack_weights(w, *, kind: str = "dc", precision: str | None = None, config: Config = NV_FULL,
                 groups: int = 1, stride=(1, 1), pixel_format=None, post_extension="auto",
                 compress=False, rounding: str = "nearest_even", saturate: bool = True,
                 scale: float = 1.0, allow_nan: bool = False, out=None) -> WeightSurfaces:
    """Pack convolution weights into an NVDLA weight surface (nvdla.md 5, 6, 7; seed "Basic
    Weight for Direct Convolution").

    Parameters
    ----------
    w : array_like, (K, C, R, S); grouped: (K, C/groups, R, S)
        int8, uint8, int16, uint16, float16, float32 or float64. Float weights for an int8/int16
        target must be quantised first (:func:`quantize_weights`). Any strides; not modified.
    kind : {"dc", "image"}
        Direct convolution, or image input (first layer; nvdla.md 8: channels zero-padded to the
        pixel format's count, pre-extension ``c' = s*Cdata + c``, optional post-extension).
        ("winograd" and "deconv" raise UnsupportedError in this version.)
    precision : {"int8", "int16", "fp16"}, optional
        Inferred from the dtype when omitted (int8, int16, float -> fp16); must be in
        ``config.precisions``.
    config : Config
        Hardware configuration: kernels per group, channels per block, tail alignment.
    groups : int
        Convolution groups; the weights are densified to ``(K, C, R, S)`` (nvdla.md 7.1).
    stride : (stride_y, stride_x)
        Image weights: ``stride_x`` enters the automatic post-extension choice.
    pixel_format : str
        Image weights: the input image's pixel format (required); None for DC.
    post_extension : "auto", 1, 2 or 4
        Image weights: "auto" applies nvdla/sw's rule (:func:`post_extension_factor`); 2 and 4
        are validated (C' <= mac_atomic_c // f, at least two full row groups). DC: "auto" or 1.
    compress, scale
        ``compress`` must be False and ``scale`` 1.0 in this version.
    rounding, saturate
        fp16 conversion of float input (:func:`to_fp16`).
    allow_nan : bool
        NaN in float weights is a ValueError unless True.
    out : numpy.ndarray of uint8, optional
        Writable C-contiguous buffer of at least ``surface_bytes``; the surface is written to
        its first ``surface_bytes`` bytes and ``weight`` is a view of them.

    Returns
    -------
    WeightSurfaces
        ``weight`` is uint8 of ``roundup(K*C*R*S*es, config.weight_size_alignment)`` bytes
        (C = total input channels; image: ``K*Cdata*S*R*es``), little-endian elements in DC order
        (image: post-extension order when ``post_extension`` > 1), zero tail.

    Raises
    ------
    TypeError
        Unsupported dtype; float weights for an int target; ``out`` not uint8.
    LayoutError
        ``w`` not 4-d; a dimension < 1; K not divisible by groups; ``out`` too small or
        read-only; a size that overflows.
    UnsupportedError
        A precision the config lacks; a kind or option not available for DC weights.
    ValueError
        NaN weights without ``allow_nan``; integer values that do not fit; bad ``rounding``.
    """
    if type(config) is not Config and not isinstance(config, Config):
        raise TypeError(f"config: expected an npupack.nvdla.Config, got {type(config).__name__}")
    if kind != "dc":
        _check_kind(kind)
        if kind == "image":
            return _pack_image(w, precision=precision, config=config, groups=groups, stride=stride,
                               pixel_format=pixel_format, post_extension=post_extension, compress=compress,
                               rounding=rounding, saturate=saturate, scale=scale, allow_nan=allow_nan, out=out)
    arr = w if type(w) is np.ndarray else np.asarray(w)
    if arr.ndim != 4 or 0 in arr.shape:
        _kcrs(arr.shape, "w")
    k, cg, r, s = arr.shape
    g = 1 if groups == 1 and type(groups) is int else _check_groups(groups, k)
    if not (stride == (1, 1) and pixel_format is None and post_extension == "auto" and compress is False
            and scale == 1.0):
        _check_dc_options(stride, pixel_format, post_extension, compress, scale)
    precision = infer_precision(arr.dtype, precision, config, "w")
    if rounding != "nearest_even":
        _check_rounding(rounding)

    packed_shape = (k, cg * g, r, s)
    layout = _dc_layout(packed_shape, precision, config)
    meaningful = layout.nbytes
    surface = _roundup(meaningful, config.weight_size_alignment)
    buf = check_out(out, surface)[:surface] if out is not None else np.empty(surface, dtype=np.uint8)

    elems = convert_elements(arr, precision, what="w", rounding=rounding, saturate=saturate, allow_nan=allow_nan)
    layout._pack_into(_densify(elems, g), buf)
    if surface > meaningful:
        buf[meaningful:] = 0
    es = element_size(precision)
    return WeightSurfaces._fast(
        weight=buf, kind="dc", precision=precision, shape=(k, cg, r, s), packed_shape=packed_shape,
        kernel_groups=-(-k // config.kernels_per_group(precision)), bytes_per_kernel=cg * g * r * s * es,
        meaningful_bytes=meaningful, config=config, groups=g)


def _check_common_options(stride, compress, scale) -> tuple:
    """Options every weight kind validates the same way (nvdla.md 5.1); returns (sy, sx)."""
    try:
        sy, sx = (int(v) for v in stride)
    except (TypeError, ValueError):
        raise TypeError(f"stride: expected (stride_y, stride_x), got {stride!r}") from None
    if sy < 1 or sx < 1:
        raise LayoutError(f"stride: must be >= 1, got {stride!r}")
    if compress not in (False, None):
        raise UnsupportedError("compress: sparse weight compression is not implemented in this version")
    if scale != 1.0:
        raise ValueError(f"scale: {scale!r}; a scale other than 1.0 is only for int8/int16 Winograd weights "
                         "(nvdla.md 5.1)")
    return sy, sx


def _check_dc_options(stride, pixel_format, post_extension, compress, scale) -> None:
    _check_common_options(stride, compress, scale)
    if pixel_format is not None:
        raise UnsupportedError("pixel_format: only image-input weights (kind='image') take a pixel format")
    if post_extension not in ("auto", 1):
        raise UnsupportedError(f"post_extension: {post_extension!r} is only possible for image-input weights; "
                               "DC weights take 'auto' or 1 (nvdla.md 5.1)")


def unpack_weights(surfaces: WeightSurfaces, *, logical: bool = True) -> np.ndarray:
    """Invert :func:`pack_weights` for DC weights (nvdla.md 5.5).

    Parameters
    ----------
    surfaces : WeightSurfaces
        As returned by ``pack_weights`` (``weight`` may be replaced by bytes read back from
        memory, at least ``meaningful_bytes`` long).
    logical : bool
        True: return the logical weights ``surfaces.shape`` (grouped: the ``(K, C/groups, R, S)``
        diagonal blocks); False: the dense ``packed_shape`` tensor.

    Returns
    -------
    numpy.ndarray
        int8, int16 or float16 (by ``surfaces.precision``).

    Raises
    ------
    TypeError
        ``surfaces`` is not a WeightSurfaces.
    UnsupportedError
        Compressed or non-DC surfaces.
    LayoutError
        ``weight`` shorter than ``meaningful_bytes``.
    """
    if not isinstance(surfaces, WeightSurfaces):
        raise TypeError(f"surfaces: expected WeightSurfaces, got {type(surfaces).__name__}")
    if surfaces.kind not in ("dc", "image") or surfaces.wmb is not None:
        raise UnsupportedError(f"surfaces: unpacking {surfaces.kind!r} weights is not implemented in this version")
    data = as_byte_buffer(surfaces.weight, "surfaces.weight")
    if surfaces.kind == "image":
        return _unpack_image(surfaces, data, logical)
    layout = dc_layout(surfaces.packed_shape, surfaces.precision, surfaces.config)
    if data.size < layout.nbytes:
        raise LayoutError(f"surfaces.weight: holds {data.size} bytes, {layout.nbytes} are needed")
    dense = layout.unpack(data)
    if not logical or surfaces.groups == 1:
        return dense
    k, cg = surfaces.shape[0], surfaces.shape[1]
    g = surfaces.groups
    blocks = dense.reshape(g, k // g, g, cg, *dense.shape[2:])
    idx = np.arange(g)
    return blocks[idx, :, idx].reshape(surfaces.shape)


# ---------------------------------------------------------------- image-input weights (nvdla.md 8)

def post_extension_factor(cdata: int, s: int, r: int, stride_x: int, mac_atomic_c: int) -> int:
    """nvdla/sw's automatic post-extension choice (nvdla.md 8.4): 4, 2 or 1 for a kernel of width
    ``s`` and height ``r`` on a ``cdata``-component image read at x stride ``stride_x``."""
    c_ext = cdata * s
    if stride_x > s:
        f = 1
    elif cdata * stride_x * 3 + c_ext <= mac_atomic_c and c_ext <= mac_atomic_c // 4:
        f = 4
    elif cdata * stride_x + c_ext <= mac_atomic_c and c_ext <= mac_atomic_c // 2:
        f = 2
    else:
        f = 1
    if f > 1 and (c_ext > mac_atomic_c or r // f <= 1):
        f = 1  # declined; nvdla/sw does not retry with 2
    return f


@lru_cache(maxsize=1024)
def _post_ext_layout(k: int, c_ext: int, r: int, f: int, precision: str, config: Config) -> BlockedLayout:
    """Post-extended weights (nvdla.md 8.4): kernel groups (ragged), full row groups of f rows
    (the last group short, not padded), then each kernel's f rows of C' channels."""
    return BlockedLayout(
        [Dim("K", k, (config.kernels_per_group(precision),), ragged=True), Dim("C", c_ext),
         Dim("R", r, (f,), ragged=True), Dim("S", 1)],
        [("K", 0), ("R", 0), ("K", 1), ("R", 1), ("C", 0), ("S", 0)], _TARGET_DTYPE[precision])


def _image_layout(k, c_ext, r, f, precision, config):
    return dc_layout((k, c_ext, r, 1), precision, config) if f == 1 else \
        _post_ext_layout(k, c_ext, r, f, precision, config)


def _pack_image(w, *, precision, config, groups, stride, pixel_format, post_extension, compress, rounding,
                saturate, scale, allow_nan, out) -> WeightSurfaces:
    """kind="image" of :func:`pack_weights` (nvdla.md 8)."""
    from npupack.nvdla.pixel import _format

    if not isinstance(config, Config):
        raise TypeError(f"config: expected an npupack.nvdla.Config, got {type(config).__name__}")
    if pixel_format is None:
        raise ValueError("pixel_format: image-input weights need the pixel format of the input image (nvdla.md 8.1)")
    fmt = _format(pixel_format)
    if groups != 1:
        raise UnsupportedError("groups: image-input weights take groups=1 (nvdla.md 7.1)")
    _, sx = _check_common_options(stride, compress, scale)
    arr = np.asarray(w)
    k, c, r, s = _kcrs(arr.shape, "w")
    cdata = fmt.comps
    if c > cdata:
        raise LayoutError(f"w: {c} input channels, but {fmt.name} gives the convolution only {cdata} (nvdla.md 8.1)")
    precision = infer_precision(arr.dtype, precision, config, "w")
    if fmt.kind == "fp16" and precision != "fp16":
        raise UnsupportedError(f"precision: an fp16 image ({fmt.name}) needs fp16 weights, got {precision!r} "
                               "(nvdla.md 13.1)")
    _check_rounding(rounding)
    c_ext = cdata * s
    atomic_c = config.mac_atomic_c
    if post_extension == "auto":
        f = post_extension_factor(cdata, s, r, sx, atomic_c)
    elif post_extension in (1, 2, 4) and not isinstance(post_extension, bool):
        f = int(post_extension)
        if f > 1 and c_ext > atomic_c // f:
            raise UnsupportedError(f"post_extension: {f} needs C' = Cdata*S = {c_ext} <= mac_atomic_c // {f} = "
                                   f"{atomic_c // f} (nvdla.md 8.4)")
        if f > 1 and r // f < 2:
            raise UnsupportedError(f"post_extension: {f} needs at least two full row groups, but R = {r} gives "
                                   f"{r // f} (nvdla.md 8.4)")
    else:
        raise ValueError(f"post_extension: 'auto', 1, 2 or 4, got {post_extension!r}")
    elems = convert_elements(arr, precision, what="w", rounding=rounding, saturate=saturate, allow_nan=allow_nan)
    padded = np.zeros((k, cdata, r, s), dtype=elems.dtype)
    padded[:, :c] = elems
    pre = padded.transpose(0, 3, 1, 2).reshape(k, c_ext, r, 1)  # pre[k][s*Cdata + c][r][0] (nvdla.md 8.3)
    layout = _image_layout(k, c_ext, r, f, precision, config)
    meaningful = layout.nbytes
    surface = _roundup(meaningful, config.weight_size_alignment)
    buf = check_out(out, surface)[:surface] if out is not None else np.empty(surface, dtype=np.uint8)
    layout._pack_into(pre, buf)
    if surface > meaningful:
        buf[meaningful:] = 0
    es = element_size(precision)
    return WeightSurfaces._fast(
        weight=buf, kind="image", precision=precision, shape=(k, c, r, s), packed_shape=(k, c_ext, r, 1),
        kernel_groups=-(-k // config.kernels_per_group(precision)), bytes_per_kernel=c_ext * r * es,
        meaningful_bytes=meaningful, config=config, post_extension=f, pixel_format=fmt.name)


def _unpack_image(surfaces: WeightSurfaces, data: np.ndarray, logical: bool) -> np.ndarray:
    from npupack.nvdla.pixel import _format

    k, c_ext, r, _ = surfaces.packed_shape
    layout = _image_layout(k, c_ext, r, surfaces.post_extension, surfaces.precision, surfaces.config)
    if data.size < layout.nbytes:
        raise LayoutError(f"surfaces.weight: holds {data.size} bytes, {layout.nbytes} are needed")
    pre = layout.unpack(data)
    if not logical:
        return pre
    cdata = _format(surfaces.pixel_format).comps
    k, c, r, s = surfaces.shape
    return np.ascontiguousarray(pre.reshape(k, s, cdata, r).transpose(0, 2, 3, 1)[:, :c])
