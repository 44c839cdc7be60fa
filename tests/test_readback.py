"""Reading a pack output directory back (npupack.readback, ``npupack verify``): the surfaces it
loads are the ones the job wrote, as rebuilt independently by tests/test_model.py's reader; a
changed, truncated or missing file, a manifest field that no longer matches and a file name that
leaves the directory are each reported, naming the layer."""
import json
import re

import numpy as np
import pytest

from npupack.bulk import pack_many
from npupack.cli import main
from npupack.job import pack_model
from npupack.nvdla import NV_FULL, unpack_weights
from npupack.readback import load_packed, verify_packed
from tests.test_bulk import tiny_model
from tests.test_model import layer_surfaces, make_model


@pytest.fixture
def packed(tmp_path):
    """A model of an image-input stem, a depthwise layer and a deconvolution, packed one file per
    surface (fp16, with bias operands, compressed where smaller) and into one image (int8,
    compressed)."""
    path = tmp_path / "m.onnx"
    make_model(path, as_constant=False, rng=np.random.default_rng(3))
    dirs = {}
    for name, options in {"files": dict(precision="fp16", compress="auto"),
                          "image": dict(precision="int8", compress="on", image=True)}.items():
        dirs[name] = tmp_path / name
        pack_model(path, dirs[name], config=NV_FULL, progress=False, **options)
    return dirs


def _manifest(out):
    return json.loads((out / "manifest.json").read_text())


def _as_tuple(surfaces):
    return surfaces if isinstance(surfaces, tuple) else (surfaces,)


@pytest.mark.parametrize("mode", ["files", "image"])
def test_load_packed_gives_what_the_job_wrote(packed, mode):
    out = packed[mode]
    m = _manifest(out)
    loaded = load_packed(out)
    assert list(loaded) == [e["name"] for e in m["layers"] if e["status"] == "packed"] == ["stem", "Conv_1", "up"]
    for entry in m["layers"]:
        if mode == "image":
            break  # the reader of test_model reads files; the image's bytes are compared below
        mine = _as_tuple(loaded[entry["name"]])
        theirs = _as_tuple(layer_surfaces(entry, out, entry["logical_shape"], entry["group"]))
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs):
            assert np.array_equal(a.weight, b.weight) and a.kind == b.kind and a.phase == b.phase
            assert (a.wmb is None) == (b.wmb is None)
        assert np.array_equal(unpack_weights(loaded[entry["name"]]), unpack_weights(
            layer_surfaces(entry, out, entry["logical_shape"], entry["group"])))
    if mode == "image":
        image = np.fromfile(out / "image.bin", np.uint8)
        for entry in m["layers"]:
            for part, ws in zip(entry.get("sets", [entry]), _as_tuple(loaded[entry["name"]])):
                assert np.array_equal(ws.weight, image[part["offset"]:part["offset"] + part["size"]])
                assert ws.compressed and np.array_equal(ws.wmb, image[part["wmb"]["offset"]:][:part["wmb"]["size"]])


@pytest.mark.parametrize("mode", ["files", "image"])
def test_an_unchanged_directory_verifies(packed, mode, capsys):
    report = verify_packed(packed[mode])
    assert report["problems"] == [] and report["layers"] == 3
    parts = sum(len(e.get("sets", [e])) * (3 if mode == "image" else 1) for e in _manifest(packed[mode])["layers"])
    assert report["parts"] >= parts
    assert main(["verify", str(packed[mode])]) == 0
    assert "3 packed layers" in capsys.readouterr().out


def _first_file(out, suffix):
    return next(p for p in sorted(out.iterdir()) if p.name.endswith(suffix))


def _flip(path, offset=0):
    data = bytearray(path.read_bytes())
    data[offset] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, match", [
    (lambda out: _flip(_first_file(out, "stem.weight.bin")), r"layer 'stem' weight: .* have sha256"),
    (lambda out: _first_file(out, "set2.weight.bin").write_bytes(b"\0" * 5),
     r"layer 'up' set 2 weight: .* holds 5 of the 128 bytes"),
    (lambda out: _first_file(out, "Conv_1.weight.bin").unlink(), r"No such file"),
    (lambda out: _flip(_first_file(out, "stem.sdp.bin")), r"'stem' SDP operand: .* have sha256"),
])
def test_changed_files_are_reported(packed, damage, match, capsys):
    out = packed["files"]
    damage(out)
    problems = verify_packed(out)["problems"]
    assert len(problems) == 1 and re.search(match, problems[0]), problems
    assert main(["verify", str(out)]) == 1
    assert "1 problems" in capsys.readouterr().out
    if "SDP" not in match:
        with pytest.raises(OSError if "No such" in match else ValueError, match=match):
            load_packed(out)


