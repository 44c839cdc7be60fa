// Bindings of the NVDLA weight passes that are not affine layouts: grouped DC weights, the
// Winograd transform (written where the Winograd descriptor places each cube) and sparse
// compression (module npupack._core). Sizes are checked here with the GIL held.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "npupack/convert.hpp"
#include "npupack/errors.hpp"
#include "npupack/grouped.hpp"
#include "npupack/image_weights.hpp"
#include "npupack/layout.hpp"
#include "npupack/sparse.hpp"
#include "npupack/winograd.hpp"
#include "numeric.hpp"

namespace py = pybind11;
using npupack::LayoutError;

namespace {

npupack::WgSource source_type(const py::array& w) {
  const py::dtype dt = w.dtype();
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'i' && size == 1) return npupack::WgSource::I8;
  if (kind == 'u' && size == 1) return npupack::WgSource::U8;
  if (kind == 'i' && size == 2) return npupack::WgSource::I16;
  if (kind == 'u' && size == 2) return npupack::WgSource::U16;
  if (kind == 'f' && size == 2) return npupack::WgSource::F16;
  if (kind == 'f' && size == 4) return npupack::WgSource::F32;
  if (kind == 'f' && size == 8) return npupack::WgSource::F64;
  throw LayoutError("winograd: unsupported weight dtype " + std::string(py::str(dt)));
}

// Sources read as native numbers: a byte-swapped array would be read as other values (the
// Python layer converts before calling).
void require_native(const py::array& a, const char* name) {
  if (a.itemsize() > 1 && a.dtype().byteorder() == '>') {
    throw py::type_error(std::string(name) + " has big-endian elements; pass it in native byte order");
  }
}

uint8_t* writable(py::array& a, const char* name) {
  npupack_bindings::require_numeric(a, name);
  if (!a.writeable()) throw LayoutError(std::string(name) + " is read-only");
  if (!(a.flags() & py::array::c_style)) throw LayoutError(std::string(name) + " must be C-contiguous");
  return static_cast<uint8_t*>(a.mutable_data());
}

const uint8_t* contiguous(const py::array& a, const char* name) {
  npupack_bindings::require_numeric(a, name);
  if (!(a.flags() & py::array::c_style)) throw LayoutError(std::string(name) + " must be C-contiguous");
  return static_cast<const uint8_t*>(a.data());
}

// Groups of group_elems >= 1 covering n elements, without the n + group_elems - 1 that
// overflows for a group_elems near 2^63.
int64_t group_count(int64_t n, int64_t group_elems) { return n == 0 ? 0 : (n - 1) / group_elems + 1; }

// WMB bytes of n mask bits, without the n + 7 that overflows for an n near 2^63.
int64_t mask_bytes(int64_t n) { return n / 8 + (n % 8 != 0); }

int element_bytes(int es) {
  if (es != 1 && es != 2) throw LayoutError("sparse: element size must be 1 or 2 bytes");
  return es;
}

// n is compared with the stream's elements (a division), never multiplied: n * es overflows for
// an n near 2^63.
void check_stream(const py::array& stream, int64_t n, int es) {
  if (n < 0 || n > static_cast<int64_t>(stream.nbytes()) / es) {
    throw LayoutError("sparse: the stream is shorter than n elements");
  }
}

// The checked arguments of the compaction bindings (sparse_compress, sparse_compress_groups,
// sparse_encode): sizes and flags checked before anything is written.
struct CompressArgs {
  npupack::KernelPath kernel;
  int es;
  const uint8_t* s;
  uint8_t* w;
  uint8_t* d;
  int64_t cap;
  CompressArgs(const py::array& stream, int64_t n, int es_, py::array& wmb, py::array& data, const std::string& path,
               const char* fn)
      : kernel(npupack::kernel_path(path, fn)), es(element_bytes(es_)) {
    check_stream(stream, n, es);
    if (wmb.nbytes() < (n + 7) / 8) throw LayoutError("sparse_compress: wmb too small");
    s = contiguous(stream, "stream");
    w = writable(wmb, "wmb");
    d = writable(data, "data");
    cap = data.nbytes();
  }
};

}  // namespace

