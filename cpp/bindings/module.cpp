// pybind11 bindings of the C++ core (module npupack._core). Arguments are converted and
// checked here with the GIL held; the GIL is released for the kernels themselves.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
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
#include "buffers.hpp"
#include "numeric.hpp"

namespace py = pybind11;
using npupack::BlockedLayout;
using npupack::LayoutError;
using npupack_bindings::check_buffer;
using npupack_bindings::writable_bytes;

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

// The bytes of `out` past the layout's, zeroed where the caller asks (zero_tail: NVDLA weight
// surfaces end in a zero tail; one memset here costs less than a slice assignment in Python).
void zero_past(const BlockedLayout& L, const PackArgs& a) {
  if (a.size > L.nbytes()) std::memset(a.dst + L.nbytes(), 0, static_cast<size_t>(a.size - L.nbytes()));
}

void layout_pack(const BlockedLayout& L, const py::array& x, py::array out, const py::bytes& pad, bool reference,
                 bool zero_tail) {
  const PackArgs a = pack_args(L, x, out);
  const std::string pad_bytes = pad;
  if (!pad_bytes.empty() && static_cast<int64_t>(pad_bytes.size()) != L.elem_bytes()) {
    throw LayoutError("pad must be one element (" + std::to_string(L.elem_bytes()) + " bytes)");
  }
  const char* p = pad_bytes.empty() ? nullptr : pad_bytes.data();
  py::gil_scoped_release release;
  if (reference) npupack::pack_reference(L, a.src, a.strides, a.dst, a.size, p);
  else npupack::pack(L, a.src, a.strides, a.dst, a.size, p);
  if (zero_tail) zero_past(L, a);
}

// Packs binary16 bit patterns (C-contiguous, aligned; float16 itself or its uint16 view) with zero
// padding unless one is INF or NaN: then returns false with `out` partly written (the caller takes
// its slow path). Taking float16 as it is spares the caller a view per call. zero_tail as for
// layout_pack, once the tensor was found finite.
bool layout_pack_finite_fp16(const BlockedLayout& L, const py::array& x, py::array out, bool zero_tail) {
  const py::dtype dt = x.dtype();
  if (dt.itemsize() != 2 || (dt.kind() != 'f' && dt.kind() != 'u') || dt.byteorder() == '>') {
    throw py::type_error("pack_finite_fp16: x must be float16 or uint16 (binary16 bit patterns) in native byte order");
  }
  if (!(x.flags() & py::array::c_style) || reinterpret_cast<uintptr_t>(x.data()) % alignof(uint16_t) != 0) {
    throw LayoutError("pack_finite_fp16: x must be C-contiguous and aligned");
  }
  const PackArgs a = pack_args(L, x, out);
  py::gil_scoped_release release;
  const auto finite_slab = [](const char* slab, int64_t bytes) {
    return npupack::fp16_first_nonfinite(reinterpret_cast<const uint16_t*>(slab), bytes / 2) < 0;
  };
  const bool finite = npupack::pack_checked(L, a.src, a.strides, a.dst, a.size, nullptr, finite_slab, true);
  if (finite && zero_tail) zero_past(L, a);
  return finite;
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

}  // namespace

void bind_weights(py::module_& m);  // bindings/weights.cpp
void bind_plan(py::module_& m);     // bindings/plan.cpp
void bind_transpose(py::module_& m);  // bindings/transpose.cpp
void bind_kernels(py::module_& m);    // bindings/kernels.cpp
void bind_convert(py::module_& m);    // bindings/convert.cpp
void bind_pixels(py::module_& m);     // bindings/pixels.cpp

PYBIND11_MODULE(_core, m) {
  m.doc() = "npupack C++ core: blocked-layout engine and element conversion";
  py::register_exception<LayoutError>(m, "LayoutError", PyExc_ValueError);
  bind_weights(m);
  bind_plan(m);
  bind_transpose(m);
  bind_kernels(m);
  bind_convert(m);
  bind_pixels(m);
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
           py::arg("reference") = false, py::arg("zero_tail") = false)
      .def("pack_finite_fp16", &layout_pack_finite_fp16, py::arg("x"), py::arg("out"), py::arg("zero_tail") = false)
      .def("unpack", &layout_unpack, py::arg("buf"), py::arg("out"), py::arg("reference") = false);

}
