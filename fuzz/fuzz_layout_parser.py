"""atheris target: the layout grammar and the oneDNN tag parser, then packing a small tensor
through whatever parses. Run: python fuzz/fuzz_layout_parser.py -max_total_time=60
Any exception other than ValueError / TypeError is a finding."""
import sys

import atheris

with atheris.instrument_imports():
    import numpy as np

    import npupack


MAX_BYTES = 1 << 26


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    text = fdp.ConsumeUnicodeNoSurrogates(24)
    dims = [fdp.ConsumeIntInRange(0, 5) for _ in range(fdp.ConsumeIntInRange(0, 5))]
    for parse in (npupack.Layout.parse, npupack.Layout.from_onednn):
        try:
            layout = parse(text)
        except (ValueError, TypeError):
            continue
        x = np.arange(int(np.prod(dims)), dtype=np.int16).reshape(dims)
        try:
            # Tiles can legitimately ask for gigabytes of padding ("O6O6O6..."): that is a big
            # request, not a bug, and would only exhaust the fuzzer's memory.
            if layout.nbytes(x.shape, x.dtype) > MAX_BYTES:
                continue
            packed = npupack.pack(x, layout)
        except (ValueError, TypeError):
            continue
        back = npupack.unpack(packed, layout, x.shape, x.dtype)
        if not np.array_equal(back, x):
            raise AssertionError(f"round trip failed for {text!r} {dims}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
