"""What every NVDLA weight kind shares (docs/nvdla.md §5): the ``WeightSurfaces`` result, shape and
option checks, the DC mapping descriptor (DC, grouped, image without post-extension and each
deconvolution set use it), and writing a surface: zero tail, or sparse compression (docs/nvdla.md §11).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Optional

import numpy as np

from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import BlockedLayout, Dim, check_dims, check_int, is_int, result_buffer
from npupack.nvdla.config import NV_FULL, Config, check_config, element_size
from npupack.nvdla.convert import _TARGET_DTYPE

__all__ = ["WeightSurfaces", "dc_layout"]

COMPRESS_MODES = (False, True, "auto")


@dataclass(frozen=True, eq=False)
class WeightSurfaces:
    """Packed weights of one layer, or of one deconvolution set (docs/nvdla.md §5.4). Immutable;
    compared by identity (compare the ``weight`` arrays to compare bytes).

    Attributes
    ----------
    weight : numpy.ndarray
        uint8. Uncompressed: the weight surface including its zero tail (``surface_bytes``).
        Compressed: the DATA surface (non-zero elements, zero-padded to 128 bytes).
    wmb, wgs : numpy.ndarray or None
        Compressed weights: the weight mask bits and the per-kernel-group byte counts (uint8
        surfaces, each a multiple of 128 bytes); None when uncompressed.
    kind, precision : str
        ``"dc"``, ``"image"``, ``"winograd"`` or ``"deconv"``; ``"int8"``, ``"int16"`` or ``"fp16"``.
    shape : tuple
        Logical input shape: ``(K, C, R, S)`` (grouped: ``(K, C/groups, R, S)``; deconvolution:
        ONNX ``(C_in, K_out, R, S)``).
    packed_shape : tuple
        ``(K', C', R', S')`` of the mapped tensor (docs/nvdla.md §5.4 table).
    kernel_groups : int
        ``ceil(K' / kpg)``.
    bytes_per_kernel : int
        ``C' * R' * S' * es`` bytes (register BYTE_PER_KERNEL + 1).
    meaningful_bytes : int
        ``K' * bytes_per_kernel``: the mapped stream without tail, before compression.
    config : Config
        The configuration packed for (needed to unpack).
    groups : int
        Convolution groups of the logical weights.
    post_extension : int
        1, 2 or 4 (image-input weights); 1 otherwise.
    phase, stride : tuple or None
        Deconvolution: the set's ``(y, x)`` stride phase and the layer's ``(sy, sx)``;
        Winograd: ``stride`` is the convolution stride used for channel extension.
    pixel_format : str or None
        Image-input weights: the pixel format they were extended for.
    nonzero : int or None
        Compressed weights: non-zero elements of the stream.
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
    stride: Optional[tuple] = None
    pixel_format: Optional[str] = None
    nonzero: Optional[int] = None

    @classmethod
    def _fast(cls, **fields) -> "WeightSurfaces":
        # The generated frozen __init__ makes one object.__setattr__ per field, a large share of a
        # small layer's packing time. Fields are filled directly; defaults come from the class.
        # Instances stay frozen for callers.
        obj = object.__new__(cls)
        obj.__dict__.update(fields)
        return obj

    @classmethod
    def _with_weight(cls, fields: dict, weight: np.ndarray) -> "WeightSurfaces":
        # _fast for a cached set of fields plus the surface (DC plans).
        obj = object.__new__(cls)
        d = obj.__dict__
        d.update(fields)
        d["weight"] = weight
        return obj

    @property
    def compressed(self) -> bool:
        """True when ``weight`` is a compressed DATA surface with ``wmb`` and ``wgs``."""
        return self.wmb is not None

    @property
    def encoding(self) -> str:
        """``"compressed"`` or ``"uncompressed"`` (the weight format register flag)."""
        return "compressed" if self.wmb is not None else "uncompressed"

    @property
    def surface_bytes(self) -> int:
        """Bytes of the weight (or DATA) surface."""
        return int(self.weight.size)

    @property
    def total_bytes(self) -> int:
        """Bytes of all surfaces: weight (or DATA) + WMB + WGS."""
        extra = 0 if self.wmb is None else int(self.wmb.size) + int(self.wgs.size)
        return int(self.weight.size) + extra

    @property
    def alignment(self) -> int:
        """Size alignment of the weight surface, bytes (docs/nvdla.md §5.3; compressed: 128)."""
        if self.wmb is not None:
            return 128
        return max(128, self.config.weight_size_alignment) if self.kind == "winograd" \
            else self.config.weight_size_alignment

    @property
    def kernel_group_elements(self) -> int:
        """Elements of a full kernel group in the stream (``kpg * bytes_per_kernel / es``)."""
        return self.config.kernels_per_group(self.precision) * self.bytes_per_kernel // element_size(self.precision)


def kcrs(shape, name: str) -> tuple[int, int, int, int]:
    """``shape`` as four ints >= 1, else LayoutError / TypeError naming ``name``."""
    if type(shape) is tuple and len(shape) == 4:  # an ndarray's shape: checked in a fraction of the time
        k, c, r, s = shape
        if type(k) is int and type(c) is int and type(r) is int and type(s) is int and min(shape) >= 1:
            return shape
    shape = tuple(shape)
    if len(shape) != 4:
        raise LayoutError(f"{name}: expected weights (K, C, R, S), got {len(shape)} dimensions {shape}")
    return check_dims(shape, name, " (docs/nvdla.md §5.1)")


def roundup(n: int, a: int) -> int:
    return -(-n // a) * a


def check_stride(stride) -> tuple[int, int]:
    """``(stride_y, stride_x)`` as two ints >= 1."""
    try:
        sy, sx = stride
    except (TypeError, ValueError):
        raise TypeError(f"stride: expected (stride_y, stride_x), got {stride!r}") from None
    if not (is_int(sy) and is_int(sx)):
        raise TypeError(f"stride: expected two integers, got {stride!r}")
    if sy < 1 or sx < 1:
        raise LayoutError(f"stride: must be >= 1, got {stride!r}")
    return int(sy), int(sx)


def check_compress(compress, config: Config):
    """The effective mode: False, True or "auto" ("auto" on a config without compression is
    False; True there is an UnsupportedError; docs/nvdla.md §11.2)."""
    if not any(compress is m or (isinstance(m, str) and compress == m) for m in COMPRESS_MODES):
        raise ValueError(f"compress: expected False, True or 'auto', got {compress!r} (docs/nvdla.md §11.2)")
    if compress is True and not config.compression:
        raise UnsupportedError(f"compress: config {config.name!r} has no sparse weight compression "
                               "(docs/nvdla.md §11; NV_FULL has it)")
    if compress == "auto" and not config.compression:
        return False
    return compress


_SINGLE_GROUP = {"image": ("image-input", "7.1"), "winograd": ("Winograd", "9.1"), "deconv": ("deconvolution", "10.1")}


def check_single_group(groups, kind: str) -> None:
    """The kinds without grouped weights take ``groups`` 1 (an integer: True is not a count)."""
    if check_int(groups, "groups") != 1:
        name, section = _SINGLE_GROUP[kind]
        raise UnsupportedError(f"groups: {name} weights take groups=1 (docs/nvdla.md {section})")


def check_no_pixel_format(pixel_format) -> None:
    if pixel_format is not None:
        raise UnsupportedError("pixel_format: only image-input weights (kind='image') take a pixel format")


def check_unit_scale(scale, kind: str) -> None:
    if isinstance(scale, (bool, np.bool_)) or scale != 1.0:
        raise ValueError(f"scale: {scale!r}; a scale other than 1.0 is only for int8/int16 Winograd weights, "
                         f"not {kind!r} (docs/nvdla.md §5.1)")


def dc_layout(packed_shape, precision: str, config: Config = NV_FULL) -> BlockedLayout:
    """The engine descriptor of DC weights ``(K, C, R, S)`` (dense, i.e. after grouped
    densification): ragged K tiles of ``kpg`` and C tiles of ``cb``, nest ``K/kpg, C/cb, R, S,
    kpg, cb`` (docs/nvdla.md §6.1). Its ``nbytes`` is the meaningful byte count (no tail).
    Descriptors are immutable and cached: compilers call this per layer. Raises LayoutError for
    a shape that is not 4 dims >= 1, ValueError for an unknown precision, TypeError for a
    ``config`` that is not a Config."""
    check_config(config)
    return _dc_layout(kcrs(packed_shape, "shape"), precision, config)


@lru_cache(maxsize=4096)
def _dc_layout(shape, precision: str, config: Config) -> BlockedLayout:
    k, c, r, s = shape
    return BlockedLayout(
        [Dim("K", k, (config.kernels_per_group(precision),), ragged=True),
         Dim("C", c, (config.channels_per_block,), ragged=True), Dim("R", r), Dim("S", s)],
        [("K", 0), ("C", 0), ("R", 0), ("S", 0), ("K", 1), ("C", 1)],
        _TARGET_DTYPE[precision])


def write_surfaces(write: Callable[[np.ndarray], None], meaningful: int, *, precision: str, config: Config,
                   kernel_group_elements: int, compress, tail: int, out) -> dict:
    """Run ``write(buf)`` (which fills ``buf[:meaningful]`` with the mapped stream) and return the
    surface fields ``weight``, ``wmb``, ``wgs``, ``nonzero``: uncompressed with a zero tail up to
    ``tail`` bytes (docs/nvdla.md §5.3), or compressed (docs/nvdla.md §11) when ``compress`` (already checked
    by :func:`check_compress`) asks for it. ``out`` receives the weight / DATA surface."""
    from npupack.nvdla.sparse import encode_stream

    surface = roundup(meaningful, tail)
    if compress is False:
        buf = result_buffer(out, surface)
        write(buf)
        if surface > meaningful:
            buf[meaningful:] = 0
        return dict(weight=buf)
    stream = np.empty(meaningful, dtype=np.uint8)
    write(stream)
    return encode_stream(stream, es=element_size(precision), kernel_group_elements=kernel_group_elements,
                         mode=compress, uncompressed_bytes=surface, out=out)