def test_a_changed_image_names_the_image_and_the_layer(packed):
    out = packed["image"]
    stem = next(e for e in _manifest(out)["layers"] if e["name"] == "stem")
    _flip(out / "image.bin", stem["offset"])
    problems = verify_packed(out)["problems"]
    assert [p.split(":")[0] for p in problems] == ["layer 'stem' weight", "image"]


@pytest.mark.broken_manifest
@pytest.mark.parametrize("change, match", [
    (dict(kernel_groups=2), r"layer 'stem' does not unpack: surfaces.kernel_groups: 2, but image fp16 weights"),
    (dict(packed_shape=[4, 4, 3, 3]), r"layer 'stem' does not unpack: surfaces.packed_shape"),
    (dict(kind="winograd"), r"layer 'stem' does not unpack: surfaces: "),
    (dict(file="../m.onnx"), r"layer 'stem' weight: file '../m.onnx' is not a file name inside the directory"),
    (dict(encoding="compressed"), r"layer 'stem': the manifest entry has no 'wmb'"),
    (dict(size="640"), r"layer 'stem' weight: the manifest gives no valid offset, size and sha256"),
    (dict(logical_shape=4), r"layer 'stem': the manifest entry is malformed \(TypeError"),
])
def test_a_manifest_entry_that_does_not_match_is_reported(packed, change, match):
    out = packed["files"]
    m = _manifest(out)
    stem = next(e for e in m["layers"] if e["name"] == "stem")
    assert stem["encoding"] == "uncompressed"
    stem.update(change)
    (out / "manifest.json").write_text(json.dumps(m))
    problems = verify_packed(out)["problems"]
    assert len(problems) == 1 and re.search(match, problems[0]), problems


@pytest.mark.parametrize("change, match", [
    (dict(components=2), r"'stem' SDP operand does not unpack: operand.components: 2, but bias operands"),
    (dict(shape=[40]), r"'stem' SDP operand does not unpack: operand.data: 32 bytes, but a per_channel bias operand "
                       r"of shape \(40,\) is 96"),
    (dict(mode="per_layer"), r"'stem' SDP operand does not unpack: operand.shape: per_layer operands"),
    (dict(use=None), r"'stem' SDP operand does not unpack: operand.use: None is not one of"),
    (dict(shape=4), r"'stem' SDP operand: the manifest entry is malformed"),
])
def test_an_operand_entry_that_does_not_match_is_reported(packed, change, match):
    """The stem's fp16 bias (4 channels in one 16-element atom of 2-byte values: 32 bytes)."""
    out = packed["files"]
    m = _manifest(out)
    stem = next(e for e in m["layers"] if e["name"] == "stem")
    assert stem["sdp"]["use"] == "bias" and stem["sdp"]["size"] == 32
    stem["sdp"].update(change)
    (out / "manifest.json").write_text(json.dumps(m))
    problems = verify_packed(out)["problems"]
    assert len(problems) == 1 and re.search(match, problems[0]), problems


def test_not_a_pack_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        verify_packed(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(ValueError, match="is not JSON"):
        load_packed(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"summary": {}}))
    with pytest.raises(ValueError, match="not a manifest written by npupack pack"):
        verify_packed(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "nvdla", "config": {"name": "x"}, "layers": []}))
    with pytest.raises(ValueError, match="is not a valid pack manifest"):
        verify_packed(tmp_path)
    assert main(["verify", str(tmp_path)]) == 2


