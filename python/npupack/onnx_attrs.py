"""Checked reads of ONNX node fields: attributes of the type and range the operator's definition
gives, the inputs a node needs, and constant tensors that convert to NumPy arrays.

Every read a model loader makes goes through here, so a malformed model is one
:class:`OnnxFieldError` naming the node and the attribute or input (never a KeyError,
OverflowError or a value silently read as something else, such as ``strides="ab"`` as
``(97, 98)`` or ``group=1.5`` as 1).
"""
from __future__ import annotations

import math
from typing import Optional

__all__ = ["OnnxFieldError", "NodeFields"]

# onnx.AttributeProto.AttributeType values (fixed by the ONNX protobuf schema).
_FLOAT, _INT, _STRING, _INTS = 1, 2, 3, 7
_TYPE_NAMES = {0: "UNDEFINED", 1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH", 6: "FLOATS", 7: "INTS",
               8: "STRINGS", 9: "TENSORS", 10: "GRAPHS", 11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS",
               13: "TYPE_PROTO", 14: "TYPE_PROTOS"}


class OnnxFieldError(ValueError):
    """A field of an ONNX node that its operator's definition does not allow."""


class NodeFields:
    """The attributes and inputs of one node, read with checks.

    ``label`` names the node in errors (its name, or the name the loader gives an unnamed node).
    """

    def __init__(self, node, label: str):
        self.node = node
        self.where = f"node {label!r} ({node.op_type})"
        self._attrs = {a.name: a for a in node.attribute}

    def error(self, what: str) -> OnnxFieldError:
        return OnnxFieldError(f"{self.where}: {what}")

    def _get(self, name: str, types: tuple):
        attr = self._attrs.get(name)
        if attr is None:
            return None
        if attr.type not in types:
            want = " or ".join(_TYPE_NAMES[t] for t in types)
            raise self.error(f"attribute {name!r}: expected {want}, got type {_TYPE_NAMES.get(attr.type, attr.type)}")
        return attr

    def ints(self, name: str, default, *, length: Optional[int] = None, minimum: Optional[int] = None) -> tuple:
        """An INTS attribute as a tuple of int (``default`` when absent), of ``length`` values
        each >= ``minimum``."""
        attr = self._get(name, (_INTS,))
        values = tuple(int(v) for v in (default if attr is None else attr.ints))
        if length is not None and len(values) != length:
            raise self.error(f"attribute {name!r}: expected {length} integers, got {list(values)}")
        if minimum is not None and any(v < minimum for v in values):
            raise self.error(f"attribute {name!r}: expected integers >= {minimum}, got {list(values)}")
        return values

    def int(self, name: str, default: int, *, minimum: Optional[int] = None) -> int:
        """An INT attribute (``default`` when absent), >= ``minimum``."""
        attr = self._get(name, (_INT,))
        value = int(default if attr is None else attr.i)
        if minimum is not None and value < minimum:
            raise self.error(f"attribute {name!r}: expected an integer >= {minimum}, got {value}")
        return value

    def float(self, name: str, default: float, *, minimum: Optional[float] = None) -> float:
        """A FLOAT attribute (``default`` when absent), finite and >= ``minimum``."""
        attr = self._get(name, (_FLOAT,))
        value = float(default if attr is None else attr.f)
        if not math.isfinite(value) or (minimum is not None and value < minimum):
            bound = "" if minimum is None else f" >= {minimum}"
            raise self.error(f"attribute {name!r}: expected a finite number{bound}, got {value}")
        return value

    def string(self, name: str, default: str, *, choices: Optional[tuple] = None) -> str:
        """A STRING attribute as str (``default`` when absent), one of ``choices``."""
        attr = self._get(name, (_STRING,))
        if attr is None:
            return default
        try:
            value = attr.s.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error(f"attribute {name!r}: not UTF-8 text") from None
        if choices is not None and value not in choices:
            raise self.error(f"attribute {name!r}: expected one of {choices}, got {value!r}")
        return value

    def inputs(self, required: tuple) -> list:
        """The node's input names, padded with "" to at least ``len(required)``; the inputs
        named in ``required`` (``(name, needed)`` pairs, in ONNX order) must be present."""
        names = list(self.node.input) + [""] * max(0, len(required) - len(self.node.input))
        missing = [label for (label, needed), name in zip(required, names) if needed and not name]
        if missing:
            raise self.error(f"has no input {', '.join(repr(m) for m in missing)} (the operator requires it)")
        return names

    def output(self) -> str:
        return self.node.output[0] if self.node.output else ""

    def constant(self, get, tensor: str, what: str):
        """The constant tensor ``tensor`` (input ``what`` of the node) as a NumPy array via
        ``get`` (None when it is not a constant of the model); OnnxFieldError when its data
        cannot be read (an unknown data type, a payload of the wrong size)."""
        if not tensor:
            return None
        try:
            return get(tensor)
        except OnnxFieldError:
            raise
        except Exception as e:  # onnx's numpy_helper raises KeyError, TypeError, ValueError ... for bad data
            raise self.error(f"input {what!r} (tensor {tensor!r}): its data cannot be read "
                             f"({type(e).__name__}: {e})") from None


