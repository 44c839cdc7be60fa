"""ONNX model ingestion: the weight-bearing layers of a model (convolutions, fully connected,
float or quantised, subgraphs included), with their weights as NumPy arrays.

Needs the ``onnx`` package (``pip install "npupack[onnx]"``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from npupack.files import open_inside, read_inside
from npupack.onnx_attrs import (NodeFields, OnnxFieldError, check_input_tensors, check_layer, checked_attrs,
                                safe_for_inference, unreadable_tensor)

__all__ = ["ConvLayer", "BatchNormLayer", "load_onnx", "load_batchnorms", "model_files"]



@dataclass(frozen=True)
class ConvLayer:
    """One weight-bearing node of a model: a convolution, or a fully connected layer as the
    direct convolution NVDLA runs it (docs/manifest.md §3).

    Attributes
    ----------
    name : str
        Node name (``"<op>_<n>"``, n = position among the convolution layers, when the model leaves it empty).
    op_type : str
        The ONNX operator: ``Conv``, ``ConvTranspose``, ``ConvInteger``, ``QLinearConv``,
        ``Gemm``, ``MatMul``, ``MatMulInteger``, ``QLinearMatMul``, ``QGemm`` (com.microsoft), or
        ``LSTM`` / ``GRU`` / ``RNN`` (listed with a ``note``, never packed).
    weights : numpy.ndarray or None
        float32 (dequantised, ``(q - zero_point) * scale``, for integer weights).
        Convolutions: ``(K, C/group, R, S)`` (1-D: ``(K, C/group, 1, L)``); ``ConvTranspose``:
        ONNX order ``(C_in, K_out/group, R, S)``; fully connected: ``(K, C, R, S)`` with
        ``fc_fold = (R, S)``. None when the weights are not a constant of the model (then
        ``note`` says why).
    bias : numpy.ndarray or None
        float32 ``(K,)`` (QLinearConv: its int32 bias times input and weight scale; Gemm: ``C``
        times ``beta``), or None (``bias_note`` says why when the model has one).
    strides, dilations : tuple of int
        ``(y, x)`` (ONNX order, H then W; 1-D convolutions get y = 1).
    pads : tuple of int
        ONNX order ``(top, left, bottom, right)`` with ``auto_pad`` resolved. When SAME padding
        needs an input size that shape inference did not give, ``pads_resolved`` is False and
        ``pads`` holds the attribute. ``pads_given``: the attribute as written.
    spatial_rank : int
        1 or 2, the convolution's own rank (``onnx_weight_shape`` is the model's weight shape).
    output_padding, output_shape : tuple
        ``ConvTranspose`` attributes (``output_shape`` None when absent), H then W.
    fc_fold, fc_order : tuple of int, str
        Fully connected layers: (R, S), the H x W of the ``N x C x H x W`` tensor flattened into
        the layer's input ((1, 1) otherwise), and ``"KC"`` (Gemm ``transB=1``) or ``"CK"``, the
        order of the model's weight matrix.
    qweights : numpy.ndarray or None
        int8 / uint8 (as stored), the model's integer weights in the order of ``weights``
        (QDQ ``DequantizeLinear`` input, ``QLinearConv``, ``ConvInteger``, ``QLinearMatMul``,
        ``MatMulInteger``).
    weight_scales, weight_zero_point : numpy.ndarray or None
        float32 / int64 ``(K,)``, per-tensor values repeated; scales None for ``ConvInteger``
        and ``MatMulInteger`` (``scale_origin`` ``"none"``; ``"model"`` otherwise).
    path : str
        The subgraph holding the node (``"<node>/<attribute>"`` segments), empty for the main
        graph; ``name`` starts with it.
    input_shape : tuple or None
        Shape of the input tensor from shape inference (None per unknown axis).
    group : int
        Convolution groups.
    auto_pad : str
        ONNX ``auto_pad`` attribute (``"NOTSET"`` by default).
    note : str or None
        Why the layer cannot be packed as a plain 2-D convolution, if it cannot.
    error : str or None
        The malformed field of the node (named with its attribute or input), if any; the other
        fields are then empty.
    input_name : str
        The tensor the convolution reads.
    reads_graph_input : bool
        True when that tensor is an input of the model, not of a subgraph (an image-input layer
        candidate).
    output_name : str
        The tensor it writes.
    """

    name: str
    op_type: str
    weights: Optional[np.ndarray]
    bias: Optional[np.ndarray]
    strides: tuple
    pads: tuple
    dilations: tuple
    group: int
    auto_pad: str = "NOTSET"
    note: Optional[str] = None
    input_name: str = ""
    reads_graph_input: bool = False
    output_name: str = ""
    spatial_rank: int = 2
    onnx_weight_shape: tuple = ()
    pads_given: tuple = ()
    pads_resolved: bool = True
    output_padding: tuple = ()
    output_shape: Optional[tuple] = None
    fc_fold: Optional[tuple] = None
    fc_order: str = ""
    qweights: Optional[np.ndarray] = None
    weight_scales: Optional[np.ndarray] = None
    weight_zero_point: Optional[np.ndarray] = None
    scale_origin: str = "computed"
    bias_note: Optional[str] = None
    path: str = ""
    input_shape: Optional[tuple] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class BatchNormLayer:
    """One ``BatchNormalization`` node: ``y = (x - mean) * scale / sqrt(var + epsilon) + bias``
    per channel. Arrays are float32 ``(C,)``; None when not constants of the model (``note``
    says why)."""

    name: str
    scale: Optional[np.ndarray]
    bias: Optional[np.ndarray]
    mean: Optional[np.ndarray]
    var: Optional[np.ndarray]
    epsilon: float
    input_name: str
    output_name: str
    note: Optional[str] = None
    error: Optional[str] = None


def _import_onnx():
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError('reading ONNX models needs the onnx package: pip install "npupack[onnx]"') from e
    return onnx, numpy_helper


def _constants(graph, numpy_helper) -> dict:
    """Every tensor the graph holds as data: initializers, Constant nodes (``value``
    attribute), and Identity nodes that forward one of those."""
    consts = {t.name: t for t in graph.initializer}
    arrays: dict = {}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and node.output:
                    consts[node.output[0]] = attr.t
        elif node.op_type == "Identity" and node.input and node.input[0] in consts and node.output:
            consts[node.output[0]] = consts[node.input[0]]

    def get(name: str):
        if name not in arrays and name in consts:
            arrays[name] = numpy_helper.to_array(consts[name])
        return arrays.get(name)

    return get


def load_onnx(path) -> list:
    """Read every weight-bearing layer of an ONNX model, subgraphs included.

    Parameters
    ----------
    path : str or os.PathLike
        An ``.onnx`` file (external data beside it is loaded too).

    Returns
    -------
    list of ConvLayer
        In graph order (a subgraph's layers after the node that holds it): every ``Conv``,
        ``ConvTranspose``, ``ConvInteger`` and ``QLinearConv`` node, and every ``Gemm``,
        ``MatMul``, ``MatMulInteger``, ``QLinearMatMul`` and ``QGemm`` node with a constant
        operand; ``LSTM`` / ``GRU`` / ``RNN`` nodes are listed with a note (no NVDLA format).
        Weights are constants of the model: initializers, or tensors that only constants
        produce (evaluated with onnx's reference evaluator); integer weights behind
        ``DequantizeLinear`` (QDQ) and the weights of ``QLinearConv`` / ``ConvInteger`` /
        ``QLinearMatMul`` / ``MatMulInteger`` are kept as stored in ``qweights``. 1-D
        convolutions become 2-D with H = 1; fully connected layers become ``(K, C, R, S)`` with
        R x S the H x W their flattened input had (docs/manifest.md §3).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        The file is not a readable ONNX model.
    ImportError
        The ``onnx`` package is not installed.
    """
    from npupack.onnx_graph import Scope, tensor_shapes, walk

    onnx, model, _ = _open(path)
    shapes = tensor_shapes(safe_for_inference(model))  # never a malformed stride into onnx's C++
    root = Scope(model.graph, list(model.opset_import))
    nodes = [(scope, node) for scope, node in walk(root) if node.op_type in _WEIGHT_OPS + _RECURRENT_OPS]
    for scope in {id(s): s for s, _ in nodes}.values():
        scope.prefetch(i for s, n in nodes if s is scope for i in n.input if i and scope.is_const(i)
                       and _readable(scope, i))
    layers = []
    for scope, node in nodes:
        if node.op_type in _FC_OPS and node.op_type not in ("Gemm", "QGemm") and not _fc_has_constant(scope, node):
            continue  # activations times activations (attention): no weights
        name = node.name or f"{node.op_type}_{len(layers)}"
        name = f"{scope.path}/{name}" if scope.path else name
        if node.op_type in _RECURRENT_OPS:
            layers.append(ConvLayer(name=name, op_type=node.op_type, weights=None, bias=None, strides=(), pads=(),
                                    dilations=(), group=1, path=scope.path, note=f"{node.op_type} (recurrent) has no "
                                    "NVDLA weight format: NVDLA runs convolution, fully connected and SDP layers"))
            continue
        try:
            check_input_tensors(node, name, lambda i: _initializer(scope, i))
            attrs = checked_attrs(node, name)
            layer = _layer(scope, node, attrs, name, shapes)
            check_layer(layer, node, name)
            layers.append(layer)
        except OnnxFieldError as e:  # already names the node and the field
            layers.append(ConvLayer(name=name, op_type=node.op_type, weights=None, bias=None, strides=(), pads=(),
                                    dilations=(), group=1, path=scope.path, error=str(e)))
        except (ValueError, TypeError, IndexError, KeyError, OverflowError) as e:  # a malformed node
            layers.append(ConvLayer(name=name, op_type=node.op_type, weights=None, bias=None, strides=(), pads=(),
                                    dilations=(), group=1, path=scope.path, error=f"node {name!r} ({node.op_type}): "
                                    f"{type(e).__name__}: {e}"))
    return layers


def _initializer(scope, name):
    """The initializer ``name`` of this scope or an enclosing one, or None."""
    while scope is not None:
        if name in scope.initializers:
            return scope.initializers[name]
        scope = scope.parent
    return None


def _readable(scope, name) -> bool:
    t = _initializer(scope, name)
    return t is None or unreadable_tensor(t) is None


def _fc_has_constant(scope, node) -> bool:
    b = 3 if node.op_type == "QLinearMatMul" else 1
    a = node.input[0] if node.input else ""
    return any(i and scope.is_const(i) for i in (a, node.input[b] if len(node.input) > b else ""))


_WEIGHT_OPS = ("Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "Gemm", "MatMul", "MatMulInteger",
               "QLinearMatMul", "QGemm")
# Weight-bearing nodes NVDLA has no weight format for: listed, never packed.
_RECURRENT_OPS = ("LSTM", "GRU", "RNN")
_FC_OPS = ("Gemm", "MatMul", "MatMulInteger", "QLinearMatMul", "QGemm")
_INTEGER_OPS = ("QLinearConv", "QLinearMatMul", "QGemm", "ConvInteger", "MatMulInteger")
# Input positions per op: weight, weight scale, weight zero point, bias, input scale.
_INPUTS = {"Conv": (1, None, None, 2, None), "ConvTranspose": (1, None, None, 2, None),
           "ConvInteger": (1, None, 3, None, None), "QLinearConv": (3, 4, 5, 8, 1),
           "Gemm": (1, None, None, 2, None), "MatMul": (1, None, None, None, None),
           "MatMulInteger": (1, None, 3, None, None), "QLinearMatMul": (3, 4, 5, None, 1),
           "QGemm": (3, 4, 5, 6, 1)}


class _Refused(Exception):
    """A layer that cannot be read as weights; the message is the manifest's reason."""


def _input(node, i):
    return node.input[i] if i is not None and len(node.input) > i and node.input[i] else None


def _value(scope, name, what):
    v = scope.value(name)
    if v is None:
        err = scope.error(name)
        raise _Refused(f"{what} {name!r} could not be evaluated from its constant producers ({err})" if err
                       else f"{what} {name!r} is computed at run time from the model's inputs, not stored in the model")
    return v


def _quantised(scope, node, wi):
    """``(q, scale, zero_point, axis)`` when the weight is integers as stored: the weight input
    of a QOperator / integer node, or the integer input of the ``DequantizeLinear`` (QDQ) that
    produces a float weight; None for float weights."""
    si, zi = _INPUTS[node.op_type][1:3]
    w = _input(node, wi)
    if node.op_type in _INTEGER_OPS:
        q = _value(scope, w, "weight")
        scale = None if si is None else _value(scope, _input(node, si), "weight scale")
        zp = _input(node, zi)
        return q, scale, None if zp is None else _value(scope, zp, "weight zero point"), None
    dq = scope.producer(w) if w else None
    while dq is not None and dq.op_type == "Identity":
        dq = scope.producer(dq.input[0])
    if dq is None or dq.op_type != "DequantizeLinear" or not scope.is_const(dq.input[0]):
        return None
    q = _value(scope, dq.input[0], "quantised weight")
    if q.dtype.kind not in "iu":
        return None
    dq_attrs = {a.name: a for a in dq.attribute}
    if "block_size" in dq_attrs and dq_attrs["block_size"].i:
        raise _Refused("blocked weight quantisation (DequantizeLinear block_size) has no NVDLA equivalent")
    scale = _value(scope, dq.input[1], "weight scale")
    zp = _value(scope, dq.input[2], "weight zero point") if len(dq.input) > 2 and dq.input[2] else None
    axis = dq_attrs["axis"].i if "axis" in dq_attrs else 1
    return q, scale, zp, axis


def _per_kernel(values, k: int, axis, kernel_axis: int, what: str):
    """A per-tensor or per-axis quantisation parameter as ``(K,)`` along the kernel axis."""
    v = np.asarray(values).reshape(-1)
    if v.size == 1:
        return np.repeat(v, k)
    if v.size != k or (axis is not None and axis != kernel_axis):
        raise _Refused(f"{what} of {v.size} values along axis {axis}: NVDLA scales are per output kernel")
    return v


def _layer(scope, node, attrs, name, shapes) -> ConvLayer:
    op = node.op_type
    fc = op in _FC_OPS
    wi, _, _, bi, xsi = _INPUTS[op]
    x = node.input[0] if node.input else ""
    common = dict(name=name, op_type=op, input_name=x, output_name=node.output[0] if node.output else "",
                  reads_graph_input=x in _graph_inputs(scope), path=scope.path, input_shape=shapes.get(x),
                  auto_pad=_text(attrs.get("auto_pad", "NOTSET")), group=int(attrs.get("group", 1)))
    try:
        if fc and op == "MatMul" and scope.is_const(x) and not scope.is_const(_input(node, 1) or ""):
            raise _Refused("the constant is the left operand of MatMul (W @ x), not a fully connected weight")
        if op in ("Gemm", "QGemm") and attrs.get("transA", 0):
            raise _Refused("Gemm with transA=1 reads its input transposed; not a fully connected layer")
        quant = _quantised(scope, node, wi)
        w = quant[0] if quant else _value(scope, _input(node, wi), "weight")
        geometry = _fc_geometry(w, attrs, op, x, scope, shapes) if fc else _conv_geometry(w, attrs, op, shapes.get(x))
    except _Refused as e:
        return ConvLayer(weights=None, bias=None, strides=tuple(attrs.get("strides", ())),
                         pads=tuple(attrs.get("pads", ())), dilations=tuple(attrs.get("dilations", ())),
                         note=str(e), **common)
    w4, kernel_axis = geometry.pop("weights"), geometry.pop("kernel_axis")
    q_axis, q_transform = geometry.pop("q_axis", kernel_axis), geometry.pop("q_transform", lambda a: a)
    k = w4.shape[kernel_axis]
    alpha = float(attrs.get("alpha", 1.0)) if op in ("Gemm", "QGemm") else 1.0
    extra = {}
    try:
        if quant:
            q, scale, zp, axis = quant
            if scale is None:  # ConvInteger / MatMulInteger: the scales are in later nodes
                scales, origin = None, "none"
            else:
                # Gemm's alpha scales the product: it joins the weight scale.
                scales, origin = _per_kernel(scale, k, axis, q_axis, "weight scale") * np.float32(alpha), "model"
            zps = None if zp is None else _per_kernel(zp, k, axis, q_axis, "weight zero point")
            qw = q_transform(q)
            deq = qw.astype(np.float32)
            if zps is not None:
                deq = deq - _along(np.asarray(zps, np.float32), kernel_axis, qw.ndim)
            if scales is not None:
                deq = deq * _along(np.asarray(scales, np.float32), kernel_axis, qw.ndim)
            extra = dict(qweights=qw, weight_scales=None if scales is None else np.asarray(scales, np.float32),
                         weight_zero_point=None if zps is None else np.asarray(zps).astype(np.int64),
                         scale_origin=origin)
            w4 = deq
        elif alpha != 1.0:
            w4 = w4 * np.float32(alpha)
        bias, bias_note = _bias(scope, node, bi, xsi, k, extra.get("weight_scales"), attrs)
    except _Refused as e:
        return ConvLayer(weights=None, bias=None, note=str(e), **geometry, **common)
    if w4.dtype.kind == "f" and w4.dtype != np.float32:
        with np.errstate(over="ignore"):
            w4 = w4.astype(np.float32)
    return ConvLayer(weights=np.asarray(w4, dtype=np.float32), bias=bias, bias_note=bias_note, **geometry,
                     **extra, **common)


def _along(v, axis, ndim):
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _graph_inputs(scope) -> set:
    # A subgraph's own inputs (loop counters, carried state) are not the model's input image.
    return scope.inputs if scope.parent is None else set()


def _conv_geometry(w, attrs, op, x_shape) -> dict:
    if w.ndim not in (3, 4):
        raise _Refused(f"{w.ndim - 2}-d convolution; 1-d and 2-d convolutions are packed")
    rank = w.ndim - 2
    strides = tuple(int(v) for v in attrs.get("strides", [1] * rank))
    dilations = tuple(int(v) for v in attrs.get("dilations", [1] * rank))
    pads = tuple(int(v) for v in attrs.get("pads", [0] * 2 * rank))
    out_pad = tuple(int(v) for v in attrs.get("output_padding", [0] * rank)) if op == "ConvTranspose" else ()
    out_shape = tuple(int(v) for v in attrs["output_shape"]) if op == "ConvTranspose" and "output_shape" in attrs \
        else None
    auto_pad = _text(attrs.get("auto_pad", "NOTSET"))
    spatial = None if x_shape is None or len(x_shape) != rank + 2 else x_shape[2:]
    resolved = _resolve_pads(auto_pad, op, pads, strides, dilations, w.shape[2:], spatial, out_pad, out_shape)
    if resolved is None:  # SAME without an input size: the attribute stands, flagged as not resolved
        resolved = pads
        g_resolved = False
    else:
        g_resolved = True
    g = dict(spatial_rank=rank, onnx_weight_shape=tuple(w.shape), pads_given=pads, pads_resolved=g_resolved,
             output_padding=out_pad,
             output_shape=out_shape, kernel_axis=1 if op == "ConvTranspose" else 0)
    if rank == 1:  # (K, C, L) is a 2-D convolution with H = 1 (R = 1)
        g.update(weights=w[:, :, None, :], q_transform=lambda a: a[:, :, None, :], strides=(1,) + strides,
                 dilations=(1,) + dilations,
                 pads=(0, resolved[0], 0, resolved[1]),
                 output_padding=(0,) + out_pad if out_pad else (),
                 output_shape=None if out_shape is None else (1,) + out_shape)
    else:
        g.update(weights=w, strides=strides, dilations=dilations, pads=resolved)
    return g


def _resolve_pads(auto_pad, op, pads, strides, dilations, kernel, spatial, out_pad, out_shape):
    """ONNX ``(begin..., end...)`` pads with ``auto_pad`` resolved; None when SAME needs an
    input size shape inference did not give."""
    if auto_pad in ("NOTSET", ""):
        if op == "ConvTranspose" and out_shape is not None and spatial is not None and None not in spatial:
            # output_shape without auto_pad: ONNX gives the larger half of the padding to the start
            return _same(False, op, strides, dilations, kernel, spatial, out_pad, out_shape)
        return pads
    if auto_pad == "VALID":
        return (0,) * len(pads)
    if spatial is None or None in spatial:
        return None
    return _same(auto_pad == "SAME_UPPER", op, strides, dilations, kernel, spatial, out_pad, out_shape)


def _same(upper, op, strides, dilations, kernel, spatial, out_pad, out_shape):
    begin, end = [], []
    for i, n in enumerate(spatial):
        k = (kernel[i] - 1) * dilations[i] + 1
        if op == "ConvTranspose":
            out = out_shape[i] if out_shape else n * strides[i]
            total = max(strides[i] * (n - 1) + (out_pad[i] if out_pad else 0) + k - out, 0)
        else:
            total = max((-(-n // strides[i]) - 1) * strides[i] + k - n, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if upper else big)
        end.append(big if upper else small)
    return tuple(begin + end)


# Nodes between a Flatten and the FC that keep the element order (quantisation of the flat tensor).
_PASS_THROUGH = ("Identity", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Cast")


def _fc_geometry(w, attrs, op, x, scope, shapes) -> dict:
    """A fully connected layer as direct-convolution weights ``(K, C, R, S)``: R x S is the H x W
    of an ``N x C x H x W`` tensor that a Flatten / Reshape turned into the FC's input (shape
    inference), 1 x 1 otherwise."""
    if w.ndim != 2:
        raise _Refused(f"{op} weight of rank {w.ndim}: a fully connected layer has a 2-d weight")
    trans_b = op in ("Gemm", "QGemm") and int(attrs.get("transB", 0)) == 1
    # ONNX B is (C, K) (transB=0) or (K, C): the kernels are rows of B^T / B.
    k, c = (w.shape[0], w.shape[1]) if trans_b else (w.shape[1], w.shape[0])
    r = s = 1
    chw = c
    src = scope.producer(x)
    while src is not None and src.op_type in _PASS_THROUGH:
        src = scope.producer(src.input[0])
    if src is not None and src.op_type in ("Flatten", "Reshape"):
        cube = shapes.get(src.input[0])
        axis = next((a.i for a in src.attribute if a.name == "axis"), 1)
        if cube is not None and len(cube) == 4 and None not in cube[1:] and (src.op_type == "Reshape" or axis == 1) \
                and cube[1] * cube[2] * cube[3] == c:
            chw, r, s = cube[1], cube[2], cube[3]

    def to4(a):
        m = a if trans_b else a.T
        return np.ascontiguousarray(m).reshape(k, chw, r, s)

    return dict(weights=to4(w), q_transform=to4, kernel_axis=0, q_axis=0 if trans_b else 1, spatial_rank=2,
                onnx_weight_shape=tuple(w.shape), strides=(1, 1), dilations=(1, 1), pads=(0, 0, 0, 0),
                pads_given=(), fc_fold=(r, s), fc_order="KC" if trans_b else "CK")


def _bias(scope, node, bi, xsi, k, weight_scales, attrs):
    """Float32 ``(K,)`` bias (QLinearConv's int32 bias times input scale times weight scale; Gemm's
    ``C`` times ``beta``), and a note when the model's bias cannot be one value per kernel."""
    name = _input(node, bi)
    if name is None:
        return None, None
    b = _value(scope, name, "bias")
    if node.op_type in ("QLinearConv", "QGemm"):  # int32 in units of input scale x weight scale
        xs = _value(scope, _input(node, xsi), "input scale")
        b = b.astype(np.float64) * float(np.asarray(xs).reshape(-1)[0]) * np.asarray(weight_scales, np.float64)
    elif node.op_type == "Gemm":
        b = np.asarray(b, np.float64) * float(attrs.get("beta", 1.0))
        if b.size == 1:
            b = np.repeat(b.reshape(-1), k)
    if b.size != k:
        return None, f"bias of shape {list(np.shape(b))} is not one value per output kernel; not packed"
    return np.asarray(b, dtype=np.float32).reshape(k), None


def model_files(path) -> list:
    """The external-data files an ONNX model names (relative to its folder, sorted, each once),
    every one checked to be a regular file inside the model's folder (:func:`_open`'s rule).
    Raises FileNotFoundError / ValueError / ImportError as :func:`load_onnx`."""
    onnx, _ = _import_onnx()
    model = _parse(onnx, os.fspath(path))
    return sorted({loc for loc, _, _ in _external_tensors(model, os.fspath(path))})


def _parse(onnx, path: str):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"path: no such model file: {path}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"path: {path} is empty (0 bytes), not an ONNX model")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:  # onnx raises DecodeError and friends
        raise ValueError(f"path: {path} is not a readable ONNX model ({e})") from e
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ValueError(f"path: {path} is not a readable ONNX model (no IR version or no graph)")
    return model


def _all_tensors(model):
    """Every TensorProto a model holds: initializers and attribute tensors, subgraphs included."""
    def graph_tensors(graph):
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("g"):
                    yield from graph_tensors(attr.g)
                for g in attr.graphs:
                    yield from graph_tensors(g)
    yield from graph_tensors(model.graph)


def _external_tensors(model, path: str):
    """(location, tensor, fields) of every tensor stored outside the model file, the location
    checked by :func:`npupack.files.open_inside` (so never a symlink, a hard link to another
    name, a FIFO or device, nor a path out of the folder), whatever the onnx version."""
    folder = os.path.dirname(os.path.abspath(path))
    for t in _all_tensors(model):
        if t.data_location != 1:  # TensorProto.EXTERNAL
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        os.close(open_inside(folder, loc, f"external data of tensor {t.name!r}"))
        yield loc, t, info


def _open(path):
    onnx, numpy_helper = _import_onnx()
    path = os.fspath(path)
    model = _parse(onnx, path)
    # External data is read here, not by onnx: older onnx releases follow symbolic and hard
    # links out of the model's folder and block on FIFOs.
    folder = os.path.dirname(os.path.abspath(path))
    for loc, t, info in list(_external_tensors(model, path)):
        what = f"external data of tensor {t.name!r}"
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise ValueError(f"path: {what}: offset / length are not integers") from None
        t.raw_data = bytes(read_inside(folder, loc, what, offset, length))
        del t.external_data[:]
        t.data_location = 0  # TensorProto.DEFAULT
    return onnx, model, _constants(model.graph, numpy_helper)


def _batchnorm_fields(node, name: str, get):
    """(scale, B, mean, var as float32 (C,) or None, epsilon) of a BatchNormalization node: all
    five inputs present, the four parameters of one length C, var >= 0, epsilon finite >= 0.
    Raises OnnxFieldError naming the node and the field."""
    f = NodeFields(node, name)
    names = f.inputs((("X", True), ("scale", True), ("B", True), ("input_mean", True), ("input_var", True)))
    arrays = []
    for label, tensor in zip(("scale", "B", "input_mean", "input_var"), names[1:5]):
        p = f.constant(get, tensor, label)
        arrays.append(None if p is None else np.asarray(p, dtype=np.float32).reshape(-1))
    sizes = {a.size for a in arrays if a is not None}
    if len(sizes) > 1:
        raise f.error(f"inputs 'scale', 'B', 'input_mean', 'input_var' have different lengths "
                      f"{[None if a is None else a.size for a in arrays]}")
    var = arrays[3]
    if var is not None and not (var >= 0).all():  # also catches NaN
        raise f.error(f"input 'input_var' (tensor {names[4]!r}): variances must be >= 0, got "
                      f"{float(var[~(var >= 0)][0])}")
    return arrays, f.float("epsilon", 1e-5, minimum=0.0)


def load_batchnorms(path) -> list:
    """Read the ``BatchNormalization`` layers of an ONNX model, in graph order.

    Returns a list of BatchNormLayer (float32 parameters). Raises FileNotFoundError /
    ValueError / ImportError as :func:`load_onnx`."""
    onnx, model, get = _open(path)
    layers = []
    for node in model.graph.node:
        if node.op_type != "BatchNormalization":
            continue
        name = node.name or f"BatchNormalization_{len(layers)}"
        try:
            arrays, epsilon = _batchnorm_fields(node, name, get)
        except OnnxFieldError as e:
            layers.append(BatchNormLayer(name=name, scale=None, bias=None, mean=None, var=None, epsilon=0.0,
                                         input_name=node.input[0] if node.input else "",
                                         output_name=node.output[0] if node.output else "", error=str(e)))
            continue
        note = None if all(p is not None for p in arrays) else "parameters are computed at run time"
        layers.append(BatchNormLayer(
            name=name, scale=arrays[0], bias=arrays[1], mean=arrays[2],
            var=arrays[3], epsilon=epsilon, input_name=node.input[0],
            output_name=node.output[0] if node.output else "", note=note))
    return layers