void bind_weights(py::module_& m) {
  m.def(
      "grouped_pack",
      [](const py::array& w, py::array out, int64_t groups, int64_t kpg, int64_t cb, bool zeroed, bool finite_fp16) {
        npupack_bindings::require_numeric(w, "w");
        if (w.ndim() != 4) throw LayoutError("grouped: w must be (K, C/G, R, S)");
        // finite_fp16: w holds binary16 bits, packed only when none is INF or NaN (the caller
        // converts and packs again otherwise); a strided or unaligned w is left to the caller.
        if (finite_fp16 && (w.itemsize() != 2 || !(w.flags() & py::array::c_style) ||
                            reinterpret_cast<uintptr_t>(w.data()) % alignof(uint16_t) != 0)) {
          return false;
        }
        npupack::GroupedSpec sp{};
        sp.k = w.shape(0), sp.cg = w.shape(1), sp.r = w.shape(2), sp.s = w.shape(3);
        for (int i = 0; i < 4; ++i) sp.stride[i] = w.strides(i);
        sp.groups = groups, sp.kpg = kpg, sp.cb = cb, sp.elem_bytes = w.itemsize();
        uint8_t* dst = writable(out, "out");
        const int64_t size = out.nbytes();
        npupack::grouped_bytes(sp);  // validates before the GIL is released
        const char* src = static_cast<const char*>(w.data());
        const int64_t n = w.size();
        py::gil_scoped_release release;
        if (finite_fp16 && npupack::fp16_first_nonfinite(reinterpret_cast<const uint16_t*>(src), n) >= 0) return false;
        npupack::grouped_pack(src, sp, reinterpret_cast<char*>(dst), size, zeroed);
        return true;
      },
      py::arg("w"), py::arg("out"), py::arg("groups"), py::arg("kpg"), py::arg("cb"), py::arg("zeroed") = false,
      py::arg("finite_fp16") = false,
      "Grouped DC weights into a zeroed surface without densifying (docs/nvdla.md §6.1, 7.1); False, "
      "nothing written, when finite_fp16 and w is strided or holds INF or NaN");
  m.def(
      "image_weights_pack",
      [](const py::array& w, py::array out, int64_t cdata, int64_t f, int64_t kpg, int64_t cpb,
         const npupack::BlockedLayout& full, const std::string& path, bool zero_tail) {
        if (w.ndim() != 4) throw LayoutError("image weights: w must be (K, C, R, S)");
        npupack_bindings::require_numeric(w, "w");
        require_native(w, "w");
        npupack::ImageWeightsSpec sp{};
        sp.k = w.shape(0), sp.c = w.shape(1), sp.r = w.shape(2), sp.s = w.shape(3);
        for (int i = 0; i < 4; ++i) sp.stride[i] = w.strides(i);
        sp.cdata = cdata, sp.f = f, sp.kpg = kpg, sp.cpb = cpb, sp.es = w.itemsize();
        sp.path = npupack::kernel_path(path, "image_weights_pack");
        uint8_t* dst = writable(out, "out");
        const int64_t size = out.nbytes();
        npupack::check_image_weights(sp, full, size);
        const char* src = static_cast<const char*>(w.data());
        const int64_t src_bytes = (w.flags() & py::array::c_style) ? static_cast<int64_t>(w.nbytes()) : 0;
        py::gil_scoped_release release;
        npupack::image_weights_pack(src, src_bytes, sp, full, reinterpret_cast<char*>(dst), size);
        if (zero_tail) std::memset(dst + full.nbytes(), 0, static_cast<size_t>(size - full.nbytes()));
        return full.nbytes();
      },
      py::arg("w"), py::arg("out"), py::arg("cdata"), py::arg("f"), py::arg("kpg"), py::arg("cpb"), py::arg("full"),
      py::arg("path") = "auto", py::arg("zero_tail") = false,
      "Image-input weights (docs/nvdla.md §8.3-8.5): (K, C, R, S) elements, channels zero-padded to cdata and "
      "pre-extended into pixels, rows written where the image descriptor `full` places them (post-extension factor "
      "f, channel blocks of cpb); `path` caps the instruction set (for tests); `zero_tail` zeroes `out` past "
      "them. Returns the bytes of the mapping.");
  m.def(
      "winograd_pack",
      [](const py::array& w, py::array out, int64_t sy, int64_t sx, int64_t c_pad, int64_t kpg,
         const npupack::BlockedLayout& full, int target,
         int int_rounding, bool fp16_nearest_away, bool saturate, double scale, const std::string& path,
         bool zero_tail) {
        if (w.ndim() != 4) throw LayoutError("winograd: w must be (K, C, R, S)");
        require_native(w, "w");
        if (target < 0 || target > 2 || int_rounding < 0 || int_rounding > 2) {
          throw LayoutError("winograd: bad target or rounding code");
        }
        npupack::WinogradSpec sp{};
        sp.k = w.shape(0), sp.c = w.shape(1), sp.r = w.shape(2), sp.s = w.shape(3);
        for (int i = 0; i < 4; ++i) sp.stride[i] = w.strides(i);
        sp.sy = sy, sp.sx = sx, sp.c_pad = c_pad, sp.kpg = kpg;
        sp.target = static_cast<npupack::WgTarget>(target);
        sp.int_rounding = static_cast<npupack::IntRounding>(int_rounding);
        sp.fp16_rounding = fp16_nearest_away ? npupack::Fp16Rounding::NearestAway : npupack::Fp16Rounding::NearestEven;
        sp.saturate = saturate;
        sp.scale = scale;
        sp.path = npupack::kernel_path(path, "winograd_pack");
        const auto type = source_type(w);
        uint8_t* dst = writable(out, "out");
        const int64_t size = out.nbytes();
        npupack::check_winograd(sp, full, size);
        const char* src = static_cast<const char*>(w.data());
        py::gil_scoped_release release;
        npupack::winograd_pack(src, type, sp, full, reinterpret_cast<char*>(dst), size);
        if (zero_tail) std::memset(dst + full.nbytes(), 0, static_cast<size_t>(size - full.nbytes()));
        return full.nbytes();
      },
      py::arg("w"), py::arg("out"), py::arg("sy"), py::arg("sx"), py::arg("c_pad"), py::arg("kpg"), py::arg("full"),
      py::arg("target"), py::arg("int_rounding"), py::arg("fp16_nearest_away"), py::arg("saturate"), py::arg("scale"),
      py::arg("path") = "auto", py::arg("zero_tail") = false,
      "Winograd weights (docs/nvdla.md §9): each cube written where the Winograd descriptor `full` places it; target 0 "
      "int8, 1 int16, 2 fp16; int_rounding 0 nearest_even, 1 nearest_away, 2 truncate; `path` caps the instruction "
      "set (for tests); `zero_tail` zeroes `out` past the meaningful bytes. Returns the meaningful bytes written.");
  m.def(
      "sparse_count",
      [](const py::array& stream, int64_t n, int es, int64_t group_elems) {
        es = element_bytes(es);
        check_stream(stream, n, es);
        if (group_elems < 1) throw LayoutError("sparse: kernel_group_elements must be >= 1");
        const uint8_t* s = contiguous(stream, "stream");
        py::array_t<int64_t> counts(group_count(n, group_elems));
        int64_t* c = counts.mutable_data();
        py::gil_scoped_release release;
        npupack::sparse_count(s, n, es, group_elems, c);
        py::gil_scoped_acquire acquire;
        return counts;
      },
      "Non-zero elements per kernel group (docs/nvdla.md §11.1)");
  m.def(
      "sparse_compress",
      [](const py::array& stream, int64_t n, int es, py::array wmb, py::array data, const std::string& path) {
        const CompressArgs a(stream, n, es, wmb, data, path, "sparse_compress");
        py::gil_scoped_release release;
        return npupack::sparse_compress(a.s, n, a.es, a.w, a.d, a.cap, a.kernel);
      },
      py::arg("stream"), py::arg("n"), py::arg("es"), py::arg("wmb"), py::arg("data"), py::arg("path") = "auto",
      "WMB bits and compacted DATA (docs/nvdla.md §11.1); returns the DATA bytes written. `path` forces a kernel "
      "(auto, avx512, avx2, ssse3, scalar) for tests");
  m.def(
      "sparse_compress_groups",
      [](const py::array& stream, int64_t n, int es, int64_t group_elems, py::array wmb, py::array data,
         const std::string& path) {
        if (group_elems < 1) throw LayoutError("sparse: kernel_group_elements must be >= 1");
        const CompressArgs a(stream, n, es, wmb, data, path, "sparse_compress_groups");
        py::array_t<int64_t> counts(group_count(n, group_elems));
        int64_t* c = counts.mutable_data();
        int64_t written;
        {
          py::gil_scoped_release release;
          written = npupack::sparse_compress_groups(a.s, n, a.es, group_elems, a.w, a.d, a.cap, c, a.kernel);
        }
        return py::make_tuple(written, counts);
      },
      py::arg("stream"), py::arg("n"), py::arg("es"), py::arg("group_elems"), py::arg("wmb"), py::arg("data"),
      py::arg("path") = "auto",
      "sparse_compress and the non-zero elements per kernel group: (DATA bytes written, counts)");
  m.def(
      "sparse_encode",
      [](const py::array& stream, int64_t n, int es, int64_t group_elems, py::array wmb, py::array data, py::array wgs,
         int64_t align) {
        if (group_elems < 1) throw LayoutError("sparse: kernel_group_elements must be >= 1");
        if (align < 1) throw LayoutError("sparse_encode: align must be >= 1");
        const CompressArgs a(stream, n, es, wmb, data, "auto", "sparse_encode");
        uint8_t* g = writable(wgs, "wgs");
        const int64_t wmb_size = wmb.nbytes(), wgs_size = wgs.nbytes();
        py::gil_scoped_release release;
        return npupack::sparse_encode(a.s, n, a.es, group_elems, a.w, wmb_size, a.d, a.cap, g, wgs_size, align);
      },
      py::arg("stream"), py::arg("n"), py::arg("es"), py::arg("group_elems"), py::arg("wmb"), py::arg("data"),
      py::arg("wgs"), py::arg("align"),
      "The padded WMB, DATA and WGS surfaces (docs/nvdla.md §11.1) in the given buffers; returns the DATA bytes "
      "written (without padding)");
  m.def(
      "sparse_encode_out",
      [](const py::array& stream, int64_t n, int es, int64_t group_elems, py::array out, int64_t align) {
        // Into a caller's buffer: the non-zeros are counted first, so that `out` is checked
        // against the padded DATA surface before anything is written, and the pass gets only
        // that surface (its SIMD stores run past the data they keep, never past its capacity).
        es = element_bytes(es);
        check_stream(stream, n, es);
        if (group_elems < 1) throw LayoutError("sparse: kernel_group_elements must be >= 1");
        if (align < 1) throw LayoutError("sparse_encode: align must be >= 1");
        const uint8_t* s = contiguous(stream, "stream");
        uint8_t* d = writable(out, "out");
        int64_t nonzero = 0;
        if (n > 0) {
          py::gil_scoped_release release;
          npupack::sparse_count(s, n, es, n, &nonzero);
        }
        const auto surface = [align](int64_t bytes) {
          return bytes <= align ? align : (bytes + align - 1) / align * align;
        };
        const int64_t need = surface(nonzero * es);
        if (static_cast<int64_t>(out.nbytes()) < need) {
          throw LayoutError("out: holds " + std::to_string(out.nbytes()) + " bytes, " + std::to_string(need) +
                            " are needed");
        }
        py::array_t<uint8_t> wmb(surface(mask_bytes(n))), wgs(surface(4 * group_count(n, group_elems)));
        uint8_t* w = wmb.mutable_data();
        uint8_t* g = wgs.mutable_data();
        const int64_t wmb_size = wmb.nbytes(), wgs_size = wgs.nbytes();
        int64_t written;
        {
          py::gil_scoped_release release;
          written = npupack::sparse_encode(s, n, es, group_elems, w, wmb_size, d, need, g, wgs_size, align);
        }
        return py::make_tuple(written, wmb, wgs);
      },
      py::arg("stream"), py::arg("n"), py::arg("es"), py::arg("group_elems"), py::arg("out"), py::arg("align"),
      "sparse_encode with DATA into the first bytes of a caller's `out` (LayoutError naming out, before anything is "
      "written, when it cannot hold the padded DATA surface) and new WMB and WGS surfaces: (DATA bytes written, wmb, "
      "wgs)");
  m.def(
      "sparse_group_popcount",
      [](const py::array& wmb, int64_t n, int64_t group_elems) {
        if (n < 0 || mask_bytes(n) > static_cast<int64_t>(wmb.nbytes())) {
          throw LayoutError("sparse: the WMB holds fewer than n bits");
        }
        if (group_elems < 1) throw LayoutError("sparse: kernel_group_elements must be >= 1");
        const uint8_t* w = contiguous(wmb, "wmb");
        py::array_t<int64_t> counts(group_count(n, group_elems));
        int64_t* c = counts.mutable_data();
        py::gil_scoped_release release;
        npupack::sparse_group_popcount(w, n, group_elems, c);
        py::gil_scoped_acquire acquire;
        return counts;
      },
      "Set WMB bits per kernel group");
  m.def(
      "sparse_decompress",
      [](const py::array& data, const py::array& wmb, int64_t n, int es, py::array out, const std::string& path) {
        const auto kernel = npupack::kernel_path(path, "sparse_decompress");
        es = element_bytes(es);
        if (n < 0 || mask_bytes(n) > static_cast<int64_t>(wmb.nbytes())) {
          throw LayoutError("decompress: the WMB holds fewer than n bits");
        }
        if (n > static_cast<int64_t>(out.nbytes()) / es) throw LayoutError("decompress: out too small");
        const uint8_t* d = contiguous(data, "data");
        const uint8_t* w = contiguous(wmb, "wmb");
        uint8_t* o = writable(out, "out");
        const int64_t size = data.nbytes();
        py::gil_scoped_release release;
        npupack::sparse_decompress(d, size, w, n, es, o, kernel);
      },
      py::arg("data"), py::arg("wmb"), py::arg("n"), py::arg("es"), py::arg("out"), py::arg("path") = "auto",
      "Expand WMB + DATA into n elements (docs/nvdla.md §11.1). `path` forces a kernel (auto, avx512, ssse3, scalar) "
      "for tests");
}
