"""Arrays whose last byte ends a page followed by an inaccessible one (Linux, mprotect through
libc): a kernel that reads past the array crashes the test instead of reading stray bytes."""
import contextlib
import ctypes
import mmap
import sys

import numpy as np
import pytest

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through libc")


@contextlib.contextmanager
def before_guard_page(data: np.ndarray):
    """A copy of ``data`` (same shape and dtype) ending right at a PROT_NONE page, for the
    duration of the block."""
    page = mmap.PAGESIZE
    region = mmap.mmap(-1, 2 * page + data.nbytes)
    raw = np.frombuffer(region, np.uint8)
    guard = (raw.ctypes.data + data.nbytes + page - 1) // page * page  # the first page boundary after data
    start = guard - data.nbytes - raw.ctypes.data
    copy = raw[start:start + data.nbytes].view(data.dtype).reshape(data.shape)
    copy[...] = data
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    assert libc.mprotect(guard, page, 0) == 0  # PROT_NONE
    try:
        yield copy
    finally:
        # Read and write again: the mapping goes when the last view of it does.
        assert libc.mprotect(guard, page, 3) == 0
