"""ONNX model ingestion: the convolution layers of a model, with their weights as NumPy arrays.

Needs the ``onnx`` package (``pip install "npupack[onnx]"``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["ConvLayer", "BatchNormLayer", "load_onnx", "load_batchnorms"]

_CONV_OPS = ("Conv", "ConvTranspose", "ConvInteger")


@dataclass(frozen=True)
class ConvLayer:
    """One convolution node of a model.

    Attributes
    ----------
    name : str
        Node name (``"<op>_<n>"``, n = position among the convolution layers, when the model leaves it empty).
    op_type : str
        ``"Conv"``, ``"ConvTranspose"`` or ``"ConvInteger"`` (listed, with a note, not packed).
    weights : numpy.ndarray or None
        float32. ``Conv``: ``(K, C/group, R, S)``; ``ConvTranspose``: ONNX order
        ``(C_in, K_out/group, R, S)``. None when the weights are not a constant of the model
        (then ``note`` says why).
    bias : numpy.ndarray or None
        float32 ``(K,)``, or None.
    strides, dilations : tuple of int
        ``(y, x)`` for 2-D convolutions (ONNX order, H then W).
    pads : tuple of int
        ONNX order ``(top, left, bottom, right)``.
    group : int
        Convolution groups.
    auto_pad : str
        ONNX ``auto_pad`` attribute (``"NOTSET"`` by default).
    note : str or None
        Why the layer cannot be packed as a plain 2-D convolution, if it cannot.
    input_name : str
        The tensor the convolution reads.
    reads_graph_input : bool
        True when that tensor is an input of the model (an image-input layer candidate).
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
    """Read the convolution layers of an ONNX model.

    Parameters
    ----------
    path : str or os.PathLike
        An ``.onnx`` file (external data beside it is loaded too).

    Returns
    -------
    list of ConvLayer
        Every ``Conv`` and ``ConvTranspose`` node in graph order. Weights come from
        initializers or from ``Constant`` nodes (directly or through ``Identity``), converted
        to float32.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        The file is not a readable ONNX model.
    ImportError
        The ``onnx`` package is not installed.
    """
    onnx, model, get = _open(path)
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = {i.name for i in model.graph.input if i.name not in initializers}
    layers = []
    for node in model.graph.node:
        if node.op_type not in _CONV_OPS:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        name = node.name or f"{node.op_type}_{len(layers)}"
        w = get(node.input[1]) if len(node.input) > 1 else None
        b = get(node.input[2]) if len(node.input) > 2 and node.input[2] and node.op_type != "ConvInteger" else None
        note = None
        if node.op_type == "ConvInteger":
            # Quantised with zero points (input 3 is the weight zero point) and scales applied by
            # later nodes: NVDLA's symmetric int8 needs the float weights.
            note = "ConvInteger (weights quantised with zero points) is not packed; export the float model"
        elif w is None:
            note = "weights are computed at run time, not stored in the model"
        elif w.ndim != 4:
            note = f"{w.ndim - 2}-d convolution; only 2-d convolutions are packed"
        nd = 2 if w is None or w.ndim < 3 else w.ndim - 2
        auto_pad = attrs.get("auto_pad", b"NOTSET")
        layers.append(ConvLayer(
            name=name, op_type=node.op_type,
            weights=None if w is None else np.asarray(w, dtype=np.float32),
            bias=None if b is None else np.asarray(b, dtype=np.float32),
            strides=tuple(int(v) for v in attrs.get("strides", [1] * nd)),
            pads=tuple(int(v) for v in attrs.get("pads", [0] * (2 * nd))),
            dilations=tuple(int(v) for v in attrs.get("dilations", [1] * nd)),
            group=int(attrs.get("group", 1)),
            auto_pad=auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad),
            note=note, input_name=node.input[0], reads_graph_input=node.input[0] in graph_inputs,
            output_name=node.output[0] if node.output else ""))
    return layers


def _open(path):
    onnx, numpy_helper = _import_onnx()
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"path: no such model file: {path}")
    try:
        model = onnx.load(path)
    except Exception as e:  # onnx raises DecodeError and friends
        raise ValueError(f"path: {path} is not a readable ONNX model ({e})") from e
    return onnx, model, _constants(model.graph, numpy_helper)


def load_batchnorms(path) -> list:
    """Read the ``BatchNormalization`` layers of an ONNX model, in graph order.

    Returns a list of BatchNormLayer (float32 parameters). Raises FileNotFoundError /
    ValueError / ImportError as :func:`load_onnx`."""
    onnx, model, get = _open(path)
    layers = []
    for node in model.graph.node:
        if node.op_type != "BatchNormalization":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        params = [get(n) if n else None for n in list(node.input[1:5]) + [""] * (4 - len(node.input[1:5]))]
        note = None if all(p is not None for p in params) else "parameters are computed at run time"
        arrays = [None if p is None else np.asarray(p, dtype=np.float32).reshape(-1) for p in params]
        layers.append(BatchNormLayer(
            name=node.name or f"BatchNormalization_{len(layers)}", scale=arrays[0], bias=arrays[1], mean=arrays[2],
            var=arrays[3], epsilon=float(attrs.get("epsilon", 1e-5)), input_name=node.input[0],
            output_name=node.output[0] if node.output else "", note=note))
    return layers
