// Checks shared by the binding files: buffers the kernels read and write, and the bytes a batch
// of strided matrices spans.
#pragma once
#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "npupack/checked.hpp"
#include "npupack/errors.hpp"
#include "numeric.hpp"

namespace npupack_bindings {

namespace py = pybind11;

inline char* writable_bytes(py::array& a, const char* name) {
  if (!a.writeable()) throw npupack::LayoutError(std::string(name) + " is read-only");
  return static_cast<char*>(a.mutable_data());
}

inline void check_buffer(const py::array& buf, const char* name) {
  require_numeric(buf, name);
  if (!(buf.flags() & py::array::c_style)) throw npupack::LayoutError(std::string(name) + " must be C-contiguous");
}

// The elements of a C-contiguous array as a pointer the kernels may read T through: its own data,
// or, for a view one byte into a buffer (a float16 or float32 array at an odd offset), an
// aligned copy kept in `copy` (a T read through a misaligned pointer is undefined).
template <class T>
const T* aligned_elements(const py::array& a, std::vector<T>& copy) {
  const void* data = a.data();
  if (a.size() == 0 || reinterpret_cast<uintptr_t>(data) % alignof(T) == 0) return static_cast<const T*>(data);
  copy.resize(static_cast<size_t>(a.size()));
  std::memcpy(copy.data(), data, copy.size() * sizeof(T));
  return copy.data();
}

// Bytes a batch of `count` strided matrices spans: (count - 1) * step + (major - 1) * stride +
// minor_bytes, with every term checked for overflow.
inline int64_t batch_extent(int64_t count, int64_t step, int64_t major, int64_t stride, int64_t minor_bytes, const char* fn) {
  const int64_t last = npupack::checked_add(npupack::checked_mul(count - 1, step, fn),
                                            npupack::checked_mul(major - 1, stride, fn), fn);
  return npupack::checked_add(last, minor_bytes, fn);
}

}  // namespace npupack_bindings
