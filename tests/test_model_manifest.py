"""The manifest as a contract: the shipped JSON Schema accepts every manifest the job writes (the
real PP-OCRv4 detector in each mode: image input, Winograd, compression, one image file,
deconvolution sets) and refuses broken ones, and docs/manifest.md describes every field the
schema names."""
import copy
import json
import re
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("onnx")  # the musllinux wheels' tests run without onnx

import npupack  # noqa: E402
from npupack.job import pack_model  # noqa: E402
from npupack.manifest import MANIFEST_VERSION, validate_manifest  # noqa: E402
from npupack.nvdla import NV_FULL  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "manifest.md"


@pytest.mark.parametrize("options", [dict(precision="int8"), dict(precision="int16", winograd="auto", compress="auto"),
                                     dict(precision="fp16", image=True, compress="on")],
                         ids=["int8", "int16-winograd-compress", "fp16-image"])
def test_real_model_manifests_validate(ppocr_det_path, tmp_path, options):
    manifest = pack_model(ppocr_det_path, tmp_path / "out", config=NV_FULL, progress=False, **options)
    validate_manifest(manifest)
    validate_manifest(json.loads((tmp_path / "out" / "manifest.json").read_text()))
    assert manifest["manifest_version"] == MANIFEST_VERSION
    kinds = {e.get("kind") for e in manifest["layers"]}
    assert "deconv" in kinds and "dc" in kinds  # the detector's head has transposed convolutions


def _broken(manifest):
    """Manifests that each break one rule of the schema."""
    for path, value in ((("manifest_version",), 2), (("layers", 0, "status"), "done"),
                        (("layers", 0, "scales"), [-1.0]), (("layers", 0, "sha256"), "xyz"),
                        (("summary", "packed"), -1)):
        m = copy.deepcopy(manifest)
        target = m
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        yield path, m
    m = copy.deepcopy(manifest)
    del m["layers"][0]["reason" if m["layers"][0]["status"] != "packed" else "packed_shape"]
    yield ("missing field",), m


def test_the_schema_refuses_broken_manifests(ppocr_det_path, tmp_path):
    manifest = pack_model(ppocr_det_path, tmp_path / "out", config=NV_FULL, progress=False)
    for path, m in _broken(manifest):
        with pytest.raises(jsonschema.ValidationError):
            validate_manifest(m)


def test_manifest_schema_is_a_fresh_valid_schema():
    schema = npupack.manifest_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    schema["title"] = "changed"
    assert npupack.manifest_schema()["title"] != "changed"


def _property_names(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties":
                yield from value
            yield from _property_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _property_names(value)


def test_docs_describe_every_field():
    text = DOC.read_text(encoding="utf-8")
    described = set(re.findall(r"`([a-z_0-9]+)`", text))
    missing = sorted(set(_property_names(npupack.manifest_schema())) - described)
    assert missing == []
