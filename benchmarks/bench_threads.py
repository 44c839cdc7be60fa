"""Thread scaling on large single layers: 1 vs 2 threads for DC weights, Winograd weights and
feature data (jobs of 1 MiB or more are split across threads)."""
import numpy as np
import pytest

import npupack
from npupack.nvdla import pack_feature, pack_weights

rng = np.random.default_rng(0)
W8 = rng.integers(-128, 128, (512, 512, 3, 3), dtype=np.int8)
W16 = rng.standard_normal((512, 512, 3, 3)).astype(np.float16)
X8 = rng.integers(-128, 128, (8, 64, 112, 112), dtype=np.int8)
CASES = {
    "dc int8 (512,512,3,3)": (lambda out: pack_weights(W8, out=out), pack_weights(W8).weight.size),
    "winograd fp16 (512,512,3,3)": (lambda out: pack_weights(W16, kind="winograd", out=out),
                                    pack_weights(W16, kind="winograd").weight.size),
    "feature int8 (8,64,112,112)": (lambda out: pack_feature(X8, out=out), pack_feature(X8).size),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def bench_threads(measure, case, threads):
    fn, nbytes = CASES[case]
    out = np.empty(nbytes, np.uint8)

    def run():
        with npupack.num_threads(threads):
            fn(out)

    measure(f"{case}, {threads} thread(s)", "npupack", nbytes, run)
