"""Bulk preparation: pack-many over several models (one directory each, a summary), resuming,
per-model errors that do not stop the batch, worker processes, a local in-process Dask
cluster, and the command line."""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from npupack.bulk import pack_many
from npupack.cli import main


def tiny_model(path, seed, k=8):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, 4, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((k, k, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="a", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["y", "w2"], ["z"], name="b")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.fixture
def models(tmp_path):
    good = [tiny_model(tmp_path / f"m{i}.onnx", i, 8 + 8 * i) for i in range(3)]
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not an onnx model")
    return good, bad


def digests(out, rows):
    return {r["dir"]: [layer.get("sha256") for layer in json.loads((out / r["dir"] / "manifest.json").read_text())
                       ["layers"]] for r in rows if r["status"] != "error"}


def test_pack_many_resume_and_errors(tmp_path, models):
    good, bad = models
    out = tmp_path / "out"
    s = pack_many([*good[:2], bad, good[2]], out)
    assert [r["status"] for r in s["models"]] == ["packed", "packed", "error", "packed"]
    assert "not a readable ONNX model" in s["models"][2]["reason"]
    assert s["totals"]["packed"] == 3 and s["totals"]["error"] == 1 and s["totals"]["layers"] == 6
    assert json.loads((out / "summary.json").read_text()) == s
    assert sorted(p.name for p in out.iterdir()) == ["m0", "m1", "m2", "summary.json"]  # nothing half-written
    # Re-run: finished models are skipped by checksum; a changed model and changed options repack.
    tiny_model(good[1], 99, 16)
    again = pack_many(good, out)
    assert [r["status"] for r in again["models"]] == ["skipped", "packed", "skipped"]
    other = pack_many(good[:1], out, precision="fp16")
    assert other["models"][0]["status"] == "packed"
    assert json.loads((out / "m0" / "manifest.json").read_text())["precision"] == "fp16"


def test_worker_processes_give_the_same_bytes(tmp_path, models):
    good, _ = models
    one = pack_many(good, tmp_path / "one")
    two = pack_many(good, tmp_path / "two", jobs=2)
    assert digests(tmp_path / "one", one["models"]) == digests(tmp_path / "two", two["models"])
    with pytest.raises(TypeError, match="jobs"):
        pack_many(good, tmp_path / "x", jobs=0)
    with pytest.raises(TypeError, match="options"):
        pack_many(good, tmp_path / "x", colour="blue")


def test_dask_local_cluster(tmp_path, models):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("distributed is not installed; CI installs tests/requirements.txt")
        pytest.skip("distributed (the dask extra) is not installed")
    good, bad = models
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        s = pack_many([*good, bad], tmp_path / "dask", client=client, image=True)
    assert [r["status"] for r in s["models"]] == ["packed", "packed", "packed", "error"]
    local = pack_many(good, tmp_path / "local", image=True)
    assert digests(tmp_path / "dask", s["models"]) == digests(tmp_path / "local", local["models"])
    image = "m0/image.bin"
    assert (tmp_path / "dask" / image).read_bytes() == (tmp_path / "local" / image).read_bytes()


def test_cli_pack_many(tmp_path, models, capsys):
    good, bad = models
    assert main(["pack-many", *map(str, good), "-o", str(tmp_path / "o"), "--jobs", "2"]) == 0
    assert "3 packed" in capsys.readouterr().out
    assert main(["pack-many", *map(str, good), str(bad), "-o", str(tmp_path / "o")]) == 1
    captured = capsys.readouterr()
    assert "3 up to date" in captured.out and "broken.onnx: error" in captured.err


@pytest.mark.parametrize("options, error, match", [
    (dict(target="nv_tiny"), ValueError, "target: unknown NVDLA configuration 'nv_tiny'"),
    (dict(target=None), TypeError, "target: expected a str"),
    (dict(quantize="per_tensor"), ValueError, "quantize: expected one of \\('per_kernel', 'per_filter'\\)"),
    (dict(pixel_format="T_RGB"), ValueError, "pixel_format: expected 'auto', None or a name"),
    (dict(winograd=True), ValueError, "winograd: expected one of"),
    (dict(compress="yes"), ValueError, "compress: expected one of"),
    (dict(target="nv_small", compress="on"), ValueError, "compress: config 'nv_small' has no sparse"),
    (dict(target="nv_small", precision="fp16"), ValueError, "precision"),
    (dict(image="no"), TypeError, "image: expected True or False"),
])
def test_pack_many_checks_its_options_before_any_model(tmp_path, models, options, error, match):
    """A bad option value is one error before anything is read or written; it used to become an
    error row per model (or per layer, for quantize), and an unknown pixel format a KeyError."""
    good, _ = models
    with pytest.raises(error, match=match):
        pack_many(good, tmp_path / "o", **options)
    assert not (tmp_path / "o").exists()


def test_pack_many_argument_types(tmp_path, models):
    good, _ = models
    # One path is not a list of them: its characters used to become one failed "model" each.
    with pytest.raises(TypeError, match="models: expected a list of model paths or names, got the single str"):
        pack_many(str(good[0]), tmp_path / "o")
    with pytest.raises(TypeError, match="models: .* got the single PosixPath"):
        pack_many(good[0], tmp_path / "o")
    with pytest.raises(TypeError, match="client: expected a dask.distributed.Client"):
        pack_many(good, tmp_path / "o", client="tcp://scheduler:8786")


def test_cli_pack_many_pixel_format(tmp_path, models, capsys):
    """pack-many takes the pack command's --pixel-format and --no-image: the first layer reads the
    model input (4 channels) and is packed as image-input weights unless told otherwise."""
    good, _ = models
    kinds = {}
    for name, flags in (("auto", []), ("rgbx", ["--pixel-format", "T_X8R8G8B8"]), ("dc", ["--no-image"])):
        assert main(["pack-many", str(good[0]), "-o", str(tmp_path / name), *flags]) == 0
        layer = json.loads((tmp_path / name / "m0" / "manifest.json").read_text())["layers"][0]
        kinds[name] = (layer["kind"], layer["pixel_format"])
    assert kinds == {"auto": ("image", "T_A8B8G8R8"), "rgbx": ("image", "T_X8R8G8B8"), "dc": ("dc", None)}
    assert main(["pack-many", str(good[0]), "-o", str(tmp_path / "bad"), "--pixel-format", "T_RGB"]) == 2
    assert "pixel_format: expected 'auto', None or a name" in capsys.readouterr().err
