"""The manifest of the pack job as a contract for compilers: its version, its JSON Schema
(shipped in the package as ``manifest.schema.json``), and the fields that describe a layer
(docs/manifest.md).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

__all__ = ["MANIFEST_VERSION", "manifest_schema", "validate_manifest", "layer_fields"]

#: Version of the manifest's structure (docs/manifest.md §1): the major number changes when a
#: field changes meaning or goes away, the minor one when fields are added.
MANIFEST_VERSION = "1.2"


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return (Path(__file__).with_name("manifest.schema.json")).read_text(encoding="utf-8")


def manifest_schema() -> dict:
    """The JSON Schema (draft 2020-12) of ``manifest.json`` as written by
    :func:`npupack.job.pack_model` (docs/manifest.md). Returns a new dict each call (safe to
    modify). Raises OSError only when the installed package lacks its schema file."""
    return json.loads(_schema_text())


def validate_manifest(manifest: dict) -> None:
    """Check ``manifest`` (a dict, as :func:`npupack.job.pack_model` returns or ``manifest.json``
    holds) against :func:`manifest_schema` with the ``jsonschema`` package. Raises
    ``jsonschema.ValidationError`` naming the first field that does not conform, ImportError
    without ``jsonschema`` (``pip install "npupack[onnx]"``)."""
    try:
        import jsonschema
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError('validating manifests needs the jsonschema package: pip install "npupack[onnx]"') from e
    jsonschema.validate(manifest, manifest_schema(), cls=jsonschema.Draft202012Validator)


def _ints(values):
    return None if values is None else [int(v) for v in values]


def layer_fields(layer) -> dict:
    """The geometry of one layer (a :class:`npupack.model.ConvLayer`) as manifest fields
    (docs/manifest.md §3): strides, dilations and pads in the packed 2-D order (H then W; ``pads``
    top, left, bottom, right with ``auto_pad`` resolved, None when it needs an input size shape
    inference did not give), ``auto_pad`` and the ONNX attributes as given, the subgraph path,
    the model's weight shape, transposed-convolution output fields, and a fully connected layer's
    folded R x S."""
    fields = {"path": layer.path, "strides": _ints(layer.strides),
              "pads": _ints(layer.pads) if layer.pads_resolved else None,
              "dilations": _ints(layer.dilations), "group": layer.group, "auto_pad": layer.auto_pad,
              "spatial_rank": layer.spatial_rank, "onnx_weight_shape": _ints(layer.onnx_weight_shape)}
    if layer.pads_given and (tuple(layer.pads_given) != tuple(layer.pads) or not layer.pads_resolved):
        fields["pads_given"] = _ints(layer.pads_given)
    if layer.op_type == "ConvTranspose":
        fields.update(output_padding=_ints(layer.output_padding) or [0] * len(layer.strides),
                      output_shape=_ints(layer.output_shape))
    if layer.fc_fold is not None:
        fields["fc"] = {"folded_rs": _ints(layer.fc_fold), "weight_order": layer.fc_order,
                        "input_shape": None if layer.input_shape is None else list(layer.input_shape)}
    if layer.bias_note:
        fields["bias_note"] = layer.bias_note
    return fields
