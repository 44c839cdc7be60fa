"""Peak memory of each packer and unpacker: within 2.5x of its input + output (npupack._gate).

Marked slow and run only when selected (``pytest -m slow tests/test_peak_memory.py``; CI runs it
in its sanitizer-free pass, .ci/run): each case allocates a few hundred MB in a fresh Python
process and takes about a second, and under AddressSanitizer the resident size measures the
sanitizer's shadow memory, not ours. The measure is the process's peak resident size
(``VmHWM``, reset once the input is made) over its size before the call, plus the input: so
the input, the output and every temporary count."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

MB = 1 << 20

# name -> (code making `x` (the input), code making `y` (the output) from it). `x` is made and
# touched before the measured call; both run in a fresh process.
CASES = {
    "npupack.pack": ("x = rng.integers(-100, 100, (1, 64, 2048, 2048), dtype=np.int8)",
                     "y = npupack.pack(x, 'NCHW16c')"),
    "npupack.unpack": ("x = npupack.pack(rng.integers(-100, 100, (1, 64, 2048, 2048), dtype=np.int8), 'NCHW16c')",
                       "y = npupack.unpack(x, 'NCHW16c', (1, 64, 2048, 2048), np.int8)"),
    "openvino.pack": ("x = rng.integers(-100, 100, (1, 64, 2048, 2048), dtype=np.int8)",
                      "y = ov.pack(x, 'b_fs_yx_fsv32')"),
    "openvino.unpack": ("x = ov.pack(rng.integers(-100, 100, (1, 64, 2048, 2048), dtype=np.int8), 'b_fs_yx_fsv32')",
                        "y = ov.unpack(x, 'b_fs_yx_fsv32', (1, 64, 2048, 2048), np.int8)"),
    "pack_feature fp16": ("x = rng.standard_normal((1, 64, 1024, 1024), dtype=np.float32)",
                          "y = nvdla.pack_feature(x, precision='fp16')"),
    "pack_weights dc": ("x = rng.integers(-100, 100, (1024, 1024, 16, 16), dtype=np.int8)",
                        "y = nvdla.pack_weights(x).weight"),
    "pack_weights compress": ("x = rng.integers(-100, 100, (1024, 1024, 16, 16), dtype=np.int8) * "
                              "(rng.random((1024, 1024, 16, 16), dtype=np.float32) < 0.3).astype(np.int8)",
                              "y = nvdla.pack_weights(x, compress=True).weight"),
    "unpack_weights compressed": ("ws = nvdla.pack_weights(rng.integers(-100, 100, (1024, 1024, 16, 16), dtype=np.int8)"
                                  " * (rng.random((1024, 1024, 16, 16), dtype=np.float32) < 0.3).astype(np.int8), "
                                  "compress=True); x = ws.weight",
                                  "y = nvdla.unpack_weights(ws)"),
    "prune": ("x = rng.integers(-128, 128, (1024, 1024, 16, 16), dtype=np.int8)", "y = nvdla.prune(x, 0.5)"),
    "kneron.pack": ("x = rng.integers(-100, 100, (1, 64, 2048, 2048), dtype=np.int8)",
                    "y = kneron.pack(x, '1W16C8B', chip='kl720')"),
    "horizon.pad": ("x = rng.integers(-100, 100, (1, 2048, 2048, 60), dtype=np.int8)",
                    "y = horizon.pad(x, aligned_shape=(1, 2048, 2048, 64))"),
    "horizon.strip": ("x = horizon.pad(rng.integers(-100, 100, (1, 2048, 2048, 60), dtype=np.int8), "
                      "aligned_shape=(1, 2048, 2048, 64))",
                      "y = horizon.strip(x, (1, 2048, 2048, 60), 'S8', aligned_shape=(1, 2048, 2048, 64))"),
}

_PROGRAM = """
import json
import numpy as np
import npupack
from npupack import horizon, kneron, nvdla
from npupack import openvino as ov

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

rng = np.random.default_rng(0)
{make}
x_bytes = int(np.asarray(x).nbytes)
with open("/proc/self/clear_refs", "w") as f:  # the peak so far (making x) is forgotten
    f.write("5")
before = status("VmRSS")
{call}
y_bytes = int(np.asarray(y).nbytes)
print(json.dumps(dict(before=before, peak=status("VmHWM"), x=x_bytes, y=y_bytes)))
"""


@pytest.mark.parametrize("name", list(CASES))
def test_peak_memory_within_two_and_a_half_times_input_and_output(name):
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("the resident size under AddressSanitizer is its shadow memory")
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the peak resident size")
    make, call = CASES[name]
    program = _PROGRAM.replace("{make}", make).replace("{call}", call)
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["x"] >= 64 * MB, "the case is too small to measure"
    # The input is resident before the call; the call's own peak comes on top of it.
    used = r["peak"] - r["before"] + r["x"]
    assert used <= 2.5 * (r["x"] + r["y"]), f"{name}: peak {used / MB:.0f} MB for {r['x'] / MB:.0f} MB in, " \
                                            f"{r['y'] / MB:.0f} MB out"
