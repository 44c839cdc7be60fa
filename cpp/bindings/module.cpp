// pybind11 bindings of the C++ core (module npupack._core). Arguments are converted and
// checked here with the GIL held; the GIL is released for the kernels themselves.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "npupack/checked.hpp"
#include "npupack/convert.hpp"
#include "npupack/errors.hpp"
#include "npupack/highlow.hpp"
#include "npupack/pixel.hpp"
#include "npupack/layout.hpp"
#include "npupack/pack.hpp"
#include "npupack/parallel.hpp"
#include "npupack/transpose.hpp"
#include "numeric.hpp"

namespace py = pybind11;
using npupack::BlockedLayout;
using npupack::LayoutError;

namespace {

// (name, extent, tiles, ragged, pad_lo, storage, divisors)
using DimTuple = std::tuple<std::string, int64_t, std::vector<int64_t>, bool, int64_t, int64_t, std::vector<int64_t>>;
using AxisTuple = std::tuple<int, int, int64_t>;

BlockedLayout make_layout(const std::vector<DimTuple>& dims, const std::vector<AxisTuple>& order, int64_t eb) {
  std::vector<npupack::DimSpec> d;
  for (const auto& t : dims) {
    d.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t), std::get<4>(t), std::get<5>(t),
                 std::get<6>(t)});
  }
  std::vector<npupack::AxisSpec> o;
  for (const auto& t : order) o.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t)});
  return BlockedLayout(std::move(d), std::move(o), eb);
}

bool host_little_endian() {
  const uint16_t one = 1;
  return *reinterpret_cast<const unsigned char*>(&one) == 1;
}

// The logical tensor must match the layout's dims exactly; returns its byte strides.
std::vector<int64_t> logical_strides(const BlockedLayout& L, const py::array& a, const char* name) {
  npupack_bindings::require_numeric(a, name);
  const auto& dims = L.dims();
  if (static_cast<size_t>(a.ndim()) != dims.size()) {
    throw LayoutError(std::string(name) + " has " + std::to_string(a.ndim()) + " dimensions, the layout has " +
                      std::to_string(dims.size()));
  }
  if (a.itemsize() != L.elem_bytes()) {
    throw LayoutError(std::string(name) + " has " + std::to_string(a.itemsize()) +
                      "-byte elements, the layout has " + std::to_string(L.elem_bytes()));
  }
  // The engine moves bytes and packed elements are little-endian: a big-endian array would be
  // packed (or unpacked into) as garbage. The Python layer converts; this catches what it misses.
  const char order = a.dtype().byteorder();
  if (a.itemsize() > 1 && (order == '>' || (order == '=' && !host_little_endian()))) {
    throw py::type_error(std::string(name) + " has big-endian elements (dtype " +
                         py::str(a.dtype()).cast<std::string>() +
                         "); packed layouts are little-endian: pass x.astype(x.dtype.newbyteorder('<'))");
  }
  std::vector<int64_t> s(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (a.shape(i) != dims[i].extent) {
      throw LayoutError(std::string(name) + " has extent " + std::to_string(a.shape(i)) + " in dimension " +
                        std::to_string(i) + ", the layout has " + std::to_string(dims[i].extent));
    }
    s[i] = a.strides(i);
  }
  return s;
}

char* writable_bytes(py::array& a, const char* name) {
  if (!a.writeable()) throw LayoutError(std::string(name) + " is read-only");
  return static_cast<char*>(a.mutable_data());
}

void check_buffer(const py::array& buf, const char* name) {
  npupack_bindings::require_numeric(buf, name);
  if (!(buf.flags() & py::array::c_style)) throw LayoutError(std::string(name) + " must be C-contiguous");
}

// Bytes a batch of `count` strided matrices spans: (count - 1) * step + (major - 1) * stride +
// minor_bytes, with every term checked for overflow.
int64_t batch_extent(int64_t count, int64_t step, int64_t major, int64_t stride, int64_t minor_bytes, const char* fn) {
  const int64_t last = npupack::checked_add(npupack::checked_mul(count - 1, step, fn),
                                            npupack::checked_mul(major - 1, stride, fn), fn);
  return npupack::checked_add(last, minor_bytes, fn);
}

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

// Geometry of an interleaved pixel plane, checked before anything is written: a C-contiguous
// (H, W, M) image, `order` a permutation of its M components, lines that hold the x offset and
// the pixels, and a plane buffer of H lines.
struct PixelLines {
  int64_t h, w;
  int m, eb;
};

