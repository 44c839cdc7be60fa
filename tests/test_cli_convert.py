"""`npupack convert` (docs/formats.md §5): .npy -> raw -> .npy round trips, the written bytes
against the NumPy references of tests/reference (written from docs/kneron.md §6.1,
docs/nvdla.md §3.2 and docs/openvino.md §3.2), refusals with exit status 2."""
import json

import numpy as np
import pytest

from npupack.cli import main
from tests.reference import blocked, kneron_horizon, nvdla as ref_nvdla

RNG = np.random.default_rng(44)


def _convert(capsys, *argv):
    status = main(["convert", *map(str, argv)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return captured.out


@pytest.mark.parametrize("fmt, opts, x, reference", [
    ("kneron:1W16C8B", ["--target", "kl720"], RNG.integers(-128, 128, (1, 20, 3, 5), dtype=np.int8),
     lambda x: kneron_horizon.kneron_v1_pack(x[0], "kl720", "1W16C8B")),
    ("kneron:16W1C8B", ["--target", "kl520"], RNG.integers(-128, 128, (3, 2, 5), dtype=np.int8),
     lambda x: kneron_horizon.kneron_v1_pack(x, "kl520", "16W1C8B")),
    ("nvdla:feature", ["--precision", "fp16"], RNG.standard_normal((2, 20, 3, 3)).astype(np.float16),
     lambda x: ref_nvdla.pack_feature_vectorised(x, atom_bytes=32)),
    ("openvino:b_fs_yx_fsv16", [], RNG.standard_normal((2, 20, 3, 3)).astype(np.float32),
     lambda x: blocked.pack(x, "bfyx", "bfyx", [("f", 16, None)])),
])
def test_round_trip_npy_raw_npy(tmp_path, capsys, fmt, opts, x, reference):
    src, raw, back = tmp_path / "in.npy", tmp_path / "x.bin", tmp_path / "out.npy"
    np.save(src, x)
    _convert(capsys, src, "--to", fmt, *opts, "-o", raw)
    assert raw.read_bytes() == reference(x).tobytes()
    _convert(capsys, raw, "--from", fmt, *opts, "--shape", ",".join(map(str, x.shape)), "--dtype", x.dtype.name,
             "-o", back)
    y = np.load(back)
    assert y.dtype == x.dtype and np.array_equal(y, x)
    # raw logical tensors in and out
    raw_in, raw_out, raw_back = tmp_path / "x.raw", tmp_path / "p.bin", tmp_path / "y.raw"
    raw_in.write_bytes(x.astype(x.dtype.newbyteorder("<")).tobytes())
    shape = ",".join(map(str, x.shape))
    _convert(capsys, raw_in, "--to", fmt, *opts, "--shape", shape, "--dtype", x.dtype.name, "-o", raw_out)
    assert raw_out.read_bytes() == raw.read_bytes()
    _convert(capsys, raw_out, "--from", fmt, *opts, "--shape", shape, "--dtype", x.dtype.name, "-o", raw_back)
    assert raw_back.read_bytes() == raw_in.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.npy", "x.bin", "out.npy", "x.raw", "p.bin",
                                                                 "y.raw"])  # no temporary left behind


def test_json_summary_and_packed_npy(tmp_path, capsys):
    x = RNG.integers(-128, 128, (1, 5, 3, 4), dtype=np.int8)
    np.save(tmp_path / "in.npy", x)
    out = _convert(capsys, tmp_path / "in.npy", "--to", "horizon:NHWC", "--param", "stride=400,80,16,1", "-o",
                   tmp_path / "p.npy", "--json")
    summary = json.loads(out)
    assert summary["format"] == "horizon:NHWC" and summary["direction"] == "pack"
    assert summary["params"] == {"stride": [400, 80, 16, 1]} and summary["shape"] == [1, 5, 3, 4]
    packed = np.load(tmp_path / "p.npy")
    assert packed.dtype == np.uint8 and summary["bytes_in"] == x.nbytes
    expect = np.zeros(400, np.uint8)  # docs/horizon.md §3: element idx at sum(idx * stride), max stride * extent
    n, h, w, c = np.indices(x.shape)
    expect[n * 400 + h * 80 + w * 16 + c] = x.view(np.uint8)
    assert np.array_equal(packed, expect)


@pytest.mark.parametrize("argv, message", [
    (["--to", "kneron:1W16C8", "--target", "kl720"], "did you mean 'kneron:1W16C8B'"),
    (["--to", "kneron:1W16C8B"], "target"),
    (["--to", "kneron:1W16C8B", "--target", "kl999"], "target"),
    (["--to", "openvino:b_fs_yx_fsv16", "--precision", "fp16"], "precision: not a parameter"),
    (["--to", "openvino:b_fs_yx_fsv16", "--dtype", "float32"], "--dtype"),
    (["--to", "openvino:b_fs_yx_fsv16", "--shape", "1,2,3,4"], "--shape"),
    (["--from", "openvino:b_fs_yx_fsv16"], "--shape"),
    (["--from", "openvino:b_fs_yx_fsv16", "--shape", "1,2,3,4", "--dtype", "int8"], "uint8"),
    (["--to", "nvdla:feature", "--param", "groups"], "KEY=VALUE"),
])
def test_refusals_exit_2(tmp_path, capsys, argv, message):
    x = RNG.integers(-128, 128, (1, 5, 3, 4), dtype=np.int8)
    np.save(tmp_path / "in.npy", x)
    assert main(["convert", str(tmp_path / "in.npy"), *argv, "-o", str(tmp_path / "out.bin")]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""
    assert not (tmp_path / "out.bin").exists()


def test_refuses_raw_of_the_wrong_size_and_the_input_as_output(tmp_path, capsys):
    raw = tmp_path / "x.bin"
    raw.write_bytes(bytes(100))
    argv = ["convert", str(raw), "--from", "kneron:1W16C8B", "--target", "kl720", "--shape", "1,20,3,5",
            "--dtype", "int8"]
    assert main([*argv, "-o", str(tmp_path / "y.npy")]) == 2
    assert "holds 100 bytes" in capsys.readouterr().err
    assert main(["convert", str(raw), "--to", "onednn:nchw", "--shape", "1,1,10,10", "--dtype", "int8",
                 "-o", str(raw)]) == 2
    assert "input file" in capsys.readouterr().err and raw.read_bytes() == bytes(100)
    assert main(["convert", str(raw), "--to", "onednn:nchw", "--shape", "1,1,10,11", "--dtype", "int8",
                 "-o", str(tmp_path / "z.bin")]) == 2
    assert "holds 100 bytes" in capsys.readouterr().err