@pytest.mark.broken_manifest
@pytest.mark.parametrize("change, match", [
    (lambda m: m["layers"].append([1, 2]), r"layers is not a list of entries with a name"),
    (lambda m: m["layers"].append(7), r"layers is not a list of entries with a name"),
    (lambda m: m["layers"][0].pop("name"), r"layers is not a list of entries with a name"),
    (lambda m: m["layers"][0].update(name=["stem"]), r"layers is not a list of entries with a name"),
    (lambda m: m.update(batchnorms="bn"), r"batchnorms is not a list of entries with a name"),
    (lambda m: m.update(image=[0]), r"image is not an object"),
])
def test_a_manifest_of_the_wrong_structure_is_refused(packed, change, match):
    """Before, these escaped as AttributeError, KeyError or TypeError from the reader's loops."""
    out = packed["files"]
    m = _manifest(out)
    change(m)
    (out / "manifest.json").write_text(json.dumps(m))
    for read in (verify_packed, load_packed):
        with pytest.raises(ValueError, match="is not a valid pack manifest .*" + match):
            read(out)


@pytest.mark.broken_manifest
@pytest.mark.parametrize("where, change, match", [
    ("weight", dict(offset=2**70), r"layer 'stem' weight: \S+ holds 0 of the \d+ bytes at offset 11805916207\d+"),
    ("weight", dict(size=2**64), r"layer 'stem' weight: \S+ holds \d+ of the 18446744073709551616 bytes at offset 0"),
    ("sdp", dict(offset=2**63), r"'stem' SDP operand: \S+ holds 0 of the 32 bytes"),
    ("entry", dict(sdp="bias"), r"'stem' SDP operand: the manifest entry is not an object"),
])
def test_a_part_past_its_file_or_not_an_object_is_reported(packed, where, change, match):
    """An offset or size beyond a C long raised OverflowError from np.fromfile; a sdp entry that
    is not an object raised AttributeError."""
    out = packed["files"]
    m = _manifest(out)
    stem = next(e for e in m["layers"] if e["name"] == "stem")
    {"weight": stem, "sdp": stem["sdp"], "entry": stem}[where].update(change)
    (out / "manifest.json").write_text(json.dumps(m))
    problems = verify_packed(out)["problems"]
    assert len(problems) == 1 and re.search(match, problems[0]), problems


def test_the_real_model_verifies(ppocr_det_path, tmp_path):
    """The README's main job: every surface of PP-OCRv4's 64 layers reads back and unpacks."""
    pack_model(ppocr_det_path, tmp_path, config=NV_FULL, precision="int8", progress=False)
    report = verify_packed(tmp_path)
    assert report["problems"] == [] and report["layers"] == 64


def test_a_pack_many_directory_is_verified_model_by_model(tmp_path, capsys):
    good = [tiny_model(tmp_path / f"m{i}.onnx", i) for i in range(2)]
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx model")
    out = tmp_path / "zoo"
    pack_many(good, out)
    report = verify_packed(out)
    assert report["problems"] == [] and (report["models"], report["layers"]) == (2, 4)
    assert main(["verify", str(out)]) == 0 and "2 models, 4 packed layers" in capsys.readouterr().out
    _flip(_first_file(out / "m1", "a.weight.bin"))
    (problem,) = verify_packed(out)["problems"]
    assert problem.startswith("m1: layer 'a' weight: ") and "sha256" in problem
    assert main(["verify", str(out)]) == 1
    # A re-run repacks the damaged model (its manifest alone would say it is up to date).
    rows = pack_many([*good, broken], out)["models"]
    assert [r["status"] for r in rows] == ["skipped", "packed", "error"]
    (problem,) = verify_packed(out)["problems"]
    assert problem.startswith("broken: not packed (") and "ONNX" in problem


@pytest.mark.parametrize("summary, match", [
    ("{", r"is not a pack-many summary"),
    (json.dumps({"models": {}}), r"is not a pack-many summary"),
    (json.dumps({"models": [{"model": "m", "dir": "../m", "status": "packed"}]}), r"directory '../m' is not a name"),
    (json.dumps({"models": [{"model": "m", "dir": "gone", "status": "packed"}]}), r"^gone: .*manifest.json"),
])
def test_a_pack_many_summary_that_does_not_hold(tmp_path, summary, match):
    (tmp_path / "summary.json").write_text(summary)
    if "not a pack-many" in match:
        with pytest.raises(ValueError, match=match):
            verify_packed(tmp_path)
    else:
        (problem,) = verify_packed(tmp_path)["problems"]
        assert re.search(match, problem), problem