PixelLines pixel_lines(const py::array& img, const std::vector<int>& order, const py::array& plane,
                       int64_t line_stride, int64_t pre, const char* fn) {
  const std::string name(fn);
  npupack_bindings::require_numeric(img, "img");
  npupack_bindings::require_numeric(plane, "plane");
  if (img.ndim() != 3 || !(img.flags() & py::array::c_style) || !(plane.flags() & py::array::c_style)) {
    throw LayoutError(name + ": need a C-contiguous (H, W, M) image and a C-contiguous plane");
  }
  const int64_t m = img.shape(2), eb = img.itemsize();
  if (m < 1 || m > 4 || (eb != 1 && eb != 2 && eb != 4) || m * eb > 8 || static_cast<int64_t>(order.size()) != m) {
    throw LayoutError(name + ": pixels must be 1-4 components of 1, 2 or 4 bytes, at most 8 bytes, one order entry each");
  }
  bool seen[4] = {};
  for (int c : order) {
    if (c < 0 || c >= m || seen[c]) throw LayoutError(name + ": order must be a permutation of the components");
    seen[c] = true;
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
  const PixelLines g = Pack ? pixel_lines(from, order, to, line_stride, pre, fn)
                            : pixel_lines(to, order, from, line_stride, pre, fn);
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

// The checked operands of a pack: the logical tensor `x` (its strides) and the packed buffer `out`.
struct PackArgs {
  std::vector<int64_t> strides;
  const char* src;
  char* dst;
  int64_t size;
};

// The bytes [first, last) that array a spans (any strides, negative ones included).
std::pair<const char*, const char*> span_of(const py::array& a) {
  const char* p = static_cast<const char*>(a.data());
  if (a.size() == 0) return {p, p};
  ptrdiff_t lo = 0, hi = a.itemsize();
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    const ptrdiff_t step = static_cast<ptrdiff_t>(a.strides(i)) * static_cast<ptrdiff_t>(a.shape(i) - 1);
    (step < 0 ? lo : hi) += step;
  }
  return {p + lo, p + hi};
}

// A packer reads one array while it writes the other, in an order of its own: if they share
// bytes, the output is garbage and the input is overwritten.
void check_disjoint(const py::array& read, const char* read_name, const py::array& written, const char* written_name) {
  const auto r = span_of(read), w = span_of(written);
  if (r.first < w.second && w.first < r.second) {
    throw LayoutError(std::string(written_name) + ": overlaps the memory " + read_name + " spans; the packers read " +
                      read_name + " while they write " + written_name + ", so they need separate buffers");
  }
}

PackArgs pack_args(const BlockedLayout& L, const py::array& x, py::array& out) {
  auto strides = logical_strides(L, x, "x");
  check_buffer(out, "out");
  check_disjoint(x, "x", out, "out");
  char* dst = writable_bytes(out, "out");
  return {std::move(strides), static_cast<const char*>(x.data()), dst, out.nbytes()};
}

void layout_pack(const BlockedLayout& L, const py::array& x, py::array out, const py::bytes& pad, bool reference) {
  const PackArgs a = pack_args(L, x, out);
  const std::string pad_bytes = pad;
  if (!pad_bytes.empty() && static_cast<int64_t>(pad_bytes.size()) != L.elem_bytes()) {
    throw LayoutError("pad must be one element (" + std::to_string(L.elem_bytes()) + " bytes)");
  }
  const char* p = pad_bytes.empty() ? nullptr : pad_bytes.data();
  py::gil_scoped_release release;
  if (reference) npupack::pack_reference(L, a.src, a.strides, a.dst, a.size, p);
  else npupack::pack(L, a.src, a.strides, a.dst, a.size, p);
}

// Packs binary16 bit patterns (C-contiguous, aligned) with zero padding unless one is INF or NaN:
// then returns false with `out` partly written (the caller takes its slow path).
bool layout_pack_finite_fp16(const BlockedLayout& L, const py::array_t<uint16_t, 0>& x, py::array out) {
  if (!(x.flags() & py::array::c_style) || reinterpret_cast<uintptr_t>(x.data()) % alignof(uint16_t) != 0) {
    throw LayoutError("pack_finite_fp16: x must be C-contiguous and aligned");
  }
  const PackArgs a = pack_args(L, x, out);
  py::gil_scoped_release release;
  return npupack::pack_checked(L, a.src, a.strides, a.dst, a.size, nullptr, [](const char* slab, int64_t bytes) {
    return npupack::fp16_first_nonfinite(reinterpret_cast<const uint16_t*>(slab), bytes / 2) < 0;
  }, true);
}

void layout_unpack(const BlockedLayout& L, const py::array& buf, py::array out, bool reference) {
  const auto strides = logical_strides(L, out, "out");
  check_buffer(buf, "buf");
  check_disjoint(buf, "buf", out, "out");
  char* dst = writable_bytes(out, "out");
  const char* src = static_cast<const char*>(buf.data());
  const int64_t size = buf.nbytes();
  py::gil_scoped_release release;
  if (reference) npupack::unpack_reference(L, src, size, dst, strides);
  else npupack::unpack(L, src, size, dst, strides);
}

// Batch pack: [(layout, x, out), ...] with zero padding, all checked here, one GIL release.
void layout_pack_many(const py::list& items) {
  std::vector<npupack::PackJob> jobs;
  jobs.reserve(items.size());
  std::vector<py::array> keep;  // holds the arrays alive (and their buffers fixed) while packing
  keep.reserve(2 * items.size());
  for (const auto& item : items) {
    const auto t = item.cast<py::tuple>();
    if (t.size() != 3) throw LayoutError("pack_many: items must be (layout, x, out)");
    const BlockedLayout& L = t[0].cast<const BlockedLayout&>();
    py::array x = t[1].cast<py::array>();
    py::array out = t[2].cast<py::array>();
    PackArgs a = pack_args(L, x, out);
    jobs.push_back({&L, a.src, std::move(a.strides), a.dst, a.size});
    keep.push_back(std::move(x));
    keep.push_back(std::move(out));
  }
  py::gil_scoped_release release;
  npupack::pack_many(jobs);
}

template <class F>
void fp16_convert(const py::array_t<F, 0>& x, py::array_t<uint16_t, 0>& out, bool nearest_away, bool saturate) {
  if (!(x.flags() & py::array::c_style) || !(out.flags() & py::array::c_style) || x.size() != out.size()) {
    throw LayoutError("to_fp16: x and out must be C-contiguous with the same size");
  }
  const F* src = x.data();
  uint16_t* dst = out.mutable_data();
  const int64_t n = x.size();
  const auto mode = nearest_away ? npupack::Fp16Rounding::NearestAway : npupack::Fp16Rounding::NearestEven;
  py::gil_scoped_release release;
  npupack::to_fp16(src, dst, n, mode, saturate);
}

template <class Q>
void quantize(const py::array_t<float, 0>& w, py::array_t<Q, 0>& q, py::array_t<float, 0>& scales,
              void (*kernel)(const float*, int64_t, int64_t, Q*, float*)) {
  if (w.ndim() != 2 || q.ndim() != 2 || scales.ndim() != 1 || w.shape(0) != q.shape(0) ||
      w.shape(1) != q.shape(1) || scales.shape(0) != w.shape(0) || !(w.flags() & py::array::c_style) ||
      !(q.flags() & py::array::c_style)) {
    throw LayoutError("quantize: w and q must be C-contiguous (blocks, block_len), scales (blocks,)");
  }
  const float* src = w.data();
  Q* dst = q.mutable_data();
  float* sc = scales.mutable_data();
  const int64_t blocks = w.shape(0), len = w.shape(1);
  py::gil_scoped_release release;
  kernel(src, blocks, len, dst, sc);
}

template <class R>
R scan_fp16(const py::array_t<uint16_t, 0>& bits, const std::string& path, const char* fn,
            R (*scan)(const uint16_t*, int64_t, npupack::KernelPath)) {
  if (!(bits.flags() & py::array::c_style)) throw LayoutError("fp16 scan: bits must be C-contiguous");
  const auto kernel = npupack::kernel_path(path, fn);
  const uint16_t* p = bits.data();
  const int64_t n = bits.size();
  py::gil_scoped_release release;
  return scan(p, n, kernel);
}

}  // namespace

