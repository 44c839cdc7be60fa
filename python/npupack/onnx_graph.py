"""Walking an ONNX graph for :mod:`npupack.model`: every node, the nodes of ``If`` / ``Loop`` /
``Scan`` bodies included, and the value of any tensor that only constants produce (which nodes
become layers: docs/manifest.md §3.1).

A tensor is constant when it is an initializer, or the output of a deterministic node of the
default domain whose inputs are all constant (``Constant`` has none). Its value is computed by
onnx's reference evaluator (``onnx.reference.ReferenceEvaluator``) on the extracted producer
subgraph, so every operator onnx implements folds (``Cast``, ``Reshape``, ``Transpose``,
``ConstantOfShape``, ``DequantizeLinear``...) without a case per operator here.
"""
from __future__ import annotations

from typing import Iterator, Optional

import numpy as np

__all__ = ["Scope", "walk", "tensor_shapes"]

# Nodes whose output differs from run to run: never folded.
_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                     "Bernoulli", "Dropout"}


def _foldable(node, is_const) -> bool:
    if node.domain not in ("", "ai.onnx") or node.op_type in _NONDETERMINISTIC:
        return False
    if any(a.type in (5, 10) for a in node.attribute):  # GRAPH / GRAPHS: control flow is not folded
        return False
    inputs = [i for i in node.input if i]
    if not inputs:
        return node.op_type == "Constant"
    return all(is_const(i) for i in inputs)


class Scope:
    """One graph (the model's or a subgraph) with its constants; ``parent`` is the enclosing
    scope, whose constants a subgraph may read. ``path`` names the subgraph
    (``"<node>/<attribute>"`` segments joined by ``/``; empty for the main graph)."""

    def __init__(self, graph, opsets, parent: Optional["Scope"] = None, path: str = ""):
        from onnx import numpy_helper

        self._numpy_helper = numpy_helper
        self.graph, self.opsets, self.parent, self.path = graph, opsets, parent, path
        self.initializers = {t.name: t for t in graph.initializer}
        self.inputs = {i.name for i in graph.input if i.name not in self.initializers}
        self.producers: dict = {}
        self._const = set(self.initializers)
        for node in graph.node:
            if _foldable(node, self.is_const):
                self._const.update(o for o in node.output if o)
            for o in node.output:
                if o:
                    self.producers[o] = node
        self._values: dict = {}
        self._errors: dict = {}

    def _owner(self, name: str) -> Optional["Scope"]:
        if name in self.initializers or name in self.producers or name in self.inputs:
            return self
        return self.parent._owner(name) if self.parent is not None else None

    def is_const(self, name: str) -> bool:
        """True when ``name`` is computed from constants only (here or in an enclosing graph)."""
        owner = self._owner(name)
        return owner is not None and name in owner._const

    def producer(self, name: str):
        """The node that writes ``name`` in this scope or an enclosing one, or None."""
        owner = self._owner(name)
        return None if owner is None else owner.producers.get(name)

    def value(self, name: str) -> Optional[np.ndarray]:
        """The constant value of ``name`` as a NumPy array (dtype as stored), or None when it is
        not a constant or could not be evaluated (then :meth:`error` says why)."""
        owner = self._owner(name)
        if owner is None or name not in owner._const:
            return None
        if owner is not self:
            return owner.value(name)
        if name not in self._values and name not in self._errors:
            self.prefetch([name])
        return self._values.get(name)

    def error(self, name: str) -> Optional[str]:
        owner = self._owner(name)
        return None if owner is None else owner._errors.get(name)

    def prefetch(self, names) -> None:
        """Evaluate several constants of this scope in one run of the reference evaluator (one
        at a time again if that run fails, so that one bad producer costs only its own value)."""
        todo = [n for n in dict.fromkeys(names) if n in self._const and n not in self._values
                and n not in self._errors]
        for n in [n for n in todo if n in self.initializers]:
            self._values[n] = self._numpy_helper.to_array(self.initializers[n])
        todo = [n for n in todo if n not in self.initializers]
        if not todo:
            return
        try:
            self._values.update(zip(todo, self._evaluate(todo)))
        except Exception as e:  # the evaluator raises many kinds; one value at a time says which
            if len(todo) == 1:
                self._errors[todo[0]] = f"{type(e).__name__}: {e}"
                return
            for n in todo:
                self.prefetch([n])

    def _evaluate(self, names: list) -> list:
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        needed, leaves, stack = set(), {}, list(names)
        while stack:
            name = stack.pop()
            node = self.producers.get(name)
            if name in self.initializers or node is None:
                leaves[name] = self.initializers.get(name)
                continue
            if id(node) in needed:
                continue
            needed.add(id(node))
            stack.extend(i for i in node.input if i)
        nodes = [n for n in self.graph.node if id(n) in needed]  # graph order is topological
        inits = []
        for name, tensor in leaves.items():
            if tensor is None:  # a constant of an enclosing graph
                tensor = self._numpy_helper.from_array(self.parent.value(name), name)
            inits.append(tensor)
        outputs = [helper.make_empty_tensor_value_info(n) for n in names]
        graph = helper.make_graph(nodes, "constants", [], outputs, initializer=inits)
        try:
            return ReferenceEvaluator(helper.make_model(graph, opset_imports=self.opsets)).run(None, {})
        except RuntimeError as e:
            if "No implementation" not in str(e) or not _same_in_latest(nodes, self.opsets):
                raise
        # The evaluator implements some operators only from a later opset (DequantizeLinear
        # from 19); every node here means the same there (checked above), so fold there.
        import onnx

        latest = [helper.make_opsetid("", onnx.defs.onnx_opset_version())] + \
            [o for o in self.opsets if o.domain not in ("", "ai.onnx")]
        return ReferenceEvaluator(helper.make_model(graph, opset_imports=latest)).run(None, {})