# Attributes of the weight-bearing operators and their rules: (kind, minimum or choices).
_RULES = {
    "strides": ("ints", 1), "dilations": ("ints", 1), "pads": ("ints", 0), "output_padding": ("ints", 0),
    "output_shape": ("ints", 1), "kernel_shape": ("ints", 1), "group": ("int", 1), "transA": ("int", 0),
    "transB": ("int", 0), "alpha": ("float", None), "beta": ("float", None), "epsilon": ("float", 0.0),
    "auto_pad": ("string", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")),
}
# Inputs an operator cannot do without (ONNX operator definitions), in order.
_REQUIRED = {
    "Conv": ("X", "W"), "ConvTranspose": ("X", "W"), "ConvInteger": ("x", "w"), "Gemm": ("A", "B"),
    "MatMul": ("A", "B"), "MatMulInteger": ("A", "B"),
    "QLinearConv": ("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"),
    "QLinearMatMul": ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"),
    "BatchNormalization": ("X", "scale", "B", "input_mean", "input_var"),
}


def checked_attrs(node, label: str) -> dict:
    """The attributes of a weight-bearing node as Python values (INTS as tuples, STRING as
    str), each known one read through :class:`NodeFields` with its rule (strides / dilations /
    kernel_shape / output_shape >= 1, pads >= 0, group >= 1, transA / transB 0 or 1, finite
    alpha / beta / epsilon, auto_pad one of its four values), and the node's required inputs
    present. Raises OnnxFieldError naming the node and the attribute or input."""
    from onnx import helper

    f = NodeFields(node, label)
    f.inputs(tuple((name, True) for name in _REQUIRED.get(node.op_type, ())))
    out = {}
    for attr in node.attribute:
        rule = _RULES.get(attr.name)
        if rule is None:
            out[attr.name] = helper.get_attribute_value(attr)
            continue
        kind, arg = rule
        if kind == "ints":
            out[attr.name] = f.ints(attr.name, (), minimum=arg)
        elif kind == "int":
            out[attr.name] = f.int(attr.name, 0, minimum=arg)
            if attr.name in ("transA", "transB") and out[attr.name] > 1:
                raise f.error(f"attribute {attr.name!r}: expected 0 or 1, got {out[attr.name]}")
        elif kind == "float":
            out[attr.name] = f.float(attr.name, 0.0, minimum=arg)
        else:
            out[attr.name] = f.string(attr.name, "", choices=arg)
    return out


def check_layer(layer, node, label: str) -> None:
    """The rules that need the weights: strides and dilations of the kernel's rank, pads of
    twice it, ``group`` dividing the channels it splits, one bias value per output kernel.
    ``layer`` is a :class:`npupack.model.ConvLayer`. Raises OnnxFieldError."""
    if layer.weights is None or node.op_type not in ("Conv", "ConvTranspose", "ConvInteger", "QLinearConv"):
        return
    f = NodeFields(node, label)
    rank = layer.weights.ndim - 2
    for name, values, n in (("strides", layer.strides, rank), ("dilations", layer.dilations, rank),
                            ("pads", layer.pads, 2 * rank)):
        if values is not None and len(values) != n:
            raise f.error(f"attribute {name!r}: expected {n} integers for a {layer.spatial_rank}-d kernel, "
                          f"got {list(values)}")
    split = layer.weights.shape[0]  # Conv: K of (K, C/group, ...); ConvTranspose: C of (C, K/group, ...)
    if layer.group < 1 or split % layer.group:
        axis = "C" if node.op_type == "ConvTranspose" else "K"
        raise f.error(f"attribute 'group': {layer.group} does not divide the {split} channels ({axis}) of the weight")
    if layer.bias_note:
        raise f.error(f"input 'B': {layer.bias_note}")


def unreadable_tensor(tensor) -> Optional[str]:
    """Why an initializer's data cannot be converted (a data type this onnx does not know), or None."""
    from onnx import TensorProto

    if tensor.data_type not in TensorProto.DataType.values() or tensor.data_type == TensorProto.UNDEFINED:
        return f"unknown tensor data type {tensor.data_type}"
    return None


def check_input_tensors(node, label: str, initializer) -> None:
    """Every input of ``node`` that ``initializer(name)`` finds (a TensorProto or None) has a
    known data type; raises OnnxFieldError naming the node, the input position and tensor."""
    f = NodeFields(node, label)
    for position, name in enumerate(node.input):
        t = initializer(name) if name else None
        why = None if t is None else unreadable_tensor(t)
        if why:
            raise f.error(f"input {position} (tensor {name!r}): {why}")


def safe_for_inference(model):
    """``model``, or a copy of it without the attributes that break the checked rules (strides 0,
    a group of 0, ...), for onnx's shape inference: some onnx releases divide by such a stride
    in C++ and kill the process. The nodes concerned are reported by :func:`checked_attrs`."""
    def bad(graph):
        for node in graph.node:
            f = NodeFields(node, node.name)
            for attr in node.attribute:
                rule = _RULES.get(attr.name)
                if rule is not None:
                    kind, arg = rule
                    try:
                        getattr(f, kind)(attr.name, () if kind == "ints" else 0, **(
                            {"choices": arg} if kind == "string" else {"minimum": arg}))
                    except OnnxFieldError:
                        yield node, attr.name
                for g in list(attr.graphs) + ([attr.g] if attr.HasField("g") else []):
                    yield from bad(g)

    if not any(True for _ in bad(model.graph)):
        return model
    copy = type(model)()
    copy.CopyFrom(model)
    for node, name in list(bad(copy.graph)):
        keep = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(keep)
    return copy