void bind_weights(py::module_& m);  // bindings/weights.cpp

PYBIND11_MODULE(_core, m) {
  m.doc() = "npupack C++ core: blocked-layout engine and element conversion";
  py::register_exception<LayoutError>(m, "LayoutError", PyExc_ValueError);
  bind_weights(m);
  m.def("pack_many", &layout_pack_many, py::arg("items"),
        "Pack [(layout, x, out), ...] with zero padding in one call (one GIL release)");
  m.def("set_num_threads", &npupack::set_num_threads, py::arg("n"),
        "Threads the kernels may use (n <= 0: the machine's hardware threads)");
  m.def("get_num_threads", &npupack::num_threads, "Threads the kernels may use");

  py::class_<BlockedLayout>(m, "BlockedLayout")
      .def(py::init(&make_layout), py::arg("dims"), py::arg("order"), py::arg("elem_bytes"),
           "dims: [(name, extent, tiles, ragged, pad_lo, storage, divisors)], order: [(dim, level, byte_stride or 0)] "
           "outer to inner")
      .def_property_readonly("nbytes", &BlockedLayout::nbytes)
      .def_property_readonly("elements", &BlockedLayout::elements)
      .def_property_readonly("elem_bytes", &BlockedLayout::elem_bytes)
      .def_property_readonly("has_holes", &BlockedLayout::has_holes)
      .def_property_readonly("ragged", &BlockedLayout::ragged)
      .def_property_readonly("monotonic", &BlockedLayout::monotonic)
      .def_property_readonly("axes",
                             [](const BlockedLayout& L) {
                               std::vector<std::tuple<int, int, int64_t, int64_t, int64_t>> r;
                               for (const auto& a : L.axes()) r.emplace_back(a.dim, a.level, a.extent, a.weight, a.stride);
                               return r;
                             })
      .def("offset_of",
           [](const BlockedLayout& L, const std::vector<int64_t>& index) {
             if (index.size() != L.dims().size()) throw LayoutError("index has the wrong number of dimensions");
             return L.offset_of(index.data());
           })
      .def("pack", &layout_pack, py::arg("x"), py::arg("out"), py::arg("pad") = py::bytes(),
           py::arg("reference") = false)
      .def("pack_finite_fp16", &layout_pack_finite_fp16, py::arg("x"), py::arg("out"))
      .def("unpack", &layout_unpack, py::arg("buf"), py::arg("out"), py::arg("reference") = false);

  m.def("transpose_batch", &transpose_batch_call, py::arg("src"), py::arg("src_stride"), py::arg("src_step"),
        py::arg("dst"), py::arg("dst_stride"), py::arg("dst_step"), py::arg("rows"), py::arg("cols"), py::arg("count"),
        py::arg("eb"), py::arg("finite16") = false, py::arg("path") = "auto",
        "For tests: `count` transposes of rows x cols eb-byte matrices (byte strides and steps). `path` caps the "
        "AVX kernels (auto, avx512, avx2; ssse3 and scalar: no AVX); with finite16 (eb 2) returns 1 all finite, 0 an "
        "INF/NaN moved, -1 nothing moved (no testing kernel takes the shape)");
  m.def("to_fp16_f32", &fp16_convert<float>, py::arg("x"), py::arg("out"), py::arg("nearest_away"), py::arg("saturate"));
  m.def("to_fp16_f64", &fp16_convert<double>, py::arg("x"), py::arg("out"), py::arg("nearest_away"), py::arg("saturate"));
  m.def(
      "fp16_any_inf",
      [](const py::array_t<uint16_t, 0>& b, const std::string& path) {
        return scan_fp16(b, path, "fp16_any_inf", npupack::fp16_any_inf);
      },
      py::arg("bits"), py::arg("path") = "auto", "True if any binary16 bit pattern is +-INF");
  m.def(
      "fp16_first_nan",
      [](const py::array_t<uint16_t, 0>& b, const std::string& path) {
        return scan_fp16(b, path, "fp16_first_nan", npupack::fp16_first_nan);
      },
      py::arg("bits"), py::arg("path") = "auto", "Flat index of the first binary16 NaN, or -1");
  m.def(
      "fp16_first_nonfinite",
      [](const py::array_t<uint16_t, 0>& b, const std::string& path) {
        return scan_fp16(b, path, "fp16_first_nonfinite", npupack::fp16_first_nonfinite);
      },
      py::arg("bits"), py::arg("path") = "auto", "Flat index of the first binary16 INF or NaN, or -1");
  m.def(
      "highlow_split",
      [](const py::array_t<int16_t, 0>& in, py::array_t<uint8_t, 0>& out) {
        if (!(in.flags() & py::array::c_style) || !(out.flags() & py::array::c_style) || in.size() % 16 ||
            out.size() != in.size() * 2) {
          throw LayoutError("highlow_split: need C-contiguous int16[16*n] and uint8[32*n]");
        }
        const int16_t* src = in.data();
        uint8_t* dst = out.mutable_data();
        const int64_t n = in.size() / 16;
        py::gil_scoped_release release;
        npupack::highlow_split(src, dst, n);
      },
      "Kneron high/low split of 16-scalar entries (docs/kneron.md §7.4)");
  m.def(
      "highlow_merge",
      [](const py::array_t<uint8_t, 0>& in, py::array_t<int16_t, 0>& out) {
        if (!(in.flags() & py::array::c_style) || !(out.flags() & py::array::c_style) || in.size() % 32 ||
            out.size() * 2 != in.size()) {
          throw LayoutError("highlow_merge: need C-contiguous uint8[32*n] and int16[16*n]");
        }
        const uint8_t* src = in.data();
        int16_t* dst = out.mutable_data();
        const int64_t n = out.size() / 16;
        py::gil_scoped_release release;
        npupack::highlow_merge(src, dst, n);
      },
      "Inverse of highlow_split (bit 0 comes back as 0)");
  m.def(
      "pack_10bit",
      [](const py::array_t<uint16_t, 0>& comps, py::array_t<uint32_t, 0>& words, const std::vector<int>& shifts) {
        if (!(comps.flags() & py::array::c_style) || !(words.flags() & py::array::c_style) || shifts.size() != 4 ||
            comps.size() != words.size() * 4) {
          throw LayoutError("pack_10bit: need C-contiguous uint16[4*n], uint32[n] and 4 shifts");
        }
        const uint16_t* src = comps.data();
        uint32_t* dst = words.mutable_data();
        const int64_t n = words.size();
        py::gil_scoped_release release;
        return npupack::pack_10bit(src, n, shifts.data(), dst);
      },
      "Pack 10-bit pixels into LE words; returns the first out-of-range pixel or -1 (docs/nvdla.md §4.3)");
  m.def(
      "unpack_10bit",
      [](const py::array_t<uint32_t, 0>& words, py::array_t<uint16_t, 0>& comps, const std::vector<int>& shifts) {
        if (!(comps.flags() & py::array::c_style) || !(words.flags() & py::array::c_style) || shifts.size() != 4 ||
            comps.size() != words.size() * 4) {
          throw LayoutError("unpack_10bit: need C-contiguous uint32[n], uint16[4*n] and 4 shifts");
        }
        const uint32_t* src = words.data();
        uint16_t* dst = comps.mutable_data();
        const int64_t n = words.size();
        py::gil_scoped_release release;
        npupack::unpack_10bit(src, n, shifts.data(), dst);
      },
      "Inverse of pack_10bit");
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
        py::gil_scoped_release release;
        npupack::split_yuv444(src, h, w, w * 3 * eb, eb, v_first, yd, y_stride, y_pre, ud, uv_stride, uv_pre);
      },
      "Split a YUV444 image into the Y and UV planes of a semi-planar format (docs/nvdla.md §4.2, 4.4)");
  m.def("pack_pixel_lines", &pixel_lines_call<true>, py::arg("img"), py::arg("order"), py::arg("plane"),
        py::arg("line_stride"), py::arg("pre"), py::arg("path") = "auto",
        "Lay an (H, W, M) image out as one interleaved pixel plane, components reordered (docs/nvdla.md §4.2, 4.4). "
        "`path` forces a shuffle kernel (auto, avx2, ssse3, scalar) for tests");
  m.def("unpack_pixel_lines", &pixel_lines_call<false>, py::arg("plane"), py::arg("order"), py::arg("img"),
        py::arg("line_stride"), py::arg("pre"), py::arg("path") = "auto", "Inverse of pack_pixel_lines");
  m.def("quantize_int8",
        [](const py::array_t<float, 0>& w, py::array_t<int8_t, 0>& q, py::array_t<float, 0>& s) {
          quantize<int8_t>(w, q, s, npupack::quantize_int8);
        });
  m.def("quantize_int16",
        [](const py::array_t<float, 0>& w, py::array_t<int16_t, 0>& q, py::array_t<float, 0>& s) {
          quantize<int16_t>(w, q, s, npupack::quantize_int16);
        });
}
