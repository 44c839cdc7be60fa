"""Outputs a user can trust: exit statuses that tell coverage, output folders that are npupack's
or refused and swapped in whole, unique names, nothing read from outside the model's folder,
malformed ONNX fields as errors naming the node and attribute, and a bulk run that survives a
dead worker."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from npupack.bulk import pack_many
from npupack.cli import main
from npupack.job import pack_model
from npupack.model import load_onnx
from npupack.nvdla import NV_FULL, unpack_weights
from npupack.readback import load_packed, verify_packed


def save(path, nodes, inits, x_shape=(1, 4, 8, 8)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
                              initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def conv_model(path, n=2, names=None, seed=0, bias=False, **attrs):
    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        ins = [prev, f"w{i}"]
        if bias:
            inits.append(numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), f"b{i}"))
            ins.append(f"b{i}")
        nodes.append(helper.make_node("Conv", ins, [f"y{i}"], name=(names or [f"c{i}" for i in range(n)])[i],
                                      pads=[1, 1, 1, 1], **attrs))
        prev = f"y{i}"
    return save(path, nodes, inits)


# --- exit status tells coverage -------------------------------------------------------------

def test_unsupported_layer_exits_3_unless_allow_partial(tmp_path, capsys):
    w3 = np.ones((4, 4, 1, 1, 1), np.float32)  # a 3-d convolution: left out as unsupported
    path = save(tmp_path / "m.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], name="vol")],
                [numpy_helper.from_array(w3, "w")], x_shape=(1, 4, 2, 2, 2))
    assert main(["pack", str(path), "-o", str(tmp_path / "o"), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "layer vol" in err and "skipped" in err
    assert main(["pack", str(path), "-o", str(tmp_path / "o"), "--no-progress", "--allow-partial", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_pack_many_with_a_failed_and_a_partial_model_exits_1(tmp_path, capsys):
    """A failure outranks layers left out: 1, not 3, and not 0 with --allow-partial either."""
    w3 = np.ones((4, 4, 1, 1, 1), np.float32)
    partial = save(tmp_path / "p.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], name="vol")],
                   [numpy_helper.from_array(w3, "w")], x_shape=(1, 4, 2, 2, 2))
    missing = tmp_path / "missing.onnx"
    args = ["pack-many", str(partial), str(missing), "-o", str(tmp_path / "o"), "--no-progress"]
    assert main(args) == 1
    assert main(args + ["--allow-partial"]) == 1
    assert main(["pack-many", str(partial), "-o", str(tmp_path / "o2"), "--no-progress"]) == 3
    capsys.readouterr()


def test_failed_layer_exits_1_and_names_node_and_attribute(tmp_path, capsys):
    path = conv_model(tmp_path / "m.onnx", strides=[0, 1])
    assert main(["pack", str(path), "-o", str(tmp_path / "o"), "--no-progress", "--precision", "fp16",
                 "--winograd", "auto"]) == 1
    err = capsys.readouterr().err
    assert "node 'c0' (Conv): attribute 'strides': expected integers >= 1, got [0, 1]" in err


def test_integer_operands_without_calibration_are_one_warning_and_exit_0(tmp_path, capsys):
    path = conv_model(tmp_path / "m.onnx", n=3, bias=True)
    assert main(["pack", str(path), "-o", str(tmp_path / "o"), "--no-progress", "--json"]) == 0
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "warning: 3 integer bias / batch-norm operands not packed" in lines[0]
    summary = json.loads(captured.out)
    assert summary["exit_status"] == 0 and summary["layers"] == {"Conv": {"packed": 3}}
    assert summary["operands"] == {"packed": 0, "skipped": 3, "error": 0}


def test_operand_failures_are_counted(tmp_path, capsys):
    path = conv_model(tmp_path / "m.onnx", n=1, bias=True)
    calib = tmp_path / "c.json"
    calib.write_text(json.dumps({"x": {"scale": 0.1}}))  # no scale for the output tensor: the operand fails
    assert main(["pack", str(path), "-o", str(tmp_path / "o"), "--no-progress", "--calibration", str(calib)]) == 1
    captured = capsys.readouterr()
    assert "operands: 0 packed, 0 skipped, 1 failed" in captured.out and "no scale for the output" in captured.err


# --- output folders ---------------------------------------------------------------------------

def test_a_folder_that_is_not_npupacks_is_refused(tmp_path, capsys):
    path = conv_model(tmp_path / "m.onnx")
    mine = tmp_path / "o"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own file")
    assert main(["pack", str(path), "-o", str(mine), "--no-progress"]) == 2
    assert "holds no npupack manifest" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "my own file"
    assert main(["pack", str(path), "-o", str(mine), "--no-progress", "--force"]) == 0
    assert not (mine / "notes.txt").exists()


def test_repacking_leaves_no_stale_file(tmp_path):
    out = tmp_path / "o"
    pack_model(conv_model(tmp_path / "big.onnx", n=4), out, config=NV_FULL, compress="on", progress=False)
    pack_model(conv_model(tmp_path / "small.onnx", n=1), out, config=NV_FULL, progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == sorted({"manifest.json", manifest["layers"][0]["file"]})
    assert verify_packed(out)["problems"] == []
    (out / "left.wmb.bin").write_bytes(b"x")  # a file no manifest lists is reported
    assert any("left.wmb.bin" in p for p in verify_packed(out)["problems"])
    assert [p.name for p in tmp_path.iterdir() if ".npupack-" in p.name] == []


def test_long_and_duplicate_node_names(tmp_path):
    names = ["n" * 300, "dup", "dup", "dup#2"]
    path = conv_model(tmp_path / "m.onnx", n=4, names=names)
    manifest = pack_model(path, tmp_path / "o", config=NV_FULL, progress=False)
    keys = [e["key"] for e in manifest["layers"]]
    assert len(set(keys)) == 4 and all(len(e["file"]) < 80 for e in manifest["layers"])
    loaded = load_packed(tmp_path / "o")
    assert len(loaded) == 4 and list(loaded) == keys
    for i, layer in enumerate(load_onnx(path)):  # by index too, each the weights of its own node
        q = unpack_weights(loaded[i])
        assert q.shape == layer.weights.shape


# --- malformed ONNX fields --------------------------------------------------------------------

def _conv(**attrs):
    return helper.make_node("Conv", ["x", "w"], ["y"], name="bad", **attrs)


def _float_attr(name, value):
    return helper.make_attribute(name, value, attr_type=onnx.AttributeProto.FLOAT)


@pytest.mark.parametrize("case, match", [
    ("strides_inf", "node 'bad' (Conv): attribute 'strides': expected INTS, got type FLOAT"),
    ("group_inf", "node 'bad' (Conv): attribute 'group': expected INT, got type FLOAT"),
    ("group_1.5", "node 'bad' (Conv): attribute 'group': expected INT, got type FLOAT"),
    ("strides_ab", "node 'bad' (Conv): attribute 'strides': expected INTS, got type STRING"),
    ("no_inputs", "node 'bad' (Conv): has no input 'X', 'W'"),
    ("bias_length", "node 'bad' (Conv): input 'B'"),
    ("group_divides", "node 'bad' (Conv): attribute 'group': 3 does not divide the 4 channels"),
    ("unknown_dtype", "node 'bad' (Conv)"),
])
def test_malformed_conv_fields_are_errors_naming_node_and_attribute(tmp_path, capsys, case, match):
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    node, inits = _conv(), [w]
    if case in ("strides_inf", "group_inf", "group_1.5"):
        name, value = case.split("_")
        node.attribute.append(_float_attr(name, float(value)))
    elif case == "strides_ab":
        node.attribute.append(helper.make_attribute("strides", "ab"))
    elif case == "no_inputs":
        del node.input[:]
    elif case == "bias_length":
        node.input.append("b")
        inits.append(numpy_helper.from_array(np.ones(3, np.float32), "b"))
    elif case == "group_divides":
        node.attribute.append(helper.make_attribute("group", 3))
    elif case == "unknown_dtype":
        w.data_type = 99
    path = tmp_path / "m.onnx"
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    assert main(["pack", str(path), "-o", str(tmp_path / "o"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


@pytest.mark.parametrize("case", ["negative_var", "no_inputs"])
def test_malformed_batchnorm_is_an_error(tmp_path, capsys, case):
    c = 4
    params = {n: numpy_helper.from_array(np.full(c, v, np.float32), n)
              for n, v in (("s", 1.0), ("bb", 0.0), ("m", 0.0), ("v", -1.0 if case == "negative_var" else 1.0))}
    w = numpy_helper.from_array(np.ones((c, 4, 1, 1), np.float32), "w")
    bn = helper.make_node("BatchNormalization", ["y", "s", "bb", "m", "v"] if case != "no_inputs" else [], ["z"],
                          name="bn")
    path = save(tmp_path / "m.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], name="c"), bn],
                [w, *params.values()])
    assert main(["pack", str(path), "-o", str(tmp_path / "o"), "--no-progress", "--precision", "fp16"]) == 1
    err = capsys.readouterr().err
    expected = "input 'input_var' (tensor 'v'): variances must be >= 0" if case == "negative_var" else \
        "has no input 'X', 'scale', 'B', 'input_mean', 'input_var'"
    assert "node 'bn' (BatchNormalization)" in err and expected in err


def test_empty_onnx_file_is_an_error(tmp_path, capsys):
    (tmp_path / "m.onnx").write_bytes(b"")
    assert main(["pack", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o")]) == 2
    assert "empty (0 bytes)" in capsys.readouterr().err


# --- nothing outside the folder ----------------------------------------------------------------

def external_model(folder, seed=0):
    folder.mkdir(exist_ok=True)
    path = conv_model(folder / "m.onnx", n=1, seed=seed)
    model = onnx.load(path)
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                    size_threshold=0)
    return path


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_external_data_must_be_a_regular_file_inside_the_folder(tmp_path, kind):
    path = external_model(tmp_path / "model")
    data = tmp_path / "model" / "w.bin"
    outside = tmp_path / "secret.bin"
    outside.write_bytes(data.read_bytes())
    data.unlink()
    if kind == "symlink":
        data.symlink_to(outside)
    elif kind == "hardlink":
        os.link(outside, data)
    else:
        os.mkfifo(data)
    # The check is npupack's own (onnx never reads the data), so it holds with any onnx >= 1.14.
    with pytest.raises(ValueError, match="w.bin"):
        load_onnx(path)


def test_changed_external_data_is_repacked(tmp_path):
    path = external_model(tmp_path / "model")
    assert pack_many([path], tmp_path / "o")["models"][0]["status"] == "packed"
    assert pack_many([path], tmp_path / "o")["models"][0]["status"] == "skipped"
    data = tmp_path / "model" / "w.bin"
    data.write_bytes(np.ones(len(data.read_bytes()) // 4, np.float32).tobytes())
    assert pack_many([path], tmp_path / "o")["models"][0]["status"] == "packed"


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_verify_reads_regular_files_only_and_never_blocks(tmp_path, kind):
    out = tmp_path / "o"
    pack_model(conv_model(tmp_path / "m.onnx", n=1), out, config=NV_FULL, progress=False)
    name = json.loads((out / "manifest.json").read_text())["layers"][0]["file"]
    moved = tmp_path / "elsewhere.bin"
    os.replace(out / name, moved)
    if kind == "symlink":
        (out / name).symlink_to(moved)
    elif kind == "hardlink":
        os.link(moved, out / name)
    else:
        os.mkfifo(out / name)
    problems = verify_packed(out)["problems"]
    assert len(problems) == 1 and any(w in problems[0] for w in ("symbolic link", "hard links", "not a regular file"))
    with pytest.raises(ValueError):
        load_packed(out)


# --- pack-many ----------------------------------------------------------------------------------

def test_pack_many_names_are_unique_and_a_foreign_folder_is_kept(tmp_path):
    (tmp_path / "m1").mkdir()
    (tmp_path / "m2").mkdir()
    specs = [conv_model(tmp_path / "m1" / "a.onnx", seed=1), conv_model(tmp_path / "m2" / "a.onnx", seed=2),
             conv_model(tmp_path / "a-2.onnx", seed=3)]
    out = tmp_path / "o"
    s = pack_many(specs, out)
    dirs = [r["dir"] for r in s["models"]]
    assert len(set(dirs)) == 3 and dirs[2] == "a-2" and all(r["status"] == "packed" for r in s["models"])
    assert [r["status"] for r in pack_many(specs, out)["models"]] == ["skipped"] * 3
    assert [r["dir"] for r in pack_many(specs, out)["models"]] == dirs  # stable
    (out / "b").mkdir()
    (out / "b" / "mine.txt").write_text("keep")
    row = pack_many([conv_model(tmp_path / "b.onnx")], out)["models"][0]
    assert row["status"] == "error" and "no npupack manifest" in row["reason"]
    assert (out / "b" / "mine.txt").read_text() == "keep"
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_an_empty_sets_manifest_is_a_problem_and_repacked(tmp_path):
    w = numpy_helper.from_array(np.ones((4, 2, 2, 2), np.float32), "w")
    path = save(tmp_path / "m.onnx", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2])],
                [w])
    out = tmp_path / "o"
    pack_many([path], out)
    mpath = out / "m" / "manifest.json"
    m = json.loads(mpath.read_text())
    m["layers"][0]["sets"] = []
    mpath.write_text(json.dumps(m))
    assert any("no weight sets" in p for p in verify_packed(out / "m")["problems"])
    assert pack_many([path], out)["models"][0]["status"] == "packed"


def test_a_dead_worker_is_one_error_row(tmp_path, monkeypatch):
    import multiprocessing as mp

    if "fork" not in mp.get_all_start_methods():
        pytest.skip("the worker inherits the patched function only when forked")
    import npupack.bulk as bulk

    real = bulk.pack_one

    def dies_on_m1(spec, *args, **kw):
        if spec.endswith("m1.onnx"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(spec, *args, **kw)

    monkeypatch.setattr(bulk, "pack_one", dies_on_m1)
    specs = [conv_model(tmp_path / f"m{i}.onnx", seed=i) for i in range(3)]
    seen = []
    s = pack_many(specs, tmp_path / "o", jobs=2, on_result=lambda row, write: seen.append(row["dir"]))
    assert [r["status"] for r in s["models"]] == ["packed", "error", "packed"]
    assert "worker packing it died" in s["models"][1]["reason"] and sorted(seen) == ["m0", "m1", "m2"]
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["totals"]["error"] == 1


def test_killed_pack_leaves_old_or_new_output(tmp_path):
    """SIGKILL a `pack` at a few random points: the folder holds the old output or the new one,
    each verifying, and a re-run settles (no staging folder left)."""
    old = conv_model(tmp_path / "old.onnx", n=2, seed=1)
    new = conv_model(tmp_path / "new.onnx", n=6, seed=2)
    out = tmp_path / "o"
    pack_model(old, out, config=NV_FULL, progress=False)
    rng = np.random.default_rng(7)
    cmd = [sys.executable, "-m", "npupack", "pack", str(new), "-o", str(out), "--no-progress", "--compress", "on"]
    for delay in rng.uniform(0.2, 1.2, size=4):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        model = json.loads((out / "manifest.json").read_text())["model"]["file"]
        assert model in ("old.onnx", "new.onnx") and verify_packed(out)["problems"] == []
    assert subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode == 0
    assert json.loads((out / "manifest.json").read_text())["model"]["file"] == "new.onnx"
    assert verify_packed(out)["problems"] == []
    assert [p.name for p in tmp_path.iterdir() if ".npupack-" in p.name] == []


def test_verify_reports_what_was_not_packed(tmp_path, capsys):
    w3 = np.ones((4, 4, 1, 1, 1), np.float32)
    path = save(tmp_path / "m.onnx", [helper.make_node("Conv", ["x", "w"], ["y"], name="vol")],
                [numpy_helper.from_array(w3, "w")], x_shape=(1, 4, 2, 2, 2))
    main(["pack", str(path), "-o", str(tmp_path / "o"), "--no-progress", "--allow-partial"])
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "o")]) == 3
    captured = capsys.readouterr()
    assert "not packed: skipped: layer vol" in captured.err and "1 layers / operands not packed" in captured.out
    assert main(["verify", str(tmp_path / "o"), "--allow-partial", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["not_packed"][0][0] == "unsupported"


def test_ctrl_c_stops_pack_many_cleanly_and_a_rerun_resumes(tmp_path):
    specs = [str(conv_model(tmp_path / f"m{i:03d}.onnx", n=3, seed=i)) for i in range(120)]
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "npupack", "pack-many", *specs, "-o", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()  # lines come as models finish, not at the end
    assert ": packed:" in first
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    statuses = [r["status"] for r in summary["models"]]
    assert summary["totals"]["interrupted"] and "not started" in statuses and statuses[0] == "packed"
    assert set(statuses) <= {"packed", "not started"}
    done = statuses.count("packed")
    again = pack_many(specs, out)
    assert [r["status"] for r in again["models"]][:done] == ["skipped"] * done
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_killed_pack_many_settles_on_rerun(tmp_path):
    """SIGKILL pack-many (two workers) at a few random points; each model folder then verifies
    or is absent, and a re-run packs the rest and leaves no temporary folder."""
    specs = [str(conv_model(tmp_path / f"m{i}.onnx", n=3, seed=i)) for i in range(8)]
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "npupack", "pack-many", *specs, "-o", str(out), "--jobs", "2", "--no-progress"]
    for delay in np.random.default_rng(3).uniform(0.3, 1.0, size=3):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=os.setpgrp)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)  # the workers too
        proc.wait()
        for _ in range(100):  # until the workers are gone as well (their folders are then stale)
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        for d in out.iterdir() if out.exists() else ():
            if d.is_dir() and not d.name.startswith("."):
                assert verify_packed(d)["problems"] == []
    assert subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode == 0
    assert verify_packed(out)["problems"] == []
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_dask_cluster_with_a_killed_worker(tmp_path):
    """A worker process of a Dask LocalCluster dies while packing one model: that model is an
    error row, the others are packed, summary.json is written."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("distributed is not installed; CI installs tests/requirements.txt")
        pytest.skip("distributed (the dask extra) is not installed")
    specs = [str(conv_model(tmp_path / f"m{i}.onnx", seed=i)) for i in range(4)]

    class KillsOne:
        """The real client, whose task for m1 kills the worker process running it."""

        def __init__(self, client):
            self.client = client

        def map(self, fn, tasks, **kw):
            def run(task, fn=fn):
                if task[0].endswith("m1.onnx"):
                    os.kill(os.getpid(), signal.SIGKILL)
                return fn(task)
            return self.client.map(run, tasks, **kw)

        def gather(self, *a, **kw):
            return self.client.gather(*a, **kw)

        def cancel(self, *a, **kw):
            return self.client.cancel(*a, **kw)

    # No retries: a task on the worker that dies fails at once (Dask also fails the tasks that
    # worker held queued: those are error rows too, and the batch goes on).
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        s = pack_many(specs, tmp_path / "o", client=KillsOne(client))
        rows = s["models"]
        assert rows[1]["status"] == "error" and "KilledWorker" in rows[1]["reason"]
        assert all(r["status"] == "packed" or "KilledWorker" in r["reason"] for r in rows)
        assert rows[0]["status"] == "packed" or rows[2]["status"] == "packed" or rows[3]["status"] == "packed"
        assert json.loads((tmp_path / "o" / "summary.json").read_text())["models"] == rows
        again = pack_many(specs, tmp_path / "o", client=client)  # the cluster goes on; finished models are kept
    assert [r["status"] for r in again["models"]] == ["skipped" if r["status"] == "packed" else "packed" for r in rows]


