// Bindings of the pixel-plane kernels: interleaved pixel lines and YUV444 planes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../kernels/kernel.hpp"
#include "buffers.hpp"
#include "npupack/checked.hpp"
#include "npupack/cpu.hpp"
#include "npupack/errors.hpp"
#include "npupack/pixel.hpp"
#include "numeric.hpp"

namespace py = pybind11;
using npupack::LayoutError;
using npupack_bindings::writable_bytes;

namespace {

// Geometry of an interleaved pixel plane, checked before anything is written: a C-contiguous
// (H, W, M') image, `order` a permutation of its M' components (packing: with -1 entries for
// components written as 0, M = len(order) in the plane), lines that hold the x offset and the
// pixels, and a plane buffer of H lines.
struct PixelLines {
  int64_t h, w;
  int m, eb;
};

PixelLines pixel_lines(const py::array& img, const std::vector<int>& order, const py::array& plane,
                       int64_t line_stride, int64_t pre, const char* fn, bool zeros) {
  const std::string name(fn);
  npupack_bindings::require_numeric(img, "img");
  npupack_bindings::require_numeric(plane, "plane");
  if (img.ndim() != 3 || !(img.flags() & py::array::c_style) || !(plane.flags() & py::array::c_style)) {
    throw LayoutError(name + ": need a C-contiguous (H, W, M) image and a C-contiguous plane");
  }
  const int64_t m_img = img.shape(2), eb = img.itemsize(), m = static_cast<int64_t>(order.size());
  if (m < 1 || m > 4 || (eb != 1 && eb != 2 && eb != 4) || m * eb > 8) {
    throw LayoutError(name + ": pixels must be 1-4 components of 1, 2 or 4 bytes, at most 8 bytes, one order entry each");
  }
  bool seen[4] = {};
  int64_t named = 0;
  for (int c : order) {
    if (zeros && c == -1) continue;
    if (c < 0 || c >= m_img || c >= m || seen[c]) {
      throw LayoutError(name + ": order must be a permutation of the image's components" +
                        (zeros ? std::string(" (and -1 for a component written as 0)") : std::string()));
    }
    seen[c] = true;
    ++named;
  }
  if (m_img < 1) throw LayoutError(name + ": the image needs at least one component, got (H, W, 0)");
  if (named != m_img) {
    throw LayoutError(name + ": order names " + std::to_string(named) + " components, the image has " +
                      std::to_string(m_img));
  }
  const int64_t h = img.shape(0), w = img.shape(1);
  const int64_t row = npupack::checked_mul(w, m * eb, fn);
  if (pre < 0 || line_stride < npupack::checked_add(pre, row, fn) ||
      plane.nbytes() < npupack::checked_mul(h, line_stride, fn)) {
    throw LayoutError(name + ": the plane buffer or line stride is too small for the image");
  }
  return {h, w, static_cast<int>(m), static_cast<int>(eb)};
}

// pack_pixel_lines (image -> plane) and unpack_pixel_lines (plane -> image).
template <bool Pack>
void pixel_lines_call(const py::array& from, const std::vector<int>& order, py::array to, int64_t line_stride,
                      int64_t pre, const std::string& path) {
  const char* fn = Pack ? "pack_pixel_lines" : "unpack_pixel_lines";
  const PixelLines g = Pack ? pixel_lines(from, order, to, line_stride, pre, fn, true)
                            : pixel_lines(to, order, from, line_stride, pre, fn, false);
  const auto kernel = npupack::kernel_path(path, fn);
  const char* src = static_cast<const char*>(from.data());
  char* dst = writable_bytes(to, Pack ? "plane" : "img");
  py::gil_scoped_release release;
  if constexpr (Pack) {
    npupack::pack_pixel_lines(src, g.h, g.w, g.m, g.eb, order.data(), dst, line_stride, pre, kernel);
  } else {
    npupack::unpack_pixel_lines(src, g.h, g.w, g.m, g.eb, order.data(), line_stride, pre, dst, kernel);
  }
}

// The kernel tester (docs/design.md §4.9): one named entry of a pixel section, whatever the
// dispatch would choose, refused when unknown or when this CPU lacks its instruction set.
template <class Fn>
const npupack::kernels::Entry<Fn>& find_entry(const std::vector<npupack::kernels::Entry<Fn>>& list,
                                              const std::string& name, const char* fn) {
  for (const auto& e : list) {
    if (name != e.name) continue;
    if (!npupack::kernels::entry_runs(e.op, e.isa)) {
      throw LayoutError(std::string(fn) + ": this CPU lacks " + npupack::kernels::isa_name(e.isa) + " for " + name);
    }
    return e;
  }
  throw LayoutError(std::string(fn) + ": unknown kernel " + name + " (see kernel_list())");
}

void no_overlap(const char* a, int64_t an, const char* b, int64_t bn, const char* fn) {
  if (a < b + bn && b < a + an) throw LayoutError(std::string(fn) + ": the buffers overlap");
}

// One line of pixels of len(order) components of eb bytes into dst, destination component j from
// source component order[j] or 0 where it is -1 (src: the same pixels, of the components
// named), with pixel-shuffle kernel `name`.
void pixel_shuffle_run(const std::string& name, const py::array& src, py::array& dst, const std::vector<int>& order,
                       int eb) {
  const char* fn = "pixel_shuffle_run";
  const auto& k = find_entry(npupack::kernels::pixel_shuffle_list(), name, fn);
  npupack_bindings::check_buffer(src, "src");
  npupack_bindings::check_buffer(dst, "dst");
  const int m = static_cast<int>(order.size());
  // eb alone first: m * eb in int would overflow for a huge eb and pass the test.
  if (eb < 1 || eb > npupack::kernels::kMaxPixel || m < 1 || m > 4 || m * eb > npupack::kernels::kMaxPixel) {
    throw LayoutError("pixel_shuffle_run: need 1..4 components of eb >= 1 bytes, at most 8 bytes a pixel");
  }
  int named = 0;
  for (int c : order) named += c >= 0;
  std::vector<bool> seen(static_cast<size_t>(m));
  for (int c : order) {
    if (c == -1) continue;
    if (c < 0 || c >= named || seen[static_cast<size_t>(c)]) {
      throw LayoutError("pixel_shuffle_run: order is not a permutation (with -1 for zeros)");
    }
    seen[static_cast<size_t>(c)] = true;
  }
  if (named == 0) throw LayoutError("pixel_shuffle_run: order names no source component");
  const auto n = static_cast<int64_t>(dst.nbytes()), pixels = n / (m * eb);
  if (n % (m * eb) || static_cast<int64_t>(src.nbytes()) != pixels * named * eb) {
    throw LayoutError("pixel_shuffle_run: src and dst must be the same whole number of pixels");
  }
  if (k.isa != npupack::kernels::Isa::kScalar && 16 % (m * eb)) {
    throw LayoutError("pixel_shuffle_run: " + name + " does not take pixels of " + std::to_string(m * eb) + " bytes");
  }
  const npupack::kernels::PixelShuffle s = npupack::kernels::make_pixel_shuffle(m, eb, order.data());
  npupack::kernels::PixelShuffleArgs a;
  a.src = static_cast<const unsigned char*>(src.data());
  a.dst = reinterpret_cast<unsigned char*>(writable_bytes(dst, "dst"));
  a.nbytes = n;
  a.s = &s;
  no_overlap(reinterpret_cast<const char*>(a.src), static_cast<int64_t>(src.nbytes()),
             reinterpret_cast<const char*>(a.dst), n, fn);
  py::gil_scoped_release release;
  k.run(a);
}

// One row of (Y, U, V) pixels of the entry's element size into y and uv, with yuv-split kernel `name`.
void yuv_split_run(const std::string& name, const py::array& yuv, py::array& y, py::array& uv, bool v_first) {
  const char* fn = "yuv_split_run";
  const auto& k = find_entry(npupack::kernels::yuv_split_list(), name, fn);
  npupack_bindings::check_buffer(yuv, "yuv");
  npupack_bindings::check_buffer(y, "y");
  npupack_bindings::check_buffer(uv, "uv");
  const int64_t eb = k.elem, n = static_cast<int64_t>(yuv.nbytes()) / (3 * eb);
  if (static_cast<int64_t>(yuv.nbytes()) != 3 * eb * n || static_cast<int64_t>(y.nbytes()) != n * eb ||
      static_cast<int64_t>(uv.nbytes()) != 2 * n * eb) {
    throw LayoutError("yuv_split_run: yuv must be n whole pixels of 3 components of " + std::to_string(eb) +
                      " bytes, y n and uv 2 n components");
  }
  npupack::kernels::YuvSplitArgs a;
  a.yuv = static_cast<const char*>(yuv.data());
  a.n = n;
  a.y = writable_bytes(y, "y");
  a.uv = writable_bytes(uv, "uv");
  a.v_first = v_first;
  no_overlap(a.yuv, 3 * eb * n, a.y, eb * n, fn);
  no_overlap(a.yuv, 3 * eb * n, a.uv, 2 * eb * n, fn);
  no_overlap(a.y, eb * n, a.uv, 2 * eb * n, fn);
  py::gil_scoped_release release;
  k.run(a);
}

}  // namespace

