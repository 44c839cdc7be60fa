"""NVDLA weights: the common entry point ``pack_weights`` / ``unpack_weights`` for every kind, and
direct-convolution (DC) weights including grouped convolution (docs/nvdla.md §5, 6 and 7). The other kinds live in
``image_weights``, ``winograd`` and ``deconv``; compression in ``sparse``.

DC order: kernel groups of ``kpg`` kernels (the last one short, not padded), inside each group
channel blocks of ``cb`` channels (the last one short, not padded), inside each block ``r``, ``s``,
then the group's kernels, then the block's channels (fastest)::

    for k0 in K groups: for c0 in C blocks: for r: for s: for k in group: for c in block: emit w[k][c][r][s]

On the engine this is dims K (one ragged tile of kpg), C (one ragged tile of cb), R, S with the
nest ``K/kpg, C/cb, R, S, kpg, cb``. The surface is then zero-padded to
``config.weight_size_alignment`` bytes (docs/nvdla.md §5.3).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from npupack._gate import gate
from npupack.formats.aliases import registry_words
from npupack.errors import LayoutError, UnsupportedError
from npupack.layout import _BIG_ENDIAN, as_byte_buffer, check_bool, empty_lines, little_endian
from npupack.nvdla.config import NV_FULL, Config, check_config, element_size
from npupack.nvdla.convert import _TARGET_DTYPE, _check_rounding, convert_elements, infer_precision
from npupack.nvdla.dc_weights import (_DC_PLANS, _KINDS, _check_groups, _dc_plan, _DcPlan, _dense_dc_layout,
                                      _pack_dc, _plan_key, _remember, weights_nbytes)
from npupack.nvdla.deconv import pack_deconv, unpack_deconv
from npupack.nvdla.image_weights import _PLANS as _IMAGE_PLANS, pack_image, post_extension_factor, unpack_image
from npupack.nvdla.sparse import decompress_weights
from npupack.nvdla.surfaces import (WeightSurfaces, check_compress, check_no_pixel_format, check_stride,
                                    check_unit_scale, dc_layout, kcrs, write_surfaces)
from npupack.nvdla.winograd import _PLANS as _WINOGRAD_PLANS, pack_winograd, winograd_layout

__all__ = ["WeightSurfaces", "pack_weights", "pack_weights_many", "unpack_weights", "weights_nbytes", "dc_layout",
           "post_extension_factor"]

# The defaults of the options DC weights ignore, as objects: a call that leaves them out passes
# these very objects, which the cached path tells apart by identity (_default_options otherwise).
_UNIT_STRIDE = (1, 1)
_UNIT_SCALE = 1.0
_DC, _AUTO, _NEAREST_EVEN = "dc", "auto", "nearest_even"


@registry_words("nvdla.pack_weights")
@gate("w", labels={"w": "x"})
def pack_weights(w, *, kind: str = _DC, precision: str | None = None, config: Config = NV_FULL,
                 groups: int = 1, stride=_UNIT_STRIDE, pixel_format=None, post_extension=_AUTO,
                 compress=False, rounding: str = _NEAREST_EVEN, saturate: bool = True,
                 scale: float = _UNIT_SCALE, allow_nan: bool = False, out=None):
    """Pack convolution weights into NVDLA weight surfaces (docs/nvdla.md §5-11).

    An input changed by another thread during the call gives undefined values in the result, never a crash.

    Parameters
    ----------
    w : array_like
        int8, uint8, int16, uint16, float16, float32 or float64; any strides; not modified.
        ``"dc"``: ``(K, C, R, S)``, grouped ``(K, C/groups, R, S)``; ``"image"`` and
        ``"winograd"``: ``(K, C, R, S)``; ``"deconv"``: ONNX ConvTranspose order
        ``(C_in, K_out, R, S)``. Float weights for an int8/int16 target must be quantised first
        (:func:`quantize_weights`; deconvolution with ``kernel_axis=1``).
    kind : {"dc", "image", "winograd", "deconv"}
        Direct convolution (docs/nvdla.md §6, 7); image input, first layer (8: channels zero-padded to
        the pixel format's count, pre-extension ``c' = s*Cdata + c``, optional post-extension);
        Winograd (9: C padded to the atom, channel extension for strides > 1, ``G g Gᵀ`` in
        float64, 4x4x4 cubes); deconvolution (10: one surface per stride phase, kernel flipped).
    precision : {"int8", "int16", "fp16"}, optional
        Inferred from the dtype when omitted (int8, int16, float -> fp16); must be in
        ``config.precisions``.
    config : Config
        Hardware configuration: kernels per group, channels per block, atom, tail alignment,
        Winograd and compression availability.
    groups : int
        Convolution groups (DC only); the weights are densified to ``(K, C, R, S)`` (docs/nvdla.md §7.1).
    stride : (stride_y, stride_x)
        Image: ``stride_x`` enters the automatic post-extension choice. Winograd: channel
        extension (``ceil(R/sy)`` and ``ceil(S/sx)`` must be 3). Deconvolution: the set split.
    pixel_format : str
        Image weights: the input image's pixel format (required); None otherwise.
    post_extension : "auto", 1, 2 or 4
        Image weights: "auto" applies nvdla/sw's rule (:func:`post_extension_factor`); 2 and 4
        are validated. Other kinds: "auto" or 1.
    compress : False, True or "auto"
        Sparse compression (docs/nvdla.md §11): True gives DATA/WMB/WGS (UnsupportedError on a config
        without compression); "auto" compresses only when the three surfaces together are
        strictly smaller than the uncompressed surface.
    rounding : str
        fp16 targets: "nearest_even" (default) or "nearest_away" (:func:`to_fp16`). Winograd
        int8/int16: also "truncate" (nvdla/sw's cast; docs/nvdla.md §2.4).
    saturate : bool
        fp16 overflow gives +-65504 (True) or INF. Integer Winograd weights always saturate
        (``saturate=False`` is a ValueError there).
    scale : float
        Winograd int8/int16 only: ``t * scale`` is rounded (``scale=4`` keeps integer inputs
        exact); the caller compensates it. 1.0 for every other kind and precision.
    allow_nan : bool
        NaN in float weights is a ValueError unless True (Winograd: INF too).
    out : numpy.ndarray of uint8, optional
        Writable C-contiguous buffer of at least the (first) weight or DATA surface's size; the
        surface is written to its first bytes and ``weight`` is a view of them. float16
        weights are checked for NaN kernel group by kernel group while they are packed, so after
        a NaN ValueError ``out`` may hold part of a surface.

    Returns
    -------
    WeightSurfaces, or a tuple of ``sy*sx`` of them for ``"deconv"`` (set order y-major)
        ``weight`` is uint8: uncompressed ``roundup(meaningful_bytes, tail)`` bytes of
        little-endian elements with a zero tail (tail = ``config.weight_size_alignment``;
        Winograd at least 128), or the compressed DATA surface with ``wmb`` and ``wgs``.
        ``packed_shape`` is ``(K, C, R, S)`` (DC), ``(K, Cdata*S, R, 1)`` (image),
        ``(K, C_ext, 4, 4)`` (Winograd), ``(K_out, C_in, ceil(R/sy), ceil(S/sx))`` (each set).

    Raises
    ------
    TypeError
        Unsupported dtype; float weights for an int target; ``out`` not uint8; non-integer
        stride or groups; ``saturate`` or ``allow_nan`` not a bool.
    LayoutError
        ``w`` not 4-d; a dimension < 1; K not divisible by groups; ``out`` too small,
        read-only or sharing memory with ``w``; a size that overflows.
    UnsupportedError
        A precision the config lacks; Winograd or compression on a config without them; a
        Winograd kernel that does not become 3x3; a deconvolution stride above 32 on an axis
        (Rubik's 5-bit ``D_DECONV_STRIDE`` fields; the spec gives no bound); an option the
        kind does not take.
    ValueError
        NaN weights without ``allow_nan``; integer values that do not fit; bad ``rounding``,
        ``scale``, ``compress`` or ``kind``.
    """
    # A layer shape packed before, every option but the pixel format left out: the cached plan
    # packs at once (its checks passed for this shape, dtype and options). The image and Winograd
    # keys are those their plans were stored under with the default options. A big-endian dtype
    # is never a key.
    if (type(w) is np.ndarray and compress is False and type(groups) is int and type(config) is Config
            and stride is _UNIT_STRIDE and scale is _UNIT_SCALE and post_extension is _AUTO
            and saturate is True and allow_nan is False and rounding is _NEAREST_EVEN
            and (precision is None or type(precision) is str)):
        if kind is _DC:
            if pixel_format is None:
                plan = _DC_PLANS.get((w.shape, w.dtype, precision, config, groups))
                if plan is not None:
                    return plan.pack(w, out, rounding, True, False)
        elif groups == 1 and type(kind) is str:
            if kind == "image" and type(pixel_format) is str:
                run = _IMAGE_PLANS.get((w.shape, w.dtype, precision, config, _UNIT_STRIDE, pixel_format, _AUTO,
                                        _NEAREST_EVEN, True, _UNIT_SCALE, False))
            elif kind == "winograd" and pixel_format is None:
                run = _WINOGRAD_PLANS.get((w.shape, w.dtype, precision, config, _UNIT_STRIDE, _NEAREST_EVEN, True,
                                           _UNIT_SCALE, False))
            else:
                run = None
            if run is not None:
                return run(w, out)
    if type(config) is not Config:
        check_config(config)
    if type(w) is np.ndarray and w.dtype.byteorder in _BIG_ENDIAN:
        w = little_endian(w)  # the same values; the NVDLA dtypes are little-endian (docs/nvdla.md §2.1)
    if saturate is not True or allow_nan is not False:
        saturate, allow_nan = check_bool(saturate, "saturate"), check_bool(allow_nan, "allow_nan")
    if kind != "dc":
        if kind not in _KINDS:
            raise ValueError(f"kind: {kind!r} is not one of {_KINDS} (docs/nvdla.md §5.1)")
        if kind == "winograd":
            check_no_pixel_format(pixel_format)
            return pack_winograd(w, precision=precision, config=config, groups=groups, stride=stride,
                                 post_extension=post_extension, compress=compress, rounding=rounding,
                                 saturate=saturate, scale=scale, allow_nan=allow_nan, out=out)
        return (pack_image if kind == "image" else pack_deconv)(
            w, precision=precision, config=config, groups=groups, stride=stride, pixel_format=pixel_format,
            post_extension=post_extension, compress=compress, rounding=rounding, saturate=saturate, scale=scale,
            allow_nan=allow_nan, out=out)
    key = _plan_key(w, precision, config, groups) if compress is False else None
    if key is not None:
        # A shape, dtype and option set packed before: every check that does not depend on the
        # values has passed for it, so the cached plan packs at once.
        plan = _DC_PLANS.get(key)
        if plan is not None and pixel_format is None and post_extension == "auto" and (
                (stride is _UNIT_STRIDE and scale is _UNIT_SCALE) or _default_options(stride, None, "auto", scale)):
            if rounding != "nearest_even":
                _check_rounding(rounding)
            return plan.pack(w, out, rounding, saturate, allow_nan)
    arr = w if type(w) is np.ndarray else np.asarray(w)
    if arr.ndim != 4 or 0 in arr.shape:
        kcrs(arr.shape, "w")
    k, cg, r, s = arr.shape
    g = 1 if groups == 1 and type(groups) is int else _check_groups(groups, k)
    if not (compress is False and _default_options(stride, pixel_format, post_extension, scale)):
        compress = _check_dc_options(stride, pixel_format, post_extension, compress, scale, config)
    precision = infer_precision(arr.dtype, precision, config, "w")
    if rounding != "nearest_even":
        _check_rounding(rounding)

    if compress is False:
        plan = _remember(key, _DcPlan((k, cg, r, s), g, precision, config))
        return plan.pack(arr, out, rounding, saturate, allow_nan)
    layout = _dense_dc_layout((k, cg, r, s), g, precision, config)
    packed_shape = layout.shape
    meaningful = layout.nbytes
    es = element_size(precision)
    kpg = config.kernels_per_group(precision)
    elems = convert_elements(arr, precision, what="w", rounding=rounding, saturate=saturate, allow_nan=allow_nan)
    fields = write_surfaces(lambda buf: _pack_dc(layout, elems, g, kpg, config, buf), meaningful,
                            precision=precision, config=config, kernel_group_elements=kpg * cg * g * r * s,
                            compress=compress, tail=config.weight_size_alignment, out=out)
    return WeightSurfaces._fast(
        kind="dc", precision=precision, shape=(k, cg, r, s), packed_shape=packed_shape,
        kernel_groups=-(-k // kpg), bytes_per_kernel=cg * g * r * s * es,
        meaningful_bytes=meaningful, config=config, groups=g, **fields)


@registry_words("nvdla.pack_weights_many")
def pack_weights_many(weights, *, kind: str = "dc", precision: str | None = None, config: Config = NV_FULL,
                      groups=1, rounding: str = "nearest_even", saturate: bool = True, allow_nan: bool = False,
                      **options) -> list:
    """Pack many layers in one call: the batch API for compilers (docs/nvdla.md §5-7).

    For DC weights all layers are validated and converted first, then the dense ones are packed
    by one C++ call that releases the GIL once (large batches are split across threads by
    layer) and the grouped ones straight into their surfaces. Other kinds, and options only they take (``stride``,
    ``pixel_format``, ``compress``, ...), pack layer by layer through :func:`pack_weights`.

    Parameters
    ----------
    weights : sequence of array_like
        One ``(K, C, R, S)`` array per layer (grouped: ``(K, C/groups, R, S)``), any accepted
        dtype (docs/nvdla.md §2.1). Not modified.
    kind, precision, config, rounding, saturate, allow_nan, **options
        As for :func:`pack_weights`, the same for every layer (``precision=None`` infers each
        layer's from its dtype).
    groups : int or sequence of int
        Convolution groups, one for all layers or one per layer.

    Returns
    -------
    list of WeightSurfaces
        In input order; byte-identical to ``pack_weights`` of each layer.

    Raises
    ------
    TypeError, ValueError, LayoutError, UnsupportedError
        As :func:`pack_weights`; the message names the layer index. Nothing is packed when any
        layer is invalid.
    """
    items = list(weights)
    saturate, allow_nan = check_bool(saturate, "saturate"), check_bool(allow_nan, "allow_nan")
    if isinstance(groups, (int, np.integer)) and not isinstance(groups, (bool, np.bool_)):
        group_list = [groups] * len(items)
    else:
        group_list = list(groups)
        if len(group_list) != len(items):
            raise LayoutError(f"groups: {len(group_list)} values for {len(items)} layers")
    if kind != "dc" or options:
        out = []
        for i, (w, g) in enumerate(zip(items, group_list)):
            try:
                out.append(pack_weights(w, kind=kind, precision=precision, config=config, groups=g,
                                        rounding=rounding, saturate=saturate, allow_nan=allow_nan, **options))
            except (ValueError, TypeError) as e:
                raise type(e)(f"layer {i}: {e}") from e
        return out
    check_config(config)
    if rounding != "nearest_even":
        _check_rounding(rounding)
    # Each layer's shape checks and layout come from the plans pack_weights caches (a model
    # repeats a few shapes), so a batch is never slower than a loop of pack_weights.
    plans = []
    for i, (w, g) in enumerate(zip(items, group_list)):
        try:
            arr = little_endian(w if type(w) is np.ndarray else np.asarray(w))
            plan = _dc_plan(arr, precision, config, g)
            elems = convert_elements(arr, plan.precision, what="w", rounding=rounding, saturate=saturate,
                                     allow_nan=allow_nan)
        except (ValueError, TypeError) as e:
            raise type(e)(f"layer {i}: {e}") from e
        dense = plan.groups == 1
        buf = empty_lines(plan.surface) if dense else np.zeros(plan.surface, dtype=np.uint8)
        plans.append((plan, elems, buf))
    from npupack import _core

    # Dense layers in one C++ call (one GIL release, shared out to threads); grouped layers go
    # straight into their zeroed surfaces.
    _core.pack_many([(p.layout._core, elems, buf) for p, elems, buf in plans if p.groups == 1])
    for p, elems, buf in plans:
        if p.groups > 1:
            _core.grouped_pack(elems, buf, p.groups, p.kpg, config.channels_per_block, True)
    return [WeightSurfaces._with_weight(p.fields, buf) for p, _, buf in plans]


def _default_options(stride, pixel_format, post_extension, scale) -> bool:
    """The options DC weights ignore are their defaults, of exact types: ``(1, 1)`` of ints, ``1.0``
    or ``1`` and not a bool (``(1.0, 1.0)`` and ``True`` compare equal to them and are errors,
    which _check_dc_options reports)."""
    return (type(stride) is tuple and stride == (1, 1) and type(stride[0]) is int and type(stride[1]) is int
            and pixel_format is None and post_extension == "auto" and type(scale) in (float, int) and scale == 1.0)


def _check_dc_options(stride, pixel_format, post_extension, compress, scale, config):
    """Validates the options DC weights do not use; returns the effective compress mode."""
    check_stride(stride)  # validated; DC weights do not depend on the convolution stride
    check_unit_scale(scale, "dc")
    check_no_pixel_format(pixel_format)
    if post_extension not in ("auto", 1):
        raise UnsupportedError(f"post_extension: {post_extension!r} is only possible for image-input weights; "
                               "DC weights take 'auto' or 1 (docs/nvdla.md §5.1)")
    return check_compress(compress, config)


def _stream(ws: WeightSurfaces) -> np.ndarray:
    """The uncompressed mapped stream of one surface (decompressed when needed), after the
    surface's mapping fields are checked against its logical shape and options."""
    _check_mapping(ws)
    data = as_byte_buffer(ws.weight, "surfaces.weight")
    if ws.wmb is None:
        return data
    return decompress_weights(data, as_byte_buffer(ws.wmb, "surfaces.wmb"), precision=ws.precision,
                              n_elements=ws.meaningful_bytes // element_size(ws.precision)).view(np.uint8)


# The fields of WeightSurfaces that describe the mapping. A WeightSurfaces built by hand (from a
# manifest, say) with one of them wrong would unpack to wrong weights without a word, so
# unpack_weights compares them with what pack_weights gives for the logical shape and options
# the surface records (docs/nvdla.md §5.4).
_MAPPING_FIELDS = ("packed_shape", "kernel_groups", "bytes_per_kernel", "meaningful_bytes", "post_extension")


def _check_mapping(ws: WeightSurfaces) -> None:
    """LayoutError naming the first field of ``ws`` that differs from what :func:`pack_weights`
    gives for ``ws.kind``, ``shape``, ``precision``, ``config``, ``groups``, ``stride``
    (Winograd, deconvolution), ``pixel_format``, ``post_extension`` and ``phase``; the error of
    pack_weights, naming ``surfaces``, for options it refuses."""
    for name in ("shape", "packed_shape", "stride", "phase"):
        value = getattr(ws, name)
        if not isinstance(value, tuple) and not (value is None and name in ("stride", "phase")):
            raise TypeError(f"surfaces.{name}: expected a tuple, got {value!r}")
    stride = ws.stride if ws.kind in ("winograd", "deconv") else (1, 1)
    try:
        es = element_size(ws.precision)
        n = weights_nbytes(ws.shape, precision=ws.precision, config=ws.config, groups=ws.groups, kind=ws.kind,
                           stride=stride, pixel_format=ws.pixel_format)
        # The surface of zeros packed below is at most one tail longer than what was given.
        if ws.wmb is None:
            given, what = as_byte_buffer(ws.weight, "weight").size, "weight: holds {} bytes"
        else:
            given, what = as_byte_buffer(ws.wmb, "wmb").size * 8 * es, "wmb: has mask bits for {} bytes"
        if n > given + max(128, ws.config.weight_size_alignment):
            raise LayoutError(f"{what.format(given)}, but {ws.kind} weights of shape {ws.shape} pack to {n}")
        sets = _mapping_of((ws.kind, ws.precision, ws.shape, ws.groups, stride, ws.pixel_format, ws.post_extension,
                            ws.config))
    except (ValueError, TypeError) as e:
        raise type(e)(f"surfaces: {e}") from None
    expected = sets.get(ws.phase)
    if expected is None:
        raise LayoutError(f"surfaces.phase: {ws.phase!r} is not a set of {ws.kind} weights with stride {ws.stride} "
                          f"(sets: {list(sets)}; docs/nvdla.md §10.1)")
    for name, value in zip(_MAPPING_FIELDS, expected):
        if getattr(ws, name) != value:
            raise LayoutError(f"surfaces.{name}: {getattr(ws, name)!r}, but {ws.kind} {ws.precision} weights of "
                              f"shape {ws.shape} on {ws.config.name} give {value!r} (docs/nvdla.md §5.4)")


@lru_cache(maxsize=1024)
def _mapping_of(key) -> dict:
    """phase -> the _MAPPING_FIELDS of pack_weights' result for a zero tensor (a broadcast view:
    nothing of the logical size is allocated)."""
    kind, precision, shape, groups, stride, pixel_format, post_extension, config = key
    zeros = np.broadcast_to(np.zeros((), _TARGET_DTYPE[precision]), shape)
    packed = pack_weights(zeros, kind=kind, precision=precision, config=config, groups=groups, stride=stride,
                          pixel_format=pixel_format, post_extension=post_extension)
    sets = packed if isinstance(packed, tuple) else (packed,)
    return {ws.phase: tuple(getattr(ws, name) for name in _MAPPING_FIELDS) for ws in sets}


def unpack_weights(surfaces, *, logical: bool = True) -> np.ndarray:
    """Invert :func:`pack_weights` for every kind, compressed or not (docs/nvdla.md §5.5, 11.1).

    Parameters
    ----------
    surfaces : WeightSurfaces, or the tuple of deconvolution sets
        As returned by ``pack_weights``; ``weight`` (and ``wmb``) may be replaced by bytes read
        back from memory (uncompressed: at least ``meaningful_bytes`` long). Built by hand (from
        a manifest, say), its mapping fields (``packed_shape``, ``kernel_groups``,
        ``bytes_per_kernel``, ``meaningful_bytes``, ``post_extension``) must be what
        ``pack_weights`` gives for its ``kind``, ``shape``, ``precision``, ``config``,
        ``groups``, ``stride`` (Winograd, deconvolution), ``pixel_format`` and ``phase``, and
        ``shape``, ``packed_shape``, ``stride`` and ``phase`` tuples. Options that are
        themselves valid cannot be checked: image weights packed with post-extension 2 and
        described as 1 have the same size and unpack to other weights.
    logical : bool
        True: the logical weights ``surfaces.shape`` (grouped: the ``(K, C/groups, R, S)``
        diagonal blocks; image: ``(K, C, R, S)`` without the zero-padded channels;
        deconvolution: ``(C_in, K_out, R, S)``, needs all sets). False: the mapped
        ``packed_shape`` tensor (deconvolution: each set's ``(K_out, C_in, Rs, Ss)`` before the
        flip, stacked for several sets). Winograd weights have no logical inverse (rounding
        after the transform), so they need ``logical=False`` and give ``(K, C_ext, 4, 4)``.

    Returns
    -------
    numpy.ndarray
        int8, int16 or float16 (by ``surfaces.precision``).

    Raises
    ------
    TypeError
        ``surfaces`` is not a WeightSurfaces (or a tuple of them); ``logical`` is not a bool; a
        shape, stride or phase that is not a tuple; an option of a type pack_weights refuses.
    ValueError
        Winograd with ``logical=True``; an option pack_weights refuses (the message starts
        with ``surfaces:``).
    LayoutError
        ``weight`` shorter than ``meaningful_bytes``; a mapping field that does not match the
        shape and options (naming it); corrupted compressed surfaces; deconvolution sets
        missing or of different layers.
    """
    logical = check_bool(logical, "logical")
    if isinstance(surfaces, (tuple, list)):
        if not surfaces or not all(isinstance(s, WeightSurfaces) for s in surfaces):
            raise TypeError("surfaces: expected a WeightSurfaces or a non-empty tuple of deconvolution sets")
        if len(surfaces) > 1 or surfaces[0].kind == "deconv":
            return unpack_deconv(_stream, surfaces, logical)
        surfaces = surfaces[0]
    if not isinstance(surfaces, WeightSurfaces):
        raise TypeError(f"surfaces: expected WeightSurfaces, got {type(surfaces).__name__}")
    kind = surfaces.kind
    if kind == "deconv":
        return unpack_deconv(_stream, (surfaces,), logical)
    if kind == "winograd" and logical:
        raise ValueError("logical: Winograd weights have no logical inverse (rounded after the transform); "
                         "pass logical=False for the (K, C_ext, 4, 4) transformed tensor (docs/nvdla.md §5.5)")
    data = _stream(surfaces)
    if kind == "image":
        return unpack_image(surfaces, data, logical)
    layout = (winograd_layout if kind == "winograd" else dc_layout)(surfaces.packed_shape, surfaces.precision,
                                                                    surfaces.config)
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
