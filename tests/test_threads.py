"""Threads: the kernels give the same bytes with 1 and several threads on layers large enough to
be split, and 8 Python threads packing different formats at once give exactly the sequential
results (the GIL is released inside the kernels)."""
import threading

import numpy as np
import pytest

import npupack
from npupack import kneron, openvino
from npupack.nvdla import pack_feature, pack_pixels, pack_weights, unpack_feature, unpack_weights


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def jobs(rng):
    """Name -> zero-argument packer, each producing bytes; sizes above the 1 MiB threshold."""
    w8 = rng.integers(-128, 128, (512, 512, 3, 3), dtype=np.int8)
    wh = rng.standard_normal((256, 320, 3, 3)).astype(np.float16)
    x = rng.integers(-128, 128, (2, 64, 96, 96), dtype=np.int8)
    img = rng.integers(0, 256, (480, 640, 4), dtype=np.uint8)
    k = rng.integers(-128, 128, (1, 3, 512, 512), dtype=np.int8)
    return {
        "dc int8": lambda: pack_weights(w8).weight,
        "dc fp16 grouped": lambda: pack_weights(wh[:, :80], groups=4).weight,
        "winograd fp16": lambda: pack_weights(wh, kind="winograd").weight,
        "winograd int8": lambda: pack_weights(w8, kind="winograd", scale=4).weight,
        "compressed": lambda: np.concatenate([pack_weights(np.where(w8 > 60, w8, 0), compress=True).weight]),
        "feature": lambda: pack_feature(x),
        "openvino": lambda: openvino.pack(x, "b_fs_yx_fsv16"),
        "pixels": lambda: pack_pixels(img, "T_A8B8G8R8").planes[0],
        "kneron": lambda: kneron.pack(k, "4W4C8B", chip="kl720"),
        "unpack dc": lambda: unpack_weights(pack_weights(w8)).view(np.uint8).reshape(-1),
        "unpack feature": lambda: unpack_feature(pack_feature(x), x.shape, np.int8).view(np.uint8).reshape(-1),
    }


def test_thread_count_setting():
    before = npupack.get_num_threads()
    assert before >= 1
    with npupack.num_threads(3):
        assert npupack.get_num_threads() == 3
    assert npupack.get_num_threads() == before
    npupack.set_num_threads(None)
    assert npupack.get_num_threads() >= 1
    with pytest.raises(ValueError):
        npupack.set_num_threads(-1)
    with pytest.raises(TypeError):
        npupack.set_num_threads(1.5)
    npupack.set_num_threads(before)


def test_same_bytes_with_1_and_4_threads(rng):
    for name, job in jobs(rng).items():
        with npupack.num_threads(1):
            one = job()
        with npupack.num_threads(4):
            four = job()
        assert np.array_equal(one, four), name


def test_eight_python_threads_match_sequential(rng):
    table = jobs(rng)
    names = list(table)[:8]
    sequential = {n: table[n]() for n in names}
    results, errors = {}, []
    barrier = threading.Barrier(len(names))

    def run(name):
        try:
            barrier.wait()
            for _ in range(3):
                results.setdefault(name, []).append(table[name]())
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((name, e))

    threads = [threading.Thread(target=run, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for name in names:
        assert all(np.array_equal(r, sequential[name]) for r in results[name]), name


def _pack_in_child(w):
    with npupack.num_threads(2):
        return pack_weights(w).weight


def test_pool_survives_fork_and_thread_count_changes(rng):
    """The workers persist between calls: a forked child (which has none of them) still packs
    with several threads, and growing / shrinking the count between calls changes no byte."""
    import multiprocessing

    w = rng.integers(-128, 128, (512, 512, 3, 3), dtype=np.int8)
    with npupack.num_threads(1):
        expected = pack_weights(w).weight
    for n in (2, 3, 1, 4, 2):  # the pool is in use (and has grown) before the fork
        with npupack.num_threads(n):
            assert np.array_equal(pack_weights(w).weight, expected), n
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply_async(_pack_in_child, (w,)).get(timeout=60)
    assert np.array_equal(child, expected)



def test_pool_under_changing_counts_from_several_python_threads(rng):
    """Jobs that need different numbers of workers, submitted back to back from four Python
    threads (the pool serves one, the others run serially): every result is byte-identical and
    nothing hangs (workers that skip a job must not mistake the next one for it)."""
    w = rng.integers(-128, 128, (256, 512, 3, 3), dtype=np.int8)
    with npupack.num_threads(1):
        expected = pack_weights(w).weight
    errors = []

    def run(seed):
        try:
            for i in range(12):
                npupack.set_num_threads(2 + (seed + i) % 3)
                assert np.array_equal(pack_weights(w).weight, expected)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    before = npupack.get_num_threads()
    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    npupack.set_num_threads(before)
    assert not any(t.is_alive() for t in threads) and not errors
