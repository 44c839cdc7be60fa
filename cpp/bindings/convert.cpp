// Bindings of the element conversions: fp16 rounding and scans, quantisation, the Kneron
// high/low split and 10-bit pixel words.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "npupack/convert.hpp"
#include "npupack/cpu.hpp"
#include "npupack/errors.hpp"
#include "npupack/highlow.hpp"
#include "npupack/pixel.hpp"
#include "buffers.hpp"

namespace py = pybind11;
using npupack::LayoutError;

namespace {

template <class F>
void fp16_convert(const py::array_t<F, 0>& x, py::array_t<uint16_t, 0>& out, bool nearest_away, bool saturate) {
  if (!(x.flags() & py::array::c_style) || !(out.flags() & py::array::c_style) || x.size() != out.size()) {
    throw LayoutError("to_fp16: x and out must be C-contiguous with the same size");
  }
  std::vector<F> copy;
  const F* src = npupack_bindings::aligned_elements(x, copy);
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
  std::vector<float> copy;
  const float* src = npupack_bindings::aligned_elements(w, copy);
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
  std::vector<uint16_t> copy;
  const uint16_t* p = npupack_bindings::aligned_elements(bits, copy);
  const int64_t n = bits.size();
  py::gil_scoped_release release;
  return scan(p, n, kernel);
}

}  // namespace

void bind_convert(py::module_& m) {
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
      [](py::array_t<uint8_t, 0>& buf) {
        if (!(buf.flags() & py::array::c_style) || !buf.writeable() || buf.size() % 32) {
          throw LayoutError("highlow_split: need a writable C-contiguous uint8[32*n]");
        }
        uint8_t* p = buf.mutable_data();
        const int64_t n = buf.size() / 32;
        py::gil_scoped_release release;
        npupack::highlow_split(p, n);
      },
      "Kneron high/low split of 16-scalar entries (little-endian int16), in place (docs/kneron.md §7.4)");
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
        std::vector<uint16_t> copy;
        const uint16_t* src = npupack_bindings::aligned_elements(comps, copy);
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
  m.def("quantize_int8",
        [](const py::array_t<float, 0>& w, py::array_t<int8_t, 0>& q, py::array_t<float, 0>& s) {
          quantize<int8_t>(w, q, s, npupack::quantize_int8);
        });
  m.def("quantize_int16",
        [](const py::array_t<float, 0>& w, py::array_t<int16_t, 0>& q, py::array_t<float, 0>& s) {
          quantize<int16_t>(w, q, s, npupack::quantize_int16);
        });
}
