"""Differential fuzzer of the public API, run under a subprocess supervisor.

Each draw (from a seed) picks an entry (generic pack/unpack, OpenVINO, NVDLA feature and weights,
compression, Kneron, Horizon, prune, explain), a layout, a dtype (numbers, big-endian numbers and
the kinds that are not numbers: object, strings, structured, datetime), a shape, a view (reversed,
strided, transposed) and an ``out=`` buffer (none, right, too small, misaligned, non-contiguous,
read-only, not uint8, overlapping the input). A result must equal the engine's reference path
(``offset_of`` per element) and round-trip; the input must be unchanged and ``out`` written only
within the result. A ValueError / TypeError is a refusal. Anything else is a finding, and so is a
worker that dies by a signal: the supervisor then saves the draw's seed and description.

Run: python fuzz/fuzz_api.py --seconds 60 [--seed N] [--findings DIR]
     python fuzz/fuzz_api.py --replay SEED      (one draw in this process, with its traceback)
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

NUMERIC = ["i1", "u1", "<i2", ">i2", "<u2", "<f2", ">f2", "<i4", ">i4", "<f4", ">f4", "<f8", "<i8", "?", "<c8"]
NOT_NUMBERS = ["O", "U1", "S2", "V4", [("a", "<i2"), ("b", "u1"), ("c", "u1")], "M8[s]", "m8[us]", "V8"]
LAYOUTS = ["NCHW16c", "NHWC", "nChw8c", "NCHW4c2c", "ABcd8b8a4b", "OIHW8i16o2i", "NCHW32c", "CNHW3c"]
OV_FORMATS = ["b_fs_yx_fsv16", "b_fs_yx_fsv32", "bs_fs_yx_bsv16_fsv16", "os_is_yx_isv16_osv16", "bfyx", "byxf"]
OUT_KINDS = ["none", "right", "small", "odd", "strided", "read_only", "uint16", "overlap", "bytearray"]

# Results of a worker, as the first word of its stdout lines.
RESULT, REFUSED, FINDING = "ok", "refused", "finding"


class Finding(Exception):
    """A result that is wrong (not a refusal): differs from the reference or changed an input."""


def draw_dtype(rnd: random.Random):
    return np.dtype(rnd.choice(NOT_NUMBERS) if rnd.random() < 0.2 else rnd.choice(NUMERIC))


def make_array(rnd: random.Random, shape, dtype) -> np.ndarray:
    """Values of ``dtype`` (any kind) in a random view of a larger array."""
    n = int(np.prod(shape))
    gen = np.random.default_rng(rnd.getrandbits(32))
    if dtype.kind == "O":
        a = np.array([int(v) for v in gen.integers(-5, 5, n)] or [], dtype=object).reshape(shape)
    elif dtype.kind in "biufcMm":
        a = gen.integers(-100, 100, n).astype(dtype).reshape(shape) if dtype.kind != "b" else \
            (gen.integers(0, 2, n) == 1).reshape(shape)
        a = a.astype(dtype)
    else:
        a = np.frombuffer(gen.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).tobytes(), dtype).reshape(shape)
    view = rnd.choice(["c", "reversed", "strided", "fortran"]) if a.ndim else "c"
    if view == "reversed":
        return np.flip(np.flip(a).copy())  # negative strides over the same values
    if view == "strided":
        big = np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        return big[..., ::2]
    if view == "fortran":
        return np.asfortranarray(a)
    return a.copy()


def make_out(rnd: random.Random, kind: str, nbytes: int, x: np.ndarray):
    """An ``out=`` of ``kind`` for a result of about ``nbytes`` bytes."""
    size = max(nbytes, 1) + rnd.choice([0, 1, 64])
    if kind == "none":
        return None
    if kind == "right":
        return np.full(size, 0xEE, np.uint8)
    if kind == "small":
        return np.zeros(max(0, nbytes - rnd.randint(1, 64)), np.uint8)
    if kind == "odd":
        return np.zeros(size + 1, np.uint8)[1:]
    if kind == "strided":
        return np.zeros(2 * size, np.uint8)[::2]
    if kind == "read_only":
        o = np.zeros(size, np.uint8)
        o.flags.writeable = False
        return o
    if kind == "uint16":
        return np.zeros(size, np.uint16)
    if kind == "bytearray":
        return bytearray(size)
    # overlap: a uint8 view of the input's own memory, when it has one
    base = x.base if isinstance(x, np.ndarray) and x.base is not None and x.dtype.kind != "O" else x
    if isinstance(base, np.ndarray) and base.dtype.kind != "O" and base.flags.c_contiguous:
        raw = base.reshape(-1).view(np.uint8)
        return raw[rnd.randint(0, max(0, raw.size - 1)):]
    return np.zeros(size, np.uint8)


def reference_pack(bound, x: np.ndarray) -> bytes:
    """The engine's reference path: offset_of per element (docs/design.md §2.2)."""
    return bytes(bound.pack(np.ascontiguousarray(x.astype(bound.dtype)), reference=True))


