"""oneDNN v3.2's CPU reorder (PyPI wheel onednn-cpu-gomp==2023.2.0) through ctypes, as a test oracle
(docs/openvino.md §12). `Oracle.load()` returns None when the library is not installed."""
from __future__ import annotations

import ctypes
import glob
import os
import sys

import numpy as np

_DT = {np.dtype(np.float16): 1, np.dtype(np.float32): 3, np.dtype(np.int32): 4, np.dtype(np.int8): 5,
       np.dtype(np.uint8): 6}
_ARG_FROM, _ARG_TO = 1, 17


class _ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


class Oracle:
    def __init__(self, lib):
        self.lib = lib
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.dnnl_memory_desc_create_with_string_tag.argtypes = [ctypes.POINTER(vp), ctypes.c_int, i64 * 12,
                                                                 ctypes.c_int, ctypes.c_char_p]
        lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        lib.dnnl_memory_desc_get_size.argtypes = [vp]
        lib.dnnl_engine_create.argtypes = [ctypes.POINTER(vp), ctypes.c_int, ctypes.c_size_t]
        lib.dnnl_stream_create.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_uint]
        lib.dnnl_memory_create.argtypes = [ctypes.POINTER(vp), vp, vp, vp]
        lib.dnnl_reorder_primitive_desc_create.argtypes = [ctypes.POINTER(vp), vp, vp, vp, vp, vp]
        lib.dnnl_primitive_create.argtypes = [ctypes.POINTER(vp), vp]
        lib.dnnl_primitive_execute.argtypes = [vp, vp, ctypes.c_int, ctypes.POINTER(_ExecArg)]
        for f in ("dnnl_stream_wait", "dnnl_primitive_destroy", "dnnl_primitive_desc_destroy", "dnnl_memory_destroy",
                  "dnnl_memory_desc_destroy", "dnnl_stream_destroy", "dnnl_engine_destroy"):
            getattr(lib, f).argtypes = [vp]
        self.engine, self.stream = vp(), vp()
        self._ok(lib.dnnl_engine_create(ctypes.byref(self.engine), 1, 0), "engine")
        self._ok(lib.dnnl_stream_create(ctypes.byref(self.stream), self.engine, 1), "stream")

    @staticmethod
    def load():
        paths = glob.glob(os.path.join(sys.prefix, "lib", "libdnnl.so.3*"))
        if not paths:
            return None
        try:
            return Oracle(ctypes.CDLL(sorted(paths)[0]))
        except OSError:
            return None

    @staticmethod
    def _ok(status, what):
        if status != 0:
            raise RuntimeError(f"oneDNN {what} failed with status {status}")

    def _md(self, shape, dtype, tag):
        md = ctypes.c_void_p()
        dims = (ctypes.c_int64 * 12)(*(list(shape) + [0] * (12 - len(shape))))
        self._ok(self.lib.dnnl_memory_desc_create_with_string_tag(ctypes.byref(md), len(shape), dims, _DT[dtype],
                                                                   tag.encode()), f"memory desc {tag}")
        return md

    def reorder(self, x: np.ndarray, tag: str) -> np.ndarray:
        """Bytes of the C-contiguous array x reordered from its plain layout to `tag`."""
        lib = self.lib
        x = np.ascontiguousarray(x)
        plain = "".join(chr(ord("a") + i) for i in range(x.ndim))
        src_md, dst_md = self._md(x.shape, x.dtype, plain), self._md(x.shape, x.dtype, tag)
        size = lib.dnnl_memory_desc_get_size(dst_md)
        dst = np.full(size, 0xAB, dtype=np.uint8)  # proves the tails are written
        src_mem, dst_mem, pd, prim = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        try:
            self._ok(lib.dnnl_memory_create(ctypes.byref(src_mem), src_md, self.engine, x.ctypes.data), "memory")
            self._ok(lib.dnnl_memory_create(ctypes.byref(dst_mem), dst_md, self.engine, dst.ctypes.data), "memory")
            self._ok(lib.dnnl_reorder_primitive_desc_create(ctypes.byref(pd), src_md, self.engine, dst_md,
                                                            self.engine, None), "reorder desc")
            self._ok(lib.dnnl_primitive_create(ctypes.byref(prim), pd), "primitive")
            args = (_ExecArg * 2)(_ExecArg(_ARG_FROM, src_mem.value), _ExecArg(_ARG_TO, dst_mem.value))
            self._ok(lib.dnnl_primitive_execute(prim, self.stream, 2, args), "execute")
            self._ok(lib.dnnl_stream_wait(self.stream), "wait")
        finally:
            for h, f in ((prim, "dnnl_primitive_destroy"), (pd, "dnnl_primitive_desc_destroy"),
                         (src_mem, "dnnl_memory_destroy"), (dst_mem, "dnnl_memory_destroy"),
                         (src_md, "dnnl_memory_desc_destroy"), (dst_md, "dnnl_memory_desc_destroy")):
                if h:
                    getattr(lib, f)(h)
        return dst

    def prepare(self, x: np.ndarray, tag: str):
        """A reusable reorder (for benchmarks): returns (run, dst) where run() reorders x into dst."""
        lib = self.lib
        x = np.ascontiguousarray(x)
        plain = "".join(chr(ord("a") + i) for i in range(x.ndim))
        src_md, dst_md = self._md(x.shape, x.dtype, plain), self._md(x.shape, x.dtype, tag)
        dst = np.empty(lib.dnnl_memory_desc_get_size(dst_md), dtype=np.uint8)
        src_mem, dst_mem, pd, prim = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        self._ok(lib.dnnl_memory_create(ctypes.byref(src_mem), src_md, self.engine, x.ctypes.data), "memory")
        self._ok(lib.dnnl_memory_create(ctypes.byref(dst_mem), dst_md, self.engine, dst.ctypes.data), "memory")
        self._ok(lib.dnnl_reorder_primitive_desc_create(ctypes.byref(pd), src_md, self.engine, dst_md, self.engine,
                                                        None), "reorder desc")
        self._ok(lib.dnnl_primitive_create(ctypes.byref(prim), pd), "primitive")
        args = (_ExecArg * 2)(_ExecArg(_ARG_FROM, src_mem.value), _ExecArg(_ARG_TO, dst_mem.value))
        keep = (x, dst, args)  # oneDNN holds raw pointers to x and dst: run() keeps both alive

        def run():
            lib.dnnl_primitive_execute(prim, self.stream, 2, args)
            lib.dnnl_stream_wait(self.stream)
            return keep

        return run, dst
