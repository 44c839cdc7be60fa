"""How many threads the C++ kernels may use.

Large jobs (about 1 MiB of output or more) are split across threads; small ones stay on the
calling thread. The threads are a pool of persistent workers, started on first use: worker p
always runs part p of a job (the same slice of a buffer stays with the same core from call to
call), an idle worker polls for about 200 microseconds before it sleeps, and a forked child starts
its own pool. While one call uses the pool, a concurrent call from another Python thread runs on
its own thread (the GIL is released while a kernel runs, so such calls run in parallel without
oversubscribing the cores).
"""
from __future__ import annotations

import contextlib

import numpy as np

from npupack import _core

__all__ = ["set_num_threads", "get_num_threads", "num_threads"]


def set_num_threads(n) -> None:
    """Let the kernels use ``n`` threads (an int >= 1), or the machine's hardware threads when
    ``n`` is None or 0 (the default). Applies process-wide, to calls that start afterwards.
    Raises TypeError for a non-integer, ValueError for a negative ``n``."""
    _core.set_num_threads(_check(n))


def _check(n) -> int:
    if n is None:
        return 0
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n: expected an integer number of threads, got {n!r}")
    if n < 0:
        raise ValueError(f"n: must be >= 1 (or 0 / None for the machine's threads), got {n}")
    if n > 2**31 - 1:
        raise ValueError(f"n: must be < 2**31, got {n}")
    return int(n)


def get_num_threads() -> int:
    """Threads the kernels may use (>= 1)."""
    return _core.get_num_threads()


def num_threads(n):
    """``with npupack.num_threads(1): ...`` - set the thread count for a block, then restore it.
    ``n`` as for :func:`set_num_threads`; its errors are raised here, by the call, not only when
    the block is entered."""
    _check(n)
    return _scoped(n)


@contextlib.contextmanager
def _scoped(n):
    before = get_num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        set_num_threads(before)