void bind_pixels(py::module_& m) {
  m.def("pixel_shuffle_run", &pixel_shuffle_run, py::arg("name"), py::arg("src"), py::arg("dst"), py::arg("order"),
        py::arg("eb"),
        "For the kernel tester: pixel-shuffle kernel `name` over one line of pixels of len(order) components of eb "
        "bytes (src the same pixels of the components order names, not overlapping): destination component j = "
        "source component order[j], or 0 where it is -1. LayoutError for an unknown name, a missing isa, an order "
        "that is not a permutation (with -1 entries), more than 8 bytes a pixel, sizes that do not match or are not "
        "whole pixels, or a pixel size a vector kernel does not take (it must "
        "divide 16) (docs/nvdla.md §4)");
  m.def("yuv_split_run", &yuv_split_run, py::arg("name"), py::arg("yuv"), py::arg("y"), py::arg("uv"),
        py::arg("v_first") = false,
        "For the kernel tester: yuv-split kernel `name` over one row of n (Y, U, V) pixels of its element size: the "
        "n Y values into y (n * elem bytes) and the (U, V) pairs, or (V, U) when v_first, into uv (2 n * elem bytes). "
        "LayoutError for an unknown name, a missing isa, sizes that do not match, or overlapping buffers "
        "(docs/nvdla.md §4)");
  m.def(
      "split_yuv444",
      [](const py::array& yuv, py::array y, int64_t y_stride, int64_t y_pre, py::array uv, int64_t uv_stride,
         int64_t uv_pre, bool v_first) {
        // Sizes checked here, before anything is written.
        npupack_bindings::require_numeric(yuv, "yuv");
        npupack_bindings::require_numeric(y, "y");
        npupack_bindings::require_numeric(uv, "uv");
        if (yuv.ndim() != 3 || yuv.shape(2) != 3 || !(yuv.flags() & py::array::c_style) ||
            (yuv.itemsize() != 1 && yuv.itemsize() != 2) || !(y.flags() & py::array::c_style) ||
            !(uv.flags() & py::array::c_style)) {
          throw LayoutError("split_yuv444: need a C-contiguous (H, W, 3) image of 1- or 2-byte components");
        }
        const int64_t h = yuv.shape(0), w = yuv.shape(1), eb = yuv.itemsize();
        const char* fn = "split_yuv444";
        if (y_pre < 0 || uv_pre < 0 || y_pre + w * eb > y_stride || uv_pre + 2 * w * eb > uv_stride ||
            y.nbytes() < npupack::checked_mul(h, y_stride, fn) ||
            uv.nbytes() < npupack::checked_mul(h, uv_stride, fn)) {
          throw LayoutError("split_yuv444: plane buffers or line strides too small for the image");
        }
        const char* src = static_cast<const char*>(yuv.data());
        char* yd = writable_bytes(y, "y");
        char* ud = writable_bytes(uv, "uv");
        // The two planes are written by rows on several threads: shared bytes would race.
        no_overlap(yd, static_cast<int64_t>(y.nbytes()), ud, static_cast<int64_t>(uv.nbytes()), fn);
        py::gil_scoped_release release;
        npupack::split_yuv444(src, h, w, w * 3 * eb, eb, v_first, yd, y_stride, y_pre, ud, uv_stride, uv_pre);
      },
      "Split a YUV444 image into the Y and UV planes of a semi-planar format (docs/nvdla.md §4.2, 4.4)");
  m.def("pack_pixel_lines", &pixel_lines_call<true>, py::arg("img"), py::arg("order"), py::arg("plane"),
        py::arg("line_stride"), py::arg("pre"), py::arg("path") = "auto",
        "Lay an (H, W, M) image out as one interleaved pixel plane, components reordered (docs/nvdla.md §4.2, 4.4); "
        "-1 in `order` writes a component as 0 (X of an image given three). "
        "`path` forces a shuffle kernel (auto, avx2, ssse3, scalar) for tests");
  m.def("unpack_pixel_lines", &pixel_lines_call<false>, py::arg("plane"), py::arg("order"), py::arg("img"),
        py::arg("line_stride"), py::arg("pre"), py::arg("path") = "auto", "Inverse of pack_pixel_lines");
}