def run_draw(seed: int) -> str:
    """One draw; returns RESULT or REFUSED, raises Finding (or anything else) for a finding."""
    import npupack
    from npupack import horizon, kneron, nvdla
    from npupack import openvino as ov
    from npupack.explain import explain_lines, resolve_layout

    rnd = random.Random(seed)
    entry = rnd.choice(["pack", "unpack", "bind", "openvino", "feature", "weights", "compress", "decompress",
                        "kneron", "horizon", "prune", "explain"])
    dtype = draw_dtype(rnd)
    rank4 = tuple(rnd.randint(1, 9) for _ in range(4))
    out_kind = rnd.choice(OUT_KINDS)
    x = make_array(rnd, rank4, dtype)
    before = snapshot(x)
    out = None
    try:
        if entry == "pack":
            text = rnd.choice(LAYOUTS)
            bound = npupack.Layout.parse(text).bind(rank4, dtype) if dtype.kind in "biufc" else None
            out = make_out(rnd, out_kind, bound.nbytes if bound else 64, x)
            got = npupack.pack(x, text, out=out)
            check_out_tail(out, out_kind, got.size)
            if bytes(got) != reference_pack(bound, x):
                raise Finding(f"pack {text}: differs from the reference path")
            back = npupack.unpack(got, text, rank4, dtype)
            if not np.array_equal(back.view(np.uint8), np.ascontiguousarray(x.astype(back.dtype)).view(np.uint8)):
                raise Finding(f"unpack {text}: does not give x back")
        elif entry == "unpack":
            text = rnd.choice(LAYOUTS)
            buf = np.frombuffer(np.random.default_rng(seed).bytes(rnd.randint(0, 20000)), np.uint8)
            npupack.unpack(buf, text, rank4 if rnd.random() < 0.9 else (1, 10**6, 10**6, 10**3), dtype)
        elif entry == "bind":
            lay = npupack.Layout.parse(rnd.choice(LAYOUTS))
            b = lay.bind(rank4, dtype)
            if rnd.random() < 0.5:
                out = make_out(rnd, out_kind, b.nbytes, x)
                b.pack(x, out=out, pad_value=rnd.choice([0, 1, -1, 2.5]))
            else:  # arbitrary bytes read back: object elements would be forged pointers
                junk = np.frombuffer(np.random.default_rng(seed).bytes(b.nbytes + rnd.choice([0, -1])), np.uint8)
                repr(b.unpack(junk))
        elif entry == "openvino":
            fmt = rnd.choice(OV_FORMATS)
            out = make_out(rnd, out_kind, 1 << 16, x)
            got = ov.pack(x, fmt, out=out)
            back = ov.unpack(got, fmt, x.shape, x.dtype.newbyteorder("<"))
            if not np.array_equal(back, x):
                raise Finding(f"openvino {fmt}: round trip")
        elif entry == "feature":
            out = make_out(rnd, out_kind, 1 << 16, x)
            nvdla.pack_feature(x, out=out, precision=rnd.choice([None, "int8", "int16", "fp16"]))
        elif entry == "weights":
            kind = rnd.choice(["dc", "dc", "winograd", "deconv", "image"])
            kw = dict(kind=kind, compress=rnd.choice([False, True, "auto"]), groups=rnd.choice([1, 1, 2]),
                      precision=rnd.choice([None, "int8", "fp16"]))
            if kind == "image":
                kw["pixel_format"] = "T_A8B8G8R8"
            if kind == "deconv":
                kw["stride"] = (2, 2)
            out = make_out(rnd, out_kind, 1 << 16, x)
            ws = nvdla.pack_weights(x, out=out, **kw)
            if kind == "dc" and not isinstance(ws, tuple):
                back = nvdla.unpack_weights(ws)
                if not np.array_equal(back.astype(np.float64), x.astype(back.dtype).astype(np.float64)) and \
                        x.dtype.kind in "iu" and ws.precision != "fp16":
                    raise Finding("pack_weights dc: round trip")
        elif entry == "compress":
            stream = x.reshape(-1)
            out = make_out(rnd, out_kind, stream.nbytes, x)
            d, m, g = nvdla.compress_weights(stream, precision=rnd.choice(["int8", "int16", "fp16"]),
                                             kernel_group_elements=rnd.choice([8, 16, 3, 2**40]), out=out)
        elif entry == "decompress":
            gen = np.random.default_rng(seed)
            n = rnd.choice([0, 7, 64, 1000, 2**40, 2**62])
            nvdla.decompress_weights(gen.integers(0, 256, rnd.randint(0, 300), dtype=np.uint8),
                                     gen.integers(0, 256, rnd.randint(0, 200), dtype=np.uint8),
                                     precision=rnd.choice(["int8", "int16", "fp16"]), n_elements=n)
        elif entry == "kneron":
            layout = rnd.choice(["1W16C8B", "16W1C8B", "4W4C8B", "16W1C8BHL", "1W16C8BHL"])
            chip = rnd.choice(["kl520", "kl720", "kl730", "kl830"])
            kw = {}
            if chip in ("kl730", "kl830"):
                kw["stride_npu"] = kneron.predict_stride_npu(x.shape, layout)
            out = make_out(rnd, out_kind, 1 << 16, x)
            got = kneron.pack(x, layout, chip=chip, out=out, **kw)
            kneron.unpack(got, layout, x.shape, chip=chip, allow_input_only=True, **kw)
        elif entry == "horizon":
            aligned = tuple(v + rnd.choice([0, 0, 3]) for v in rank4)
            out = make_out(rnd, out_kind, 1 << 16, x)
            got = horizon.pad(x, aligned_shape=aligned, out=out)
            back = horizon.strip(got, rank4, x.dtype.newbyteorder("<"), aligned_shape=aligned)
            if not np.array_equal(back, x):
                raise Finding("horizon: round trip")
        elif entry == "prune":
            nvdla.prune(x, rnd.random(), precision=rnd.choice([None, "int8", "fp16"]))
        else:
            lines = list(explain_lines(resolve_layout(rnd.choice(LAYOUTS)), rank4, limit=rnd.choice([None, 0, 3, 50])))
            if not lines:
                raise Finding("explain: no lines")
    except (ValueError, TypeError):
        return REFUSED
    finally:
        if snapshot(x) != before:
            raise Finding(f"{entry}: the input was modified")
    if out_kind == "overlap" and isinstance(out, np.ndarray) and np.may_share_memory(out, x):
        raise Finding(f"{entry}: accepted an out= overlapping the input")
    return RESULT


