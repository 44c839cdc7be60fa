"""atheris target: the WMB/WGS decompressor on arbitrary bytes (truncated masks, short DATA,
wrong group sizes) and compress -> decompress round trips.
Run: python fuzz/fuzz_decompress.py -max_total_time=60
Any exception other than ValueError / TypeError is a finding."""
import sys

import atheris

with atheris.instrument_imports():
    import numpy as np

    from npupack import nvdla

PRECISIONS = ("int8", "int16", "fp16")


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    precision = PRECISIONS[fdp.ConsumeIntInRange(0, 2)]
    n = fdp.ConsumeIntInRange(-1, 4096)
    group = fdp.ConsumeIntInRange(0, 512)
    wmb = np.frombuffer(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 600)), np.uint8)
    wgs = np.frombuffer(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64)), np.uint8)
    payload = np.frombuffer(fdp.ConsumeBytes(fdp.remaining_bytes()), np.uint8)
    try:
        out = nvdla.decompress_weights(payload, wmb, precision=precision, n_elements=n, wgs=wgs,
                                       kernel_group_elements=group)
        assert out.size == n
    except (ValueError, TypeError):
        pass
    es = 1 if precision == "int8" else 2
    stream = payload[: payload.size // es * es]
    try:
        d, m, g = nvdla.compress_weights(stream, precision=precision, kernel_group_elements=group)
    except (ValueError, TypeError):
        return
    back = nvdla.decompress_weights(d, m, precision=precision, n_elements=stream.size // es, wgs=g,
                                    kernel_group_elements=group)
    if back.view(np.uint8).tobytes() != stream.tobytes():
        raise AssertionError("compress/decompress round trip failed")


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