def test_a_model_replaced_while_it_is_packed_is_packed_again(tmp_path, monkeypatch):
    """The checksums are taken before the model is read: a model replaced during its pack does
    not pass as up to date next time."""
    import npupack.job as job

    path = conv_model(tmp_path / "m.onnx", seed=1)
    real = job.load_onnx

    def replaced_meanwhile(p):
        layers = real(p)
        conv_model(tmp_path / "m.onnx", seed=2)
        return layers

    monkeypatch.setattr(job, "load_onnx", replaced_meanwhile)
    assert pack_many([path], tmp_path / "o")["models"][0]["status"] == "packed"
    monkeypatch.setattr(job, "load_onnx", real)
    assert pack_many([path], tmp_path / "o")["models"][0]["status"] == "packed"
    assert pack_many([path], tmp_path / "o")["models"][0]["status"] == "skipped"


def test_pack_many_json_and_progress_bar(tmp_path, capsys, monkeypatch):
    specs = [str(conv_model(tmp_path / f"m{i}.onnx", seed=i)) for i in range(2)]
    assert main(["pack-many", *specs, "-o", str(tmp_path / "o"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["exit_status"] == 0 and [r["status"] for r in summary["models"]] == ["packed", "packed"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: the bar is drawn on stderr
    assert main(["pack-many", *specs, "-o", str(tmp_path / "o2")]) == 0
    captured = capsys.readouterr()
    assert "2/2" in captured.err and captured.out.count(": packed:") == 2
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["pack-many", *specs, "-o", str(tmp_path / "o3"), "--no-progress"]) == 0
    assert "2/2" not in capsys.readouterr().err