def snapshot(x: np.ndarray):
    """The input's contents, to compare after the call (bytes; object elements by identity)."""
    return [id(v) for v in x.ravel()] if x.dtype.kind == "O" else x.tobytes()


def check_out_tail(out, kind: str, used: int) -> None:
    """A larger ``out=`` is written only within the result."""
    if kind == "right" and not (np.asarray(out)[used:] == 0xEE).all():
        raise Finding("out: written past the result")


def worker(first: int, count: int, deadline: float) -> int:
    """Draws first .. first+count-1 until ``deadline`` (time.time()), one line each on stdout
    (flushed before the draw runs, so the supervisor knows which draw a crash interrupted)."""
    crash_at = int(os.environ.get("NPUPACK_FUZZ_CRASH_AT", -1))  # --selftest: a draw that segfaults
    for seed in range(first, first + count):
        if time.time() > deadline:
            break
        print(f"start {seed}", flush=True)
        if seed == crash_at:
            import ctypes

            ctypes.string_at(0)
        try:
            kind = run_draw(seed)
        except Exception as e:  # a finding: not a refusal
            print(f"{FINDING} {seed} {type(e).__name__}: {str(e)[:300]}", flush=True)
            return 3
        print(f"{kind} {seed}", flush=True)
    return 0


def supervise(seconds: float, seed: int, batch: int, findings: Path) -> int:
    counts = {RESULT: 0, REFUSED: 0, FINDING: 0, "crash": 0}
    end = time.monotonic() + seconds
    next_seed = seed
    bad = []
    while time.monotonic() < end:
        deadline = time.time() + max(1.0, end - time.monotonic())
        try:
            proc = subprocess.run([sys.executable, __file__, "--worker", str(next_seed), str(batch), str(deadline)],
                                  capture_output=True, text=True, timeout=end - time.monotonic() + 60)
        except subprocess.TimeoutExpired as e:  # a draw that hangs
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            starts = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("start ")]
            counts["crash"] += 1
            bad.append({"seed": starts[-1] if starts else next_seed, "error": "hang (timeout)"})
            break
        last = None
        for line in proc.stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word == "start":
                last = int(rest)
            elif word in (RESULT, REFUSED):
                counts[word] += 1
                last = None
            elif word == FINDING:
                counts[FINDING] += 1
                bad.append({"seed": int(rest.split()[0]), "error": rest})
                last = None
        if proc.returncode < 0 and last is not None:  # killed by a signal inside draw `last`
            counts["crash"] += 1
            bad.append({"seed": last, "error": f"signal {-proc.returncode}", "stderr": proc.stderr[-2000:]})
        elif proc.returncode not in (0, 3):
            counts["crash"] += 1
            bad.append({"seed": last, "error": f"worker exit {proc.returncode}", "stderr": proc.stderr[-2000:]})
        if proc.returncode == 3:
            next_seed = bad[-1]["seed"] + 1
        elif last is not None:
            next_seed = last + 1
        else:
            next_seed += batch
    for entry in bad:
        findings.mkdir(parents=True, exist_ok=True)
        path = findings / f"fuzz_api-{entry['seed']}.json"
        path.write_text(json.dumps(entry, indent=1))
        print(f"finding: seed {entry['seed']}: {entry['error']} (saved to {path}; replay with --replay "
              f"{entry['seed']})", file=sys.stderr)
        if entry.get("stderr"):
            print(entry["stderr"], file=sys.stderr)
    draws = counts[RESULT] + counts[REFUSED] + counts[FINDING] + counts["crash"]
    print(f"fuzz_api: {draws} draws in {seconds:.0f} s: {counts[RESULT]} results, {counts[REFUSED]} refusals, "
          f"{counts[FINDING]} wrong results, {counts['crash']} crashes")
    return 1 if bad else 0


