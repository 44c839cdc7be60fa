// Bindings of the batched transpose, for the kernel tests (docs/design.md §4.9).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "npupack/cpu.hpp"
#include "npupack/errors.hpp"
#include "npupack/transpose.hpp"

namespace py = pybind11;
using npupack::LayoutError;
using npupack_bindings::batch_extent;
using npupack_bindings::check_buffer;
using npupack_bindings::writable_bytes;

namespace {

// transpose_batch (or, with finite16, transpose_batch_finite16) on NumPy buffers, for the kernel
// tests: every size is checked against both buffers before anything is written.
int transpose_batch_call(const py::array& src, int64_t src_stride, int64_t src_step, py::array& dst,
                         int64_t dst_stride, int64_t dst_step, int64_t rows, int64_t cols, int64_t count, int64_t eb,
                         bool finite16, const std::string& path) {
  const char* fn = "transpose_batch";
  const auto kernel = npupack::kernel_path(path, fn);
  check_buffer(src, "src");
  check_buffer(dst, "dst");
  if (eb != 1 && eb != 2 && eb != 4 && eb != 8) throw LayoutError("transpose_batch: eb must be 1, 2, 4 or 8");
  if (finite16 && eb != 2) throw LayoutError("transpose_batch: finite16 needs eb = 2");
  // The fp16 test reads its rows as halves: rows on 2-byte boundaries only.
  if (finite16 && (reinterpret_cast<uintptr_t>(src.data()) % 2 || src_stride % 2 || src_step % 2)) {
    throw LayoutError("transpose_batch: finite16 needs src, src_stride and src_step on 2-byte boundaries");
  }
  if (rows < 1 || cols < 1 || count < 1) throw LayoutError("transpose_batch: rows, cols and count must be >= 1");
  if (src_step < 0 || dst_step < 0) throw LayoutError("transpose_batch: steps must be >= 0");
  if (src_stride < npupack::checked_mul(cols, eb, fn) || dst_stride < npupack::checked_mul(rows, eb, fn)) {
    throw LayoutError("transpose_batch: a stride is shorter than its row or column");
  }
  if (batch_extent(count, src_step, rows, src_stride, cols * eb, fn) > static_cast<int64_t>(src.nbytes()) ||
      batch_extent(count, dst_step, cols, dst_stride, rows * eb, fn) > static_cast<int64_t>(dst.nbytes())) {
    throw LayoutError("transpose_batch: src or dst is smaller than the batch");
  }
  const char* s = static_cast<const char*>(src.data());
  char* d = writable_bytes(dst, "dst");
  py::gil_scoped_release release;
  if (finite16) {
    return npupack::transpose_batch_finite16(s, src_stride, src_step, d, dst_stride, dst_step, rows, cols, count,
                                             nullptr, 0, kernel);
  }
  npupack::transpose_batch(s, src_stride, src_step, d, dst_stride, dst_step, rows, cols, count, eb, nullptr, 0, kernel);
  return 1;
}

}  // namespace

void bind_transpose(py::module_& m) {
  m.def("transpose_batch", &transpose_batch_call, py::arg("src"), py::arg("src_stride"), py::arg("src_step"),
        py::arg("dst"), py::arg("dst_stride"), py::arg("dst_step"), py::arg("rows"), py::arg("cols"), py::arg("count"),
        py::arg("eb"), py::arg("finite16") = false, py::arg("path") = "auto",
        "For tests: `count` transposes of rows x cols eb-byte matrices (byte strides and steps). `path` caps the "
        "kernels' instruction sets (auto, avx512, avx2, ssse3; scalar: plain C++ only); with finite16 (eb 2) returns 1 all finite, 0 an "
        "INF/NaN moved, -1 nothing moved (no testing kernel takes the shape)");
}
