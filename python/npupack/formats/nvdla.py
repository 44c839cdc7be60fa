"""NVDLA formats in the registry (docs/nvdla.md): ``nvdla:feature`` (docs/nvdla.md §3), weights
``nvdla:dc`` (§6), ``nvdla:grouped`` (§7), ``nvdla:image`` (§8), ``nvdla:winograd`` (§9),
``nvdla:deconv`` (§10), and one
``nvdla:pixel:<NAME>`` per pixel format of Table 33 (§4). ``target`` is a configuration preset
name (nv_full, nv_small, ...; docs/nvdla.md §1.2) or a :class:`~npupack.nvdla.Config`;
``precision`` defaults to the one the dtype stands for (int8, int16, float16 -> fp16)."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from npupack.errors import LayoutError, UnsupportedError
from npupack.formats.common import into
from npupack.formats.registry import Format, register
from npupack.layout import as_byte_buffer, check_out, exact_cache
from npupack.nvdla import (Config, dc_layout, feature_layout, feature_strides, pack_feature, pack_pixels,
                           pack_weights, unpack_feature, unpack_pixels, unpack_weights, weights_nbytes)
from npupack.nvdla.config import element_size
from npupack.nvdla.pixel import PIXEL_FORMATS, _pre, pixel_line_strides
from npupack.nvdla.surfaces import WeightSurfaces
from npupack.nvdla.winograd import winograd_layout, winograd_shape

_TARGET = "NVDLA configuration preset (nv_full default, nv_large, nv_small, ...) or an nvdla.Config"
_PRECISION = "int8, int16 or fp16 (default: from the dtype: int8, int16, float16)"
_EXACT = tuple(np.dtype(t) for t in ("int8", "int16", "float16"))
_TARGETS = tuple(Config.presets()) + ("nvdlav1",)  # nvdlav1: nv_full's name in nvdla/sw
_NV_FULL = Config.named("nv_full")
_BY_DTYPE = {np.dtype("int8"): "int8", np.dtype("int16"): "int16", np.dtype("float16"): "fp16"}


def config_of(target) -> Config:
    """The Config a ``target`` names (preset name, any case) or is. Raises ValueError naming
    ``target`` for an unknown preset, TypeError for anything but a str or Config."""
    if target is None:
        return _NV_FULL
    if isinstance(target, Config):
        return target
    if not isinstance(target, str):
        raise TypeError(f"target: expected a preset name or an nvdla.Config, got {type(target).__name__}")
    try:
        return Config.named(target)
    except ValueError as e:  # the preset lookup names its own argument "name"
        raise ValueError(str(e).replace("name:", "target:", 1)) from None


def precision_of(dtype, precision, config: Config) -> str:
    """``precision`` checked (ValueError for an unknown one, UnsupportedError for one the
    config lacks), or the one ``dtype`` stands for (TypeError when it stands for none)."""
    if precision is None:
        precision = _BY_DTYPE.get(np.dtype(dtype))
        if precision is None:
            raise TypeError(f"dtype: {np.dtype(dtype)} stands for no NVDLA precision; give precision= "
                            "(int8, int16, fp16; docs/nvdla.md §2.1)")
    element_size(precision)
    config.require_precision(precision)
    return precision


# ---------------------------------------------------------------------- feature data (§3)
_FEATURE = {"target": _TARGET, "precision": _PRECISION,
            "line_stride": "bytes between lines (default derived; docs/nvdla.md §3.2)",
            "surface_stride": "bytes between surfaces of A channels (default derived; docs/nvdla.md §3.2)",
            "batch_stride": "bytes between cubes (default derived; docs/nvdla.md §3.2)"}


def _feature() -> Format:
    def args(shape, dtype, target, precision):
        config = config_of(target)
        return config, precision_of(dtype, precision, config)

    def nbytes(shape, dtype, target=None, precision=None, **st):
        config, p = args(shape, dtype, target, precision)
        return feature_strides(shape, p, config, **st).nbytes

    def pack(x, *, out=None, pad_value=0, target=None, precision=None, **st):
        config, p = args(x.shape, x.dtype, target, precision)
        return pack_feature(x, config=config, precision=p, out=out, **st)

    def unpack(buf, shape, dtype, target=None, precision=None, **st):
        config, p = args(shape, dtype, target, precision)
        return unpack_feature(buf, shape, config=config, precision=p, **st)

    def layout(shape, dtype, target=None, precision=None, **st):
        config, p = args(shape, dtype, target, precision)
        return feature_layout(shape, p, config, **st)

    def offset(shape, index, dtype, **params):
        return layout(shape, dtype, **params).offset_of((0,) * (4 - len(index)) + tuple(index))

    def explain(shape, dtype, *, limit=None, target=None, precision=None, **st):
        from npupack.explain import nvdla_explain_lines

        config, p = args(shape, dtype, target, precision)
        if target is not None and not isinstance(target, str):
            desc = feature_layout(shape, p, config, **st)
            from npupack.explain import explain_strided_lines

            return explain_strided_lines(desc, ["N", "C", "H", "W"], tuple(d.extent for d in desc.dims), limit)
        return nvdla_explain_lines("nvdla:feature", shape, precision=p, target=config.name, limit=limit, **st)

    examples = ({"shape": (2, 5, 3, 2), "params": {}},
                {"shape": (5, 3, 2), "params": {"target": "nv_small"}, "dtypes": ("int8",)},
                {"shape": (1, 3, 2, 3), "params": {"line_stride": 128, "surface_stride": 512}})
    return Format("nvdla:feature", "nvdla", "feature", _FEATURE, "docs/nvdla.md §3.1", "N,C,H,W", _EXACT, nbytes,
                  pack, unpack, offset, layout, explain, targets=_TARGETS, examples=examples, zero_fill=True,
                  note="(C, H, W) is accepted for N = 1")


# ---------------------------------------------------------------------- DC and grouped weights (§6, 7)
def _dc(name: str, grouped: bool) -> Format:
    params = {"target": _TARGET, "precision": _PRECISION,
              "groups": "convolution groups; the tensor is (K, C/groups, R, S) (docs/nvdla.md §7.1)" +
                        ("; required" if grouped else "; default 1")}

    def args(shape, dtype, target, precision, groups):
        config = config_of(target)
        if groups is None:
            if grouped:
                raise ValueError(f"groups: {name} needs the convolution groups (docs/nvdla.md §7.1)")
            groups = 1
        return config, precision_of(dtype, precision, config), groups

    def nbytes(shape, dtype, target=None, precision=None, groups=None):
        config, p, g = args(shape, dtype, target, precision, groups)
        return weights_nbytes(shape, precision=p, config=config, groups=g, kind="dc")

    def pack(x, *, out=None, pad_value=0, target=None, precision=None, groups=None):
        if target is None and precision is None and groups is None and not grouped:
            p = _BY_DTYPE.get(x.dtype)  # nv_full has every precision: nothing else to check here
            if p is not None:
                return pack_weights(x, precision=p, out=out).weight
        config, p, g = args(x.shape, x.dtype, target, precision, groups)
        return pack_weights(x, kind="dc", precision=p, config=config, groups=g, out=out).weight

    def unpack(buf, shape, dtype, target=None, precision=None, groups=None):
        config, p, g = args(shape, dtype, target, precision, groups)
        return unpack_weights(_surfaces(buf, shape, dtype, p, config, "dc", groups=g))

    def layout(shape, dtype, target=None, precision=None, groups=None):
        # Grouped weights: the descriptor of the densified (K, C, R, S) tensor (docs/nvdla.md §7.1).
        config, p, g = args(shape, dtype, target, precision, groups)
        nbytes(shape, dtype, target, precision, groups)  # the shape and groups checks of pack
        k, cg, r, s = shape
        return dc_layout((k, cg * g, r, s), p, config)

    def offset(shape, index, dtype, target=None, precision=None, groups=None):
        config, p, g = args(shape, dtype, target, precision, groups)
        k, c, r, s = index
        # Group k // (K/g) owns dense channels from (k // (K/g)) * C/g (docs/nvdla.md §7.1).
        return layout(shape, dtype, target, precision, groups).offset_of((k, (k // (shape[0] // g)) * shape[1] + c,
                                                                          r, s))

    small = {"target": "nv_small"}
    examples = ({"shape": (6, 2, 3, 3), "params": {"groups": 3}},
                {"shape": (4, 1, 3, 3), "params": {"groups": 4, **small}, "dtypes": ("int8",)}) if grouped else \
        ({"shape": (5, 3, 3, 3), "params": {}}, {"shape": (9, 10, 1, 2), "params": small, "dtypes": ("int8",)})
    return Format(name, "nvdla", "weights", params, "docs/nvdla.md §7.1" if grouped else "docs/nvdla.md §6.1",
                  "K,C,R,S", _EXACT, nbytes, pack, unpack, offset, layout, None, targets=_TARGETS, examples=examples,
                  zero_fill=True)


@exact_cache(maxsize=256)
def _template(shape, dtype, precision, config, kind, groups=1, pixel_format=None, post_extension="auto",
              stride=(1, 1)) -> WeightSurfaces:
    # The fields pack_weights gives this call (packed shape, post-extension, ...), from packing
    # zeros once: unpack then runs the vendor's own inverse on the caller's bytes.
    kw = {"pixel_format": pixel_format, "post_extension": post_extension} if kind == "image" else {}
    if kind in ("winograd", "image", "deconv"):
        kw["stride"] = stride
    return pack_weights(np.zeros(shape, dtype), kind=kind, precision=precision, config=config, groups=groups, **kw)


def _surfaces(buf, shape, dtype, precision, config, kind, **kw) -> WeightSurfaces:
    t = _template(tuple(shape), np.dtype(dtype), precision, config, kind, **kw)
    return WeightSurfaces._with_weight({k: v for k, v in t.__dict__.items() if k != "weight"}, buf)


# ---------------------------------------------------------------------- image-input weights (§8)
_IMAGE = {"target": _TARGET, "precision": _PRECISION,
          "pixel_format": "the input image's pixel format (required; docs/nvdla.md §8.1)",
          "post_extension": "auto (default), 1, 2 or 4 (docs/nvdla.md §8.4)",
          "stride": "(stride_y, stride_x) of the convolution; enters the automatic post-extension"}


def _image() -> Format:
    def args(dtype, target, precision, pixel_format):
        config = config_of(target)
        if pixel_format is None:
            raise ValueError("pixel_format: image-input weights need the pixel format (docs/nvdla.md §8.1)")
        return config, precision_of(dtype, precision, config)

    def nbytes(shape, dtype, target=None, precision=None, pixel_format=None, post_extension="auto", stride=(1, 1)):
        config, p = args(dtype, target, precision, pixel_format)
        if not ((type(post_extension) is str and post_extension == "auto") or
                (type(post_extension) is int and post_extension == 1)):
            return _template(shape, dtype, p, config, "image", 1, pixel_format, post_extension,
                             tuple(stride)).weight.size
        return weights_nbytes(shape, precision=p, config=config, kind="image", pixel_format=pixel_format,
                              stride=stride)

    def pack(x, *, out=None, pad_value=0, target=None, precision=None, pixel_format=None, post_extension="auto",
             stride=(1, 1)):
        config, p = args(x.dtype, target, precision, pixel_format)
        return pack_weights(x, kind="image", precision=p, config=config, pixel_format=pixel_format,
                            post_extension=post_extension, stride=stride, out=out).weight

    def unpack(buf, shape, dtype, target=None, precision=None, pixel_format=None, post_extension="auto",
               stride=(1, 1)):
        config, p = args(dtype, target, precision, pixel_format)
        return unpack_weights(_surfaces(buf, shape, dtype, p, config, "image", pixel_format=pixel_format,
                                        post_extension=post_extension, stride=tuple(stride)))

    def offset(shape, index, dtype, target=None, precision=None, pixel_format=None, post_extension="auto",
               stride=(1, 1)):
        config, p = args(dtype, target, precision, pixel_format)
        t = _template(shape, dtype, p, config, "image", 1, pixel_format, post_extension, tuple(stride))
        if t.post_extension != 1:
            raise UnsupportedError(f"post_extension: {t.post_extension} merges kernel rows into one operand; "
                                   "offset_of covers post_extension=1 (docs/nvdla.md §8.5)")
        k, c, r, s = index
        cdata = PIXEL_FORMATS[pixel_format].comps
        # Pre-extension: w[k][c][r][s] -> pre[k][s*Cdata + c][r][0] (docs/nvdla.md §8.3), then DC mapping.
        return dc_layout(t.packed_shape, p, config).offset_of((k, s * cdata + c, r, 0))

    def layout(shape, dtype, target=None, precision=None, pixel_format=None, post_extension="auto", stride=(1, 1)):
        from npupack.nvdla.image_weights import image_layout

        config, p = args(dtype, target, precision, pixel_format)
        t = _template(shape, dtype, p, config, "image", 1, pixel_format, post_extension, tuple(stride))
        k, c_ext, r, _ = t.packed_shape
        return image_layout(k, c_ext, r, t.post_extension, p, config)

    examples = ({"shape": (5, 3, 3, 3), "params": {"pixel_format": "T_A8B8G8R8", "post_extension": 1}},
                {"shape": (4, 1, 2, 2), "params": {"pixel_format": "T_R8", "post_extension": 1,
                                                   "target": "nv_small"}, "dtypes": ("int8",)})
    return Format("nvdla:image", "nvdla", "weights", _IMAGE, "docs/nvdla.md §8.3", "K,C,R,S", _EXACT, nbytes, pack,
                  unpack, offset, layout, None, targets=_TARGETS, examples=examples, zero_fill=True,
                  note="offset_of for post_extension=1")


# ---------------------------------------------------------------------- Winograd weights (§9)
_WINOGRAD = {"target": _TARGET, "precision": _PRECISION,
             "stride": "(stride_y, stride_x): channel extension; ceil(R/sy) and ceil(S/sx) must be 3 "
                       "(docs/nvdla.md §9.3)"}


def _winograd() -> Format:
    def args(dtype, target, precision):
        config = config_of(target)
        return config, precision_of(dtype, precision, config)

    def nbytes(shape, dtype, target=None, precision=None, stride=(1, 1)):
        config, p = args(dtype, target, precision)
        return weights_nbytes(shape, precision=p, config=config, kind="winograd", stride=stride)

    def pack(x, *, out=None, pad_value=0, target=None, precision=None, stride=(1, 1)):
        config, p = args(x.dtype, target, precision)
        return pack_weights(x, kind="winograd", precision=p, config=config, stride=stride, out=out).weight

    def layout(shape, dtype, target=None, precision=None, stride=(1, 1)):
        # The mapping of the transformed (K, C_ext, 4, 4) tensor (docs/nvdla.md §9.6).
        config, p = args(dtype, target, precision)
        nbytes(shape, dtype, target, precision, stride)
        return winograd_layout(winograd_shape(shape, stride, p, config), p, config)

    def explain(shape, dtype, *, limit=None, **params):
        from npupack.explain import explain_strided_lines

        desc = layout(shape, dtype, **params)
        yield (f"transformed tensor (K, C_ext, 4, 4) = {desc.shape}, {nbytes(shape, dtype, **params)} bytes with "
               "the tail (docs/nvdla.md §9.6)")
        yield from explain_strided_lines(desc, ["K", "C_ext", "r", "s"], desc.shape, limit)

    return Format("nvdla:winograd", "nvdla", "weights", _WINOGRAD, "docs/nvdla.md §9.6", "K,C,R,S", _EXACT, nbytes,
                  pack, None, None, layout, explain, targets=_TARGETS,
                  examples=({"shape": (5, 3, 3, 3), "params": {}},),
                  invertible=False, zero_fill=True,
                  note="weights are rounded after the G g Gt transform: no logical inverse, and one weight "
                       "feeds 16 transformed values (docs/nvdla.md §9.4)")


# ---------------------------------------------------------------------- deconvolution weights (§10)
_DECONV = {"target": _TARGET, "precision": _PRECISION,
           "stride": "(stride_y, stride_x) of the ConvTranspose: one set per phase (docs/nvdla.md §10.1)"}


def _deconv() -> Format:
    def args(dtype, target, precision):
        config = config_of(target)
        return config, precision_of(dtype, precision, config)

    def each(shape, dtype, target, precision, stride):
        config, p = args(dtype, target, precision)
        return weights_nbytes(shape, precision=p, config=config, kind="deconv", stride=stride)

    def nbytes(shape, dtype, target=None, precision=None, stride=(1, 1)):
        sy, sx = stride
        return each(shape, dtype, target, precision, stride) * sy * sx

    def pack(x, *, out=None, pad_value=0, target=None, precision=None, stride=(1, 1)):
        config, p = args(x.dtype, target, precision)
        sets = pack_weights(x, kind="deconv", precision=p, config=config, stride=stride)
        return into(np.concatenate([st.weight for st in sets]), out)

    def unpack(buf, shape, dtype, target=None, precision=None, stride=(1, 1)):
        config, p = args(dtype, target, precision)
        n = each(shape, dtype, target, precision, stride)
        data = as_byte_buffer(buf, "buf")
        sets = _template(tuple(shape), np.dtype(dtype), p, config, "deconv", stride=tuple(stride))
        if data.size < n * len(sets):
            raise LayoutError(f"buf: holds {data.size} bytes, {len(sets)} deconvolution sets need {n * len(sets)}")
        return unpack_weights(tuple(WeightSurfaces._with_weight({k: v for k, v in t.__dict__.items() if k != "weight"},
                                                                data[i * n:(i + 1) * n]) for i, t in enumerate(sets)))

    def offset(shape, index, dtype, target=None, precision=None, stride=(1, 1)):
        config, p = args(dtype, target, precision)
        c, k, r, s = index
        sy, sx = stride
        c_in, k_out, rr, ss = shape
        rs, s_s = -(-rr // sy), -(-ss // sx)
        # Set y*sx + x holds taps r = y + r'*sy, s = x + s'*sx, mapped as DC weights (K_out, C_in, Rs, Ss)
        # with r' and s' reversed, each set its own surface (docs/nvdla.md §10.1).
        at = dc_layout((k_out, c_in, rs, s_s), p, config).offset_of((k, c, rs - 1 - r // sy, s_s - 1 - s // sx))
        return ((r % sy) * sx + s % sx) * each(shape, dtype, target, precision, stride) + at

    examples = ({"shape": (3, 5, 3, 3), "params": {"stride": (2, 2)}}, {"shape": (2, 3, 4, 3), "params": {}},
                {"shape": (4, 9, 3, 5), "params": {"stride": (1, 2), "target": "nv_small"}, "dtypes": ("int8",)})
    return Format("nvdla:deconv", "nvdla", "weights", _DECONV, "docs/nvdla.md §10.1", "C_in,K_out,R,S", _EXACT,
                  nbytes, pack, unpack, offset, None, None, targets=_TARGETS, examples=examples, zero_fill=True,
                  note="the sets' surfaces one after another in set order (y outer), each with its own tail")


# ---------------------------------------------------------------------- SDP bias operands (§12)
_SDP = {"target": _TARGET,
        "precision": "SDP processing precision: int8, int16, fp16 (default: fp16 for float16, else int8)",
        "data_size": "bytes per component, 1 or 2 (default: the dtype's; docs/nvdla.md §12.1)",
        "line_stride": "per element: bytes between lines (default derived; docs/nvdla.md §12.2)",
        "surface_stride": "per element: bytes between surfaces (default derived; docs/nvdla.md §12.2)"}


def _sdp_bias() -> Format:
    from npupack.nvdla import pack_bias, unpack_sdp
    from npupack.nvdla.sdp import element_strides

    def args(shape, dtype, target, precision, data_size):
        if len(shape) not in (1, 3):
            raise LayoutError(f"shape: an SDP operand in memory is (C,) per channel or (C, H, W) per element, got "
                              f"{shape} (docs/nvdla.md §12.2; per-layer values go into registers)")
        config = config_of(target)
        if precision is None:
            precision = "fp16" if dtype == np.float16 else "int8"
        return dict(precision=precision, config=config, mode="per_channel" if len(shape) == 1 else "per_element",
                    data_size=dtype.itemsize if data_size is None else data_size)

    @exact_cache(maxsize=256)
    def template(shape, dtype, target, precision, data_size, line_stride, surface_stride):
        # (operand without data, bytes): the fields of a packed one-element tensor of the same
        # rank (checks the parameters), the shape, strides and size of this one by the formulas
        # of docs/nvdla.md §12.2, so that sizing a tensor never allocates or packs it.
        one = pack_bias(np.zeros((1,) * len(shape), dtype), line_stride=line_stride, surface_stride=surface_stride,
                        **args(shape, dtype, target, precision, data_size))
        e, eb = one.elements_per_atom, one.element_bytes
        if len(shape) == 1:
            ls = ss = None
            size = -(-shape[0] // e) * e * eb
        else:
            ls, ss, size = element_strides(shape, e=e, eb=eb, config=one.config, line_stride=line_stride,
                                           surface_stride=surface_stride)
        return replace(one, data=None, shape=shape, line_stride=ls, surface_stride=ss), size

    def op(shape, dtype, target=None, precision=None, data_size=None, line_stride=None, surface_stride=None):
        return template(tuple(shape), np.dtype(dtype), target, precision, data_size, line_stride, surface_stride)

    def nbytes(shape, dtype, **params):
        return op(shape, dtype, **params)[1]

    def pack(x, *, out=None, pad_value=0, target=None, precision=None, data_size=None, line_stride=None,
             surface_stride=None):
        return pack_bias(x, line_stride=line_stride, surface_stride=surface_stride, out=out,
                         **args(x.shape, x.dtype, target, precision, data_size)).data

    def unpack(buf, shape, dtype, **params):
        o, size = op(shape, dtype, **params)
        data = as_byte_buffer(buf, "buf")
        if data.size < size:
            raise LayoutError(f"buf: holds {data.size} bytes, nvdla:sdp:bias needs {size}")
        return unpack_sdp(o, data)

    def offset(shape, index, dtype, **params):
        o = op(shape, dtype, **params)[0]
        e, eb = o.elements_per_atom, o.element_bytes
        if len(index) == 1:
            return index[0] * eb  # docs/nvdla.md §12.2, per channel
        c, h, w = index
        return (c // e) * o.surface_stride + h * o.line_stride + w * e * eb + (c % e) * eb

    examples = ({"shape": (5,), "params": {}}, {"shape": (20, 3, 2), "params": {}},
                {"shape": (5, 2, 3), "params": {"precision": "int16", "line_stride": 384}, "dtypes": ("int16",)})
    return Format("nvdla:sdp:bias", "nvdla", "sdp", _SDP, "docs/nvdla.md §12.2", "C or C,H,W", _EXACT, nbytes, pack,
                  unpack, offset, None, None, targets=_TARGETS, examples=examples, zero_fill=True,
                  note="per channel (C,) or per element (C, H, W); pairs (batch-norm, bias + rescale) and per-layer "
                       "values have no single-tensor form")


# ---------------------------------------------------------------------- pixel formats (§4)
_PIXEL = {"line_stride": "bytes per line, one int or one per plane (default roundup(pre + W*bpp, 32); "
                         "docs/nvdla.md §4.4)",
          "x_offset": "redundant pixels before the first one (docs/nvdla.md §4.4)"}
_PIXEL_DTYPES = {"8bit": ("uint8", "int8"), "16bit": ("uint16", "int16"), "fp16": ("float16",), "10bit": ("uint16",)}


def _pixel(fmt) -> Format:
    comps = 3 if fmt.has_x else fmt.comps

    def hw(shape):
        if len(shape) not in (2, 3) or (len(shape) == 3 and shape[2] != comps) or (len(shape) == 2 and comps != 1):
            want = "(H, W)" if comps == 1 else f"(H, W, {comps})"
            raise LayoutError(f"shape: {fmt.name} images are {want}, got {shape} (docs/nvdla.md §4.2)")
        return shape[0], shape[1]

    def nbytes(shape, dtype, line_stride=None, x_offset=0):
        h, w = hw(shape)
        return h * sum(pixel_line_strides(fmt, w, x_offset=x_offset, line_stride=line_stride))

    @lru_cache(maxsize=64)
    def default_strides(w, x_offset):
        return pixel_line_strides(fmt, w, x_offset=x_offset)

    def pack(x, *, out=None, pad_value=0, line_stride=None, x_offset=0):
        h, w = hw(x.shape)
        strides = default_strides(w, x_offset) if line_stride is None and type(x_offset) is int else \
            pixel_line_strides(fmt, w, x_offset=x_offset, line_stride=line_stride)
        first, total = h * strides[0], h * sum(strides)
        buf = np.empty(total, np.uint8) if out is None else check_out(out, total)[:total]
        # The planes back to back in one buffer; default strides reach pack_pixels as None so
        # that a geometry packed before takes its cached plan.
        pack_pixels(x, fmt.name, line_stride=None if line_stride is None else strides, x_offset=x_offset,
                    out=buf if len(strides) == 1 else (buf[:first], buf[first:]))
        return buf

    def unpack(buf, shape, dtype, line_stride=None, x_offset=0):
        h, w = hw(shape)
        strides = pixel_line_strides(fmt, w, x_offset=x_offset, line_stride=line_stride)
        data = as_byte_buffer(buf, "buf")
        if data.size < h * sum(strides):
            raise LayoutError(f"buf: holds {data.size} bytes, {fmt.name} needs {h * sum(strides)}")
        ends = np.cumsum([0] + [h * s for s in strides])
        img = unpack_pixels([data[a:b] for a, b in zip(ends[:-1], ends[1:])], fmt.name, (h, w),
                            line_stride=strides, x_offset=x_offset)
        return img[:, :, :comps] if len(shape) == 3 else img[:, :, 0]

    def offset(shape, index, dtype, line_stride=None, x_offset=0):
        h, w = hw(shape)
        strides = pixel_line_strides(fmt, w, x_offset=x_offset, line_stride=line_stride)
        y, x = index[0], index[1]
        c = index[2] if len(index) == 3 else 0
        base = 0
        for p, order in enumerate(fmt.planes):  # docs/nvdla.md §4.4: plane, line, x offset, pixel, component
            if c in order:
                return base + y * strides[p] + _pre(fmt, p, x_offset) + x * fmt.bpp[p] + \
                    order.index(c) * fmt.comp_bytes
            base += h * strides[p]
        raise LayoutError(f"index: component {c} is not stored by {fmt.name}")

    def explain(shape, dtype, *, limit=None, line_stride=None, x_offset=0):
        h, w = hw(shape)
        strides = pixel_line_strides(fmt, w, x_offset=x_offset, line_stride=line_stride)
        names = "RGBA" if "Y" not in fmt.name.split("_")[1] else "YUVA"
        for p, order in enumerate(fmt.planes):
            yield (f"plane {p}: {h} lines of {strides[p]} bytes, {fmt.bpp[p]} bytes per pixel, components "
                   f"{' '.join(names[c] for c in order)} at increasing addresses, {_pre(fmt, p, x_offset)} bytes "
                   "before the first pixel")
        if fmt.kind == "10bit":
            yield f"one little-endian 32-bit word per pixel, bit positions {fmt.shifts} (docs/nvdla.md §4.3)"

    ten = fmt.kind == "10bit"
    shape = (3, 5) if comps == 1 else (3, 5, comps)
    return Format(f"nvdla:pixel:{fmt.name}", "nvdla", "pixel", _PIXEL, "docs/nvdla.md §4.4",
                  "H,W" if comps == 1 else f"H,W,{comps}", tuple(np.dtype(t) for t in _PIXEL_DTYPES[fmt.kind]),
                  nbytes, pack, unpack, None if ten else offset, None, explain,
                  examples=({"shape": shape, "params": {}}, {"shape": shape, "params": {"x_offset": 1}}),
                  zero_fill=True, value_max=(1023, 1023, 1023, 3) if ten else None,
                  note="10-bit components share a 32-bit word (docs/nvdla.md §4.3)" if ten else
                  ("X formats take 3 components and store X = 0" if fmt.has_x else ""))


register(_feature())
register(_dc("nvdla:dc", False))
register(_dc("nvdla:grouped", True))
register(_image())
register(_winograd())
register(_deconv())
register(_sdp_bias())
for _fmt in PIXEL_FORMATS.values():
    register(_pixel(_fmt))