def selftest(findings: Path) -> int:
    """A supervisor that missed a segfault would pass every run: make draw 5 crash and check
    that it is the one reported and saved."""
    os.environ["NPUPACK_FUZZ_CRASH_AT"] = "5"
    print("fuzz_api selftest: draw 5 segfaults on purpose; the finding below is expected", flush=True)
    try:
        code = supervise(2.0, 0, 10, findings)
    finally:
        del os.environ["NPUPACK_FUZZ_CRASH_AT"]
    saved = findings / "fuzz_api-5.json"
    if code != 1 or not saved.exists() or "signal" not in json.loads(saved.read_text())["error"]:
        print("fuzz_api selftest: the crash of draw 5 was not reported", file=sys.stderr)
        return 1
    saved.unlink()
    print("fuzz_api selftest: a worker killed by a signal is reported with its draw")
    return 0


def main(argv=None) -> int:
    if argv is None and len(sys.argv) == 5 and sys.argv[1] == "--worker":
        return worker(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=None, help="first draw (default: from the clock)")
    p.add_argument("--batch", type=int, default=2000, help="draws per worker process")
    p.add_argument("--findings", type=Path, default=Path("fuzz-findings"))
    p.add_argument("--replay", type=int, default=None, help="run one draw here and show its traceback")
    p.add_argument("--selftest", action="store_true",
                   help="check that the supervisor reports a worker killed by a signal, with its draw")
    args = p.parse_args(argv)
    if args.selftest:
        return selftest(args.findings)
    if args.replay is not None:
        try:
            print(run_draw(args.replay))
        except Exception:
            traceback.print_exc()
            return 1
        return 0
    seed = args.seed if args.seed is not None else int(time.time()) % 2**31 * 1000
    print(f"fuzz_api: first seed {seed}")
    return supervise(args.seconds, seed, args.batch, args.findings)


if __name__ == "__main__":
    sys.exit(main())