# Operators whose later versions only added types or attributes with defaults that keep the
# earlier meaning; any other operator must have the same schema in both opsets.
_ADDITIVE = {"DequantizeLinear", "QuantizeLinear", "Cast", "Identity", "Reshape", "Transpose", "Constant",
             "ConstantOfShape"}


def _same_in_latest(nodes, opsets) -> bool:
    import onnx

    version = next((o.version for o in opsets if o.domain in ("", "ai.onnx")), None)
    if version is None:
        return False
    latest = onnx.defs.onnx_opset_version()
    for node in nodes:
        if node.op_type in _ADDITIVE:
            continue
        try:
            old = onnx.defs.get_schema(node.op_type, version).since_version
            new = onnx.defs.get_schema(node.op_type, latest).since_version
        except Exception:  # SchemaError: an operator onnx does not know
            return False
        if old != new:
            return False
    return True


def walk(scope: Scope) -> Iterator[tuple]:
    """Yield ``(scope, node)`` for every node of ``scope``'s graph and, depth first after the
    node that holds them, of its subgraphs (each in a child scope whose ``path`` names it)."""
    from onnx import AttributeProto

    for index, node in enumerate(scope.graph.node):
        yield scope, node
        label = node.name or f"{node.op_type}_{index}"
        for attr in node.attribute:
            graphs = [attr.g] if attr.type == AttributeProto.GRAPH else \
                list(attr.graphs) if attr.type == AttributeProto.GRAPHS else []
            for i, g in enumerate(graphs):
                seg = attr.name if len(graphs) == 1 else f"{attr.name}[{i}]"
                path = f"{scope.path}/{label}/{seg}" if scope.path else f"{label}/{seg}"
                yield from walk(Scope(g, scope.opsets, scope, path))


def tensor_shapes(model) -> dict:
    """``{tensor name: tuple of int or None per axis}`` from ONNX shape inference over the whole
    model (subgraphs included); an empty dict when inference fails."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # shape inference refuses some valid models; shapes are then unknown
        inferred = model
    shapes: dict = {}

    def visit(graph):
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            t = vi.type.tensor_type
            if t.HasField("shape"):
                shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        for t in graph.initializer:
            shapes[t.name] = tuple(t.dims)
        for node in graph.node:
            for attr in node.attribute:
                for g in ([attr.g] if attr.type == 5 else list(attr.graphs) if attr.type == 10 else []):
                    visit(g)

    visit(inferred.graph)
    return shapes
